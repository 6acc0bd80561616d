//! Where AWS databases go when a tier names no network: the cluster's
//! network, laid out as the Go operator lays it out, on the emulator. The
//! cluster VPCs are laid out here as the OpenShift installer leaves them
//! (subnets tagged `kubernetes.io/cluster/<id>` across zones, private route
//! tables); testenv lays out an EKS-style one holding the kwok node's
//! instance.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, ResourceType, Tag, TagSpecification};
use cloud_resource_operator::api::{Phase, Postgres, Redis};
use cro_provider_api::shorten;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{
    lost_answers::Proxy,
    support::{
        DEFAULT_TIMEOUT, Launch, Operator, TestEnv, apply_config_map, aws_requests,
        aws_requests_after, create_json, create_namespace, ensure_crds, failed_events,
        wait_deleted, wait_phase,
    },
};

async fn ec2() -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&TestEnv::load().aws_config().await)
}

async fn elasticache() -> aws_sdk_elasticache::Client {
    aws_sdk_elasticache::Client::new(&TestEnv::load().aws_config().await)
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

fn tagged(kind: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
        .build()
}

/// A cluster ID no other test uses.
fn cluster_id(prefix: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:05}", n % 100_000)
}

/// The first two zones by name.
async fn zones(ec2: &aws_sdk_ec2::Client) -> Vec<String> {
    let out = ec2.describe_availability_zones().send().await;
    let out = out.unwrap_or_else(|e| panic!("{e:?}"));
    let mut zones: Vec<String> = out
        .availability_zones()
        .iter()
        .filter_map(|z| z.zone_name().map(str::to_string))
        .collect();
    zones.sort();
    zones.truncate(2);
    zones
}

/// The cluster's VPC as the OpenShift installer leaves it: `block`.0.0/16,
/// a private subnet per zone tagged `kubernetes.io/cluster/<id>=owned`,
/// each with its own route table (and the VPC's main one). Its id.
async fn openshift_vpc(ec2: &aws_sdk_ec2::Client, id: &str, block: &str) -> String {
    let vpc = ec2
        .create_vpc()
        .cidr_block(format!("{block}.0.0/16"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .unwrap_or_default()
        .to_string();
    let cluster_tag = format!("kubernetes.io/cluster/{id}");
    for (i, zone) in zones(ec2).await.iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("{block}.{}.0/20", 16 * i))
            .availability_zone(zone)
            .tag_specifications(tagged(
                ResourceType::Subnet,
                &[
                    (&cluster_tag, "owned"),
                    ("kubernetes.io/role/internal-elb", "1"),
                ],
            ))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let subnet = subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .unwrap_or_default();
        let table = ec2.create_route_table().vpc_id(&vpc).send().await;
        let table = table.unwrap_or_else(|e| panic!("{e:?}"));
        let table = table
            .route_table()
            .and_then(|t| t.route_table_id())
            .unwrap_or_default();
        ec2.associate_route_table()
            .route_table_id(table)
            .subnet_id(subnet)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    vpc
}

/// The VPC tagged with the cluster ID (the database network), if any.
async fn standalone_vpc(ec2: &aws_sdk_ec2::Client, id: &str) -> Option<(String, String)> {
    let out = ec2
        .describe_vpcs()
        .filters(filter("tag:integreatly.org/clusterID", id))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let vpcs = out.vpcs();
    assert!(vpcs.len() <= 1, "more than one database network: {vpcs:?}");
    vpcs.first().map(|v| {
        (
            v.vpc_id().unwrap_or_default().to_string(),
            v.cidr_block().unwrap_or_default().to_string(),
        )
    })
}

/// Route table id → (destination → peering) of every table of `vpc`.
async fn routes(
    ec2: &aws_sdk_ec2::Client,
    vpc: &str,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let out = ec2
        .describe_route_tables()
        .filters(filter("vpc-id", vpc))
        .send()
        .await;
    let out = out.unwrap_or_else(|e| panic!("{e:?}"));
    out.route_tables()
        .iter()
        .map(|t| {
            let routes = t
                .routes()
                .iter()
                .filter_map(|r| {
                    Some((
                        r.destination_cidr_block()?.to_string(),
                        r.vpc_peering_connection_id()?.to_string(),
                    ))
                })
                .collect();
            (t.route_table_id().unwrap_or_default().to_string(), routes)
        })
        .collect()
}

/// The active peering from `requester` to `accepter`, if any.
async fn peering(ec2: &aws_sdk_ec2::Client, requester: &str, accepter: &str) -> Option<String> {
    let out = ec2
        .describe_vpc_peering_connections()
        .filters(filter("requester-vpc-info.vpc-id", requester))
        .filters(filter("accepter-vpc-info.vpc-id", accepter))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    // moto ignores these filters; AWS applies them.
    out.vpc_peering_connections()
        .iter()
        .filter(|p| p.requester_vpc_info().and_then(|i| i.vpc_id()) == Some(requester))
        .filter(|p| p.accepter_vpc_info().and_then(|i| i.vpc_id()) == Some(accepter))
        .find(|p| p.status().and_then(|s| s.code()).map(|c| c.as_str()) == Some("active"))
        .and_then(|p| p.vpc_peering_connection_id().map(str::to_string))
}

async fn security_group(
    ec2: &aws_sdk_ec2::Client,
    name: &str,
    vpc: &str,
) -> Option<(String, Vec<IpPermission>)> {
    let out = ec2
        .describe_security_groups()
        .filters(filter("group-name", name))
        .filters(filter("vpc-id", vpc))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    out.security_groups().first().map(|g| {
        (
            g.group_id().unwrap_or_default().to_string(),
            g.ip_permissions().to_vec(),
        )
    })
}

/// (protocol, from port, to port, CIDR) of every ingress rule.
fn ingress(rules: &[IpPermission]) -> Vec<(String, i32, i32, String)> {
    let mut all: Vec<_> = rules
        .iter()
        .flat_map(|r| {
            r.ip_ranges().iter().map(|range| {
                (
                    r.ip_protocol().unwrap_or_default().to_string(),
                    r.from_port().unwrap_or(-1),
                    r.to_port().unwrap_or(-1),
                    range.cidr_ip().unwrap_or_default().to_string(),
                )
            })
        })
        .collect();
    all.sort();
    all
}

/// The instance identifier of a Postgres, and its instance's subnet group
/// and security groups.
async fn placement_of(pg: &Postgres) -> (String, String, Vec<String>) {
    let identifier = pg
        .annotations()
        .get("resourceIdentifier")
        .cloned()
        .unwrap_or_default();
    let rds = crate::aws::rds().await;
    let instance = crate::aws::instance(&rds, &identifier)
        .await
        .unwrap_or_else(|| panic!("no instance {identifier}"));
    let group = instance
        .db_subnet_group()
        .and_then(|g| g.db_subnet_group_name());
    let behind = instance
        .vpc_security_groups()
        .iter()
        .filter_map(|g| g.vpc_security_group_id().map(str::to_string))
        .collect();
    (identifier, group.unwrap_or_default().to_string(), behind)
}

fn cr(kind: &str, name: &str, tier: &str) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"type": "managed", "tier": tier, "secretRef": {"name": format!("{name}-sec")}}})
}

