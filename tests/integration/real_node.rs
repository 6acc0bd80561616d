//! In-cluster Postgres and Redis on the test environment's real node
//! (kubelet, containerd, runc; images built from Debian's packages under
//! the names the default tiers use): their containers really start, their
//! probes really pass, a client pod connects with the Secret, the data
//! outlives the pod, and the operator's `Connectable` check, resolving
//! names as a pod does, logs in.

use std::time::Duration;

use cloud_resource_operator::api::{BlobStorage, Phase, Postgres, Redis, SMTPCredentialSet};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Pod, Secret},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, LogParams},
};
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, Phased, connectable, create_json, in_cluster_dns, place_on_real_node,
    real_node, wait_connected, wait_deleted, wait_for, with_operator_launched,
};

/// Containers start for real: image unpacked, initdb, probes every 10 s.
pub(crate) const START: Duration = Duration::from_secs(180);

pub(crate) fn spec(secret: &str) -> Value {
    json!({"type": "workshop", "tier": "development", "secretRef": {"name": secret}})
}

/// The Secret's keys as a client pod's environment.
pub(crate) fn env_from(secret: &str, keys: &[(&str, &str)]) -> Value {
    let vars: Vec<Value> = keys
        .iter()
        .map(|(var, key)| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": true}}}))
        .collect();
    json!(vars)
}

/// A Postgres Secret's keys as libpq's environment.
pub(crate) fn postgres_env(secret: &str) -> Value {
    env_from(
        secret,
        &[
            ("PGHOST", "host"),
            ("PGPORT", "port"),
            ("PGUSER", "username"),
            ("PGPASSWORD", "password"),
            ("PGDATABASE", "database"),
        ],
    )
}

/// Waits, as long as a real start takes, for `name` to be complete.
pub(crate) async fn complete<K>(api: &Api<K>, name: &str) -> K
where
    K: Phased
        + kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    wait_for(api, name, "phase complete", START, |o: Option<&K>| {
        o.and_then(Phased::phase) == Some(Phase::Complete)
    })
    .await
}

/// Makes Postgres `db` and Redis `cache` (Secrets `db-sec`, `cache-sec`)
/// and waits until each is complete and the operator's check logs in.
async fn connectable_databases(client: &Client, ns: &str) {
    let _: Postgres = create_json(client, ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"}, "spec": spec("db-sec")})).await;
    let _: Redis = create_json(client, ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"}, "spec": spec("cache-sec")})).await;
    wait_connected(
        &Api::<Postgres>::namespaced(client.clone(), ns),
        "db",
        START,
    )
    .await;
    wait_connected(
        &Api::<Redis>::namespaced(client.clone(), ns),
        "cache",
        START,
    )
    .await;
}

/// Runs `script` in a client pod (psql, redis-cli) with `env`; whether it
/// succeeded, and its output.
pub(crate) async fn run_client(
    client: &Client,
    ns: &str,
    name: &str,
    env: Value,
    script: &str,
) -> (bool, String) {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let _: Pod = create_json(
        client,
        ns,
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            // Admitted where Pod Security "restricted" is enforced.
            "spec": {"restartPolicy": "Never",
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{
                "name": "client", "image": "cro-testenv/tools:1", "imagePullPolicy": "Never",
                "command": ["sh", "-c", script], "env": env,
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
            }]}
        }),
    )
    .await;
    let done = wait_for(
        &pods,
        name,
        "the client pod to finish",
        START,
        |p: Option<&Pod>| matches!(phase(p).as_deref(), Some("Succeeded" | "Failed")),
    )
    .await;
    let log = pods
        .logs(name, &LogParams::default())
        .await
        .unwrap_or_else(|e| panic!("the logs of client pod {name}: {e}"));
    (phase(Some(&done)).as_deref() == Some("Succeeded"), log)
}

fn phase(p: Option<&Pod>) -> Option<String> {
    p?.status.as_ref()?.phase.clone()
}

/// The running, ready pod of a Deployment (by its instance label).
pub(crate) async fn ready_pod(client: &Client, ns: &str, instance: &str, not: Option<&str>) -> Pod {
    let selector = format!("app.kubernetes.io/instance={instance}");
    ready_pod_by(client, ns, &selector, not).await
}

