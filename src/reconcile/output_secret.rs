//! The output Secret: written only when it was made for this CR (by this
//! operator, or by the Go operator before it), never over a Secret somebody
//! else made.

use std::collections::{BTreeMap, BTreeSet};

use cro_provider_api::ConnectionDetails;
use k8s_openapi::{
    ByteString,
    api::core::v1::Secret,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};

use super::Error;
use cro_runtime::cache::Scoped;

pub use cro_provider_api::{
    MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL, RELEASED_FROM_ANNOTATION,
};

/// Where the Secret goes and who it is for.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub owner_uid: &'a str,
    /// The owner as [`RELEASED_FROM_ANNOTATION`] names it.
    pub released_from: String,
    /// Set when the Secret is in the owner's namespace (owner references
    /// cannot cross namespaces).
    pub owner_ref: Option<OwnerReference>,
    /// For messages, e.g. `Postgres app/db`.
    pub owner_desc: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Data is as the provider said; `placeholders` lists keys still empty.
    Ok { placeholders: Vec<String> },
    /// A Secret of that name exists and is not ours: left untouched.
    Conflict(String),
}

/// Whether `secret` may be written for the CR with `owner_uid`: this
/// operator wrote it for that CR (owner-uid label), or the Go operator did
/// (`ReconcileResultSecret` in pkg/resources/provider.go: a controller
/// ownerReference to the CR and no owner-uid label; labels a backup or
/// GitOps tool added since do not make it somebody else's, as the Go
/// operator wrote it regardless), or an earlier CR of the same
/// kind and name released it (`released_from`, see
/// [`RELEASED_FROM_ANNOTATION`]). Writing it once adds the label.
fn is_ours(secret: &Secret, owner_uid: &str, released_from: Option<&str>) -> bool {
    let labels = secret.metadata.labels.as_ref();
    let labelled = labels
        .and_then(|l| l.get(OWNER_UID_LABEL))
        .is_some_and(|uid| uid == owner_uid);
    let go_operator = labels.is_none_or(|l| !l.contains_key(OWNER_UID_LABEL))
        && secret
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner_uid && o.controller == Some(true));
    let released = (secret.metadata.annotations.as_ref())
        .and_then(|a| a.get(RELEASED_FROM_ANNOTATION))
        .is_some_and(|from| Some(from.as_str()) == released_from);
    labelled || go_operator || released
}

/// The data to write: the provider's details, except that an empty value
/// never replaces a value a person filled in (placeholder Secrets).
pub fn merged_data(
    details: &ConnectionDetails,
    existing: Option<&BTreeMap<String, ByteString>>,
) -> BTreeMap<String, ByteString> {
    details
        .0
        .iter()
        .map(|(k, v)| {
            let kept = existing
                .and_then(|e| e.get(k))
                .filter(|old| v.is_empty() && !old.0.is_empty());
            let value = kept
                .cloned()
                .unwrap_or_else(|| ByteString(v.clone().into_bytes()));
            (k.clone(), value)
        })
        .collect()
}

/// Names the data keys this operator wrote (names only, never values): a
/// key it no longer gives is removed, a key somebody else added is kept.
pub const KEYS_ANNOTATION: &str = "cro.integreatly.org/keys";

/// The field manager of the operator's writes of the Secret.
const FIELD_MANAGER: &str = "cloud-resource-operator";

