//! Our finalizer, added and removed with JSON patches that touch only our
//! own entry (guarded by `test`), so other finalizers are never rewritten.

use kube::{
    Api, Resource,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Error;

pub const FINALIZER: &str = "cloud-resources-operator.integreatly.org/finalizers";
/// The name older releases of the Go operator used; migrated to FINALIZER.
pub const LEGACY_FINALIZER: &str = "finalizers.cloud-resources-operator.integreatly.org";

fn finalizers<K: Resource>(obj: &K) -> &[String] {
    obj.meta().finalizers.as_deref().unwrap_or_default()
}

/// Whether cleanup is still owed (our finalizer or the legacy one).
pub fn has_ours<K: Resource>(obj: &K) -> bool {
    finalizers(obj)
        .iter()
        .any(|f| f == FINALIZER || f == LEGACY_FINALIZER)
}

/// JSON patch that adds FINALIZER and removes LEGACY_FINALIZER, or `None`
/// when nothing needs to change. Pure, so it is unit-tested.
pub fn ensure_patch(current: &[String], resource_version: &str) -> Option<Vec<Value>> {
    let mut ops = removal_ops(current, LEGACY_FINALIZER);
    if !current.iter().any(|f| f == FINALIZER) {
        if current.is_empty() {
            // Creating the list: guard on the version, so a finalizer
            // someone added meanwhile is never replaced.
            ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}));
            ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}));
        } else {
            ops.push(json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}));
        }
    }
    (!ops.is_empty()).then_some(ops)
}

/// JSON patch that removes FINALIZER and LEGACY_FINALIZER.
pub fn remove_patch(current: &[String]) -> Option<Vec<Value>> {
    // Highest index first, so earlier indices stay valid.
    let mut idx: Vec<usize> = current
        .iter()
        .enumerate()
        .filter(|(_, f)| *f == FINALIZER || *f == LEGACY_FINALIZER)
        .map(|(i, _)| i)
        .collect();
    idx.reverse();
    let ops: Vec<Value> = idx
        .into_iter()
        .flat_map(|i| test_and_remove(i, &current[i]))
        .collect();
    (!ops.is_empty()).then_some(ops)
}

fn removal_ops(current: &[String], name: &str) -> Vec<Value> {
    let mut ops = Vec::new();
    for (i, f) in current.iter().enumerate().rev() {
        if f == name {
            ops.extend(test_and_remove(i, f));
        }
    }
    ops
}

fn test_and_remove(i: usize, value: &str) -> [Value; 2] {
    let path = format!("/metadata/finalizers/{i}");
    [
        json!({"op": "test", "path": path, "value": value}),
        json!({"op": "remove", "path": path}),
    ]
}

/// Patches the finalizers; the object's new resourceVersion.
async fn patch<K>(api: &Api<K>, obj: &K, ops: Vec<Value>) -> Result<Option<String>, Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
        .map_err(|e| Error::Internal(format!("building finalizer patch: {e}")))?;
    let patched = api
        .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(Error::kube(format!("updating finalizers of {name}")))?;
    Ok(patched.meta().resource_version.clone())
}

/// Adds the finalizer unless present: the version it made, if it wrote.
pub async fn ensure<K>(api: &Api<K>, obj: &K) -> Result<Option<String>, Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let version = obj.meta().resource_version.clone().unwrap_or_default();
    match ensure_patch(finalizers(obj), &version) {
        Some(ops) => patch(api, obj, ops).await,
        None => Ok(None),
    }
}

/// Removes our finalizer. An object already gone is done: the cache may
/// still show a version with the finalizer after a previous reconcile
/// removed it (and the API server deleted the object).
pub async fn remove<K>(api: &Api<K>, obj: &K) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(ops) = remove_patch(finalizers(obj)) else {
        return Ok(());
    };
    match patch(api, obj, ops).await {
        Err(Error::Kube {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn adds_to_empty_list_with_a_guard() {
        let ops = ensure_patch(&[], "42").unwrap_or_default();
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"})
        );
        assert_eq!(
            ops[1],
            json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]})
        );
    }

    #[test]
    fn appends_without_touching_others() {
        let ops = ensure_patch(&s(&["other/finalizer"]), "1").unwrap_or_default();
        assert_eq!(
            ops,
            vec![json!({"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER})]
        );
    }

    #[test]
    fn nothing_to_do_when_present() {
        assert_eq!(ensure_patch(&s(&["a", FINALIZER]), "1"), None);
    }

    #[test]
    fn legacy_is_migrated() {
        let ops = ensure_patch(&s(&["a", LEGACY_FINALIZER, "b"]), "1").unwrap_or_default();
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/finalizers/1", "value": LEGACY_FINALIZER})
        );
        assert_eq!(
            ops[1],
            json!({"op": "remove", "path": "/metadata/finalizers/1"})
        );
        assert_eq!(ops[2]["value"], json!(FINALIZER));
    }

    #[test]
    fn removal_removes_only_ours_highest_index_first() {
        let ops = remove_patch(&s(&[LEGACY_FINALIZER, "keep", FINALIZER])).unwrap_or_default();
        let paths: Vec<_> = ops
            .iter()
            .map(|o| o["path"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            paths,
            [
                "/metadata/finalizers/2",
                "/metadata/finalizers/2",
                "/metadata/finalizers/0",
                "/metadata/finalizers/0"
            ]
        );
        assert_eq!(remove_patch(&s(&["keep"])), None);
    }
}
