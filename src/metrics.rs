//! Prometheus metrics: reconciles, their errors (by the error's stable
//! label) and durations per kind; the Go operator's per-kind phase gauges
//! (`cro_postgres_status_phase`, ...) and its database gauges (info,
//! availability, deletion timestamp, allocated storage) and the CloudWatch
//! gauges its providers read (`cro_postgres_free_storage_average`, ...);
//! and whatever each
//! provider registers (the aws provider's API calls by service, operation
//! and outcome). Served on `/metrics` with `/healthz` and `/readyz`.

use std::{
    sync::{Arc, atomic::AtomicU64},
    time::Duration,
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, text::encode},
    metrics::{
        MetricType,
        counter::{ConstCounter, Counter},
        family::Family,
        gauge::{ConstGauge, Gauge},
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Metric, Registry},
};

use cro_provider_api::{CLOUD_GAUGES, CloudGauge, CloudSample, Health};

use crate::api::Phase;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReadyLabels {
    kind: String,
    provider: String,
    tier: String,
}

fn ready_histogram() -> Histogram {
    // 1 s .. ~68 min: in-cluster workloads take seconds, RDS many minutes.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

/// The Go operator's labels on its phase gauges
/// (`buildPostgresStatusMetricsLabels` and siblings, pkg/resources/labels.go),
/// so alert rules written for it keep matching.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct PhaseLabels {
    #[prometheus(flatten)]
    pub object: ObjectLabels,
    statusPhase: String,
}

/// The Go operator's labels on its info gauges (`BuildInfoMetricLabels`,
/// pkg/resources/labels.go): the cloud's status word, `nil` when unknown.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    #[prometheus(flatten)]
    pub object: ObjectLabels,
    status: String,
}

/// Which object a phase gauge is about.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct ObjectLabels {
    pub clusterID: String,
    /// The CR's name.
    pub resourceID: String,
    pub namespace: String,
    /// The cloud identifier (a snapshot's ID for snapshot kinds).
    pub instanceID: String,
    /// The CR's `productName` label.
    pub productName: String,
    /// The concrete provider, e.g. `aws-rds`.
    pub strategy: String,
}

fn duration_histogram() -> Histogram {
    // 5 ms .. ~20 s
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// Kinds with a phase gauge, and the Go operator's gauge names.
const PHASE_GAUGES: [(&str, &str); 6] = [
    ("Postgres", "cro_postgres_status_phase"),
    ("Redis", "cro_redis_status_phase"),
    ("BlobStorage", "cro_blobstorage_status_phase"),
    ("SMTPCredentialSet", "cro_smtpcredentialset_status_phase"),
    ("PostgresSnapshot", "cro_postgres_snapshot_status_phase"),
    ("RedisSnapshot", "cro_redis_snapshot_status_phase"),
];

/// The Go operator's gauges of one Postgres or Redis besides its phase
/// (`exposePostgresMetrics`, `exposeRedisMetrics`,
/// `setPostgresDeletionTimestampMetric` and the Redis ones, in
/// pkg/providers/aws/provider_postgres.go and provider_redis.go).
struct DatabaseGauges {
    kind: &'static str,
    /// `cro_<kind>_info`: the time the cloud's status was last read.
    info: Family<InfoLabels, Gauge<f64, AtomicU64>>,
    /// `cro_<kind>_available`: 1 while that status serves clients.
    available: Family<ObjectLabels, Gauge>,
    /// `cro_<kind>_deletion_timestamp`: the CR's deletion time, while it
    /// is being deleted.
    deletion: Family<PhaseLabels, Gauge>,
    /// `cro_postgres_current_allocated_storage`, in bytes.
    allocated: Option<Family<ObjectLabels, Gauge>>,
    /// `cro_postgres_max_memory`: the instance class's memory, in bytes.
    max_memory: Option<Family<ObjectLabels, Gauge>>,
    /// `cro_<kind>_service_maintenance`: per pending maintenance action,
    /// with the Go operator's labels, when it is due.
    maintenance: Family<Vec<(String, String)>, Gauge>,
}

impl DatabaseGauges {
    /// The gauges of `kind`'s databases (`name` in the metric names), in
    /// `r`.
    fn registered(r: &mut Registry, kind: &'static str, name: &str) -> Self {
        DatabaseGauges {
        kind,
        info: registered(
            r,
            &format!("cro_{name}_info"),
            &format!(
                "Unix time the cloud status of each {kind} was last read, labelled with it"
            ),
            Family::default(),
        ),
        available: registered(
            r,
            &format!("cro_{name}_available"),
            &format!("1 while the cloud status of each {kind} serves clients"),
            Family::default(),
        ),
        deletion: registered(
            r,
            &format!("cro_{name}_deletion_timestamp"),
            &format!("Unix time each {kind} being deleted was asked to be"),
            Family::default(),
        ),
        allocated: (kind == "Postgres").then(|| {
            registered(
                r,
                "cro_postgres_current_allocated_storage",
                "Bytes of storage allocated to each Postgres",
                Family::default(),
            )
        }),
        maintenance: registered(
            r,
            &format!("cro_{name}_service_maintenance"),
            &format!("Unix time each maintenance AWS has pending for a {kind} is due, labelled as the Go operator labels it"),
            Family::default(),
        ),
        max_memory: (kind == "Postgres").then(|| {
            registered(
                r,
                "cro_postgres_max_memory",
                "The amount of max random access memory of each Postgres's instance class. Units: Bytes",
                Family::default(),
            )
        }),
    }
    }
}

/// Gauges of `f64` values, one per object.
type FloatFamily = Family<ObjectLabels, Gauge<f64, AtomicU64>>;

/// What one object's gauges show.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shown {
    pub phase: Option<Phase>,
    /// The cloud's view, as last read (kept from an earlier pass that read
    /// it when this one did not).
    pub health: Option<Health>,
    /// The CR's deletion timestamp (Unix seconds), while it is deleted.
    pub deleting_since: Option<i64>,
}

