//! One namespace's backlog leaves reconciles and AWS calls to the others
//! (issue #43). Watching every namespace (the chart's default), one
//! controller per kind serves them all: 40 AWS BlobStorage of one
//! namespace are being worked on by an operator whose AWS budget is 3
//! calls a second, and one BlobStorage of another namespace comes after
//! them. Without the namespaces' shares of the slots, kube's queue takes
//! them in order and that one completed after all 40 (169.5 s); with them,
//! before half. It runs with every namespace's CRs, so in this suite.

use std::time::{Duration, Instant};

use cloud_resource_operator::api::{BlobStorage, Phase};
use kube::{
    Api,
    api::{DeleteParams, ListParams},
};
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, TestEnv, create_json, create_namespace, ensure_crds,
};

/// The busy namespace's BlobStorage.
const BACKLOG: usize = 40;

fn blob(name: &str) -> serde_json::Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
           "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
}

/// An operator watching every namespace, with the AWS budget `rate`.
fn everywhere(operator_ns: &str, log: &str, rate: &str) -> Launch {
    Launch {
        namespace: String::new(),
        operator_namespace: Some(operator_ns.to_string()),
        log_name: format!("operator-{operator_ns}-{log}.log"),
        extra_args: vec![
            "--leader-election=false".into(),
            format!("--aws-api-rate={rate}"),
            "--aws-api-burst=1".into(),
        ],
        ..Launch::new(operator_ns)
    }
}

async fn complete(blobs: &Api<BlobStorage>) -> usize {
    let list = (blobs.list(&ListParams::default()).await).unwrap_or_else(|e| panic!("{e}"));
    (list.items.iter())
        .filter(|b| b.status.as_ref().and_then(|s| s.phase) == Some(Phase::Complete))
        .count()
}

#[tokio::test]
async fn a_namespaces_backlog_leaves_reconciles_and_aws_calls_to_another() {
    crate::support::bounded("a_namespaces_backlog_leaves_reconciles_and_aws_calls_to_another", async move {
    let _serial = crate::SERIAL.lock().await;
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let busy = create_namespace(&client, "busy").await;
    let quiet = create_namespace(&client, "quiet").await;
    let busy_blobs = Api::<BlobStorage>::namespaced(client.clone(), &busy);
    let quiet_blobs = Api::<BlobStorage>::namespaced(client.clone(), &quiet);
    for i in 0..BACKLOG {
        create_json::<BlobStorage>(&client, &busy, blob(&format!("b{i}"))).await;
    }
    let operator = Operator::launch(everywhere(&busy, "slow", "3")).await;
    // The backlog is being worked on (finalizers are on) when the other
    // namespace's CR comes.
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        let list =
            (busy_blobs.list(&ListParams::default()).await).unwrap_or_else(|e| panic!("{e}"));
        let started = (list.items.iter())
            .filter(|b| {
                b.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| !f.is_empty())
            })
            .count();
        if started > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backlog was not started\n{}",
            operator.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let asked = Instant::now();
    create_json::<BlobStorage>(&client, &quiet, blob("only")).await;
    wait_phase_within(&quiet_blobs, "only", Duration::from_secs(300)).await;
    let took = asked.elapsed();
    let done = complete(&busy_blobs).await;
    eprintln!(
        "fairness: the quiet namespace's BlobStorage complete {:.1} s after its create, with {done} of the busy namespace's {BACKLOG} complete",
        took.as_secs_f64()
    );
    assert!(
        done < BACKLOG / 2,
        "the quiet namespace's CR waited for {done} of the busy one's {BACKLOG}"
    );
    // Where a platform engineer sees it: a counter of put-off reconciles.
    let metrics = operator.http_get("/metrics").await;
    let deferred: f64 = (metrics.lines())
        .find_map(|l| l.strip_prefix("cro_reconciles_deferred_total{kind=\"BlobStorage\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_default();
    assert!(
        deferred > 0.0,
        "the busy namespace never met its share:\n{metrics}"
    );
    operator.stop().await;

    // Gone, at a budget that does not hold the deletions back.
    let cleaner = Operator::launch(everywhere(&busy, "cleanup", "100")).await;
    for (blobs, ns) in [(&busy_blobs, &busy), (&quiet_blobs, &quiet)] {
        blobs
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {ns}'s BlobStorage: {e}"));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    while !(busy_blobs.list(&ListParams::default()).await)
        .unwrap_or_else(|e| panic!("{e}"))
        .items
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "BlobStorage left 180 s after deletion"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    cleaner.stop().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    for ns in [&busy, &quiet] {
        let _ = namespaces.delete(ns, &Default::default()).await;
    }
}).await;
}

/// `wait_phase` with a deadline of its own: the backlog makes it long.
async fn wait_phase_within(blobs: &Api<BlobStorage>, name: &str, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let cr = (blobs.get_opt(name).await).unwrap_or_else(|e| panic!("{e}"));
        if cr
            .as_ref()
            .and_then(|b| b.status.as_ref())
            .and_then(|s| s.phase)
            == Some(Phase::Complete)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} not complete within {limit:?}: {cr:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
