//! Where RDS instances and ElastiCache groups go when a tier names no
//! subnet group or security groups: a network the cluster's pods reach,
//! laid out as the Go operator lays it out (pkg/providers/aws/
//! cluster_network_provider.go, cluster_vpc.go) and under its names, so a
//! cluster it ran keeps its network objects and a new one gets the same.
//!
//! - *standalone* (the Go operator's default): a VPC of the tier's
//!   `_network` CIDR block, two private subnets in two zones, RDS and
//!   ElastiCache subnet groups over them, a security group, a peering
//!   connection to the cluster's VPC and routes both ways; removed when
//!   the cluster's last database goes.
//! - *bundled* (clusters the Go operator set up before standalone
//!   networks: subnets of the cluster's VPC tagged with its cluster ID):
//!   subnet groups over the cluster VPC's private subnets and a security
//!   group in it.
//!
//! Every step looks before it makes, and everything made is tagged or
//! named at creation, so a retry after a lost answer or a kill finds it
//! rather than making a second one.

mod bundled;
mod cidr;
mod cluster;
mod ec2;
mod groups;
mod security;
mod standalone;

use aws_sdk_ec2::Client as Ec2;
use cro_provider_api::{ProviderError, ResourceRequest};
use serde_json::Value;
use tokio::sync::MutexGuard;

use crate::{clients::Clients, sdk::VpcHint};

pub use cidr::Cidr;
pub use standalone::requested_block;

/// The engines placed: which subnet group (RDS or ElastiCache) and which
/// tier fields concern each (the port the security group admits comes
/// with the request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Postgres,
    Redis,
}

/// Where a database goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub subnet_group: String,
    pub security_group_id: String,
}

/// One cluster's network in one account and region.
pub struct Network<'a> {
    pub ec2: &'a Ec2,
    pub rds: &'a aws_sdk_rds::Client,
    pub elasticache: &'a aws_sdk_elasticache::Client,
    /// The cluster ID (the Go operator's infrastructure name).
    pub infra: &'a str,
    /// The tag key marking what this cluster made (`integreatly.org/clusterID`).
    pub owner_key: &'a str,
    pub hint: &'a VpcHint,
    pub calls: &'a crate::calls::Calls,
    pub lost: &'a crate::lost_creates::LostCreates,
}

impl<'a> Network<'a> {
    pub fn of(c: &'a Clients, req: &'a ResourceRequest, hint: &'a VpcHint) -> Network<'a> {
        Network {
            ec2: &c.ec2,
            rds: &c.rds,
            elasticache: &c.elasticache,
            infra: &req.owner_tag.1,
            owner_key: &req.owner_tag.0,
            hint,
            calls: &c.calls,
            lost: &c.lost_creates,
        }
    }

    /// The RDS and ElastiCache subnet groups' name (`BuildInfraName(..,
    /// "subnet-group", 40)`).
    pub fn subnet_group(&self) -> String {
        cro_provider_api::shorten(&format!("{}-subnet-group", self.infra), 40)
    }

    /// The security group's name (`BuildInfraName(.., "security-group", 40)`).
    pub fn security_group(&self) -> String {
        cro_provider_api::shorten(&format!("{}-security-group", self.infra), 40)
    }

    /// The Go operator's network tags (`getDefaultNetworkTags`), with a
    /// `Name` when given.
    fn tags(&self, name: Option<&str>) -> Vec<(String, String)> {
        let mut tags = vec![
            (self.owner_key.to_string(), self.infra.to_string()),
            ("red-hat-managed".to_string(), "true".to_string()),
        ];
        if let Some(name) = name {
            tags.push(("Name".to_string(), name.to_string()));
        }
        tags
    }
}

/// Where a new database of `engine` on `port` goes: `None` when the tier
/// places it itself (its createStrategy names a subnet group or security
/// groups: it keeps full control), else the cluster's network, made if missing. The
/// caller holds the guard until its create call returns, so the network
/// cannot be removed (by the last other database going) in between.
pub async fn placement<'c>(
    c: &'c Clients,
    req: &ResourceRequest,
    hint: &VpcHint,
    engine: Engine,
    port: i32,
    places_itself: bool,
) -> Result<(Option<Placement>, Option<MutexGuard<'c, ()>>), ProviderError> {
    if places_itself {
        return Ok((None, None));
    }
    let held = c.network.lock().await;
    let net = Network::of(c, req, hint);
    let placed = place(&net, engine, port, req.network.as_ref())
        .await
        .map_err(|e| when_placed(e, true))?;
    Ok((Some(placed), Some(held)))
}

