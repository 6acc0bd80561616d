//! The Go operator's standalone network (cluster_network_provider.go):
//! a VPC of its own, peered with the cluster's.

use aws_sdk_ec2::types::{LocationType, ResourceType, RouteTable, Subnet};
use cro_provider_api::ProviderError;
use serde_json::Value;

use super::{
    Cidr, Engine, Network, Placement,
    cidr::{check_standalone, default_block},
    cluster::ClusterVpc,
    ec2::{at_creation, filter, has_all, tags},
    groups, security,
};
use crate::{errors::Answer, lost_creates::sent_once};

// The Go operator's Name tags (cluster_network_provider.go constants).
const VPC_NAME: &str = "Cloud Resource VPC";
const SUBNET_NAME: &str = "Cloud Resource Subnet";
const ROUTE_TABLE_NAME: &str = "Cloud Resource Route Table";
const SECURITY_GROUP_NAME: &str = "Cloud Resource Security Group";
const PEERING_NAME: &str = "Cloud Resource VPC Peering Connection";
const SECURITY_GROUP_DESCRIPTION: &str = "rhmi cro security group for cro standalone vpc";
/// The instance types a zone must offer (the Go operator's default RDS and
/// ElastiCache classes without their prefix).
const INSTANCE_TYPES: [&str; 2] = ["t3.micro", "t3.small"];
/// How long a new peering connection's passing states are waited for
/// within one reconcile (AWS takes seconds), and how often looked at.
const PEERING_SETTLES: std::time::Duration = std::time::Duration::from_secs(30);
const PEERING_LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);
/// Peering states that are over: a new connection is made instead.
const ENDED: [&str; 5] = ["deleted", "deleting", "rejected", "failed", "expired"];

/// The tier's `_network` `createStrategy.CidrBlock` (keys matched without
/// case, as Go's JSON decoding does), if set.
pub fn requested_block(network: Option<&Value>) -> Result<Option<Cidr>, ProviderError> {
    let create = network.and_then(|n| n.get("createStrategy"));
    let block = create
        .and_then(Value::as_object)
        .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case("CidrBlock")))
        .map(|(_, v)| v);
    match block {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|e| {
            ProviderError::invalid_strategy(format!(
                "_network createStrategy.CidrBlock: {e}; fix it in cloud-resources-aws-strategies"
            ))
        }),
        Some(other) => Err(ProviderError::invalid_strategy(format!(
            "_network createStrategy.CidrBlock {other} must be a string such as \"10.1.0.0/26\"; fix it in cloud-resources-aws-strategies"
        ))),
    }
}

pub async fn ensure(
    net: &Network<'_>,
    cluster: &ClusterVpc,
    (engine, port): (Engine, i32),
    requested: Option<Cidr>,
) -> Result<Placement, ProviderError> {
    let what = format!("the database network of cluster {}", net.infra);
    let (vpc, block) = match find_vpc(net).await? {
        Some(found) => {
            net.lost.found(&what);
            found
        }
        None => {
            net.lost.may_create(&what, "ec2:CreateVpc")?;
            create_vpc(net, cluster, requested, &what).await?
        }
    };
    let subnets = ensure_subnets(net, &vpc, &block).await?;
    groups::ensure(net, engine, &subnets, &net.tags(None)).await?;
    let group = security::ensure(
        net,
        &vpc,
        SECURITY_GROUP_DESCRIPTION,
        &net.tags(Some(SECURITY_GROUP_NAME)),
    )
    .await?;
    security::admit(net, &group, &cluster.blocks, port).await?;
    let peering = ensure_peering(net, &vpc, &cluster.id).await?;
    let own_tables = route_tables(net, &vpc).await?;
    tag_route_tables(net, &own_tables).await?;
    for table in route_tables(net, &cluster.id).await? {
        ensure_route(net, &table, &block, &peering).await?;
    }
    for table in &own_tables {
        for cluster_block in &cluster.blocks {
            ensure_route(net, table, cluster_block, &peering).await?;
        }
    }
    Ok(Placement {
        subnet_group: net.subnet_group(),
        security_group_id: group,
    })
}

/// Whether the cluster has a database network of its own.
pub async fn exists(net: &Network<'_>) -> Result<bool, ProviderError> {
    Ok(find_vpc(net).await?.is_some())
}

