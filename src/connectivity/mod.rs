//! Whether a complete Postgres, Redis, in-cluster BlobStorage or in-cluster
//! SMTPCredentialSet can be used: the operator logs in to the host and port
//! of its Secret, with its credentials, from its own pod (for a bucket: its
//! key may use the bucket), and reports the `Connectable` condition and,
//! for databases, the Go operator's `cro_postgres_connection` /
//! `cro_redis_connection` gauges.
//!
//! Checks run off the reconcile path, a bounded number at a time, each
//! within a timeout. A reconcile registers what to check and reads the last
//! verdict (the one making an in-cluster CR complete awaits its first); a verdict
//! that changes wakes a reconcile of its CR, which writes it into the
//! status with everything else (one status writer).

pub mod postgres;
pub mod redis;
mod smtp;
mod tls;

pub use tls::Trust;

use std::{sync::Arc, time::Duration};

use cro_provider_api::{
    ConnectionDetails, ObjectStore, ResourceKind, StoreAccess, backoff::doubling,
};
use cro_runtime::own_writes::ObjectKey;
use futures::StreamExt;
use prometheus_client::{
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::{Notify, broadcast},
    time::Instant,
};
use tracing::debug;

use crate::metrics::ObjectLabels;

/// Where to log in, from a connection Secret's keys.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    Postgres {
        host: String,
        port: u16,
        user: String,
        password: String,
        database: String,
        /// A server that always offers TLS (RDS): see
        /// [`postgres::Login::require_tls`].
        require_tls: bool,
    },
    Redis {
        host: String,
        port: u16,
        password: Option<String>,
        /// In-transit encryption (the Secret's `tls` is `true`).
        tls: bool,
    },
    /// An in-cluster store's bucket (the Secret names its endpoint).
    Bucket {
        host: String,
        port: u16,
        endpoint: String,
        region: String,
        bucket: String,
        key_id: String,
        secret: String,
    },
    /// A plain SMTP server (the Secret's `tls` is `false`).
    Smtp {
        host: String,
        port: u16,
        user: String,
        password: String,
    },
}

impl std::fmt::Debug for Target {
    // Never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (host, port) = self.address();
        write!(f, "{host}:{port}")
    }
}

impl Target {
    /// What to check for `kind` given the Secret's `details` and whether
    /// its server always offers TLS (a cloud database); `None` for a
    /// Secret without a host and port (a placeholder a person fills in),
    /// a bucket without an endpoint (S3's own) and SMTP over TLS (SES).
    pub fn of(kind: ResourceKind, details: &ConnectionDetails, cloud: bool) -> Option<Target> {
        let get = |k: &str| details.0.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let port = |default: u16| get("port").map_or(Some(default), |p| p.parse().ok());
        match kind {
            ResourceKind::Postgres => Some(Target::Postgres {
                host: get("host")?.to_string(),
                port: port(5432)?,
                user: get("username")?.to_string(),
                password: get("password")?.to_string(),
                database: get("database").unwrap_or("postgres").to_string(),
                require_tls: cloud,
            }),
            ResourceKind::Redis => Some(Target::Redis {
                host: get("uri")?.to_string(),
                port: port(6379)?,
                password: get("password").map(str::to_string),
                tls: get("tls").is_some_and(|t| t.eq_ignore_ascii_case("true")),
            }),
            ResourceKind::BlobStorage => {
                let endpoint = get("bucketEndpoint")?;
                let (host, port) = http_address(endpoint)?;
                Some(Target::Bucket {
                    host,
                    port,
                    endpoint: endpoint.to_string(),
                    region: get("bucketRegion").unwrap_or("us-east-1").to_string(),
                    bucket: get("bucketName")?.to_string(),
                    key_id: get("credentialKeyID")?.to_string(),
                    secret: get("credentialSecretKey")?.to_string(),
                })
            }
            ResourceKind::Smtp if get("tls").is_some_and(|t| t.eq_ignore_ascii_case("false")) => {
                Some(Target::Smtp {
                    host: get("host")?.to_string(),
                    port: port(25)?,
                    user: get("username")?.to_string(),
                    password: get("password")?.to_string(),
                })
            }
            ResourceKind::Smtp => None,
        }
    }

    fn address(&self) -> (&str, u16) {
        match self {
            Target::Postgres { host, port, .. }
            | Target::Redis { host, port, .. }
            | Target::Bucket { host, port, .. }
            | Target::Smtp { host, port, .. } => (host, *port),
        }
    }
}