/// The running, ready pod `selector` selects (not the one of UID `not`).
async fn ready_pod_by(client: &Client, ns: &str, selector: &str, not: Option<&str>) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let instance = selector;
    let deadline = tokio::time::Instant::now() + START;
    loop {
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap_or_else(|e| panic!("listing the pods of {instance}: {e}"));
        let ready = list.items.into_iter().find(|p| {
            let conditions = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            p.metadata.deletion_timestamp.is_none()
                && p.metadata.uid.as_deref() != not
                && conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        if let Some(pod) = ready {
            return pod;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no ready pod of {instance} within {START:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The whole promise of `complete` for the in-cluster defaults, with the
/// operator's default settings (only its name lookups go through the
/// cluster's DNS, as from its own pod).
#[tokio::test]
async fn in_cluster_postgres_and_redis_really_run_connect_and_keep_their_data() {
    let node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("real-node", dns, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"}, "spec": spec("db-sec")})).await;
        let _: Redis = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"}, "spec": spec("cache-sec")})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let caches = Api::<Redis>::namespaced(client.clone(), &ns);
        complete(&pgs, "db").await;
        complete(&caches, "cache").await;

        // Complete means the Deployment is available: its pod runs on the
        // real node and the image's probes (pg_isready, redis-cli ping) pass.
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        for name in ["db", "cache"] {
            let pod = ready_pod(&client, &ns, name, None).await;
            let spec = pod.spec.clone().unwrap_or_default();
            assert_eq!(spec.node_name.as_deref(), Some(node.as_str()), "{name}'s pod runs on the real node");
            let image = &spec.containers[0].image;
            assert!(matches!(image.as_deref(), Some("docker.io/library/postgres:17" | "docker.io/library/redis:7")), "the default tier's image: {image:?}");
            let status = pod.status.unwrap_or_default().container_statuses.unwrap_or_default();
            assert!(status[0].ready && status[0].started == Some(true), "{name}: {status:?}");
            let d = deployments.get(name).await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(d.status.and_then(|s| s.available_replicas), Some(1));
        }

        // The operator logs in with each Secret, by its Service name.
        wait_connected(&pgs, "db", DEFAULT_TIMEOUT).await;
        wait_connected(&caches, "cache", DEFAULT_TIMEOUT).await;

        // An application pod connects with the Secret and writes.
        let pg_env = postgres_env("db-sec");
        let redis_env = env_from("cache-sec", &[("HOST", "uri"), ("PORT", "port"), ("REDISCLI_AUTH", "password")]);
        let (ok, log) = run_client(&client, &ns, "pg-write", pg_env.clone(), "psql -v ON_ERROR_STOP=1 -c 'CREATE TABLE kept (v text)' -c \"INSERT INTO kept VALUES ('before the restart')\"").await;
        assert!(ok, "psql with the Secret's credentials: {log}");
        let (ok, log) = run_client(&client, &ns, "redis-write", redis_env.clone(), "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" SET kept 'before the restart')\" = OK").await;
        assert!(ok, "redis-cli with the Secret: {log}");

        // A wrong password is refused.
        let mut wrong = env_from("db-sec", &[("PGHOST", "host"), ("PGPORT", "port"), ("PGUSER", "username"), ("PGDATABASE", "database")]);
        if let Some(vars) = wrong.as_array_mut() {
            vars.push(json!({"name": "PGPASSWORD", "value": "not-the-password"}));
        }
        let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("db-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<String> = secret.data.unwrap_or_default().into_keys().collect();
        let (ok, log) = run_client(&client, &ns, "pg-wrong", wrong, "psql -c 'SELECT 1'").await;
        assert!(!ok && log.contains("password authentication failed"), "a wrong password (Secret keys {keys:?}): {log}");

        // Each server's pod is deleted; the new pod serves the same data.
        let pods = Api::<Pod>::namespaced(client.clone(), &ns);
        for name in ["db", "cache"] {
            let old = ready_pod(&client, &ns, name, None).await;
            pods.delete(&old.name_any(), &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            ready_pod(&client, &ns, name, old.metadata.uid.as_deref()).await;
        }
        let (ok, log) = run_client(&client, &ns, "pg-read", pg_env.clone(), "test \"$(psql -tA -c 'SELECT v FROM kept')\" = 'before the restart'").await;
        assert!(ok, "the row written before the pod was replaced: {log}");
        let (ok, log) = run_client(&client, &ns, "redis-read", redis_env.clone(), "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" GET kept)\" = 'before the restart'").await;
        assert!(ok, "the key written before the pod was replaced: {log}");

        snapshots_restore_what_was_written_before_them(&client, &ns, pg_env, redis_env).await;
    })
    .await;
}

/// Issue #58: while a switch from the Go operator may be rolled back
/// (`--go-compatible-resources`), a new in-cluster Postgres and Redis run
/// the Go operator's layout and images (stand-ins held to those images'
/// contracts, tests/testenv/real-node/build-images.sh), and `complete`
/// keeps its promise there too: the pods run on the real node with the Go
/// operator's probes passing, the operator's check logs in, an
/// application pod connects with the Secret and writes, and their
/// snapshots restore.
#[tokio::test]
async fn go_compatible_in_cluster_databases_really_run_and_connect() {
    let node = real_node();
    let launch = |l: &mut crate::support::Launch| {
        l.wrapper = in_cluster_dns();
        l.extra_args.push("--go-compatible-resources=true".into());
    };
    with_operator_launched("go-layout", launch, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        connectable_databases(&client, &ns).await;
        for (name, image) in [("db", "registry.redhat.io/rhscl/postgresql-13-rhel7"), ("cache", "registry.redhat.io/rhel9/redis-7")] {
            let pod = ready_pod_by(&client, &ns, &format!("deployment={name}"), None).await;
            let spec = pod.spec.unwrap_or_default();
            assert_eq!(spec.node_name.as_deref(), Some(node.as_str()), "{name}'s pod runs on the real node");
            assert_eq!(spec.containers[0].image.as_deref(), Some(image), "{name}: not the Go operator's image");
        }
        let pg_env = postgres_env("db-sec");
        let (ok, log) = run_client(&client, &ns, "pg-write", pg_env, "psql -v ON_ERROR_STOP=1 -c 'CREATE TABLE t (v text)' -c \"INSERT INTO t VALUES ('x')\"").await;
        assert!(ok, "psql with the Secret's credentials: {log}");
        let redis_env = env_from("cache-sec", &[("HOST", "uri"), ("PORT", "port")]);
        let (ok, log) = run_client(&client, &ns, "redis-write", redis_env, "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" SET k v)\" = OK").await;
        assert!(ok, "redis-cli with the Secret: {log}");
        go_layout_backups_restore(&client, &ns).await;
    })
    .await;
}

/// Snapshots of databases in the Go operator's layout are backups too (its
/// login Secret, its image's pg_dump and redis-cli), and a new Postgres
/// restores one: the row written before is there.
async fn go_layout_backups_restore(client: &Client, ns: &str) {
    use cloud_resource_operator::api::{PostgresSnapshot, RedisSnapshot};
    let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    let _: PostgresSnapshot = create_json(
        client,
        ns,
        cr("PostgresSnapshot", "db-snap", json!({"resourceName": "db"})),
    )
    .await;
    let _: RedisSnapshot = create_json(
        client,
        ns,
        cr(
            "RedisSnapshot",
            "cache-snap",
            json!({"resourceName": "cache"}),
        ),
    )
    .await;
    let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), ns);
    let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), ns);
    complete(&pg_snaps, "db-snap").await;
    complete(&redis_snaps, "cache-snap").await;
    let mut copy = spec("copy-sec");
    copy["restoreFromSnapshot"] = json!("db-snap");
    let _: Postgres = create_json(client, ns, cr("Postgres", "copy", copy)).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns);
    complete(&pgs, "copy").await;
    let env = postgres_env("copy-sec");
    let (ok, log) = run_client(
        client,
        ns,
        "copy-read",
        env,
        "test \"$(psql -tA -c 'SELECT v FROM t')\" = x",
    )
    .await;
    assert!(
        ok,
        "the row written before the snapshot, read from the copy: {log}"
    );
}

