//! Leader election (the Lease mechanics are `cro_runtime::lease`'s), held
//! back while a Go cloud-resource-operator runs: two operators would write
//! the same AWS resources and Secrets. Its traces (a live Go Lease, a
//! running Go Deployment, OLM's installation of it) stop this process
//! leading where only the platform writes, and hold back their own
//! namespace elsewhere (`held`). At most one leader acts
//! (tests/integration/leader.rs, tests/disruptive/faults.rs).

mod held;
mod olm;

pub use held::HeldBack;

use std::time::{Duration, Instant};

use cro_provider_api::Fence;
use cro_runtime::lease::{self, Gate, Observed, expired_record};
use held::{Trace, Trusted};
use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease};
use kube::{Api, Client, api::ListParams};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Mutex;
use tracing::{debug, info, warn};

pub use cro_runtime::lease::TimingError;

#[derive(Clone, Debug)]
pub struct Config {
    /// This process's own Lease.
    pub lease: lease::Config,
    /// Namespaces where a Go cloud-resource-operator may hold its Lease
    /// ([`GO_LEASE`]): this process leads only while none is live there.
    /// Only the platform writes them, so its traces there are trusted.
    pub go_lease_namespaces: Vec<String>,
    /// The namespaces this operator watches (empty: all). A Go operator's
    /// Lease elsewhere counts when it is in one of them, for that
    /// namespace only: the Go operator watches the namespace it runs in
    /// (RHOAM's layout), and whoever may write there could have made it.
    pub watch_namespaces: Vec<String>,
}

/// The Go operator's leader-election Lease (`LeaderElectionID`, main.go;
/// its OLM bundles run it with `--enable-leader-election`). While a live
/// Go operator holds it, this operator does not lead: two operators would
/// write the same AWS resources and Secrets.
pub const GO_LEASE: &str = "ce8de7ea.integreatly.org";

/// The Go operator's Deployment, as every one of its OLM bundles names it.
/// Bundles before 0.43 run it without leader election (no Lease at all):
/// its ready replicas are what tells it runs.
pub const GO_DEPLOYMENT: &str = "cloud-resource-operator";