/// An object's gauges as they are now.
#[derive(Clone, Debug, Default)]
struct Tracked {
    labels: ObjectLabels,
    shown: Shown,
}

/// Every object's gauges, by kind, namespace and name.
#[derive(Debug, Default)]
struct TrackedObjects(
    std::sync::Mutex<std::collections::HashMap<(String, String, String), Tracked>>,
);

impl TrackedObjects {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String, String), Tracked>>
    {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The phase gauges are written from the tracked objects when scraped
/// rather than kept as series: a series per object and phase (six label
/// sets of seven strings) was the largest share of the operator's memory
/// with thousands of CRs.
impl Collector for TrackedObjects {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let tracked = self.lock();
        for (kind, name) in PHASE_GAUGES {
            let help = format!("1 for the current status phase of each {kind}");
            let mut family = encoder.encode_descriptor(name, &help, None, MetricType::Gauge)?;
            let of_kind = tracked.iter().filter(|((k, _, _), _)| k == kind);
            for (_, t) in of_kind {
                let Some(current) = t.shown.phase else {
                    continue;
                };
                for p in Phase::ALL {
                    let series = PhaseLabels {
                        object: t.labels.clone(),
                        statusPhase: p.as_str().into(),
                    };
                    ConstGauge::new(i64::from(p == current))
                        .encode(family.encode_family(&series)?)?;
                }
            }
        }
        Ok(())
    }
}

/// The families every reconcile counts in.
struct ReconcileFamilies {
    reconciles: Family<KindLabels, Counter>,
    /// Reconciles put off because their namespace held its share.
    deferred: Family<KindLabels, Counter>,
    failures: Family<ErrorLabels, Counter>,
    duration: Family<KindLabels, Histogram, fn() -> Histogram>,
}

impl ReconcileFamilies {
    fn registered(r: &mut Registry) -> Self {
        ReconcileFamilies {
            reconciles: registered(
                r,
                "cro_reconciles",
                "Reconciles run, by kind",
                Family::default(),
            ),
            deferred: registered(
                r,
                "cro_reconciles_deferred",
                "Reconciles put off for a second because their namespace held its share of the kind's reconciles (watching every namespace), by kind",
                Family::default(),
            ),
            failures: registered(
                r,
                "cro_reconcile_errors",
                "Reconciles that failed, by kind and error label",
                Family::default(),
            ),
            duration: registered(
                r,
                "cro_reconcile_duration_seconds",
                "Reconcile duration, by kind",
                Family::new_with_constructor(duration_histogram as fn() -> Histogram),
            ),
        }
    }
}

