//! Issue #62: an in-cluster Postgres whose disk fills up, on the real
//! node. Its volume is a tmpfs of a set size that the node grows when its
//! claim grows (tests/testenv/real-node/tmpfs-volume.sh, a FlexVolume
//! driver): the API server's resize admission, the expand controller and
//! kubelet's node expansion are the real ones, so the database really
//! runs out of space and really gets more.

use std::time::Duration;

use cloud_resource_operator::api::{Phase, Postgres};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};

use crate::real_node::{START, complete, postgres_env, ready_pod, run_client, spec};
use crate::support::{
    Connected, DEFAULT_TIMEOUT, apply_config_map, connectable, create_json, events_in,
    in_cluster_dns, place_on_real_node, real_node, wait_connected, wait_for,
    with_operator_launched,
};

/// The expand controller, then kubelet's next sync of the pod (once a
/// minute), grow the volume.
const GROWN: Duration = Duration::from_secs(240);

const MI: u64 = 1 << 20;

/// The tiers: `development` on the growable class at `dev_size`,
/// `production` on the environment's default class (no expansion) at
/// `prod_size`.
fn tiers(class: &str, dev_size: &str, prod_size: &str) -> Value {
    let pvc = |class: Option<&str>, size: &str| {
        let mut pvc = json!({"resources": {"requests": {"storage": size}}});
        if let Some(class) = class {
            pvc["storageClassName"] = json!(class);
        }
        json!({"createStrategy": {"pvcSpec": pvc}})
    };
    let tiers =
        json!({"development": pvc(Some(class), dev_size), "production": pvc(None, prod_size)});
    json!({"postgres": tiers.to_string()})
}

/// A StorageClass that allows expansion and one volume of it, 64 MiB,
/// bound in advance to the claim `ns/db`.
async fn growable_volume(client: &Client, ns: &str) -> String {
    let class = format!("{ns}-grows");
    let classes = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone());
    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": class},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate", "allowVolumeExpansion": true});
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(sc).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("creating StorageClass {class}: {e}"));
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": class},
        "spec": {"capacity": {"storage": "64Mi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": class,
            "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": ns, "name": "db"},
            "flexVolume": {"driver": "cro/tmpfs", "options": {"dir": class, "size": (64 * MI).to_string()}}}});
    Api::<PersistentVolume>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(pv).unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .unwrap_or_else(|e| panic!("creating PersistentVolume {class}: {e}"));
    class
}

fn connectable_of(pg: &Postgres) -> Option<(String, String)> {
    connectable(
        pg.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default(),
    )
}

/// The operator's `cro_postgres_storage_full` of `ns/db`.
async fn storage_full_gauge(op: &crate::support::Operator, ns: &str) -> Option<String> {
    let text = op.http_get("/metrics").await;
    let of = format!("resourceID=\"db\",namespace=\"{ns}\"");
    text.lines()
        .find(|l| l.starts_with("cro_postgres_storage_full{") && l.contains(&of))
        .and_then(|l| l.rsplit(' ').next().map(str::to_string))
}

