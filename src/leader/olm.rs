//! The Go cloud-resource-operator as OLM installs it: package
//! `rhmi-cloud-resources`, ClusterServiceVersions `cloud-resources.v<x.y.z>`
//! (bundles/<x.y.z>/metadata/annotations.yaml and manifests/ of the Go
//! repository). RHOAM installs it so in a namespace of its own, and its
//! integreatly-operator re-creates the Subscription. While OLM holds either,
//! OLM keeps the Go operator running or brings it back, so this operator
//! leaves alone where it writes, whether or not the Go Deployment is ready
//! at the moment (`held` says how far a trace reaches).

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PartialObjectMeta},
};

use super::held::Trace;

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

    /// Where OLM installed the Go operator so that it writes where this
    /// one would (`watched` empty: everywhere): each original CSV, the
    /// copies OLM made of one that lives elsewhere (its operator writes in
    /// their namespaces), and each Subscription to its package. Without
    /// OLM, none; a refused list is a trace everywhere, since what it
    /// hides may be anywhere. Other errors are the caller's to retry.
    pub async fn go_installed(&self, watched: &[String]) -> Result<Vec<Trace>, kube::Error> {
        let originals = ListParams::default().labels(&format!("!{COPIED}"));
        let csvs = match self.csvs.list_metadata(&originals).await {
            Ok(list) => list.items,
            Err(e) => return unlisted("clusterserviceversions", e),
        };
        let mut traces = go_csvs(&csvs, watched);
        for (namespace, name) in go_originals(&csvs) {
            let copies = ListParams::default()
                .labels(&format!("{COPIED}={namespace}"))
                .fields(&format!("metadata.name={name}"));
            let copies = match self.csvs.list_metadata(&copies).await {
                Ok(list) => list.items,
                Err(e) => return unlisted("clusterserviceversions", e),
            };
            traces.extend(go_copies(&copies, watched));
        }
        let subscriptions = match self.subscriptions.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(e) => return unlisted("subscriptions", e),
        };
        traces.extend(go_subscriptions(&subscriptions, watched));
        Ok(traces)
    }
}

/// A list that failed: the resource is not served (no OLM: nothing to
/// find), refused (a trace everywhere), or failed otherwise (an error).
fn unlisted(resource: &str, e: kube::Error) -> Result<Vec<Trace>, kube::Error> {
    match e {
        kube::Error::Api(a) if a.code == 404 => Ok(Vec::new()),
        kube::Error::Api(a) if a.code == 403 => Ok(vec![Trace::everywhere(format!(
            "this operator may not list {resource}.operators.coreos.com in every namespace, so a Go cloud-resource-operator installed by OLM would go unseen and both would write the same resources: grant list on clusterserviceversions and subscriptions (operators.coreos.com) cluster-wide, as the shipped manifests do"
        ))]),
        e => Err(e),
    }
}

/// What OLM's installation of the Go operator from CSV `namespace/name`
/// means, and what to do.
fn installed(namespace: &str, name: &str) -> String {
    format!(
        "the Go cloud-resource-operator is installed by OLM (ClusterServiceVersion {namespace}/{name}), which keeps it running: delete its Subscription and ClusterServiceVersion (keep the CRDs; under RHOAM the integreatly-operator re-creates them: see docs/migration.md), then this operator takes over"
    )
}

/// The Go operator's original CSVs, as (namespace, name): where OLM
/// copies them is where it writes besides its own namespace.
fn go_originals(csvs: &[PartialObjectMeta<DynamicObject>]) -> Vec<(String, String)> {
    (csvs.iter())
        .filter_map(|csv| {
            let name = csv.metadata.name.as_deref()?;
            let copied = (csv.metadata.labels.as_ref()).is_some_and(|l| l.contains_key(COPIED));
            (name.starts_with(GO_CSV_PREFIX) && !copied).then(|| {
                let namespace = csv.metadata.namespace.clone().unwrap_or_default();
                (namespace, name.to_string())
            })
        })
        .collect()
}

/// OLM's copies of a Go CSV in watched namespaces: a trace in each, since
/// only OLM (or whoever writes there) puts one there.
fn go_copies(copies: &[PartialObjectMeta<DynamicObject>], watched: &[String]) -> Vec<Trace> {
    (copies.iter())
        .filter_map(|copy| {
            let name = copy.metadata.name.as_deref()?;
            let namespace = copy.metadata.namespace.as_deref().unwrap_or_default();
            let from = (copy.metadata.labels.as_ref())?.get(COPIED)?;
            overlaps(namespace, None, watched).then(|| Trace::at(namespace, installed(from, name)))
        })
        .collect()
}