async fn strategies(client: &Client, ns: &str, network: Value) {
    let tiers = json!({"development": {}}).to_string();
    apply_config_map(
        client,
        ns,
        "cloud-resources-aws-strategies",
        json!({"postgres": tiers, "redis": tiers, "_network": network.to_string()}),
    )
    .await;
}

/// The mutating EC2, RDS and ElastiCache calls made since request `from`
/// whose parameters mention any of `ours`, as `action`.
fn changes_since(from: usize, ours: &[String]) -> Vec<String> {
    let mutating = [
        "Create",
        "Delete",
        "Modify",
        "Authorize",
        "Revoke",
        "Accept",
        "Replace",
    ];
    aws_requests()
        .into_iter()
        .skip(from)
        .filter(|r| {
            ["ec2", "rds", "elasticache"].contains(&r["service"].as_str().unwrap_or_default())
        })
        .filter(|r| {
            let action = r["action"].as_str().unwrap_or_default();
            mutating.iter().any(|m| action.starts_with(m))
        })
        .filter(|r| {
            let params = r["params"].to_string();
            ours.iter().any(|o| params.contains(o.as_str()))
        })
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn launch(ns: &str, id: &str, log: &str) -> Launch {
    Launch {
        cluster_id: Some(id.to_string()),
        log_name: format!("operator-{ns}-{log}.log"),
        ..Launch::new(ns)
    }
}

/// A test's cluster: its own cluster ID, a cluster VPC of `block`.0.0/16
/// laid out as the OpenShift installer does, and a namespace, as
/// `(client, ec2, cluster ID, cluster VPC, namespace)`.
async fn cluster(
    prefix: &str,
    block: &str,
) -> (Client, aws_sdk_ec2::Client, String, String, String) {
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ec2 = ec2().await;
    let id = cluster_id(prefix);
    let vpc = openshift_vpc(&ec2, &id, block).await;
    let ns = create_namespace(&client, "network").await;
    (client, ec2, id, vpc, ns)
}

#[tokio::test]
async fn standalone_network_from_the_first_database_to_the_last() {
    crate::support::bounded("standalone_network_from_the_first_database_to_the_last", async move {
    let (client, ec2, id, cluster, ns) = cluster("netsa", "10.150").await;
    strategies(
        &client,
        &ns,
        json!({"development": {"region": "", "createStrategy": {"CidrBlock": "10.201.0.0/26"}, "deleteStrategy": {}}}),
    )
    .await;
    let operator = Operator::launch(launch(&ns, &id, "a")).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
    let caches = Api::<Redis>::namespaced(client.clone(), &ns);
    // AWS refuses the VPC at first: cro_vpc_action says so with its code
    // until a VPC is created (the Go operator's SetVpcAction).
    let refused = ("ServiceUnavailable", 503, "injected by the test");
    let fault = |times| {
        crate::support::inject_aws_fault(
            "netsa-vpc",
            "ec2",
            "CreateVpc",
            "10.201.0.0/26",
            refused,
            times,
        )
    };
    fault(None);
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", "development")).await;
    let _: Redis = create_json(&client, &ns, cr("Redis", "cache", "development")).await;
    let failed_vpc =
        "cro_vpc_action{action=\"create\",status=\"failed\",error=\"ServiceUnavailable\"} 1";
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while !operator
        .http_get("/metrics")
        .await
        .lines()
        .any(|l| l == failed_vpc)
    {
        assert!(tokio::time::Instant::now() < deadline, "no {failed_vpc}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    fault(Some(0));
    let pg = wait_phase(&pgs, "db", Phase::Complete).await;
    let metrics = operator.http_get("/metrics").await;
    assert!(
        !metrics.lines().any(|l| l.starts_with("cro_vpc_action{")),
        "cro_vpc_action not cleared:\n{metrics}"
    );
    wait_phase(&caches, "cache", Phase::Complete).await;

    // One database network of the _network block, two subnets in two zones.
    let (vpc, block) = standalone_vpc(&ec2, &id)
        .await
        .unwrap_or_else(|| panic!("no database network"));
    assert_eq!(block, "10.201.0.0/26");
    let subnets = ec2
        .describe_subnets()
        .filters(filter("vpc-id", &vpc))
        .send()
        .await;
    let subnets = subnets.unwrap_or_else(|e| panic!("{e:?}"));
    let mut layout: Vec<(String, String)> = subnets
        .subnets()
        .iter()
        .map(|s| {
            (
                s.cidr_block().unwrap_or_default().into(),
                s.availability_zone().unwrap_or_default().into(),
            )
        })
        .collect();
    layout.sort();
    assert_eq!(
        layout.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        ["10.201.0.0/27", "10.201.0.32/27"]
    );
    assert_ne!(layout[0].1, layout[1].1, "both subnets in one zone");

    // The instance and the group are in its subnet groups, behind its
    // security group, which admits only the cluster's block on each port.
    let subnet_group = shorten(&format!("{id}-subnet-group"), 40);
    let (group, rules) = security_group(&ec2, &shorten(&format!("{id}-security-group"), 40), &vpc)
        .await
        .unwrap_or_else(|| panic!("no security group in the database network"));
    assert_eq!(
        ingress(&rules),
        [
            ("tcp".to_string(), 5432, 5432, "10.150.0.0/16".to_string()),
            ("tcp".to_string(), 6379, 6379, "10.150.0.0/16".to_string())
        ]
    );
    let rds = crate::aws::rds().await;
    let (_, in_group, behind) = placement_of(&pg).await;
    assert_eq!(
        (in_group, behind),
        (subnet_group.clone(), vec![group.clone()])
    );
    let create_group = aws_requests()
        .into_iter()
        .find(|r| {
            r["action"] == "CreateReplicationGroup"
                && r["params"].to_string().contains(&id.replace('-', ""))
        })
        .unwrap_or_else(|| panic!("no CreateReplicationGroup for {id}"));
    assert_eq!(
        create_group["params"]["CacheSubnetGroupName"][0],
        json!(subnet_group)
    );
    assert!(
        create_group["params"].to_string().contains(&group),
        "{create_group}"
    );
    // As a person reading AWS sees it: every member node of the group in
    // the subnet group, behind the security group (AWS shows where a
    // replication group runs only on its nodes).
    let cache_id = caches
        .get("cache")
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .annotations()
        .get("resourceIdentifier")
        .cloned()
        .unwrap_or_default();
    let ec = elasticache().await;
    let members = ec
        .describe_replication_groups()
        .replication_group_id(&cache_id)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let members: Vec<String> = members
        .replication_groups()
        .iter()
        .flat_map(|g| g.member_clusters().to_vec())
        .collect();
    assert!(!members.is_empty(), "{cache_id} has no member nodes");
    for member in &members {
        let nodes = ec
            .describe_cache_clusters()
            .cache_cluster_id(member)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let node = &nodes.cache_clusters()[0];
        let behind: Vec<&str> = node
            .security_groups()
            .iter()
            .filter_map(|g| g.security_group_id())
            .collect();
        assert_eq!(
            (node.cache_subnet_group_name(), behind),
            (Some(subnet_group.as_str()), vec![group.as_str()]),
            "node {member} of {cache_id}"
        );
    }
    let cache_group = elasticache()
        .await
        .describe_cache_subnet_groups()
        .cache_subnet_group_name(&subnet_group)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(cache_group.cache_subnet_groups()[0].subnets().len(), 2);

    // Peered, with routes both ways in every table.
    let pcx = peering(&ec2, &vpc, &cluster)
        .await
        .unwrap_or_else(|| panic!("no active peering"));
    for (table, routes) in routes(&ec2, &cluster).await {
        assert_eq!(
            routes.get("10.201.0.0/26"),
            Some(&pcx),
            "cluster route table {table}"
        );
    }
    for (table, routes) in routes(&ec2, &vpc).await {
        assert_eq!(
            routes.get("10.150.0.0/16"),
            Some(&pcx),
            "network route table {table}"
        );
    }

    // A second start changes nothing.
    operator.stop().await;
    let mut ours = vec![
        id.clone(),
        vpc.clone(),
        cluster.clone(),
        group.clone(),
        pcx.clone(),
        subnet_group.clone(),
    ];
    ours.extend(routes(&ec2, &cluster).await.into_keys());
    let subnet_ids = subnets.subnets().iter().filter_map(|s| s.subnet_id());
    ours.extend(subnet_ids.map(str::to_string));
    let from = aws_requests().len();
    let operator = Operator::launch(launch(&ns, &id, "b")).await;
    operator.wait_log("reconciled", DEFAULT_TIMEOUT).await;
    crate::aws::poke(&pgs, "db", 1).await;
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while operator.reconciles_of("db") < 2 && operator.reconciles_of("cache") < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the restarted operator did not reconcile"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(changes_since(from, &ours), Vec::<String>::new());

    // The network stays while a database is left, and goes with the last.
    pgs.delete("db", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
    assert!(
        standalone_vpc(&ec2, &id).await.is_some(),
        "the network went while Redis was left"
    );
    let from = aws_requests().len();
    caches
        .delete("cache", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&caches, "cache", DEFAULT_TIMEOUT).await;
    assert_eq!(standalone_vpc(&ec2, &id).await, None);
    assert_eq!(peering(&ec2, &vpc, &cluster).await, None);
    for (table, routes) in routes(&ec2, &cluster).await {
        assert_eq!(
            routes.get("10.201.0.0/26"),
            None,
            "cluster route table {table}"
        );
    }
    let gone = rds
        .describe_db_subnet_groups()
        .db_subnet_group_name(&subnet_group)
        .send()
        .await;
    assert!(gone.is_err(), "the DB subnet group is left");
    let removed = changes_since(from, &ours);
    let order = [
        "DeleteSecurityGroup",
        "DeleteRoute",
        "DeleteSubnet",
        "DeleteDBSubnetGroup",
        "DeleteCacheSubnetGroup",
        "DeleteVpcPeeringConnection",
        "DeleteVpc",
    ];
    let firsts: Vec<Option<usize>> = order
        .iter()
        .map(|a| removed.iter().position(|r| r == a))
        .collect();
    assert!(firsts.iter().all(Option::is_some), "{removed:?}");
    assert!(
        firsts.windows(2).all(|w| w[0] < w[1]),
        "removal order: {removed:?}"
    );

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &Default::default()).await;
    operator.stop().await;
}).await;
}

/// What the Go operator's standalone network code leaves behind
/// (pkg/providers/aws/cluster_network_provider.go), built call by call as
/// it makes them, for cluster `id` with cluster VPC `cluster`
/// (`cluster_block`): the ids of everything made, and the security group.
async fn go_standalone_network(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
    cluster: &str,
    cluster_block: &str,
    block: &str,
) -> (Vec<String>, String) {
    let network_tags = |name: Option<&'static str>| {
        let mut t = vec![
            ("integreatly.org/clusterID", id),
            ("red-hat-managed", "true"),
        ];
        t.extend(name.map(|n| ("Name", n)));
        t
    };
    let mut made = Vec::new();
    // CreateNetwork: the VPC, tagged at creation.
    let vpc = ec2
        .create_vpc()
        .cidr_block(block)
        .tag_specifications(tagged(
            ResourceType::Vpc,
            &network_tags(Some("Cloud Resource VPC")),
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .unwrap_or_default()
        .to_string();
    made.push(vpc.clone());
    // reconcileStandaloneRouteTableTags: its route tables tagged.
    for table in routes(ec2, &vpc).await.into_keys() {
        ec2.create_tags()
            .resources(&table)
            .set_tags(Some(
                network_tags(Some("Cloud Resource Route Table"))
                    .iter()
                    .map(|(k, v)| tag(k, v))
                    .collect(),
            ))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        made.push(table);
    }
    // reconcileStandaloneVPCSubnets: the two halves in the first two zones,
    // then tagPrivateSubnet with getDefaultSubnetTags (cluster_vpc.go).
    let halves = match block {
        "10.210.0.0/26" => ["10.210.0.0/27", "10.210.0.32/27"],
        other => panic!("no halves for {other}"),
    };
    let mut subnets = Vec::new();
    for (half, zone) in halves.iter().zip(zones(ec2).await) {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(*half)
            .availability_zone(zone)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let subnet = subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .unwrap_or_default()
            .to_string();
        let mut tags = vec![("kubernetes.io/role/internal-elb", "1")];
        tags.extend(network_tags(Some("Cloud Resource Subnet")));
        ec2.create_tags()
            .resources(&subnet)
            .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        subnets.push(subnet);
    }
    made.extend(subnets.clone());
    // reconcileRDSVpcConfiguration / reconcileElasticacheVPCConfiguration:
    // BuildInfraName(.., "subnet-group", 40), defaultSubnetGroupDesc, every
    // subnet of the VPC, defaultNetworkTags.
    let group_name = shorten(&format!("{id}-subnet-group"), 40);
    let description = "Subnet group created and managed by the Cloud Resource Operator";
    let rds = crate::aws::rds().await;
    rds.create_db_subnet_group()
        .db_subnet_group_name(&group_name)
        .db_subnet_group_description(description)
        .set_subnet_ids(Some(subnets.clone()))
        .set_tags(Some(
            network_tags(None)
                .iter()
                .map(|(k, v)| aws_sdk_rds::types::Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    elasticache()
        .await
        .create_cache_subnet_group()
        .cache_subnet_group_name(&group_name)
        .cache_subnet_group_description(description)
        .set_subnet_ids(Some(subnets))
        .set_tags(Some(
            network_tags(None)
                .iter()
                .map(|(k, v)| {
                    aws_sdk_elasticache::types::Tag::builder()
                        .key(*k)
                        .value(*v)
                        .build()
                })
                .collect(),
        ))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    made.push(group_name);
    // reconcileStandaloneSecurityGroup: every protocol from the cluster's
    // block.
    let group = ec2
        .create_security_group()
        .group_name(shorten(&format!("{id}-security-group"), 40))
        .description("rhmi cro security group for cro standalone vpc")
        .vpc_id(&vpc)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let group = group.group_id().unwrap_or_default().to_string();
    ec2.authorize_security_group_ingress()
        .group_id(&group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("-1")
                .ip_ranges(IpRange::builder().cidr_ip(cluster_block).build())
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    made.push(group.clone());
    // CreateNetworkPeering: requester the standalone VPC, accepted with
    // the same credentials.
    let pcx = ec2
        .create_vpc_peering_connection()
        .vpc_id(&vpc)
        .peer_vpc_id(cluster)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let pcx = pcx
        .vpc_peering_connection()
        .and_then(|p| p.vpc_peering_connection_id())
        .unwrap_or_default()
        .to_string();
    ec2.accept_vpc_peering_connection()
        .vpc_peering_connection_id(&pcx)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    made.push(pcx.clone());
    // CreateNetworkConnection: routes in every cluster route table and in
    // the standalone ones.
    for (vpc_id, dest) in [(cluster, block), (vpc.as_str(), cluster_block)] {
        for table in routes(ec2, vpc_id).await.into_keys() {
            ec2.create_route()
                .route_table_id(&table)
                .destination_cidr_block(dest)
                .vpc_peering_connection_id(&pcx)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            made.push(table);
        }
    }
    (made, group)
}

#[tokio::test]
async fn the_go_operators_network_is_adopted_and_a_new_database_joins_it() {
    crate::support::bounded(
        "the_go_operators_network_is_adopted_and_a_new_database_joins_it",
        async move {
            let (client, ec2, id, cluster, ns) = cluster("netgo", "10.160").await;
            let (made, group) =
                go_standalone_network(&ec2, &id, &cluster, "10.160.0.0/16", "10.210.0.0/26").await;
            // The Go operator's default ConfigMap: `_network` tiers with no CIDR
            // (BuildDefaultConfigMap); the VPC it made says which.
            strategies(
                &client,
                &ns,
                json!({"development": {"region": "", "createStrategy": {}, "deleteStrategy": {}}}),
            )
            .await;
            let from = aws_requests().len();
            let operator = Operator::launch(launch(&ns, &id, "a")).await;
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            let _: Postgres =
                create_json(&client, &ns, cr("Postgres", "joins", "development")).await;
            let pg = wait_phase(&pgs, "joins", Phase::Complete).await;

            let mut ours = made.clone();
            ours.push(id.clone());
            ours.push(cluster.clone());
            let changes: Vec<String> = changes_since(from, &ours)
                .into_iter()
                .filter(|a| a != "CreateDBInstance")
                .collect();
            assert_eq!(
                changes,
                Vec::<String>::new(),
                "the Go operator's network was changed"
            );
            let (_, in_group, behind) = placement_of(&pg).await;
            let go_group = shorten(&format!("{id}-subnet-group"), 40);
            assert_eq!((in_group, behind), (go_group, vec![group.clone()]));
            assert_eq!(
                standalone_vpc(&ec2, &id).await.map(|v| v.1).as_deref(),
                Some("10.210.0.0/26"),
                "a second network was made"
            );

            pgs.delete("joins", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs, "joins", DEFAULT_TIMEOUT).await;
            assert_eq!(
                standalone_vpc(&ec2, &id).await,
                None,
                "the network outlived its last database"
            );
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
            operator.stop().await;
        },
    )
    .await;
}

#[tokio::test]
async fn the_cluster_vpc_comes_from_the_nodes_or_the_flag_and_a_tier_may_place_its_own() {
    crate::support::bounded("the_cluster_vpc_comes_from_the_nodes_or_the_flag_and_a_tier_may_place_its_own", async move {
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ec2 = ec2().await;
    // EKS: no subnet carries this cluster ID; the kwok node's instance
    // (testenv's EKS-style VPC) says where the cluster runs.
    let eks = ec2
        .describe_vpcs()
        .filters(filter("tag:Name", "cro-testenv-eks"))
        .send()
        .await;
    let eks = eks.unwrap_or_else(|e| panic!("{e:?}"));
    let eks = eks
        .vpcs()
        .first()
        .and_then(|v| v.vpc_id())
        .unwrap_or_default()
        .to_string();
    let id = cluster_id("neteks");
    // The nodes' VPC is shared by every run on this test environment: a
    // block of this run's own, so a run that failed midway is no conflict.
    let n: u32 = id
        .rsplit('-')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let block = format!("10.203.{}.0/26", n % 256);
    let ns = create_namespace(&client, "network").await;
    // A tier that names its own subnet group keeps it.
    let own_group = format!("team-owned-{id}");
    let eks_subnets = ec2
        .describe_subnets()
        .filters(filter("vpc-id", &eks))
        .send()
        .await;
    let eks_subnets: Vec<String> = eks_subnets
        .unwrap_or_else(|e| panic!("{e:?}"))
        .subnets()
        .iter()
        .filter_map(|s| s.subnet_id().map(str::to_string))
        .collect();
    let rds = crate::aws::rds().await;
    rds.create_db_subnet_group()
        .db_subnet_group_name(&own_group)
        .db_subnet_group_description("the team's own")
        .set_subnet_ids(Some(eks_subnets))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let tiers =
        json!({"development": {}, "custom": {"createStrategy": {"DBSubnetGroupName": own_group}}});
    apply_config_map(
        &client,
        &ns,
        "cloud-resources-aws-strategies",
        json!({"postgres": tiers.to_string(), "redis": json!({"development": {}}).to_string(),
               "_network": json!({"development": {"createStrategy": {"CidrBlock": block}},
                                  "custom": {"createStrategy": {"CidrBlock": block}}}).to_string()}),
    )
    .await;
    let operator = Operator::launch(launch(&ns, &id, "a")).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "placed", "development")).await;
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "own", "custom")).await;
    wait_phase(&pgs, "placed", Phase::Complete).await;
    let own = wait_phase(&pgs, "own", Phase::Complete).await;
    // The new peering connection was `initiating-request` when made: AWS's
    // pace, waited for, not a failed reconcile to warn a person of.
    let warnings = crate::support::warnings_about(&client, &ns, None).await;
    assert!(warnings.is_empty(), "{warnings:#?}");
    let (vpc, _) = standalone_vpc(&ec2, &id)
        .await
        .unwrap_or_else(|| panic!("no database network"));
    assert!(
        peering(&ec2, &vpc, &eks).await.is_some(),
        "not peered with the nodes' VPC {eks}"
    );
    let (identifier, in_group, _) = placement_of(&own).await;
    assert_eq!(in_group, own_group);
    let create = aws_requests()
        .into_iter()
        .find(|r| {
            r["action"] == "CreateDBInstance" && r["params"].to_string().contains(&identifier)
        })
        .unwrap_or_else(|| panic!("no CreateDBInstance for {identifier}"));
    assert!(
        !create["params"].to_string().contains("VpcSecurityGroupIds"),
        "the operator added a security group to a tier that places its own instances: {create}"
    );
    for name in ["placed", "own"] {
        pgs.delete(name, &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, name, DEFAULT_TIMEOUT).await;
    }
    assert_eq!(standalone_vpc(&ec2, &id).await, None);
    operator.stop().await;

    // A VPC given that does not exist: failed, naming the flag.
    let operator = Operator::launch(Launch {
        extra_args: {
            let mut a = launch(&ns, &id, "b").extra_args;
            a.push("--aws-vpc-id=vpc-0000000000deadbee".into());
            a
        },
        ..launch(&ns, &id, "b")
    })
    .await;
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "nowhere", "development")).await;
    let failed = wait_phase(&pgs, "nowhere", Phase::Failed).await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("--aws-vpc-id vpc-0000000000deadbee: no such VPC"),
        "{message}"
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &Default::default()).await;
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while matches!(namespaces.get_opt(&ns).await, Ok(Some(_)))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    operator.stop().await;
}).await;
}

#[tokio::test]
async fn a_bundled_network_the_go_operator_set_up_stays_in_the_cluster_vpc() {
    crate::support::bounded(
        "a_bundled_network_the_go_operator_set_up_stays_in_the_cluster_vpc",
        async move {
            let (client, ec2, id, cluster, ns) = cluster("netbd", "10.170").await;
            // The Go operator's first layout: createPrivateSubnet (cluster_vpc.go)
            // made a /27 per zone in the cluster's VPC, the highest free first,
            // tagged with getDefaultSubnetTags.
            for (i, zone) in zones(&ec2).await.iter().enumerate() {
                ec2.create_subnet()
                    .vpc_id(&cluster)
                    .cidr_block(format!("10.170.255.{}/27", 224 - 32 * i))
                    .availability_zone(zone)
                    .tag_specifications(tagged(
                        ResourceType::Subnet,
                        &[
                            ("kubernetes.io/role/internal-elb", "1"),
                            ("integreatly.org/clusterID", &id),
                            ("Name", "Cloud Resource Subnet"),
                            ("red-hat-managed", "true"),
                        ],
                    ))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e:?}"));
            }
            let private = ec2
                .describe_subnets()
                .filters(filter("vpc-id", &cluster))
                .filters(filter("tag-key", "kubernetes.io/role/internal-elb"))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let mut private: Vec<String> = private
                .subnets()
                .iter()
                .filter_map(|s| s.subnet_id().map(str::to_string))
                .collect();
            private.sort();
            strategies(&client, &ns, json!({"development": {"createStrategy": {}}})).await;
            let operator = Operator::launch(launch(&ns, &id, "a")).await;
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            let _: Postgres =
                create_json(&client, &ns, cr("Postgres", "bundled", "development")).await;
            let pg = wait_phase(&pgs, "bundled", Phase::Complete).await;

            assert_eq!(
                standalone_vpc(&ec2, &id).await,
                None,
                "a standalone network was made"
            );
            let subnet_group = shorten(&format!("{id}-subnet-group"), 40);
            let rds = crate::aws::rds().await;
            let group = rds
                .describe_db_subnet_groups()
                .db_subnet_group_name(&subnet_group)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let mut members: Vec<String> = group.db_subnet_groups()[0]
                .subnets()
                .iter()
                .filter_map(|s| s.subnet_identifier().map(str::to_string))
                .collect();
            members.sort();
            assert_eq!(
                members, private,
                "the subnet group spans the cluster's private subnets"
            );
            let (security, rules) = security_group(
                &ec2,
                &shorten(&format!("{id}-security-group"), 40),
                &cluster,
            )
            .await
            .unwrap_or_else(|| panic!("no security group in the cluster's VPC"));
            assert_eq!(
                ingress(&rules),
                [("tcp".to_string(), 5432, 5432, "10.170.0.0/16".to_string())]
            );
            let (_, in_group, behind) = placement_of(&pg).await;
            assert_eq!(
                (in_group, behind),
                (subnet_group.clone(), vec![security.clone()])
            );

            // The last database goes: the subnet groups and the security group
            // with it; the cluster's subnets stay.
            pgs.delete("bundled", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs, "bundled", DEFAULT_TIMEOUT).await;
            let gone = rds
                .describe_db_subnet_groups()
                .db_subnet_group_name(&subnet_group)
                .send()
                .await;
            assert!(gone.is_err(), "the DB subnet group is left");
            let sg_name = shorten(&format!("{id}-security-group"), 40);
            assert_eq!(
                security_group(&ec2, &sg_name, &cluster).await.map(|g| g.0),
                None
            );
            let left = ec2
                .describe_subnets()
                .filters(filter("vpc-id", &cluster))
                .send()
                .await;
            assert_eq!(left.unwrap_or_else(|e| panic!("{e:?}")).subnets().len(), 4);
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
            operator.stop().await;
        },
    )
    .await;
}

