//! A replication group, its nodes and its snapshots as the operator
//! observes them. A leaf: the account's clients hold listings of them
//! without knowing the rest of the service.

use std::collections::BTreeMap;

use aws_sdk_elasticache::types::{CacheCluster, ReplicationGroup};

/// The live replication group, as far as decisions need it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    pub arn: String,
    pub status: String,
    pub node_type: String,
    pub snapshot_retention: i32,
    pub snapshot_window: String,
    pub primary: Option<(String, i32)>,
    /// In-transit encryption (clients must speak TLS).
    pub transit_encryption: bool,
    /// Clients must `AUTH` with the group's token.
    pub auth_token: bool,
    /// Its member cache clusters (nodes); the first is where the Go
    /// operator put its tags (`TagElasticacheNode`, provider_redis.go).
    pub members: Vec<String>,
    /// The availability zones its nodes are in, as its node groups say.
    pub zones: Vec<String>,
    /// What AWS shows only on the nodes (DescribeCacheClusters): the
    /// engine version and maintenance window, as the first node has them.
    pub node: Node,
    /// Read separately (ListTagsForResource): describe does not carry them.
    /// A group never tagged has its first node's.
    pub tags: BTreeMap<String, String>,
}

/// What a group's node says of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    pub engine_version: String,
    pub maintenance_window: String,
}

impl From<&CacheCluster> for Node {
    fn from(c: &CacheCluster) -> Self {
        Node {
            engine_version: c.engine_version().unwrap_or_default().into(),
            maintenance_window: c.preferred_maintenance_window().unwrap_or_default().into(),
        }
    }
}

impl Group {
    /// The ARN of its first node: the group's ARN with
    /// `replicationgroup:<id>` replaced by `cluster:<node>`.
    pub fn first_member_arn(&self) -> Option<String> {
        let (prefix, _) = self.arn.rsplit_once(":replicationgroup:")?;
        Some(format!("{prefix}:cluster:{}", self.members.first()?))
    }
}

impl From<&ReplicationGroup> for Group {
    fn from(g: &ReplicationGroup) -> Self {
        let primary = g.node_groups().first().and_then(|n| n.primary_endpoint());
        Group {
            arn: g.arn().unwrap_or_default().into(),
            status: g.status().unwrap_or_default().into(),
            node_type: g.cache_node_type().unwrap_or_default().into(),
            snapshot_retention: g.snapshot_retention_limit().unwrap_or_default(),
            snapshot_window: g.snapshot_window().unwrap_or_default().into(),
            primary: primary.map(|e| {
                (
                    e.address().unwrap_or_default().to_string(),
                    e.port().unwrap_or(6379),
                )
            }),
            transit_encryption: g.transit_encryption_enabled().unwrap_or(false),
            auth_token: g.auth_token_enabled().unwrap_or(false),
            members: g.member_clusters().to_vec(),
            zones: (g.node_groups().iter())
                .flat_map(|n| n.node_group_members())
                .filter_map(|m| m.preferred_availability_zone().map(str::to_string))
                .collect(),
            node: Node::default(),
            tags: BTreeMap::new(),
        }
    }
}

/// One snapshot of a group, with the tags it has.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub name: String,
    pub arn: String,
    /// The node it was taken of.
    pub node: String,
    /// `None` where the identity may not read tags (tag:GetResources).
    pub tags: Option<BTreeMap<String, String>>,
}