/// The VPC tagged with the cluster ID (`getStandaloneVpc`) and its block.
async fn find_vpc(net: &Network<'_>) -> Result<Option<(String, Cidr)>, ProviderError> {
    let tag = format!("tag:{}", net.owner_key);
    let out = net
        .ec2
        .describe_vpcs()
        .filters(filter(&tag, &[net.infra]))
        .send()
        .await
        .named("ec2:DescribeVpcs", &format!("{tag}={}", net.infra))?;
    // The tag is checked here too: an emulator (or a proxy) that ignored
    // the filter must not hand us another VPC.
    let tagged = |v: &&aws_sdk_ec2::types::Vpc| {
        v.tags()
            .iter()
            .any(|t| t.key() == Some(net.owner_key) && t.value() == Some(net.infra))
    };
    let mut found: Vec<(String, Cidr)> = out
        .vpcs()
        .iter()
        .filter(tagged)
        .filter_map(|v| Some((v.vpc_id()?.to_string(), v.cidr_block()?.parse().ok()?)))
        .collect();
    found.sort();
    Ok(found.into_iter().next())
}

async fn create_vpc(
    net: &Network<'_>,
    cluster: &ClusterVpc,
    requested: Option<Cidr>,
    what: &str,
) -> Result<(String, Cidr), ProviderError> {
    let block = match requested {
        Some(block) => block,
        None => {
            // Clear of the cluster's VPC, pods and services.
            let mut taken = cluster.blocks.clone();
            taken.extend(
                net.hint
                    .pod_and_service_blocks
                    .iter()
                    .filter_map(|b| b.parse::<Cidr>().ok()),
            );
            default_block(&taken).ok_or_else(|| {
                ProviderError::invalid_strategy(
                    "no default CIDR block for the database network is clear of the cluster VPC's and its pod and service networks: set CidrBlock in the tier's _network createStrategy (cloud-resources-aws-strategies)",
                )
            })?
        }
    };
    check_standalone(&block, &cluster.blocks)
        .map_err(|e| ProviderError::invalid_strategy(e.to_string()))?;
    let out = net
        .ec2
        .create_vpc()
        .cidr_block(block.to_string())
        .tag_specifications(at_creation(ResourceType::Vpc, &net.tags(Some(VPC_NAME))))
        .customize()
        .config_override(sent_once())
        .send()
        .await;
    if let Err(e) = &out {
        net.lost.lost(what, e);
    }
    let out = out.named("ec2:CreateVpc", &block.to_string());
    match &out {
        Ok(_) => net.calls.vpc_created(None),
        Err(e) => net.calls.vpc_created(Some(e.code().unwrap_or("unknown"))),
    }
    let out = out?;
    let id = out.vpc().and_then(|v| v.vpc_id()).ok_or_else(|| {
        ProviderError::transient("ec2:CreateVpc: no VPC id in AWS's answer; looking again")
    })?;
    Ok((id.to_string(), block))
}

/// The two halves of the block as subnets in the first two zones (by
/// name) that offer the default instance types; every subnet of the VPC.
async fn ensure_subnets(
    net: &Network<'_>,
    vpc: &str,
    block: &Cidr,
) -> Result<Vec<String>, ProviderError> {
    let halves = block.halves().filter(|_| block.prefix() < 27).ok_or_else(|| {
        ProviderError::invalid_strategy(format!(
            "_network CidrBlock {block} cannot hold two /27 subnets; use a block from /16 to /26"
        ))
    })?;
    let mut have = subnets(net, vpc).await?;
    let missing: Vec<&Cidr> = halves
        .iter()
        .filter(|h| {
            !have
                .iter()
                .any(|s| s.cidr_block() == Some(h.to_string().as_str()))
        })
        .collect();
    if !missing.is_empty() {
        let zones = zones(net).await?;
        for half in missing {
            let zone = if *half == halves[0] {
                &zones[0]
            } else {
                &zones[1]
            };
            let sent = net
                .ec2
                .create_subnet()
                .vpc_id(vpc)
                .cidr_block(half.to_string())
                .availability_zone(zone)
                .tag_specifications(at_creation(ResourceType::Subnet, &subnet_tags(net)))
                .send()
                .await;
            // Made by an attempt whose answer was lost: looked at below.
            sent.unless_code(
                "InvalidSubnet.Conflict",
                "ec2:CreateSubnet",
                &half.to_string(),
            )?;
        }
        have = subnets(net, vpc).await?;
        if let Some(half) = halves.iter().find(|h| {
            !have
                .iter()
                .any(|s| s.cidr_block() == Some(h.to_string().as_str()))
        }) {
            return Err(ProviderError::transient(format!(
                "subnet {half} of VPC {vpc} is not visible yet (or another subnet overlaps it); looking again"
            )));
        }
    }
    Ok(have
        .iter()
        .filter_map(|s| s.subnet_id().map(str::to_string))
        .collect())
}