/// Issue #60: a workshop PostgresSnapshot and RedisSnapshot of databases
/// holding a row and a key are backups a new Postgres and Redis restore
/// (`restoreFromSnapshot`): what was written before each snapshot is in
/// its copy, what was written after is not; read through the copies'
/// Secrets as an application would. Deleting a snapshot deletes its
/// backup's volume; `skipDelete` keeps it.
async fn snapshots_restore_what_was_written_before_them(
    client: &Client,
    ns: &str,
    pg_env: Value,
    redis_env: Value,
) {
    use cloud_resource_operator::api::{PostgresSnapshot, RedisSnapshot};
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    let _: PostgresSnapshot = create_json(
        client,
        ns,
        cr("PostgresSnapshot", "db-snap", json!({"resourceName": "db"})),
    )
    .await;
    let _: RedisSnapshot = create_json(
        client,
        ns,
        cr(
            "RedisSnapshot",
            "cache-snap",
            json!({"resourceName": "cache", "skipDelete": true}),
        ),
    )
    .await;
    let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), ns);
    let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), ns);
    let pg_snap = complete(&pg_snaps, "db-snap").await;
    let redis_snap = complete(&redis_snaps, "cache-snap").await;
    let backup = |id: Option<String>| {
        id.unwrap_or_else(|| panic!("a complete snapshot records its identifier"))
    };
    let pg_backup = backup(pg_snap.status.and_then(|s| s.snapshot_id));
    let redis_backup = backup(redis_snap.status.and_then(|s| s.snapshot_id));

    let (ok, log) = run_client(
        client,
        ns,
        "pg-after",
        pg_env,
        "psql -v ON_ERROR_STOP=1 -c \"INSERT INTO kept VALUES ('after the snapshot')\"",
    )
    .await;
    assert!(ok, "{log}");
    let (ok, log) = run_client(
        client,
        ns,
        "redis-after",
        redis_env,
        "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" SET later 'after the snapshot')\" = OK",
    )
    .await;
    assert!(ok, "{log}");

    let mut copy = spec("db-copy-sec");
    copy["restoreFromSnapshot"] = json!("db-snap");
    let _: Postgres = create_json(client, ns, cr("Postgres", "db-copy", copy)).await;
    let mut copy = spec("cache-copy-sec");
    copy["restoreFromSnapshot"] = json!("cache-snap");
    let _: Redis = create_json(client, ns, cr("Redis", "cache-copy", copy)).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns);
    let caches = Api::<Redis>::namespaced(client.clone(), ns);
    complete(&pgs, "db-copy").await;
    complete(&caches, "cache-copy").await;

    let pg_copy = postgres_env("db-copy-sec");
    let (ok, log) = run_client(
        client,
        ns,
        "pg-copy-read",
        pg_copy,
        "psql -tA -c 'SELECT v FROM kept ORDER BY v'",
    )
    .await;
    assert!(
        ok && log.trim() == "before the restart",
        "the copy holds the row written before the snapshot and not the one after: {log:?}"
    );
    let redis_copy = env_from(
        "cache-copy-sec",
        &[
            ("HOST", "uri"),
            ("PORT", "port"),
            ("REDISCLI_AUTH", "password"),
        ],
    );
    let (ok, log) = run_client(client, ns, "redis-copy-read", redis_copy, "redis-cli -h \"$HOST\" -p \"$PORT\" GET kept; redis-cli -h \"$HOST\" -p \"$PORT\" EXISTS later").await;
    assert!(
        ok && log.split_whitespace().collect::<Vec<_>>() == ["before", "the", "restart", "0"],
        "the copy holds the key written before the snapshot and not the one after: {log:?}"
    );

    // Deleting a snapshot deletes its backup; under skipDelete it stays.
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    for (name, backup) in [("db-snap", &pg_backup), ("cache-snap", &redis_backup)] {
        assert!(
            claims
                .get_opt(backup)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_some(),
            "{name}'s backup volume {backup}"
        );
    }
    let dp = DeleteParams::default();
    pg_snaps
        .delete("db-snap", &dp)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    redis_snaps
        .delete("cache-snap", &dp)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&pg_snaps, "db-snap", DEFAULT_TIMEOUT).await;
    wait_deleted(&redis_snaps, "cache-snap", DEFAULT_TIMEOUT).await;
    wait_deleted(&claims, &pg_backup, DEFAULT_TIMEOUT).await;
    // The copies record that they were made, so they no longer need their
    // snapshots: reconciled again without them, they stay complete.
    for (kind, name) in [("Postgres", "db-copy"), ("Redis", "cache-copy")] {
        let api = Api::<kube::api::DynamicObject>::namespaced_with(
            client.clone(),
            ns,
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::api::GroupVersionKind::gvk("integreatly.org", "v1alpha1", kind),
                if kind == "Redis" { "redis" } else { "postgres" },
            ),
        );
        let copy = api.get(name).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            copy.annotations().contains_key("resourceIdentifier"),
            "{kind} {name} records that it was made: {:?}",
            copy.annotations()
        );
        let before = copy.data["status"]["observedInputs"].clone();
        let touch = json!({"metadata": {"labels": {"touched": "after-the-snapshot-went"}}});
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&touch),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let after = wait_for(
            &api,
            name,
            "reconciled again",
            DEFAULT_TIMEOUT,
            |o: Option<&kube::api::DynamicObject>| {
                o.is_some_and(|o| o.data["status"]["observedInputs"] != before)
            },
        )
        .await;
        assert_eq!(
            after.data["status"]["phase"], "complete",
            "{kind} {name} without its snapshot: {}",
            after.data["status"]
        );
    }
    assert!(
        claims
            .get_opt(&redis_backup)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some(),
        "skipDelete keeps the backup volume {redis_backup}"
    );
}

/// A database whose pod runs on a kwok node has an address nothing real is
/// behind, in the environment's fake range (issue #44): the operator's
/// check, resolving its Service name as a pod does, finds it unreachable at
/// once (not after its timeout), and no connection leaves this machine.
/// Its pod is admitted where Pod Security "restricted" is enforced.
#[tokio::test]
async fn a_database_on_a_fake_node_is_reported_unreachable_at_once() {
    let _node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("fake-node", dns, |client, ns, _op| async move {
        // Pod Security "restricted" is enforced: the operator's pods pass it.
        let restricted = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&ns, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&restricted))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        // Not placed on the real node: kwok runs its pod.
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"}, "spec": spec("db-sec")})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let complete = |o: Option<&Postgres>| o.and_then(|o| o.status.as_ref()?.phase) == Some(Phase::Complete);
        wait_for(&pgs, "db", "phase complete", DEFAULT_TIMEOUT, complete).await;
        let want = Some(("False".to_string(), "Unreachable".to_string()));
        let found = wait_for(&pgs, "db", "Connectable False, Unreachable", DEFAULT_TIMEOUT, move |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == want
        })
        .await;
        let conditions = found.status.map(|s| s.conditions).unwrap_or_default();
        let message = conditions.iter().find(|c| c.type_ == "Connectable").map(|c| c.message.clone()).unwrap_or_default();
        assert!(message.contains("db.") && message.contains(":5432 is unreachable"), "{message}");
    })
    .await;
}

