//! The providers' credentials Secrets (`CredentialsStore`), kept by the
//! operator: read from its watch of its own Secrets, so a recheck or a
//! restart reads none from the API server; written with server-side
//! apply, owned by the CR. A Secret this process changed is read from the
//! API server until the watch shows that change, so no reconcile acts on
//! credentials older than its own last write (e.g. replacing a key it
//! just stored). Values are never logged or put in errors.

use std::{collections::BTreeMap, sync::Arc};

use cro_kube::{OwnedObjects, owned};
use cro_provider_api::{
    CredentialsStore, MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL, ProviderError,
    ResourceRequest, opaque_secret,
};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams},
};
use serde_json::json;

/// Whether the credentials Secret is this request's: made for its CR (its
/// owner UID label or owner reference), released by an earlier CR of its
/// kind and name, or left by the Go operator, which
/// wrote `<name>-aws-rds-credentials` with neither labels nor owner. A
/// Secret of the same name made for anything else is never read,
/// overwritten or deleted: a CR's name must not reach what is not its own.
fn claimable(secret: &Secret, req: &ResourceRequest) -> bool {
    let uid = req.owner.uid.as_str();
    let labels = secret.metadata.labels.as_ref();
    let owners = secret
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default();
    let labelled = labels
        .and_then(|l| l.get(OWNER_UID_LABEL))
        .is_some_and(|u| u == uid);
    let owned = owners.iter().any(|o| o.uid == uid);
    let go_shaped = owners.is_empty() && labels.is_none_or(|l| l.is_empty());
    let released = (req.owner).takes_back(&req.namespace, secret.metadata.annotations.as_ref());
    labelled || owned || go_shaped || minted_for_request(secret, &req.namespace) || released
}

/// The Cloud Credential Operator's label and annotation on a Secret it
/// fills for a CredentialsRequest (`syncAccessKeySecret`,
/// pkg/aws/actuator/actuator.go in openshift/cloud-credential-operator).
const CCO_REQUEST: &str = "cloudcredential.openshift.io/credentials-request";

/// Whether CCO filled this Secret for the CredentialsRequest of its own
/// name in `namespace`: the Go operator's keys (a bucket's, an
/// SMTPCredentialSet's), or one this operator asked for the same way.
/// CCO labels them, so they are not "Go-shaped", yet they are the key the
/// resource was given.
fn minted_for_request(secret: &Secret, namespace: &str) -> bool {
    let m = &secret.metadata;
    let labelled =
        (m.labels.as_ref()).is_some_and(|l| l.get(CCO_REQUEST).is_some_and(|v| v == "true"));
    let request = format!("{namespace}/{}", m.name.as_deref().unwrap_or_default());
    let annotated = (m.annotations.as_ref()).is_some_and(|a| a.get(CCO_REQUEST) == Some(&request));
    labelled && annotated && m.owner_references.as_deref().unwrap_or_default().is_empty()
}

fn not_claimable(req: &ResourceRequest, name: &str) -> ProviderError {
    ProviderError::permanent(format!(
        "Secret {}/{name} exists and was not made for {} {}/{} (its labels and owner say so): the operator keeps this resource's credentials there; delete or rename that Secret, or give the resource another name",
        req.namespace,
        req.kind.cr_kind(),
        req.namespace,
        req.name
    ))
}

/// The credentials Secrets, through the operator's client and its watch
/// of its own Secrets.
pub struct CredentialsSecrets {
    client: Client,
    /// The operator's watch of its own Secrets, which also answers with
    /// this store's writes until it shows them.
    cache: Option<Arc<dyn OwnedObjects>>,
}

impl CredentialsSecrets {
    pub fn new(client: Client, cache: Option<Arc<dyn OwnedObjects>>) -> Self {
        CredentialsSecrets { client, cache }
    }