/// The host and port of an `http://` endpoint (`http://host:port[/...]`).
fn http_address(endpoint: &str) -> Option<(String, u16)> {
    let rest = endpoint.strip_prefix("http://")?;
    let authority = rest.split('/').next()?;
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok()?)),
        None => Some((authority.to_string(), 80)),
    }
}

/// Whether the bucket's key may use it, as an application does first.
async fn bucket_check(store: &dyn ObjectStore, target: &Target) -> Verdict {
    let Target::Bucket {
        endpoint,
        region,
        bucket,
        key_id,
        secret,
        ..
    } = target
    else {
        return Verdict::Protocol("not a bucket".into());
    };
    let at = StoreAccess {
        endpoint: endpoint.clone(),
        region: region.clone(),
        key_id: key_id.clone(),
        secret: secret.clone(),
    };
    match store.can_use(&at, bucket).await {
        Ok(()) => Verdict::Connected(String::new()),
        Err(e) => match e.code() {
            Some("InvalidAccessKeyId" | "SignatureDoesNotMatch" | "AccessDenied" | "HTTP 403") => {
                Verdict::AuthenticationFailed(e.message().to_string())
            }
            _ => Verdict::Refused(e.message().to_string()),
        },
    }
}

/// The most of a server's or the system's words a condition repeats.
const SAID_LIMIT: usize = 300;

/// What one check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Logged in (with a note when the check stopped short of it).
    Connected(String),
    NameNotResolved(String),
    TimedOut,
    /// No route, network down: the message of the operating system.
    Unreachable(String),
    ConnectionRefused,
    AuthenticationFailed(String),
    /// The server turned the login away for another reason.
    Refused(String),
    /// Logged in, but the server cannot write to its disk (Postgres's
    /// `disk_full`, Redis's failed append-only file or snapshot write):
    /// every write an application makes fails.
    StorageFull(String),
    /// The server does not speak the protocol as expected.
    Protocol(String),
}

impl Verdict {
    pub fn connected(&self) -> bool {
        matches!(self, Verdict::Connected(_))
    }

    /// The server admitted the login (whatever else the check found): the
    /// Go operator's connection gauge.
    fn logged_in(&self) -> bool {
        matches!(self, Verdict::Connected(_) | Verdict::StorageFull(_))
    }

    /// The `Connectable` condition: True, or False with what to do.
    pub fn condition(&self, target: &Target, timeout: Duration) -> cro_provider_api::Condition {
        let (reason, message) = self.explained(target, timeout);
        cro_provider_api::Condition {
            type_: cro_provider_api::ConditionType::Connectable,
            status: self.connected(),
            reason: reason.into(),
            message,
        }
    }

    /// The condition's reason and message: what happened and what to do.
    fn explained(&self, target: &Target, timeout: Duration) -> (&'static str, String) {
        let (host, port) = target.address();
        match self {
            Verdict::Connected(note) if note.is_empty() => (
                "Connected",
                format!(
                    "logged in to {host}:{port} with the Secret's credentials from the operator's pod"
                ),
            ),
            Verdict::Connected(note) => (
                "Connected",
                format!("reached {host}:{port}: {}", said(note)),
            ),
            Verdict::NameNotResolved(e) => (
                "NameNotResolved",
                format!(
                    "{host} does not resolve from the operator's pod ({}): the Secret names a host this cluster's DNS does not know, or the resource was deleted outside the operator",
                    said(e)
                ),
            ),
            Verdict::TimedOut => (
                "TimedOut",
                format!(
                    "no answer from {host}:{port} within {}s: a network path or security group blocks the operator's pod (check the database's subnet group, its security group's ingress from the cluster's CIDR, and peering to the cluster's network)",
                    timeout.as_secs()
                ),
            ),
            Verdict::Unreachable(e) => (
                "Unreachable",
                format!(
                    "{host}:{port} is unreachable from the operator's pod ({}): the database is in a network the cluster has no route to (check its subnet group and peering to the cluster's network)",
                    said(e)
                ),
            ),
            Verdict::ConnectionRefused => (
                "ConnectionRefused",
                format!(
                    "{host}:{port} refused the connection: nothing listens there (the server is stopped or starting, or the Secret's port is wrong)"
                ),
            ),
            Verdict::AuthenticationFailed(e) => (
                "AuthenticationFailed",
                format!(
                    "{host}:{port} rejected the Secret's credentials ({}): the Secret is stale or the password was changed outside the operator; annotate the resource with integreatly.org/rotate-credentials to set new ones",
                    said(e)
                ),
            ),
            Verdict::Refused(e) => ("LoginRefused", format!("{host}:{port}: {}", said(e))),
            Verdict::StorageFull(e) => (
                "StorageFull",
                format!(
                    "logged in to {host}:{port}, but it cannot write to its disk ({}): it refuses every write. A full disk needs more storage ({}) or data deleted",
                    said(e),
                    more_storage(target)
                ),
            ),
            Verdict::Protocol(e) => ("ProtocolError", format!("{host}:{port}: {}", said(e))),
        }
    }
}

