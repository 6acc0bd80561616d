//! A Memorystore for Redis instance as the Go operator makes and keeps it
//! (pkg/providers/gcp/provider_redis.go): the request
//! (`buildCreateInstanceRequest`), what a later pass updates
//! (`buildUpdateInstanceRequest`: memory, labels, Redis configs, the
//! maintenance policy) and upgrades (`buildUpgradeInstanceRequest`), in the
//! Memorystore REST API's JSON (redis v1 `Instance`).
//!
//! The tier's `createStrategy` is Go's `CreateInstanceRequest` read by
//! `encoding/json` from the protobuf type: snake_case keys matched without
//! regard to case, enums as their numbers (`"tier": 3`), unknown keys
//! ignored. It is read the same way here (enum names are taken too), so a
//! tier written for the Go operator means the same.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// Go's defaults (`provider_redis.go`).
pub const DEFAULT_TIER: &str = "STANDARD_HA";
pub const DEFAULT_MEMORY_GB: i64 = 1;
pub const DEFAULT_VERSION: &str = "REDIS_6_X";
pub const PORT: u16 = 6379;

/// What the operator decides for an instance, beside the tier.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub project: &'a str,
    pub region: &'a str,
    /// Go's `BuildInfraNameFromObject` (`<clusterID>-<namespace>-<name>`,
    /// shortened to 40).
    pub instance_id: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// The CR's `spec.size` (GB), which wins over the tier, as in Go.
    pub size: Option<&'a str>,
    /// The cluster VPC's self link and the reserved range's name.
    pub network: &'a str,
    pub reserved_ip_range: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemorystoreError {
    #[error("createStrategy.{path} must be {want}, not {found}")]
    WrongType {
        path: String,
        want: &'static str,
        found: String,
    },
    #[error("spec.size is {0:?}: a whole number of GB (Memorystore's memorySizeGb), e.g. \"1\"")]
    Size(String),
}

/// The instance to create, where, and with which ID.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// `projects/<project>/locations/<region>`.
    pub parent: String,
    pub instance_id: String,
    /// The REST `Instance`.
    pub instance: Value,
}

/// A field of Go's `redispb.Instance`: its JSON key there, its REST name,
/// and the enum it holds, if any.
struct Field {
    go: &'static str,
    rest: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Text,
    Int,
    Bool,
    StringMap,
    Enum(&'static [&'static str]),
    MaintenancePolicy,
}

/// The enums' names by number (cloud_redis.pb.go, v1.14.2 as Go pins).
const TIERS: &[&str] = &["TIER_UNSPECIFIED", "BASIC", "", "STANDARD_HA"];
const CONNECT_MODES: &[&str] = &[
    "CONNECT_MODE_UNSPECIFIED",
    "DIRECT_PEERING",
    "PRIVATE_SERVICE_ACCESS",
];
const READ_REPLICAS: &[&str] = &[
    "READ_REPLICAS_MODE_UNSPECIFIED",
    "READ_REPLICAS_DISABLED",
    "READ_REPLICAS_ENABLED",
];
const TRANSIT: &[&str] = &[
    "TRANSIT_ENCRYPTION_MODE_UNSPECIFIED",
    "SERVER_AUTHENTICATION",
    "DISABLED",
];
/// google.type.DayOfWeek.
const DAYS: &[&str] = &[
    "DAY_OF_WEEK_UNSPECIFIED",
    "MONDAY",
    "TUESDAY",
    "WEDNESDAY",
    "THURSDAY",
    "FRIDAY",
    "SATURDAY",
    "SUNDAY",
];

