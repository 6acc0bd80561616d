//! Issue #62: an in-cluster Postgres and Redis whose disks fill up, on the
//! real node. Their volumes are tmpfs mounts of a set size that the node
//! grows when their claims grow (tests/testenv/real-node/tmpfs-volume.sh, a FlexVolume
//! driver): the API server's resize admission, the expand controller and
//! kubelet's node expansion are the real ones, so the database really
//! runs out of space and really gets more.

use std::time::Duration;

use cloud_resource_operator::api::{Phase, Postgres, Redis};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};

use crate::real_node::{START, complete, env_from, postgres_env, ready_pod, run_client, spec};
use crate::support::{
    Connected, DEFAULT_TIMEOUT, apply_config_map, connectable, create_json, events_in,
    in_cluster_dns, place_on_real_node, real_node, wait_connected, wait_for,
    with_operator_launched,
};

/// The expand controller, then kubelet's next sync of the pod (once a
/// minute), grow the volume.
const GROWN: Duration = Duration::from_secs(240);

const MI: u64 = 1 << 20;

/// The tiers: Postgres `development` on the growable class at `db`,
/// `production` on the environment's default class (no expansion) at
/// `small`; Redis `development` on the growable class at `cache`.
fn tiers(class: &str, [db, small, cache]: [&str; 3]) -> Value {
    let pvc = |class: Option<&str>, size: &str| {
        let mut pvc = json!({"resources": {"requests": {"storage": size}}});
        if let Some(class) = class {
            pvc["storageClassName"] = json!(class);
        }
        json!({"createStrategy": {"pvcSpec": pvc}})
    };
    let postgres = json!({"development": pvc(Some(class), db), "production": pvc(None, small)});
    let redis = json!({"development": pvc(Some(class), cache)});
    json!({"postgres": postgres.to_string(), "redis": redis.to_string()})
}

/// A StorageClass that allows expansion, and a volume of it for each
/// claim (name and MiB), bound to it in advance; the class's name.
async fn growable_volumes(client: &Client, ns: &str, claims: &[(&str, u64)]) -> String {
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
    for (claim, mib) in claims {
        let name = format!("{class}-{claim}");
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": format!("{mib}Mi")}, "accessModes": ["ReadWriteOnce"], "storageClassName": class,
                "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": ns, "name": claim},
                "flexVolume": {"driver": "cro/tmpfs", "options": {"dir": name, "size": (mib * MI).to_string()}}}});
        Api::<PersistentVolume>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(pv).unwrap_or_else(|e| panic!("{e}")),
            )
            .await
            .unwrap_or_else(|e| panic!("creating PersistentVolume {name}: {e}"));
    }
    class
}

/// Waits for `ns/name`'s claim to show `size` of capacity (grown).
async fn grown(client: &Client, ns: &str, name: &str, size: &str) {
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    wait_for(
        &claims,
        name,
        &format!("the claim grown to {size}"),
        GROWN,
        |o: Option<&PersistentVolumeClaim>| {
            let capacity = o
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"));
            capacity.is_some_and(|q| q.0 == size)
        },
    )
    .await;
}

/// Waits for `name` to show `Connectable` False, reason StorageFull; its
/// condition's message.
async fn storage_full<K>(api: &Api<K>, name: &str) -> String
where
    K: Connected
        + kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let full = wait_for(
        api,
        name,
        "Connectable False, StorageFull",
        DEFAULT_TIMEOUT,
        |o: Option<&K>| {
            o.and_then(|o| connectable(o.conditions()))
                .is_some_and(|(status, reason)| status == "False" && reason == "StorageFull")
        },
    )
    .await;
    assert_eq!(
        full.phase(),
        Some(Phase::Complete),
        "a full disk is not a failed resource"
    );
    let condition = full
        .conditions()
        .iter()
        .find(|c| c.type_ == "Connectable")
        .cloned();
    condition.map(|c| c.message).unwrap_or_default()
}