/// What a server or the system said: the server may be anyone's (the
/// Secret's host), so its words are cut and kept on one line.
fn said(text: &str) -> String {
    let cut: String = text.chars().take(SAID_LIMIT).collect();
    cro_runtime::printable::one_line(&cut)
}

/// Where a full database gets more storage.
fn more_storage(target: &Target) -> &'static str {
    match target {
        Target::Postgres { .. } => {
            "in-cluster: raise resources.requests.storage in the tier's pvcSpec, which grows the PVC where its StorageClass allows volume expansion; a PVC the Go operator made keeps its own spec, so raise its request on the PVC itself; RDS: the tier's AllocatedStorage or MaxAllocatedStorage"
        }
        _ => {
            "in-cluster: raise resources.requests.storage in the tier's pvcSpec, which grows the PVC where its StorageClass allows volume expansion; a PVC the Go operator made keeps its own spec, so raise its request on the PVC itself"
        }
    }
}

/// A connection of either kind, plain or TLS.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
type Stream = Box<dyn Io>;

/// Resolves, connects and logs in to `target`, all within `timeout`; a
/// Redis TLS server must be one `trust` vouches for; a bucket is asked
/// through `store`.
pub async fn check(
    target: &Target,
    timeout: Duration,
    trust: &Trust,
    store: Option<&dyn ObjectStore>,
) -> Verdict {
    let deadline = Instant::now() + timeout;
    let (host, port) = target.address();
    let resolved = tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await;
    let addrs: Vec<_> = match resolved {
        Err(_) => return Verdict::TimedOut,
        Ok(Err(e)) => return Verdict::NameNotResolved(e.to_string()),
        Ok(Ok(a)) => a.collect(),
    };
    let mut last = Verdict::NameNotResolved("no addresses".into());
    for addr in addrs {
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => return Verdict::TimedOut,
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => {
                last = match e.kind() {
                    std::io::ErrorKind::ConnectionRefused => Verdict::ConnectionRefused,
                    std::io::ErrorKind::TimedOut => Verdict::TimedOut,
                    _ => Verdict::Unreachable(e.to_string()),
                };
                continue;
            }
        };
        let login = async {
            match target {
                Target::Postgres {
                    user,
                    password,
                    database,
                    require_tls,
                    ..
                } => {
                    let login = postgres::Login {
                        user,
                        password,
                        database,
                        require_tls: *require_tls,
                    };
                    postgres::check(tcp, host, &login).await
                }
                Target::Redis { password, tls, .. } => {
                    redis::check(tcp, host, *tls, password.as_deref(), trust).await
                }
                Target::Smtp { user, password, .. } => smtp::check(tcp, user, password).await,
                // Reached: now what the key may do, through an S3 client.
                Target::Bucket { .. } => match store {
                    Some(store) => bucket_check(store, target).await,
                    None => Verdict::Protocol("this process has no S3 client".into()),
                },
            }
        };
        return tokio::time::timeout_at(deadline, login)
            .await
            .unwrap_or(Verdict::TimedOut);
    }
    last
}

/// When to check again after `failures` failed checks in a row: 5 s after
/// the first, doubling up to `every`. A resource is complete as soon as its
/// server is, a moment before its Service answers (endpoints, kube-proxy)
/// or its DNS name resolves: the verdict turns within seconds, not at the
/// next interval, and so does a server that comes back.
fn retry_after(failures: u32, every: Duration) -> Duration {
    match failures {
        0 => every,
        n => doubling(Duration::from_secs(5), every, n),
    }
}

/// Where the checks are kept: a CR's check is part of what the operator
/// knows of the CR, in its one table of per-CR state (the reconcile
/// context's), and goes with it.
pub trait Checks: Send + Sync {
    /// Calls `f` with the check of the CR `key` (`None`: not checked);
    /// what `f` leaves there is kept.
    fn one(&self, key: &ObjectKey, f: &mut dyn FnMut(&mut Option<Check>));
    /// Calls `f` with every check.
    fn each(&self, f: &mut dyn FnMut(&ObjectKey, &mut Check));
}