/// A trace where each original Go CSV is whose operator writes in a
/// watched namespace: it runs in one, or its OperatorGroup targets one (or
/// all).
fn go_csvs(csvs: &[PartialObjectMeta<DynamicObject>], watched: &[String]) -> Vec<Trace> {
    (csvs.iter())
        .filter_map(|csv| {
            let name = csv.metadata.name.as_deref()?;
            let namespace = csv.metadata.namespace.as_deref().unwrap_or_default();
            let targets = (csv.metadata.annotations.as_ref()).and_then(|a| a.get(TARGETS));
            let copied = (csv.metadata.labels.as_ref()).is_some_and(|l| l.contains_key(COPIED));
            (name.starts_with(GO_CSV_PREFIX)
                && !copied
                && overlaps(namespace, targets.map(String::as_str), watched))
            .then(|| Trace::at(namespace, installed(namespace, name)))
        })
        .collect()
}

/// A trace where each Subscription to the Go package in a watched
/// namespace is: OLM installs the Go operator again from it.
fn go_subscriptions(subscriptions: &[DynamicObject], watched: &[String]) -> Vec<Trace> {
    (subscriptions.iter())
        .filter_map(|s| {
            let name = s.metadata.name.as_deref()?;
            let namespace = s.metadata.namespace.as_deref().unwrap_or_default();
            (s.data["spec"]["name"] == GO_PACKAGE && overlaps(namespace, None, watched)).then(|| Trace::at(namespace, format!(
                "OLM Subscription {namespace}/{name} installs the Go cloud-resource-operator (package {GO_PACKAGE}) and would bring it back: delete it (under RHOAM the integreatly-operator re-creates it: see docs/migration.md), then this operator takes over"
            )))
        })
        .collect()
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
        let found = go_csvs(&own, &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].namespace.as_deref(), Some(rhoam));
        assert!(found[0].reason.contains(
            "ClusterServiceVersion redhat-rhoam-cloud-resources-operator/cloud-resources.v1.1.0)"
        ));
        assert_eq!(go_csvs(&own, &watching(&[rhoam])).len(), 1);
        assert!(go_csvs(&own, &watching(&["team-a"])).is_empty());
        let everywhere = [csv(
            "openshift-operators",
            "cloud-resources.v0.50.0",
            Some(""),
            false,
        )];
        assert_eq!(go_csvs(&everywhere, &watching(&["team-a"])).len(), 1);
        let targeted = [csv(
            "ops",
            "cloud-resources.v0.50.0",
            Some("team-b, team-a"),
            false,
        )];
        assert_eq!(go_csvs(&targeted, &watching(&["team-a"])).len(), 1);
        let copy = [csv("team-a", "cloud-resources.v0.50.0", Some(""), true)];
        assert!(go_csvs(&copy, &[]).is_empty());
        let traces = go_copies(&copy, &watching(&["team-a"]));
        assert_eq!(traces.len(), 1);
        assert_eq!(traces[0].namespace.as_deref(), Some("team-a"));
        assert!(
            traces[0]
                .reason
                .contains("ClusterServiceVersion elsewhere/cloud-resources.v0.50.0)")
        );
        assert!(go_copies(&copy, &watching(&["team-b"])).is_empty());
        assert_eq!(
            go_originals(&everywhere),
            [(
                "openshift-operators".to_string(),
                "cloud-resources.v0.50.0".to_string()
            )]
        );
        assert!(go_originals(&copy).is_empty());
        let ours = [csv(
            "team-a",
            "cloud-resource-operator.v1.0.0",
            Some(""),
            false,
        )];
        assert!(go_csvs(&ours, &[]).is_empty());
        assert!(go_originals(&ours).is_empty());
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
        let found = go_subscriptions(&[subscription(GO_PACKAGE)], &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].namespace.as_deref(), Some("rhoam"));
        assert!(found[0].reason.contains("rhoam/cro"));
        assert!(go_subscriptions(&[subscription(GO_PACKAGE)], &watching(&["team-a"])).is_empty());
        assert!(go_subscriptions(&[subscription("cloud-resource-operator")], &[]).is_empty());
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
        assert!(matches!(unlisted("subscriptions", status(404)), Ok(v) if v.is_empty()));
        let refused = unlisted("subscriptions", status(403));
        assert!(
            matches!(&refused, Ok(v) if v.len() == 1 && v[0].namespace.is_none() && v[0].reason.contains("grant list on clusterserviceversions and subscriptions"))
        );
        assert!(unlisted("subscriptions", status(500)).is_err());
    }
}