/// A Postgres whose disk fills: the operator reports it not Connectable
/// (reason StorageFull), with a Warning Event and its gauge, while it
/// stays `complete`; the tier's larger `pvcSpec` storage grows its claim,
/// the same pod gets the room with its data, and the check turns
/// Connected again. A tier that grows a claim whose StorageClass does not
/// allow expansion fails the CR, naming the class and the size to set
/// back.
#[tokio::test]
async fn a_full_disk_is_reported_and_the_tiers_larger_storage_cures_it() {
    let _node = real_node();
    // Checks every 20 s instead of 300: the same checks, less waiting for
    // the one after the disk filled.
    let launch = |l: &mut crate::support::Launch| {
        l.wrapper = in_cluster_dns();
        l.extra_args.push("--connection-check-interval=20".into());
    };
    with_operator_launched("disk-full", launch, |client, ns, op| async move {
        place_on_real_node(&client, &ns).await;
        let class = growable_volume(&client, &ns).await;
        let strategies = "cloud-resources-openshift-strategies";
        apply_config_map(&client, &ns, strategies, tiers(&class, "64Mi", "1Gi")).await;
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"}, "spec": spec("db-sec")})).await;
        let mut small = spec("small-sec");
        small["tier"] = json!("production");
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "small"}, "spec": small})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_connected(&pgs, "db", START).await;
        complete(&pgs, "small").await;
        let pod = ready_pod(&client, &ns, "db", None).await;

        // An application fills the disk: a logged row, then an unlogged
        // table (no WAL: a WAL segment that cannot be made stops the
        // server instead) until PostgreSQL says the disk is full.
        let env = postgres_env("db-sec");
        let fill = "psql -v ON_ERROR_STOP=1 -qc 'CREATE TABLE kept (v text)' -c \"INSERT INTO kept VALUES ('before the disk filled')\" -c 'CREATE UNLOGGED TABLE filler (v text)' || exit 1; \
            for i in $(seq 1 200); do psql -v ON_ERROR_STOP=1 -qc \"INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 1000)\" 2>/tmp/err || break; done; \
            cat /tmp/err; grep -q 'No space left on device' /tmp/err";
        let (ok, log) = run_client(&client, &ns, "fill", env.clone(), fill).await;
        assert!(ok, "PostgreSQL refuses a write for want of space: {log}");

        // The operator says so: not Connectable, still complete.
        let full = wait_for(&pgs, "db", "Connectable False, StorageFull", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(connectable_of).is_some_and(|(status, reason)| status == "False" && reason == "StorageFull")
        })
        .await;
        assert_eq!(full.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete), "a full disk is not a failed resource");
        let condition = (full.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default().into_iter())
            .find(|c| c.type_ == "Connectable")
            .unwrap_or_else(|| panic!("no Connectable"));
        for part in ["No space left on device", "pvcSpec", "allows volume expansion"] {
            assert!(condition.message.contains(part), "{part:?} in {}", condition.message);
        }
        let warned = events_in(&client, &ns).await.into_iter().any(|e| {
            e.involved_object.name.as_deref() == Some("db")
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("StorageFull")
        });
        assert!(warned, "a Warning Event StorageFull about db");
        assert_eq!(storage_full_gauge(&op, &ns).await.as_deref(), Some("1"));

        // The tier grows both claims: the growable one grows, the other's
        // class refuses, and that CR says what to do.
        apply_config_map(&client, &ns, strategies, tiers(&class, "128Mi", "2Gi")).await;
        let refused = wait_for(&pgs, "small", "failed", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|p| p.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Failed)
        })
        .await;
        let message = refused.status.and_then(|s| s.message).unwrap_or_default();
        for part in ["PersistentVolumeClaim", "for 2Gi", "it has 1Gi", "allowVolumeExpansion: true on StorageClass standard", "back to 1Gi"] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
        let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        wait_for(&claims, "db", "the claim grown to 128Mi", GROWN, |o: Option<&PersistentVolumeClaim>| {
            let capacity = o.and_then(|c| c.status.as_ref()).and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage"));
            capacity.is_some_and(|q| q.0 == "128Mi")
        })
        .await;
        let cured = wait_connected(&pgs, "db", DEFAULT_TIMEOUT).await;
        assert!(cured.connected());
        assert_eq!(storage_full_gauge(&op, &ns).await.as_deref(), Some("0"));
        let told = events_in(&client, &ns).await.into_iter().any(|e| {
            e.involved_object.name.as_deref() == Some("db") && e.type_.as_deref() == Some("Normal") && e.reason.as_deref() == Some("Connected")
        });
        assert!(told, "a Normal Event Connected about db");

        // The same pod, with its data, writes again.
        let same = ready_pod(&client, &ns, "db", None).await;
        assert_eq!(same.metadata.uid, pod.metadata.uid, "growing the claim does not replace the pod");
        let (ok, log) = run_client(&client, &ns, "write-again", env, "psql -v ON_ERROR_STOP=1 -c \"INSERT INTO kept VALUES ('after it grew')\" && test \"$(psql -tA -c 'SELECT v FROM kept ORDER BY v')\" = \"$(printf 'after it grew\\nbefore the disk filled')\"").await;
        assert!(ok, "the row from before the disk filled, and a new one: {log}");

        // The volume and its class go with the test (the claim's deletion
        // releases the volume's protection).
        let dp = DeleteParams::default();
        let _ = Api::<PersistentVolume>::all(client.clone()).delete(&class, &dp).await;
        let _ = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone()).delete(&class, &dp).await;
    })
    .await;
}
