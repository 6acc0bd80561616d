//! In-cluster Postgres and Redis on the test environment's real node
//! (kubelet, containerd, runc; images built from Debian's packages under
//! the names the default tiers use): their containers really start, their
//! probes really pass, a client pod connects with the Secret, the data
//! outlives the pod, and the operator's `Connectable` check, resolving
//! names as a pod does, logs in.

use std::time::Duration;

use cloud_resource_operator::api::{Phase, Postgres, Redis};
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
    DEFAULT_TIMEOUT, connectable, create_json, in_cluster_dns, place_on_real_node, real_node,
    wait_for, with_operator_launched,
};

/// Containers start for real: image unpacked, initdb, probes every 10 s.
const START: Duration = Duration::from_secs(180);

fn spec(secret: &str) -> Value {
    json!({"type": "workshop", "tier": "development", "secretRef": {"name": secret}})
}

/// The Secret's keys as a client pod's environment.
fn env_from(secret: &str, keys: &[(&str, &str)]) -> Value {
    let vars: Vec<Value> = keys
        .iter()
        .map(|(var, key)| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": true}}}))
        .collect();
    json!(vars)
}

/// Runs `script` in a client pod (psql, redis-cli) with `env`; whether it
/// succeeded, and its output.
async fn run_client(
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
async fn ready_pod(client: &Client, ns: &str, instance: &str, not: Option<&str>) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let selector = format!("app.kubernetes.io/instance={instance}");
    let deadline = tokio::time::Instant::now() + START;
    loop {
        let list = pods
            .list(&ListParams::default().labels(&selector))
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
        let complete = |p: Option<Phase>| p == Some(Phase::Complete);
        wait_for(&pgs, "db", "phase complete", START, move |o: Option<&Postgres>| complete(o.and_then(|o| o.status.as_ref()?.phase))).await;
        wait_for(&caches, "cache", "phase complete", START, move |o: Option<&Redis>| complete(o.and_then(|o| o.status.as_ref()?.phase))).await;

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
        let want = Some(("True".to_string(), "Connected".to_string()));
        let w = want.clone();
        wait_for(&pgs, "db", "Connectable True", DEFAULT_TIMEOUT, move |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == w
        })
        .await;
        wait_for(&caches, "cache", "Connectable True", DEFAULT_TIMEOUT, move |o: Option<&Redis>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == want
        })
        .await;

        // An application pod connects with the Secret and writes.
        let pg_env = env_from("db-sec", &[("PGHOST", "host"), ("PGPORT", "port"), ("PGUSER", "username"), ("PGPASSWORD", "password"), ("PGDATABASE", "database")]);
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
        let (ok, log) = run_client(&client, &ns, "pg-read", pg_env, "test \"$(psql -tA -c 'SELECT v FROM kept')\" = 'before the restart'").await;
        assert!(ok, "the row written before the pod was replaced: {log}");
        let (ok, log) = run_client(&client, &ns, "redis-read", redis_env, "test \"$(redis-cli -h \"$HOST\" -p \"$PORT\" GET kept)\" = 'before the restart'").await;
        assert!(ok, "the key written before the pod was replaced: {log}");
    })
    .await;
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
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"}, "spec": spec("db-sec")})).await;
        let _: Redis = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"}, "spec": spec("cache-sec")})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let caches = Api::<Redis>::namespaced(client.clone(), &ns);
        let want = Some(("True".to_string(), "Connected".to_string()));
        let w = want.clone();
        wait_for(&pgs, "db", "complete and Connectable", START, move |o: Option<&Postgres>| {
            let s = o.and_then(|o| o.status.as_ref());
            s.and_then(|s| s.phase) == Some(Phase::Complete) && s.and_then(|s| connectable(&s.conditions)) == w
        })
        .await;
        wait_for(&caches, "cache", "complete and Connectable", START, move |o: Option<&Redis>| {
            let s = o.and_then(|o| o.status.as_ref());
            s.and_then(|s| s.phase) == Some(Phase::Complete) && s.and_then(|s| connectable(&s.conditions)) == want
        })
        .await;
        for name in ["db", "cache"] {
            let pod = ready_pod(&client, &ns, name, None).await;
            let context = pod.spec.and_then(|s| s.security_context).unwrap_or_default();
            assert_eq!(context.run_as_user, Some(1000680000), "{name}: {context:?}");
            assert_eq!(context.fs_group, Some(1000680000), "{name}: {context:?}");
        }
        let pg_env = env_from("db-sec", &[("PGHOST", "host"), ("PGPORT", "port"), ("PGUSER", "username"), ("PGPASSWORD", "password"), ("PGDATABASE", "database")]);
        let (ok, log) = run_client(&client, &ns, "pg-write", pg_env, "psql -v ON_ERROR_STOP=1 -c 'CREATE TABLE t (v text)' -c \"INSERT INTO t VALUES ('x')\"").await;
        assert!(ok, "psql with the Secret's credentials: {log}");
    })
    .await;
}
