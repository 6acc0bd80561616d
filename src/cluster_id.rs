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

/// Checks a configured cluster ID: identifiers start with it, and RDS and
/// ElastiCache identifiers must start with a letter, so it must too (after
/// dropping everything but letters and digits, as identifiers do).
pub fn check_configured(id: &str) -> Result<(), String> {
    let kept: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if kept.starts_with(|c: char| c.is_ascii_alphabetic()) {
        Ok(())
    } else {
        Err(format!(
            "--cluster-id (CLUSTER_ID) {id:?} cannot prefix valid AWS identifiers: only letters and digits are kept, and the first one must be a letter (RDS and ElastiCache identifiers must start with a letter); choose e.g. \"c{kept}\""
        ))
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

/// OpenShift's `Infrastructure/cluster` (`None` on other clusters), where
/// the Go operator reads the cluster ID, the default AWS region and the
/// user-defined resource tags.
pub async fn infrastructure(client: &Client) -> Result<Option<serde_json::Value>, kube::Error> {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "Infrastructure");
    let infra: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "infrastructures"),
    );
    // Absent on non-OpenShift clusters: a 404 for the whole resource type.
    match infra.get_opt("cluster").await {
        Ok(obj) => Ok(obj.map(|o| o.data)),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 => Ok(None),
        Err(e) => Err(e),
    }
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
    fn configured_ids_must_start_with_a_letter() {
        assert!(check_configured("prod-eu1").is_ok());
        assert!(check_configured("-x1").is_ok(), "hyphens are dropped first");
        let err = check_configured("1prod").unwrap_err();
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
