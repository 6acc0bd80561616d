//! Reading status written by any writer.
//!
//! Status is observed state this operator rewrites on every reconcile, but
//! it is also written by others: the Go operator leaves `phase: ""` while it
//! starts, older versions wrote other shapes, people edit it by hand. If one
//! odd status made an object fail to deserialize, kube's list of the whole
//! kind would fail and no object of that kind would be reconciled again.
//! So every status field is lenient: a value of the wrong type or an
//! unknown phase reads as absent, the object is reconciled normally, and the
//! next status write replaces the value.
//!
//! The spec is different: guessing what a person meant is unsafe, so a
//! spec that does not parse makes the object invalid; controllers see such
//! objects through kube's `DeserializeGuard` (see `controllers`), report
//! them and skip them without blocking the others.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::{Deserialize, Deserializer, de::DeserializeOwned};
use serde_json::Value;

/// A field that reads as `None` when its value does not have the expected
/// type (or, for a phase, is not a known phase).
pub fn field<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

/// Conditions, keeping the well-formed entries of a list.
pub fn conditions<'de, D>(d: D) -> Result<Vec<Condition>, D::Error>
where
    D: Deserializer<'de>,
{
    list(d)
}

/// A list, keeping its well-formed entries.
pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(d)?;
    Ok(match value {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|item| serde_json::from_value(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}
