//! Prometheus metrics: reconciles, their errors (by the error's stable
//! label) and durations per kind; the Go operator's per-kind phase gauges
//! (`cro_postgres_status_phase`, ...); and whatever each provider
//! registers (the aws provider's API calls by service, operation and
//! outcome). Served on `/metrics` with `/healthz` and `/readyz`.

use std::{sync::Arc, time::Duration};

use axum::{Router, http::header, response::IntoResponse, routing::get};
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Metric, Registry},
};

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

pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabels, Counter>,
    failures: Family<ErrorLabels, Counter>,
    duration: Family<KindLabels, Histogram, fn() -> Histogram>,
    phases: Vec<(&'static str, Family<PhaseLabels, Gauge>)>,
    /// The labels each object's series carry now, to remove them when the
    /// labels change (an identifier recorded) or the object goes.
    phase_labels:
        std::sync::Mutex<std::collections::HashMap<(String, String, String), ObjectLabels>>,
    time_to_ready: Family<ReadyLabels, Histogram, fn() -> Histogram>,
    leader: Gauge,
}

/// `metric`, registered under `name`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// The operator's families, plus those `providers` register.
    pub fn new(
        providers: &[Arc<dyn cro_provider_api::Provider>],
        connectivity: &crate::connectivity::Checker,
    ) -> Self {
        let mut registry = Registry::default();
        let r = &mut registry;
        let reconciles = registered(
            r,
            "cro_reconciles",
            "Reconciles run, by kind",
            Family::default(),
        );
        let failures = registered(
            r,
            "cro_reconcile_errors",
            "Reconciles that failed, by kind and error label",
            Family::default(),
        );
        let duration = registered(
            r,
            "cro_reconcile_duration_seconds",
            "Reconcile duration, by kind",
            Family::new_with_constructor(duration_histogram as fn() -> Histogram),
        );
        let phases = PHASE_GAUGES
            .iter()
            .map(|(kind, name)| {
                let help = format!("1 for the current status phase of each {kind}");
                (*kind, registered(r, name, &help, Family::default()))
            })
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
        for provider in providers {
            provider.register_metrics(r);
        }
        connectivity.register_metrics(r);
        Metrics {
            registry,
            reconciles,
            failures,
            duration,
            phases,
            time_to_ready,
            leader,
            phase_labels: Default::default(),
        }
    }

    pub fn reconciled(&self, kind: &str, took: Duration, error: Option<&str>) {
        let labels = KindLabels { kind: kind.into() };
        self.reconciles.get_or_create(&labels).inc();
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if let Some(error) = error {
            self.failures
                .get_or_create(&ErrorLabels {
                    kind: kind.into(),
                    error: error.into(),
                })
                .inc();
        }
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

    /// Sets the phase gauge of one object: 1 for its phase, 0 for the others;
    /// `None` removes its series (the object is gone).
    pub fn phase(&self, kind: &str, labels: ObjectLabels, phase: Option<Phase>) {
        let Some((_, family)) = self.phases.iter().find(|(k, _)| *k == kind) else {
            return;
        };
        let key = (
            kind.to_string(),
            labels.namespace.clone(),
            labels.resourceID.clone(),
        );
        let mut current = self.phase_labels.lock().unwrap_or_else(|e| e.into_inner());
        let previous = match phase {
            Some(_) => current.insert(key, labels.clone()),
            None => current.remove(&key),
        };
        let series = |object: &ObjectLabels, p: Phase| PhaseLabels {
            object: object.clone(),
            statusPhase: p.as_str().into(),
        };
        if let Some(old) = previous.filter(|old| phase.is_none() || *old != labels) {
            for p in Phase::ALL {
                family.remove(&series(&old, p));
            }
        }
        if let Some(current) = phase {
            for p in Phase::ALL {
                family
                    .get_or_create(&series(&labels, p))
                    .set(i64::from(p == current));
            }
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

/// `/metrics`, `/healthz`, `/readyz` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.render(),
                    )
                        .into_response()
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }));
    axum::serve(listener, app).await
}