    fn api(&self, namespace: &str) -> Api<Secret> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn credentials_requests(&self, namespace: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(CCO_GROUP, "v1", "CredentialsRequest");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "credentialsrequests");
        Api::namespaced_with(self.client.clone(), namespace, &resource)
    }
}

#[async_trait::async_trait]
impl CredentialsStore for CredentialsSecrets {
    async fn read(
        &self,
        req: &ResourceRequest,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
        let ns = req.namespace.as_str();
        let cached = self
            .cache
            .as_deref()
            .and_then(|c| owned::<Secret>(c, ns, name));
        // The watch's copy, or this store's own write the watch does not
        // show yet: never a copy older than what this process wrote.
        if let Some(secret) = &cached {
            if !claimable(secret, req) {
                return Err(not_claimable(req, name));
            }
            return Ok(Some(cro_kube::secret_strings(secret)));
        }
        let fresh = self
            .api(ns)
            .get_opt(name)
            .await
            .map_err(|e| cro_kube::provider_error(format!("reading Secret {ns}/{name}"), &e))?;
        match &fresh {
            Some(secret) if !claimable(secret, req) => Err(not_claimable(req, name)),
            _ => Ok(fresh.as_ref().map(cro_kube::secret_strings)),
        }
    }

    async fn write(
        &self,
        req: &ResourceRequest,
        name: &str,
        data: &BTreeMap<String, String>,
    ) -> Result<(), ProviderError> {
        let metadata = json!({
            "name": name, "namespace": req.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, OWNER_UID_LABEL: req.owner.uid},
            "ownerReferences": [req.owner.controller_reference()],
        });
        let data = data.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let secret = opaque_secret(metadata, data);
        let params = PatchParams::apply("cloud-resource-operator").force();
        let written = (self.api(&req.namespace))
            .patch(name, &params, &Patch::Apply(&secret))
            .await
            .map_err(|e| {
                cro_kube::provider_error(format!("writing Secret {}/{name}", req.namespace), &e)
            })?;
        if let Some(cache) = &self.cache {
            cache.wrote_secret(written);
        }
        Ok(())
    }

    async fn delete(&self, req: &ResourceRequest, name: &str) -> Result<(), ProviderError> {
        let found = (self.api(&req.namespace)).get_opt(name).await;
        let found = found.map_err(|e| {
            cro_kube::provider_error(format!("reading Secret {}/{name}", req.namespace), &e)
        })?;
        match found {
            None => return Ok(()),
            Some(secret) if !claimable(&secret, req) => return Ok(()),
            Some(_) => {}
        }
        let deleted = (self.api(&req.namespace))
            .delete(name, &DeleteParams::default())
            .await;
        match deleted {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                let what = format!("deleting Secret {}/{name}", req.namespace);
                return Err(cro_kube::provider_error(what, &e));
            }
        }
        if let Some(cache) = &self.cache {
            cache.deleted_secret(&req.namespace, name);
        }
        Ok(())
    }

    /// As the Go operator made them (`reconcileCredentialRequest`,
    /// pkg/providers/aws/credentials.go): `cloudcredential.openshift.io/v1`
    /// CredentialsRequest in the CR's namespace.
    async fn delete_credentials_request(
        &self,
        req: &ResourceRequest,
        name: &str,
    ) -> Result<(), ProviderError> {
        match self
            .credentials_requests(&req.namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            // No such request, or no CCO on this cluster.
            Err(kube::Error::Api(e)) if e.code == 404 => self.delete(req, name).await,
            Err(kube::Error::Api(e)) if e.code == 403 => Err(ProviderError::permanent(format!(
                "deleting CredentialsRequest {}/{name} (the Go operator's credentials, which the Cloud Credential Operator removes with it) is forbidden: apply deploy/openshift-migration/rbac.yaml",
                req.namespace
            ))),
            Err(e) => Err(cro_kube::provider_error(
                format!("deleting CredentialsRequest {}/{name}", req.namespace),
                &e,
            )),
        }
    }

    /// As the Go operator's `reconcileCredentialRequest`
    /// (pkg/providers/aws/credentials.go): the request and its Secret in
    /// the CR's namespace, an `AWSProviderSpec` of the statements. Owned
    /// by the CR besides, so it goes with it even if the operator does not
    /// see the deletion (CCO then removes the IAM user it made).
    async fn request_credentials(
        &self,
        req: &ResourceRequest,
        name: &str,
        (statement_entries, ask): (&serde_json::Value, bool),
    ) -> Result<bool, ProviderError> {
        let ns = req.namespace.as_str();
        if !ask {
            // A 404 either way: no such request, or no CCO.
            let found = self.credentials_requests(ns).get_opt(name).await;
            return match found {
                Ok(found) => Ok(found.is_some()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    Err(ProviderError::permanent(format!(
                        "reading CredentialsRequest {ns}/{name} (where the Cloud Credential Operator mints the resource's key) is forbidden: apply deploy/openshift-migration/rbac.yaml"
                    )))
                }
                Err(e) => Err(cro_kube::provider_error(
                    format!("reading CredentialsRequest {ns}/{name}"),
                    &e,
                )),
            };
        }
        let request = json!({
            "apiVersion": format!("{CCO_GROUP}/v1"), "kind": "CredentialsRequest",
            "metadata": {
                "name": name, "namespace": ns,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY, OWNER_UID_LABEL: req.owner.uid},
                "ownerReferences": [req.owner.controller_reference()],
            },
            "spec": {
                "providerSpec": {
                    "apiVersion": format!("{CCO_GROUP}/v1"), "kind": "AWSProviderSpec",
                    "statementEntries": statement_entries,
                },
                "secretRef": {"name": name, "namespace": ns},
            },
        });
        let params = PatchParams::apply("cloud-resource-operator").force();
        match (self.credentials_requests(ns))
            .patch(name, &params, &Patch::Apply(&request))
            .await
        {
            Ok(_) => Ok(true),
            // The API is not served: no CCO on this cluster.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
            Err(kube::Error::Api(e)) if e.code == 403 => Err(ProviderError::permanent(format!(
                "creating CredentialsRequest {ns}/{name} (the Cloud Credential Operator mints the resource's key for it, as for the Go operator) is forbidden: apply deploy/openshift-migration/rbac.yaml"
            ))),
            Err(e) => Err(cro_kube::provider_error(
                format!("writing CredentialsRequest {ns}/{name}"),
                &e,
            )),
        }
    }
}

