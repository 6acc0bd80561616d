//! The Go cloud-resource-operator as OLM installs it: package
//! `rhmi-cloud-resources`, ClusterServiceVersions `cloud-resources.v<x.y.z>`
//! (bundles/<x.y.z>/metadata/annotations.yaml and manifests/ of the Go
//! repository). RHOAM installs it so in a namespace of its own, and its
//! integreatly-operator re-creates the Subscription. While OLM holds either,
//! OLM keeps the Go operator running or brings it back, so this operator does
//! not lead, whether or not the Go Deployment is ready at the moment.

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PartialObjectMeta},
};

/// The Go operator's OLM package.
const GO_PACKAGE: &str = "rhmi-cloud-resources";

/// How its ClusterServiceVersions are named (this operator's are
/// `cloud-resource-operator.v<x.y.z>`).
const GO_CSV_PREFIX: &str = "cloud-resources.v";

/// OLM copies a CSV into each namespace its OperatorGroup targets and labels
/// the copies with this; the original is where the operator runs.
const COPIED: &str = "olm.copiedFrom";

/// OLM's annotation of the namespaces a CSV's operator watches
/// (comma-separated; empty for all).
const TARGETS: &str = "olm.targetNamespaces";

pub struct Olm {
    csvs: Api<DynamicObject>,
    subscriptions: Api<DynamicObject>,
}

impl Olm {
    pub fn new(client: Client) -> Self {
        let api = |kind: &str, plural: &str| {
            let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind);
            Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(&gvk, plural),
            )
        };
        Olm {
            csvs: api("ClusterServiceVersion", "clusterserviceversions"),
            subscriptions: api("Subscription", "subscriptions"),
        }
    }

    /// Why this operator must not lead, when OLM installed the Go operator
    /// where it writes what this one would (`watched` empty: everywhere).
    /// Without OLM, `None`; a refused list is a reason too, since what it
    /// hides may be there. Other errors are the caller's to retry.
    pub async fn go_installed(&self, watched: &[String]) -> Result<Option<String>, kube::Error> {
        let originals = ListParams::default().labels(&format!("!{COPIED}"));
        let csvs = match self.csvs.list_metadata(&originals).await {
            Ok(list) => list.items,
            Err(e) => return unlisted("clusterserviceversions", e),
        };
        if let Some(found) = go_csv(&csvs, watched) {
            return Ok(Some(found));
        }
        let subscriptions = match self.subscriptions.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => return unlisted("subscriptions", e),
        };
        Ok(go_subscription(&subscriptions, watched))
    }
}

/// A list that failed: the resource is not served (no OLM: nothing to
/// find), refused (a reason not to lead), or failed otherwise (an error).
fn unlisted(resource: &str, e: kube::Error) -> Result<Option<String>, kube::Error> {
    match e {
        kube::Error::Api(a) if a.code == 404 => Ok(None),
        kube::Error::Api(a) if a.code == 403 => Ok(Some(format!(
            "this operator may not list {resource}.operators.coreos.com in every namespace, so a Go cloud-resource-operator installed by OLM would go unseen and both would write the same resources: grant list on clusterserviceversions and subscriptions (operators.coreos.com) cluster-wide, as the shipped manifests do"
        ))),
        e => Err(e),
    }
}

/// The first Go CSV whose operator writes in a watched namespace: it runs
/// in one, or its OperatorGroup targets one (or all).
fn go_csv(csvs: &[PartialObjectMeta<DynamicObject>], watched: &[String]) -> Option<String> {
    csvs.iter().find_map(|csv| {
        let name = csv.metadata.name.as_deref()?;
        let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
        let targets = (csv.metadata.annotations.as_ref()).and_then(|a| a.get(TARGETS));
        let copied = (csv.metadata.labels.as_ref()).is_some_and(|l| l.contains_key(COPIED));
        (name.starts_with(GO_CSV_PREFIX)
            && !copied
            && overlaps(namespace, targets.map(String::as_str), watched))
        .then(|| format!(
            "the Go cloud-resource-operator is installed by OLM (ClusterServiceVersion {namespace}/{name}), which keeps it running: delete its Subscription and ClusterServiceVersion (keep the CRDs; under RHOAM the integreatly-operator re-creates them: see docs/migration.md), then this operator takes over"
        ))
    })
}