/// The check of a CR's connection.
pub struct Check {
    /// Which CR, for the wake its verdict may send.
    cr: Changed,
    target: Target,
    labels: ObjectLabels,
    verdict: Option<Verdict>,
    /// The condition the CR's status shows: a verdict that reads the same
    /// wakes no reconcile (a restart rechecks everything, writes nothing).
    shown: Option<cro_provider_api::Condition>,
    due: Instant,
    running: bool,
    /// A reconcile awaits its first verdict (see [`Checker::first_verdict`]):
    /// the verdict is handed to it instead of waking another reconcile.
    awaited: bool,
    /// Failed checks in a row: the next comes sooner than `every` (see
    /// [`retry_after`]).
    failures: u32,
}

/// Marks a reconcile awaiting its first verdict gone when dropped.
struct Awaiting<'a> {
    checker: &'a Checker,
    key: &'a ObjectKey,
}

impl Drop for Awaiting<'_> {
    fn drop(&mut self) {
        let checker = self.checker;
        checker.with(self.key, |slot| {
            let Some(e) = slot else {
                return;
            };
            e.awaited = false;
            // A verdict handed to a reconcile that went away unwritten.
            let unshown = (e.verdict.as_ref()).map(|v| v.condition(&e.target, checker.timeout));
            if unshown.is_some() && unshown != e.shown {
                e.shown = unshown;
                let _ = checker.changed.send(e.cr.clone());
            }
        });
    }
}

/// A step of waiting for a first verdict.
enum Awaited {
    Verdict(Option<cro_provider_api::Condition>),
    Waiting,
}

/// A CR whose verdict changed: its reconcile writes the new condition.
#[derive(Clone, Debug)]
pub struct Changed {
    pub kind: ResourceKind,
    pub namespace: String,
    pub name: String,
}

/// The checks of every complete Postgres and Redis this process reconciles.
pub struct Checker {
    checks: Arc<dyn Checks>,
    changed: broadcast::Sender<Changed>,
    wake: Notify,
    /// Wakes the reconciles awaiting a first verdict.
    verdicts: Notify,
    every: Duration,
    timeout: Duration,
    trust: Trust,
    postgres: Family<ObjectLabels, Gauge>,
    redis: Family<ObjectLabels, Gauge>,
    /// `cro_postgres_storage_full`, `cro_redis_storage_full`.
    postgres_full: Family<ObjectLabels, Gauge>,
    redis_full: Family<ObjectLabels, Gauge>,
    /// Asks an in-cluster store whether a bucket's key may use it.
    store: Option<Arc<dyn ObjectStore>>,
}

/// Checks run at once; each is mostly waiting on the network.
const PARALLEL: usize = 16;

impl Checker {
    /// Checks every `every`, each within `timeout`, keeping each CR's
    /// check in `checks`.
    pub fn new(every: Duration, timeout: Duration, checks: Arc<dyn Checks>) -> Self {
        Checker {
            checks,
            changed: broadcast::channel(1024).0,
            wake: Notify::new(),
            verdicts: Notify::new(),
            every,
            timeout,
            trust: Trust::system(),
            postgres: Family::default(),
            redis: Family::default(),
            postgres_full: Family::default(),
            redis_full: Family::default(),
            store: None,
        }
    }