/// What OpenShift's restricted-v2 SCC admits in a namespace: the UIDs of
/// its range (annotations OpenShift sets on every namespace). The pods run
/// as the range's first UID, which has no passwd entry in the images, pass
/// Pod Security "restricted", and serve an application (issue #40).
#[tokio::test]
async fn in_cluster_databases_start_under_an_openshift_namespaces_uid_range() {
    let _node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("uid-range", dns, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        let openshift = json!({"metadata": {
            "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            "annotations": {
                "openshift.io/sa.scc.uid-range": "1000680000/10000",
                "openshift.io/sa.scc.supplemental-groups": "1000680000/10000",
            }}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&ns, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&openshift))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        connectable_databases(&client, &ns).await;
        for name in ["db", "cache"] {
            let pod = ready_pod(&client, &ns, name, None).await;
            let context = pod.spec.and_then(|s| s.security_context).unwrap_or_default();
            assert_eq!(context.run_as_user, Some(1000680000), "{name}: {context:?}");
            assert_eq!(context.fs_group, Some(1000680000), "{name}: {context:?}");
        }
        let pg_env = postgres_env("db-sec");
        let (ok, log) = run_client(&client, &ns, "pg-write", pg_env, "psql -v ON_ERROR_STOP=1 -c 'CREATE TABLE t (v text)' -c \"INSERT INTO t VALUES ('x')\"").await;
        assert!(ok, "psql with the Secret's credentials: {log}");
    })
    .await;
}

/// An S3 client of the store at `endpoint` with the Secret's key (or a
/// wrong secret), signing as the store's region.
fn s3_client(endpoint: &str, key_id: &str, secret: &str) -> aws_sdk_s3::Client {
    let credentials = aws_sdk_s3::config::Credentials::new(key_id, secret, None, None, "test");
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .credentials_provider(credentials)
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The error code of an S3 call's answer (`None`: it succeeded).
fn refused<T, E>(result: Result<T, aws_sdk_s3::error::SdkError<E>>) -> Option<String>
where
    E: aws_sdk_s3::error::ProvideErrorMetadata,
{
    match result {
        Ok(_) => None,
        Err(e) => Some(
            aws_sdk_s3::error::ProvideErrorMetadata::code(&e)
                .unwrap_or("no code")
                .to_string(),
        ),
    }
}

/// The five keys of BlobStorage `name`'s Secret `<name>-sec`, each filled
/// in: bucket, region, key id, secret, endpoint.
async fn bucket_secret(secrets: &Api<Secret>, name: &str) -> [String; 5] {
    let s = secrets
        .get(&format!("{name}-sec"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let data = s.data.unwrap_or_default();
    let get = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .unwrap_or_default()
    };
    let keys = [
        "bucketName",
        "bucketRegion",
        "credentialKeyID",
        "credentialSecretKey",
        "bucketEndpoint",
    ];
    keys.map(|k| {
        let v = get(k);
        assert!(
            !v.is_empty(),
            "{name}-sec's {k} is empty: complete promised a usable Secret"
        );
        v
    })
}

/// The S3 address of store Service `name`: this process does not resolve
/// cluster names, so its cluster IP.
async fn store_address(client: &Client, ns: &str, name: &str) -> String {
    let services = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), ns);
    let s = services.get(name).await.unwrap_or_else(|e| panic!("{e}"));
    let ip = s
        .spec
        .and_then(|s| s.cluster_ip)
        .unwrap_or_else(|| panic!("Service {name} has no cluster IP"));
    format!("http://{ip}:8333")
}

