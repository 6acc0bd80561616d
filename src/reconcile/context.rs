//! What every reconcile gets: the client, operator settings, configuration
//! reader, providers, the Events and per-object retry state.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cro_provider_api::{Provider, backoff::doubling};
use kube::{Client, Resource};

use crate::{
    config::ConfigReader,
    connectivity::{Check, Checker, Checks},
    leader::HeldBack,
    metrics::Metrics,
    providers::owned::Owned,
};
use cro_runtime::{
    cache,
    events::Events,
    own_writes::{Cached, LastWrite, ObjectKey, object_key},
    share::{Shares, Slot, Woken},
};

/// Operator-wide settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub operator_namespace: String,
    /// Only these namespaces are watched; empty watches all namespaces.
    pub watch_namespaces: Vec<String>,
    /// Reconciles run at once per controller (per kind and namespace).
    pub concurrency: u16,
    pub cluster_id: String,
    /// Prefix of tag keys, e.g. `integreatly.org/`.
    pub tag_key_prefix: String,
    /// Operator-configured tags added to every cloud resource.
    pub extra_tags: BTreeMap<String, String>,
    /// The OpenShift Infrastructure's user-defined resource tags; they win
    /// over the operator's own tags, as in the Go operator.
    pub infrastructure_tags: BTreeMap<String, String>,
    /// Let `secretRef.namespace` name another namespace.
    pub allow_cross_namespace_secrets: bool,
    /// How often a complete cloud resource is looked at again for changes
    /// made outside the operator (clouds send no events).
    pub recheck_interval: Duration,
    /// How often the cloud's monitoring data of every database is read
    /// (the CloudWatch gauges).
    pub cloud_metrics_interval: Duration,
    /// The namespaces this process reconciles (all without sharding).
    pub shard: cro_runtime::shard::Shard,
    /// Read a CR's own namespace's `cloud-resource-config`.
    pub namespace_config: bool,
}

/// Shared by all reconciles of all controllers.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub config: ConfigReader,
    /// Watches of the objects the operator owns (output Secrets, workloads).
    pub owned: Arc<Owned>,
    pub providers: BTreeMap<&'static str, Arc<dyn Provider>>,
    pub events: Events,
    pub metrics: Arc<Metrics>,
    /// Connection checks of complete Postgres and Redis.
    pub connectivity: Arc<Checker>,
    /// Namespaces left alone while a Go operator's trace is there.
    pub held_back: HeldBack,
    /// What this process knows of each CR it reconciled since it started:
    /// the one table of per-CR state (its connection check's too).
    objects: Arc<Objects>,
    /// Each namespace's share of the reconcile slots, where one controller
    /// per kind serves every namespace (`None`: each watched namespace
    /// has its own).
    shares: Option<Shares>,
}

/// What this process knows of each CR: the one table of per-CR state,
/// shared by the reconciles and the connection checks (it keeps them, see
/// [`Checks`]).
#[derive(Default)]
pub struct Objects(Mutex<HashMap<ObjectKey, Known>>);

impl Objects {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Known>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Checks for Objects {
    fn one(&self, key: &ObjectKey, f: &mut dyn FnMut(&mut Option<Check>)) {
        let mut map = self.map();
        match map.get_mut(key) {
            Some(known) => f(&mut known.check),
            // A CR not known yet is added only for a check `f` makes.
            None => {
                let mut check = None;
                f(&mut check);
                if check.is_some() {
                    map.entry(key.clone()).or_default().check = check;
                }
            }
        }
    }

