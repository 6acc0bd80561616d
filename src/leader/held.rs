//! Where a trace of a Go cloud-resource-operator counts. One found in a
//! namespace only the platform writes (this operator's own, its Lease's,
//! its one watched namespace, OpenShift's and Kubernetes' reserved ones)
//! stops this process leading, as two operators would write the same
//! resources everywhere. One found anywhere else could have been made by
//! whoever may write that namespace (a Lease, a Subscription, a
//! ClusterServiceVersion), so it holds back that namespace only: a tenant
//! cannot stop the operator for everyone else.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, PoisonError, RwLock},
};

/// A trace of a running or installed Go operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// Where it was found; `None`: it is no one namespace's (a refused
    /// cluster-wide list hides Go operators everywhere).
    pub namespace: Option<String>,
    /// What was found and what to do about it.
    pub reason: String,
}

impl Trace {
    pub fn at(namespace: &str, reason: String) -> Self {
        Trace {
            namespace: Some(namespace.to_string()),
            reason,
        }
    }

    pub fn everywhere(reason: String) -> Self {
        Trace {
            namespace: None,
            reason,
        }
    }
}

/// The namespaces only the platform writes.
#[derive(Clone, Debug, Default)]
pub struct Trusted(BTreeSet<String>);

impl Trusted {
    /// `named`: this operator's namespace, its Lease's and its one watched
    /// namespace, where the migration guide has the Go operator run.
    pub fn new(named: impl IntoIterator<Item = String>) -> Self {
        Trusted(named.into_iter().collect())
    }

    /// OpenShift refuses projects named `openshift-*` or `kube-*` to
    /// users (its cluster-wide operators go to `openshift-operators`);
    /// Kubernetes reserves `kube-*`. Upstream OLM's `operators` is not
    /// trusted: on OpenShift a user may request a project of that name.
    pub fn contains(&self, namespace: &str) -> bool {
        self.0.contains(namespace)
            || namespace.starts_with("openshift-")
            || namespace.starts_with("kube-")
    }

    /// The first trace that stops this process leading, and the
    /// namespaces the others hold back, each with its first reason.
    pub fn split(&self, traces: Vec<Trace>) -> (Option<String>, BTreeMap<String, String>) {
        let mut held = BTreeMap::new();
        for trace in traces {
            match trace.namespace {
                Some(ns) if !self.contains(&ns) => {
                    held.entry(ns).or_insert(trace.reason);
                }
                _ => return (Some(trace.reason), BTreeMap::new()),
            }
        }
        (None, held)
    }
}

/// The namespaces held back, shared by the elector, which finds them, and
/// the reconciles, which leave their CRs alone.
#[derive(Clone, Debug, Default)]
pub struct HeldBack(Arc<RwLock<BTreeMap<String, String>>>);

impl HeldBack {
    /// Why CRs in `namespace` are left alone now, if they are.
    pub fn why(&self, namespace: &str) -> Option<String> {
        let held = self.0.read().unwrap_or_else(PoisonError::into_inner);
        held.get(namespace).cloned()
    }

    /// Holds back exactly `now`; returns the namespaces newly held (with
    /// why) and those let go.
    pub fn replace(&self, now: BTreeMap<String, String>) -> (Vec<(String, String)>, Vec<String>) {
        let mut held = self.0.write().unwrap_or_else(PoisonError::into_inner);
        let began = (now.iter())
            .filter(|(ns, _)| !held.contains_key(*ns))
            .map(|(ns, why)| (ns.clone(), why.clone()))
            .collect();
        let ended = (held.keys())
            .filter(|ns| !now.contains_key(*ns))
            .cloned()
            .collect();
        *held = now;
        (began, ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tenant's namespace holds back itself; the operator's own, a
    /// reserved one, or a refused cluster-wide list stop it leading.
    #[test]
    fn a_trace_counts_where_it_was_found() {
        let trusted = Trusted::new(["cro".to_string()]);
        let lease = |ns: &str| Trace::at(ns, format!("a Go Lease in {ns}"));
        let (global, held) = trusted.split(vec![lease("team-a"), lease("team-b")]);
        assert_eq!(global, None);
        assert_eq!(
            held.keys().collect::<Vec<_>>(),
            [&"team-a".to_string(), &"team-b".to_string()]
        );
        for ns in ["cro", "openshift-operators", "kube-system"] {
            let (global, held) = trusted.split(vec![lease("team-a"), lease(ns)]);
            assert_eq!(global, Some(format!("a Go Lease in {ns}")));
            assert!(held.is_empty());
        }
        let refused = Trace::everywhere("may not list".into());
        assert_eq!(
            trusted.split(vec![refused]).0.as_deref(),
            Some("may not list")
        );
        assert!(!trusted.contains("openshiftish"));
        assert!(!trusted.contains("operators"));
    }

    #[test]
    fn replacing_says_what_began_and_ended() {
        let held = HeldBack::default();
        let map = |names: &[&str]| -> BTreeMap<String, String> {
            names
                .iter()
                .map(|n| (n.to_string(), format!("why {n}")))
                .collect()
        };
        let (began, ended) = held.replace(map(&["a", "b"]));
        assert_eq!(began.len(), 2);
        assert!(ended.is_empty());
        let (began, ended) = held.replace(map(&["b", "c"]));
        assert_eq!(began, [("c".to_string(), "why c".to_string())]);
        assert_eq!(ended, ["a".to_string()]);
        assert_eq!(held.why("b").as_deref(), Some("why b"));
        assert_eq!(held.why("a"), None);
    }
}