/// The Go operator's subnet tags (`getDefaultSubnetTags`, cluster_vpc.go).
fn subnet_tags(net: &Network<'_>) -> Vec<(String, String)> {
    let mut tags = vec![(
        "kubernetes.io/role/internal-elb".to_string(),
        "1".to_string(),
    )];
    tags.extend(net.tags(Some(SUBNET_NAME)));
    tags
}

async fn subnets(net: &Network<'_>, vpc: &str) -> Result<Vec<Subnet>, ProviderError> {
    let call = net.ec2.describe_subnets().filters(filter("vpc-id", &[vpc]));
    let out = call.send().await.named("ec2:DescribeSubnets", vpc)?;
    let in_vpc = |s: &&Subnet| s.vpc_id() == Some(vpc);
    Ok(out.subnets().iter().filter(in_vpc).cloned().collect())
}

/// The first two zones, by name, offering an instance type the defaults use.
async fn zones(net: &Network<'_>) -> Result<[String; 2], ProviderError> {
    let out = net
        .ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .filters(filter("instance-type", &INSTANCE_TYPES))
        .send()
        .await
        .named("ec2:DescribeInstanceTypeOfferings", "t3.micro, t3.small")?;
    let mut zones: Vec<String> = out
        .instance_type_offerings()
        .iter()
        .filter_map(|o| o.location().map(str::to_string))
        .collect();
    zones.sort();
    zones.dedup();
    match zones.as_slice() {
        [a, b, ..] => Ok([a.clone(), b.clone()]),
        _ => Err(ProviderError::permanent(format!(
            "the database network needs two availability zones offering t3.micro or t3.small, and this region has {}: use a region with two, or name a DBSubnetGroupName / CacheSubnetGroupName in the tier",
            zones.len()
        ))),
    }
}

async fn route_tables(net: &Network<'_>, vpc: &str) -> Result<Vec<RouteTable>, ProviderError> {
    let call = net
        .ec2
        .describe_route_tables()
        .filters(filter("vpc-id", &[vpc]));
    let out = call.send().await.named("ec2:DescribeRouteTables", vpc)?;
    let in_vpc = |t: &&RouteTable| t.vpc_id() == Some(vpc);
    Ok(out.route_tables().iter().filter(in_vpc).cloned().collect())
}

/// The standalone VPC's route tables carry the network tags (the Go
/// operator finds them by them, `getCRORouteTables`).
async fn tag_route_tables(net: &Network<'_>, tables: &[RouteTable]) -> Result<(), ProviderError> {
    let want = net.tags(Some(ROUTE_TABLE_NAME));
    for table in tables {
        let Some(id) = table.route_table_id() else {
            continue;
        };
        if has_all(table.tags(), &want) {
            continue;
        }
        net.ec2
            .create_tags()
            .resources(id)
            .set_tags(Some(tags(&want)))
            .send()
            .await
            .named("ec2:CreateTags", id)?;
    }
    Ok(())
}

/// The peering from the standalone VPC (requester) to the cluster's
/// (accepter), made and accepted when missing; its id once active.
async fn ensure_peering(
    net: &Network<'_>,
    vpc: &str,
    cluster: &str,
) -> Result<String, ProviderError> {
    let what = format!("the peering of {vpc} to {cluster}");
    let (id, mut state) = match find_peering(net, vpc, cluster).await? {
        Some(found) => {
            net.lost.found(&what);
            found
        }
        None => create_peering(net, vpc, cluster, &what).await?,
    };
    // A new connection is `initiating-request` for a moment before it can
    // be accepted (and `provisioning` for a moment after): looked at again
    // for a while, so a cluster's first database does not report a failed
    // reconcile for what is AWS's normal pace.
    let settled_by = tokio::time::Instant::now() + PEERING_SETTLES;
    loop {
        match state.as_str() {
            "active" => return Ok(id),
            "pending-acceptance" => return accept_peering(net, (vpc, cluster), id).await,
            "initiating-request" | "provisioning" if tokio::time::Instant::now() < settled_by => {
                tokio::time::sleep(PEERING_LOOK_AGAIN).await;
                state = match find_peering(net, vpc, cluster).await? {
                    Some((found, state)) if found == id => state,
                    _ => "gone".into(),
                };
            }
            other => {
                return Err(ProviderError::transient(format!(
                    "VPC peering connection {id} from the database network to the cluster's VPC is {other}; waiting for it to be active"
                )));
            }
        }
    }
}