/// Whether `d` is the Go operator's Deployment with a ready replica: its
/// container sets `OPERATOR_NAME=cloud-resource-operator` (every Go bundle's
/// CSV does; this operator's manifests, which may share the name, do not).
fn go_deployment_ready(d: &Deployment) -> bool {
    let containers = (d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let go = containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .any(|e| {
            e.name == "OPERATOR_NAME" && e.value.as_deref() == Some("cloud-resource-operator")
        });
    let ready = (d.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    go && ready > 0
}

pub struct Elector {
    lease: lease::Elector,
    go: GoWatch,
}

/// What tells a Go operator runs, as last read.
struct GoWatch {
    /// A Go Lease counts while its record changed within this.
    lease_duration: Duration,
    watch_namespaces: Vec<String>,
    /// The Go operator's Lease in each namespace it may run in.
    go_leases: Vec<Api<Lease>>,
    /// Its Lease in any watched namespace (RHOAM runs it in its own),
    /// listed every [`GO_ANYWHERE_EVERY`]: the Leases of the last list,
    /// or `None` once the list was refused.
    go_anywhere: Api<Lease>,
    anywhere_read: Mutex<Option<(Instant, Option<Vec<Lease>>)>>,
    /// Each Go Lease's record as last seen, by namespace.
    go_observed: Mutex<std::collections::HashMap<String, Option<Observed>>>,
    /// Namespaces whose Go Lease this process may not read, once warned.
    unreadable: Mutex<std::collections::BTreeSet<String>>,
    /// The Go operator's Deployment in each of those namespaces, and when
    /// they were last read with what they said (kept until the next read).
    go_deployments: Vec<Api<Deployment>>,
    /// The Go operator as OLM installed it, in any namespace.
    olm: olm::Olm,
    deployments_read: Mutex<Option<(Instant, Vec<Trace>)>>,
    /// Where a Go trace stops this process leading.
    trusted: Trusted,
    /// Where one holds back its own namespace only.
    held: HeldBack,
    /// 1 while a Go operator keeps this process from leading.
    go_present: Gauge,
}

/// How often the Go operator's Deployments and OLM's objects are read
/// while none was found: its Lease says more often whether it runs, where
/// it holds one. Once found, they are read every [`GO_ANYWHERE_EVERY`],
/// so this operator takes over soon after they go.
const GO_DEPLOYMENT_EVERY: Duration = Duration::from_secs(60);

/// How often the Go operator's Leases in every namespace are listed
/// (those of the namespaces it is expected in are read every round).
const GO_ANYWHERE_EVERY: Duration = Duration::from_secs(10);

impl Elector {
    pub fn new(
        client: Client,
        config: Config,
        fence: Fence,
        go_present: Gauge,
        held: HeldBack,
    ) -> Self {
        let mut namespaces = config.go_lease_namespaces.clone();
        namespaces.sort();
        namespaces.dedup();
        let go_leases = (namespaces.iter())
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect();
        let go_deployments = (namespaces.iter())
            .map(|ns| Api::namespaced(client.clone(), ns))
            .collect();
        let go = GoWatch {
            lease_duration: config.lease.lease_duration,
            watch_namespaces: config.watch_namespaces.clone(),
            go_leases,
            go_anywhere: Api::all(client.clone()),
            anywhere_read: Mutex::new(None),
            go_observed: Mutex::default(),
            unreadable: Mutex::default(),
            go_deployments,
            olm: olm::Olm::new(client.clone()),
            deployments_read: Mutex::new(None),
            trusted: Trusted::new(namespaces.iter().cloned()),
            held,
            go_present,
        };
        Elector {
            lease: lease::Elector::new(client, config.lease, fence),
            go,
        }
    }

    pub fn identity(&self) -> &str {
        self.lease.identity()
    }

    /// Returns once this process holds the lease and no Go operator is
    /// leading (see [`cro_runtime::lease::Elector::acquire`]).
    pub async fn acquire(&self) {
        self.lease.acquire(&self.go).await
    }

    /// Renews the lease until it is lost or a Go operator leads, and says
    /// why; the fence is closed then.
    pub async fn hold(&self) -> String {
        self.lease.hold(&self.go).await
    }

    /// Gives the lease up, so another replica takes over now.
    pub async fn release(&self) -> Result<(), kube::Error> {
        self.lease.release().await
    }
}

impl GoWatch {
    /// Why a Go operator keeps this process from leading, if one does: a
    /// trace of it in a namespace only the platform writes (see `held`).
    /// Traces elsewhere hold back their own namespaces meanwhile. Shown by
    /// the `cro_go_operator_present` gauge.
    async fn go_operator_leading(&self) -> Option<String> {
        let traces = self.go_traces().await;
        let (found, held) = self.trusted.split(traces);
        let (began, ended) = self.held.replace(held);
        for (namespace, why) in began {
            warn!(%namespace, "leaving the CRs of namespace {namespace} alone: {why}");
        }
        for namespace in ended {
            info!(%namespace, "reconciling namespace {namespace} again: the Go operator's trace there is gone");
        }
        self.go_present.set(i64::from(found.is_some()));
        found
    }

    /// A running Go Deployment or OLM's installation of it, as last read
    /// (see [`GO_DEPLOYMENT_EVERY`]), and each live Go Lease: one with a
    /// holder whose record changed within its lease duration (judged as
    /// our own Lease is, on this process's monotonic clock, so a Lease a
    /// stopped Go operator left behind stops counting one duration after
    /// we first see it). One that cannot be read counts as not held: the
    /// operator may not be granted Leases there.
    async fn go_traces(&self) -> Vec<Trace> {
        let mut traces = self.go_installed().await;
        let mut leases = self.go_leases_anywhere().await;
        for api in &self.go_leases {
            match api.get_opt(GO_LEASE).await {
                Ok(lease) => leases.extend(lease),
                Err(e) => {
                    self.unreadable(api.namespace().unwrap_or_default().to_string(), &e)
                        .await
                }
            }
        }
        let mut observed = self.go_observed.lock().await;
        for lease in leases {
            let namespace = lease.metadata.namespace.clone().unwrap_or_default();
            let Some(spec) = lease.spec else {
                continue;
            };
            let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
            let record = observed.entry(namespace.clone()).or_default();
            if let Some(holder) = holder
                && !expired_record(record, &spec, self.lease_duration)
            {
                traces.push(Trace::at(&namespace, format!(
                    "the Go cloud-resource-operator leads (Lease {namespace}/{GO_LEASE}, holder {holder}): stop it first (with OLM, delete its Subscription and ClusterServiceVersion; keep the CRDs; under RHOAM, the integreatly-operator re-creates them: see docs/migration.md), then this operator takes over"
                )));
            }
        }
        traces
    }

    /// A running Go Deployment, else OLM's installations of the Go
    /// operator, as last read: every [`GO_DEPLOYMENT_EVERY`] while none
    /// was found, every [`GO_ANYWHERE_EVERY`] once one was, so this
    /// operator takes over soon after they go.
    async fn go_installed(&self) -> Vec<Trace> {
        let mut read = self.deployments_read.lock().await;
        if let Some((at, said)) = read.as_ref() {
            let every = match said.is_empty() {
                true => GO_DEPLOYMENT_EVERY,
                false => GO_ANYWHERE_EVERY,
            };
            if at.elapsed() < every {
                return said.clone();
            }
        }
        let said = match self.go_deployment_running().await {
            Some(running) => vec![running],
            None => match self.olm.go_installed(&self.watch_namespaces).await {
                Ok(installed) => installed,
                Err(e) => {
                    // Tried again next round; until then, as last read.
                    debug!(error = %e, "listing OLM's ClusterServiceVersions and Subscriptions");
                    read.as_ref()
                        .map(|(_, said)| said.clone())
                        .unwrap_or_default()
                }
            },
        };
        *read = Some((Instant::now(), said.clone()));
        said
    }

    /// The Go operator's Leases in every namespace, as last listed (at
    /// most every [`GO_ANYWHERE_EVERY`]); none once listing them was
    /// refused, which is said once.
    async fn go_leases_anywhere(&self) -> Vec<Lease> {
        let mut read = self.anywhere_read.lock().await;
        if let Some((at, leases)) = read.as_ref()
            && (leases.is_none() || at.elapsed() < GO_ANYWHERE_EVERY)
        {
            return leases.clone().unwrap_or_default();
        }
        let named = ListParams::default().fields(&format!("metadata.name={GO_LEASE}"));
        let watched = &self.watch_namespaces;
        let leases = match self.go_anywhere.list(&named).await {
            Ok(list) => Some(
                (list.items.into_iter())
                    .filter(|l| {
                        let ns = l.metadata.namespace.as_deref().unwrap_or_default();
                        watched.is_empty() || watched.iter().any(|w| w == ns)
                    })
                    .collect(),
            ),
            Err(kube::Error::Api(e)) if e.code == 403 => {
                warn!(
                    "cannot list Leases in every namespace (grant list on leases.coordination.k8s.io cluster-wide, as the shipped manifests do): a Go cloud-resource-operator in a namespace other than {} would go unseen, and both would write the same resources",
                    self.go_lease_namespaces()
                );
                None
            }
            Err(e) => {
                debug!(error = %e, "listing the Go operator's Leases");
                // Tried again next round.
                return read
                    .as_ref()
                    .and_then(|(_, l)| l.clone())
                    .unwrap_or_default();
            }
        };
        *read = Some((Instant::now(), leases.clone()));
        leases.unwrap_or_default()
    }

    fn go_lease_namespaces(&self) -> String {
        let names: Vec<String> = (self.go_leases.iter())
            .filter_map(|api| api.namespace().map(str::to_string))
            .collect();
        names.join(", ")
    }

    /// A Go Lease this process may not read is not taken for none without
    /// a word: said once per namespace.
    async fn unreadable(&self, namespace: String, e: &kube::Error) {
        if !matches!(e, kube::Error::Api(a) if a.code == 403) {
            debug!(error = %e, "reading the Go operator's Lease");
            return;
        }
        if self.unreadable.lock().await.insert(namespace.clone()) {
            warn!(
                "may not read Lease {namespace}/{GO_LEASE} (grant get on leases there): a Go cloud-resource-operator leading from it would go unseen"
            );
        }
    }

    /// A Go operator's Deployment with a ready replica, described.
    async fn go_deployment_running(&self) -> Option<Trace> {
        for api in &self.go_deployments {
            match api.get_opt(GO_DEPLOYMENT).await {
                Ok(Some(d)) if go_deployment_ready(&d) => {
                    let namespace = api.namespace().unwrap_or_default();
                    return Some(Trace::at(
                        namespace,
                        format!(
                            "the Go cloud-resource-operator runs (Deployment {namespace}/{GO_DEPLOYMENT} has a ready replica): stop it first (with OLM, delete its Subscription and ClusterServiceVersion; keep the CRDs), then this operator takes over"
                        ),
                    ));
                }
                Ok(_) => {}
                Err(e) => debug!(error = %e, "reading the Go operator's Deployment"),
            }
        }
        None
    }
}

impl Gate for GoWatch {
    async fn blocked(&self) -> Option<String> {
        self.go_operator_leading().await
    }
}

/// A process identity (see [`cro_runtime::lease::identity`]).
pub fn identity() -> String {
    cro_runtime::lease::identity("cloud-resource-operator")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Go bundles' Deployment counts once a replica is ready; this
    /// operator's own, which may share its name, never does.
    #[test]
    fn only_the_go_operators_ready_deployment_counts() {
        let deployment = |env: serde_json::Value, ready: i32| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": GO_DEPLOYMENT},
                "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "env": env}]}}},
                "status": {"readyReplicas": ready}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let go = serde_json::json!([{"name": "OPERATOR_NAME", "value": "cloud-resource-operator"}]);
        let ours = serde_json::json!([{"name": "LOG_FORMAT", "value": "json"}]);
        assert!(go_deployment_ready(&deployment(go.clone(), 1)));
        assert!(!go_deployment_ready(&deployment(go, 0)));
        assert!(!go_deployment_ready(&deployment(ours, 2)));
    }
}
