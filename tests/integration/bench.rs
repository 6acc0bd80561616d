//! Benchmarks run by `make bench` (ignored in `make test`): figures come
//! from here, never from timing assertions.

use std::{collections::BTreeMap, time::Instant};

use cloud_resource_operator::api::{Phase, Postgres};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{
    Api, ResourceExt,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;

use crate::support::{DEFAULT_TIMEOUT, with_operator};

fn available(d: &Deployment) -> bool {
    d.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

/// Provider latency is not the operator's: from a Deployment becoming
/// Available (seen by a watch) to its Postgres reaching `complete` with the
/// Secret written (seen by a watch). Prints the median and maximum.
#[tokio::test]
#[ignore = "benchmark: run with `make bench`"]
async fn ready_latency_after_deployment_available() {
    let n: usize = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    with_operator("bench", move |client, ns, _op| async move {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        let pgs: Api<Postgres> = Api::namespaced(client.clone(), &ns);
        let mut dep_events = watcher(deployments, watcher::Config::default()).applied_objects().boxed();
        let mut pg_events = watcher(pgs.clone(), watcher::Config::default()).applied_objects().boxed();
        for i in 0..n {
            let pg: Postgres = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
                "metadata": {"name": format!("db{i}")},
                "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": format!("db{i}-sec")}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            pgs.create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("{e}"));
        }
        let mut available_at: BTreeMap<String, Instant> = BTreeMap::new();
        let mut complete_at: BTreeMap<String, Instant> = BTreeMap::new();
        let deadline = tokio::time::sleep(DEFAULT_TIMEOUT * 2);
        tokio::pin!(deadline);
        while complete_at.len() < n {
            tokio::select! {
                Ok(Some(d)) = dep_events.try_next() => {
                    if available(&d) {
                        available_at.entry(d.name_any()).or_insert_with(Instant::now);
                    }
                }
                Ok(Some(p)) = pg_events.try_next() => {
                    if p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Complete) {
                        complete_at.entry(p.name_any()).or_insert_with(Instant::now);
                    }
                }
                _ = &mut deadline => panic!("only {} of {n} Postgres completed in time", complete_at.len()),
            }
        }
        let mut ms: Vec<f64> = complete_at
            .iter()
            .filter_map(|(name, done)| available_at.get(name).map(|a| done.saturating_duration_since(*a).as_secs_f64() * 1000.0))
            .collect();
        assert_eq!(ms.len(), n, "a Postgres completed before its Deployment was seen Available");
        ms.sort_by(f64::total_cmp);
        println!(
            "ready latency (Deployment Available -> Secret written, phase complete) over {n} Postgres: median {:.0} ms, max {:.0} ms",
            ms[n / 2],
            ms[n - 1]
        );
    })
    .await;
}

fn moto_requests() -> usize {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/testenv/logs/moto.log");
    std::fs::read_to_string(log)
        .map(|l| {
            l.lines()
                .filter(|l| l.contains("HTTP/1.1\"") || l.contains("HTTP/1.1\u{1b}"))
                .count()
        })
        .unwrap_or(0)
}

/// The AWS call budget at rest, counted by the emulator (every request it
/// served): calls in an idle window, and calls of one recheck per kind.
/// With rechecks hourly, calls per resource per hour at rest = calls per
/// recheck + whatever the idle window shows.
#[tokio::test]
#[ignore = "benchmark: run with `make bench`"]
async fn aws_calls_per_resource_at_rest() {
    with_operator("budget", |client, ns, op| async move {
        let kinds = [("Postgres", "postgres"), ("Redis", "redis"), ("BlobStorage", "blobstorages"), ("SMTPCredentialSet", "smtpcredentialsets")];
        for (kind, plural) in kinds {
            let obj: kube::api::DynamicObject = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": plural},
                "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{plural}-sec")}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            let gvk = kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind);
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural));
            api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("{e}"));
            crate::support::wait_for(&api, plural, "complete", DEFAULT_TIMEOUT * 2, |o: Option<&kube::api::DynamicObject>| {
                o.is_some_and(|o| o.data["status"]["phase"] == "complete")
            })
            .await;
        }
        // Each resource's last status write triggers one more reconcile
        // (finding nothing to change); let those pass, then measure.
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        let window = std::time::Duration::from_secs(30);
        let before = moto_requests();
        tokio::time::sleep(window).await; // measuring an idle window: the wait is the measurement
        let idle = moto_requests() - before;
        let mut per_recheck = Vec::new();
        for (kind, plural) in kinds {
            let gvk = kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind);
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural));
            let reconciles = op.reconciles_of(plural);
            let before = moto_requests();
            api.patch(plural, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(json!({"metadata": {"annotations": {"bench/poke": "1"}}})))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let deadline = Instant::now() + DEFAULT_TIMEOUT;
            while op.reconciles_of(plural) <= reconciles {
                assert!(Instant::now() < deadline, "{kind} was not reconciled after the poke");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            per_recheck.push(format!("{kind} {}", moto_requests() - before));
        }
        println!(
            "aws calls at rest: {idle} in a {}s idle window (after 10s settling) with 4 complete resources; calls per recheck (hourly): {}",
            window.as_secs(),
            per_recheck.join(", ")
        );
    })
    .await;
}