    fn each(&self, f: &mut dyn FnMut(&ObjectKey, &mut Check)) {
        for (key, known) in self.map().iter_mut() {
            if let Some(check) = known.check.as_mut() {
                f(key, check);
            }
        }
    }
}

/// What this process knows of one CR.
#[derive(Default)]
struct Known {
    /// A reconcile of it finished.
    reconciled: bool,
    /// The version this process's last write of it made, until the cache
    /// shows it.
    last_write: LastWrite,
    /// A digest of the last status this process sent for it, whether or
    /// not the answer came back.
    status_sent: Option<u32>,
    /// Consecutive transient failures, and when the last was.
    failures: Option<(u32, Instant)>,
    /// A failure that needs a person: what it failed with.
    parked: Option<Parked>,
    /// The check of its connection, while it is complete.
    check: Option<Check>,
}

/// A reconcile's namespace holds its share of the kind's slots.
#[derive(Debug)]
pub struct ShareHeld;

/// A failure that needs a person, and the inputs it happened with.
struct Parked {
    inputs: u64,
    label: &'static str,
    message: String,
    since: Instant,
}

/// How long a transient failure counts towards the backoff without a new
/// one: longer than the longest backoff and than the retry of parked
/// failures.
const FORGET_AFTER: Duration = Duration::from_secs(2 * 3600);

impl Context {
    /// `owned` watches the objects the operator owns in the watched
    /// scopes (shared with the in-cluster provider); `objects` is the table
    /// `connectivity` keeps its checks in.
    pub fn new(
        client: Client,
        settings: Settings,
        owned: Arc<Owned>,
        providers: Vec<Arc<dyn Provider>>,
        metrics: Arc<Metrics>,
        (connectivity, objects): (Arc<Checker>, Arc<Objects>),
    ) -> Self {
        let scopes = cache::scopes(&settings.watch_namespaces);
        let shares =
            (settings.watch_namespaces.is_empty()).then(|| Shares::new(settings.concurrency));
        Context {
            config: ConfigReader::new(client.clone(), settings.operator_namespace.clone(), &scopes)
                .with_namespace_config(settings.namespace_config),
            owned,
            events: Events::new(
                client.clone(),
                "cloud-resource-operator",
                std::env::var("POD_NAME").ok(),
            ),
            providers: providers.into_iter().map(|p| (p.name(), p)).collect(),
            client,
            settings,
            metrics,
            connectivity,
            held_back: HeldBack::default(),
            objects,
            shares,
        }
    }

    /// Leaves the CRs of the namespaces `held` names alone.
    pub fn with_held_back(mut self, held: HeldBack) -> Self {
        self.held_back = held;
        self
    }

    /// A slot for a reconcile of a `kind` CR in `namespace`: always when
    /// each watched namespace has controllers of its own, else within the
    /// namespace's share (`Err` when it holds it already).
    pub fn reconcile_slot(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Slot>, ShareHeld> {
        match &self.shares {
            None => Ok(None),
            Some(shares) => shares
                .take(kind, namespace, name)
                .map(Some)
                .ok_or(ShareHeld),
        }
    }

    /// The parked reconciles to run again as slots are given back (see
    /// `share`); `None` where each watched namespace has its own
    /// controllers.
    pub fn share_wakes(&self) -> Option<tokio::sync::broadcast::Receiver<Woken>> {
        self.shares.as_ref().map(Shares::wakes)
    }

    /// A write of this process's own made `version` of the CR `obj`.
    pub fn wrote<K: Resource<DynamicType = ()>>(&self, obj: &K, version: Option<String>) {
        if let Some(version) = version {
            let mut objects = self.objects();
            objects
                .entry(object_key(obj))
                .or_default()
                .last_write
                .note(&version);
        }
    }

    /// Whether the cache shows `obj` older than the operator's last write
    /// to it (see [`super::stale`]).
    pub fn cache_behind<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Cached {
        let mut objects = self.objects();
        let Some(known) = objects.get_mut(&object_key(obj)) else {
            return Cached::Current;
        };
        (known.last_write).cache_behind(obj.meta().resource_version.as_deref())
    }

    /// The watch shows `obj`: true when a reconcile waits for this version
    /// (see [`super::stale`]), which is then to run again.
    pub fn seen<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        let mut objects = self.objects();
        let Some(known) = objects.get_mut(&object_key(obj)) else {
            return false;
        };
        known
            .last_write
            .seen(obj.meta().resource_version.as_deref())
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Known>> {
        self.objects.map()
    }

    /// Whether this process has reconciled `obj` before.
    pub fn reconciled_since_start<K: Resource<DynamicType = ()>>(&self, obj: &K) -> bool {
        self.objects()
            .get(&object_key(obj))
            .is_some_and(|k| k.reconciled)
    }

    /// A reconcile of `obj` finished.
    pub fn reconciled<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        self.objects()
            .entry(object_key(obj))
            .or_default()
            .reconciled = true;
    }

