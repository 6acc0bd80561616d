//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics so platform engineers can reason about it the usual way: the
//! leader renews every retry period; it gives up when it could not renew
//! for the renew deadline; a candidate takes over once the holder's record
//! has not changed for the lease duration. Expiry is judged by when this
//! process saw the record change, never by comparing clocks across nodes.
//!
//! Why not kube-lease-manager: it judges expiry from the holder's
//! `renewTime` against the candidate's wall clock, with a configured skew
//! allowance, so a holder whose clock runs ahead keeps a dead Lease for
//! longer than its duration; it has no renew deadline after which a leader
//! that cannot reach the API server stops by itself. Both are what makes
//! "at most one leader acts" hold here (tests/integration/leader.rs,
//! tests/disruptive/faults.rs).

mod held;
mod olm;

pub use held::HeldBack;

use std::time::{Duration, Instant};

use cro_provider_api::Fence;
use held::{Trace, Trusted};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        coordination::v1::{Lease, LeaseSpec},
    },
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Mutex;
use tracing::{debug, info, warn};

#[derive(Clone, Debug)]
pub struct Config {
    pub namespace: String,
    pub name: String,
    /// Unique per process.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
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

/// Lease timings client-go would refuse, naming the flags to change.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum TimingError {
    #[error(
        "--leader-election-renew-deadline must be shorter than --leader-election-lease-duration"
    )]
    RenewDeadline,
    #[error(
        "--leader-election-retry-period must be positive and shorter than --leader-election-renew-deadline"
    )]
    RetryPeriod,
}

impl Config {
    /// The timing rules client-go enforces.
    pub fn check(&self) -> Result<(), TimingError> {
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::RenewDeadline);
        }
        if self.retry_period >= self.renew_deadline || self.retry_period.is_zero() {
            return Err(TimingError::RetryPeriod);
        }
        Ok(())
    }
}

/// The holder record last seen, and when it was first seen.
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    since: Instant,
}

pub struct Elector {
    api: Api<Lease>,
    config: Config,
    /// Opened to the renew deadline after each renewal that succeeded.
    fence: Fence,
    observed: Mutex<Option<Observed>>,
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
        Elector {
            api: Api::namespaced(client.clone(), &config.namespace),
            config,
            fence,
            observed: Mutex::new(None),
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
        }
    }

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
                && !expired_record(record, &spec, self.config.lease_duration)
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
            None => match self.olm.go_installed(&self.config.watch_namespaces).await {
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
        let watched = &self.config.watch_namespaces;
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

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Returns once this process holds the lease.
    pub async fn acquire(&self) {
        let mut said = None;
        loop {
            if let Some(why) = self.go_operator_leading().await {
                if said.as_ref() != Some(&why) {
                    warn!(lease = %self.config.name, "not leading: {why}");
                    said = Some(why);
                }
                tokio::time::sleep(self.config.retry_period).await;
                continue;
            }
            let sent = Instant::now();
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    self.fence.extend_to(sent + self.config.renew_deadline);
                    return;
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(error = %e, lease = %self.config.name, "leader election: reading or updating the Lease failed")
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the lease until it is lost, and says why. Lost means another
    /// process holds it, or renewing failed for the renew deadline. A
    /// renewal still unanswered at the deadline counts as failed: a request
    /// hanging on a restarting API server must not keep this process acting
    /// after a candidate may have taken over (it does so one lease duration
    /// after our last renewal, which is later than our deadline).
    pub async fn hold(&self) -> String {
        let lost = self.renew_until_lost().await;
        self.fence.close();
        lost
    }

    async fn renew_until_lost(&self) -> String {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = tokio::time::Instant::from_std(renewed + self.config.renew_deadline);
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    renewed = sent;
                    self.fence.extend_to(sent + self.config.renew_deadline);
                    if let Some(why) = self.go_operator_leading().await {
                        return why;
                    }
                }
                Ok(Ok(false)) => return "another replica holds the Lease".into(),
                Err(_elapsed) => {
                    return format!(
                        "the Lease could not be renewed for {:?}: the API server did not answer",
                        self.config.renew_deadline
                    );
                }
                Ok(Err(e)) => {
                    warn!(error = %e, "leader election: renewing the Lease failed");
                    if renewed.elapsed() >= self.config.renew_deadline {
                        return format!(
                            "the Lease could not be renewed for {:?}: {e}",
                            self.config.renew_deadline
                        );
                    }
                }
            }
        }
    }

    /// Gives the lease up, so another replica takes over now instead of
    /// after the lease duration. A lease held by someone else is left alone.
    pub async fn release(&self) -> Result<(), kube::Error> {
        self.fence.close();
        // A renewal abandoned as the work stopped may still land after the
        // read below: its write then conflicts with ours, and the Lease,
        // still ours, is read again.
        let mut attempts = 3;
        loop {
            attempts -= 1;
            match self.release_once().await {
                Err(kube::Error::Api(e)) if e.code == 409 && attempts > 0 => continue,
                done => return done,
            }
        }
    }

    async fn release_once(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }

    /// One election round: `true` when this process holds the lease after
    /// it. Writes are guarded by resourceVersion, so two candidates never
    /// both win.
    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let mine = holder.as_deref() == Some(self.identity());
        if !mine
            && holder.is_some()
            && !expired(&self.observed, spec, self.config.lease_duration).await
        {
            return Ok(false);
        }
        if !mine {
            debug!(previous = ?holder, lease = %self.config.name, "taking over the Lease");
            spec.holder_identity = Some(self.config.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(seconds);
        conflict_is_false(
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await,
        )
    }
}