/// A BlobStorage whose tier gives it a store of its own (issue #60): the
/// store really runs on the real node, and its Secret is a key that writes
/// and reads its bucket and is refused another BlobStorage's; the bucket,
/// its user and key outlive the store's pod; deleting the CR removes the
/// store. The test connects to the address the Secret's endpoint names
/// (its Service), as an application does.
#[tokio::test]
async fn an_in_cluster_blob_storage_with_a_store_of_its_own_is_a_real_private_bucket() {
    let _node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("blob-store", dns, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        let tier = json!({"development": {"createStrategy": {"objectStore": "own"}}}).to_string();
        crate::support::apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", json!({"blobstorage": tier})).await;
        for name in ["uploads", "reports"] {
            let _: BlobStorage = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name}, "spec": spec(&format!("{name}-sec"))})).await;
        }
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        for name in ["uploads", "reports"] {
            wait_for(&blobs, name, "phase complete", START, |o: Option<&BlobStorage>| o.and_then(|o| o.status.as_ref()?.phase) == Some(Phase::Complete)).await;
            let pod = ready_pod(&client, &ns, name, None).await;
            let image = pod.spec.and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
            assert_eq!(image.as_deref(), Some("docker.io/chrislusf/seaweedfs:4.48"), "the default image");
        }

        // The operator, resolving names as a pod does, uses the bucket with
        // the Secret's key.
        wait_connected(&blobs, "uploads", DEFAULT_TIMEOUT).await;

        // The Secret: every key filled in, the endpoint the store's Service.
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let read = |name: &'static str| bucket_secret(&secrets, name);
        let [bucket, region, key_id, secret, endpoint] = read("uploads").await;
        let [other_bucket, ..] = read("reports").await;
        assert_eq!((bucket.as_str(), region.as_str()), ("uploads", "us-east-1"));
        assert_eq!(endpoint, format!("http://uploads.{ns}.svc:8333"));
        let address = |name: &'static str| store_address(&client, &ns, name);
        let at = address("uploads").await;
        let app = s3_client(&at, &key_id, &secret);
        app.put_object().bucket(&bucket).key("kept").body(b"before the restart".to_vec().into()).send().await.unwrap_or_else(|e| panic!("writing with the Secret's key: {e:?}"));
        let listed = app.list_objects_v2().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(listed.contents().len(), 1);

        // The key reaches its bucket only: not a bucket it makes, and not
        // the other BlobStorage's, in its store or with the same name here.
        assert_eq!(refused(app.create_bucket().bucket("elsewhere").send().await).as_deref(), Some("AccessDenied"));
        assert_eq!(refused(app.list_objects_v2().bucket(&other_bucket).send().await).as_deref(), Some("AccessDenied"), "another bucket of its store");
        let other = s3_client(&address("reports").await, &key_id, &secret);
        let other_store = refused(other.list_objects_v2().bucket(&other_bucket).send().await);
        assert!(other_store.is_some(), "another BlobStorage's store took uploads' key");
        // A wrong secret is refused.
        let wrong = s3_client(&at, &key_id, "not-the-secret");
        assert!(refused(wrong.get_object().bucket(&bucket).key("kept").send().await).is_some(), "a wrong secret");

        // The store's gRPC port (SeaweedFS serves its IAM cache there, on
        // every address) turns away a client without the store's client
        // certificate, which nobody outside the pod holds.
        let pod = ready_pod(&client, &ns, "uploads", None).await;
        let pod_ip = pod.status.and_then(|s| s.pod_ip).unwrap_or_else(|| panic!("uploads' pod has no IP"));
        let credentials = secrets.get("uploads-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        let ca = credentials.data.unwrap_or_default().remove("grpcCA").unwrap_or_else(|| panic!("no grpcCA in uploads-credentials")).0;
        let alert = grpc_without_a_client_certificate(&pod_ip, &ca).await;
        assert!(alert.contains("CertificateRequired"), "the gRPC port answered a client without a certificate: {alert}");

        // The store's pod is replaced: the object, user and key remain.
        let pods = Api::<Pod>::namespaced(client.clone(), &ns);
        let old = ready_pod(&client, &ns, "uploads", None).await;
        pods.delete(&old.name_any(), &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        ready_pod(&client, &ns, "uploads", old.metadata.uid.as_deref()).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        let body = loop {
            match app.get_object().bucket(&bucket).key("kept").send().await {
                Ok(out) => break out.body.collect().await.unwrap_or_else(|e| panic!("{e}")).into_bytes(),
                Err(e) => {
                    assert!(tokio::time::Instant::now() < deadline, "reading after the pod was replaced: {e:?}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        };
        assert_eq!(&body[..], b"before the restart");
        let [_, _, key_after, ..] = read("uploads").await;
        assert_eq!(key_after, key_id, "the key outlives the pod");

        // Deleting the CR by mistake loses nothing: its bucket holds an
        // object and the tier does not force deletion, so the store is
        // released, still running, for a BlobStorage of its name.
        blobs.delete("uploads", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "uploads", START).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let claims = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        let claim = claims.get_opt("uploads").await.unwrap_or_else(|e| panic!("{e}"));
        let claim = claim.unwrap_or_else(|| panic!("deleting uploads deleted the volume of a bucket holding an object"));
        assert!(claim.owner_references().is_empty(), "the kept PVC is still owned: the garbage collector would delete it");
        let released = claim.annotations().get("cro.integreatly.org/released-from");
        assert_eq!(released.map(String::as_str), Some(format!("{ns}/BlobStorage/uploads").as_str()));
        assert!(deployments.get_opt("uploads").await.unwrap_or_else(|e| panic!("{e}")).is_some(), "the kept store runs");
        let kept = app.get_object().bucket(&bucket).key("kept").send().await.unwrap_or_else(|e| panic!("the kept store, with the kept key: {e:?}"));
        assert_eq!(&kept.body.collect().await.unwrap_or_else(|e| panic!("{e}")).into_bytes()[..], b"before the restart");
        // A BlobStorage of the same name takes the store over, key and all.
        let _: BlobStorage = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "uploads"}, "spec": spec("uploads-sec")})).await;
        wait_for(&blobs, "uploads", "phase complete", START, |o: Option<&BlobStorage>| o.and_then(|o| o.status.as_ref()?.phase) == Some(Phase::Complete)).await;
        let [_, _, key_again, ..] = read("uploads").await;
        assert_eq!(key_again, key_id, "the new BlobStorage's Secret gives the kept key");
        let claim = claims.get("uploads").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(claim.owner_references().len(), 1, "the new BlobStorage owns the kept PVC");

        // Emptied, its store is deleted with it; the other stays.
        app.delete_object().bucket(&bucket).key("kept").send().await.unwrap_or_else(|e| panic!("{e:?}"));
        blobs.delete("uploads", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "uploads", START).await;
        wait_deleted(&deployments, "uploads", DEFAULT_TIMEOUT).await;
        wait_deleted(&claims, "uploads", DEFAULT_TIMEOUT).await;
        wait_deleted(&secrets, "uploads-credentials", DEFAULT_TIMEOUT).await;
        assert!(deployments.get_opt("reports").await.unwrap_or_else(|e| panic!("{e}")).is_some(), "the other store stays");

        // The tier's forceBucketDeletion deletes a store, objects and all.
        let [_, _, reports_id, reports_secret, ..] = read("reports").await;
        let reports = s3_client(&address("reports").await, &reports_id, &reports_secret);
        reports.put_object().bucket(&other_bucket).key("gone").body(b"x".to_vec().into()).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let forced = json!({"development": {"createStrategy": {"objectStore": "own"}, "deleteStrategy": {"forceBucketDeletion": true}}}).to_string();
        crate::support::apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", json!({"blobstorage": forced})).await;
        blobs.delete("reports", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "reports", START).await;
        wait_deleted(&claims, "reports", DEFAULT_TIMEOUT).await;
    })
    .await;
}

