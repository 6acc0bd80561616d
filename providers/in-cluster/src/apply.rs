//! Applying desired objects without needless writes: an object is read
//! first and server-side applied only when it lacks part of the desired
//! state (deleted, or edited by hand).

use std::fmt::Debug;

use cro_kube::Owned;
use cro_provider_api::{OWNER_UID_LABEL, Owner, ProviderError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{
    Resource,
    api::{DeleteParams, Patch, PatchParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{corrections::Corrections, merge::is_subset, objects::Objects};

pub const FIELD_MANAGER: &str = "cloud-resource-operator";

/// Where an object stands after `ensure`.
pub enum Applied<K> {
    /// Exists as desired.
    Current(K),
    /// Still being deleted (e.g. a PVC whose pod is going); recreated once gone.
    Terminating,
}

fn api_error(verb: &str, desired: &Value, e: kube::Error) -> ProviderError {
    cro_kube::provider_error(
        format!(
            "{verb} {} {}/{}",
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
    K: Resource + Owned + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    api.get_opt(name)
        .await
        .map_err(|e| api_error("reading", desired, e))
}

/// Whether an object is `owner`'s to change or delete: made for it (the
/// owner-uid label or a controller reference to it), or for an earlier CR
/// of the same kind and name (its objects outlive it until garbage
/// collection, or for good when it was deleted under the retain deletion
/// policy). A person's object, or another CR's, is not.
pub fn is_ours(meta: &ObjectMeta, owner: &Owner) -> bool {
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(OWNER_UID_LABEL))
        .is_some_and(|uid| *uid == owner.uid);
    let controlled = meta.owner_references.iter().flatten().any(|r| {
        r.controller == Some(true)
            && (r.uid == owner.uid
                || (r.kind == owner.kind
                    && r.name == owner.name
                    && r.api_version == owner.api_version))
    });
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    labelled || controlled || owner.takes_back(namespace, meta.annotations.as_ref())
}

/// The error for an object in the way that is not the CR's own.
pub fn not_ours(kind: &str, meta: &ObjectMeta, owner: &Owner) -> ProviderError {
    let (ns, name) = (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    );
    // The namespace's shared object store has one name it cannot change.
    let way_out = match owner.kind.as_str() {
        "Namespace" => format!(
            "rename or remove that {kind}: the namespace's shared object store (objectStore \"namespace\") is named {name}"
        ),
        _ => format!(
            "rename or remove that {kind}, or give the {} another name",
            owner.kind
        ),
    };
    ProviderError::permanent(format!(
        "{kind} {ns}/{name} exists and was not made for {} {}: the operator neither changes nor deletes it; {way_out}",
        owner.kind, owner.name,
    ))
}

/// Applies `desired` for `owner`, refusing an object of the same name
/// that is not its own; an object changed back after each correction waits
/// (see [`Corrections`]).
pub async fn ensure<K>(
    api: &Objects<K>,
    desired: &Value,
    owner: &Owner,
    corrections: &Corrections,
) -> Result<Applied<K>, ProviderError>
where
    K: Resource<DynamicType = ()> + Owned + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let mut had = Value::Null;
    if let Some(live) = read(api, desired).await? {
        if !is_ours(live.meta(), owner) {
            return Err(not_ours(&K::kind(&()), live.meta(), owner));
        }
        if live.meta().deletion_timestamp.is_some() {
            return Ok(Applied::Terminating);
        }
        let as_json = serde_json::to_value(&live).unwrap_or(Value::Null);
        if is_subset(desired, &as_json) {
            return Ok(Applied::Current(live));
        }
        had = as_json;
        let uid = live.meta().uid.clone().unwrap_or_default();
        let now = std::time::Instant::now();
        if let Err(held) = corrections.allowed(&uid, now) {
            // The cache keeps no managed fields: who else writes is read
            // from the API server.
            let fresh = api.fresh(name).await.ok().flatten();
            let meta = fresh.as_ref().map_or(live.meta(), |f| f.meta());
            return Err(fought_over(&K::kind(&()), meta, held.hold).retry_in(held.left));
        }
        corrections.corrected(&uid, now);
    }
    let applied = api
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(desired),
        )
        .await
        .map_err(|e| {
            resize_refused(desired, &had, &e).unwrap_or_else(|| api_error("applying", desired, e))
        })?;
    Ok(Applied::Current(applied))
}

/// The error for a claim's size change the API server refused (a PVC
/// grows only while bound and when its StorageClass allows volume
/// expansion, and never shrinks): what to change, in the tier or the
/// StorageClass. `None` for any other refusal.
fn resize_refused(desired: &Value, live: &Value, e: &kube::Error) -> Option<ProviderError> {
    let size = |o: &Value| {
        o["spec"]["resources"]["requests"]["storage"]
            .as_str()
            .map(str::to_string)
    };
    let (wanted, has) = (size(desired)?, size(live)?);
    // RBAC's own 403 ("User … cannot patch resource …") is about the
    // operator's permissions, not the claim's size.
    let refused = matches!(e, kube::Error::Api(s)
        if s.code == 422 || (s.code == 403 && !(s.message.contains("User \"") && s.message.contains(" cannot "))));
    if desired["kind"] != "PersistentVolumeClaim" || wanted == has || !refused {
        return None;
    }
    let class = live["spec"]["storageClassName"]
        .as_str()
        .unwrap_or("(none)");
    Some(ProviderError::permanent(format!(
        "the tier's pvcSpec asks PersistentVolumeClaim {}/{} for {wanted} of storage; it has {has}, and the API server refuses the change: {}. A claim grows only while bound and when its StorageClass allows volume expansion, and never shrinks: set allowVolumeExpansion: true on StorageClass {class} if its provisioner can grow volumes, or set the tier's pvcSpec resources.requests.storage back to {has}",
        live["metadata"]["namespace"].as_str().unwrap_or_default(),
        live["metadata"]["name"].as_str().unwrap_or_default(),
        cro_kube::described(e),
    )))
}

/// The error for an object changed back after each correction: who else
/// writes it (its managed fields' other managers), and how long the
/// operator waits after its last correction (the message stays the same
/// while it waits, so it is one Event).
fn fought_over(kind: &str, meta: &ObjectMeta, hold: std::time::Duration) -> ProviderError {
    let mut others: Vec<&str> = (meta.managed_fields.iter().flatten())
        .filter(|f| f.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|f| f.manager.as_deref())
        .filter(|m| *m != FIELD_MANAGER)
        .collect();
    others.sort_unstable();
    others.dedup();
    let who = match others.is_empty() {
        true => "a mutating admission webhook, as no other field manager is recorded".to_string(),
        false => format!("field manager {}", others.join(", ")),
    };
    let tier_key = match kind {
        "Deployment" => "strategy.deploymentSpec",
        "Service" => "strategy.serviceSpec",
        "PersistentVolumeClaim" => "strategy.pvcSpec",
        "ConfigMap" => "strategy.configMapData",
        _ => "the tier's strategy",
    };
    ProviderError::transient(format!(
        "{kind} {}/{} was changed back after each of the operator's last {} corrections (other writers: {who}): the operator corrects it again {}s after its last correction. Stop the other writer, or put its change in the tier ({tier_key})",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        crate::corrections::FREE,
        hold.as_secs(),
    ))
}

/// Adopts an object another operator made (the Go operator's): when it
/// exists, only this operator's labels and owner references are added and
/// its spec is left as it is; when it is missing, `desired` is created.
pub async fn adopt<K>(
    api: &Objects<K>,
    desired: &Value,
    owner: &Owner,
) -> Result<Applied<K>, ProviderError>
where
    K: Resource<DynamicType = ()> + Owned + Debug + Serialize + DeserializeOwned,
{
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let Some(live) = read(api, desired).await? else {
        return ensure(api, desired, owner, &Corrections::new(&Default::default())).await;
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
    K: Resource + Owned + Debug + Serialize + DeserializeOwned,
{
    let live = read(api, desired).await?;
    Ok(live.map(|l| serde_json::to_value(&l).unwrap_or(Value::Null)))
}

/// Deletes the named object if present and `owner`'s (or, with `adopted`,
/// the Go operator's layout this CR took over); true when it is gone, or
/// is not the CR's to delete.
pub async fn delete<K>(
    api: &Objects<K>,
    name: &str,
    owner: &Owner,
    adopted: bool,
) -> Result<bool, ProviderError>
where
    K: Resource<DynamicType = ()> + Owned + Debug + DeserializeOwned,
{
    let context =
        |e: kube::Error| cro_kube::provider_error(format!("deleting {} {name}", K::kind(&())), &e);
    let Some(live) = api.fresh(name).await.map_err(context)? else {
        return Ok(true);
    };
    if !adopted && !is_ours(live.meta(), owner) {
        return Ok(true);
    }
    if live.meta().deletion_timestamp.is_none() {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(true),
            Err(e) => return Err(context(e)),
        }
    }
    Ok(api.fresh(name).await.map_err(context)?.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server's words for a claim whose StorageClass does not
    /// allow expansion (kube-apiserver 1.35, PersistentVolumeClaimResize).
    fn refused(code: u16) -> kube::Error {
        answer(
            code,
            "persistentvolumeclaims \"db\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
        )
    }

    fn answer(code: u16, message: &str) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "reason": "Forbidden", "message": message,
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn a_refused_claim_size_says_what_to_change() {
        let claim = |size: &str| serde_json::json!({"kind": "PersistentVolumeClaim", "metadata": {"namespace": "ns", "name": "db"}, "spec": {"storageClassName": "standard", "resources": {"requests": {"storage": size}}}});
        let e = resize_refused(&claim("2Gi"), &claim("1Gi"), &refused(403))
            .unwrap_or_else(|| panic!("a refused growth is named"));
        let text = e.to_string();
        assert!(!e.is_transient(), "{text}");
        for part in [
            "PersistentVolumeClaim ns/db for 2Gi",
            "it has 1Gi",
            "only dynamically provisioned pvc",
            "allowVolumeExpansion: true on StorageClass standard",
            "back to 1Gi",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
        // Not a size change, not a refusal, or no claim: the usual error.
        assert!(resize_refused(&claim("1Gi"), &claim("1Gi"), &refused(403)).is_none());
        assert!(resize_refused(&claim("2Gi"), &claim("1Gi"), &refused(500)).is_none());
        assert!(resize_refused(&claim("2Gi"), &Value::Null, &refused(403)).is_none());
        // The operator's RBAC refusing the patch (the authorizer's words).
        let rbac = answer(
            403,
            "persistentvolumeclaims \"db\" is forbidden: User \"system:serviceaccount:cro:cloud-resource-operator\" cannot patch resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"ns\"",
        );
        assert!(resize_refused(&claim("2Gi"), &claim("1Gi"), &rbac).is_none());
    }

    fn owner(uid: &str) -> Owner {
        Owner {
            api_version: "integreatly.org/v1alpha1".into(),
            kind: "Postgres".into(),
            name: "web".into(),
            uid: uid.into(),
        }
    }

    fn meta(labels: serde_json::Value, refs: serde_json::Value) -> ObjectMeta {
        serde_json::from_value(serde_json::json!({"name": "web", "namespace": "team", "labels": labels, "ownerReferences": refs}))
            .unwrap_or_default()
    }

    #[test]
    fn only_objects_made_for_the_cr_are_its_own() {
        let me = owner("u1");
        let controller = |kind: &str, name: &str, uid: &str| serde_json::json!([{"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "name": name, "uid": uid, "controller": true}]);
        assert!(is_ours(
            &meta(
                serde_json::json!({OWNER_UID_LABEL: "u1"}),
                serde_json::json!([])
            ),
            &me
        ));
        assert!(is_ours(
            &meta(serde_json::json!({}), controller("Postgres", "web", "u1")),
            &me
        ));
        // An earlier Postgres of that name, gone, its objects not collected yet.
        assert!(is_ours(
            &meta(serde_json::json!({}), controller("Postgres", "web", "u0")),
            &me
        ));
        // A person's Service, another kind's or another CR's objects.
        assert!(!is_ours(
            &meta(serde_json::json!({"app": "web"}), serde_json::json!([])),
            &me
        ));
        assert!(!is_ours(
            &meta(serde_json::json!({}), controller("Redis", "web", "u2")),
            &me
        ));
        assert!(!is_ours(
            &meta(
                serde_json::json!({OWNER_UID_LABEL: "u2"}),
                serde_json::json!([])
            ),
            &me
        ));
        let e = not_ours(
            "Service",
            &meta(serde_json::json!({}), serde_json::json!([])),
            &me,
        )
        .to_string();
        assert!(
            e.contains("Service team/web exists and was not made for Postgres web"),
            "{e}"
        );
        assert!(e.contains("give the Postgres another name"), "{e}");
        // The namespace's shared store cannot be given another name.
        let namespace = Owner {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: "team".into(),
            uid: "n1".into(),
        };
        let e = not_ours(
            "Deployment",
            &meta(serde_json::json!({}), serde_json::json!([])),
            &namespace,
        )
        .to_string();
        assert!(
            e.contains("shared object store") && !e.contains("another name"),
            "{e}"
        );
    }
}