/// The settable fields of Go's type; the rest of it is output only.
const FIELDS: &[Field] = &[
    Field {
        go: "name",
        rest: "name",
        kind: Kind::Text,
    },
    Field {
        go: "display_name",
        rest: "displayName",
        kind: Kind::Text,
    },
    Field {
        go: "labels",
        rest: "labels",
        kind: Kind::StringMap,
    },
    Field {
        go: "location_id",
        rest: "locationId",
        kind: Kind::Text,
    },
    Field {
        go: "alternative_location_id",
        rest: "alternativeLocationId",
        kind: Kind::Text,
    },
    Field {
        go: "redis_version",
        rest: "redisVersion",
        kind: Kind::Text,
    },
    Field {
        go: "reserved_ip_range",
        rest: "reservedIpRange",
        kind: Kind::Text,
    },
    Field {
        go: "secondary_ip_range",
        rest: "secondaryIpRange",
        kind: Kind::Text,
    },
    Field {
        go: "redis_configs",
        rest: "redisConfigs",
        kind: Kind::StringMap,
    },
    Field {
        go: "tier",
        rest: "tier",
        kind: Kind::Enum(TIERS),
    },
    Field {
        go: "memory_size_gb",
        rest: "memorySizeGb",
        kind: Kind::Int,
    },
    Field {
        go: "authorized_network",
        rest: "authorizedNetwork",
        kind: Kind::Text,
    },
    Field {
        go: "connect_mode",
        rest: "connectMode",
        kind: Kind::Enum(CONNECT_MODES),
    },
    Field {
        go: "auth_enabled",
        rest: "authEnabled",
        kind: Kind::Bool,
    },
    Field {
        go: "transit_encryption_mode",
        rest: "transitEncryptionMode",
        kind: Kind::Enum(TRANSIT),
    },
    Field {
        go: "maintenance_policy",
        rest: "maintenancePolicy",
        kind: Kind::MaintenancePolicy,
    },
    Field {
        go: "replica_count",
        rest: "replicaCount",
        kind: Kind::Int,
    },
    Field {
        go: "read_replicas_mode",
        rest: "readReplicasMode",
        kind: Kind::Enum(READ_REPLICAS),
    },
    Field {
        go: "customer_managed_key",
        rest: "customerManagedKey",
        kind: Kind::Text,
    },
];

/// `key` of `obj` as `encoding/json` finds it: case-insensitively.
fn go_key<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    (obj.iter())
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

fn wrong(path: &str, want: &'static str, found: &Value) -> MemorystoreError {
    MemorystoreError::WrongType {
        path: path.into(),
        want,
        found: crate::strategy::json_type(found).into(),
    }
}

/// An enum as Go reads it (its number) or as REST writes it (its name).
fn enum_name(v: &Value, names: &[&'static str], path: &str) -> Result<String, MemorystoreError> {
    // Numbers the enum skips are empty names (Tier has no 2).
    let found = match v {
        Value::Number(n) => (n.as_u64())
            .and_then(|i| names.get(usize::try_from(i).ok()?))
            .filter(|n| !n.is_empty())
            .map(|n| n.to_string()),
        Value::String(s) => (names.iter())
            .find(|n| !n.is_empty() && **n == s.as_str())
            .map(|n| n.to_string()),
        _ => None,
    };
    found.ok_or_else(|| wrong(path, "one of the enum's numbers or names", v))
}

fn string_map(v: &Value, path: &str) -> Result<Value, MemorystoreError> {
    let obj = v
        .as_object()
        .ok_or_else(|| wrong(path, "an object of strings", v))?;
    let mut out = Map::new();
    for (k, item) in obj {
        let text = item
            .as_str()
            .ok_or_else(|| wrong(&format!("{path}.{k}"), "a string", item))?;
        out.insert(k.clone(), json!(text));
    }
    Ok(Value::Object(out))
}

/// Go's `maintenance_policy` (`weekly_maintenance_window: [{day,
/// start_time: {hours, minutes, seconds, nanos}}]`, and a `description`).
fn maintenance_policy(v: &Value, path: &str) -> Result<Value, MemorystoreError> {
    let obj = v.as_object().ok_or_else(|| wrong(path, "an object", v))?;
    let mut out = Map::new();
    if let Some(d) = go_key(obj, "description") {
        out.insert("description".into(), json!(d.as_str().unwrap_or_default()));
    }
    let windows = go_key(obj, "weekly_maintenance_window")
        .cloned()
        .unwrap_or(json!([]));
    let windows = windows.as_array().ok_or_else(|| {
        wrong(
            &format!("{path}.weekly_maintenance_window"),
            "a list",
            &windows,
        )
    })?;
    let mut rest = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        let at = format!("{path}.weekly_maintenance_window[{i}]");
        let w = w.as_object().ok_or_else(|| wrong(&at, "an object", w))?;
        let day = go_key(w, "day").map_or(Ok(DAYS[0].to_string()), |d| {
            enum_name(d, DAYS, &format!("{at}.day"))
        })?;
        let mut start = Map::new();
        if let Some(t) = go_key(w, "start_time").and_then(Value::as_object) {
            for unit in ["hours", "minutes", "seconds", "nanos"] {
                if let Some(n) = go_key(t, unit).and_then(Value::as_i64).filter(|n| *n != 0) {
                    start.insert(unit.into(), json!(n));
                }
            }
        }
        rest.push(json!({"day": day, "startTime": start}));
    }
    if !rest.is_empty() {
        out.insert("weeklyMaintenanceWindow".into(), Value::Array(rest));
    }
    Ok(Value::Object(out))
}

