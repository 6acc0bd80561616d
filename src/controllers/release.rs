//! Deleting a CR under the retain deletion policy: nothing the operator
//! made for it is deleted. Each object made for the CR (labelled with its
//! uid: the output Secret, credentials Secrets, an in-cluster workload's
//! Deployment, Service, PVC, ConfigMap and NetworkPolicy) loses its owner
//! reference to the CR, so the garbage collector keeps it, and is marked
//! with the CR it was released from, so a CR of the same kind, namespace
//! and name takes it over again ([`RELEASED_FROM_ANNOTATION`]).

use cro_provider_api::{OWNER_UID_LABEL, RELEASED_FROM_ANNOTATION};
use k8s_openapi::{
    NamespaceResourceScope,
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
        networking::v1::NetworkPolicy,
    },
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::reconcile::Error;

/// The CR whose objects are released.
pub struct Released<'a> {
    pub namespace: &'a str,
    pub uid: &'a str,
    /// `<namespace>/<Kind>/<name>` of the CR.
    pub from: String,
}

/// Releases every object of the CR's namespace made for it, and the
/// output Secret `secret` (`namespace`, `name`) wherever it is; returns
/// how many objects were released.
pub async fn release(
    client: &Client,
    cr: &Released<'_>,
    secret: (&str, &str),
) -> Result<usize, Error> {
    let labelled = ListParams::default().labels(&format!("{OWNER_UID_LABEL}={}", cr.uid));
    let mut count = 0;
    count += release_all::<Secret>(client, cr, &labelled).await?;
    count += release_all::<Deployment>(client, cr, &labelled).await?;
    count += release_all::<Service>(client, cr, &labelled).await?;
    count += release_all::<PersistentVolumeClaim>(client, cr, &labelled).await?;
    count += release_all::<ConfigMap>(client, cr, &labelled).await?;
    count += release_all::<NetworkPolicy>(client, cr, &labelled).await?;
    // An output Secret in another namespace (`secretRef.namespace`).
    let (namespace, name) = secret;
    if namespace != cr.namespace {
        let api = Api::<Secret>::namespaced(client.clone(), namespace);
        let found = api.get_opt(name).await;
        let found = found.map_err(Error::kube(format!("reading Secret {namespace}/{name}")))?;
        if let Some(secret) = found.filter(|s| made_for(s, cr.uid)) {
            release_one(&api, &secret, cr).await?;
            count += 1;
        }
    }
    Ok(count)
}

fn made_for<K: Resource>(obj: &K, uid: &str) -> bool {
    obj.labels().get(OWNER_UID_LABEL).is_some_and(|u| u == uid)
}

async fn release_all<K>(
    client: &Client,
    cr: &Released<'_>,
    params: &ListParams,
) -> Result<usize, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), cr.namespace);
    let what = || format!("listing the {}s made for {}", K::kind(&()), cr.from);
    let made = api.list(params).await.map_err(Error::kube(what()))?;
    for obj in &made.items {
        release_one(&api, obj, cr).await?;
    }
    Ok(made.items.len())
}

/// Drops the CR's owner reference and owner-uid label, and names the CR
/// it was released from. The resourceVersion makes it fail, and the
/// deletion retry, rather than drop a concurrent change to the owners.
async fn release_one<K>(api: &Api<K>, obj: &K, cr: &Released<'_>) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let owners: Vec<_> = (obj.owner_references().iter())
        .filter(|o| o.uid != cr.uid)
        .cloned()
        .collect();
    let patch = json!({"metadata": {
        "resourceVersion": obj.resource_version(),
        "ownerReferences": if owners.is_empty() { None } else { Some(owners) },
        "labels": {OWNER_UID_LABEL: null},
        "annotations": {RELEASED_FROM_ANNOTATION: cr.from},
    }});
    let name = obj.name_any();
    let what = format!("releasing {} {}/{name}", K::kind(&()), cr.namespace);
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(what))?;
    Ok(())
}