pub struct Metrics {
    registry: Registry,
    reconcile: ReconcileFamilies,
    databases: Vec<DatabaseGauges>,
    /// What each object's series show now: the phase gauges are written
    /// from it when scraped; the others' series are removed when the
    /// labels change (an identifier recorded, a status word) or the object
    /// goes.
    tracked: Arc<TrackedObjects>,
    time_to_ready: Family<ReadyLabels, Histogram, fn() -> Histogram>,
    leader: Gauge,
    /// 1 while a Go cloud-resource-operator keeps this process from leading.
    go_operator: Gauge,
    /// The gauges of cloud monitoring data, and the series each shows.
    cloud: Vec<(CloudGauge, FloatFamily)>,
    cloud_shown: std::sync::Mutex<Vec<(usize, ObjectLabels)>>,
    /// The families named after their object.
    named: Arc<NamedGauges>,
}

/// A label set and its value.
type Labelled = (Vec<(String, String)>, i64);

/// Gauges whose family is named after their object, as the Go operator's
/// `cro_redis_snapshot_not_found_<name>`: a family is there while it has
/// a series.
#[derive(Debug, Default)]
struct NamedGauges(std::sync::Mutex<std::collections::BTreeMap<String, Vec<Labelled>>>);

impl NamedGauges {
    fn set(&self, family: &str, (labels, value): Labelled) {
        let mut families = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let series = families.entry(family.to_string()).or_default();
        match series.iter_mut().find(|(l, _)| *l == labels) {
            Some(found) => found.1 = value,
            None => series.push((labels, value)),
        }
    }

    fn remove(&self, family: &str, labels: &[(String, String)]) {
        let mut families = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(series) = families.get_mut(family) {
            series.retain(|(l, _)| l != labels);
            if series.is_empty() {
                families.remove(family);
            }
        }
    }
}

impl Collector for NamedGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let families = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (name, series) in families.iter() {
            let help = "1 for each snapshot of this Redis that AWS could not find to tag (not available yet), 0 once tagged";
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, value) in series {
                ConstGauge::new(*value).encode(family.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

/// The providers' own metrics (`Provider::metrics`), rendered from what
/// each keeps when scraped.
pub struct ProviderMetrics(pub Vec<Arc<dyn cro_provider_api::Provider>>);

impl std::fmt::Debug for ProviderMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|p| p.name()).collect();
        f.debug_tuple("ProviderMetrics").field(&names).finish()
    }
}

