//! A Cloud SQL for PostgreSQL instance as the Go operator makes and keeps
//! it (pkg/providers/gcp/provider_postgres.go): the request body
//! (`buildCloudSQLCreateStrategy`) and what a later pass patches
//! (`buildCloudSQLUpdateStrategy`), in the Cloud SQL Admin API's own JSON
//! (sqladmin v1beta4 `DatabaseInstance`).
//!
//! The tier's `createStrategy` is `{"instance": <DatabaseInstance>}` (Go:
//! `CreateInstanceRequest`); what it leaves out gets the Go operator's
//! defaults. Fields the Go operator's own type drops are sent as written,
//! and GCP names any it does not know.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The Go operator's defaults (provider_postgres.go's constants).
pub const DEFAULT_DATABASE_VERSION: &str = "POSTGRES_13";
pub const DEFAULT_MACHINE_TIER: &str = "db-custom-2-3840";
pub const DEFAULT_AVAILABILITY: &str = "REGIONAL";
pub const DEFAULT_DISK_GB: i64 = 20;
pub const DEFAULT_AUTO_RESIZE_LIMIT_GB: i64 = 100;
pub const DEFAULT_RETAINED_BACKUPS: i64 = 30;
/// The user whose password the instance is created with (`rootPassword`),
/// and the database an application gets.
pub const POSTGRES_USER: &str = "postgres";
pub const POSTGRES_DATABASE: &str = "postgres";
pub const POSTGRES_PORT: u16 = 5432;

/// What the operator decides for an instance, beside the tier.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub root_password: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// The reserved range (a global address's name) and the VPC's self
    /// link the instance gets its private IP from (the `_network` tier).
    pub allocated_ip_range: &'a str,
    pub private_network: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CloudSqlError {
    #[error("createStrategy.{path} must be {want}, not {found}")]
    WrongType {
        path: String,
        want: &'static str,
        found: &'static str,
    },
}

/// The instance to create: the tier's `createStrategy.instance` with the
/// Go operator's defaults where it says nothing, and the operator's labels
/// added to the tier's own.
pub fn desired_instance(
    create_strategy: &Value,
    inputs: &Inputs<'_>,
) -> Result<Value, CloudSqlError> {
    let mut instance = match create_strategy.get("instance") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => return Err(wrong("instance", "a JSON object", other)),
    };
    let root = object_at(&mut instance, "instance")?;
    default(root, "name", json!(inputs.name));
    default(root, "databaseVersion", json!(DEFAULT_DATABASE_VERSION));
    default(root, "region", json!(inputs.region));
    default(root, "rootPassword", json!(inputs.root_password));
    let settings = child(root, "settings", "instance")?;
    let labels = child(settings, "userLabels", "instance.settings")?;
    for (k, v) in inputs.labels {
        labels.insert(k.clone(), json!(v));
    }
    default(settings, "tier", json!(DEFAULT_MACHINE_TIER));
    default(settings, "availabilityType", json!(DEFAULT_AVAILABILITY));
    // int64 fields travel as JSON strings in Google's APIs.
    default(
        settings,
        "storageAutoResizeLimit",
        json!(DEFAULT_AUTO_RESIZE_LIMIT_GB.to_string()),
    );
    default(
        settings,
        "dataDiskSizeGb",
        json!(DEFAULT_DISK_GB.to_string()),
    );
    default(settings, "deletionProtectionEnabled", json!(true));
    let backups = child(settings, "backupConfiguration", "instance.settings")?;
    default(backups, "enabled", json!(true));
    default(backups, "pointInTimeRecoveryEnabled", json!(true));
    let retention = child(
        backups,
        "backupRetentionSettings",
        "instance.settings.backupConfiguration",
    )?;
    default(retention, "retentionUnit", json!("COUNT"));
    default(
        retention,
        "retainedBackups",
        json!(DEFAULT_RETAINED_BACKUPS),
    );
    let ip = child(settings, "ipConfiguration", "instance.settings")?;
    default(ip, "ipv4Enabled", json!(false));
    default(ip, "allocatedIpRange", json!(inputs.allocated_ip_range));
    default(ip, "privateNetwork", json!(inputs.private_network));
    Ok(instance)
}

/// What a pass changes on a found instance, and what it leaves that GCP
/// could not do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    /// The `instances.patch` body; `None` when the instance is as wanted.
    pub patch: Option<Value>,
    /// Differences not patched, each saying why: GCP cannot shrink a disk
    /// or move a database to an older major version (the Go operator sent
    /// both and failed on every pass).
    pub held: Vec<String>,
}

/// The fields the Go operator keeps as the tier says (its
/// `buildCloudSQLUpdateStrategy`), compared with the found instance;
/// fields the tier leaves out are not compared, as there.
const KEPT: [&[&str]; 13] = [
    &["settings", "deletionProtectionEnabled"],
    &["settings", "storageAutoResize"],
    &["settings", "tier"],
    &["settings", "availabilityType"],
    &["settings", "storageAutoResizeLimit"],
    &["settings", "backupConfiguration", "enabled"],
    &[
        "settings",
        "backupConfiguration",
        "pointInTimeRecoveryEnabled",
    ],
    &[
        "settings",
        "backupConfiguration",
        "backupRetentionSettings",
        "retentionUnit",
    ],
    &[
        "settings",
        "backupConfiguration",
        "backupRetentionSettings",
        "retainedBackups",
    ],
    &["settings", "ipConfiguration", "ipv4Enabled"],
    &["settings", "maintenanceWindow", "day"],
    &["settings", "maintenanceWindow", "hour"],
    &["databaseVersion"],
];

