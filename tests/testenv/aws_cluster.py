"""Lays out the test clusters' side of AWS in moto. As the OpenShift
installer leaves it: a VPC whose subnets (two zones, private) are tagged
kubernetes.io/cluster/<id> (the tests' fixed cluster ID). As EKS leaves
it: another VPC with the kwok node's EC2 instance, whose providerID then
names it (a cluster ID discovered from kube-system's UID finds it so).
A database tagged with each of the tests' cluster IDs (the fixed one,
and the one derived from kube-system's UID) stands for the ones a real
cluster keeps: tests of one cluster ID run side by side, each with its
own operator process, and without it one test deleting its last database
would remove the network another is creating in (the network tests use
cluster IDs of their own to show that removal). Prints "<zone> <instance id>".

Usage: aws_cluster.py <endpoint> <region> <cluster id> [<keeper cluster id> ...]
"""

import sys

import boto3

endpoint, region, cluster = sys.argv[1:4]
keepers = [cluster] + sys.argv[4:]
ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=region,
                   aws_access_key_id="testing", aws_secret_access_key="testing")
zones = sorted(z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"])[:2]


def vpc(block, name, subnet_tags):
    vpc_id = ec2.create_vpc(CidrBlock=f"{block}.0.0/16", TagSpecifications=[
        {"ResourceType": "vpc", "Tags": [{"Key": "Name", "Value": name}]}])["Vpc"]["VpcId"]
    tags = [{"Key": k, "Value": v} for k, v in subnet_tags.items()]
    subnets = [ec2.create_subnet(VpcId=vpc_id, CidrBlock=f"{block}.{16 * i}.0/20", AvailabilityZone=zone,
                                 TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}])["Subnet"]["SubnetId"]
               for i, zone in enumerate(zones)]
    return subnets


vpc("10.100", "cro-testenv-openshift", {f"kubernetes.io/cluster/{cluster}": "owned",
                                        "kubernetes.io/role/internal-elb": "1"})
eks = vpc("10.101", "cro-testenv-eks", {"kubernetes.io/cluster/cro-testenv-eks": "shared",
                                        "kubernetes.io/role/internal-elb": "1"})
instance = ec2.run_instances(ImageId="ami-03cf127a", InstanceType="t3.medium", MinCount=1, MaxCount=1,
                             SubnetId=eks[0])["Instances"][0]["InstanceId"]
rds = boto3.client("rds", endpoint_url=endpoint, region_name=region,
                   aws_access_key_id="testing", aws_secret_access_key="testing")
for i, keeper in enumerate(keepers):
    rds.create_db_instance(DBInstanceIdentifier=f"cro-testenv-keeper-{i}", DBInstanceClass="db.t3.micro",
                           Engine="postgres", MasterUsername="keeper", MasterUserPassword="keeper-password",
                           AllocatedStorage=20, Tags=[{"Key": "integreatly.org/clusterID", "Value": keeper}])
print(zones[0], instance)