const CCO_GROUP: &str = "cloudcredential.openshift.io";

#[cfg(test)]
mod tests {
    use cro_provider_api::ResourceKind;

    use super::*;

    fn secret(value: serde_json::Value) -> Secret {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    /// CCO labels the Secret it fills (`syncAccessKeySecret`), so it is
    /// not Go-shaped, yet it is the key the Go operator handed out.
    #[test]
    fn a_key_cco_filled_for_the_request_of_its_name_here_is_claimable() {
        let mut req = ResourceRequest::offline(ResourceKind::BlobStorage, json!({}));
        req.namespace = "ns".into();
        let filled_for = |request: &str| {
            secret(json!({"metadata": {"name": "cro-aws-s3-b-creds",
                "labels": {CCO_REQUEST: "true"}, "annotations": {CCO_REQUEST: request}}}))
        };
        assert!(claimable(&filled_for("ns/cro-aws-s3-b-creds"), &req));
        assert!(!claimable(&filled_for("other/cro-aws-s3-b-creds"), &req));
        assert!(!claimable(&filled_for("ns/another-request"), &req));
        let labelled =
            secret(json!({"metadata": {"name": "cro-aws-s3-b-creds", "labels": {"app": "x"}}}));
        assert!(!claimable(&labelled, &req));
        let plain = secret(json!({"metadata": {"name": "cro-aws-s3-b-creds"}}));
        assert!(claimable(&plain, &req));
    }
}
