//! A watch whose resourceVersion was compacted away (issue #46). With the
//! operator frozen (SIGSTOP, as a paused VM) and the API server restarted
//! under it, a CR is deleted, another CR's output Secret is deleted, a CR
//! is created, and etcd is compacted past all of it. Woken, the operator's
//! watches meet 410 Gone and relist. A relist shows only what exists: the
//! deleted Secret comes with no Delete event, and must still be noticed.

use cloud_resource_operator::api::{BlobStorage, Phase};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use crate::support::{DEFAULT_TIMEOUT, create_json, wait_deleted, wait_phase};

#[tokio::test]
async fn a_watch_compacted_away_relists_and_misses_no_deletion() {
    crate::support::bounded(
        "a_watch_compacted_away_relists_and_misses_no_deletion",
        async move {
            let _serial = crate::SERIAL.lock().await;
            let (client, ns, operator) = crate::riding_out_outages("relist").await;
            let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
            for name in ["gone", "unpublished"] {
                create_json::<BlobStorage>(&client, &ns, crate::workshop_blob(name)).await;
            }
            for name in ["gone", "unpublished"] {
                wait_phase(&blobs, name, Phase::Complete).await;
            }

            // While no watch of the operator's runs: frozen, and the API server
            // restarted first, so that nothing of what follows waits in a socket
            // of the operator's for it to wake.
            operator.signal("STOP");
            crate::testenv(&["restart", "apiserver"]);
            // The test's own pooled connections died with the API server.
            let client = crate::support::TestEnv::load().client().await;
            let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
            let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
            blobs
                .delete("gone", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("deleting gone: {e}"));
            secrets
                .delete("unpublished-sec", &Default::default())
                .await
                .unwrap_or_else(|e| panic!("deleting unpublished-sec: {e}"));
            create_json::<BlobStorage>(&client, &ns, crate::workshop_blob("new")).await;
            crate::testenv(&["compact"]);
            operator.signal("CONT");

            // Woken: 410 Gone, a relist, and nothing missed.
            operator
                .wait_log("too old resource version", DEFAULT_TIMEOUT)
                .await;
            wait_deleted(&blobs, "gone", DEFAULT_TIMEOUT).await;
            wait_phase(&blobs, "new", Phase::Complete).await;
            crate::wait_secret(&secrets, "unpublished-sec").await;
            operator.stop().await;
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
            let _ = namespaces.delete(&ns, &Default::default()).await;
        },
    )
    .await;
}
