//! The VPC the cluster's pods run in: given (`--aws-vpc-id`), else the one
//! of the subnets tagged `kubernetes.io/cluster/<cluster ID>` owned or
//! shared (OpenShift's installer and EKS tag them; the Go operator's
//! `getVPCIDByClusterSubnets`), else the one of the nodes' EC2 instances.

use cro_provider_api::ProviderError;

use super::{Cidr, Network, ec2::filter};
use crate::errors::Answer;

pub struct ClusterVpc {
    pub id: String,
    /// Its associated IPv4 blocks, the primary first.
    pub blocks: Vec<Cidr>,
}

/// The cluster's VPC, or an error naming what to set.
pub async fn find(net: &Network<'_>) -> Result<ClusterVpc, ProviderError> {
    find_quietly(net).await?.ok_or_else(|| {
        ProviderError::permanent(format!(
            "cannot find the cluster's VPC, where databases must be placed for its pods to reach them: no subnet is tagged kubernetes.io/cluster/{} (owned or shared) and no node has an AWS providerID (aws:///<zone>/<instance>); start the operator with --aws-vpc-id (AWS_VPC_ID) set to the cluster's VPC, or name DBSubnetGroupName and VpcSecurityGroupIds (Redis: CacheSubnetGroupName and SecurityGroupIds) in the tier's createStrategy (the way for a tier with roleArn: its account does not hold the cluster's VPC)",
            net.infra
        ))
    })
}

/// The cluster's VPC, if anything says which it is.
pub async fn find_quietly(net: &Network<'_>) -> Result<Option<ClusterVpc>, ProviderError> {
    if let Some(id) = &net.hint.vpc_id {
        return match vpc(net, id).await? {
            Some(v) => Ok(Some(v)),
            None => Err(ProviderError::permanent(format!(
                "--aws-vpc-id {id}: no such VPC in this account and region; give the VPC the cluster's nodes run in"
            ))),
        };
    }
    let tag = format!("tag:kubernetes.io/cluster/{}", net.infra);
    let subnets = net
        .ec2
        .describe_subnets()
        .filters(filter(&tag, &["owned", "shared"]))
        .send()
        .await
        .named("ec2:DescribeSubnets", &tag)?;
    let mut ids: Vec<&str> = subnets
        .subnets()
        .iter()
        .filter_map(|s| s.vpc_id())
        .collect();
    ids.sort_unstable();
    if let Some(id) = ids.first() {
        return vpc(net, id).await;
    }
    if net.hint.node_instances.is_empty() {
        return Ok(None);
    }
    let instances = net
        .ec2
        .describe_instances()
        .set_instance_ids(Some(net.hint.node_instances.clone()))
        .send()
        .await
        .unless_missing(
            // A node's instance gone (or not EC2's): not this cluster's VPC.
            |e| {
                aws_sdk_ec2::error::ProvideErrorMetadata::code(e)
                    .is_some_and(|c| c.starts_with("InvalidInstanceID"))
            },
            "ec2:DescribeInstances",
            "the nodes' EC2 instances",
        )?;
    let id = instances
        .iter()
        .flat_map(|o| o.reservations())
        .flat_map(|r| r.instances())
        .find_map(|i| i.vpc_id().map(str::to_string));
    match id {
        Some(id) => vpc(net, &id).await,
        None => Ok(None),
    }
}

async fn vpc(net: &Network<'_>, id: &str) -> Result<Option<ClusterVpc>, ProviderError> {
    let out = net
        .ec2
        .describe_vpcs()
        .vpc_ids(id)
        .send()
        .await
        .unless_code("InvalidVpcID.NotFound", "ec2:DescribeVpcs", id)?;
    let Some(v) = out.as_ref().and_then(|o| o.vpcs().first()) else {
        return Ok(None);
    };
    let mut blocks: Vec<Cidr> = v
        .cidr_block()
        .and_then(|c| c.parse().ok())
        .into_iter()
        .collect();
    for a in v.cidr_block_association_set() {
        let associated = a
            .cidr_block_state()
            .and_then(|s| s.state())
            .is_some_and(|s| s.as_str() == "associated");
        if let Some(c) = a.cidr_block().and_then(|c| c.parse().ok())
            && associated
            && !blocks.contains(&c)
        {
            blocks.push(c);
        }
    }
    Ok(Some(ClusterVpc {
        id: id.to_string(),
        blocks,
    }))
}
