//! The tier's sections for ElastiCache, by the AWS input fields the
//! operator sets (elasticache:CreateReplicationGroup,
//! elasticache:DeleteReplicationGroup), and the fields it changes on a
//! running group (elasticache:ModifyReplicationGroup).

use serde::Deserialize;

use crate::strategy::TypedSection;

/// createStrategy: what elasticache:CreateReplicationGroup takes from the
/// tier.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CreateStrategy {
    #[serde(rename = "ReplicationGroupId")]
    pub identifier: Option<String>,
    #[serde(rename = "CacheNodeType")]
    pub node_type: Option<String>,
    #[serde(rename = "EngineVersion")]
    pub engine_version: Option<String>,
    #[serde(rename = "SnapshotWindow")]
    pub snapshot_window: Option<String>,
    #[serde(rename = "PreferredMaintenanceWindow")]
    pub maintenance_window: Option<String>,
    #[serde(rename = "CacheSubnetGroupName")]
    pub subnet_group: Option<String>,
    #[serde(rename = "CacheParameterGroupName")]
    pub parameter_group: Option<String>,
    #[serde(rename = "NumCacheClusters")]
    pub num_cache_clusters: Option<i32>,
    #[serde(rename = "SnapshotRetentionLimit")]
    pub snapshot_retention: Option<i32>,
    #[serde(rename = "Port")]
    pub port: Option<i32>,
    #[serde(rename = "AutomaticFailoverEnabled")]
    pub automatic_failover: Option<bool>,
    #[serde(rename = "MultiAZEnabled")]
    pub multi_az: Option<bool>,
    #[serde(rename = "AtRestEncryptionEnabled")]
    pub at_rest_encryption: Option<bool>,
    #[serde(rename = "TransitEncryptionEnabled")]
    pub transit_encryption: Option<bool>,
    #[serde(rename = "SecurityGroupIds")]
    pub security_groups: Option<Vec<String>>,
    // createStrategy fields set when the group is created and not looked at
    // again (the Go operator's `buildElasticacheCreateStrategy` passed them
    // through to CreateReplicationGroup and never compared them).
    #[serde(rename = "ReplicationGroupDescription")]
    pub description: Option<String>,
    #[serde(rename = "KmsKeyId")]
    pub kms_key_id: Option<String>,
    #[serde(rename = "PreferredCacheClusterAZs")]
    pub preferred_zones: Option<Vec<String>>,
    #[serde(rename = "NotificationTopicArn")]
    pub notification_topic_arn: Option<String>,
    #[serde(rename = "NetworkType")]
    pub network_type: Option<String>,
    #[serde(rename = "DataTieringEnabled")]
    pub data_tiering: Option<bool>,
    #[serde(rename = "AutoMinorVersionUpgrade")]
    pub auto_minor_upgrade: Option<bool>,
}

impl TypedSection for CreateStrategy {
    const NAME: &'static str = "createStrategy";
    const API: &'static str = "elasticache:CreateReplicationGroup";
}

/// deleteStrategy: what elasticache:DeleteReplicationGroup takes from the
/// tier.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DeleteStrategy {
    #[serde(rename = "ReplicationGroupId")]
    pub identifier: Option<String>,
    #[serde(rename = "FinalSnapshotIdentifier")]
    pub final_snapshot: Option<String>,
    #[serde(rename = "SkipFinalSnapshot")]
    pub skip_final_snapshot: Option<bool>,
    #[serde(rename = "RetainPrimaryCluster")]
    pub retain_primary_cluster: Option<bool>,
}

impl TypedSection for DeleteStrategy {
    const NAME: &'static str = "deleteStrategy";
    const API: &'static str = "elasticache:DeleteReplicationGroup";
}

/// A field the operator compares with the live group and changes with
/// elasticache:ModifyReplicationGroup, by its AWS API name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    CacheNodeType,
    EngineVersion,
    SnapshotRetentionLimit,
    SnapshotWindow,
    PreferredMaintenanceWindow,
}

impl crate::plan::Field for Field {
    fn name(self) -> &'static str {
        match self {
            Field::CacheNodeType => "CacheNodeType",
            Field::EngineVersion => "EngineVersion",
            Field::SnapshotRetentionLimit => "SnapshotRetentionLimit",
            Field::SnapshotWindow => "SnapshotWindow",
            Field::PreferredMaintenanceWindow => "PreferredMaintenanceWindow",
        }
    }
}
