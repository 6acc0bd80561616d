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

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, TestEnv, apply_config_map, aws_requests, create_json,
    create_namespace, ensure_crds, wait_deleted, wait_phase,
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
    out.vpc_peering_connections()
        .iter()
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

#[tokio::test]
async fn standalone_network_from_the_first_database_to_the_last() {
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ec2 = ec2().await;
    let id = cluster_id("netsa");
    let cluster = openshift_vpc(&ec2, &id, "10.150").await;
    let ns = create_namespace(&client, "network").await;
    strategies(
        &client,
        &ns,
        json!({"development": {"region": "", "createStrategy": {"CidrBlock": "10.201.0.0/26"}, "deleteStrategy": {}}}),
    )
    .await;
    let operator = Operator::launch(launch(&ns, &id, "a")).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
    let caches = Api::<Redis>::namespaced(client.clone(), &ns);
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", "development")).await;
    let _: Redis = create_json(&client, &ns, cr("Redis", "cache", "development")).await;
    let pg = wait_phase(&pgs, "db", Phase::Complete).await;
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
    let identifier = pg
        .annotations()
        .get("resourceIdentifier")
        .cloned()
        .unwrap_or_default();
    let instance = crate::aws::instance(&rds, &identifier)
        .await
        .unwrap_or_else(|| panic!("no instance {identifier}"));
    assert_eq!(
        instance
            .db_subnet_group()
            .and_then(|g| g.db_subnet_group_name()),
        Some(subnet_group.as_str())
    );
    let instance_groups: Vec<&str> = instance
        .vpc_security_groups()
        .iter()
        .filter_map(|g| g.vpc_security_group_id())
        .collect();
    assert_eq!(instance_groups, [group.as_str()]);
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
}
