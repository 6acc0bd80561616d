//! Applying desired objects without needless writes: an object is read
//! first and server-side applied only when it lacks part of the desired
//! state (deleted, or edited by hand).

use std::fmt::Debug;

use cro_provider_api::ProviderError;
use kube::{
    Resource,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{
    merge::is_subset,
    objects::{Cached, Objects},
};

pub const FIELD_MANAGER: &str = "cloud-resource-operator";

/// Where an object stands after `ensure`.
pub enum Applied<K> {
    /// Exists as desired.
    Current(K),
    /// Still being deleted (e.g. a PVC whose pod is going); recreated once gone.
    Terminating,
}

/// The cause the API server gives when a namespace being deleted refuses
/// new objects (its NamespaceLifecycle admission).
pub fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// A failed call to the API server, as a provider error of the right kind.
pub fn kube_error(message: String, e: &kube::Error) -> ProviderError {
    let kind = if namespace_terminating(e) {
        cro_provider_api::ErrorKind::NamespaceTerminating
    } else {
        cro_provider_api::ErrorKind::Transient
    };
    ProviderError::new(kind, message)
}

fn api_error(verb: &str, desired: &Value, e: kube::Error) -> ProviderError {
    kube_error(
        format!(
            "{verb} {} {}/{}: {e}",
            desired["kind"].as_str().unwrap_or("object"),
            desired["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default(),
            desired["metadata"]["name"].as_str().unwrap_or_default(),
        ),
        &e,
    )
}

/// The live object `desired` names (`None` when absent).
async fn read<K>(api: &Objects<K>, desired: &Value) -> Result<Option<K>, ProviderError>
where
    K: Resource + Cached + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    api.get_opt(name)
        .await
        .map_err(|e| api_error("reading", desired, e))
}

pub async fn ensure<K>(api: &Objects<K>, desired: &Value) -> Result<Applied<K>, ProviderError>
where
    K: Resource + Cached + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    if let Some(live) = read(api, desired).await? {
        if live.meta().deletion_timestamp.is_some() {
            return Ok(Applied::Terminating);
        }
        let as_json = serde_json::to_value(&live).unwrap_or(Value::Null);
        if is_subset(desired, &as_json) {
            return Ok(Applied::Current(live));
        }
    }
    let applied = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(desired),
        )
        .await
        .map_err(|e| api_error("applying", desired, e))?;
    Ok(Applied::Current(applied))
}

/// Adopts an object another operator made (the Go operator's): when it
/// exists, only this operator's labels and owner references are added and
/// its spec is left as it is; when it is missing, `desired` is created.
pub async fn adopt<K>(api: &Objects<K>, desired: &Value) -> Result<Applied<K>, ProviderError>
where
    K: Resource + Cached + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let Some(live) = read(api, desired).await? else {
        return ensure(api, desired).await;
    };
    if live.meta().deletion_timestamp.is_some() {
        return Ok(Applied::Terminating);
    }
    let metadata_only = adoption_view(desired);
    let as_json = serde_json::to_value(&live).unwrap_or(Value::Null);
    if is_subset(&metadata_only, &as_json) {
        return Ok(Applied::Current(live));
    }
    let applied = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&metadata_only),
        )
        .await
        .map_err(|e| api_error("adopting", desired, e))?;
    Ok(Applied::Current(applied))
}

/// The part of `desired` that adopting another operator's object asserts:
/// this operator's labels, annotations and owner references.
pub fn adoption_view(desired: &Value) -> Value {
    let mut metadata = serde_json::json!({
        "name": desired["metadata"]["name"],
        "namespace": desired["metadata"]["namespace"],
        "labels": desired["metadata"]["labels"],
        "ownerReferences": desired["metadata"]["ownerReferences"],
    });
    if let Some(annotations) = desired["metadata"].get("annotations") {
        metadata["annotations"] = annotations.clone();
    }
    serde_json::json!({
        "apiVersion": desired["apiVersion"],
        "kind": desired["kind"],
        "metadata": metadata,
    })
}

/// The live object `desired` names, as JSON (`None` when absent).
pub async fn live<K>(api: &Objects<K>, desired: &Value) -> Result<Option<Value>, ProviderError>
where
    K: Resource + Cached + Debug + Serialize + DeserializeOwned,
{
    let live = read(api, desired).await?;
    Ok(live.map(|l| serde_json::to_value(&l).unwrap_or(Value::Null)))
}

/// Deletes the named object if present; true when it is gone.
pub async fn delete<K>(api: &Objects<K>, name: &str) -> Result<bool, ProviderError>
where
    K: Resource<DynamicType = ()> + Cached + Debug + DeserializeOwned,
{
    let context =
        |e: kube::Error| ProviderError::transient(format!("deleting {} {name}: {e}", K::kind(&())));
    let Some(live) = api.fresh(name).await.map_err(context)? else {
        return Ok(true);
    };
    if live.meta().deletion_timestamp.is_none() {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(true),
            Err(e) => return Err(context(e)),
        }
    }
    Ok(api.fresh(name).await.map_err(context)?.is_none())
}
