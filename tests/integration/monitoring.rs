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
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet,
};
use kube::Api;
use serde_json::{Value, json};

use crate::support::{DEFAULT_TIMEOUT, TestEnv, create_json, wait_phase, with_operator};

const RULES: &str = "deploy/monitoring/prometheus-rule.yaml";
const DASHBOARD: &str = "deploy/monitoring/dashboard.json";

/// The rule groups of the shipped PrometheusRule, as a rule file.
fn rule_groups() -> Value {
    let text = std::fs::read_to_string(RULES).unwrap_or_else(|e| panic!("{RULES}: {e}"));
    let rule: Value = yaml_serde::from_str(&text).unwrap_or_else(|e| panic!("{RULES}: {e}"));
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
        yaml_serde::to_string(&rule_groups()).unwrap_or_default(),
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

/// A failed BlobStorage and a complete AWS Postgres that the operator's
/// pod cannot reach: the series the operator exports for them, fed to
/// promtool, fire exactly the alerts they should. Where a scenario cannot
/// be reached here in reasonable time (an hour-long deletion, throttling),
/// the series are the operator's own with the values moved.
#[tokio::test]
async fn every_alert_fires_on_the_series_the_operator_exports() {
    with_operator("alerts", |client, ns, op| async move {
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

        // Every metric the alerts and the dashboard read is a family the
        // operator exports. The deletion gauges have series only while a
        // CR is being deleted, seconds here: the unit test
        // metrics::tests::database_gauges_follow_the_cloud_status_and_go_with_the_object
        // covers them.
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
        let mut series: Vec<Value> = scraped.iter().map(|(s, v)| json!({"series": s, "values": format!("{v}x180")})).collect();
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
            {"eval_time": "3h", "alertname": "AwsCallsThrottled", "exp_alerts": [expected("AwsCallsThrottled", &[("service", service.as_str())])]},
            {"eval_time": "3h", "alertname": "CloudResourceOperatorNoLeader", "exp_alerts": []},
        ]);
        let tested: Vec<&str> = cases.as_array().into_iter().flatten().filter_map(|c| c["alertname"].as_str()).collect();
        let shipped: Vec<String> = alerts().iter().filter_map(|a| a["alert"].as_str().map(str::to_string)).collect();
        assert_eq!(tested, shipped, "every shipped alert is tested");

        let dir = scratch("alerts");
        let write = |name: &str, value: &Value| std::fs::write(dir.join(name), yaml_serde::to_string(value).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
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