/// Compares `desired` (from [`desired_instance`]) with the `found`
/// instance (`instances.get`).
pub fn diff(desired: &Value, found: &Value) -> Diff {
    let mut patch = Value::Object(Map::new());
    let mut held = Vec::new();
    for path in KEPT {
        let Some(want) = at(desired, path) else {
            continue;
        };
        let have = at(found, path);
        if have.is_some_and(|h| same(h, want)) {
            continue;
        }
        if path == ["databaseVersion"]
            && let Some(older) = version_downgrade(want, have)
        {
            held.push(older);
            continue;
        }
        set(&mut patch, path, want.clone());
    }
    disk(desired, found, &mut patch, &mut held);
    labels(desired, found, &mut patch);
    let changed = patch.as_object().is_some_and(|p| !p.is_empty());
    Diff {
        patch: changed.then_some(patch),
        held,
    }
}

/// A larger disk is asked for; a smaller one cannot be had. Autoresize
/// (on unless turned off) grows a disk past the tier's size: that is no
/// difference to report.
fn disk(desired: &Value, found: &Value, patch: &mut Value, held: &mut Vec<String>) {
    const PATH: &[&str] = &["settings", "dataDiskSizeGb"];
    let (Some(want), Some(have)) = (
        at(desired, PATH).and_then(int),
        at(found, PATH).and_then(int),
    ) else {
        return;
    };
    let grows_itself = at(found, &["settings", "storageAutoResize"]) != Some(&json!(false));
    if want > have {
        set(patch, PATH, json!(want.to_string()));
    } else if want < have && !grows_itself {
        held.push(format!(
            "settings.dataDiskSizeGb: the tier asks for {want} GB and the instance has {have} GB; Cloud SQL cannot shrink a disk"
        ));
    }
}

/// The operator's labels on the instance, beside any others a person put
/// there (the Go operator replaced them all with its own).
fn labels(desired: &Value, found: &Value, patch: &mut Value) {
    const PATH: &[&str] = &["settings", "userLabels"];
    let Some(Value::Object(want)) = at(desired, PATH) else {
        return;
    };
    let have = match at(found, PATH) {
        Some(Value::Object(have)) => have.clone(),
        _ => Map::new(),
    };
    if want.iter().all(|(k, v)| have.get(k) == Some(v)) {
        return;
    }
    let mut merged = have;
    merged.extend(want.clone());
    set(patch, PATH, Value::Object(merged));
}

/// `POSTGRES_<major>[_<minor>]` going down: Cloud SQL upgrades a major
/// version in place and never downgrades.
fn version_downgrade(want: &Value, have: Option<&Value>) -> Option<String> {
    let major = |v: &Value| -> Option<u32> {
        v.as_str()?
            .strip_prefix("POSTGRES_")?
            .split('_')
            .next()?
            .parse()
            .ok()
    };
    let (w, h) = (major(want)?, major(have?)?);
    (w < h).then(|| {
        format!(
            "databaseVersion: the tier asks for {} and the instance runs {}; Cloud SQL cannot move a database to an older major version",
            want.as_str().unwrap_or_default(),
            have.and_then(Value::as_str).unwrap_or_default()
        )
    })
}

/// Equal as the API means it: an int64 sent as `"20"` is the `20` read back.
fn same(a: &Value, b: &Value) -> bool {
    a == b || matches!((int(a), int(b)), (Some(x), Some(y)) if x == y)
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .filter(|v| !v.is_null())
}

fn set(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for k in parents {
        let Some(obj) = cur.as_object_mut() else {
            return;
        };
        cur = obj
            .entry(k.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(obj) = cur.as_object_mut() {
        obj.insert(last.to_string(), value);
    }
}

fn default(obj: &mut Map<String, Value>, key: &str, value: Value) {
    if obj.get(key).is_none_or(|v| v.is_null() || v == "") {
        obj.insert(key.into(), value);
    }
}

fn object_at<'v>(
    v: &'v mut Value,
    path: &str,
) -> Result<&'v mut Map<String, Value>, CloudSqlError> {
    let found = crate::strategy::json_type(v);
    v.as_object_mut().ok_or_else(|| CloudSqlError::WrongType {
        path: path.into(),
        want: "a JSON object",
        found,
    })
}

fn child<'v>(
    parent: &'v mut Map<String, Value>,
    key: &str,
    parent_path: &str,
) -> Result<&'v mut Map<String, Value>, CloudSqlError> {
    let entry = parent
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    object_at(entry, &format!("{parent_path}.{key}"))
}

fn wrong(path: &str, want: &'static str, found: &Value) -> CloudSqlError {
    CloudSqlError::WrongType {
        path: path.into(),
        want,
        found: crate::strategy::json_type(found),
    }
}

#[cfg(test)]
mod tests;