    /// Checks buckets through `store`.
    pub fn with_object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The Go operator's connection gauges.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "cro_postgres_connection",
            "1 when the operator logs in to the Postgres with its Secret, 0 when it cannot (see the Connectable condition)",
            self.postgres.clone(),
        );
        registry.register(
            "cro_redis_connection",
            "1 when the operator reaches and authenticates to the Redis with its Secret, 0 when it cannot (see the Connectable condition)",
            self.redis.clone(),
        );
        registry.register(
            "cro_postgres_storage_full",
            "1 when the operator, logged in to the Postgres, finds its disk full (a temporary file fails with disk_full, as the applications' writes do), 0 when it can write",
            self.postgres_full.clone(),
        );
        registry.register(
            "cro_redis_storage_full",
            "1 when the operator, logged in to the Redis, finds its last append-only file or snapshot write failed (it then refuses writes, MISCONF), 0 when neither did",
            self.redis_full.clone(),
        );
    }

    /// `f` on the check of `key`; `None` only if the table never called it.
    fn with<R>(&self, key: &ObjectKey, f: impl FnOnce(&mut Option<Check>) -> R) -> Option<R> {
        let (mut f, mut out) = (Some(f), None);
        self.checks.one(key, &mut |slot| {
            if let Some(f) = f.take() {
                out = Some(f(slot));
            }
        });
        out
    }

    /// CRs whose verdict changed, for the controllers to reconcile.
    pub fn subscribe(&self) -> broadcast::Receiver<Changed> {
        self.changed.subscribe()
    }

    /// Checks `target` for the CR `key` from now on (at once when it is new
    /// or changed); `shown` is the condition its status shows. The
    /// condition to report: the last verdict's, else the one shown.
    pub fn watch(
        &self,
        key: &ObjectKey,
        changed: Changed,
        target: Target,
        labels: ObjectLabels,
        shown: Option<cro_provider_api::Condition>,
    ) -> Option<cro_provider_api::Condition> {
        let now = Instant::now();
        self.with(key, |slot| {
            let entry = slot.get_or_insert_with(|| Check {
                cr: changed,
                target: target.clone(),
                labels: labels.clone(),
                verdict: None,
                shown: None,
                due: now,
                running: false,
                awaited: false,
                failures: 0,
            });
            entry.shown = shown;
            if entry.target != target {
                entry.target = target;
                entry.due = now;
                self.wake.notify_one();
            }
            if entry.labels != labels {
                self.remove_gauges(entry.cr.kind, &entry.labels);
                entry.labels = labels;
                if let Some(v) = &entry.verdict {
                    self.set_gauge(entry.cr.kind, &entry.labels, v);
                }
            }
            if entry.verdict.is_none() && entry.due <= now {
                self.wake.notify_one();
            }
            match &entry.verdict {
                Some(v) => Some(v.condition(&entry.target, self.timeout)),
                None => entry.shown.clone(),
            }
        })
        .flatten()
    }

    /// The first verdict of the CR `key`, awaited for at most the check
    /// timeout: a resource that has just become complete then shows its
    /// `Connectable` condition in the same status write, not in a second
    /// one moments later. `None` when no verdict came in time (it then
    /// wakes a reconcile, as every later change does) or `key` is not
    /// [`watch`](Self::watch)ed.
    pub async fn first_verdict(&self, key: &ObjectKey) -> Option<cro_provider_api::Condition> {
        let deadline = Instant::now() + self.timeout;
        // However this ends (also when the reconcile is dropped), later
        // verdicts wake reconciles again.
        let _awaiting = Awaiting { checker: self, key };
        loop {
            // Enabled before the entry is read, so a verdict recorded in
            // between still wakes it.
            let notified = self.verdicts.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let step = self.with(key, |slot| {
                let e = slot.as_mut()?;
                if let Some(v) = &e.verdict {
                    e.shown = Some(v.condition(&e.target, self.timeout));
                    return Some(Awaited::Verdict(e.shown.clone()));
                }
                if Instant::now() >= deadline {
                    return None;
                }
                e.awaited = true;
                Some(Awaited::Waiting)
            });
            match step.flatten()? {
                Awaited::Verdict(condition) => return condition,
                Awaited::Waiting => {}
            }
            let _ = tokio::time::timeout_at(deadline, notified).await;
        }
    }

    /// Stops checking the CR `key` (not complete, or gone).
    pub fn forget(&self, key: &ObjectKey) {
        if let Some(Some(e)) = self.with(key, Option::take) {
            self.remove_gauges(e.cr.kind, &e.labels);
        }
    }

    /// The gauges of `kind`: its connection (the Go operator's) and its
    /// full storage; databases only.
    fn gauges(&self, kind: ResourceKind) -> Option<[&Family<ObjectLabels, Gauge>; 2]> {
        match kind {
            ResourceKind::Postgres => Some([&self.postgres, &self.postgres_full]),
            ResourceKind::Redis => Some([&self.redis, &self.redis_full]),
            ResourceKind::BlobStorage | ResourceKind::Smtp => None,
        }
    }

    fn set_gauge(&self, kind: ResourceKind, labels: &ObjectLabels, verdict: &Verdict) {
        if let Some([connection, full]) = self.gauges(kind) {
            let is_full = matches!(verdict, Verdict::StorageFull(_));
            connection
                .get_or_create(labels)
                .set(i64::from(verdict.logged_in()));
            full.get_or_create(labels).set(i64::from(is_full));
        }
    }

    fn remove_gauges(&self, kind: ResourceKind, labels: &ObjectLabels) {
        for family in self.gauges(kind).into_iter().flatten() {
            family.remove(labels);
        }
    }

    /// Runs the checks that are due, forever.
    pub async fn run(self: Arc<Self>) {
        loop {
            let due = self.take_due();
            futures::stream::iter(due)
                .for_each_concurrent(PARALLEL, |(key, target)| {
                    let this = self.clone();
                    async move {
                        let store = this.store.as_deref();
                        let verdict = check(&target, this.timeout, &this.trust, store).await;
                        this.record(&key, &target, verdict);
                    }
                })
                .await;
            // When the next check is due, counted after these ran: each of
            // them is due again (a failed one within seconds), and one
            // that was running when they were taken counted for nothing.
            match self.next_due() {
                Some(at) if at > Instant::now() => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = self.wake.notified() => {}
                    }
                }
                Some(_) => {}
                None => self.wake.notified().await,
            }
        }
    }

    /// The checks due now, marked running.
    fn take_due(&self) -> Vec<(ObjectKey, Target)> {
        let now = Instant::now();
        let mut due = Vec::new();
        self.checks.each(&mut |key, e| {
            if !e.running && e.due <= now {
                e.running = true;
                due.push((key.clone(), e.target.clone()));
            }
        });
        due
    }

    /// When the next check not running now is due.
    fn next_due(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        self.checks.each(&mut |_, e| {
            if !e.running {
                next = Some(next.map_or(e.due, |n| n.min(e.due)));
            }
        });
        next
    }

    fn record(&self, key: &ObjectKey, target: &Target, verdict: Verdict) {
        self.with(key, |slot| {
            self.recorded(key, slot.as_mut(), target, verdict)
        });
    }

    fn recorded(&self, key: &ObjectKey, e: Option<&mut Check>, target: &Target, verdict: Verdict) {
        let Some(e) = e else {
            return; // forgotten meanwhile
        };
        e.running = false;
        if e.target != *target {
            return; // checked the old target; the new one is due already
        }
        e.failures = if verdict.connected() {
            0
        } else {
            e.failures.saturating_add(1)
        };
        e.due = Instant::now() + retry_after(e.failures, self.every);
        self.set_gauge(e.cr.kind, &e.labels, &verdict);
        let condition = verdict.condition(target, self.timeout);
        e.verdict = Some(verdict);
        if e.awaited {
            // The reconcile awaiting it writes it.
            self.verdicts.notify_waiters();
        } else if e.shown.as_ref() != Some(&condition) {
            debug!(object = %key, connected = condition.status, "connection verdict changed");
            // Shown once the reconcile this wakes writes it.
            e.shown = Some(condition);
            let _ = self.changed.send(e.cr.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::Objects;

    /// The key of the CR the tests check.
    fn k() -> ObjectKey {
        key_of("cache")
    }

    fn key_of(name: &str) -> ObjectKey {
        let cr = k8s_openapi::api::core::v1::ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        cro_runtime::own_writes::object_key(&cr)
    }

    /// A checker keeping its checks in the reconcile context's table.
    fn new_checker(every: Duration, timeout: Duration) -> Checker {
        Checker::new(every, timeout, Arc::new(Objects::default()))
    }

    /// `f` on the check of [`k`], which the test made.
    fn check_of<R>(c: &Checker, f: impl FnOnce(&Check) -> R) -> R {
        c.with(&k(), |slot| f(slot.as_ref().unwrap())).unwrap()
    }

    fn changed() -> Changed {
        Changed {
            kind: ResourceKind::Redis,
            namespace: "ns".into(),
            name: "cache".into(),
        }
    }

    fn target() -> Target {
        Target::Redis {
            host: "cache.ns.svc".into(),
            port: 6379,
            password: None,
            tls: false,
        }
    }

    #[tokio::test]
    async fn a_verdict_wakes_a_reconcile_only_when_the_status_would_change() {
        let checker = new_checker(Duration::from_secs(60), Duration::from_secs(5));
        let mut woken = checker.subscribe();
        let labels = ObjectLabels::default();
        let first = checker.watch(&k(), changed(), target(), labels.clone(), None);
        assert_eq!(first, None, "nothing known, nothing shown");
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert_eq!(woken.try_recv().map(|c| c.name).ok(), Some("cache".into()));
        let shown = checker.watch(&k(), changed(), target(), labels.clone(), None);
        assert_eq!(
            shown.as_ref().map(|c| (c.status, c.reason.as_str())),
            Some((false, "ConnectionRefused"))
        );
        // Written by that reconcile: the same verdict again wakes nothing.
        checker.watch(&k(), changed(), target(), labels.clone(), shown.clone());
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(woken.try_recv().is_err());
        // After a restart the status still shows it: reported until checked.
        let restarted = new_checker(Duration::from_secs(60), Duration::from_secs(5));
        let mut woken = restarted.subscribe();
        let kept = restarted.watch(&k(), changed(), target(), labels, shown.clone());
        assert_eq!(kept, shown);
        restarted.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(woken.try_recv().is_err());
        restarted.record(&k(), &target(), Verdict::Connected(String::new()));
        assert!(woken.try_recv().is_ok());
    }

    /// A resource that has just become complete awaits its first verdict
    /// and writes it with the rest of its status: the verdict wakes no
    /// second reconcile. One that comes too late wakes one, as before.
    #[tokio::test]
    async fn a_first_verdict_is_handed_to_the_reconcile_awaiting_it() {
        let checker = Arc::new(new_checker(
            Duration::from_secs(60),
            Duration::from_secs(30),
        ));
        let mut woken = checker.subscribe();
        let labels = ObjectLabels::default();
        assert_eq!(
            checker.watch(&k(), changed(), target(), labels.clone(), None),
            None
        );
        let awaiting = tokio::spawn({
            let checker = checker.clone();
            async move { checker.first_verdict(&k()).await }
        });
        // Recorded once the reconcile awaits it (or before: either way).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check_of(&checker, |e| e.awaited) && !awaiting.is_finished() {
            assert!(Instant::now() < deadline, "first_verdict never awaited");
            tokio::task::yield_now().await;
        }
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        let handed = awaiting.await.ok().flatten();
        assert_eq!(
            handed.as_ref().map(|c| (c.status, c.reason.as_str())),
            Some((false, "ConnectionRefused"))
        );
        assert!(
            woken.try_recv().is_err(),
            "the verdict also woke a reconcile"
        );
        // Shown now: the same verdict again wakes nothing, a new one does.
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(woken.try_recv().is_err());
        checker.record(&k(), &target(), Verdict::Connected(String::new()));
        assert!(woken.try_recv().is_ok());
    }

    #[tokio::test]
    async fn a_first_verdict_that_comes_late_wakes_a_reconcile() {
        let checker = new_checker(Duration::from_secs(60), Duration::from_millis(20));
        let mut woken = checker.subscribe();
        checker.watch(&k(), changed(), target(), ObjectLabels::default(), None);
        assert_eq!(checker.first_verdict(&k()).await, None, "no check ran");
        assert_eq!(checker.first_verdict(&key_of("unwatched")).await, None);
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(woken.try_recv().is_ok(), "nobody awaits it any more");
    }

    #[test]
    fn a_failed_check_is_repeated_sooner_then_less_often() {
        let every = Duration::from_secs(300);
        let after: Vec<u64> = (0..8).map(|n| retry_after(n, every).as_secs()).collect();
        assert_eq!(after, [300, 5, 10, 20, 40, 80, 160, 300]);
        assert_eq!(retry_after(u32::MAX, every), every);
        assert_eq!(retry_after(3, Duration::from_secs(7)).as_secs(), 7);
    }

    #[tokio::test]
    async fn a_failed_verdict_is_due_again_within_seconds_a_good_one_after_the_interval() {
        let checker = new_checker(Duration::from_secs(300), Duration::from_secs(5));
        checker.watch(&k(), changed(), target(), ObjectLabels::default(), None);
        let due = |c: &Checker| check_of(c, |e| e.due) - Instant::now();
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(due(&checker) <= Duration::from_secs(5));
        checker.record(&k(), &target(), Verdict::ConnectionRefused);
        assert!(due(&checker) > Duration::from_secs(5) && due(&checker) <= Duration::from_secs(10));
        checker.record(&k(), &target(), Verdict::Connected(String::new()));
        assert!(due(&checker) > Duration::from_secs(250));
    }

    /// A check that failed is run again by the checker itself, also when
    /// nothing else is watched: the loop once counted when the next check
    /// was due before the running one recorded its verdict, and then slept
    /// until a new registration woke it (a lone database starting up kept
    /// its first verdict).
    #[tokio::test]
    async fn a_failed_check_is_repeated_with_nothing_else_to_wake_the_checker() {
        let checker = Arc::new(new_checker(
            Duration::from_secs(300),
            Duration::from_secs(5),
        ));
        // Nothing listens on port 1 of loopback: refused at once.
        let refused = Target::Redis {
            host: "127.0.0.1".into(),
            port: 1,
            password: None,
            tls: false,
        };
        // The checker runs first and waits for work, as in the operator.
        let running = tokio::spawn(checker.clone().run());
        tokio::task::yield_now().await;
        checker.watch(&k(), changed(), refused, ObjectLabels::default(), None);
        let failures = |c: &Checker| check_of(c, |e| e.failures);
        let deadline = Instant::now() + Duration::from_secs(30);
        while failures(&checker) < 2 {
            assert!(
                Instant::now() < deadline,
                "checked {} times in 30 s; the retry is due 5 s after the first",
                failures(&checker)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        running.abort();
    }

    #[test]
    fn database_targets_come_from_the_secret_keys_and_never_print_the_password() {
        let pg = ConnectionDetails::of(&[
            ("host", "db"),
            ("port", "5433"),
            ("username", "u"),
            ("password", "s3cret"),
            ("database", "d"),
        ]);
        let t = Target::of(ResourceKind::Postgres, &pg, false);
        assert!(matches!(
            &t,
            Some(Target::Postgres {
                port: 5433,
                require_tls: false,
                ..
            })
        ));
        assert!(matches!(
            Target::of(ResourceKind::Postgres, &pg, true),
            Some(Target::Postgres {
                require_tls: true,
                ..
            })
        ));
        assert_eq!(format!("{t:?}"), "Some(db:5433)");
        let placeholder = ConnectionDetails::of(&[
            ("host", ""),
            ("port", "5432"),
            ("username", "u"),
            ("password", "p"),
        ]);
        assert_eq!(
            Target::of(ResourceKind::Postgres, &placeholder, false),
            None
        );
        let redis = ConnectionDetails::of(&[("uri", "cache"), ("port", "6379")]);
        assert!(matches!(
            Target::of(ResourceKind::Redis, &redis, true),
            Some(Target::Redis {
                password: None,
                tls: false,
                ..
            })
        ));
        let encrypted =
            ConnectionDetails::of(&[("uri", "cache"), ("password", "t"), ("tls", "true")]);
        assert!(matches!(
            Target::of(ResourceKind::Redis, &encrypted, true),
            Some(Target::Redis {
                port: 6379,
                tls: true,
                ..
            })
        ));
        assert_eq!(Target::of(ResourceKind::BlobStorage, &redis, true), None);
    }

    #[test]
    fn bucket_and_mail_targets_come_from_the_secret_keys_and_never_print_the_password() {
        // A bucket is checked where its Secret names an endpoint (an
        // in-cluster store), never S3's own.
        let mut bucket = ConnectionDetails::of(&[
            ("bucketName", "b"),
            ("bucketRegion", "us-east-1"),
            ("credentialKeyID", "k"),
            ("credentialSecretKey", "s3cret"),
        ]);
        assert_eq!(Target::of(ResourceKind::BlobStorage, &bucket, true), None);
        (bucket.0).insert("bucketEndpoint".into(), "http://b.ns.svc:8333".into());
        let t = Target::of(ResourceKind::BlobStorage, &bucket, false);
        assert!(matches!(&t, Some(Target::Bucket { port: 8333, .. })));
        assert_eq!(format!("{t:?}"), "Some(b.ns.svc:8333)");
        assert_eq!(http_address("http://h/x"), Some(("h".into(), 80)));
        assert_eq!(http_address("https://h:443"), None);

        // SMTP in plain text is checked; over TLS (SES) it is not.
        let mut mail = ConnectionDetails::of(&[
            ("host", "mail.ns.svc"),
            ("port", "1025"),
            ("username", "app"),
            ("password", "s3cret"),
            ("tls", "false"),
        ]);
        let t = Target::of(ResourceKind::Smtp, &mail, false);
        assert!(matches!(&t, Some(Target::Smtp { port: 1025, .. })));
        assert!(!format!("{t:?}").contains("s3cret"));
        (mail.0).insert("tls".into(), "true".into());
        assert_eq!(Target::of(ResourceKind::Smtp, &mail, true), None);
    }

    #[test]
    fn a_servers_words_are_cut_and_kept_on_one_line_in_the_condition() {
        let forged = format!(
            "no\nPending changes (plan hash 0123456789):{}",
            "x".repeat(10_000)
        );
        for verdict in [
            Verdict::Refused(forged.clone()),
            Verdict::Protocol(forged.clone()),
            Verdict::AuthenticationFailed(forged.clone()),
            Verdict::Connected(forged.clone()),
        ] {
            let message = verdict.condition(&target(), Duration::from_secs(5)).message;
            assert!(!message.contains('\n'), "{message}");
            assert!(message.len() < SAID_LIMIT + 400, "{} bytes", message.len());
        }
    }
}