/// Requests the peering of `vpc` to `cluster`: its id and state.
async fn create_peering(
    net: &Network<'_>,
    vpc: &str,
    cluster: &str,
    what: &str,
) -> Result<(String, String), ProviderError> {
    net.lost
        .may_create(what, "ec2:CreateVpcPeeringConnection")?;
    let out = net
        .ec2
        .create_vpc_peering_connection()
        .vpc_id(vpc)
        .peer_vpc_id(cluster)
        .tag_specifications(at_creation(
            ResourceType::VpcPeeringConnection,
            &net.tags(Some(PEERING_NAME)),
        ))
        .customize()
        .config_override(sent_once())
        .send()
        .await;
    if let Err(e) = &out {
        net.lost.lost(what, e);
    }
    let out = out.named(
        "ec2:CreateVpcPeeringConnection",
        &format!("{vpc} to {cluster}"),
    )?;
    let p = out.vpc_peering_connection();
    let id = p
        .and_then(|p| p.vpc_peering_connection_id())
        .unwrap_or_default();
    let state = p
        .and_then(|p| p.status())
        .and_then(|s| s.code())
        .map(|c| c.as_str().to_string());
    Ok((id.to_string(), state.unwrap_or_default()))
}

/// Accepts the pending peering `id` (of `vpc` to `cluster`).
async fn accept_peering(
    net: &Network<'_>,
    (vpc, cluster): (&str, &str),
    id: String,
) -> Result<String, ProviderError> {
    let accepted = net
        .ec2
        .accept_vpc_peering_connection()
        .vpc_peering_connection_id(&id)
        .send()
        .await;
    // The SDK's retry of an accept whose answer was lost meets a
    // connection no longer pending: look at what it is.
    if let Err(e) = accepted {
        let now = find_peering(net, vpc, cluster).await?;
        if !now.is_some_and(|(found, state)| found == id && state != "pending-acceptance") {
            return Err(crate::errors::api_error(
                "ec2:AcceptVpcPeeringConnection",
                &id,
                e,
            ));
        }
    }
    Ok(id)
}

async fn find_peering(
    net: &Network<'_>,
    vpc: &str,
    cluster: &str,
) -> Result<Option<(String, String)>, ProviderError> {
    let out = net
        .ec2
        .describe_vpc_peering_connections()
        .filters(filter("requester-vpc-info.vpc-id", &[vpc]))
        .filters(filter("accepter-vpc-info.vpc-id", &[cluster]))
        .send()
        .await
        .named(
            "ec2:DescribeVpcPeeringConnections",
            &format!("{vpc} to {cluster}"),
        )?;
    // The filters are checked here too: a wrong peering would carry routes
    // (and be removed) for another network.
    let between = |p: &aws_sdk_ec2::types::VpcPeeringConnection| {
        p.requester_vpc_info().and_then(|i| i.vpc_id()) == Some(vpc)
            && p.accepter_vpc_info().and_then(|i| i.vpc_id()) == Some(cluster)
    };
    Ok(out
        .vpc_peering_connections()
        .iter()
        .filter(|p| between(p))
        .find_map(|p| {
            let state = p.status()?.code()?.as_str().to_string();
            (!ENDED.contains(&state.as_str()))
                .then(|| Some((p.vpc_peering_connection_id()?.to_string(), state)))
                .flatten()
        }))
}

