//! The output Secret: written only when it was made for this CR (by this
//! operator, or by the Go operator before it), never over a Secret somebody
//! else made.

use std::collections::BTreeMap;

use cro_provider_api::ConnectionDetails;
use k8s_openapi::{
    ByteString,
    api::core::v1::Secret,
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};

use super::Error;
use crate::cache::Scoped;

pub use cro_provider_api::{MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// Where the Secret goes and who it is for.
pub struct Target<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub owner_uid: &'a str,
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
/// ownerReference to the CR and no labels). Writing it once adds the label.
fn is_ours(secret: &Secret, owner_uid: &str) -> bool {
    let labels = secret.metadata.labels.as_ref();
    let labelled = labels
        .and_then(|l| l.get(OWNER_UID_LABEL))
        .is_some_and(|uid| uid == owner_uid);
    let go_operator = labels.is_none_or(|l| l.is_empty())
        && secret
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner_uid && o.controller == Some(true));
    labelled || go_operator
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

/// Writes the Secret unless it is somebody else's. It is read from the
/// watch of this operator's Secrets; only a Secret that watch does not hold
/// (not written yet, the Go operator's, or somebody else's) is read from
/// the API server.
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
        _ => api.get_opt(target.name).await.map_err(Error::kube(format!(
            "reading Secret {}/{}",
            target.namespace, target.name
        )))?,
    };
    if let Some(secret) = &existing
        && !is_ours(secret, target.owner_uid)
    {
        return Ok(Written::Conflict(format!(
            "Secret {}/{} already exists and was not created for {}; it is left untouched: delete it or set spec.secretRef.name to a new name",
            target.namespace, target.name, target.owner_desc
        )));
    }
    let data = merged_data(details, existing.as_ref().and_then(|s| s.data.as_ref()));
    let placeholders = data
        .iter()
        .filter(|(_, v)| v.0.is_empty())
        .map(|(k, _)| k.clone())
        .collect();
    let secret = desired(target, data, existing.as_ref());
    if !existing.as_ref().is_some_and(|live| holds(live, &secret)) {
        let written = api
            .patch(
                target.name,
                &PatchParams::apply("cloud-resource-operator").force(),
                &Patch::Apply(&secret),
            )
            .await
            .map_err(Error::kube(format!(
                "writing Secret {}/{}",
                target.namespace, target.name
            )))?;
        cache.wrote(written);
    }
    Ok(Written::Ok { placeholders })
}

/// The Secret as this operator writes it for `target`.
fn desired(
    target: &Target<'_>,
    data: BTreeMap<String, ByteString>,
    existing: Option<&Secret>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(target.name.to_string()),
            namespace: Some(target.namespace.to_string()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
                (OWNER_UID_LABEL.to_string(), target.owner_uid.to_string()),
            ])),
            owner_references: target.owner_ref.clone().map(|o| vec![o]),
            // The write fails (409) if the Secret changed since it was
            // read, e.g. a person filled in a placeholder the cache has not
            // seen yet; it is retried on what the watch sees then.
            resource_version: existing.and_then(|s| s.metadata.resource_version.clone()),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// Whether `live` already has `desired`'s data, labels and owner.
fn holds(live: &Secret, desired: &Secret) -> bool {
    let labels = live.metadata.labels.clone().unwrap_or_default();
    let owners = live.metadata.owner_references.iter().flatten();
    live.data == desired.data
        && desired
            .metadata
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v))
        && desired
            .metadata
            .owner_references
            .iter()
            .flatten()
            .all(|want| owners.clone().any(|o| o.uid == want.uid))
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
        Some(secret) if is_ours(&secret, owner_uid) => {
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
            "u1"
        ));
        // As the Go operator leaves it: controller reference, no labels.
        assert!(is_ours(&secret(None, Some(("u1", Some(true)))), "u1"));
        assert!(is_ours(&secret(Some(&[]), Some(("u1", Some(true)))), "u1"));
        // Somebody else's.
        assert!(!is_ours(&secret(None, None), "u1"));
        assert!(!is_ours(&secret(None, Some(("u2", Some(true)))), "u1"));
        assert!(!is_ours(&secret(None, Some(("u1", None))), "u1"));
        assert!(!is_ours(
            &secret(Some(&[("app", "x")]), Some(("u1", Some(true)))),
            "u1"
        ));
        assert!(!is_ours(
            &secret(Some(&[(OWNER_UID_LABEL, "u2")]), None),
            "u1"
        ));
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