/// BlobStorages whose tier shares the namespace's store (issue #60): one
/// store runs on the real node for both; each Secret's key writes and
/// reads its own bucket and is refused the other's, which is in the same
/// store. A tier that would move a bucket to another store changes
/// nothing. Deleting a CR deletes its bucket and user (its key stops
/// working), or keeps a bucket holding objects; the store goes with its
/// last bucket.
#[tokio::test]
async fn blob_storages_sharing_their_namespaces_store_reach_only_their_own_buckets() {
    let _node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("blob-shared", dns, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        let tier = |store: &str| json!({"blobstorage": json!({"development": {"createStrategy": {"objectStore": store}}}).to_string()});
        let strategies = "cloud-resources-openshift-strategies";
        crate::support::apply_config_map(&client, &ns, strategies, tier("namespace")).await;
        for name in ["photos", "logs"] {
            let _: BlobStorage = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name}, "spec": spec(&format!("{name}-sec"))})).await;
        }
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        for name in ["photos", "logs"] {
            complete(&blobs, name).await;
        }
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let names: Vec<String> = deployments.list(&ListParams::default()).await.unwrap_or_else(|e| panic!("{e}")).items.iter().map(|d| d.name_any()).collect();
        assert_eq!(names, ["cro-object-store"], "one store for the namespace");
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let [photos_bucket, _, photos_id, photos_secret, endpoint] = bucket_secret(&secrets, "photos").await;
        let [logs_bucket, _, logs_id, logs_secret, logs_endpoint] = bucket_secret(&secrets, "logs").await;
        assert_eq!((photos_bucket.as_str(), logs_bucket.as_str()), ("photos", "logs"));
        assert_eq!(endpoint, format!("http://cro-object-store.{ns}.svc:8333"));
        assert_eq!(logs_endpoint, endpoint);
        assert_ne!(photos_id, logs_id, "a user of its own for each");
        wait_connected(&blobs, "photos", DEFAULT_TIMEOUT).await;

        // Each key reaches its own bucket, and not the other's beside it.
        let at = store_address(&client, &ns, "cro-object-store").await;
        let photos = s3_client(&at, &photos_id, &photos_secret);
        let logs = s3_client(&at, &logs_id, &logs_secret);
        photos.put_object().bucket(&photos_bucket).key("p").body(b"photo".to_vec().into()).send().await.unwrap_or_else(|e| panic!("writing with photos' key: {e:?}"));
        logs.put_object().bucket(&logs_bucket).key("kept").body(b"a log".to_vec().into()).send().await.unwrap_or_else(|e| panic!("writing with logs' key: {e:?}"));
        assert_eq!(refused(photos.list_objects_v2().bucket(&logs_bucket).send().await).as_deref(), Some("AccessDenied"), "photos' key listed logs' bucket");
        assert_eq!(refused(photos.get_object().bucket(&logs_bucket).key("kept").send().await).as_deref(), Some("AccessDenied"), "photos' key read logs' object");
        assert_eq!(refused(logs.put_object().bucket(&photos_bucket).key("x").body(b"x".to_vec().into()).send().await).as_deref(), Some("AccessDenied"), "logs' key wrote into photos' bucket");
        assert_eq!(refused(photos.create_bucket().bucket("elsewhere").send().await).as_deref(), Some("AccessDenied"));

        // A tier that would give the buckets a store of their own moves
        // nothing: the CR fails, naming both stores, and no store is made.
        crate::support::apply_config_map(&client, &ns, strategies, tier("own")).await;
        let failed = wait_for(&blobs, "photos", "phase failed", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| o.and_then(Phased::phase) == Some(Phase::Failed)).await;
        let message = failed.message();
        assert!(message.contains("does not move objects") && message.contains("cro-object-store"), "{message}");
        assert!(deployments.get_opt("photos").await.unwrap_or_else(|e| panic!("{e}")).is_none(), "a store of its own was made beside the bucket");
        crate::support::apply_config_map(&client, &ns, strategies, tier("namespace")).await;
        complete(&blobs, "photos").await;

        // Deleting a CR deletes its bucket, objects and all, and its user;
        // the store stays for the other.
        let forced = json!({"blobstorage": json!({"development": {"createStrategy": {"objectStore": "namespace"}, "deleteStrategy": {"forceBucketDeletion": true}}}).to_string()});
        crate::support::apply_config_map(&client, &ns, strategies, forced).await;
        blobs.delete("photos", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "photos", START).await;
        let code = refused(photos.list_objects_v2().bucket(&photos_bucket).send().await);
        assert_eq!(code.as_deref(), Some("InvalidAccessKeyId"), "photos' key after its CR was deleted: its user and key are to be gone");
        let admin = secrets.get("cro-object-store-credentials").await.unwrap_or_else(|e| panic!("{e}")).data.unwrap_or_default();
        let admin = |k: &str| String::from_utf8_lossy(&admin.get(k).unwrap_or_else(|| panic!("no {k}")).0).into_owned();
        let admin = s3_client(&at, &admin("adminAccessKeyID"), &admin("adminSecretAccessKey"));
        let listed = admin.list_buckets().send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let buckets: Vec<&str> = listed.buckets().iter().filter_map(|b| b.name()).collect();
        assert_eq!(buckets, ["logs"], "photos' bucket was deleted, logs' kept");

        // Deleting a CR whose bucket holds an object, under a tier that
        // does not force it, keeps the bucket, its key and the store.
        crate::support::apply_config_map(&client, &ns, strategies, tier("namespace")).await;
        blobs.delete("logs", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "logs", START).await;
        let kept = logs.get_object().bucket(&logs_bucket).key("kept").send().await.unwrap_or_else(|e| panic!("the kept bucket, with the kept key: {e:?}"));
        assert_eq!(&kept.body.collect().await.unwrap_or_else(|e| panic!("{e}")).into_bytes()[..], b"a log");
        let released = secrets.get("logs-credentials").await.unwrap_or_else(|e| panic!("the kept key's Secret: {e}"));
        assert!(released.owner_references().is_empty(), "the kept key's Secret is still owned: the garbage collector would delete it");
        // A BlobStorage of the same name takes the bucket and key back;
        // emptied and deleted, the store's last bucket takes the store.
        let _: BlobStorage = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "logs"}, "spec": spec("logs-sec")})).await;
        complete(&blobs, "logs").await;
        let [_, _, key_again, ..] = bucket_secret(&secrets, "logs").await;
        assert_eq!(key_again, logs_id, "the new BlobStorage's Secret gives the kept key");
        logs.delete_object().bucket(&logs_bucket).key("kept").send().await.unwrap_or_else(|e| panic!("{e:?}"));
        blobs.delete("logs", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&blobs, "logs", START).await;
        let claims = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        wait_deleted(&deployments, "cro-object-store", DEFAULT_TIMEOUT).await;
        wait_deleted(&claims, "cro-object-store", DEFAULT_TIMEOUT).await;
        wait_deleted(&secrets, "cro-object-store-credentials", DEFAULT_TIMEOUT).await;
        wait_deleted(&secrets, "logs-credentials", DEFAULT_TIMEOUT).await;
    })
    .await;
}