/// Go's `instance` as the REST `Instance`; keys Go's type lacks are
/// dropped, as `encoding/json` drops them.
fn rest_instance(go: &Map<String, Value>) -> Result<Map<String, Value>, MemorystoreError> {
    let mut out = Map::new();
    for f in FIELDS {
        let Some(v) = go_key(go, f.go) else {
            continue;
        };
        let path = format!("instance.{}", f.go);
        let rest = match f.kind {
            Kind::Text => json!(v.as_str().ok_or_else(|| wrong(&path, "a string", v))?),
            Kind::Int => json!(
                v.as_i64()
                    .ok_or_else(|| wrong(&path, "a whole number", v))?
            ),
            Kind::Bool => json!(
                v.as_bool()
                    .ok_or_else(|| wrong(&path, "true or false", v))?
            ),
            Kind::StringMap => string_map(v, &path)?,
            Kind::Enum(names) => json!(enum_name(v, names, &path)?),
            Kind::MaintenancePolicy => maintenance_policy(v, &path)?,
        };
        // Go's zero values mean "not set" (`== 0` checks): defaults apply.
        let unset = rest == json!("")
            || rest == json!(0)
            || rest.as_str().is_some_and(|s| s.ends_with("_UNSPECIFIED"));
        if !unset {
            out.insert(f.rest.into(), rest);
        }
    }
    Ok(out)
}

