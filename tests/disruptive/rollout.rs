//! An interrupted rollout: a tier edit touches 200 in-cluster Postgres, and
//! the operator is SIGKILLed twice while it rolls the change out. Every
//! Deployment ends on the new strategy exactly once (one spec change:
//! generation 2) and none is left half-updated (its controller observed the
//! last spec, its CR is complete).

use std::time::Duration;

use cloud_resource_operator::api::Postgres;
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, Phased, TestEnv, apply_config_map, create_json,
    create_namespace, ensure_crds,
};

const CRS: usize = 200;

async fn tier(client: &Client, ns: &str, image: &str) {
    let strategy = json!({"rollout": {"strategy": {"deploymentSpec": {"template": {"spec": {"containers": [{"name": "postgres", "image": image}]}}}}}});
    let data = json!({"postgres": strategy.to_string()});
    apply_config_map(client, ns, "cloud-resources-openshift-strategies", data).await;
}

fn image(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

/// Deployments on `image` whose controller has seen their spec.
async fn rolled(client: &Client, ns: &str, want: &str) -> Vec<Deployment> {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| image(d).as_deref() == Some(want))
        .collect()
}

async fn wait_rolled(client: &Client, ns: &str, want: &str, at_least: usize, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let n = rolled(client, ns, want).await.len();
        if n >= at_least {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {n} of {at_least} Deployments on {want}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Counts the Postgres CRs complete for the current spec.
async fn complete(client: &Client, ns: &str) -> usize {
    Api::<Postgres>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .filter(|p| p.phase() == Some(cloud_resource_operator::api::Phase::Complete))
        .count()
}

fn launch(ns: &str, n: usize) -> Launch {
    let mut launch = Launch::new(ns);
    launch.log_name = format!("operator-{ns}-{n}.log");
    launch.extra_args.push("--leader-election=false".into());
    launch
}

#[tokio::test]
async fn a_tier_rollout_survives_two_kills() {
    crate::support::bounded("a_tier_rollout_survives_two_kills", async move {
    let _serial = crate::SERIAL.lock().await;
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ns = create_namespace(&client, "rollout").await;
    tier(&client, &ns, "docker.io/library/postgres:16").await;
    let mut op = Operator::launch(launch(&ns, 0)).await;
    for i in 0..CRS {
        create_json::<Postgres>(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": format!("db{i}")}, "spec": {"type": "workshop", "tier": "rollout", "secretRef": {"name": format!("db{i}-sec")}}})).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while complete(&client, &ns).await < CRS {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of {CRS} Postgres complete before the rollout",
            complete(&client, &ns).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The edit, and two kills while it rolls out.
    let new = "docker.io/library/postgres:17.2";
    tier(&client, &ns, new).await;
    for (n, progress) in [(1, CRS / 10), (2, CRS / 2)] {
        wait_rolled(&client, &ns, new, progress, Duration::from_secs(300)).await;
        op.kill().await;
        op = Operator::launch(launch(&ns, n)).await;
    }
    wait_rolled(&client, &ns, new, CRS, Duration::from_secs(600)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let done = rolled(&client, &ns, new)
            .await
            .iter()
            .filter(|d| {
                d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation
            })
            .count();
        if done == CRS && complete(&client, &ns).await == CRS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {CRS} Deployments observed on {new}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let generations: Vec<i64> = rolled(&client, &ns, new)
        .await
        .iter()
        .filter_map(|d| d.metadata.generation)
        .collect();
    assert_eq!(generations.len(), CRS);
    assert!(
        generations.iter().all(|g| *g == 2),
        "a Deployment changed more than once: {generations:?}"
    );

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(&ns, &Default::default()).await;
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT * 5;
    while matches!(namespaces.get_opt(&ns).await, Ok(Some(_)))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    op.stop().await;
}).await;
}
