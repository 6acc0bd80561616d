//! The cluster ID that prefixes cloud identifiers: configured, else the
//! OpenShift infrastructure name (as the Go operator uses, so its
//! resources are found again), else one derived from the `kube-system`
//! namespace UID (stable for a cluster's lifetime).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind},
};

/// Where the cluster ID came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Configured,
    Infrastructure,
    KubeSystem,
}

/// A configured cluster ID no valid identifier can start with.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error(
    "--cluster-id (CLUSTER_ID) {id:?} cannot prefix valid AWS identifiers: only letters and digits are kept, and the first one must be a letter (RDS and ElastiCache identifiers must start with a letter); choose e.g. \"c{kept}\""
)]
pub struct ClusterIdError {
    id: String,
    kept: String,
}

/// Checks a configured cluster ID: identifiers start with it, and RDS and
/// ElastiCache identifiers must start with a letter, so it must too (after
/// dropping everything but letters and digits, as identifiers do).
pub fn check_configured(id: &str) -> Result<(), ClusterIdError> {
    let kept: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if kept.starts_with(|c: char| c.is_ascii_alphabetic()) {
        Ok(())
    } else {
        let id = id.to_string();
        Err(ClusterIdError { id, kept })
    }
}

/// The cluster ID for a plain Kubernetes cluster: `k` and the first 8 hex
/// digits of the `kube-system` UID. The UID itself is 36 characters (the
/// identifier is 40), leaves no room for namespace and name, and starts
/// with a digit 10 times in 16, which RDS and ElastiCache refuse.
pub fn from_kube_system_uid(uid: &str) -> String {
    let hex: String = uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(8)
        .collect();
    format!("k{}", hex.to_ascii_lowercase())
}

/// The cluster ID: `configured`, else the OpenShift infrastructure name,
/// else derived from the `kube-system` UID.
pub async fn discover(
    client: &Client,
    configured: Option<&str>,
    infrastructure: Option<&serde_json::Value>,
) -> Result<(String, Source), kube::Error> {
    if let Some(id) = configured.filter(|id| !id.is_empty()) {
        return Ok((id.to_string(), Source::Configured));
    }
    if let Some(name) = infrastructure
        .and_then(|i| i["status"]["infrastructureName"].as_str())
        .filter(|n| !n.is_empty())
    {
        return Ok((name.to_string(), Source::Infrastructure));
    }
    let ns = Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await?;
    let uid = ns.metadata.uid.unwrap_or_default();
    Ok((from_kube_system_uid(&uid), Source::KubeSystem))
}

/// Why `Infrastructure/cluster` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InfrastructureError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// OpenShift, where it holds the Go operator's cluster ID, but the
    /// operator may not read it: another cluster ID would rename every
    /// resource the Go operator made.
    #[error(
        "this is an OpenShift cluster (API group {INFRASTRUCTURE_GROUP} is served) but the operator may not get infrastructures.{INFRASTRUCTURE_GROUP} \"cluster\", which holds the cluster ID the Go operator named every cloud resource with: grant it (deploy/rbac/cluster_role.yaml, or the Helm chart's RBAC), or set --cluster-id (CLUSTER_ID) to that infrastructure name"
    )]
    Forbidden,
}

const INFRASTRUCTURE_GROUP: &str = "config.openshift.io";

/// OpenShift's `Infrastructure/cluster` (`None` on other clusters), where
/// the Go operator reads the cluster ID, the default AWS region and the
/// user-defined resource tags.
pub async fn infrastructure(
    client: &Client,
) -> Result<Option<serde_json::Value>, InfrastructureError> {
    let gvk = GroupVersionKind::gvk(INFRASTRUCTURE_GROUP, "v1", "Infrastructure");
    let infra: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "infrastructures"),
    );
    match infra.get_opt("cluster").await {
        Ok(obj) => Ok(obj.map(|o| o.data)),
        // Absent on other clusters: a 404 for the whole resource type.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        // Authorization comes before routing, so a plain cluster answers
        // 403 too when RBAC grants nothing: only discovery (readable by
        // every authenticated user) tells OpenShift apart.
        Err(kube::Error::Api(e)) if e.code == 403 => {
            let groups = client.list_api_groups().await?;
            match forbidden_matters(groups.groups.iter().map(|g| g.name.as_str())) {
                true => Err(InfrastructureError::Forbidden),
                false => Ok(None),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether a forbidden Infrastructure read hides the cluster ID (pure):
/// only where the cluster serves its API group.
fn forbidden_matters<'a>(mut groups: impl Iterator<Item = &'a str>) -> bool {
    groups.any(|g| g == INFRASTRUCTURE_GROUP)
}

/// OpenShift's pod and service networks (Network "cluster" of
/// config.openshift.io: `spec.clusterNetwork[].cidr`, `spec.serviceNetwork`),
/// which a new standalone database VPC keeps clear of, as the Go operator
/// does; none on other clusters, or when it cannot be read (said once).
pub async fn pod_and_service_blocks(client: &Client) -> Vec<String> {
    let gvk = GroupVersionKind::gvk(INFRASTRUCTURE_GROUP, "v1", "Network");
    let networks: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "networks"),
    );
    match networks.get_opt("cluster").await {
        Ok(network) => network.map(|n| network_blocks(&n.data)).unwrap_or_default(),
        Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "reading networks.config.openshift.io \"cluster\": a new standalone database VPC avoids only the cluster VPC's blocks, not the pod and service networks");
            Vec::new()
        }
    }
}

