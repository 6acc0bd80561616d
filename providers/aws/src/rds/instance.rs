//! An RDS instance as the operator observes it: what decisions read of
//! DescribeDBInstances. A leaf: the account's clients hold listings of it
//! without knowing the rest of the service.

use std::collections::BTreeMap;

use aws_sdk_rds::types::DbInstance;

/// What a tier sets that DescribeDBInstances reports back as it was set:
/// compared field by field, so declared once for both sides.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub class: String,
    pub storage: i32,
    pub multi_az: bool,
    pub backup_retention: i32,
    pub deletion_protection: bool,
    pub auto_minor_version_upgrade: bool,
    pub publicly_accessible: bool,
}

/// The live instance, as far as decisions need it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Instance {
    pub arn: String,
    pub status: String,
    pub settings: Settings,
    pub max_storage: Option<i32>,
    pub engine_version: String,
    pub backup_window: String,
    pub maintenance_window: String,
    pub ca_certificate: String,
    pub address: String,
    pub port: Option<i32>,
    pub master_username: Option<String>,
    pub db_name: Option<String>,
    /// Values AWS will apply in its next maintenance window.
    pub pending: Pending,
    pub tags: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pending {
    pub ca_certificate: Option<String>,
    pub class: Option<String>,
    pub storage: Option<i32>,
    pub engine_version: Option<String>,
    pub multi_az: Option<bool>,
    pub backup_retention: Option<i32>,
    pub port: Option<i32>,
}

impl From<&DbInstance> for Instance {
    fn from(db: &DbInstance) -> Self {
        let pending = db.pending_modified_values();
        Instance {
            arn: db.db_instance_arn().unwrap_or_default().into(),
            status: db.db_instance_status().unwrap_or_default().into(),
            settings: Settings {
                class: db.db_instance_class().unwrap_or_default().into(),
                storage: db.allocated_storage().unwrap_or_default(),
                multi_az: db.multi_az().unwrap_or_default(),
                backup_retention: db.backup_retention_period().unwrap_or_default(),
                deletion_protection: db.deletion_protection().unwrap_or_default(),
                auto_minor_version_upgrade: db.auto_minor_version_upgrade().unwrap_or_default(),
                publicly_accessible: db.publicly_accessible().unwrap_or_default(),
            },
            max_storage: db.max_allocated_storage(),
            engine_version: db.engine_version().unwrap_or_default().into(),
            backup_window: db.preferred_backup_window().unwrap_or_default().into(),
            maintenance_window: db.preferred_maintenance_window().unwrap_or_default().into(),
            ca_certificate: db.ca_certificate_identifier().unwrap_or_default().into(),
            address: db
                .endpoint()
                .and_then(|e| e.address())
                .unwrap_or_default()
                .into(),
            port: db.endpoint().and_then(|e| e.port()),
            master_username: db.master_username().map(str::to_string),
            db_name: db.db_name().map(str::to_string),
            pending: Pending {
                ca_certificate: pending
                    .and_then(|p| p.ca_certificate_identifier().map(str::to_string)),
                class: pending.and_then(|p| p.db_instance_class().map(str::to_string)),
                storage: pending.and_then(|p| p.allocated_storage()),
                engine_version: pending.and_then(|p| p.engine_version().map(str::to_string)),
                multi_az: pending.and_then(|p| p.multi_az()),
                backup_retention: pending.and_then(|p| p.backup_retention_period()),
                port: pending.and_then(|p| p.port()),
            },
            tags: db
                .tag_list()
                .iter()
                .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().into())))
                .collect(),
        }
    }
}
