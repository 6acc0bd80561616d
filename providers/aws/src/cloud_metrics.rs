//! The Go operator's CloudWatch gauges (controllers/cloudmetrics and
//! `scrapeRDSCloudWatchMetricData` / `scrapeRedisCloudWatchMetricData` in
//! pkg/providers/aws/provider_{postgres,redis}_metrics.go): per RDS
//! instance and per ElastiCache node, the average of a few CloudWatch
//! metrics over the scrape period.
//!
//! The Go operator makes one GetMetricData call per instance and per node
//! each period. Here one call carries as many metrics as AWS allows (500
//! without a Metrics Insights query, per the GetMetricData API reference)
//! for every database of the account and region, so 1,000 Postgres cost 6
//! calls a period, not 1,000.

use std::{collections::BTreeMap, sync::Mutex, time::Duration};

use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricDataResult, MetricStat, ScanBy, StatusCode,
};
use cro_provider_api::{CloudSample, ProviderError};

use crate::errors::Answer;

/// AWS's limit of metrics one GetMetricData call may ask for.
pub const METRICS_PER_CALL: usize = 500;

/// The CloudWatch metric behind each gauge: (gauge, metric).
const RDS: [(&str, &str); 3] = [
    ("cro_postgres_free_storage_average", "FreeStorageSpace"),
    ("cro_postgres_cpu_utilization_average", "CPUUtilization"),
    ("cro_postgres_freeable_memory_average", "FreeableMemory"),
];
const ELASTICACHE: [(&str, &str); 4] = [
    (
        "cro_redis_memory_usage_percentage_average",
        "DatabaseMemoryUsagePercentage",
    ),
    ("cro_redis_freeable_memory_average", "FreeableMemory"),
    ("cro_redis_cpu_utilization_average", "CPUUtilization"),
    (
        "cro_redis_engine_cpu_utilization_average",
        "EngineCPUUtilization",
    ),
];

/// What a database is to CloudWatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An RDS instance: its metrics carry its identifier.
    Instance,
    /// An ElastiCache replication group: metrics are per node.
    Group { nodes: Vec<String> },
}

/// The databases this process saw live, by identifier: what a scrape asks
/// about. Filled as reconciles observe them, emptied as they are deleted.
#[derive(Default)]
pub struct Watched(Mutex<BTreeMap<String, Target>>);

impl Watched {
    pub fn watch(&self, id: &str, target: Target) {
        self.lock().insert(id.to_string(), target);
    }