/// The blocks a Network "cluster" names (pure).
fn network_blocks(network: &serde_json::Value) -> Vec<String> {
    let spec = &network["spec"];
    let pods = (spec["clusterNetwork"].as_array().into_iter().flatten())
        .filter_map(|n| n["cidr"].as_str());
    let services =
        (spec["serviceNetwork"].as_array().into_iter().flatten()).filter_map(|n| n.as_str());
    pods.chain(services).map(str::to_string).collect()
}

/// The Infrastructure's default AWS region (`status.platformStatus.aws.region`).
pub fn infrastructure_region(infrastructure: &serde_json::Value) -> Option<String> {
    infrastructure["status"]["platformStatus"]["aws"]["region"]
        .as_str()
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// The Infrastructure's user-defined AWS resource tags
/// (`status.platformStatus.aws.resourceTags`, a list of `{key, value}`),
/// which the Go operator puts on every AWS resource.
pub fn infrastructure_tags(infrastructure: &serde_json::Value) -> BTreeMap<String, String> {
    infrastructure["status"]["platformStatus"]["aws"]["resourceTags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["key"].as_str()?.to_string(),
                t["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cro_provider_api::{IdentifierRules, cloud_identifier};

    #[test]
    fn a_forbidden_infrastructure_matters_only_on_openshift() {
        assert!(forbidden_matters(
            ["apps", "config.openshift.io"].into_iter()
        ));
        assert!(!forbidden_matters(["apps", "batch"].into_iter()));
        let message = InfrastructureError::Forbidden.to_string();
        assert!(
            message.contains("--cluster-id") && message.contains("cluster_role.yaml"),
            "{message}"
        );
    }

    /// As OpenShift writes it (`oc get network.config cluster -o yaml`).
    #[test]
    fn the_networks_pod_and_service_blocks_are_read() {
        let network = serde_json::json!({"spec": {
            "clusterNetwork": [{"cidr": "10.128.0.0/14", "hostPrefix": 23}],
            "networkType": "OVNKubernetes",
            "serviceNetwork": ["172.30.0.0/16"]}});
        assert_eq!(network_blocks(&network), ["10.128.0.0/14", "172.30.0.0/16"]);
        assert!(network_blocks(&serde_json::json!({})).is_empty());
    }

    #[test]
    fn configured_ids_must_start_with_a_letter() {
        assert!(check_configured("prod-eu1").is_ok());
        assert!(check_configured("-x1").is_ok(), "hyphens are dropped first");
        let err = check_configured("1prod").unwrap_err().to_string();
        assert!(
            err.contains("--cluster-id (CLUSTER_ID)") && err.contains("start with a letter"),
            "{err}"
        );
        assert!(check_configured("---").is_err());
    }

    #[test]
    fn kube_system_uids_give_short_valid_ids_whatever_their_first_digit() {
        for uid in [
            "61ac4a43-22c4-48e0-b099-0e2c4768ee7a",
            "0f000000-0000-0000-0000-000000000000",
            "fedcba98-7654-3210-0000-000000000000",
        ] {
            let id = from_kube_system_uid(uid);
            assert_eq!(id.len(), 9, "{id}");
            assert!(check_configured(&id).is_ok(), "{id}");
            let resource = cloud_identifier(&id, "team-orders-production", "orders-db");
            for rules in IdentifierRules::ALL {
                assert_eq!(rules.check(&resource), Ok(()), "{rules:?}: {resource}");
            }
        }
        assert_eq!(from_kube_system_uid("61AC4A43-22c4"), "k61ac4a43");
    }
}