impl Collector for ProviderMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use cro_provider_api::MetricKind;
        for provider in &self.0 {
            for family in provider.metrics() {
                let kind = match family.kind {
                    MetricKind::Counter => MetricType::Counter,
                    MetricKind::Gauge => MetricType::Gauge,
                };
                let mut encoder =
                    encoder.encode_descriptor(family.name, family.help, None, kind)?;
                for (labels, value) in &family.series {
                    let series = encoder.encode_family(labels)?;
                    match family.kind {
                        MetricKind::Counter => ConstCounter::new(*value).encode(series)?,
                        MetricKind::Gauge => {
                            ConstGauge::new(i64::try_from(*value).unwrap_or(i64::MAX))
                                .encode(series)?
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// `metric`, registered under `name`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// The operator's families, plus those `others` register (the
    /// providers', the connection checks').
    pub fn new(others: impl FnOnce(&mut Registry)) -> Self {
        let mut registry = Registry::default();
        let r = &mut registry;
        let reconcile = ReconcileFamilies::registered(r);
        let tracked = Arc::new(TrackedObjects::default());
        r.register_collector(Box::new(tracked.clone()));
        let databases = [("Postgres", "postgres"), ("Redis", "redis")]
            .into_iter()
            .map(|(kind, name)| DatabaseGauges::registered(r, kind, name))
            .collect();
        let time_to_ready = registered(
            r,
            "cro_time_to_ready_seconds",
            "Seconds from a resource's creation to its first complete phase, by kind, provider and tier",
            Family::new_with_constructor(ready_histogram as fn() -> Histogram),
        );
        let leader = registered(
            r,
            "cro_leader",
            "1 while this process holds the leader-election Lease (or runs without leader election)",
            Gauge::default(),
        );
        let go_operator = registered(
            r,
            "cro_go_operator_present",
            "1 while a Go cloud-resource-operator runs, leads or is installed by OLM where this operator would write, so this process does not lead (the log says where)",
            Gauge::default(),
        );
        let cloud = CLOUD_GAUGES
            .iter()
            .map(|g| (*g, registered(r, g.name, g.help, Family::default())))
            .collect();
        others(r);
        let named = Arc::new(NamedGauges::default());
        r.register_collector(Box::new(named.clone()));
        Metrics {
            registry,
            reconcile,
            databases,
            time_to_ready,
            leader,
            go_operator,
            tracked,
            cloud,
            cloud_shown: Default::default(),
            named,
        }
    }

    pub fn reconciled(&self, kind: &str, took: Duration, error: Option<&str>) {
        let families = &self.reconcile;
        let labels = KindLabels { kind: kind.into() };
        families.reconciles.get_or_create(&labels).inc();
        families
            .duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if let Some(error) = error {
            families
                .failures
                .get_or_create(&ErrorLabels {
                    kind: kind.into(),
                    error: error.into(),
                })
                .inc();
        }
    }

    /// A reconcile of `kind` put off: its namespace held its share.
    pub fn deferred(&self, kind: &str) {
        let labels = KindLabels { kind: kind.into() };
        self.reconcile.deferred.get_or_create(&labels).inc();
    }

    pub fn time_to_ready(&self, kind: &str, provider: &str, tier: &str, took: Duration) {
        self.time_to_ready
            .get_or_create(&ReadyLabels {
                kind: kind.into(),
                provider: provider.into(),
                tier: tier.into(),
            })
            .observe(took.as_secs_f64());
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The gauge the leader elector sets while a Go operator keeps it
    /// from leading.
    pub fn go_operator_gauge(&self) -> Gauge {
        self.go_operator.clone()
    }

    /// Sets the gauges of one object: its phase gauge (1 for its phase, 0
    /// for the others) and, for Postgres and Redis, the database gauges;
    /// `None` removes its series (the object is gone). Series whose labels
    /// changed are removed, never left behind with a stale value.
    pub fn object(&self, kind: &str, labels: ObjectLabels, shown: Option<Shown>) {
        let key = (
            kind.to_string(),
            labels.namespace.clone(),
            labels.resourceID.clone(),
        );
        let mut tracked = self.tracked.lock();
        let previous = tracked.remove(&key);
        let Some(mut shown) = shown else {
            if let Some(old) = previous {
                self.remove(kind, &old, None);
                self.forget_cloud(kind, &old.labels);
            }
            return;
        };
        let read_now = shown.health.is_some();
        let before = (previous.as_ref())
            .filter(|old| old.labels == labels)
            .and_then(|old| old.shown.health.clone());
        match &mut shown.health {
            None => shown.health = before,
            // Maintenance and snapshots are read less often than the
            // status: kept too.
            Some(health) => {
                let before = before.unwrap_or_default();
                if health.maintenance.is_none() {
                    health.maintenance = before.maintenance;
                }
                if health.snapshots_not_found.is_none() {
                    health.snapshots_not_found = before.snapshots_not_found;
                }
            }
        }
        let next = Tracked { labels, shown };
        if let Some(old) = &previous {
            self.remove(kind, old, Some(&next));
        }
        self.show(kind, &next, read_now);
        tracked.insert(key, next);
    }

    /// Shows what the providers read from their clouds' monitoring, on
    /// the labels of the object each sample is of (a node's name as
    /// `instanceID`, as the Go operator labels them); series of a
    /// previous reading that this one lacks are removed.
    pub fn cloud(&self, samples: &[CloudSample]) {
        // The tracked Postgres and Redis, by kind and cloud identifier.
        let objects: std::collections::HashMap<(&str, String), ObjectLabels> = {
            let tracked = self.tracked.lock();
            (tracked.iter())
                .filter_map(|((kind, _, _), t)| {
                    let kind =
                        (CLOUD_GAUGES.iter().map(|g| g.kind.cr_kind())).find(|k| k == kind)?;
                    Some(((kind, t.labels.instanceID.clone()), t.labels.clone()))
                })
                .collect()
        };
        let mut shown = Vec::new();
        for s in samples {
            let Some(i) = self.cloud.iter().position(|(g, _)| g.name == s.gauge) else {
                continue;
            };
            let (gauge, family) = &self.cloud[i];
            let Some(object) = objects.get(&(gauge.kind.cr_kind(), s.identifier.clone())) else {
                continue;
            };
            let labels = ObjectLabels {
                instanceID: s.instance.clone(),
                ..object.clone()
            };
            family.get_or_create(&labels).set(s.value);
            shown.push((i, labels));
        }
        let mut previous = self.cloud_shown.lock().unwrap_or_else(|e| e.into_inner());
        for (i, labels) in previous.iter().filter(|p| !shown.contains(p)) {
            self.cloud[*i].1.remove(labels);
        }
        *previous = shown;
    }

    /// Removes the cloud series of an object that is gone.
    fn forget_cloud(&self, kind: &str, object: &ObjectLabels) {
        let mut shown = self.cloud_shown.lock().unwrap_or_else(|e| e.into_inner());
        shown.retain(|(i, labels)| {
            let (gauge, family) = &self.cloud[*i];
            let of_object = gauge.kind.cr_kind() == kind
                && labels.namespace == object.namespace
                && labels.resourceID == object.resourceID;
            if of_object {
                family.remove(labels);
            }
            !of_object
        });
    }

    fn database(&self, kind: &str) -> Option<&DatabaseGauges> {
        self.databases.iter().find(|d| d.kind == kind)
    }

    /// Removes the series of `old` that `next` (if any) does not show.
    fn remove(&self, kind: &str, old: &Tracked, next: Option<&Tracked>) {
        let same_labels = next.is_some_and(|n| n.labels == old.labels);
        let phase_series = |p: Phase| PhaseLabels {
            object: old.labels.clone(),
            statusPhase: p.as_str().into(),
        };
        let Some(db) = self.database(kind) else {
            return;
        };
        let next_shown = next.map(|n| &n.shown).filter(|_| same_labels);
        if let Some(health) = &old.shown.health {
            let status = next_shown.and_then(|n| n.health.as_ref()).map(info_status);
            if status.as_deref() != Some(&info_status(health)) {
                db.info.remove(&info_labels(&old.labels, health));
            }
            if next_shown.and_then(|n| n.health.as_ref()).is_none() {
                db.available.remove(&old.labels);
            }
            let next_health = next_shown.and_then(|n| n.health.as_ref());
            let sizes = [
                (
                    &db.allocated,
                    next_health.and_then(|h| h.allocated_storage_bytes),
                ),
                (&db.max_memory, next_health.and_then(|h| h.max_memory_bytes)),
            ];
            for (family, next) in sizes {
                if let (Some(family), None) = (family, next) {
                    family.remove(&old.labels);
                }
            }
            let next_maintenance: Vec<_> = maintenance_series(&old.labels, next_health)
                .into_iter()
                .map(|(labels, _)| labels)
                .collect();
            for (labels, _) in maintenance_series(&old.labels, Some(health)) {
                if !next_maintenance.contains(&labels) {
                    db.maintenance.remove(&labels);
                }
            }
            let (family, next_snapshots) = snapshot_series(&old.labels, next_health);
            for (labels, _) in snapshot_series(&old.labels, Some(health)).1 {
                if !next_snapshots.iter().any(|(l, _)| *l == labels) {
                    self.named.remove(&family, &labels);
                }
            }
        }
        if let (Some(_), Some(phase)) = (old.shown.deleting_since, old.shown.phase) {
            let kept =
                next_shown.is_some_and(|n| n.deleting_since.is_some() && n.phase == Some(phase));
            if !kept {
                db.deletion.remove(&phase_series(phase));
            }
        }
    }

    /// Sets the series `t` shows; the info gauge's time only when the
    /// cloud was `read_now`.
    fn show(&self, kind: &str, t: &Tracked, read_now: bool) {
        let series = |p: Phase| PhaseLabels {
            object: t.labels.clone(),
            statusPhase: p.as_str().into(),
        };
        let phase = t.shown.phase;
        let Some(db) = self.database(kind) else {
            return;
        };
        if let Some(health) = &t.shown.health {
            let info = db.info.get_or_create(&info_labels(&t.labels, health));
            if read_now {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                info.set(now.as_secs_f64());
            }
            db.available
                .get_or_create(&t.labels)
                .set(i64::from(health.available));
            let sizes = [
                (&db.allocated, health.allocated_storage_bytes),
                (&db.max_memory, health.max_memory_bytes),
            ];
            for (family, bytes) in sizes {
                if let (Some(family), Some(bytes)) = (family, bytes) {
                    family.get_or_create(&t.labels).set(bytes);
                }
            }
            for (labels, value) in maintenance_series(&t.labels, Some(health)) {
                db.maintenance.get_or_create(&labels).set(value);
            }
            let (family, snapshots) = snapshot_series(&t.labels, Some(health));
            for series in snapshots {
                self.named.set(&family, series);
            }
        }
        if let (Some(at), Some(phase)) = (t.shown.deleting_since, phase) {
            db.deletion.get_or_create(&series(phase)).set(at);
        }
    }

    /// The OpenMetrics text of every family.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            return String::new();
        }
        out
    }
}

/// The maintenance series of an object: the Go operator's labels, led by
/// `clusterID`, and the value.
fn maintenance_series(
    object: &ObjectLabels,
    health: Option<&Health>,
) -> Vec<(Vec<(String, String)>, i64)> {
    let pending = health
        .and_then(|h| h.maintenance.as_deref())
        .unwrap_or_default();
    pending
        .iter()
        .map(|m| {
            let mut labels = vec![("clusterID".to_string(), object.clusterID.clone())];
            labels.extend(m.labels.iter().cloned());
            (labels, m.value)
        })
        .collect()
}

/// The snapshot series of an object and the family they go in: the Go
/// operator's `cro_redis_snapshot_not_found_<name>` (`getMetricName`,
/// pkg/providers/aws/provider_redis.go: the CR's name in lower case with
/// `-` as `_`; here `.` too, which no metric name may hold), labels led
/// by `clusterID`.
fn snapshot_series(object: &ObjectLabels, health: Option<&Health>) -> (String, Vec<Labelled>) {
    let name: String = (object.resourceID.to_lowercase().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let series = health
        .and_then(|h| h.snapshots_not_found.as_deref())
        .unwrap_or_default();
    let series = series.iter().map(|s| {
        let mut labels = vec![("clusterID".to_string(), object.clusterID.clone())];
        labels.extend(s.labels.iter().cloned());
        (labels, s.value)
    });
    (
        format!("cro_redis_snapshot_not_found_{name}"),
        series.collect(),
    )
}

/// The status word of an info series, `nil` when none (as the Go operator
/// writes it).
fn info_status(health: &Health) -> String {
    match health.status.as_str() {
        "" => "nil".into(),
        status => status.into(),
    }
}

fn info_labels(object: &ObjectLabels, health: &Health) -> InfoLabels {
    InfoLabels {
        object: object.clone(),
        status: info_status(health),
    }
}

/// `/metrics`, `/healthz`, `/readyz` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    let render = Arc::new(move || metrics.render());
    cro_runtime::serve::metrics_and_probes(listener, render, true).await
}

/// The Go operator's `cro_sts_credentials_secret{namespace, error}`
/// (`SetSTSCredentialsSecretMetric`, pkg/resources/custom_metrics.go): 1
/// while Secret `sts-credentials` cannot be used, with the reason.
pub fn sts_credentials_secret(namespace: &str, error: &str) -> String {
    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Labels {
        namespace: String,
        error: String,
    }
    let mut registry = Registry::default();
    let family = registered(
        &mut registry,
        "cro_sts_credentials_secret",
        "1 while Secret sts-credentials of the operator namespace cannot be used (STS mode), with the reason",
        Family::<Labels, Gauge>::default(),
    );
    family
        .get_or_create(&Labels {
            namespace: namespace.into(),
            error: error.into(),
        })
        .set(1);
    let mut out = String::new();
    if encode(&mut out, &registry).is_err() {
        return String::new();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Metrics {
        Metrics::new(|_| {})
    }

    fn labels() -> ObjectLabels {
        ObjectLabels {
            clusterID: "c".into(),
            resourceID: "db".into(),
            namespace: "ns".into(),
            instanceID: "cdb".into(),
            productName: String::new(),
            strategy: "aws-rds".into(),
        }
    }

    fn health(status: &str, available: bool) -> Option<Health> {
        Some(Health {
            status: status.into(),
            available,
            allocated_storage_bytes: Some(20 << 30),
            max_memory_bytes: Some(1 << 30),
            maintenance: None,
            snapshots_not_found: None,
        })
    }

    /// The lines of `family` in the rendered text.
    fn lines(m: &Metrics, family: &str) -> Vec<String> {
        m.render()
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn cloud_samples_show_on_their_objects_labels_and_leave_with_them() {
        let m = metrics();
        let shown = Shown {
            phase: Some(Phase::Complete),
            ..Default::default()
        };
        m.object("Postgres", labels(), Some(shown.clone()));
        let sample = |gauge: &'static str, id: &str, value: f64| CloudSample {
            gauge,
            identifier: id.into(),
            instance: id.into(),
            value,
        };
        let free = "cro_postgres_free_storage_average";
        m.cloud(&[
            sample(free, "cdb", 1024.0),
            // Of no object this process tracks: not shown.
            sample(free, "someone-elses", 1.0),
            // A Redis gauge for a Postgres identifier: not shown.
            sample("cro_redis_cpu_utilization_average", "cdb", 5.0),
        ]);
        assert_eq!(
            lines(&m, free),
            [format!(
                "{free}{{clusterID=\"c\",resourceID=\"db\",namespace=\"ns\",instanceID=\"cdb\",productName=\"\",strategy=\"aws-rds\"}} 1024.0"
            )]
        );
        assert!(lines(&m, "cro_redis_cpu_utilization_average").is_empty());
        // A reading without it removes the series; so does the object going.
        m.cloud(&[]);
        assert!(lines(&m, free).is_empty());
        m.cloud(&[sample(free, "cdb", 2048.0)]);
        assert_eq!(lines(&m, free).len(), 1);
        m.object("Postgres", labels(), None);
        assert!(lines(&m, free).is_empty());
    }

    #[test]
    fn maintenance_series_follow_what_the_cloud_lists_and_outlive_passes_that_did_not_read_it() {
        let m = metrics();
        let action = |name: &str| cro_provider_api::Maintenance {
            name: name.into(),
            description: "d".into(),
            due: Some(1_800_000_000),
            labels: vec![
                ("ResourceIdentifier".into(), "arn".into()),
                ("Action".into(), name.into()),
            ],
            value: 1_800_000_000,
        };
        let with = |maintenance: Option<Vec<cro_provider_api::Maintenance>>| Shown {
            phase: Some(Phase::Complete),
            health: Some(Health {
                maintenance,
                ..health("available", true).unwrap_or_default()
            }),
            deleting_since: None,
        };
        let family = "cro_postgres_service_maintenance";
        m.object(
            "Postgres",
            labels(),
            Some(with(Some(vec![action("a"), action("b")]))),
        );
        assert_eq!(lines(&m, family).len(), 2);
        let a = format!(
            "{family}{{clusterID=\"c\",ResourceIdentifier=\"arn\",Action=\"a\"}} 1800000000"
        );
        assert!(lines(&m, family).contains(&a), "{:?}", lines(&m, family));
        // Status read, maintenance not: kept.
        m.object("Postgres", labels(), Some(with(None)));
        assert_eq!(lines(&m, family).len(), 2);
        // One applied: its series goes.
        m.object("Postgres", labels(), Some(with(Some(vec![action("b")]))));
        assert_eq!(lines(&m, family).len(), 1);
        assert!(lines(&m, family)[0].contains("Action=\"b\""));
        m.object("Postgres", labels(), None);
        assert!(lines(&m, family).is_empty());
    }

    #[test]
    fn snapshot_series_go_in_a_family_named_after_the_redis_and_leave_with_it() {
        let m = metrics();
        let snapshot = |name: &str, value| cro_provider_api::Series {
            labels: vec![("snapshotName".into(), name.into())],
            value,
        };
        let with = |snapshots: Option<Vec<cro_provider_api::Series>>| Shown {
            phase: Some(Phase::Complete),
            health: Some(Health {
                snapshots_not_found: snapshots,
                ..health("available", true).unwrap_or_default()
            }),
            deleting_since: None,
        };
        let redis = ObjectLabels {
            resourceID: "My-cache.v2".into(),
            strategy: "aws-elasticache".into(),
            ..labels()
        };
        let family = "cro_redis_snapshot_not_found_my_cache_v2";
        let both = vec![snapshot("automatic.a", 0), snapshot("automatic.b", 1)];
        m.object("Redis", redis.clone(), Some(with(Some(both))));
        assert!(m.render().contains(&format!("# TYPE {family} gauge")));
        assert_eq!(
            lines(&m, family),
            [
                format!("{family}{{clusterID=\"c\",snapshotName=\"automatic.a\"}} 0"),
                format!("{family}{{clusterID=\"c\",snapshotName=\"automatic.b\"}} 1"),
            ]
        );
        // Status read, snapshots not: kept.
        m.object("Redis", redis.clone(), Some(with(None)));
        assert_eq!(lines(&m, family).len(), 2);
        // One deleted by its retention: its series goes.
        let b = vec![snapshot("automatic.b", 0)];
        m.object("Redis", redis.clone(), Some(with(Some(b))));
        assert_eq!(lines(&m, family).len(), 1);
        assert!(lines(&m, family)[0].ends_with("\"automatic.b\"} 0"));
        // The Redis gone: the family too.
        m.object("Redis", redis, None);
        assert!(!m.render().contains(family), "{}", m.render());
    }

    #[test]
    fn phase_gauges_show_each_objects_phase_on_its_current_labels() {
        let m = metrics();
        let shown = |phase| {
            Some(Shown {
                phase: Some(phase),
                ..Default::default()
            })
        };
        let unnamed = ObjectLabels {
            instanceID: String::new(),
            ..labels()
        };
        let other = ObjectLabels {
            resourceID: "other".into(),
            ..labels()
        };
        m.object("BlobStorage", unnamed, shown(Phase::InProgress));
        // Its identifier recorded, then complete; another one failed.
        m.object("BlobStorage", labels(), shown(Phase::Complete));
        m.object("BlobStorage", other.clone(), shown(Phase::Failed));
        let series = lines(&m, "cro_blobstorage_status_phase");
        assert_eq!(series.len(), 2 * Phase::ALL.len(), "{series:#?}");
        let set: Vec<_> = series.iter().filter(|l| l.ends_with(" 1")).collect();
        assert_eq!(set.len(), 2, "{set:#?}");
        assert!(
            set.iter().any(|l| l.contains("resourceID=\"db\"")
                && l.contains("instanceID=\"cdb\"")
                && l.contains("statusPhase=\"complete\"")),
            "{set:#?}"
        );
        assert!(
            set.iter().any(|l| l.contains("resourceID=\"other\"")
                && l.contains("statusPhase=\"failed\"")),
            "{set:#?}"
        );
        assert!(
            !series.iter().any(|l| l.contains("instanceID=\"\"")),
            "{series:#?}"
        );
        // Another kind's gauge shows none of them; gone, none is shown.
        assert!(lines(&m, "cro_postgres_status_phase").is_empty());
        m.object("BlobStorage", labels(), None);
        m.object("BlobStorage", other, None);
        assert!(lines(&m, "cro_blobstorage_status_phase").is_empty());
    }

    fn shown(phase: Phase, health: Option<Health>, deleting_since: Option<i64>) -> Shown {
        Shown {
            phase: Some(phase),
            health,
            deleting_since,
        }
    }

    #[test]
    fn database_gauges_follow_the_cloud_status() {
        let m = metrics();
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::InProgress, health("creating", true), None)),
        );
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::Complete, health("available", true), None)),
        );
        let info = lines(&m, "cro_postgres_info");
        assert_eq!(info.len(), 1, "{info:?}");
        assert!(info[0].contains("status=\"available\""), "{info:?}");
        assert!(lines(&m, "cro_postgres_available")[0].ends_with(" 1"));
        assert!(
            lines(&m, "cro_postgres_current_allocated_storage")[0]
                .ends_with(&format!(" {}", 20u64 << 30))
        );
        assert!(lines(&m, "cro_postgres_max_memory")[0].ends_with(&format!(" {}", 1u64 << 30)));

        // A pass that did not read the cloud keeps what the last one read.
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::Complete, None, None)),
        );
        assert_eq!(lines(&m, "cro_postgres_info"), info);
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::Complete, health("storage-full", false), None)),
        );
        let info = lines(&m, "cro_postgres_info");
        assert!(
            info.len() == 1 && info[0].contains("status=\"storage-full\""),
            "{info:?}"
        );
        assert!(lines(&m, "cro_postgres_available")[0].ends_with(" 0"));
    }

    #[test]
    fn database_gauges_show_the_deletion_and_go_with_the_object() {
        let m = metrics();
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::Complete, health("available", true), None)),
        );
        assert_eq!(lines(&m, "cro_postgres_info").len(), 1);
        // Being deleted: the deletion time, labelled with the phase.
        m.object(
            "Postgres",
            labels(),
            Some(shown(Phase::DeleteInProgress, None, Some(1_700_000_000))),
        );
        let deletion = lines(&m, "cro_postgres_deletion_timestamp");
        assert!(
            deletion.len() == 1
                && deletion[0].contains("statusPhase=\"deletion in progress\"")
                && deletion[0].ends_with(" 1700000000"),
            "{deletion:?}"
        );

        // Gone: every series of it goes.
        m.object("Postgres", labels(), None);
        for family in [
            "cro_postgres_info",
            "cro_postgres_available",
            "cro_postgres_deletion_timestamp",
            "cro_postgres_current_allocated_storage",
            "cro_postgres_max_memory",
            "cro_postgres_status_phase",
        ] {
            assert_eq!(lines(&m, family), Vec::<String>::new(), "{family}");
        }
        // Other kinds have no database gauges.
        m.object(
            "BlobStorage",
            labels(),
            Some(shown(Phase::Complete, health("available", true), None)),
        );
        assert!(lines(&m, "cro_postgres_info").is_empty());
    }
}