/// A route in `table` to `to` through `peering`. A route to the same block
/// through something else is a conflict a person settles (another network
/// has that block) and is never replaced, unless it carries nothing (see
/// `Holder`).
async fn ensure_route(
    net: &Network<'_>,
    table: &RouteTable,
    to: &Cidr,
    peering: &str,
) -> Result<(), ProviderError> {
    let Some(id) = table.route_table_id() else {
        return Ok(());
    };
    let dest = to.to_string();
    match routed(table, &dest, peering) {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(conflict) => return take_over(net, table, &dest, peering, conflict).await,
    }
    let sent = net
        .ec2
        .create_route()
        .route_table_id(id)
        .destination_cidr_block(&dest)
        .vpc_peering_connection_id(peering)
        .send()
        .await;
    let code = match &sent {
        Ok(_) => return Ok(()),
        Err(e) => aws_sdk_ec2::error::ProvideErrorMetadata::code(e),
    };
    match code {
        // The Go operator skips tables that cannot take it.
        Some("RouteNotSupported") => Ok(()),
        // A lost answer's retry, or a route made since the look: look again.
        Some("RouteAlreadyExists") => {
            let out = net
                .ec2
                .describe_route_tables()
                .route_table_ids(id)
                .send()
                .await
                .named("ec2:DescribeRouteTables", id)?;
            match out.route_tables().first() {
                Some(t) if routed(t, &dest, peering)? => Ok(()),
                _ => Err(ProviderError::transient(format!(
                    "route table {id}: the route to {dest} is not visible yet; looking again"
                ))),
            }
        }
        _ => sent
            .map(|_| ())
            .named("ec2:CreateRoute", &format!("{id} {dest}")),
    }
}

/// `table`'s route to `dest`, held by another target (`conflict` says
/// which), pointed at `peering` where it carries nothing (see [`Holder`]).
async fn take_over(
    net: &Network<'_>,
    table: &RouteTable,
    dest: &str,
    peering: &str,
    conflict: ProviderError,
) -> Result<(), ProviderError> {
    let id = table.route_table_id().unwrap_or_default();
    let left = match route_holder(net, table, dest).await? {
        Holder::Dead(left) => left,
        Holder::Replacing {
            peering: other,
            vpc,
        } => {
            return Err(ProviderError::transient(format!(
                "route table {id} routes {dest} to {other}, a peering of this cluster's database network from VPC {vpc}, which another replica is removing or making: looking again; should this stay, {vpc} is a second database network of this cluster: delete the one no database uses"
            )));
        }
        Holder::Other => return Err(conflict),
    };
    // The peering left behind goes first: should an answer be lost, the
    // next look finds it over and the route still to take (the route
    // carries nothing either way).
    if let Some(left) = left {
        delete_peering(net, &left).await?;
    }
    net.ec2
        .replace_route()
        .route_table_id(id)
        .destination_cidr_block(dest)
        .vpc_peering_connection_id(peering)
        .send()
        .await
        .named("ec2:ReplaceRoute", &format!("{id} {dest}"))?;
    Ok(())
}

/// What holds `table`'s route to `dest` when it is not this network's
/// peering.
enum Holder {
    /// A peering that is over or gone, or whose database-network VPC is
    /// gone: the route carries nothing and is pointed at this peering. An
    /// active peering of the cluster's left with it (a replica made it
    /// while another removed the network) is deleted too.
    Dead(Option<String>),
    /// A peering of this cluster's database network that still has its
    /// VPC: another replica is removing the network or making it, so the
    /// route is looked at again once that is done.
    Replacing { peering: String, vpc: String },
    /// Anything else: a conflict a person settles.
    Other,
}

