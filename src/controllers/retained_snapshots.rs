//! The manual snapshots whose CR was deleted while their cloud snapshot
//! was kept (`skipDelete`, the retain deletion policy): they still count
//! toward their namespace's `maxManualSnapshots`, or deleting a CR would
//! be a way past the limit to the account's snapshot quota.
//!
//! They are listed in a ConfigMap of the operator namespace, which tenants
//! cannot write, one key per namespace holding a JSON list. A platform
//! engineer who deletes such a snapshot in the cloud removes its entry.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams, ResourceExt},
};
use serde::{Deserialize, Serialize};

use crate::reconcile::{Context, Error};

/// The ConfigMap, in the operator namespace.
pub const CONFIG_MAP: &str = "cloud-resource-operator-retained-snapshots";

/// One kept snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retained {
    /// `PostgresSnapshot` or `RedisSnapshot`.
    pub kind: String,
    /// The cloud snapshot's identifier (the CR's `status.snapshotID`).
    pub snapshot_id: String,
    /// The CR it was kept from, `<Kind>/<name>`.
    pub from: String,
}

/// The entries of `namespace` in `cm`; an entry a person mangled is
/// still counted, as what it most likely is.
fn entries(cm: Option<&ConfigMap>, namespace: &str) -> Vec<Retained> {
    let raw = cm.and_then(|c| c.data.as_ref()?.get(namespace).cloned());
    let Some(raw) = raw else {
        return Vec::new();
    };
    match serde_json::from_str::<Vec<serde_json::Value>>(&raw) {
        Ok(values) => values
            .into_iter()
            .map(|v| {
                serde_json::from_value(v.clone()).unwrap_or(Retained {
                    kind: String::new(),
                    snapshot_id: v.to_string(),
                    from: String::new(),
                })
            })
            .collect(),
        Err(_) => vec![Retained {
            kind: String::new(),
            snapshot_id: raw,
            from: String::new(),
        }],
    }
}

async fn read(ctx: &Context) -> Result<Option<ConfigMap>, Error> {
    let ns = &ctx.settings.operator_namespace;
    Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
        .get_opt(CONFIG_MAP)
        .await
        .map_err(Error::kube(format!("reading ConfigMap {ns}/{CONFIG_MAP}")))
}

/// How many snapshots of `kind` were kept in `namespace` (an entry of no
/// kind counts for every kind).
pub async fn count(ctx: &Context, namespace: &str, kind: &str) -> Result<usize, Error> {
    let cm = read(ctx).await?;
    Ok(entries(cm.as_ref(), namespace)
        .iter()
        .filter(|e| e.kind == kind || e.kind.is_empty())
        .count())
}

/// Adds `retained` to `namespace`'s list, once. A concurrent write makes
/// this fail with a conflict, and the deletion is retried.
pub async fn record(ctx: &Context, namespace: &str, retained: Retained) -> Result<(), Error> {
    let ns = &ctx.settings.operator_namespace;
    let api = Api::<ConfigMap>::namespaced(ctx.client.clone(), ns);
    let cm = read(ctx).await?;
    let mut list = entries(cm.as_ref(), namespace);
    if list.iter().any(|e| e.snapshot_id == retained.snapshot_id) {
        return Ok(());
    }
    list.push(retained);
    let value = serde_json::to_string(&list).unwrap_or_default();
    let action = format!("recording a kept snapshot in ConfigMap {ns}/{CONFIG_MAP}");
    match cm {
        Some(cm) => {
            // With its resourceVersion: a concurrent write conflicts.
            let patch = serde_json::json!({
                "metadata": {"resourceVersion": cm.resource_version()},
                "data": {namespace: value},
            });
            api.patch(CONFIG_MAP, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(Error::kube(action))?;
        }
        None => {
            let cm = ConfigMap {
                metadata: kube::api::ObjectMeta {
                    name: Some(CONFIG_MAP.into()),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                data: Some([(namespace.to_string(), value)].into()),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm)
                .await
                .map_err(Error::kube(action))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn every_entry_counts_even_one_a_person_mangled() {
        let kept = r#"[{"kind":"PostgresSnapshot","snapshotId":"a","from":"PostgresSnapshot/x"},{"oops":1}]"#;
        let map = cm(&[("team-a", kept), ("team-b", "not json")]);
        let a = entries(Some(&map), "team-a");
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].snapshot_id, "a");
        assert_eq!(a[1].kind, "");
        assert_eq!(entries(Some(&map), "team-b").len(), 1);
        assert!(entries(Some(&map), "team-c").is_empty());
        assert!(entries(None, "team-a").is_empty());
    }
}