/// Deletes Postgres `db`, the last database of cluster `id`, and waits
/// until it and the database network are gone.
async fn last_database_goes(pgs: &Api<Postgres>, ec2: &aws_sdk_ec2::Client, id: &str) {
    pgs.delete("db", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(pgs, "db", DEFAULT_TIMEOUT).await;
    network_removed(ec2, id).await;
}

/// Deletes the two operators' namespaces and stops them.
async fn two_operators_end(client: &Client, ends: [(&String, Operator); 2]) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for (ns, _) in &ends {
        let _ = namespaces.delete(ns, &Default::default()).await;
    }
    for (_, operator) in ends {
        operator.stop().await;
    }
}

/// Waits until the database network of cluster `id` is gone.
async fn network_removed(ec2: &aws_sdk_ec2::Client, id: &str) {
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while standalone_vpc(ec2, id).await.is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the database network was left"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// The database network of cluster `id` as one of each, however its calls
/// went: one VPC, two subnets, one peering (active) to the cluster's VPC
/// `cluster`, one security group of its name. Its VPC and peering.
async fn one_of_each(ec2: &aws_sdk_ec2::Client, id: &str, cluster: &str) -> (String, String) {
    let (vpc, _) = standalone_vpc(ec2, id)
        .await
        .unwrap_or_else(|| panic!("no database network"));
    let subnets = ec2
        .describe_subnets()
        .filters(filter("vpc-id", &vpc))
        .send()
        .await;
    assert_eq!(
        subnets.unwrap_or_else(|e| panic!("{e:?}")).subnets().len(),
        2
    );
    let peerings = ec2.describe_vpc_peering_connections().send().await;
    let peerings = peerings.unwrap_or_else(|e| panic!("{e:?}"));
    let between: Vec<&str> = (peerings.vpc_peering_connections().iter())
        .filter(|p| p.requester_vpc_info().and_then(|i| i.vpc_id()) == Some(vpc.as_str()))
        .filter(|p| p.accepter_vpc_info().and_then(|i| i.vpc_id()) == Some(cluster))
        .filter_map(|p| p.vpc_peering_connection_id())
        .collect();
    assert_eq!(between.len(), 1, "peerings of the network: {between:?}");
    let active = peering(ec2, &vpc, cluster)
        .await
        .unwrap_or_else(|| panic!("the peering {between:?} is not active"));
    let name = shorten(&format!("{id}-security-group"), 40);
    let groups = ec2
        .describe_security_groups()
        .filters(filter("group-name", &name))
        .send()
        .await;
    let groups = groups.unwrap_or_else(|e| panic!("{e:?}"));
    let named: Vec<Option<&str>> = (groups.security_groups().iter())
        .filter(|g| g.group_name() == Some(name.as_str()))
        .map(|g| g.vpc_id())
        .collect();
    assert_eq!(
        named,
        [Some(vpc.as_str())],
        "security groups named {name}, by VPC: one, in the database network"
    );
    (vpc, active)
}

#[tokio::test]
async fn a_kill_after_any_network_call_leaves_one_of_each() {
    crate::support::bounded(
        "a_kill_after_any_network_call_leaves_one_of_each",
        async move {
            let (client, ec2, id, cluster, ns) = cluster("netkill", "10.180").await;
            strategies(
                &client,
                &ns,
                json!({"development": {"createStrategy": {"CidrBlock": "10.204.0.0/26"}}}),
            )
            .await;
            let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", "development")).await;
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            // One replica (no Lease to wait for after each kill), SIGKILLed as soon
            // as the emulator has served another EC2 write, then started again.
            let start = |run: usize| {
                let mut l = launch(&ns, &id, &format!("run{run}"));
                l.extra_args.push("--leader-election=false".into());
                Operator::launch(l)
            };
            // Polled every 20 ms: only the log's new lines are read each time, so
            // the poll stays faster than the operator's calls however long the
            // suite's log has grown.
            let (mut offset, mut writes) = (0, 0);
            let mut ec2_writes = || {
                let new = aws_requests_after(&mut offset);
                writes += (new.iter())
                    .filter(|r| r["service"] == "ec2")
                    .filter(|r| {
                        let a = r["action"].as_str().unwrap_or_default();
                        ["Create", "Accept", "Authorize", "Replace"]
                            .iter()
                            .any(|p| a.starts_with(p))
                    })
                    .count();
                writes
            };
            let mut operator = start(0).await;
            let (mut kills, mut seen) = (0, ec2_writes());
            let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT * 4;
            loop {
                let done = pgs
                    .get_opt("db")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|p| p.status)
                    .and_then(|s| s.phase)
                    == Some(Phase::Complete);
                if done {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not complete after {kills} kills"
                );
                let now = ec2_writes();
                if now > seen && kills < 12 {
                    operator.kill().await;
                    kills += 1;
                    seen = now;
                    operator = start(kills).await;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert!(
                kills >= 4,
                "only {kills} kills: the network was made in fewer calls than expected"
            );

            // One of each, however the calls were cut.
            one_of_each(&ec2, &id, &cluster).await;

            pgs.delete("db", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
            assert_eq!(standalone_vpc(&ec2, &id).await, None);
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
            operator.stop().await;
        },
    )
    .await;
}

/// The writes that make the database network and remove it (issue #46).
const NETWORK_MAKES: [&str; 10] = [
    "CreateVpc",
    "CreateSubnet",
    "CreateDBSubnetGroup",
    "CreateCacheSubnetGroup",
    "CreateSecurityGroup",
    "AuthorizeSecurityGroupIngress",
    "CreateVpcPeeringConnection",
    "AcceptVpcPeeringConnection",
    "CreateTags",
    "CreateRoute",
];
const NETWORK_REMOVES: [&str; 7] = [
    "DeleteSecurityGroup",
    "DeleteRoute",
    "DeleteSubnet",
    "DeleteDBSubnetGroup",
    "DeleteCacheSubnetGroup",
    "DeleteVpcPeeringConnection",
    "DeleteVpc",
];

/// Lost answers on the network (issue #46): the first answer of every
/// write that makes or removes the database network is lost after AWS
/// acted on it, while a Postgres and a Redis of one cluster make the
/// network at once and, deleted at once, remove it. Every retry is answered
/// by looking: no CR fails, the network has one of each object, and
/// nothing of it is left after the last database.
#[tokio::test]
async fn every_network_write_whose_answer_is_lost_is_answered_by_looking() {
    crate::support::bounded(
        "every_network_write_whose_answer_is_lost_is_answered_by_looking",
        async move {
            let (client, ec2, id, cluster, ns) = cluster("netlost", "10.190").await;
            strategies(
                &client,
                &ns,
                json!({"development": {"createStrategy": {"CidrBlock": "10.205.0.0/26"}}}),
            )
            .await;
            let proxy =
                Proxy::losing_first_answers(&ns, &[&NETWORK_MAKES[..], &NETWORK_REMOVES].concat())
                    .await;
            let mut l = launch(&ns, &id, "lost");
            l.env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
            let operator = Operator::launch(l).await;
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            let caches = Api::<Redis>::namespaced(client.clone(), &ns);
            let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", "development")).await;
            let _: Redis = create_json(&client, &ns, cr("Redis", "cache", "development")).await;
            wait_phase(&pgs, "db", Phase::Complete).await;
            wait_phase(&caches, "cache", Phase::Complete).await;

            // One of each, each lost answer notwithstanding.
            let (vpc, active) = one_of_each(&ec2, &id, &cluster).await;
            // Every route table of the cluster's VPC routes the network through
            // the one peering: none left without it, none through a lost one.
            for (table, routes) in routes(&ec2, &cluster).await {
                assert_eq!(
                    routes.get("10.205.0.0/26"),
                    Some(&active),
                    "cluster route table {table}"
                );
            }
            let name = shorten(&format!("{id}-security-group"), 40);
            let lost = proxy.answers_lost();
            let unlost: Vec<&str> = (NETWORK_MAKES.iter().copied())
                .filter(|call| !lost.contains(*call))
                .collect();
            assert!(
                unlost.is_empty(),
                "no answer lost of {unlost:?}; lost: {lost:?}"
            );

            // Both go at once; the network goes with the last.
            for deleted in [
                pgs.delete("db", &Default::default()).await.map(drop),
                caches.delete("cache", &Default::default()).await.map(drop),
            ] {
                deleted.unwrap_or_else(|e| panic!("{e}"));
            }
            wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
            wait_deleted(&caches, "cache", DEFAULT_TIMEOUT).await;
            network_removed(&ec2, &id).await;
            assert_eq!(security_group(&ec2, &name, &vpc).await.map(|g| g.0), None);
            assert_eq!(peering(&ec2, &vpc, &cluster).await, None);
            let lost = proxy.answers_lost();
            let unlost: Vec<&str> = (NETWORK_REMOVES.iter().copied())
                .filter(|call| !lost.contains(*call))
                .collect();
            assert!(
                unlost.is_empty(),
                "no answer lost of {unlost:?}; lost: {lost:?}"
            );
            let failed = failed_events(&client, &ns).await;
            assert!(failed.is_empty(), "CRs went failed: {failed:#?}");
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
            operator.stop().await;
        },
    )
    .await;
}

/// Two operators of one cluster ID (two shards, or two installations)
/// share its network. When one deletes what it takes for the cluster's
/// last database, because AWS's listing does not show the other's yet,
/// AWS refuses to remove what that database uses (DependencyViolation),
/// and the network is removed from its security group on, so the refusal
/// comes before anything is gone; the deletion waits, sees the other
/// database once the listing does, and keeps the network whole.
#[tokio::test]
async fn a_stale_listing_never_removes_the_network_another_operators_database_uses() {
    crate::support::bounded(
        "a_stale_listing_never_removes_the_network_another_operators_database_uses",
        async move {
            let (client, ec2, id, cluster, ns_b) = cluster("netshard", "10.200").await;
            let ns_a = create_namespace(&client, "network").await;
            let network =
                json!({"development": {"createStrategy": {"CidrBlock": "10.206.0.0/26"}}});
            for ns in [&ns_a, &ns_b] {
                strategies(&client, ns, network.clone()).await;
            }
            let b = Operator::launch(launch(&ns_b, &id, "b")).await;
            let pgs_b = Api::<Postgres>::namespaced(client.clone(), &ns_b);
            let _: Postgres =
                create_json(&client, &ns_b, cr("Postgres", "db", "development")).await;
            let db_b = wait_phase(&pgs_b, "db", Phase::Complete).await;
            let instance_b = db_b
                .annotations()
                .get("resourceIdentifier")
                .cloned()
                .unwrap_or_else(|| panic!("no resourceIdentifier on {ns_b}/db"));

            let flag = std::env::temp_dir().join(format!("{ns_a}-stale"));
            std::fs::write(&flag, "").unwrap_or_else(|e| panic!("{e}"));
            let proxy = Proxy::with_stale_listing(&ns_a, &[&instance_b], &flag).await;
            let mut l = launch(&ns_a, &id, "a");
            l.env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
            let a = Operator::launch(l).await;
            let pgs_a = Api::<Postgres>::namespaced(client.clone(), &ns_a);
            let _: Postgres =
                create_json(&client, &ns_a, cr("Postgres", "db", "development")).await;
            wait_phase(&pgs_a, "db", Phase::Complete).await;
            let (vpc, active) = one_of_each(&ec2, &id, &cluster).await;

            // A's database goes; its listing shows no other of the cluster.
            pgs_a
                .delete("db", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
            while !a.logs().contains("DependencyViolation") {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no removal refused (stale listing served: {})\n{}",
                    proxy.listed_stale(),
                    a.logs()
                );
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            assert!(proxy.listed_stale(), "the listing was never stale");
            std::fs::remove_file(&flag).unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs_a, "db", DEFAULT_TIMEOUT).await;

            // B's database keeps its whole network: nothing of it was removed.
            assert_eq!(
                one_of_each(&ec2, &id, &cluster).await,
                (vpc.clone(), active.clone())
            );
            let routed = routes(&ec2, &cluster).await;
            assert!(
                routed
                    .values()
                    .any(|r| r.get("10.206.0.0/26") == Some(&active)),
                "the route to the network went: {routed:?}"
            );
            let (_, _, behind) = placement_of(&db_b).await;
            let name = shorten(&format!("{id}-security-group"), 40);
            let group = security_group(&ec2, &name, &vpc).await.map(|g| g.0);
            assert_eq!(Some(behind), group.map(|g| vec![g]));
            let failed = failed_events(&client, &ns_a).await;
            assert!(failed.is_empty(), "CRs went failed: {failed:#?}");

            // B's database, now the last, takes the network with it.
            last_database_goes(&pgs_b, &ec2, &id).await;
            two_operators_end(&client, [(&ns_a, a), (&ns_b, b)]).await;
        },
    )
    .await;
}

/// Two operators of one cluster ID (two shards, or two installations): A
/// found the network and sent its CreateDBInstance, which has not reached
/// AWS yet, when B deletes the cluster's last database and, seeing no
/// other, removes the network. A's create then names a subnet group that
/// is gone (`DBSubnetGroupNotFoundFault`): A makes the network again and
/// creates its database there, without failing.
#[tokio::test]
async fn a_create_sent_while_another_operator_removes_the_network_makes_it_again() {
    crate::support::bounded(
        "a_create_sent_while_another_operator_removes_the_network_makes_it_again",
        async move {
            let (client, ec2, id, cluster, ns_b) = cluster("netrace", "10.220").await;
            let ns_a = create_namespace(&client, "network").await;
            let network =
                json!({"development": {"createStrategy": {"CidrBlock": "10.207.0.0/26"}}});
            for ns in [&ns_a, &ns_b] {
                strategies(&client, ns, network.clone()).await;
            }
            let b = Operator::launch(launch(&ns_b, &id, "b")).await;
            let pgs_b = Api::<Postgres>::namespaced(client.clone(), &ns_b);
            let _: Postgres =
                create_json(&client, &ns_b, cr("Postgres", "db", "development")).await;
            wait_phase(&pgs_b, "db", Phase::Complete).await;

            let flag = std::env::temp_dir().join(format!("{ns_a}-hold"));
            std::fs::write(&flag, "").unwrap_or_else(|e| panic!("{e}"));
            let proxy = Proxy::holding(&ns_a, &["CreateDBInstance"], &flag).await;
            let mut l = launch(&ns_a, &id, "a");
            l.env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
            let a = Operator::launch(l).await;
            let pgs_a = Api::<Postgres>::namespaced(client.clone(), &ns_a);
            let _: Postgres =
                create_json(&client, &ns_a, cr("Postgres", "db", "development")).await;
            let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
            while !proxy.held() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "A sent no CreateDBInstance\n{}",
                    a.logs()
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }

            // B's database, the cluster's only one, goes with the network.
            pgs_b
                .delete("db", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs_b, "db", DEFAULT_TIMEOUT).await;
            network_removed(&ec2, &id).await;
            std::fs::remove_file(&flag).unwrap_or_else(|e| panic!("{e}"));

            wait_phase(&pgs_a, "db", Phase::Complete).await;
            assert!(
                a.logs().contains("DBSubnetGroupNotFoundFault"),
                "A's create did not meet the removed network\n{}",
                a.logs()
            );
            one_of_each(&ec2, &id, &cluster).await;
            let failed = failed_events(&client, &ns_a).await;
            assert!(failed.is_empty(), "CRs went failed: {failed:#?}");

            last_database_goes(&pgs_a, &ec2, &id).await;
            two_operators_end(&client, [(&ns_a, a), (&ns_b, b)]).await;
        },
    )
    .await;
}

/// What two replicas racing can leave (one removing the network with the
/// cluster's last database, the other placing a new database in it): the
/// cluster's route to the network's block through a peering of the
/// cluster's network the removal never saw, still active. While that
/// peering's VPC stands, a new database waits for it (never `failed`); once
/// the VPC is gone, its network takes the route over and deletes the
/// peering left behind.
#[tokio::test]
async fn a_route_another_replica_left_to_its_network_is_taken_over() {
    crate::support::bounded(
        "a_route_another_replica_left_to_its_network_is_taken_over",
        async move {
            let (client, ec2, id, cluster, ns) = cluster("netleft", "10.221").await;
            let block = "10.208.0.0/26";
            strategies(
                &client,
                &ns,
                json!({"development": {"createStrategy": {"CidrBlock": block}}}),
            )
            .await;
            // The other replica's VPC (no longer tagged as the network) and
            // its peering, tagged as the cluster's network's peering is.
            let left_vpc = ec2.create_vpc().cidr_block("10.209.0.0/26").send().await;
            let left_vpc = left_vpc.unwrap_or_else(|e| panic!("{e:?}"));
            let left_vpc = left_vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default();
            let left = ec2
                .create_vpc_peering_connection()
                .vpc_id(left_vpc)
                .peer_vpc_id(&cluster)
                .tag_specifications(tagged(
                    ResourceType::VpcPeeringConnection,
                    &[
                        ("integreatly.org/clusterID", id.as_str()),
                        ("red-hat-managed", "true"),
                        ("Name", "Cloud Resource VPC Peering Connection"),
                    ],
                ))
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let left = (left.vpc_peering_connection())
                .and_then(|p| p.vpc_peering_connection_id())
                .unwrap_or_default()
                .to_string();
            ec2.accept_vpc_peering_connection()
                .vpc_peering_connection_id(&left)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let tables: Vec<String> = routes(&ec2, &cluster).await.into_keys().collect();
            for table in &tables {
                ec2.create_route()
                    .route_table_id(table)
                    .destination_cidr_block(block)
                    .vpc_peering_connection_id(&left)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e:?}"));
            }

            let operator = Operator::launch(launch(&ns, &id, "a")).await;
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", "development")).await;
            operator
                .wait_log("another replica is removing or making", DEFAULT_TIMEOUT)
                .await;
            let left_routes = routes(&ec2, &cluster).await;
            for table in &tables {
                assert_eq!(
                    left_routes[table].get(block),
                    Some(&left),
                    "the route of {table} was taken while its peering's VPC stood"
                );
            }

            ec2.delete_vpc()
                .vpc_id(left_vpc)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            wait_phase(&pgs, "db", Phase::Complete).await;
            let (_, active) = one_of_each(&ec2, &id, &cluster).await;
            let taken = routes(&ec2, &cluster).await;
            for table in &tables {
                assert_eq!(
                    taken[table].get(block),
                    Some(&active),
                    "the route of {table}"
                );
            }
            let state = ec2
                .describe_vpc_peering_connections()
                .vpc_peering_connection_ids(&left)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let state = (state.vpc_peering_connections().first())
                .and_then(|p| p.status()?.code())
                .map(|c| c.as_str().to_string());
            assert!(
                state.as_deref().is_none_or(|s| s == "deleted"),
                "the peering left behind is {state:?}"
            );
            let failed = failed_events(&client, &ns).await;
            assert!(failed.is_empty(), "CRs went failed: {failed:#?}");

            last_database_goes(&pgs, &ec2, &id).await;
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
            operator.stop().await;
        },
    )
    .await;
}

/// A tier in a region where nothing says where the cluster runs (no
/// subnet tagged for it, the nodes' instances elsewhere): the database is
/// not put into the region's default VPC, the CR fails naming what to set,
/// and no EC2, RDS or ElastiCache write is made for it.
#[tokio::test]
async fn without_a_cluster_vpc_in_the_tiers_region_the_cr_says_what_to_set() {
    crate::support::bounded(
        "without_a_cluster_vpc_in_the_tiers_region_the_cr_says_what_to_set",
        async move {
            let client = TestEnv::load().client().await;
            ensure_crds(&client).await;
            let id = cluster_id("netnone");
            let ns = create_namespace(&client, "network").await;
            let tiers = json!({"development": {"region": "us-east-2"}});
            apply_config_map(
                &client,
                &ns,
                "cloud-resources-aws-strategies",
                json!({"postgres": tiers.to_string()}),
            )
            .await;
            let operator = Operator::launch(launch(&ns, &id, "a")).await;
            let since = aws_requests().len();
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            let _: Postgres =
                create_json(&client, &ns, cr("Postgres", "lost", "development")).await;
            let failed = wait_phase(&pgs, "lost", Phase::Failed).await;
            let message = failed.status.and_then(|s| s.message).unwrap_or_default();
            assert!(
                message.contains("cannot find the cluster's VPC")
                    && message.contains(&format!("kubernetes.io/cluster/{id}"))
                    && message.contains("--aws-vpc-id (AWS_VPC_ID)")
                    && message.contains("DBSubnetGroupName"),
                "{message}"
            );
            // This cluster's (other tests run beside it): its network objects carry
            // the cluster ID, its instance the ID without '-'.
            let stripped = id.replace('-', "");
            let writes: Vec<String> = aws_requests()
                .into_iter()
                .skip(since)
                .filter(|r| {
                    let p = r["params"].to_string();
                    p.contains(&id) || p.contains(&stripped)
                })
                .filter_map(|r| r["action"].as_str().map(str::to_string))
                .filter(|a| {
                    ["Create", "Modify", "Authorize", "Accept", "Replace"]
                        .iter()
                        .any(|w| a.starts_with(w))
                })
                .collect();
            assert_eq!(
                writes,
                Vec::<String>::new(),
                "AWS writes for a database with nowhere to go"
            );
            pgs.delete("lost", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs, "lost", DEFAULT_TIMEOUT).await;
            operator.stop().await;
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
            let _ = namespaces.delete(&ns, &Default::default()).await;
        },
    )
    .await;
}
