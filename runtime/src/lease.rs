//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics so platform engineers can reason about it the usual way: the
//! leader renews every retry period; it gives up when it could not renew
//! for the renew deadline; a candidate takes over once the holder's record
//! has not changed for the lease duration. Expiry is judged by when this
//! process saw the record change, never by comparing clocks across nodes.
//! Each renewal opens the fence to the renew deadline, and losing the
//! Lease closes it: a process that may have lost it writes nothing.
//!
//! Why not kube-lease-manager: it judges expiry from the holder's
//! `renewTime` against the candidate's wall clock, with a configured skew
//! allowance, so a holder whose clock runs ahead keeps a dead Lease for
//! longer than its duration; it has no renew deadline after which a leader
//! that cannot reach the API server stops by itself.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use cro_provider_api::Fence;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, Client, api::PostParams};
use tokio::sync::Mutex;
use tracing::{debug, warn};

#[derive(Clone, Debug)]
pub struct Config {
    pub namespace: String,
    pub name: String,
    /// Unique per process.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
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

/// What may keep this process from leading although the Lease is free
/// (another operator doing the same work): asked before each try to take
/// the Lease and after each renewal; the reason when it does.
pub trait Gate {
    fn blocked(&self) -> impl Future<Output = Option<String>> + Send;
}

/// Nothing keeps the process from leading.
pub struct Open;

impl Gate for Open {
    async fn blocked(&self) -> Option<String> {
        None
    }
}

/// A Lease holder's record last seen, and when it was first seen (see
/// [`expired_record`]).
#[derive(Debug)]
pub struct Observed {
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
}

impl Elector {
    pub fn new(client: Client, config: Config, fence: Fence) -> Self {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            fence,
            observed: Mutex::new(None),
        }
    }

    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Returns once this process holds the lease, asking `gate` first
    /// each round (its reason is logged when it changes).
    pub async fn acquire(&self, gate: &impl Gate) {
        let mut said = None;
        loop {
            if let Some(why) = gate.blocked().await {
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

    /// Renews the lease until it is lost or `gate` says to stop, and says
    /// why. Lost means another process holds it, or renewing failed for the
    /// renew deadline. A renewal still unanswered at the deadline counts as
    /// failed: a request hanging on a restarting API server must not keep
    /// this process acting after a candidate may have taken over (it does
    /// so one lease duration after our last renewal, which is later than
    /// our deadline).
    pub async fn hold(&self, gate: &impl Gate) -> String {
        let lost = self.renew_until_lost(gate).await;
        self.fence.close();
        lost
    }

    async fn renew_until_lost(&self, gate: &impl Gate) -> String {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = tokio::time::Instant::from_std(renewed + self.config.renew_deadline);
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => {
                    renewed = sent;
                    self.fence.extend_to(sent + self.config.renew_deadline);
                    if let Some(why) = gate.blocked().await {
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
        if !mine && holder.is_some() {
            let mut observed = self.observed.lock().await;
            if !expired_record(&mut observed, spec, self.config.lease_duration) {
                return Ok(false);
            }
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

/// Whether the holder's record in `spec` has stood still for its lease
/// duration (`default` when it names none), measured on this process's
/// monotonic clock from when `observed` first saw it; `observed` keeps
/// the record for the next look.
pub fn expired_record(
    observed: &mut Option<Observed>,
    spec: &LeaseSpec,
    default: Duration,
) -> bool {
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

/// A process identity: the pod name when known (`POD_NAME`, else
/// `HOSTNAME`, else `fallback`), plus a random suffix so a restarted
/// process never mistakes the old holder for itself.
pub fn identity(fallback: &str) -> String {
    use rand::distr::{Alphanumeric, SampleString};
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| fallback.into());
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

    fn config(lease: u64, renew: u64, retry: u64) -> Config {
        Config {
            namespace: "ns".into(),
            name: "lease".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
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
        let elector = Elector::new(client, config(15, 10, 2), Fence::open());
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
