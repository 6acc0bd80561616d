//! The operator's writes of a CR's own: `spec.maintenanceWindow` back to
//! false, the recorded identifier, and the connection Secret. Each notes
//! the version it left the CR at, so its echo wakes no reconcile.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::{
    api::{Phase, RESOURCE_IDENTIFIER_ANNOTATION, SecretRef},
    controllers::kinds::ResourceCr,
    reconcile::{
        Context, Error, Report,
        output_secret::{self, Target, Written},
    },
};

/// The Go operator's contract: once the changes a maintenance window
/// allowed were requested, `spec.maintenanceWindow` goes back to false.
/// Guarded by a `test`, so a person's concurrent edit is never overwritten.
pub(super) async fn close_maintenance_window<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
) -> Result<(), Error> {
    let api: kube::Api<K> =
        kube::Api::namespaced(ctx.client.clone(), &cr.namespace().unwrap_or_default());
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/spec/maintenanceWindow", "value": true},
        {"op": "replace", "path": "/spec/maintenanceWindow", "value": false}
    ]))
    .map_err(|e| Error::Internal(format!("building the maintenanceWindow patch: {e}")))?;
    let closed = api
        .patch(
            &cr.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(patch),
        )
        .await
        .map_err(Error::kube(format!(
            "setting spec.maintenanceWindow of {} back to false",
            cr.name_any()
        )))?;
    ctx.wrote(cr, closed.resource_version());
    Ok(())
}

/// Records the cloud identifier on the CR, so a resource that later
/// vanishes is reported instead of silently re-created.
pub(super) async fn record_identifier<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    id: &str,
) -> Result<(), Error> {
    let api: kube::Api<K> =
        kube::Api::namespaced(ctx.client.clone(), &cr.namespace().unwrap_or_default());
    let patch =
        serde_json::json!({"metadata": {"annotations": {RESOURCE_IDENTIFIER_ANNOTATION: id}}});
    let recorded = api
        .patch(
            &cr.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "recording {RESOURCE_IDENTIFIER_ANNOTATION} on {}",
            cr.name_any()
        )))?;
    ctx.wrote(cr, recorded.resource_version());
    Ok(())
}

/// Writes the connection Secret and sets the report's phase and message
/// from how that went.
pub(super) async fn publish_secret<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    secret_ns: &str,
    details: &cro_provider_api::ConnectionDetails,
    report: &mut Report,
) -> Result<(), Error> {
    let secret_name = cr.spec().secret_ref.name.clone();
    let same_ns = cr.namespace().as_deref() == Some(secret_ns);
    let target = Target {
        namespace: secret_ns,
        name: &secret_name,
        owner_uid: cr.meta().uid.as_deref().unwrap_or_default(),
        released_from: format!(
            "{}/{}/{}",
            cr.namespace().unwrap_or_default(),
            K::kind(&()),
            cr.name_any()
        ),
        owner_ref: same_ns
            .then(|| cr.controller_owner_ref(&()).map(not_controller))
            .flatten(),
        owner_desc: format!(
            "{} {}/{}",
            K::kind(&()),
            cr.namespace().unwrap_or_default(),
            cr.name_any()
        ),
    };
    match output_secret::write(&ctx.client, &ctx.owned.secrets, &target, details).await? {
        Written::Conflict(message) => {
            report.phase = Phase::Failed;
            report.message = message;
        }
        Written::Ok { placeholders } => {
            report.phase = Phase::Complete;
            report.secret_ref = Some(SecretRef {
                name: secret_name.clone(),
                namespace: Some(secret_ns.to_string()),
            });
            report.message = if placeholders.is_empty() {
                "successfully reconciled".into()
            } else {
                format!(
                    "Secret {secret_ns}/{secret_name} holds placeholders for {}: this provider does not provision the service; fill the values in (they are kept)",
                    placeholders.join(", ")
                )
            };
        }
    }
    Ok(())
}

/// The output Secret is owned by the CR for garbage collection, but is not
/// its controller object (the provider's children are); and it does not
/// block the CR's deletion (see `Owner::controller_reference`).
fn not_controller(mut o: OwnerReference) -> OwnerReference {
    o.controller = None;
    o.block_owner_deletion = None;
    o
}