/// The instance to create: the tier's with Go's defaults where it says
/// nothing, `spec.size` over both, and the operator's labels added.
pub fn desired_instance(
    create_strategy: &Value,
    inputs: &Inputs<'_>,
) -> Result<Desired, MemorystoreError> {
    let empty = Map::new();
    let strategy = match create_strategy {
        Value::Null => &empty,
        Value::Object(o) => o,
        other => return Err(wrong("", "a JSON object", other)),
    };
    let text = |key: &str| {
        go_key(strategy, key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let parent = text("parent").map_or_else(
        || format!("projects/{}/locations/{}", inputs.project, inputs.region),
        str::to_string,
    );
    let instance_id = text("instance_id")
        .unwrap_or(inputs.instance_id)
        .to_string();
    let mut instance = match go_key(strategy, "instance") {
        None => Map::new(),
        Some(Value::Object(o)) => rest_instance(o)?,
        Some(other) => return Err(wrong("instance", "a JSON object", other)),
    };
    let mut default = |key: &str, v: Value| {
        instance.entry(key.to_string()).or_insert(v);
    };
    default("name", json!(format!("{parent}/instances/{instance_id}")));
    default("tier", json!(DEFAULT_TIER));
    default("readReplicasMode", json!("READ_REPLICAS_DISABLED"));
    default("memorySizeGb", json!(DEFAULT_MEMORY_GB));
    // Go: the part of the address's network after "v1/".
    let network = inputs
        .network
        .split_once("v1/")
        .map_or(inputs.network, |(_, n)| n);
    default("authorizedNetwork", json!(network));
    default("connectMode", json!("PRIVATE_SERVICE_ACCESS"));
    default("reservedIpRange", json!(inputs.reserved_ip_range));
    default("redisVersion", json!(DEFAULT_VERSION));
    if let Some(size) = inputs.size.filter(|s| !s.is_empty()) {
        let gb: i64 = size
            .parse()
            .map_err(|_| MemorystoreError::Size(size.into()))?;
        instance.insert("memorySizeGb".into(), json!(gb));
    }
    let labels = instance.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        for (k, v) in inputs.labels {
            labels.insert(k.clone(), json!(v));
        }
    }
    Ok(Desired {
        parent,
        instance_id,
        instance: Value::Object(instance),
    })
}

/// What a pass changes on a found instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    /// The `instances.patch` body and its `updateMask`.
    pub update: Option<(Value, String)>,
    /// The `redisVersion` to upgrade to.
    pub upgrade: Option<String>,
    /// What is not done, and why.
    pub held: Vec<String>,
}

/// Go's update and upgrade, kinder: labels a person added stay (Go
/// replaces them all), and a lower version is held (Memorystore upgrades
/// only; Go would ask on every pass).
pub fn diff(desired: &Value, found: &Value) -> Diff {
    let mut out = Diff::default();
    let (mut body, mut mask) = (Map::new(), Vec::new());
    if desired["memorySizeGb"] != found["memorySizeGb"] {
        body.insert("memorySizeGb".into(), desired["memorySizeGb"].clone());
        mask.push("memory_size_gb");
    }
    let mut labels = found["labels"].as_object().cloned().unwrap_or_default();
    let before = labels.clone();
    for (k, v) in desired["labels"].as_object().into_iter().flatten() {
        labels.insert(k.clone(), v.clone());
    }
    if labels != before {
        body.insert("labels".into(), Value::Object(labels));
        mask.push("labels");
    }
    let wanted_configs = desired.get("redisConfigs").cloned().unwrap_or(json!({}));
    if wanted_configs != found.get("redisConfigs").cloned().unwrap_or(json!({})) {
        body.insert("redisConfigs".into(), wanted_configs);
        mask.push("redis_configs");
    }
    let windows = |v: &Value| v["maintenancePolicy"]["weeklyMaintenanceWindow"].clone();
    if windows(desired) != windows(found) && !desired["maintenancePolicy"].is_null() {
        let mut policy = desired["maintenancePolicy"].clone();
        // `duration` is output only.
        for w in policy["weeklyMaintenanceWindow"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if let Some(w) = w.as_object_mut() {
                w.remove("duration");
            }
        }
        body.insert("maintenancePolicy".into(), policy);
        mask.push("maintenance_policy");
    }
    if !mask.is_empty() {
        out.update = Some((Value::Object(body), mask.join(",")));
    }
    let (want, have) = (
        desired["redisVersion"].as_str(),
        found["redisVersion"].as_str(),
    );
    match (want, have) {
        (Some(w), Some(h)) if w != h && version(w) < version(h) => out.held.push(format!(
            "redisVersion {w} is older than the instance's {h}: Memorystore upgrades only"
        )),
        (Some(w), Some(h)) if w != h => out.upgrade = Some(w.to_string()),
        _ => {}
    }
    out
}

/// `REDIS_6_X` → (6, 0); `REDIS_7_2` → (7, 2).
fn version(v: &str) -> (u32, u32) {
    let mut parts = v.trim_start_matches("REDIS_").split('_');
    let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor)
}

#[cfg(test)]
mod tests;