/// Whether an Event of `type_` and `reason` is about `name`.
async fn told(client: &Client, ns: &str, name: &str, type_: &str, reason: &str) -> bool {
    events_in(client, ns).await.into_iter().any(|e| {
        e.involved_object.name.as_deref() == Some(name)
            && e.type_.as_deref() == Some(type_)
            && e.reason.as_deref() == Some(reason)
    })
}

/// The operator's `cro_<kind>_storage_full` of `ns/name`.
async fn storage_full_gauge(
    op: &crate::support::Operator,
    kind: &str,
    ns: &str,
    name: &str,
) -> Option<String> {
    let text = op.http_get("/metrics").await;
    let of = format!("resourceID=\"{name}\",namespace=\"{ns}\"");
    text.lines()
        .find(|l| l.starts_with(&format!("cro_{kind}_storage_full{{")) && l.contains(&of))
        .and_then(|l| l.rsplit(' ').next().map(str::to_string))
}

/// A Postgres and a Redis whose disks fill: the operator reports each
/// not Connectable (reason StorageFull), with a Warning Event and its
/// gauge, while they stay `complete`; the tier's larger `pvcSpec` storage
/// grows their claims, the same pods get the room with their data, and
/// the checks turn Connected again. A tier that grows a claim whose
/// StorageClass does not allow expansion fails the CR, naming the class
/// and the size to set back.
#[tokio::test]
async fn full_disks_are_reported_and_the_tiers_larger_storage_cures_them() {
    let _node = real_node();
    // Checks every 20 s instead of 300: the same checks, less waiting for
    // the one after the disk filled.
    let launch = |l: &mut crate::support::Launch| {
        l.wrapper = in_cluster_dns();
        l.extra_args.push("--connection-check-interval=20".into());
    };
    with_operator_launched("disk-full", launch, |client, ns, op| async move {
        place_on_real_node(&client, &ns).await;
        let class = growable_volumes(&client, &ns, &[("db", 64), ("cache", 16)]).await;
        let strategies = "cloud-resources-openshift-strategies";
        apply_config_map(&client, &ns, strategies, tiers(&class, ["64Mi", "1Gi", "16Mi"])).await;
        let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
        let _: Postgres = create_json(&client, &ns, cr("Postgres", "db", spec("db-sec"))).await;
        let _: Redis = create_json(&client, &ns, cr("Redis", "cache", spec("cache-sec"))).await;
        let mut small = spec("small-sec");
        small["tier"] = json!("production");
        let _: Postgres = create_json(&client, &ns, cr("Postgres", "small", small)).await;
        let (pgs, caches) = (Api::<Postgres>::namespaced(client.clone(), &ns), Api::<Redis>::namespaced(client.clone(), &ns));
        wait_connected(&pgs, "db", START).await;
        wait_connected(&caches, "cache", START).await;
        complete(&pgs, "small").await;
        let pods = [ready_pod(&client, &ns, "db", None).await, ready_pod(&client, &ns, "cache", None).await];

        // Applications fill the disks. Postgres: a logged row, then an
        // unlogged table (no WAL: a WAL segment that cannot be made stops
        // the server instead, see docs/operations.md) until PostgreSQL says
        // the disk is full. Redis: 1 MB values until it refuses writes.
        let pg_env = postgres_env("db-sec");
        let fill = "psql -v ON_ERROR_STOP=1 -qc 'CREATE TABLE kept (v text)' -c \"INSERT INTO kept VALUES ('before the disk filled')\" -c 'CREATE UNLOGGED TABLE filler (v text)' || exit 1; \
            for i in $(seq 1 200); do psql -v ON_ERROR_STOP=1 -qc \"INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 1000)\" 2>/tmp/err || break; done; \
            cat /tmp/err; grep -q 'No space left on device' /tmp/err";
        let (ok, log) = run_client(&client, &ns, "fill-db", pg_env.clone(), fill).await;
        assert!(ok, "PostgreSQL refuses a write for want of space: {log}");
        let redis_env = env_from("cache-sec", &[("HOST", "uri"), ("PORT", "port"), ("REDISCLI_AUTH", "password")]);
        let fill = "redis-cli -h \"$HOST\" -p \"$PORT\" SET kept 'before the disk filled' | grep -qx OK || exit 1; \
            head -c 1048576 /dev/urandom >/tmp/value; \
            for i in $(seq 1 100); do redis-cli -h \"$HOST\" -p \"$PORT\" -x SET \"filler$i\" </tmp/value >/tmp/said; grep -qx OK /tmp/said || break; done; \
            cat /tmp/said; grep -q MISCONF /tmp/said";
        let (ok, log) = run_client(&client, &ns, "fill-cache", redis_env.clone(), fill).await;
        assert!(ok, "Redis refuses a write for want of space: {log}");

        // The operator says so: not Connectable, still complete.
        let said = storage_full(&pgs, "db").await;
        for part in ["No space left on device", "pvcSpec", "allows volume expansion", "AllocatedStorage"] {
            assert!(said.contains(part), "{part:?} in {said}");
        }
        let said = storage_full(&caches, "cache").await;
        for part in ["Errors writing to the AOF file: No space left on device", "pvcSpec"] {
            assert!(said.contains(part), "{part:?} in {said}");
        }
        for (kind, name) in [("postgres", "db"), ("redis", "cache")] {
            assert!(told(&client, &ns, name, "Warning", "StorageFull").await, "a Warning Event StorageFull about {name}");
            assert_eq!(storage_full_gauge(&op, kind, &ns, name).await.as_deref(), Some("1"), "cro_{kind}_storage_full of {name}");
        }

        // The tier grows the claims: the growable ones grow, the other's
        // class refuses, and that CR says what to do.
        apply_config_map(&client, &ns, strategies, tiers(&class, ["128Mi", "2Gi", "32Mi"])).await;
        let refused = wait_for(&pgs, "small", "failed", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|p| p.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Failed)
        })
        .await;
        let message = refused.status.and_then(|s| s.message).unwrap_or_default();
        for part in ["PersistentVolumeClaim", "for 2Gi", "it has 1Gi", "allowVolumeExpansion: true on StorageClass standard", "back to 1Gi"] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
        grown(&client, &ns, "db", "128Mi").await;
        grown(&client, &ns, "cache", "32Mi").await;
        wait_connected(&pgs, "db", DEFAULT_TIMEOUT).await;
        wait_connected(&caches, "cache", DEFAULT_TIMEOUT).await;
        for (kind, name) in [("postgres", "db"), ("redis", "cache")] {
            assert!(told(&client, &ns, name, "Normal", "Connected").await, "a Normal Event Connected about {name}");
            assert_eq!(storage_full_gauge(&op, kind, &ns, name).await.as_deref(), Some("0"), "cro_{kind}_storage_full of {name}");
        }

        // The same pods, with their data, write again.
        for (pod, name) in pods.iter().zip(["db", "cache"]) {
            let same = ready_pod(&client, &ns, name, None).await;
            assert_eq!(same.metadata.uid, pod.metadata.uid, "growing {name}'s claim does not replace its pod");
        }
        let (ok, log) = run_client(&client, &ns, "write-db", pg_env, "psql -v ON_ERROR_STOP=1 -c \"INSERT INTO kept VALUES ('after it grew')\" && test \"$(psql -tA -c 'SELECT v FROM kept ORDER BY v')\" = \"$(printf 'after it grew\\nbefore the disk filled')\"").await;
        assert!(ok, "the row from before the disk filled, and a new one: {log}");
        let (ok, log) = run_client(&client, &ns, "write-cache", redis_env, "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" SET later 'after it grew')\" = OK && test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" GET kept)\" = 'before the disk filled'").await;
        assert!(ok, "the key from before the disk filled, and a new one: {log}");

        // The volumes and their class go with the test (the claims'
        // deletion releases the volumes' protection).
        let dp = DeleteParams::default();
        for claim in ["db", "cache"] {
            let _ = Api::<PersistentVolume>::all(client.clone()).delete(&format!("{class}-{claim}"), &dp).await;
        }
        let _ = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(client.clone()).delete(&class, &dp).await;
    })
    .await;
}