/// The first Subscription to the Go package in a watched namespace: OLM
/// installs the Go operator again from it.
fn go_subscription(subscriptions: &[DynamicObject], watched: &[String]) -> Option<String> {
    subscriptions.iter().find_map(|s| {
        let name = s.metadata.name.as_deref()?;
        let namespace = s.metadata.namespace.as_deref().unwrap_or_default();
        (s.data["spec"]["name"] == GO_PACKAGE && overlaps(namespace, None, watched)).then(|| format!(
            "OLM Subscription {namespace}/{name} installs the Go cloud-resource-operator (package {GO_PACKAGE}) and would bring it back: delete it (under RHOAM the integreatly-operator re-creates it: see docs/migration.md), then this operator takes over"
        ))
    })
}

/// Whether an operator running in `namespace` and watching `targets` (OLM's
/// annotation: `""` for all) writes where this one does.
fn overlaps(namespace: &str, targets: Option<&str>, watched: &[String]) -> bool {
    let watches = |ns: &str| watched.iter().any(|w| w == ns.trim());
    watched.is_empty()
        || watches(namespace)
        || targets.is_some_and(|t| t.trim().is_empty() || t.split(',').any(watches))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(
        namespace: &str,
        name: &str,
        targets: Option<&str>,
        copied: bool,
    ) -> PartialObjectMeta<DynamicObject> {
        let mut meta = serde_json::json!({"name": name, "namespace": namespace});
        if let Some(t) = targets {
            meta["annotations"] = serde_json::json!({TARGETS: t});
        }
        if copied {
            meta["labels"] = serde_json::json!({COPIED: "elsewhere"});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": meta
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn watching(namespaces: &[&str]) -> Vec<String> {
        namespaces.iter().map(|n| n.to_string()).collect()
    }

    /// RHOAM's layout (the Go CSV in its own namespace, watching it) blocks
    /// an operator watching that namespace or all; one targeting every
    /// namespace blocks any; copies and this operator's own CSV never do.
    #[test]
    fn a_go_csv_counts_where_its_operator_writes() {
        let rhoam = "redhat-rhoam-cloud-resources-operator";
        let own = [csv(rhoam, "cloud-resources.v1.1.0", Some(rhoam), false)];
        assert!(go_csv(&own, &[]).is_some_and(|m| {
            m.contains("redhat-rhoam-cloud-resources-operator/cloud-resources.v1.1.0")
        }));
        assert!(go_csv(&own, &watching(&[rhoam])).is_some());
        assert!(go_csv(&own, &watching(&["team-a"])).is_none());
        let everywhere = [csv(
            "openshift-operators",
            "cloud-resources.v0.50.0",
            Some(""),
            false,
        )];
        assert!(go_csv(&everywhere, &watching(&["team-a"])).is_some());
        let targeted = [csv(
            "ops",
            "cloud-resources.v0.50.0",
            Some("team-b, team-a"),
            false,
        )];
        assert!(go_csv(&targeted, &watching(&["team-a"])).is_some());
        let copy = [csv("team-a", "cloud-resources.v0.50.0", Some(""), true)];
        assert!(go_csv(&copy, &[]).is_none());
        let ours = [csv(
            "team-a",
            "cloud-resource-operator.v1.0.0",
            Some(""),
            false,
        )];
        assert!(go_csv(&ours, &[]).is_none());
    }

    #[test]
    fn a_subscription_counts_only_to_the_go_package() {
        let subscription = |package: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "cro", "namespace": "rhoam"}, "spec": {"name": package}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(
            go_subscription(&[subscription(GO_PACKAGE)], &[])
                .is_some_and(|m| m.contains("rhoam/cro"))
        );
        assert!(go_subscription(&[subscription(GO_PACKAGE)], &watching(&["team-a"])).is_none());
        assert!(go_subscription(&[subscription("cloud-resource-operator")], &[]).is_none());
    }

    /// No OLM is nothing to find; a refusal is a reason not to lead that
    /// names the grant; anything else is an error to retry.
    #[test]
    fn an_unlisted_resource_is_absent_refused_or_an_error() {
        let status = |code: u16| {
            let status: kube::core::Status =
                serde_json::from_value(serde_json::json!({"status": "Failure", "code": code}))
                    .unwrap_or_else(|e| panic!("{e}"));
            kube::Error::Api(Box::new(status))
        };
        assert!(matches!(unlisted("subscriptions", status(404)), Ok(None)));
        let refused = unlisted("subscriptions", status(403));
        assert!(
            matches!(&refused, Ok(Some(m)) if m.contains("grant list on clusterserviceversions and subscriptions"))
        );
        assert!(unlisted("subscriptions", status(500)).is_err());
    }
}
