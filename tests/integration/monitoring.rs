//! deploy/monitoring/ against what the operator really exports: promtool
//! checks the alert rules and unit-tests every alert on the series scraped
//! from a running operator, and every metric the alerts and the Grafana
//! dashboard query is one the operator exports.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, ResourceTypeStatus,
    SMTPCredentialSet,
};
use kube::Api;
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, TestEnv, add_aws_maintenance, aws_requests_after, create_json,
    inject_aws_fault, wait_for, wait_phase, with_operator_launched,
};

const RULES: &str = "deploy/monitoring/prometheus-rule.yaml";
const DASHBOARD: &str = "deploy/monitoring/dashboard.json";

/// The rule groups of the shipped PrometheusRule, as a rule file.
fn rule_groups() -> Value {
    let text = std::fs::read_to_string(RULES).unwrap_or_else(|e| panic!("{RULES}: {e}"));
    let rule: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{RULES}: {e}"));
    json!({"groups": rule["spec"]["groups"]})
}

fn alerts() -> Vec<Value> {
    let groups = rule_groups();
    let rules = groups["groups"].as_array().into_iter().flatten();
    rules
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

/// A fresh directory of this test run for promtool's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cro-monitoring-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

fn promtool(args: &[&str], dir: &Path) -> String {
    let out = Command::new(TestEnv::load().promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running promtool: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// `metric{labels}` and value of each sample line of an exposition.
fn samples(exposition: &str) -> Vec<(String, String)> {
    exposition
        .lines()
        .filter(|l| l.starts_with("cro_"))
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(series, value)| (series.to_string(), value.to_string()))
        .collect()
}

/// The metric names `expr` reads (every `cro_…` word, and the kinds a
/// `{__name__=~"cro_(a|b)_suffix"}` selector spells out).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for (i, _) in expr.match_indices("cro_") {
        if i > 0 && expr[..i].ends_with(|c: char| word(c)) {
            continue;
        }
        let rest = &expr[i..];
        if let Some(alternatives) = rest.strip_prefix("cro_(") {
            let (inner, after) = alternatives.split_once(')').unwrap_or_default();
            let suffix: String = after.chars().take_while(|c| word(*c)).collect();
            if inner.starts_with('.') {
                continue; // a regex capture (`cro_(.+)_status_phase`)
            }
            names.extend(inner.split('|').map(|k| format!("cro_{k}{suffix}")));
        } else {
            names.push(rest.chars().take_while(|c| word(*c)).collect());
        }
    }
    names
}

/// `template` with `{{ $labels.x }}` replaced from `labels`, as
/// Prometheus expands an annotation.
fn expanded(template: &str, labels: &BTreeMap<&str, &str>) -> String {
    let mut out = template.to_string();
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    // A label the alert does not carry expands to nothing.
    while let Some(start) = out.find("{{ $labels.") {
        let end = out[start..].find("}}").map_or(out.len(), |e| start + e + 2);
        out.replace_range(start..end, "");
    }
    out
}

