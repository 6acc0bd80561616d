//! The tier's sections for RDS, by the AWS input fields the operator sets
//! (rds:CreateDBInstance, rds:DeleteDBInstance), and the fields it changes
//! on a running instance (rds:ModifyDBInstance).

use serde::Deserialize;

use crate::strategy::TypedSection;

/// createStrategy: what rds:CreateDBInstance takes from the tier.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct CreateStrategy {
    #[serde(rename = "DBInstanceIdentifier")]
    pub identifier: Option<String>,
    #[serde(rename = "DBInstanceClass")]
    pub class: Option<String>,
    #[serde(rename = "EngineVersion")]
    pub engine_version: Option<String>,
    #[serde(rename = "StorageType")]
    pub storage_type: Option<String>,
    #[serde(rename = "KmsKeyId")]
    pub kms_key_id: Option<String>,
    #[serde(rename = "PreferredBackupWindow")]
    pub backup_window: Option<String>,
    #[serde(rename = "PreferredMaintenanceWindow")]
    pub maintenance_window: Option<String>,
    #[serde(rename = "DBName")]
    pub db_name: Option<String>,
    #[serde(rename = "DBSubnetGroupName")]
    pub subnet_group: Option<String>,
    #[serde(rename = "DBParameterGroupName")]
    pub parameter_group: Option<String>,
    #[serde(rename = "AllocatedStorage")]
    pub storage: Option<i32>,
    #[serde(rename = "MaxAllocatedStorage")]
    pub max_storage: Option<i32>,
    #[serde(rename = "Iops")]
    pub iops: Option<i32>,
    #[serde(rename = "BackupRetentionPeriod")]
    pub backup_retention: Option<i32>,
    #[serde(rename = "Port")]
    pub port: Option<i32>,
    #[serde(rename = "MultiAZ")]
    pub multi_az: Option<bool>,
    #[serde(rename = "StorageEncrypted")]
    pub storage_encrypted: Option<bool>,
    #[serde(rename = "PubliclyAccessible")]
    pub publicly_accessible: Option<bool>,
    #[serde(rename = "DeletionProtection")]
    pub deletion_protection: Option<bool>,
    #[serde(rename = "AutoMinorVersionUpgrade")]
    pub auto_minor_version_upgrade: Option<bool>,
    #[serde(rename = "CopyTagsToSnapshot")]
    pub copy_tags_to_snapshot: Option<bool>,
    /// ModifyDBInstance's name: an existing instance moves to a higher
    /// major only when the tier says so.
    #[serde(rename = "AllowMajorVersionUpgrade")]
    pub allow_major_upgrade: Option<bool>,
    #[serde(rename = "VpcSecurityGroupIds")]
    pub security_groups: Option<Vec<String>>,
    // createStrategy fields set when the instance is created and not looked
    // at again (the Go operator's `buildRDSCreateStrategy` passed them
    // through to CreateDBInstance and never compared them).
    #[serde(rename = "MasterUsername")]
    pub master_username: Option<String>,
    /// Dropped with MultiAZ, as the Go operator dropped it (AWS refuses both).
    #[serde(rename = "AvailabilityZone")]
    pub availability_zone: Option<String>,
    #[serde(rename = "MonitoringInterval")]
    pub monitoring_interval: Option<i32>,
    #[serde(rename = "MonitoringRoleArn")]
    pub monitoring_role_arn: Option<String>,
    #[serde(rename = "EnablePerformanceInsights")]
    pub performance_insights: Option<bool>,
    #[serde(rename = "PerformanceInsightsKMSKeyId")]
    pub performance_insights_kms_key_id: Option<String>,
    #[serde(rename = "PerformanceInsightsRetentionPeriod")]
    pub performance_insights_retention: Option<i32>,
    #[serde(rename = "OptionGroupName")]
    pub option_group: Option<String>,
    #[serde(rename = "StorageThroughput")]
    pub storage_throughput: Option<i32>,
    #[serde(rename = "EnableIAMDatabaseAuthentication")]
    pub iam_database_authentication: Option<bool>,
    #[serde(rename = "EnableCloudwatchLogsExports")]
    pub cloudwatch_logs_exports: Option<Vec<String>>,
    #[serde(rename = "LicenseModel")]
    pub license_model: Option<String>,
    #[serde(rename = "NetworkType")]
    pub network_type: Option<String>,
    #[serde(rename = "CACertificateIdentifier")]
    pub ca_certificate: Option<String>,
}

impl TypedSection for CreateStrategy {
    const NAME: &'static str = "createStrategy";
    const API: &'static str = "rds:CreateDBInstance";
}

/// deleteStrategy: what rds:DeleteDBInstance takes from the tier.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct DeleteStrategy {
    #[serde(rename = "DBInstanceIdentifier")]
    pub identifier: Option<String>,
    #[serde(rename = "FinalDBSnapshotIdentifier")]
    pub final_snapshot: Option<String>,
    #[serde(rename = "SkipFinalSnapshot")]
    pub skip_final_snapshot: Option<bool>,
    #[serde(rename = "DeleteAutomatedBackups")]
    pub delete_automated_backups: Option<bool>,
}

impl TypedSection for DeleteStrategy {
    const NAME: &'static str = "deleteStrategy";
    const API: &'static str = "rds:DeleteDBInstance";
}

/// A field the operator compares with the live instance and changes with
/// rds:ModifyDBInstance, by its AWS API name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    DbInstanceClass,
    AllocatedStorage,
    EngineVersion,
    MultiAz,
    BackupRetentionPeriod,
    MaxAllocatedStorage,
    DeletionProtection,
    AutoMinorVersionUpgrade,
    PubliclyAccessible,
    PreferredBackupWindow,
    PreferredMaintenanceWindow,
    CaCertificateIdentifier,
    Port,
}

impl crate::plan::Field for Field {
    fn name(self) -> &'static str {
        match self {
            Field::DbInstanceClass => "DBInstanceClass",
            Field::AllocatedStorage => "AllocatedStorage",
            Field::EngineVersion => "EngineVersion",
            Field::MultiAz => "MultiAZ",
            Field::BackupRetentionPeriod => "BackupRetentionPeriod",
            Field::MaxAllocatedStorage => "MaxAllocatedStorage",
            Field::DeletionProtection => "DeletionProtection",
            Field::AutoMinorVersionUpgrade => "AutoMinorVersionUpgrade",
            Field::PubliclyAccessible => "PubliclyAccessible",
            Field::PreferredBackupWindow => "PreferredBackupWindow",
            Field::PreferredMaintenanceWindow => "PreferredMaintenanceWindow",
            Field::CaCertificateIdentifier => "CACertificateIdentifier",
            Field::Port => "Port",
        }
    }
}