async fn route_holder(
    net: &Network<'_>,
    table: &RouteTable,
    dest: &str,
) -> Result<Holder, ProviderError> {
    let route = table
        .routes()
        .iter()
        .find(|r| r.destination_cidr_block() == Some(dest));
    let Some(route) = route else {
        return Ok(Holder::Other);
    };
    if route.state().is_some_and(|s| s.as_str() == "blackhole") {
        return Ok(Holder::Dead(None));
    }
    let Some(other) = route.vpc_peering_connection_id() else {
        return Ok(Holder::Other);
    };
    let out = net
        .ec2
        .describe_vpc_peering_connections()
        .vpc_peering_connection_ids(other)
        .send()
        .await
        .unless_code(
            "InvalidVpcPeeringConnectionID.NotFound",
            "ec2:DescribeVpcPeeringConnections",
            other,
        )?;
    let Some(peering) = out
        .as_ref()
        .and_then(|o| o.vpc_peering_connections().first())
    else {
        return Ok(Holder::Dead(None));
    };
    let state = peering.status().and_then(|s| s.code());
    if state.is_none_or(|c| ENDED.contains(&c.as_str())) {
        return Ok(Holder::Dead(None));
    }
    // Only a peering tagged as this cluster's database network's: a
    // route another network of the account holds is never taken over.
    if !has_all(peering.tags(), &net.tags(Some(PEERING_NAME))) {
        return Ok(Holder::Other);
    }
    let Some(vpc) = peering.requester_vpc_info().and_then(|i| i.vpc_id()) else {
        return Ok(Holder::Dead(Some(other.to_string())));
    };
    let found = (net.ec2.describe_vpcs().vpc_ids(vpc).send().await).unless_code(
        "InvalidVpcID.NotFound",
        "ec2:DescribeVpcs",
        vpc,
    )?;
    Ok(if found.is_none_or(|o| o.vpcs().is_empty()) {
        Holder::Dead(Some(other.to_string()))
    } else {
        Holder::Replacing {
            peering: other.to_string(),
            vpc: vpc.to_string(),
        }
    })
}

/// Whether `table` routes `dest` through `peering`; an error when it
/// routes it elsewhere.
fn routed(table: &RouteTable, dest: &str, peering: &str) -> Result<bool, ProviderError> {
    let Some(route) = table
        .routes()
        .iter()
        .find(|r| r.destination_cidr_block() == Some(dest))
    else {
        return Ok(false);
    };
    if route.vpc_peering_connection_id() == Some(peering) {
        return Ok(true);
    }
    let target = (route.vpc_peering_connection_id())
        .or(route.gateway_id())
        .or(route.transit_gateway_id())
        .or(route.nat_gateway_id())
        .or(route.network_interface_id())
        .unwrap_or("another target");
    Err(ProviderError::permanent(format!(
        "route table {} already routes {dest} to {target}, so the database network cannot use that block: set another CidrBlock in the tier's _network createStrategy (cloud-resources-aws-strategies), or remove that route",
        table.route_table_id().unwrap_or_default()
    )))
}

/// Removes the network, everything that leads to it before it: the
/// security group, the cluster's routes to it, the subnets, the subnet
/// groups, the peering (the last link), then the VPC.
pub async fn remove(net: &Network<'_>, cluster: &ClusterVpc) -> Result<(), ProviderError> {
    let Some((vpc, block)) = find_vpc(net).await? else {
        return Ok(());
    };
    security::remove(net, &vpc).await?;
    let peering = find_peering(net, &vpc, &cluster.id)
        .await?
        .map(|(id, _)| id);
    for table in route_tables(net, &cluster.id).await? {
        let Some(id) = table.route_table_id() else {
            continue;
        };
        let dest = block.to_string();
        let ours = table.routes().iter().any(|r| {
            r.destination_cidr_block() == Some(dest.as_str())
                && r.vpc_peering_connection_id().is_some()
                && r.vpc_peering_connection_id() == peering.as_deref()
        });
        if ours {
            net.ec2
                .delete_route()
                .route_table_id(id)
                .destination_cidr_block(&dest)
                .send()
                .await
                .unless_code(
                    "InvalidRoute.NotFound",
                    "ec2:DeleteRoute",
                    &format!("{id} {dest}"),
                )?;
        }
    }
    for subnet in subnets(net, &vpc).await? {
        let Some(id) = subnet.subnet_id() else {
            continue;
        };
        net.ec2
            .delete_subnet()
            .subnet_id(id)
            .send()
            .await
            .unless_code("InvalidSubnetID.NotFound", "ec2:DeleteSubnet", id)?;
    }
    groups::remove(net).await?;
    if let Some(id) = &peering {
        delete_peering(net, id).await?;
    }
    net.ec2.delete_vpc().vpc_id(&vpc).send().await.unless_code(
        "InvalidVpcID.NotFound",
        "ec2:DeleteVpc",
        &vpc,
    )?;
    Ok(())
}

async fn delete_peering(net: &Network<'_>, id: &str) -> Result<(), ProviderError> {
    net.ec2
        .delete_vpc_peering_connection()
        .vpc_peering_connection_id(id)
        .send()
        .await
        .unless_code(
            "InvalidVpcPeeringConnectionID.NotFound",
            "ec2:DeleteVpcPeeringConnection",
            id,
        )?;
    Ok(())
}