/// What `alertname` fires with for `labels`: its labels and annotations.
fn expected(alertname: &str, labels: &[(&str, &str)]) -> Value {
    let rule = alerts()
        .into_iter()
        .find(|a| a["alert"] == alertname)
        .unwrap_or_else(|| panic!("no alert {alertname} in {RULES}"));
    let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let severity = rule["labels"]["severity"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let annotations: BTreeMap<String, String> = rule["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), expanded(v.as_str().unwrap_or_default(), &all)))
        .collect();
    all.insert("severity", &severity);
    json!({"exp_labels": all, "exp_annotations": annotations})
}

#[test]
fn the_rules_pass_promtool_check() {
    let dir = scratch("check");
    let file = dir.join("rules.yaml");
    std::fs::write(
        &file,
        serde_saphyr::to_string(&rule_groups()).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = promtool(&["check", "rules", "rules.yaml"], &dir);
    assert!(
        out.contains(&format!("SUCCESS: {} rules found", alerts().len())),
        "{out}"
    );
    // Every alert has a runbook section in docs/operations.md.
    let runbooks = std::fs::read_to_string("docs/operations.md").unwrap_or_default();
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap_or_default();
        let anchor = alert["annotations"]["runbook"].as_str().unwrap_or_default();
        assert_eq!(
            anchor,
            format!("docs/operations.md#{}", name.to_lowercase()),
            "{name}"
        );
        assert!(
            runbooks.contains(&format!("#### {name}\n")),
            "no runbook section #### {name} in docs/operations.md"
        );
    }
}

/// The value of label `name` in `series` (`family{a="x",...}`).
fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let start = series.find(&format!("{name}=\""))? + name.len() + 2;
    series[start..].split('"').next()
}

/// The cloud identifier of `resource`'s database, from its info series.
fn instance_id(scraped: &[(String, String)], family: &str, resource: &str) -> String {
    let of = format!("resourceID=\"{resource}\"");
    scraped
        .iter()
        .find(|(s, _)| s.starts_with(&format!("{family}{{")) && s.contains(&of))
        .and_then(|(s, _)| label(s, "instanceID"))
        .unwrap_or_else(|| panic!("no {family} series of {resource}: {scraped:?}"))
        .to_string()
}

/// Puts one datapoint of each `(metric, value)` in CloudWatch, as RDS and
/// ElastiCache publish them: namespace and the one dimension naming the
/// instance or node.
async fn put_metrics(namespace: &str, dimension: &str, instance: &str, values: &[(&str, f64)]) {
    use aws_sdk_cloudwatch::types::{Dimension, MetricDatum};
    let cw = aws_sdk_cloudwatch::Client::new(&TestEnv::load().aws_config().await);
    let data = values.iter().map(|(metric, value)| {
        MetricDatum::builder()
            .metric_name(*metric)
            .dimensions(Dimension::builder().name(dimension).value(instance).build())
            .value(*value)
            .timestamp(std::time::SystemTime::now().into())
            .build()
    });
    cw.put_metric_data()
        .namespace(namespace)
        .set_metric_data(Some(data.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("PutMetricData {namespace} {instance}: {e:?}"));
}

/// The GetMetricData calls the operator has made, by its own count.
fn get_metric_data_calls(scraped: &[(String, String)]) -> f64 {
    (scraped.iter())
        .filter(|(s, _)| {
            s.starts_with("cro_aws_api_calls_total{") && s.contains("operation=\"GetMetricData\"")
        })
        .map(|(_, v)| v.parse::<f64>().unwrap_or(0.0))
        .sum()
}

/// Seconds between the operator's CloudWatch readings in this test.
const CLOUD_METRICS_INTERVAL: u64 = 3;

/// A failed BlobStorage and a complete AWS Postgres that the operator's
/// pod cannot reach, whose CloudWatch metrics say its storage and memory
/// run out: the series the operator exports for them, fed to promtool,
/// fire exactly the alerts they should. Where a scenario cannot be reached
/// here in reasonable time (an hour-long deletion, throttling), the series
/// are the operator's own with the values moved.
#[tokio::test]
async fn every_alert_fires_on_the_series_the_operator_exports() {
    let interval = CLOUD_METRICS_INTERVAL.to_string();
    // Rechecks every few seconds: maintenance AWS lists later is read
    // within seconds, not the hour of the default.
    let launch = |l: &mut crate::support::Launch| {
        l.extra_args.extend([
            "--cloud-metrics-interval".to_string(),
            interval,
            "--recheck-interval=3".into(),
        ])
    };
    with_operator_launched("alerts", launch, |client, ns, op| async move {
        let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
        let managed = |secret: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": secret}});
        let _: BlobStorage = create_json(&client, &ns, cr("BlobStorage", "broken", json!({"type": "workshop", "tier": "no-such-tier", "secretRef": {"name": "broken-sec"}}))).await;
        let _: SMTPCredentialSet = create_json(&client, &ns, cr("SMTPCredentialSet", "mail", json!({"type": "workshop", "tier": "development", "secretRef": {"name": "mail-sec"}}))).await;
        for name in ["db"] {
            let _: Postgres = create_json(&client, &ns, cr("Postgres", name, managed(&format!("{name}-sec")))).await;
        }
        for name in ["cache"] {
            let _: Redis = create_json(&client, &ns, cr("Redis", name, managed(&format!("{name}-sec")))).await;
        }
        let _: PostgresSnapshot = create_json(&client, &ns, cr("PostgresSnapshot", "snap", json!({"resourceName": "db"}))).await;
        let _: RedisSnapshot = create_json(&client, &ns, cr("RedisSnapshot", "rsnap", json!({"resourceName": "cache"}))).await;
        let (pgs, caches) = (Api::<Postgres>::namespaced(client.clone(), &ns), Api::<Redis>::namespaced(client.clone(), &ns));
        wait_phase(&Api::<BlobStorage>::namespaced(client.clone(), &ns), "broken", Phase::Failed).await;
        wait_phase(&Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns), "mail", Phase::Complete).await;
        wait_phase(&pgs, "db", Phase::Complete).await;
        wait_phase(&caches, "cache", Phase::Complete).await;
        wait_phase(&Api::<PostgresSnapshot>::namespaced(client.clone(), &ns), "snap", Phase::Complete).await;
        wait_phase(&Api::<RedisSnapshot>::namespaced(client.clone(), &ns), "rsnap", Phase::Complete).await;

        // The endpoints moto hands out resolve nowhere: Connectable False.
        let of = |name: &str| format!("resourceID=\"{name}\",namespace=\"{ns}\"");
        let exposition = scrape_until(&op, "cro_*_connection 0 for db and cache", |s| {
            let zero = |family: &str, name: &str| s.iter().any(|(series, v)| series.starts_with(&format!("{family}{{")) && series.contains(&of(name)) && v == "0");
            zero("cro_postgres_connection", "db") && zero("cro_redis_connection", "cache")
        })
        .await;
        let scraped = samples(&exposition);

        // CloudWatch's averages of both databases, on the Go operator's
        // gauges: 5% of the Postgres's storage and memory free, the Redis
        // 95% full.
        let (pg_id, redis_id) = (instance_id(&scraped, "cro_postgres_info", "db"), instance_id(&scraped, "cro_redis_info", "cache"));
        let value_of = |family: &str| scraped.iter().find(|(s, _)| s.starts_with(&format!("{family}{{")) && s.contains(&of("db"))).map(|(_, v)| v.parse::<f64>().unwrap_or(0.0))
            .unwrap_or_else(|| panic!("no {family} of db:\n{exposition}"));
        let (allocated, max_memory) = (value_of("cro_postgres_current_allocated_storage"), value_of("cro_postgres_max_memory"));
        assert!(max_memory >= (512 << 20) as f64, "the dev tier's db.t3.micro has 1 GiB: {max_memory}");
        let rds = [("FreeStorageSpace", allocated * 0.05), ("CPUUtilization", 42.5), ("FreeableMemory", max_memory * 0.05)];
        put_metrics("AWS/RDS", "DBInstanceIdentifier", &pg_id, &rds).await;
        let ec = aws_sdk_elasticache::Client::new(&TestEnv::load().aws_config().await);
        let groups = ec.describe_replication_groups().replication_group_id(&redis_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let nodes: Vec<String> = groups.replication_groups().iter().flat_map(|g| g.member_clusters().to_vec()).collect();
        assert!(!nodes.is_empty(), "{redis_id} has no nodes");
        let redis = [("DatabaseMemoryUsagePercentage", 95.0), ("FreeableMemory", 1_048_576.0), ("CPUUtilization", 12.5), ("EngineCPUUtilization", 7.5)];
        for node in &nodes {
            put_metrics("AWS/ElastiCache", "CacheClusterId", node, &redis).await;
        }
        let expected_samples: Vec<(String, String, f64)> = rds.iter().map(|(m, v)| (m.to_string(), pg_id.clone(), *v))
            .chain(nodes.iter().flat_map(|n| redis.iter().map(|(m, v)| (m.to_string(), n.clone(), *v))))
            .collect();
        let gauge_of = |metric: &str, postgres: bool| match (metric, postgres) {
            ("FreeStorageSpace", _) => "cro_postgres_free_storage_average",
            ("CPUUtilization", true) => "cro_postgres_cpu_utilization_average",
            ("FreeableMemory", true) => "cro_postgres_freeable_memory_average",
            ("DatabaseMemoryUsagePercentage", _) => "cro_redis_memory_usage_percentage_average",
            ("FreeableMemory", false) => "cro_redis_freeable_memory_average",
            ("CPUUtilization", false) => "cro_redis_cpu_utilization_average",
            _ => "cro_redis_engine_cpu_utilization_average",
        };
        let calls_before = get_metric_data_calls(&scraped);
        let started = std::time::Instant::now();
        let exposition = scrape_until(&op, "every CloudWatch gauge of db and cache", |s| {
            expected_samples.iter().all(|(metric, instance, value)| {
                let (postgres, resource) = if *instance == pg_id { (true, "db") } else { (false, "cache") };
                let family = gauge_of(metric, postgres);
                s.iter().any(|(series, v)| series.starts_with(&format!("{family}{{")) && series.contains(&of(resource))
                    && label(series, "instanceID") == Some(instance.as_str())
                    && label(series, "strategy") == Some(if postgres { "aws-rds" } else { "aws-elasticache" })
                    && v.parse::<f64>().is_ok_and(|got| (got - value).abs() < 1e-6))
            })
        })
        .await;
        // One GetMetricData call per reading carries every metric of both
        // databases: at most one call per interval started, and since the
        // Go operator's interval is 5 minutes, the count the documentation
        // gives (one per 500 metrics) is what each reading costs.
        let scraped = samples(&exposition);
        let readings = started.elapsed().as_secs() / CLOUD_METRICS_INTERVAL + 2;
        let calls = get_metric_data_calls(&scraped) - calls_before;
        assert!(calls >= 1.0 && calls <= readings as f64, "{calls} GetMetricData calls in {readings} readings at most");

        // Maintenance AWS has pending for both, due in three days: listed
        // in status.pendingChanges with its date, never part of the plan
        // or of UpToDate, and on the Go operator's gauges.
        let rds_client = aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await);
        let instances = rds_client.describe_db_instances().db_instance_identifier(&pg_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let pg_arn = instances.db_instances().first().and_then(|i| i.db_instance_arn()).unwrap_or_default().to_string();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let due = now - now % 3600 + 3 * 86400;
        let update = format!("elasticache-{ns}-001");
        add_aws_maintenance("rds", json!({"ResourceIdentifier": pg_arn, "Action": "system-update", "Description": "New Operating System update is available", "AutoAppliedAfterDate": due}));
        add_aws_maintenance("elasticache", json!({"ReplicationGroupId": redis_id, "ServiceUpdateName": update, "ServiceUpdateStatus": "available",
            "UpdateActionStatus": "not-applied", "ServiceUpdateSeverity": "important", "ServiceUpdateType": "security-update",
            "ServiceUpdateRecommendedApplyByDate": due, "Engine": "redis"}));
        let due_text = k8s_openapi::jiff::Timestamp::from_second(due as i64).map(|t| t.to_string()).unwrap_or_default();
        let listed = |field: String| {
            let due_text = due_text.clone();
            move |status: Option<&ResourceTypeStatus>| {
                let Some(status) = status else { return false };
                let up_to_date = status.conditions.iter().any(|c| c.type_ == "UpToDate" && c.status == "True");
                status.pending_changes.iter().any(|c| c.field == field && c.when == format!("by the cloud provider, due {due_text}"))
                    && up_to_date && status.plan_hash.is_none()
            }
        };
        let pg_listed = listed("maintenance system-update".into());
        wait_for(&pgs, "db", "its pending maintenance in status", DEFAULT_TIMEOUT, move |p: Option<&Postgres>| pg_listed(p.and_then(|p| p.status.as_ref()))).await;
        let redis_listed = listed(format!("maintenance {update}"));
        wait_for(&caches, "cache", "its pending maintenance in status", DEFAULT_TIMEOUT, move |r: Option<&Redis>| redis_listed(r.and_then(|r| r.status.as_ref()))).await;
        let exposition = scrape_until(&op, "both maintenance gauges", |s| {
            let due = due.to_string();
            s.iter().any(|(series, v)| series.starts_with("cro_postgres_service_maintenance{") && label(series, "ResourceIdentifier") == Some(pg_arn.as_str())
                && label(series, "AutoAppliedAfterDate") == Some(due.as_str()) && label(series, "CurrentApplyDate") == Some("") && *v == due)
                && s.iter().any(|(series, v)| series.starts_with("cro_redis_service_maintenance{") && label(series, "ReplicationGroupId") == Some(redis_id.as_str())
                    && label(series, "ServiceUpdateName") == Some(update.as_str()) && label(series, "ServiceUpdateRecommendedApplyByDate") == Some(due.as_str()) && *v == due)
        })
        .await;
        drop(exposition);

        // Snapshots of the group nobody tagged (as AWS takes its automated
        // ones) get the group's tags, once; one AWS cannot find to tag
        // (SnapshotNotFoundFault: not available yet) shows 1 on the Go
        // operator's per-Redis family, the others 0.
        let (tagged, missing) = (format!("{ns}-manual-a"), format!("{ns}-manual-b"));
        inject_aws_fault(&format!("{ns}-snapshot"), "elasticache", "AddTagsToResource", &missing, ("SnapshotNotFoundFault", 404, "snapshot not found"), None);
        let mut log_offset = std::fs::metadata(TestEnv::load().moto_request_log).map(|m| m.len()).unwrap_or_default();
        for name in [&tagged, &missing] {
            ec.create_snapshot().replication_group_id(&redis_id).snapshot_name(name).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        }
        let family = "cro_redis_snapshot_not_found_cache";
        let exposition = scrape_until(&op, "a snapshot series of each manual snapshot", |s| {
            let value = |name: &str| s.iter().find(|(series, _)| series.starts_with(&format!("{family}{{")) && label(series, "snapshotName") == Some(name)).map(|(series, v)| (series.clone(), v.clone()));
            matches!((value(&tagged), value(&missing)), (Some((series, a)), Some((_, b))) if a == "0" && b == "1"
                && label(&series, "cacheClusterId") == nodes.first().map(String::as_str) && label(&series, "arn").is_some_and(|arn| arn.ends_with(&format!(":snapshot:{tagged}"))))
        })
        .await;
        let tags_of = |name: String| {
            let ec = ec.clone();
            async move {
                let arn = ec.describe_snapshots().snapshot_name(&name).send().await.ok().and_then(|o| o.snapshots().first().and_then(|s| s.arn().map(str::to_string))).unwrap_or_default();
                let tags = ec.list_tags_for_resource().resource_name(&arn).send().await.unwrap_or_else(|e| panic!("{arn}: {e:?}"));
                tags.tag_list().iter().map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect::<BTreeMap<_, _>>()
            }
        };
        let group_arn = groups.replication_groups().first().and_then(|g| g.arn()).unwrap_or_default();
        let group_tags = ec.list_tags_for_resource().resource_name(group_arn).send().await.unwrap_or_else(|e| panic!("{group_arn}: {e:?}"));
        let tags = tags_of(tagged.clone()).await;
        assert!(group_tags.tag_list().len() >= 3, "{group_tags:?}");
        for t in group_tags.tag_list() {
            assert_eq!(tags.get(t.key().unwrap_or_default()).map(String::as_str), t.value(), "{tags:?}");
        }
        assert!(tags_of(missing.clone()).await.is_empty());
        // The failing one is tried again at each listing; the tagged one
        // never again.
        let tagging = |requests: &[Value], name: &str| requests.iter().filter(|r| r["action"] == "AddTagsToResource" && r["params"].to_string().contains(&format!(":snapshot:{name}\""))).count();
        let mut requests = Vec::new();
        let deadline = std::time::Instant::now() + DEFAULT_TIMEOUT;
        while tagging(&requests, &missing) < 3 {
            assert!(std::time::Instant::now() < deadline, "{missing} not tried three times: {requests:?}");
            requests.extend(aws_requests_after(&mut log_offset));
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert_eq!(tagging(&requests, &tagged), 1, "{requests:?}");
        let scraped = samples(&exposition);

        // Every metric the alerts and the dashboard read is a family the
        // operator exports. The deletion gauges have series only while a
        // CR is being deleted: the_deletion_gauges_stand_while_a_deletion_is_held_and_go_with_it
        // scrapes them.
        let exported = exposition.clone();
        let deletion_only = ["cro_postgres_deletion_timestamp", "cro_redis_deletion_timestamp"];
        let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(DASHBOARD).unwrap_or_default()).unwrap_or_else(|e| panic!("{DASHBOARD}: {e}"));
        let dashboard_exprs: Vec<String> = dashboard["panels"].as_array().into_iter().flatten()
            .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
            .filter_map(|t| t["expr"].as_str().map(str::to_string))
            .collect();
        assert!(dashboard_exprs.len() >= 10, "{dashboard_exprs:?}");
        let alert_exprs: Vec<String> = alerts().iter().filter_map(|a| a["expr"].as_str().map(str::to_string)).collect();
        for expr in dashboard_exprs.iter().chain(&alert_exprs) {
            let names = metric_names(expr);
            assert!(!names.is_empty(), "no metric in {expr}");
            for name in names {
                assert!(exported_family(&exported, &name) || deletion_only.contains(&name.as_str()), "{name} (in {expr}) is not a family the operator exports:\n{exported}");
            }
        }

        // The scrape as promtool input, constant over three hours, plus
        // the operator's own series with moved values: a deletion stuck
        // since time 0 and an AWS operation throttled ten times a minute.
        // Maintenance due three days after time 0, as it was after now.
        // The disk full (tests/integration/real_node.rs fills a real one).
        let moved = |s: &str, v: &str| if s.contains("_service_maintenance{") { (3 * 86400).to_string() } else if s.starts_with("cro_postgres_storage_full{") || s.starts_with("cro_redis_storage_full{") { "1".into() } else { v.to_string() };
        let mut series: Vec<Value> = scraped.iter().map(|(s, v)| json!({"series": s, "values": format!("{}x180", moved(s, v))})).collect();
        let (phase, _) = scraped.iter().find(|(s, _)| s.starts_with("cro_postgres_status_phase{") && s.contains(&of("db")) && s.contains("statusPhase=\"deletion in progress\""))
            .unwrap_or_else(|| panic!("no deletion phase series of db:\n{exposition}"));
        series.push(json!({"series": phase.replacen("cro_postgres_status_phase", "cro_postgres_deletion_timestamp", 1), "values": "0x180"}));
        let (calls, _) = scraped.iter().find(|(s, _)| s.starts_with("cro_aws_api_calls_total{") && s.contains("outcome=\"success\""))
            .unwrap_or_else(|| panic!("no AWS call series:\n{exposition}"));
        let throttled = calls.replace("outcome=\"success\"", "outcome=\"throttled\"");
        assert!(scraped.iter().all(|(s, _)| *s != throttled), "the emulator throttled: {throttled}");
        series.push(json!({"series": throttled, "values": "0+10x180"}));
        let service = throttled.split("service=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or_default().to_string();

        let object = |kind: &'static str, name: &'static str| vec![("kind", kind), ("namespace", ns.as_str()), ("resourceID", name)];
        let cases = json!([
            {"eval_time": "3h", "alertname": "CloudResourceFailed", "exp_alerts": [expected("CloudResourceFailed", &object("blobstorage", "broken"))]},
            {"eval_time": "3h", "alertname": "CloudResourceStuckInProgress", "exp_alerts": []},
            {"eval_time": "3h", "alertname": "CloudResourceDeletionStuck", "exp_alerts": [expected("CloudResourceDeletionStuck", &object("postgres", "db"))]},
            {"eval_time": "3h", "alertname": "DatabaseNotConnectable", "exp_alerts": [expected("DatabaseNotConnectable", &object("postgres", "db")), expected("DatabaseNotConnectable", &object("redis", "cache"))]},
            {"eval_time": "3h", "alertname": "DatabaseUnavailable", "exp_alerts": []},
            {"eval_time": "3h", "alertname": "DatabaseStorageFull", "exp_alerts": [expected("DatabaseStorageFull", &object("postgres", "db")), expected("DatabaseStorageFull", &object("redis", "cache"))]},
            {"eval_time": "3h", "alertname": "PostgresStorageLow", "exp_alerts": [expected("PostgresStorageLow", &[("namespace", ns.as_str()), ("resourceID", "db")])]},
            {"eval_time": "3h", "alertname": "PostgresMemoryLow", "exp_alerts": [expected("PostgresMemoryLow", &[("namespace", ns.as_str()), ("resourceID", "db")])]},
            {"eval_time": "3h", "alertname": "RedisMemoryHigh", "exp_alerts": [expected("RedisMemoryHigh", &[("namespace", ns.as_str()), ("resourceID", "cache")])]},
            {"eval_time": "3h", "alertname": "DatabaseMaintenanceDue", "exp_alerts": [
                expected("DatabaseMaintenanceDue", &[("ResourceIdentifier", pg_arn.as_str()), ("Description", "New Operating System update is available")]),
                expected("DatabaseMaintenanceDue", &[("ReplicationGroupId", redis_id.as_str()), ("ServiceUpdateName", update.as_str())]),
            ]},
            {"eval_time": "3h", "alertname": "AwsCallsThrottled", "exp_alerts": [expected("AwsCallsThrottled", &[("service", service.as_str())])]},
            {"eval_time": "3h", "alertname": "CloudResourceOperatorNoLeader", "exp_alerts": []},
        ]);
        let tested: Vec<&str> = cases.as_array().into_iter().flatten().filter_map(|c| c["alertname"].as_str()).collect();
        let shipped: Vec<String> = alerts().iter().filter_map(|a| a["alert"].as_str().map(str::to_string)).collect();
        assert_eq!(tested, shipped, "every shipped alert is tested");

        let dir = scratch("alerts");
        let write = |name: &str, value: &Value| std::fs::write(dir.join(name), serde_saphyr::to_string(value).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        write("rules.yaml", &rule_groups());
        write("test.yaml", &json!({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": cases}]}));
        promtool(&["test", "rules", "test.yaml"], &dir);

        // With the leader gone, the leader alert fires.
        let no_leader = json!([{"series": "cro_leader", "values": "0x30"}]);
        write("leader.yaml", &json!({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": no_leader,
                "alert_rule_test": [{"eval_time": "10m", "alertname": "CloudResourceOperatorNoLeader", "exp_alerts": [expected("CloudResourceOperatorNoLeader", &[])]}]}]}));
        promtool(&["test", "rules", "leader.yaml"], &dir);
    })
    .await;
}

/// Scrapes the operator's `/metrics` until `done` holds for its samples;
/// the exposition then.
async fn scrape_until(
    op: &crate::support::Operator,
    what: &str,
    done: impl Fn(&[(String, String)]) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        let text = op.http_get("/metrics").await;
        if done(&samples(&text)) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Whether the exposition describes the family `name` reads (a counter's
/// `_total`, a histogram's `_bucket`, `_count`, `_sum` belong to it).
fn exported_family(exposition: &str, name: &str) -> bool {
    let family = ["_total", "_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    exposition
        .lines()
        .any(|l| l.starts_with(&format!("# TYPE {family} ")))
}

/// The deletion gauges (`cro_postgres_deletion_timestamp`,
/// `cro_redis_deletion_timestamp`, read by the deletion alerts) stand while
/// a database's deletion is in progress and go with the CR. The emulator's
/// delete call answers 503 until the test lets it through, so the deletion
/// is held as long as the scrape needs, not for a race of seconds.
#[tokio::test]
async fn the_deletion_gauges_stand_while_a_deletion_is_held_and_go_with_it() {
    with_operator_launched("delgauge", |_| {}, |client, ns, op| async move {
        let postgres = json!({"development": {"deleteStrategy": {"SkipFinalSnapshot": true}}});
        let redis = json!({"development": {}});
        let tiers = json!({"postgres": postgres.to_string(), "redis": redis.to_string()});
        crate::support::apply_config_map(&client, &ns, "cloud-resources-aws-strategies", tiers).await;
        let cr = |kind: &str, name: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}});
        let _: Postgres = create_json(&client, &ns, cr("Postgres", "gone-db")).await;
        let _: Redis = create_json(&client, &ns, cr("Redis", "gone-cache")).await;
        let (pgs, caches) = (Api::<Postgres>::namespaced(client.clone(), &ns), Api::<Redis>::namespaced(client.clone(), &ns));
        let identifier = |annotations: &std::collections::BTreeMap<String, String>| annotations["resourceIdentifier"].clone();
        let db = identifier(wait_phase(&pgs, "gone-db", Phase::Complete).await.metadata.annotations.as_ref().unwrap_or_else(|| panic!("no annotations")));
        let cache = identifier(wait_phase(&caches, "gone-cache", Phase::Complete).await.metadata.annotations.as_ref().unwrap_or_else(|| panic!("no annotations")));
        let held = ("ServiceUnavailable", 503, "held by the test");
        let (db_fault, cache_fault) = (format!("{ns}-held-db"), format!("{ns}-held-cache"));
        inject_aws_fault(&db_fault, "rds", "DeleteDBInstance", &db, held, None);
        inject_aws_fault(&cache_fault, "elasticache", "DeleteReplicationGroup", &cache, held, None);
        pgs.delete("gone-db", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        caches.delete("gone-cache", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let families = ["cro_postgres_deletion_timestamp", "cro_redis_deletion_timestamp"];
        let present = |s: &[(String, String)], family: &str, name: &str| {
            s.iter().any(|(series, _)| series.starts_with(&format!("{family}{{")) && series.contains(&format!("namespace=\"{ns}\"")) && series.contains(&format!("\"{name}\"")))
        };
        scrape_until(&op, "the deletion gauges of gone-db and gone-cache", |s| {
            present(s, families[0], "gone-db") && present(s, families[1], "gone-cache")
        })
        .await;
        crate::support::clear_aws_fault(&db_fault);
        crate::support::clear_aws_fault(&cache_fault);
        crate::support::wait_deleted(&pgs, "gone-db", DEFAULT_TIMEOUT).await;
        crate::support::wait_deleted(&caches, "gone-cache", DEFAULT_TIMEOUT).await;
        scrape_until(&op, "no deletion gauge of gone-db or gone-cache", |s| {
            !present(s, families[0], "gone-db") && !present(s, families[1], "gone-cache")
        })
        .await;
    })
    .await;
}
