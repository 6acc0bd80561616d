//! Objects whose spec does not parse (stored under an older or looser
//! schema, or written by another tool). They are reported — one log line
//! without the object body, a Warning Event, the `invalid_object` error
//! metric, `failed` in status — and skipped until they change; the other
//! objects of the kind are unaffected. Deleting one never hangs: the
//! finalizer goes once nothing outside the cluster can be left behind.

use std::time::Instant;

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    core::{DeserializeGuard, DynamicObject, error_boundary::InvalidObject},
    discovery::ApiResource,
    runtime::{controller::Action, events::EventType},
};
use serde_json::json;
use tracing::warn;

use super::{Context, Error, Managed, finalizer, publish, truncate};
use crate::api::{Phase, RESOURCE_IDENTIFIER_ANNOTATION};

/// Reports an object whose spec does not parse as `failed`, naming the
/// field, and leaves it until it changes.
pub async fn report<K: Managed>(
    obj: &DeserializeGuard<K>,
    invalid: &InvalidObject,
    ctx: &Context,
) -> Result<Action, Error> {
    let started = Instant::now();
    let kind = K::kind(&());
    let error = match field_error::<K>(obj, ctx).await {
        Some(located) => located,
        None => invalid.error.clone(),
    };
    // Cut it so a huge value cannot flood the log or the Event.
    let error = truncate(&error, 300);
    let result = handle(obj, &error, ctx).await;
    ctx.metrics
        .reconciled(&kind, started.elapsed(), Some("invalid_object"));
    result
}

/// The guard's error does not say where in the object it is; reading the
/// object once more (only for invalid objects) finds the field path.
async fn field_error<K: Managed>(obj: &DeserializeGuard<K>, ctx: &Context) -> Option<String> {
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &obj.namespace().unwrap_or_default(),
        &resource,
    );
    let raw = serde_json::to_value(api.get(&obj.name_any()).await.ok()?).ok()?;
    let err = serde_path_to_error::deserialize::<_, K>(raw).err()?;
    Some(format!("{}: {}", err.path(), err.inner()))
}

async fn handle<K: Managed>(
    obj: &DeserializeGuard<K>,
    error: &str,
    ctx: &Context,
) -> Result<Action, Error> {
    let kind = K::kind(&());
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<DeserializeGuard<K>> = Api::namespaced(ctx.client.clone(), &ns);
    let identifier = obj
        .annotations()
        .get(RESOURCE_IDENTIFIER_ANNOTATION)
        .filter(|id| !id.is_empty())
        .cloned();
    let message = if obj.meta().deletion_timestamp.is_some() && finalizer::has_ours(obj) {
        match identifier {
            // Nothing was recorded outside the cluster, and what the
            // in-cluster provider made carries owner references, so the
            // garbage collector removes it.
            None => {
                finalizer::remove(&api, obj).await?;
                warn!(
                    error,
                    "spec cannot be read; removed the finalizer of this deleted {kind}"
                );
                return Ok(Action::await_change());
            }
            Some(id) => format!(
                "cannot delete cloud resource {id}: this {kind}'s spec cannot be read ({error}); fix the spec with kubectl edit so cleanup can run, or remove the finalizer {} to leave {id} in place",
                finalizer::FINALIZER
            ),
        }
    } else {
        format!(
            "this {kind}'s spec cannot be read ({error}); it is skipped until it is fixed (kubectl edit)"
        )
    };
    warn!(
        error,
        "spec cannot be read; skipping this object until it changes"
    );
    publish(ctx, obj, EventType::Warning, "InvalidSpec", &message).await;
    // A merge patch of the same values is a no-op for the API server (no
    // new resourceVersion, so no new watch event and no loop).
    let status = json!({"status": {"phase": Phase::Failed.as_str(), "message": message}});
    // Best effort: an API server without validation ratcheting may refuse
    // any write to an object that breaks the current schema.
    if let Err(e) = api
        .patch_status(
            &obj.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
    {
        warn!(error = %e, "could not record the invalid spec in status");
    }
    Ok(Action::await_change())
}
