//! The Go operator's first layout (cluster_vpc.go), kept for clusters it
//! set up that way: subnets of the cluster's VPC tagged with the cluster ID
//! mark it; the subnet groups span the cluster VPC's private subnets and
//! the security group lives in the cluster's VPC.

use cro_provider_api::ProviderError;

use super::{Engine, Network, Placement, cluster::ClusterVpc, ec2::filter, groups, security};
use crate::errors::Answer;

/// The Go operator's tag key of private subnets (`defaultAWSPrivateSubnetTagKey`).
const PRIVATE_SUBNET_TAG: &str = "kubernetes.io/role/internal-elb";

/// Whether the cluster's VPC has subnets tagged with the cluster ID (the
/// Go operator's `IsEnabled` is false then).
pub async fn in_use(net: &Network<'_>, cluster: &ClusterVpc) -> Result<bool, ProviderError> {
    let tag = format!("tag:{}", net.owner_key);
    let out = net
        .ec2
        .describe_subnets()
        .filters(filter("vpc-id", &[&cluster.id]))
        .filters(filter(&tag, &[net.infra]))
        .send()
        .await
        .named("ec2:DescribeSubnets", &cluster.id)?;
    Ok(!out.subnets().is_empty())
}

pub async fn ensure(
    net: &Network<'_>,
    cluster: &ClusterVpc,
    engine: Engine,
    port: i32,
) -> Result<Placement, ProviderError> {
    let name = net.subnet_group();
    let have = match engine {
        Engine::Postgres => groups::rds_subnets(net, &name).await?,
        Engine::Redis => groups::cache_subnets(net, &name).await?,
    };
    if have.is_none() {
        let out = net
            .ec2
            .describe_subnets()
            .filters(filter("vpc-id", &[&cluster.id]))
            .filters(filter("tag-key", &[PRIVATE_SUBNET_TAG]))
            .send()
            .await
            .named("ec2:DescribeSubnets", &cluster.id)?;
        let private: Vec<String> = out
            .subnets()
            .iter()
            .filter_map(|s| s.subnet_id().map(str::to_string))
            .collect();
        if private.is_empty() {
            return Err(ProviderError::permanent(format!(
                "the cluster's VPC {} has no private subnet (tag {PRIVATE_SUBNET_TAG}) for subnet group {name}: tag its private subnets, or name a DBSubnetGroupName / CacheSubnetGroupName in the tier",
                cluster.id
            )));
        }
        groups::ensure(net, engine, &private, &net.tags(None)[..1]).await?;
    }
    let description = format!("security group for cluster {}", net.infra);
    let group = security::ensure(net, &cluster.id, &description, &net.tags(None)).await?;
    security::admit(net, &group, &cluster.blocks, port).await?;
    Ok(Placement {
        subnet_group: name,
        security_group_id: group,
    })
}

/// The Go operator's `DeleteBundledCloudResources`: the subnet groups and
/// the security group; the cluster's subnets stay.
pub async fn remove(net: &Network<'_>, cluster: &ClusterVpc) -> Result<(), ProviderError> {
    groups::remove(net).await?;
    security::remove(net, &cluster.id).await
}