/// An error while the operator places a database, or of the create it
/// placed: a network object it found or made and then did not find (AWS's
/// `*.NotFound` codes, `*NotFoundFault`) was removed in between, by
/// another replica (a shard) removing the network with the cluster's last
/// database. That heals by making it again: not a person's to fix.
pub fn when_placed(e: ProviderError, placed: bool) -> ProviderError {
    let raced = e
        .code()
        .is_some_and(|c| c.ends_with(".NotFound") || c.ends_with("NotFoundFault"));
    if placed && raced && e.kind() == cro_provider_api::ErrorKind::Permanent {
        let code = e.code().map(str::to_string);
        ProviderError::transient(format!(
            "{e}; the database network changed while it was used (another replica removed it with the cluster's last database): making it again"
        ))
        .with_code(code.as_deref())
    } else {
        e
    }
}

/// After a database went (of any tier: one that placed its own may have
/// been the cluster's last): the network goes with the cluster's last
/// database of this account and region (one tagged with the cluster ID,
/// the Go operator's or this one's). Where no cluster VPC can be found
/// (a wrong --aws-vpc-id), nothing was placed from here: the deletion
/// goes on.
pub async fn released(
    c: &Clients,
    req: &ResourceRequest,
    hint: &VpcHint,
) -> Result<(), ProviderError> {
    let _one_at_a_time = c.network.lock().await;
    let net = Network::of(c, req, hint);
    let Ok(Some(cluster)) = cluster::find_quietly(&net).await else {
        return Ok(());
    };
    let bundled = bundled::in_use(&net, &cluster).await?;
    let exists = if bundled {
        groups::rds_subnets(&net, &net.subnet_group())
            .await?
            .is_some()
            || security::find(&net, &cluster.id).await?.is_some()
    } else {
        standalone::exists(&net).await?
    };
    if !exists {
        return Ok(());
    }
    let ours = |tags: &std::collections::BTreeMap<String, String>| {
        tags.get(&req.owner_tag.0) == Some(&req.owner_tag.1)
    };
    use crate::database::{Database, Live};
    let instances = c.rds.list(c).await?;
    let groups = c.elasticache.list(c).await?;
    let others: Vec<(&String, &str)> = (instances.iter())
        .filter(|(_, i)| ours(&i.tags))
        .map(|(id, i)| (id, i.status()))
        .chain(
            (groups.iter())
                .filter(|(_, g)| ours(&g.tags))
                .map(|(id, g)| (id, g.status())),
        )
        .collect();
    if others.iter().any(|(_, status)| *status != "deleting") {
        return Ok(());
    }
    // Databases of the cluster still being deleted: the last of them to
    // finish may have looked while this one still stood, and left the
    // network to it. So this one waits for them (AWS lists a deleted
    // database for minutes, and may list it a moment longer).
    if let Some((id, _)) = others.first() {
        return Err(ProviderError::transient(format!(
            "the cluster's database network goes with its last database: waiting for {id} (being deleted) to be gone"
        )));
    }
    if bundled {
        bundled::remove(&net, &cluster).await
    } else {
        standalone::remove(&net, &cluster).await
    }
}

/// Makes sure the cluster's database network exists (looking first, as
/// the Go operator's layout it finds) and says where a database of
/// `engine` goes. `network` is the tier's `_network` strategy.
async fn place(
    net: &Network<'_>,
    engine: Engine,
    port: i32,
    network: Option<&Value>,
) -> Result<Placement, ProviderError> {
    let cluster = cluster::find(net).await?;
    if bundled::in_use(net, &cluster).await? {
        bundled::ensure(net, &cluster, engine, port).await
    } else {
        let requested = standalone::requested_block(network)?;
        standalone::ensure(net, &cluster, (engine, port), requested).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cro_provider_api::ErrorKind;

    #[test]
    fn a_network_object_gone_while_placing_is_retried_by_its_code_not_its_text() {
        let gone = || {
            ProviderError::permanent("rds:CreateDBInstance db1: DBSubnetGroupNotFoundFault: ...")
                .with_code(Some("DBSubnetGroupNotFoundFault"))
        };
        assert_eq!(when_placed(gone(), true).kind(), ErrorKind::Transient);
        // Not placed here: the tier named it, a person's to fix.
        assert_eq!(when_placed(gone(), false).kind(), ErrorKind::Permanent);
        let subnet = ProviderError::permanent("m").with_code(Some("InvalidSubnetID.NotFound"));
        assert_eq!(when_placed(subnet, true).kind(), ErrorKind::Transient);
        // The words alone (a tier's value quoted in a message) are not the code.
        let quoted = ProviderError::permanent("DBSubnetGroupName \"x.NotFound\" is invalid")
            .with_code(Some("InvalidParameterValue"));
        assert_eq!(when_placed(quoted, true).kind(), ErrorKind::Permanent);
    }
}