/// What the store's gRPC port at `ip` (S3's port + 10000) answers a client
/// that trusts the store's CA (`ca`, PEM) and presents no certificate: the
/// error of its first read after the HTTP/2 preface.
async fn grpc_without_a_client_certificate(ip: &str, ca: &[u8]) -> String {
    use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca) {
        roots
            .add(cert.unwrap_or_else(|e| panic!("grpcCA: {e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| panic!("{e}"))
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect((ip, 18333))
        .await
        .unwrap_or_else(|e| panic!("connecting to {ip}:18333: {e}"));
    let name = ServerName::try_from("localhost").unwrap_or_else(|e| panic!("{e}"));
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let mut tls = match connector.connect(name, tcp).await {
        Ok(tls) => tls,
        Err(e) => return format!("handshake: {e}"),
    };
    if let Err(e) = tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await {
        return format!("writing: {e}");
    }
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf)).await {
        Ok(Ok(n)) => format!("read {n} bytes: the port served a client without a certificate"),
        Ok(Err(e)) => format!("reading: {e}"),
        Err(_) => "no answer within 10 s".to_string(),
    }
}

/// Speaks SMTP to `address` as an application does: EHLO, AUTH PLAIN with
/// `user` and `password`, one mail with `subject`; the first reply that is
/// not the one expected, as the server gave it.
async fn send_mail(address: &str, user: &str, password: &str, subject: &str) -> Result<(), String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| format!("connecting to {address}: {e}"))?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    // The last line of a reply ("250 ok" after "250-..." lines).
    async fn reply(
        lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    ) -> String {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) if line.as_bytes().get(3) == Some(&b'-') => continue,
                Ok(Some(line)) => return line,
                Ok(None) => return "the connection closed".into(),
                Err(e) => return format!("reading: {e}"),
            }
        }
    }
    let token = data_encoding::BASE64.encode(format!("\0{user}\0{password}").as_bytes());
    let steps = [
        (String::new(), "220"),
        ("EHLO client.test\r\n".to_string(), "250"),
        (format!("AUTH PLAIN {token}\r\n"), "235"),
        ("MAIL FROM:<app@example.com>\r\n".to_string(), "250"),
        ("RCPT TO:<someone@example.com>\r\n".to_string(), "250"),
        ("DATA\r\n".to_string(), "354"),
        (
            format!("Subject: {subject}\r\n\r\nsent with the Secret\r\n.\r\n"),
            "250",
        ),
    ];
    for (send, want) in steps {
        if !send.is_empty() {
            write
                .write_all(send.as_bytes())
                .await
                .map_err(|e| format!("writing: {e}"))?;
        }
        let got = reply(&mut lines).await;
        if !got.starts_with(want) {
            return Err(got);
        }
    }
    let _ = write.write_all(b"QUIT\r\n").await;
    Ok(())
}

/// The body of GET `path` on `address` (HTTP/1.0), with basic auth when
/// `login` is given; the status line and body.
async fn http_get(address: &str, path: &str, login: Option<(&str, &str)>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .unwrap_or_else(|e| panic!("connecting to {address}: {e}"));
    let auth = login
        .map(|(u, p)| {
            format!(
                "Authorization: Basic {}\r\n",
                data_encoding::BASE64.encode(format!("{u}:{p}").as_bytes())
            )
        })
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.0\r\nHost: mail\r\n{auth}\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    answer
}

