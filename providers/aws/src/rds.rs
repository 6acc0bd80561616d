//! Postgres as an RDS DB instance: safe defaults under the tier's
//! createStrategy, the master password generated once and kept in
//! `<name>-aws-rds-credentials` (the Go operator's Secret), disruptive
//! changes only when the CR allows them, engine versions only upward, and
//! a tagged final snapshot on delete unless the tier says otherwise.

use std::collections::BTreeMap;

use aws_sdk_rds::{
    Client,
    types::{DbInstance, Tag},
};
use cro_provider_api::{
    ConnectionDetails, Deletion, Outcome, ProviderError, Provisioned, ResourceRequest,
};

use crate::{
    AwsProvider, RECHECK, credentials,
    errors::api_error,
    strategy::{FieldType, Fields, Section, Tier},
    versions::is_upgrade,
};

pub const PROVIDER: &str = "aws-rds";

/// createStrategy fields the operator maps onto rds:CreateDBInstance.
pub const CREATE_STRATEGY: Section = Section {
    name: "createStrategy",
    api: "rds:CreateDBInstance",
    fields: &[
        ("DBInstanceClass", FieldType::String),
        ("AllocatedStorage", FieldType::Int),
        ("MaxAllocatedStorage", FieldType::Int),
        ("EngineVersion", FieldType::String),
        ("MultiAZ", FieldType::Bool),
        ("StorageType", FieldType::String),
        ("Iops", FieldType::Int),
        ("StorageEncrypted", FieldType::Bool),
        ("KmsKeyId", FieldType::String),
        ("PubliclyAccessible", FieldType::Bool),
        ("DeletionProtection", FieldType::Bool),
        ("BackupRetentionPeriod", FieldType::Int),
        ("PreferredBackupWindow", FieldType::String),
        ("PreferredMaintenanceWindow", FieldType::String),
        ("AutoMinorVersionUpgrade", FieldType::Bool),
        ("DBName", FieldType::String),
        ("Port", FieldType::Int),
        ("DBSubnetGroupName", FieldType::String),
        ("VpcSecurityGroupIds", FieldType::Strings),
        ("DBParameterGroupName", FieldType::String),
        ("CopyTagsToSnapshot", FieldType::Bool),
    ],
};
/// deleteStrategy fields for rds:DeleteDBInstance.
pub const DELETE_STRATEGY: Section = Section {
    name: "deleteStrategy",
    api: "rds:DeleteDBInstance",
    fields: &[
        ("SkipFinalSnapshot", FieldType::Bool),
        ("DeleteAutomatedBackups", FieldType::Bool),
    ],
};

pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-rds-credentials")
}

/// What the tier asks for, with the operator's safe defaults filled in.
#[derive(Debug, PartialEq)]
struct Desired {
    class: String,
    storage: i32,
    max_storage: Option<i32>,
    engine_version: Option<String>,
    multi_az: bool,
    backup_retention: i32,
    deletion_protection: bool,
    db_name: String,
    port: i32,
}

fn desired(req: &ResourceRequest, f: &Fields<'_>) -> Result<Desired, ProviderError> {
    Ok(Desired {
        class: f
            .string("DBInstanceClass")?
            .unwrap_or_else(|| "db.t3.small".into()),
        storage: f.int("AllocatedStorage")?.unwrap_or(20),
        max_storage: f.int("MaxAllocatedStorage")?.or(Some(100)),
        // No default: AWS picks its current default major, never an old one.
        engine_version: f.string("EngineVersion")?,
        multi_az: f.bool("MultiAZ")?.unwrap_or(req.tier == "production"),
        backup_retention: f.int("BackupRetentionPeriod")?.unwrap_or(31),
        deletion_protection: f.bool("DeletionProtection")?.unwrap_or(true),
        db_name: f.string("DBName")?.unwrap_or_else(|| "postgres".into()),
        port: f.int("Port")?.unwrap_or(5432),
    })
}