/// Writes the Secret unless it is somebody else's. It is read from the
/// watch of this operator's Secrets. One that watch does not hold is most
/// often not made yet: it is created in one request, which cannot replace
/// a Secret somebody else made (the Go operator's, or anyone's) and then
/// reads that one instead.
pub async fn write(
    client: &Client,
    cache: &Scoped<Secret>,
    target: &Target<'_>,
    details: &ConnectionDetails,
) -> Result<Written, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), target.namespace);
    let cached = cache
        .get(target.namespace, target.name)
        .await
        .map_err(Error::Cache)?;
    let existing = match cached {
        Some(Some(secret)) => Some(Secret::clone(&secret)),
        // Not watched (another namespace): read, then create if absent.
        None => read(&api, target).await?,
        Some(None) => None,
    };
    let Some(live) = existing else {
        let data = merged_data(details, None);
        let placeholders = placeholders(&data);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        match api.create(&params, &desired(target, data)).await {
            Ok(created) => {
                cache.wrote(created);
                return Ok(Written::Ok { placeholders });
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(Error::kube(writing(target))(e)),
        }
        // Somebody else's, or ours made a moment ago and not shown by the
        // watch yet: a look tells.
        let Some(found) = read(&api, target).await? else {
            return Err(Error::Internal(format!(
                "Secret {}/{} already exists by the API server's answer to its create, yet reading it finds none; looking again",
                target.namespace, target.name
            )));
        };
        return update(&api, cache, target, details, &found).await;
    };
    update(&api, cache, target, details, &live).await
}

fn writing(target: &Target<'_>) -> String {
    format!("writing Secret {}/{}", target.namespace, target.name)
}

async fn read(api: &Api<Secret>, target: &Target<'_>) -> Result<Option<Secret>, Error> {
    api.get_opt(target.name).await.map_err(Error::kube(format!(
        "reading Secret {}/{}",
        target.namespace, target.name
    )))
}

/// Writes what `live` lacks of the Secret for `target`, unless `live` is
/// somebody else's.
async fn update(
    api: &Api<Secret>,
    cache: &Scoped<Secret>,
    target: &Target<'_>,
    details: &ConnectionDetails,
    live: &Secret,
) -> Result<Written, Error> {
    if !is_ours(live, target.owner_uid, Some(&target.released_from)) {
        return Ok(Written::Conflict(format!(
            "Secret {}/{} already exists and was not created for {}; it is left untouched: delete it or set spec.secretRef.name to a new name",
            target.namespace, target.name, target.owner_desc
        )));
    }
    let data = merged_data(details, live.data.as_ref());
    let placeholders = placeholders(&data);
    if let Some(patch) = update_patch(target, &data, live) {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let written = api
            .patch(target.name, &params, &Patch::Merge(&patch))
            .await
            .map_err(Error::kube(writing(target)))?;
        cache.wrote(written);
    }
    Ok(Written::Ok { placeholders })
}

/// The keys still empty (for a person to fill in).
fn placeholders(data: &BTreeMap<String, ByteString>) -> Vec<String> {
    data.iter()
        .filter(|(_, v)| v.0.is_empty())
        .map(|(k, _)| k.clone())
        .collect()
}

/// The keys [`KEYS_ANNOTATION`] of `secret` names.
fn written_keys(secret: &Secret) -> BTreeSet<&str> {
    let annotations = secret.metadata.annotations.as_ref();
    let keys = annotations.and_then(|a| a.get(KEYS_ANNOTATION));
    keys.iter()
        .flat_map(|k| k.split(','))
        .filter(|k| !k.is_empty())
        .collect()
}

fn keys_annotation(data: &BTreeMap<String, ByteString>) -> String {
    data.keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// The Secret as this operator creates it for `target`.
fn desired(target: &Target<'_>, data: BTreeMap<String, ByteString>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(target.name.to_string()),
            namespace: Some(target.namespace.to_string()),
            labels: Some(labels(target)),
            annotations: Some(BTreeMap::from([(
                KEYS_ANNOTATION.to_string(),
                keys_annotation(&data),
            )])),
            owner_references: target.owner_ref.clone().map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

fn labels(target: &Target<'_>) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (OWNER_UID_LABEL.to_string(), target.owner_uid.to_string()),
    ])
}