    pub fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Target>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One metric asked for: of which database and node, for which gauge.
#[derive(Clone, Debug, PartialEq)]
struct Query {
    gauge: &'static str,
    identifier: String,
    instance: String,
    namespace: &'static str,
    dimension: &'static str,
    metric: &'static str,
}

/// Every metric of the watched databases (pure).
fn queries(watched: &BTreeMap<String, Target>) -> Vec<Query> {
    let mut out = Vec::new();
    for (id, target) in watched {
        let (instances, namespace, dimension, metrics): (Vec<&String>, _, _, &[_]) = match target {
            Target::Instance => (vec![id], "AWS/RDS", "DBInstanceIdentifier", &RDS),
            Target::Group { nodes } => (
                nodes.iter().collect(),
                "AWS/ElastiCache",
                "CacheClusterId",
                &ELASTICACHE,
            ),
        };
        for instance in instances {
            for (gauge, metric) in metrics {
                out.push(Query {
                    gauge,
                    identifier: id.clone(),
                    instance: instance.clone(),
                    namespace,
                    dimension,
                    metric,
                });
            }
        }
    }
    out
}

/// The period CloudWatch aggregates over: the scrape interval in whole
/// minutes, at least one (standard-resolution metrics have one datapoint
/// a minute).
fn period_seconds(interval: Duration) -> i32 {
    let minutes = interval.as_secs().div_ceil(60).max(1);
    i32::try_from(minutes * 60).unwrap_or(i32::MAX)
}

/// Reads every watched database's metrics, averaged over `interval`, in
/// calls of at most [`METRICS_PER_CALL`] metrics each.
pub async fn scrape(
    cw: &aws_sdk_cloudwatch::Client,
    watched: &Watched,
    interval: Duration,
) -> Result<Vec<CloudSample>, ProviderError> {
    let queries = queries(&watched.lock());
    let period = period_seconds(interval);
    let now = std::time::SystemTime::now();
    let start = now - Duration::from_secs(period.unsigned_abs().into());
    let mut samples = Vec::new();
    for chunk in queries.chunks(METRICS_PER_CALL) {
        let asked = metric_queries(chunk, period);
        let mut token = None;
        loop {
            let out = cw
                .get_metric_data()
                .set_metric_data_queries(Some(asked.clone()))
                .start_time(DateTime::from(start))
                .end_time(DateTime::from(now))
                .scan_by(ScanBy::TimestampDescending)
                .set_next_token(token)
                .send()
                .await
                .named(
                    "cloudwatch:GetMetricData",
                    &format!("{} metrics", chunk.len()),
                )?;
            samples.extend(
                out.metric_data_results()
                    .iter()
                    .filter_map(|r| sample(chunk, r)),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    // A paginated answer may repeat a metric: keep its first (newest).
    let mut seen = std::collections::HashSet::new();
    samples.retain(|s| seen.insert((s.gauge, s.instance.clone())));
    Ok(samples)
}

/// One GetMetricData query per metric of `chunk`: its average over
/// `period`. Query ids are the chunk index: CloudWatch wants them unique,
/// starting with a lowercase letter.
fn metric_queries(chunk: &[Query], period: i32) -> Vec<MetricDataQuery> {
    (chunk.iter().enumerate())
        .map(|(i, q)| {
            let dimension = Dimension::builder()
                .name(q.dimension)
                .value(&q.instance)
                .build();
            let metric = Metric::builder()
                .namespace(q.namespace)
                .metric_name(q.metric)
                .dimensions(dimension)
                .build();
            let stat = MetricStat::builder()
                .metric(metric)
                .period(period)
                .stat("Average")
                .build();
            MetricDataQuery::builder()
                .id(format!("q{i}"))
                .metric_stat(stat)
                .build()
        })
        .collect()
}

/// The sample a result of `chunk`'s queries holds, if any: newest first,
/// so the latest average, where the Go operator set each datapoint in turn.
fn sample(chunk: &[Query], result: &MetricDataResult) -> Option<CloudSample> {
    let query = (result.id())
        .and_then(|id| id.strip_prefix('q'))
        .and_then(|i| i.parse::<usize>().ok())
        .and_then(|i| chunk.get(i))?;
    let value = result.values().first()?;
    if result.status_code() == Some(&StatusCode::InternalError) {
        return None;
    }
    Some(CloudSample {
        gauge: query.gauge,
        identifier: query.identifier.clone(),
        instance: query.instance.clone(),
        value: *value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instance_and_node_gets_each_of_its_metrics() {
        let watched = BTreeMap::from([
            ("pg".to_string(), Target::Instance),
            (
                "redis".to_string(),
                Target::Group {
                    nodes: vec!["redis-001".into(), "redis-002".into()],
                },
            ),
        ]);
        let q = queries(&watched);
        assert_eq!(q.len(), 3 + 2 * 4);
        let rds: Vec<_> = q.iter().filter(|q| q.identifier == "pg").collect();
        assert!(rds.iter().all(|q| q.instance == "pg"
            && q.namespace == "AWS/RDS"
            && q.dimension == "DBInstanceIdentifier"));
        let node2: Vec<_> = q.iter().filter(|q| q.instance == "redis-002").collect();
        assert_eq!(node2.len(), 4);
        assert!(node2.iter().all(|q| q.identifier == "redis"
            && q.namespace == "AWS/ElastiCache"
            && q.dimension == "CacheClusterId"));
        // Every gauge set here is one the operator registers.
        for query in &q {
            assert!(
                cro_provider_api::CLOUD_GAUGES
                    .iter()
                    .any(|g| g.name == query.gauge),
                "{}",
                query.gauge
            );
        }
    }

    #[test]
    fn the_period_is_the_interval_in_whole_minutes() {
        // Row: (interval seconds, period seconds)
        for (interval, period) in [(1, 60), (60, 60), (61, 120), (300, 300)] {
            assert_eq!(period_seconds(Duration::from_secs(interval)), period);
        }
    }
}