fn tags(req: &ResourceRequest) -> Vec<Tag> {
    req.tags
        .iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

async fn describe(rds: &Client, id: &str) -> Result<Option<DbInstance>, ProviderError> {
    let result = rds
        .describe_db_instances()
        .db_instance_identifier(id)
        .send()
        .await;
    match result {
        Ok(out) => Ok(out.db_instances().first().cloned()),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_db_instance_not_found_fault()) =>
        {
            Ok(None)
        }
        Err(e) => Err(api_error("rds:DescribeDBInstances", id, e)),
    }
}

pub async fn reconcile(
    p: &AwsProvider,
    rds: &Client,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Provisioned, ProviderError> {
    let f = Fields::new(&CREATE_STRATEGY, &tier.create)?;
    let want = desired(req, &f)?;
    let id = req.identifier.as_str();
    let provisioned = |outcome, version, identifier: Option<&str>| Provisioned {
        outcome,
        provider: PROVIDER.into(),
        version,
        identifier: identifier.map(str::to_string),
        recheck_after: Some(RECHECK),
        conditions: Vec::new(),
    };
    let creds = credentials::ensure(
        &p.kube,
        req,
        &credentials_secret(&req.name),
        &[
            ("user", || "postgres".to_string()),
            ("password", credentials::random_password),
        ],
    )
    .await?;

    let Some(db) = describe(rds, id).await? else {
        if let Some(recorded) = &req.recorded_identifier {
            return Ok(provisioned(
                Outcome::Failed(format!(
                    "RDS instance {recorded} was created for this resource but no longer exists (deleted outside the operator?); it is not re-created automatically: restore it from a snapshot, or delete the resourceIdentifier annotation to create a new, empty one"
                )),
                None,
                Some(recorded),
            ));
        }
        create(rds, req, &f, &want, &creds).await?;
        return Ok(provisioned(
            Outcome::InProgress(format!("creating RDS instance {id}")),
            None,
            Some(id),
        ));
    };

    let version = db.engine_version().map(str::to_string);
    let status = db.db_instance_status().unwrap_or_default();
    match status {
        "available" => {}
        "failed"
        | "incompatible-restore"
        | "incompatible-parameters"
        | "incompatible-network"
        | "storage-full"
        | "inaccessible-encryption-credentials" => {
            return Ok(provisioned(
                Outcome::Failed(format!(
                    "RDS instance {id} is in state {status}; see the RDS console or events for the cause"
                )),
                version,
                Some(id),
            ));
        }
        other => {
            return Ok(provisioned(
                Outcome::InProgress(format!("RDS instance {id} is {other}")),
                version,
                Some(id),
            ));
        }
    }
    ensure_tags(rds, req, db.db_instance_arn().unwrap_or_default()).await?;
    let pending = modify(rds, req, &db, &want).await?;

    let endpoint = db.endpoint();
    let details = ConnectionDetails(BTreeMap::from([
        (
            "username".into(),
            db.master_username()
                .map(str::to_string)
                .unwrap_or_else(|| creds["user"].clone()),
        ),
        ("password".into(), creds["password"].clone()),
        (
            "host".into(),
            endpoint
                .and_then(|e| e.address())
                .unwrap_or_default()
                .to_string(),
        ),
        (
            "port".into(),
            endpoint
                .and_then(|e| e.port())
                .unwrap_or(want.port)
                .to_string(),
        ),
        (
            "database".into(),
            db.db_name().unwrap_or(&want.db_name).to_string(),
        ),
    ]));
    let outcome = match pending {
        Some(msg) => Outcome::InProgress(msg),
        None => Outcome::Ready(details),
    };
    Ok(provisioned(outcome, version, Some(id)))
}

async fn create(
    rds: &Client,
    req: &ResourceRequest,
    f: &Fields<'_>,
    want: &Desired,
    creds: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    let id = req.identifier.as_str();
    let create = rds
        .create_db_instance()
        .db_instance_identifier(id)
        .engine("postgres")
        .set_engine_version(want.engine_version.clone())
        .db_instance_class(&want.class)
        .allocated_storage(want.storage)
        .set_max_allocated_storage(want.max_storage)
        .master_username(&creds["user"])
        .master_user_password(&creds["password"])
        .db_name(&want.db_name)
        .port(want.port)
        .multi_az(want.multi_az)
        .backup_retention_period(want.backup_retention)
        .deletion_protection(want.deletion_protection)
        .storage_encrypted(f.bool("StorageEncrypted")?.unwrap_or(true))
        .publicly_accessible(f.bool("PubliclyAccessible")?.unwrap_or(false))
        .copy_tags_to_snapshot(f.bool("CopyTagsToSnapshot")?.unwrap_or(true))
        .auto_minor_version_upgrade(f.bool("AutoMinorVersionUpgrade")?.unwrap_or(true))
        .set_storage_type(f.string("StorageType")?)
        .set_iops(f.int("Iops")?)
        .set_kms_key_id(f.string("KmsKeyId")?)
        .set_preferred_backup_window(f.string("PreferredBackupWindow")?)
        .set_preferred_maintenance_window(f.string("PreferredMaintenanceWindow")?)
        .set_db_subnet_group_name(f.string("DBSubnetGroupName")?)
        .set_vpc_security_group_ids(f.strings("VpcSecurityGroupIds")?)
        .set_db_parameter_group_name(f.string("DBParameterGroupName")?)
        .set_tags(Some(tags(req)));
    create
        .send()
        .await
        .map_err(|e| api_error("rds:CreateDBInstance", id, e))?;
    Ok(())
}

/// Tags set at create are corrected when changed out of band, and not
/// rewritten when already right.
async fn ensure_tags(rds: &Client, req: &ResourceRequest, arn: &str) -> Result<(), ProviderError> {
    let have = rds
        .list_tags_for_resource()
        .resource_name(arn)
        .send()
        .await
        .map_err(|e| api_error("rds:ListTagsForResource", arn, e))?;
    let have: BTreeMap<&str, &str> = have
        .tag_list()
        .iter()
        .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
        .collect();
    let missing: Vec<Tag> = crate::tags::differing(&req.tags, &have)
        .into_iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect();
    if !missing.is_empty() {
        rds.add_tags_to_resource()
            .resource_name(arn)
            .set_tags(Some(missing))
            .send()
            .await
            .map_err(|e| api_error("rds:AddTagsToResource", arn, e))?;
    }
    Ok(())
}

/// Brings the instance to the tier's settings. Disruptive changes wait for
/// `maintenanceWindow`/`applyImmediately`; returns a message when changes
/// are pending.
async fn modify(
    rds: &Client,
    req: &ResourceRequest,
    db: &DbInstance,
    want: &Desired,
) -> Result<Option<String>, ProviderError> {
    let id = req.identifier.as_str();
    let mut changes = Vec::new();
    let mut modify = rds.modify_db_instance().db_instance_identifier(id);
    if db.db_instance_class() != Some(want.class.as_str()) {
        changes.push(format!(
            "DBInstanceClass {} -> {}",
            db.db_instance_class().unwrap_or("?"),
            want.class
        ));
        modify = modify.db_instance_class(&want.class);
    }
    if db.allocated_storage().is_some_and(|s| s < want.storage) {
        changes.push(format!(
            "AllocatedStorage {} -> {}",
            db.allocated_storage().unwrap_or_default(),
            want.storage
        ));
        modify = modify.allocated_storage(want.storage);
    }
    if let (Some(have), Some(wanted)) = (db.engine_version(), &want.engine_version)
        && is_upgrade(have, wanted)
    {
        changes.push(format!("EngineVersion {have} -> {wanted}"));
        modify = modify
            .engine_version(wanted)
            .allow_major_version_upgrade(true);
    }
    if db.multi_az() != Some(want.multi_az) {
        changes.push(format!("MultiAZ -> {}", want.multi_az));
        modify = modify.multi_az(want.multi_az);
    }
    if db.backup_retention_period() != Some(want.backup_retention) {
        changes.push(format!(
            "BackupRetentionPeriod -> {}",
            want.backup_retention
        ));
        modify = modify.backup_retention_period(want.backup_retention);
    }
    if db.deletion_protection() != Some(want.deletion_protection) {
        changes.push(format!(
            "DeletionProtection -> {}",
            want.deletion_protection
        ));
        modify = modify.deletion_protection(want.deletion_protection);
    }
    if changes.is_empty() {
        return Ok(None);
    }
    // maintenanceWindow says "now is the window": apply now either way.
    let allowed = req.options.maintenance_window || req.options.apply_immediately;
    if !allowed {
        return Ok(Some(format!(
            "RDS instance {id} differs from its tier ({}); set spec.maintenanceWindow or spec.applyImmediately to apply",
            changes.join(", ")
        )));
    }
    modify
        .apply_immediately(allowed)
        .send()
        .await
        .map_err(|e| api_error("rds:ModifyDBInstance", id, e))?;
    Ok(Some(format!(
        "modifying RDS instance {id}: {}",
        changes.join(", ")
    )))
}

pub fn final_snapshot_id(id: &str) -> String {
    format!("{id}-final")
}

pub async fn delete(
    p: &AwsProvider,
    rds: &Client,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Deletion, ProviderError> {
    let f = Fields::new(&DELETE_STRATEGY, &tier.delete)?;
    let skip_final = f.bool("SkipFinalSnapshot")?.unwrap_or(false);
    let id = req.identifier.as_str();
    let Some(db) = describe(rds, id).await? else {
        if !skip_final {
            tag_final_snapshot(rds, req).await?;
        }
        credentials::delete(&p.kube, req, &credentials_secret(&req.name)).await?;
        return Ok(Deletion::Done);
    };
    let status = db.db_instance_status().unwrap_or_default();
    if status == "deleting" {
        return Ok(Deletion::InProgress(format!(
            "RDS instance {id} is deleting"
        )));
    }
    if db.deletion_protection() == Some(true) {
        rds.modify_db_instance()
            .db_instance_identifier(id)
            .deletion_protection(false)
            .apply_immediately(true)
            .send()
            .await
            .map_err(|e| api_error("rds:ModifyDBInstance", id, e))?;
        return Ok(Deletion::InProgress(format!(
            "lifting deletion protection of RDS instance {id}"
        )));
    }
    let mut delete = rds
        .delete_db_instance()
        .db_instance_identifier(id)
        .skip_final_snapshot(skip_final)
        .delete_automated_backups(f.bool("DeleteAutomatedBackups")?.unwrap_or(false));
    if !skip_final {
        delete = delete.final_db_snapshot_identifier(final_snapshot_id(id));
    }
    delete
        .send()
        .await
        .map_err(|e| api_error("rds:DeleteDBInstance", id, e))?;
    Ok(Deletion::InProgress(format!("deleting RDS instance {id}")))
}

/// The final snapshot carries the resource's tags (CopyTagsToSnapshot
/// covers AWS; this also covers instances created without it).
async fn tag_final_snapshot(rds: &Client, req: &ResourceRequest) -> Result<(), ProviderError> {
    let snap_id = final_snapshot_id(&req.identifier);
    let found = rds
        .describe_db_snapshots()
        .db_snapshot_identifier(&snap_id)
        .send()
        .await;
    let arn = match found {
        Ok(out) => out
            .db_snapshots()
            .first()
            .and_then(|s| s.db_snapshot_arn())
            .map(str::to_string),
        Err(e)
            if e.as_service_error()
                .is_some_and(|s| s.is_db_snapshot_not_found_fault()) =>
        {
            None
        }
        Err(e) => return Err(api_error("rds:DescribeDBSnapshots", &snap_id, e)),
    };
    match arn {
        Some(arn) => ensure_tags(rds, req, &arn).await,
        None => Ok(()),
    }
}
