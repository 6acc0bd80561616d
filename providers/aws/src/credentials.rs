//! Credentials that exist only once (an RDS master password, an IAM secret
//! key) kept in a Secret beside the CR, so they are generated once and
//! never lost. Values are never logged or put in errors.

use std::collections::BTreeMap;

use cro_provider_api::{ProviderError, ResourceRequest};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams},
};
use rand::{Rng, distr::Alphanumeric};
use serde_json::json;

use cro_provider_api::{MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// Makes a missing credential value.
pub type Generator = fn() -> String;

pub fn random_password() -> String {
    rand::rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect()
}

fn decode(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, v)| String::from_utf8(v.0).ok().map(|v| (k, v)))
        .collect()
}

/// Reads the Secret `name`.
pub async fn read(
    client: &Client,
    req: &ResourceRequest,
    name: &str,
) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &req.namespace);
    let secret = api.get_opt(name).await.map_err(|e| {
        ProviderError::transient(format!("reading Secret {}/{name}: {e}", req.namespace))
    })?;
    Ok(secret.as_ref().map(decode))
}

/// Writes `data` to the Secret `name`, owned by the CR.
pub async fn write(
    client: &Client,
    req: &ResourceRequest,
    name: &str,
    data: &BTreeMap<String, String>,
) -> Result<(), ProviderError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &req.namespace);
    let data: BTreeMap<String, ByteString> = data
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
        .collect();
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": name, "namespace": req.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, OWNER_UID_LABEL: req.owner.uid},
            "ownerReferences": [{"apiVersion": req.owner.api_version, "kind": req.owner.kind, "name": req.owner.name,
                                 "uid": req.owner.uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "type": "Opaque",
        "data": data,
    });
    api.patch(
        name,
        &PatchParams::apply("cloud-resource-operator").force(),
        &Patch::Apply(&secret),
    )
    .await
    .map_err(|e| kube_error(format!("writing Secret {}/{name}: {e}", req.namespace), &e))?;
    Ok(())
}

/// A failed call to the API server, as a provider error of the right kind:
/// a namespace being deleted (its NamespaceLifecycle admission says so in
/// the status's causes) is waited out, anything else retried.
fn kube_error(message: String, e: &kube::Error) -> ProviderError {
    let terminating = matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")));
    let kind = if terminating {
        cro_provider_api::ErrorKind::NamespaceTerminating
    } else {
        cro_provider_api::ErrorKind::Transient
    };
    ProviderError::new(kind, message)
}

/// `keys` from the Secret, generating (and storing) any that are missing.
pub async fn ensure(
    client: &Client,
    req: &ResourceRequest,
    name: &str,
    defaults: &[(&str, Generator)],
) -> Result<BTreeMap<String, String>, ProviderError> {
    let mut data = read(client, req, name).await?.unwrap_or_default();
    let missing: Vec<_> = defaults
        .iter()
        .filter(|(k, _)| data.get(*k).is_none_or(String::is_empty))
        .collect();
    if !missing.is_empty() {
        for (k, make) in missing {
            data.insert(k.to_string(), make());
        }
        write(client, req, name, &data).await?;
    }
    Ok(data)
}

pub async fn delete(
    client: &Client,
    req: &ResourceRequest,
    name: &str,
) -> Result<(), ProviderError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &req.namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(ProviderError::transient(format!(
            "deleting Secret {}/{name}: {e}",
            req.namespace
        ))),
    }
}
