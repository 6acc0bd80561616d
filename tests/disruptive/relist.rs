//! A watch whose resourceVersion was compacted away (issue #46). With the
//! operator frozen (SIGSTOP, as a paused VM) and the API server restarted
//! under it, a CR is deleted, another CR's output Secret is deleted, a CR
//! is created, and etcd is compacted past all of it. Woken, the operator's
//! watches meet 410 Gone and relist. A relist shows only what exists: the
//! deleted Secret comes with no Delete event, and must still be noticed.

use std::time::Duration;

use cloud_resource_operator::api::{BlobStorage, Phase};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, TestEnv, create_json, create_namespace, ensure_crds,
    wait_deleted, wait_phase,
};

fn blob(name: &str) -> serde_json::Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
           "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
}

#[tokio::test]
async fn a_watch_compacted_away_relists_and_misses_no_deletion() {
    let _serial = crate::SERIAL.lock().await;
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let ns = create_namespace(&client, "relist").await;
    let operator = Operator::launch(Launch {
        log_name: format!("operator-{ns}.log"),
        extra_args: vec!["--leader-election=false".into()],
        ..Launch::new(&ns)
    })
    .await;
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    for name in ["gone", "unpublished"] {
        create_json::<BlobStorage>(&client, &ns, blob(name)).await;
    }
    for name in ["gone", "unpublished"] {
        wait_phase(&blobs, name, Phase::Complete).await;
    }

    // While no watch of the operator's runs: frozen, and the API server
    // restarted first, so that nothing of what follows waits in a socket
    // of the operator's for it to wake.
    operator.signal("STOP");
    crate::testenv(&["restart", "apiserver"]);
    blobs
        .delete("gone", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting gone: {e}"));
    secrets
        .delete("unpublished-sec", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting unpublished-sec: {e}"));
    create_json::<BlobStorage>(&client, &ns, blob("new")).await;
    crate::testenv(&["compact"]);
    operator.signal("CONT");

    // Woken: 410 Gone, a relist, and nothing missed.
    operator
        .wait_log("too old resource version", DEFAULT_TIMEOUT)
        .await;
    wait_deleted(&blobs, "gone", DEFAULT_TIMEOUT).await;
    wait_phase(&blobs, "new", Phase::Complete).await;
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while secrets
        .get_opt("unpublished-sec")
        .await
        .ok()
        .flatten()
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Secret deleted while the watch was away was not published again"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    operator.stop().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let _ = namespaces.delete(&ns, &Default::default()).await;
}
