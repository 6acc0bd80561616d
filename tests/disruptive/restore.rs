//! An etcd restore to an older revision (issue #46), by Kubernetes'
//! documented procedure: the API server stopped, etcd's data put back from
//! a backup, the API server started. Nothing bumps the revision, so every
//! resourceVersion the operator holds is from etcd's future, and the
//! cluster goes on writing revisions the operator has already seen. After
//! the restore the operator must still see a deletion (and remove its
//! finalizer), an edit and a new CR, and serve the CRs the restore brought
//! back and forget the ones it took away.

use cloud_resource_operator::api::{BlobStorage, Phase};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::Patch, api::PatchParams};
use serde_json::json;

use crate::support::{DEFAULT_TIMEOUT, create_json, wait_deleted, wait_phase};

/// Plain, as etcd restores by default: revisions rewind.
#[tokio::test]
async fn after_an_etcd_restore_that_rewinds_revisions_nothing_is_missed() {
    crate::support::bounded(
        "after_an_etcd_restore_that_rewinds_revisions_nothing_is_missed",
        async move {
            restore_misses_nothing(false).await;
        },
    )
    .await;
}

/// With `--bump-revision --mark-compacted`, as etcd advises for
/// Kubernetes: watches meet 410 Gone, and the listed objects still carry
/// versions from before the backup.
#[tokio::test]
async fn after_an_etcd_restore_with_bumped_revisions_nothing_is_missed() {
    crate::support::bounded(
        "after_an_etcd_restore_with_bumped_revisions_nothing_is_missed",
        async move {
            restore_misses_nothing(true).await;
        },
    )
    .await;
}

async fn restore_misses_nothing(bump: bool) {
    let _serial = crate::SERIAL.lock().await;
    // Without leader election: with it, the restore's outage outlasts the
    // Lease (10 s) and the operator exits, to relist from scratch when its
    // pod restarts. This one rides the outage out on its old watches.
    let (client, ns, operator) = crate::riding_out_outages("restore").await;
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    let all = ["deleted", "edited", "returned", "rewound"];
    for name in all {
        create_json::<BlobStorage>(&client, &ns, crate::workshop_blob(name)).await;
    }
    for name in all {
        wait_phase(&blobs, name, Phase::Complete).await;
    }
    crate::testenv(&["backup"]);

    // Written after the backup, so undone by the restore: a CR that comes
    // and is completed, one that goes, and one the operator writes again
    // (the restore takes it back to before the operator's last write to
    // it). All are revisions the cluster writes again after a plain
    // restore.
    create_json::<BlobStorage>(&client, &ns, crate::workshop_blob("forgotten")).await;
    wait_phase(&blobs, "forgotten", Phase::Complete).await;
    blobs
        .delete("returned", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting returned: {e}"));
    wait_deleted(&blobs, "returned", DEFAULT_TIMEOUT).await;
    move_secret(&blobs, "rewound", "rewound-moved").await;
    crate::wait_secret(&secrets, "rewound-moved").await;
    crate::testenv(if bump {
        &["restore", "--bump"]
    } else {
        &["restore"]
    });
    // The test's own pooled connections died with the API server.
    let client = crate::support::TestEnv::load().client().await;
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
    let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
    let exists = async |name: &str| {
        (blobs.get_opt(name).await)
            .unwrap_or_else(|e| panic!("reading {name}: {e}"))
            .is_some()
    };
    assert!(
        !exists("forgotten").await && exists("returned").await,
        "the restore did not rewind the namespace's BlobStorages"
    );

    // At once, before the cluster's revision passes the ones the
    // operator saw: a deletion, an edit, a creation, and a deleted
    // Secret of the CR taken back to before the operator's last write.
    blobs
        .delete("deleted", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting deleted: {e}"));
    move_secret(&blobs, "edited", "edited-moved").await;
    create_json::<BlobStorage>(&client, &ns, crate::workshop_blob("fresh")).await;
    secrets
        .delete("rewound-sec", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting rewound-sec: {e}"));

    wait_deleted(&blobs, "deleted", DEFAULT_TIMEOUT).await;
    crate::wait_secret(&secrets, "edited-moved").await;
    wait_phase(&blobs, "fresh", Phase::Complete).await;
    crate::wait_secret(&secrets, "rewound-sec").await;
    wait_phase(&blobs, "returned", Phase::Complete).await;
    // Still watching, long after: a deletion of the one the restore
    // brought back is finalized too.
    blobs
        .delete("returned", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting returned again: {e}"));
    wait_deleted(&blobs, "returned", DEFAULT_TIMEOUT).await;
    operator.stop().await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    let _ = namespaces.delete(&ns, &Default::default()).await;
}

/// Edits BlobStorage `name` to publish its Secret as `to`.
async fn move_secret(blobs: &Api<BlobStorage>, name: &str, to: &str) {
    blobs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"secretRef": {"name": to}}})),
        )
        .await
        .unwrap_or_else(|e| panic!("editing {name}: {e}"));
}