    /// A status is about to be sent for `obj`: its digest is kept even
    /// if the answer is lost, as the write may still have been made.
    pub fn sending_status<K: Resource<DynamicType = ()>>(&self, obj: &K, digest: u32) {
        self.objects()
            .entry(object_key(obj))
            .or_default()
            .status_sent = Some(digest);
    }

    /// Whether a status with `digest`, which the cache already shows for
    /// `obj`, may go unwritten: not when this process last sent another
    /// one, which the cache may not show yet (a lost answer, a watch cut
    /// by an API server restart) and which would otherwise stay.
    pub fn may_skip_status<K: Resource<DynamicType = ()>>(&self, obj: &K, digest: u32) -> bool {
        self.objects()
            .get(&object_key(obj))
            .and_then(|k| k.status_sent)
            .is_none_or(|sent| sent == digest)
    }

    /// `obj` is gone: its per-object state goes with it, its connection
    /// check (and the check's gauges) first.
    pub fn forget<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        let key = object_key(obj);
        self.connectivity.forget(&key);
        self.objects().remove(&key);
    }

    /// When to recheck a complete cloud resource at the latest: after the
    /// recheck interval, but after a random part of it on the first look
    /// since start, so the rechecks a restart starts are spread over one
    /// interval and then stay spread, rather than all falling due at once.
    pub fn recheck_within(&self, first_look: bool) -> Duration {
        let interval = self.settings.recheck_interval;
        if first_look {
            interval.mul_f64(rand::random_range(0.0..1.0))
        } else {
            interval
        }
    }

    /// Records one more consecutive failure of `obj` and returns how long
    /// to wait before retrying: 5s doubling to at most 5 minutes, or to at
    /// most 30s (spread by up to a fifth) when the API server was
    /// unavailable: every object failed alike then, and each should resume
    /// soon after the server is back (a control-plane upgrade), not minutes
    /// later, while the spread keeps them from all retrying at once. A
    /// failure longer ago than `FORGET_AFTER` no longer counts.
    pub fn backoff<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        api_server_unavailable: bool,
    ) -> Duration {
        let now = Instant::now();
        let mut objects = self.objects();
        let known = objects.entry(object_key(obj)).or_default();
        let earlier = (known.failures)
            .filter(|(_, last)| now.duration_since(*last) < FORGET_AFTER)
            .map_or(0, |(n, _)| n);
        let n = earlier.saturating_add(1);
        known.failures = Some((n, now));
        let first = Duration::from_secs(5);
        if api_server_unavailable {
            doubling(first, Duration::from_secs(30), n).mul_f64(rand::random_range(0.8..1.0))
        } else {
            doubling(first, Duration::from_secs(300), n)
        }
    }

    /// Forgets the failures of `obj`: it succeeded.
    pub fn succeeded<K: Resource<DynamicType = ()>>(&self, obj: &K) {
        if let Some(known) = self.objects().get_mut(&object_key(obj)) {
            known.failures = None;
            known.parked = None;
        }
    }

    /// The message of a failure that needs a person, if `obj` had one with
    /// the same `inputs` (spec, annotations, configuration) less than
    /// `retry` ago: calling the cloud again would only fail again.
    pub fn parked<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        inputs: u64,
        retry: Duration,
    ) -> Option<(&'static str, String)> {
        let objects = self.objects();
        let parked = objects.get(&object_key(obj))?.parked.as_ref()?;
        (parked.inputs == inputs && parked.since.elapsed() < retry)
            .then(|| (parked.label, parked.message.clone()))
    }

    /// Records a failure that needs a person.
    pub fn park<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        inputs: u64,
        label: &'static str,
        message: String,
    ) {
        let since = Instant::now();
        let parked = Parked {
            inputs,
            label,
            message,
            since,
        };
        self.objects().entry(object_key(obj)).or_default().parked = Some(parked);
    }
}