/// The merge patch that gives `live` the data, labels, owner and key list
/// of the Secret for `target`, and removes the keys this operator wrote
/// before and no longer gives; `None` when `live` has them all. It holds
/// `live`'s resourceVersion: the write fails (409) if the Secret changed
/// since, e.g. a person filled in a placeholder the watch has not shown
/// yet, and is retried on what the watch shows then.
fn update_patch(
    target: &Target<'_>,
    data: &BTreeMap<String, ByteString>,
    live: &Secret,
) -> Option<serde_json::Value> {
    let live_data = live.data.clone().unwrap_or_default();
    let mut changed: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .filter(|(k, v)| live_data.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    let dropped = written_keys(live)
        .into_iter()
        .filter(|k| !data.contains_key(*k) && live_data.contains_key(*k));
    changed.extend(dropped.map(|k| (k.to_string(), serde_json::Value::Null)));

    let mut metadata = serde_json::Map::new();
    let live_labels = live.metadata.labels.clone().unwrap_or_default();
    if labels(target)
        .iter()
        .any(|(k, v)| live_labels.get(k) != Some(v))
    {
        metadata.insert("labels".into(), serde_json::json!(labels(target)));
    }
    let keys = keys_annotation(data);
    let annotations = live.metadata.annotations.as_ref();
    if annotations.and_then(|a| a.get(KEYS_ANNOTATION)) != Some(&keys) {
        metadata.insert(
            "annotations".into(),
            serde_json::json!({ KEYS_ANNOTATION: keys }),
        );
    }
    // A merge patch replaces the list: the live owners are kept.
    let owners = live.metadata.owner_references.clone().unwrap_or_default();
    if let Some(ours) = &target.owner_ref
        && !owners.iter().any(|o| o.uid == ours.uid)
    {
        let mut all = owners;
        all.push(ours.clone());
        metadata.insert("ownerReferences".into(), serde_json::json!(all));
    }
    if changed.is_empty() && metadata.is_empty() {
        return None;
    }
    metadata.insert(
        "resourceVersion".into(),
        serde_json::json!(live.metadata.resource_version),
    );
    let mut patch = serde_json::json!({ "metadata": metadata });
    if !changed.is_empty() {
        patch["data"] = serde_json::Value::Object(changed);
    }
    Some(patch)
}

/// Deletes the Secret if (and only if) it was written for `owner_uid`.
pub async fn delete(
    client: &Client,
    namespace: &str,
    name: &str,
    owner_uid: &str,
) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let action = || format!("deleting Secret {namespace}/{name}");
    match api.get_opt(name).await.map_err(Error::kube(action()))? {
        Some(secret) if is_ours(&secret, owner_uid, None) => {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(Error::kube(action())(e)),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(labels: Option<&[(&str, &str)]>, owner: Option<(&str, Option<bool>)>) -> Secret {
        let mut s = Secret::default();
        s.metadata.labels = labels.map(|l| {
            l.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        });
        s.metadata.owner_references = owner.map(|(uid, controller)| {
            vec![OwnerReference {
                api_version: "integreatly.org/v1alpha1".into(),
                kind: "Postgres".into(),
                name: "db".into(),
                uid: uid.into(),
                controller,
                block_owner_deletion: Some(true),
            }]
        });
        s
    }

    #[test]
    fn ours_and_the_go_operators_secrets_are_written_others_never() {
        assert!(is_ours(
            &secret(Some(&[(OWNER_UID_LABEL, "u1")]), None),
            "u1",
            None
        ));
        // As the Go operator leaves it: controller reference, no labels.
        assert!(is_ours(&secret(None, Some(("u1", Some(true)))), "u1", None));
        assert!(is_ours(
            &secret(Some(&[]), Some(("u1", Some(true)))),
            "u1",
            None
        ));
        // Somebody else's.
        assert!(!is_ours(&secret(None, None), "u1", None));
        assert!(!is_ours(
            &secret(None, Some(("u2", Some(true)))),
            "u1",
            None
        ));
        assert!(!is_ours(&secret(None, Some(("u1", None))), "u1", None));
        // The Go operator's, labelled since by a backup or GitOps tool.
        assert!(is_ours(
            &secret(Some(&[("app", "x")]), Some(("u1", Some(true)))),
            "u1",
            None
        ));
        assert!(!is_ours(
            &secret(Some(&[(OWNER_UID_LABEL, "u2")]), Some(("u1", Some(true)))),
            "u1",
            None
        ));
        assert!(!is_ours(
            &secret(Some(&[(OWNER_UID_LABEL, "u2")]), None),
            "u1",
            None
        ));
    }

    #[test]
    fn a_secret_released_by_an_earlier_cr_of_the_same_kind_and_name_is_ours() {
        let mut released = secret(Some(&[(MANAGED_BY_LABEL, MANAGED_BY)]), None);
        released.metadata.annotations = Some(
            [(
                RELEASED_FROM_ANNOTATION.to_string(),
                "app/Postgres/db".to_string(),
            )]
            .into(),
        );
        assert!(is_ours(&released, "u2", Some("app/Postgres/db")));
        assert!(!is_ours(&released, "u2", Some("app/Redis/db")));
        assert!(!is_ours(&released, "u2", Some("other/Postgres/db")));
        // Deleting never reaches a released Secret.
        assert!(!is_ours(&released, "u2", None));
    }

    fn target() -> Target<'static> {
        Target {
            namespace: "app",
            name: "db-sec",
            owner_uid: "u1",
            owner_ref: secret(None, Some(("u1", None)))
                .metadata
                .owner_references
                .and_then(|o| o.into_iter().next()),
            owner_desc: "Postgres app/db".into(),
            released_from: "app/Postgres/db".into(),
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn a_created_secret_is_written_again_only_where_it_differs() {
        let mut live = desired(&target(), data(&[("host", "h"), ("tls", "true")]));
        live.metadata.resource_version = Some("7".into());
        // A key a person added is theirs.
        let mut with_theirs = live.clone();
        with_theirs.data = Some(data(&[("host", "h"), ("tls", "true"), ("note", "x")]));
        let same = data(&[("host", "h"), ("tls", "true")]);
        assert_eq!(update_patch(&target(), &same, &live), None);
        assert_eq!(update_patch(&target(), &same, &with_theirs), None);
        // The provider no longer gives tls: removed, the person's key kept.
        let patch = update_patch(&target(), &data(&[("host", "h2")]), &with_theirs);
        assert_eq!(
            patch,
            Some(serde_json::json!({
                "metadata": {"annotations": {KEYS_ANNOTATION: "host"}, "resourceVersion": "7"},
                "data": {"host": "aDI=", "tls": null}
            }))
        );
    }

    #[test]
    fn the_go_operators_secret_is_labelled_and_keeps_its_owner_and_keys() {
        // As pkg/resources/provider.go ReconcileResultSecret leaves it: a
        // controller reference to the CR, no labels, the keys it wrote.
        let mut go = secret(None, Some(("u1", Some(true))));
        go.data = Some(data(&[("host", "h"), ("extra", "e")]));
        go.metadata.resource_version = Some("3".into());
        let patch = update_patch(&target(), &data(&[("host", "h")]), &go)
            .unwrap_or_else(|| panic!("no patch"));
        assert_eq!(patch["metadata"]["labels"][OWNER_UID_LABEL], "u1");
        assert_eq!(patch["metadata"]["annotations"][KEYS_ANNOTATION], "host");
        assert!(
            patch["metadata"].get("ownerReferences").is_none(),
            "the owner is there already: {patch}"
        );
        assert!(patch.get("data").is_none(), "{patch}");
    }

    #[test]
    fn filled_in_values_survive_placeholders() {
        let details = ConnectionDetails(BTreeMap::from([
            ("bucketName".to_string(), String::new()),
            ("bucketRegion".to_string(), String::new()),
        ]));
        let existing = BTreeMap::from([("bucketName".to_string(), ByteString(b"filled".to_vec()))]);
        let data = merged_data(&details, Some(&existing));
        assert_eq!(data["bucketName"].0, b"filled");
        assert!(data["bucketRegion"].0.is_empty());
    }

    #[test]
    fn provider_values_replace_old_ones() {
        let details = ConnectionDetails(BTreeMap::from([("host".to_string(), "new".to_string())]));
        let existing = BTreeMap::from([("host".to_string(), ByteString(b"old".to_vec()))]);
        assert_eq!(merged_data(&details, Some(&existing))["host"].0, b"new");
    }
}