/// An SMTPCredentialSet whose tier gives it a mail server of its own
/// (issue #60): the server really runs on the real node; its Secret sends a
/// mail through it, which a person reads in its API with the same login; a
/// wrong password and no login are refused. Then the tier relays to a
/// smarthost that asks for STARTTLS and a login from the operator
/// namespace: the next mail reaches the smarthost, the first one did not.
#[tokio::test]
async fn an_in_cluster_smtp_credential_set_with_a_server_of_its_own_sends_mail() {
    let _node = real_node();
    let dns = |l: &mut crate::support::Launch| l.wrapper = in_cluster_dns();
    with_operator_launched("mail-server", dns, |client, ns, _op| async move {
        place_on_real_node(&client, &ns).await;
        let tier = json!({"development": {"createStrategy": {"mailServer": "own"}}}).to_string();
        crate::support::apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", json!({"smtpcredentials": tier})).await;
        let _: SMTPCredentialSet = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "SMTPCredentialSet", "metadata": {"name": "mail"}, "spec": spec("mail-sec")})).await;
        let sets = Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns);
        wait_for(&sets, "mail", "phase complete", START, |o: Option<&SMTPCredentialSet>| o.and_then(|o| o.status.as_ref()?.phase) == Some(Phase::Complete)).await;
        // The operator logs in with the Secret, as an application does.
        wait_connected(&sets, "mail", DEFAULT_TIMEOUT).await;
        let pod = ready_pod(&client, &ns, "mail", None).await;
        let image = pod.spec.as_ref().and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
        assert_eq!(image.as_deref(), Some("docker.io/axllent/mailpit:v1.33.1"), "the default image");

        let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("mail-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let data = secret.data.unwrap_or_default();
        let get = |k: &str| data.get(k).map(|v| String::from_utf8_lossy(&v.0).into_owned()).unwrap_or_default();
        for key in ["host", "port", "username", "password", "tls"] {
            assert!(!get(key).is_empty(), "mail-sec's {key} is empty: complete promised a usable Secret");
        }
        assert_eq!((get("host"), get("port"), get("tls")), (format!("mail.{ns}.svc"), "1025".to_string(), "false".to_string()));
        // This process does not resolve cluster names: the Service's address.
        let service = Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &ns).get("mail").await.unwrap_or_else(|e| panic!("{e}"));
        let ip = service.spec.and_then(|s| s.cluster_ip).unwrap_or_else(|| panic!("Service mail has no cluster IP"));
        let address = format!("{ip}:{}", get("port"));
        let (user, password) = (get("username"), get("password"));

        let wrong = send_mail(&address, &user, "not-the-password", "refused").await;
        assert!(wrong.as_ref().is_err_and(|reply| reply.starts_with("535")), "a wrong password: {wrong:?}");
        send_mail(&address, &user, &password, "sent with the Secret").await.unwrap_or_else(|reply| panic!("sending with the Secret: {reply}"));
        // The operator's own check (lettre) tells the two apart against Mailpit.
        use cloud_resource_operator::connectivity::{Target, Trust, Verdict, check};
        let login = |password: &str| Target::Smtp { host: ip.clone(), port: 1025, user: user.clone(), password: password.to_string() };
        let refused = check(&login("not-the-password"), Duration::from_secs(10), &Trust::system(), None).await;
        assert!(matches!(&refused, Verdict::AuthenticationFailed(m) if m.contains("535")), "a wrong password: {refused:?}");
        let taken = check(&login(&password), Duration::from_secs(10), &Trust::system(), None).await;
        assert_eq!(taken, Verdict::Connected(String::new()), "the Secret's login");

        // What was sent is there for a person, behind the same login.
        let pod_ip = pod.status.and_then(|s| s.pod_ip).unwrap_or_else(|| panic!("mail's pod has no IP"));
        let api = format!("{pod_ip}:8025");
        let open = http_get(&api, "/api/v1/messages", None).await;
        assert!(open.starts_with("HTTP/1.0 401") || open.starts_with("HTTP/1.1 401"), "the API without a login: {open}");
        let listed = http_get(&api, "/api/v1/messages", Some((&user, &password))).await;
        assert!(listed.contains("sent with the Secret") && !listed.contains("\"refused\""), "the messages: {listed}");

        // The platform's smarthost: STARTTLS required, then a login.
        let smarthost = smarthost(&client, &ns).await;
        let login = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "smarthost-login"},
            "stringData": {"username": "relay", "password": smarthost.password, "ca.crt": smarthost.ca}});
        let _: Secret = create_json(&client, &ns, login).await;
        let relay = json!({"host": format!("smarthost.{ns}.svc"), "port": 1025, "credentialsSecret": "smarthost-login"});
        let tier = json!({"development": {"createStrategy": {"mailServer": "own", "mailRelay": relay}}}).to_string();
        crate::support::apply_config_map(&client, &ns, "cloud-resources-openshift-strategies", json!({"smtpcredentials": tier})).await;
        let old = pod.metadata.uid.as_deref();
        let relaying = ready_pod(&client, &ns, "mail", old).await;
        let text = serde_json::to_string(&relaying.spec).unwrap_or_default();
        assert!(text.contains("MP_SMTP_RELAY_HOST") && !text.contains(&smarthost.password), "the relay's pod names the login without holding it: {text}");
        wait_for(&sets, "mail", "phase complete", DEFAULT_TIMEOUT, |o: Option<&SMTPCredentialSet>| o.and_then(|o| o.status.as_ref()?.phase) == Some(Phase::Complete)).await;
        let relay_pod = relaying.status.and_then(|s| s.pod_ip).unwrap_or_else(|| panic!("mail's new pod has no IP"));
        // Mailpit answers the application only once the smarthost took it.
        send_mail(&format!("{relay_pod}:1025"), &user, &password, "relayed to the smarthost").await.unwrap_or_else(|reply| panic!("sending through the relay: {reply}"));
        let received = http_get(&smarthost.api, "/api/v1/messages", None).await;
        assert!(received.contains("\"Subject\":\"relayed to the smarthost\"") && received.contains("\"Username\":\"relay\""), "the smarthost's messages, sent with its login: {received}");
        assert!(!received.contains("\"Subject\":\"sent with the Secret\""), "a mail sent before the tier relayed reached the smarthost: {received}");
    })
    .await;
}

/// A smarthost as a platform runs one.
struct Smarthost {
    password: String,
    /// The CA its certificate chains to (PEM).
    ca: String,
    /// Its Mailpit API, `<pod IP>:8025`, open.
    api: String,
}

/// Runs Mailpit as `smarthost` in `ns`: it takes mail only over STARTTLS,
/// with a certificate for its Service's name, and only after AUTH as
/// `relay`.
async fn smarthost(client: &Client, ns: &str) -> Smarthost {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_pem = ca
        .self_signed(&ca_key)
        .unwrap_or_else(|e| panic!("{e}"))
        .pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
    let leaf = CertificateParams::new(vec![format!("smarthost.{ns}.svc")])
        .unwrap_or_else(|e| panic!("{e}"));
    let cert = leaf
        .signed_by(&key, &issuer)
        .unwrap_or_else(|e| panic!("{e}"))
        .pem();
    let password = format!("smarthost-{}", std::process::id());
    let tls = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "smarthost-tls"},
        "stringData": {"tls.crt": cert, "tls.key": key.serialize_pem()}});
    let _: Secret = create_json(client, ns, tls).await;
    let labels = json!({"app.kubernetes.io/instance": "smarthost"});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "smarthost"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "mailpit", "image": "docker.io/axllent/mailpit:v1.33.1",
                "command": ["/mailpit", "--smtp", "0.0.0.0:1025", "--listen", "0.0.0.0:8025", "--database", "/data/mailpit.db",
                    "--smtp-tls-cert", "/tls/tls.crt", "--smtp-tls-key", "/tls/tls.key", "--smtp-require-starttls"],
                "env": [{"name": "MP_SMTP_AUTH", "value": format!("relay:{password}")}],
                "readinessProbe": {"tcpSocket": {"port": 1025}, "periodSeconds": 2},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "tls", "mountPath": "/tls"}],
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tls", "secret": {"secretName": "smarthost-tls"}}]}}}});
    let _: Deployment = create_json(client, ns, deployment).await;
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "smarthost"},
        "spec": {"selector": labels, "ports": [{"name": "smtp", "port": 1025}]}});
    let _: k8s_openapi::api::core::v1::Service = create_json(client, ns, service).await;
    let pod = ready_pod(client, ns, "smarthost", None).await;
    let ip = pod
        .status
        .and_then(|s| s.pod_ip)
        .unwrap_or_else(|| panic!("the smarthost's pod has no IP"));
    Smarthost {
        password,
        ca: ca_pem,
        api: format!("{ip}:8025"),
    }
}