/// Whether the holder's record has stood still for its lease duration
/// (`default` when it names none), measured on this process's monotonic
/// clock from when `observed` first saw it.
async fn expired(observed: &Mutex<Option<Observed>>, spec: &LeaseSpec, default: Duration) -> bool {
    expired_record(&mut *observed.lock().await, spec, default)
}

/// As [`expired`], on the record itself.
fn expired_record(observed: &mut Option<Observed>, spec: &LeaseSpec, default: Duration) -> bool {
    let changed = observed
        .as_ref()
        .is_none_or(|o| o.holder != spec.holder_identity || o.renew_time != spec.renew_time);
    if changed {
        *observed = Some(Observed {
            holder: spec.holder_identity.clone(),
            renew_time: spec.renew_time.clone(),
            since: Instant::now(),
        });
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(default, Duration::from_secs);
    observed
        .as_ref()
        .is_some_and(|o| o.since.elapsed() >= duration)
}

/// A 409 means another candidate wrote first: we lost this round.
fn conflict_is_false(result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// A process identity: the pod name when known, plus a random suffix so a
/// restarted process never mistakes the old holder for itself.
pub fn identity() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "cloud-resource-operator".into());
    format!(
        "{base}_{}",
        Alphanumeric
            .sample_string(&mut rand::rng(), 8)
            .to_lowercase()
    )
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

    fn config(lease: u64, renew: u64, retry: u64) -> Config {
        Config {
            namespace: "ns".into(),
            name: "lease".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
            go_lease_namespaces: Vec::new(),
            watch_namespaces: Vec::new(),
        }
    }

    /// A renewal abandoned as the work stopped lands just before the
    /// release's write: the release reads the Lease again and gives it up
    /// rather than leave the standby waiting out the lease duration.
    #[tokio::test]
    async fn a_release_that_meets_its_own_late_renewal_reads_again() {
        use std::sync::{
            Arc,
            atomic::{AtomicUsize, Ordering},
        };
        let puts = Arc::new(AtomicUsize::new(0));
        let released = Arc::new(std::sync::Mutex::new(None::<serde_json::Value>));
        let (count, last) = (puts.clone(), released.clone());
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let (count, last) = (count.clone(), last.clone());
            async move {
                let lease = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "lease", "namespace": "ns", "resourceVersion": "7"},
                    "spec": {"holderIdentity": "me", "leaseDurationSeconds": 60}});
                let (status, body) = if request.method() == http::Method::PUT {
                    let body = request
                        .into_body()
                        .collect_bytes()
                        .await
                        .unwrap_or_default();
                    if count.fetch_add(1, Ordering::SeqCst) == 0 {
                        let conflict = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "the object has been modified", "reason": "Conflict", "code": 409});
                        (409, conflict)
                    } else {
                        let sent: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(sent.clone());
                        (200, sent)
                    }
                } else {
                    (200, lease)
                };
                let response = http::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_string().into_bytes()))
                    .unwrap_or_else(|e| panic!("{e}"));
                Ok::<_, std::convert::Infallible>(response)
            }
        });
        let client = Client::new(service, "ns");
        let elector = Elector::new(
            client,
            config(15, 10, 2),
            Fence::open(),
            Gauge::default(),
            HeldBack::default(),
        );
        let result = elector.release().await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(
            puts.load(Ordering::SeqCst),
            2,
            "the release is written again after the conflict"
        );
        let sent = released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default();
        assert!(sent["spec"]["holderIdentity"].is_null(), "{sent}");
    }

    #[test]
    fn timings_must_nest() {
        assert!(config(15, 10, 2).check().is_ok());
        assert!(config(10, 10, 2).check().is_err());
        assert!(config(15, 10, 10).check().is_err());
        assert!(config(15, 10, 0).check().is_err());
    }
}
