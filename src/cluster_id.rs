//! The cluster ID that prefixes cloud identifiers: configured, else the
//! OpenShift infrastructure name (as the Go operator uses), else the
//! `kube-system` namespace UID (stable for a cluster's lifetime).

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};

pub async fn discover(client: &Client, configured: Option<&str>) -> Result<String, kube::Error> {
    if let Some(id) = configured.filter(|id| !id.is_empty()) {
        return Ok(id.to_string());
    }
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure");
    let infra: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "infrastructures"),
    );
    // Absent on non-OpenShift clusters: a 404 for the whole resource type.
    match infra.get_opt("cluster").await {
        Ok(Some(obj)) => {
            if let Some(name) = obj.data["status"]["infrastructureName"]
                .as_str()
                .filter(|n| !n.is_empty())
            {
                return Ok(name.to_string());
            }
        }
        Ok(None) => {}
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => {}
        Err(e) => return Err(e),
    }
    let ns = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await?;
    Ok(ns.metadata.uid.unwrap_or_default())
}
