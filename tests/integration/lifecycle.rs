//! A database's life after creation (issue 14): scheduled snapshots, and
//! rotation and restore through kills.

use std::{collections::BTreeSet, time::Duration};

use cloud_resource_operator::{
    api::{BlobStorage, Phase, Postgres, PostgresSnapshot},
    controllers::schedule::{PERIOD_LABEL, SCHEDULED_FOR_LABEL},
};
use cro_provider_api::cloud_identifier;
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use serde_json::json;

use crate::{
    aws::create_postgres,
    support::{
        DEFAULT_TIMEOUT, Launch, Operator, TestEnv, apply_config_map, aws_requests, create_json,
        ensure_crds, passwords_set, wait_deleted, wait_for, wait_phase, with_namespace,
        with_operator,
    },
};

#[tokio::test]
async fn scheduled_snapshots_keep_to_the_retention_through_a_kill() {
    with_namespace("schedule", |client, ns| async move {
        ensure_crds(&client).await;
        let mut operator = Operator::launch(Launch::new(&ns)).await;
        create_postgres(
            &client,
            &ns,
            "db",
            json!({"snapshotFrequency": "1m", "snapshotRetention": "3m"}),
        )
        .await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let db = wait_phase(&pgs, "db", Phase::Complete).await;
        let uid = db.metadata.uid.clone().unwrap_or_default();
        let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        let scheduled = ListParams::default().labels(&format!("{SCHEDULED_FOR_LABEL}={uid}"));

        // Five minutes, looked at every second; the operator is SIGKILLed
        // and started again half way.
        let start = tokio::time::Instant::now();
        let mut periods = BTreeSet::new();
        let mut killed = false;
        let mut held = 0;
        while start.elapsed() < Duration::from_secs(300) {
            let list = snaps
                .list(&scheduled)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            held = list.items.len();
            assert!(
                held <= 3,
                "{held} scheduled snapshots held with a three-minute retention: {:?}",
                list.items.iter().map(|s| s.name_any()).collect::<Vec<_>>()
            );
            for s in &list.items {
                let period = s
                    .labels()
                    .get(PERIOD_LABEL)
                    .cloned()
                    .unwrap_or_else(|| panic!("{} has no period label", s.name_any()));
                periods.insert((period, s.name_any()));
            }
            if !killed && start.elapsed() > Duration::from_secs(150) {
                operator.kill().await;
                operator = Operator::launch(Launch::new(&ns)).await;
                killed = true;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert!(
            (2..=3).contains(&held),
            "{held} scheduled snapshots after five minutes"
        );
        // One snapshot per period, one period per minute: five or six seen.
        let distinct: BTreeSet<_> = periods.iter().map(|(p, _)| p.clone()).collect();
        assert_eq!(
            distinct.len(),
            periods.len(),
            "two snapshots for one period: {periods:?}"
        );
        assert!(
            (5..=6).contains(&periods.len()),
            "{} periods in five minutes: {periods:?}",
            periods.len()
        );
        // The ones kept are complete snapshots.
        for s in snaps
            .list(&scheduled)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items
        {
            if s.metadata.deletion_timestamp.is_none() {
                wait_phase(&snaps, &s.name_any(), Phase::Complete).await;
            }
        }

        pgs.delete("db", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while !snaps
            .list(&scheduled)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items
            .is_empty()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "scheduled snapshots left after their Postgres"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        drop(operator);
    })
    .await;
}

/// The calls after which a kill is most harmful: a key created but not
/// yet stored, a password being set, a clone being restored.
fn risky_step(r: &serde_json::Value, user: &str, db: &str, clone: &str) -> Option<&'static str> {
    let params = r["params"].to_string();
    match r["action"].as_str()? {
        "CreateAccessKey" if params.contains(user) => Some("key"),
        "ModifyDBInstance" if params.contains(db) && params.contains("MasterUserPassword") => {
            Some("password")
        }
        "RestoreDBInstanceFromDBSnapshot" if params.contains(clone) => Some("restore"),
        _ => None,
    }
}

#[tokio::test]
async fn rotation_and_restore_survive_a_kill_at_their_riskiest_step() {
    with_namespace("killsafe", |client, ns| async move {
        ensure_crds(&client).await;
        let tiers = json!({
            "postgres": json!({"development": {}}).to_string(),
            "blobstorage": json!({"development": {"credentialRotationGrace": "0"}}).to_string(),
        });
        apply_config_map(&client, &ns, "cloud-resources-aws-strategies", tiers).await;
        let mut operator = Operator::launch(Launch::new(&ns)).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        create_postgres(&client, &ns, "db", json!({})).await;
        let _: BlobStorage = create_json(&client, &ns, json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "files"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "files-sec"}}
        }))
        .await;
        wait_phase(&pgs, "db", Phase::Complete).await;
        wait_phase(&blobs, "files", Phase::Complete).await;
        let _: PostgresSnapshot = create_json(&client, &ns, json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot", "metadata": {"name": "snap"},
            "spec": {"resourceName": "db"}
        }))
        .await;
        wait_for(&snaps, "snap", "snapshot complete", DEFAULT_TIMEOUT, |o: Option<&PostgresSnapshot>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;

        let (user, db, clone) = (cloud_identifier("testcluster", &ns, "files"), cloud_identifier("testcluster", &ns, "db"), cloud_identifier("testcluster", &ns, "clone"));
        let seen_before = aws_requests().len();
        let rotate = json!({"metadata": {"annotations": {"integreatly.org/rotate-credentials": "1"}}});
        pgs.patch("db", &PatchParams::default(), &Patch::Merge(&rotate)).await.unwrap_or_else(|e| panic!("{e}"));
        blobs.patch("files", &PatchParams::default(), &Patch::Merge(&rotate)).await.unwrap_or_else(|e| panic!("{e}"));
        create_postgres(&client, &ns, "clone", json!({"restoreFromSnapshot": "snap"})).await;

        // SIGKILL right after each risky call (once per kind of step), and
        // start again.
        let mut killed_after = BTreeSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while killed_after.len() < 3 && tokio::time::Instant::now() < deadline {
            let requests = aws_requests();
            let step = requests[seen_before.min(requests.len())..].iter().filter_map(|r| risky_step(r, &user, &db, &clone)).find(|s| !killed_after.contains(s));
            match step {
                Some(step) => {
                    operator.kill().await;
                    killed_after.insert(step);
                    operator = Operator::launch(Launch::new(&ns)).await;
                }
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
        assert_eq!(killed_after.len(), 3, "not every risky step was seen: killed after {killed_after:?}");

        // Finished after the kills, with nothing lost or left over.
        let answered = |requested: Option<String>| requested.as_deref() == Some("1");
        wait_for(&pgs, "db", "rotation recorded", DEFAULT_TIMEOUT * 2, move |o: Option<&Postgres>| answered(o.and_then(|o| o.status.as_ref()?.credentials_rotation.as_ref()?.requested.clone()))).await;
        wait_for(&blobs, "files", "rotation recorded", DEFAULT_TIMEOUT * 2, move |o: Option<&BlobStorage>| answered(o.and_then(|o| o.status.as_ref()?.credentials_rotation.as_ref()?.requested.clone()))).await;
        wait_phase(&pgs, "clone", Phase::Complete).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let value = |s: Secret, k: &str| s.data.and_then(|d| d.get(k).map(|v| String::from_utf8_lossy(&v.0).into_owned())).unwrap_or_default();
        for (name, id) in [("db", &db), ("clone", &clone)] {
            let password = value(secrets.get(&format!("{name}-sec")).await.unwrap_or_else(|e| panic!("{e}")), "password");
            assert_eq!(passwords_set(id).last(), Some(&password), "{name}: the published password is not the instance's");
        }
        let restores = aws_requests().iter().filter(|r| r["action"] == "RestoreDBInstanceFromDBSnapshot" && r["params"].to_string().contains(&clone)).count();
        assert_eq!(restores, 1, "the clone was restored more than once");
        let published = value(secrets.get("files-sec").await.unwrap_or_else(|e| panic!("{e}")), "credentialKeyID");
        let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        loop {
            let keys: Vec<String> = iam.list_access_keys().user_name(&user).send().await.unwrap_or_else(|e| panic!("{e:?}"))
                .access_key_metadata().iter().filter_map(|k| k.access_key_id().map(str::to_string)).collect();
            if keys == vec![published.clone()] {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "keys {keys:?}, published {published}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        // Deleted with the operator running: nothing left behind.
        for name in ["clone", "db"] {
            pgs.delete(name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        blobs.delete("files", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        snaps.delete("snap", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        for name in ["clone", "db"] {
            wait_deleted(&pgs, name, DEFAULT_TIMEOUT * 2).await;
        }
        wait_deleted(&blobs, "files", DEFAULT_TIMEOUT).await;
        wait_deleted(&snaps, "snap", DEFAULT_TIMEOUT).await;
        operator.stop().await;
    })
    .await;
}

/// Deleting a namespace with CRs of every kind inside, on AWS and in the
/// cluster (issue #62), as a team tearing down an environment does: the
/// operator, configured from its own namespace, deletes what each CR made
/// (its finalizer holds the namespace meanwhile), the namespace goes within
/// minutes, and nothing of it is left in AWS.
#[tokio::test]
async fn deleting_a_namespace_with_every_kind_inside_leaves_nothing_behind() {
    crate::support::bounded("deleting_a_namespace_with_every_kind_inside_leaves_nothing_behind", async move {
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let operator_ns = crate::support::create_namespace(&client, "nsdel-op").await;
    let ns = crate::support::create_namespace(&client, "nsdel").await;
    let tiers = json!({"development": {"deleteStrategy": {"SkipFinalSnapshot": true}}}).to_string();
    let plain = json!({"development": {}}).to_string();
    apply_config_map(
        &client,
        &operator_ns,
        "cloud-resources-aws-strategies",
        json!({"postgres": tiers, "redis": plain.clone(), "blobstorage": plain}),
    )
    .await;
    let mut launch = Launch::new(&ns);
    launch.operator_namespace = Some(operator_ns.clone());
    let operator = Operator::launch(launch).await;
    let cr = |kind: &str, name: &str, type_: &str| {
        json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
            "spec": {"type": type_, "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
    };
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "aws-db", "managed")).await;
    let _: BlobStorage =
        create_json(&client, &ns, cr("BlobStorage", "aws-bucket", "managed")).await;
    let _: Postgres = create_json(&client, &ns, cr("Postgres", "local-db", "workshop")).await;
    let _: cloud_resource_operator::api::Redis =
        create_json(&client, &ns, cr("Redis", "local-cache", "workshop")).await;
    let _: BlobStorage =
        create_json(&client, &ns, cr("BlobStorage", "local-bucket", "workshop")).await;
    let _: cloud_resource_operator::api::SMTPCredentialSet = create_json(
        &client,
        &ns,
        cr("SMTPCredentialSet", "local-mail", "workshop"),
    )
    .await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
    let recorded = |meta: &kube::api::ObjectMeta| -> String {
        let id = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get("resourceIdentifier"));
        id.cloned()
            .unwrap_or_else(|| panic!("{:?} recorded no identifier", meta.name))
    };
    let db_id = recorded(&wait_phase(&pgs, "aws-db", Phase::Complete).await.metadata);
    let bucket_id = recorded(
        &wait_phase(&blobs, "aws-bucket", Phase::Complete)
            .await
            .metadata,
    );
    wait_phase(&pgs, "local-db", Phase::Complete).await;
    wait_phase(&blobs, "local-bucket", Phase::Complete).await;
    let _: PostgresSnapshot = create_json(
        &client,
        &ns,
        json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
        "metadata": {"name": "aws-db-snap"}, "spec": {"resourceName": "aws-db"}}),
    )
    .await;
    let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
    let snap = wait_phase(&snaps, "aws-db-snap", Phase::Complete).await;
    let snap_id = snap
        .status
        .and_then(|s| s.snapshot_id)
        .unwrap_or_else(|| panic!("aws-db-snap has no snapshotID"));

    // The namespace is deleted with everything in it.
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&namespaces, &ns, Duration::from_secs(300)).await;

    // Nothing of it is left in AWS.
    let rds = crate::aws::rds().await;
    let left = crate::aws::instance(&rds, &db_id)
        .await
        .map(|i| i.db_instance_status().unwrap_or_default().to_string());
    assert!(
        matches!(left.as_deref(), None | Some("deleting")),
        "RDS instance {db_id} left: {left:?}"
    );
    let snapshot = rds
        .describe_db_snapshots()
        .db_snapshot_identifier(&snap_id)
        .send()
        .await;
    let kept: Vec<_> = snapshot
        .map(|o| o.db_snapshots().to_vec())
        .unwrap_or_default();
    assert!(kept.is_empty(), "snapshot {snap_id} left: {kept:?}");
    let s3 = TestEnv::load().s3().await;
    assert!(
        s3.head_bucket().bucket(&bucket_id).send().await.is_err(),
        "bucket {bucket_id} left"
    );
    let _ = namespaces
        .delete(&operator_ns, &DeleteParams::default())
        .await;
    operator.stop().await;
}).await;
}

/// Another operator's admission webhook that never answers (issue #62):
/// a ValidatingWebhookConfiguration, `failurePolicy: Fail`, for every
/// Secret of the namespace, pointing at a listener that takes the
/// connection and says nothing. The API server refuses each Secret write
/// after the webhook's timeout; a BlobStorage meanwhile waits (never
/// `failed`, never `complete` without its Secret) and says which webhook
/// refuses it; with the webhook gone it completes by itself, its Secret
/// whole.
#[tokio::test]
async fn a_webhook_that_never_answers_holds_a_cr_back_and_fails_nothing() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    crate::support::with_operator("webhook", |client, ns, op| async move {
        // Takes every connection and holds it, unanswered.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
        let held = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let config_name = format!("cro-test-hung-{ns}");
        let hook = format!("hung.{ns}.cro-test.example.com");
        let configs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
        let config: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": config_name},
            "webhooks": [{
                "name": hook,
                "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate")},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"], "timeoutSeconds": 2,
            }]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        configs.create(&Default::default(), &config).await.unwrap_or_else(|e| panic!("{e}"));
        let outcome = tokio::spawn({
            let (client, ns, hook, op) = (client.clone(), ns.clone(), hook.clone(), op.clone());
            async move { held_back_then_complete(&client, &ns, &hook, &op).await }
        })
        .await;
        // Whatever happened, the webhook goes: it is cluster-wide.
        let _ = configs.delete(&config_name, &Default::default()).await;
        held.abort();
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    })
    .await;
}

async fn held_back_then_complete(client: &kube::Client, ns: &str, hook: &str, op: &Operator) {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    // Positive control: the webhook is in force for this namespace (the
    // API server reads new configurations within a second or so).
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        let probe: Secret = serde_json::from_value(json!({"metadata": {"generateName": "probe-"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        match secrets.create(&Default::default(), &probe).await {
            Err(e) if e.to_string().contains(hook) => break,
            Err(e) => panic!("a Secret write refused for another reason: {e}"),
            Ok(s) => {
                let _ = secrets
                    .delete(&s.name_any(), &DeleteParams::default())
                    .await;
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the webhook never came into force"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), ns);
    let _: BlobStorage = create_json(
        client,
        ns,
        json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
            "metadata": {"name": "held"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "held-sec"}}
        }),
    )
    .await;
    let held = wait_for(
        &blobs,
        "held",
        "a message naming the webhook",
        DEFAULT_TIMEOUT,
        |b: Option<&BlobStorage>| {
            b.and_then(|b| b.status.as_ref())
                .is_some_and(|s| s.message.as_deref().is_some_and(|m| m.contains(hook)))
        },
    )
    .await;
    let phase = held.status.as_ref().and_then(|s| s.phase);
    eprintln!(
        "held back: {:?}",
        held.status.as_ref().and_then(|s| s.message.as_deref())
    );
    assert_eq!(phase, Some(Phase::InProgress), "{:?}", held.status);
    let message = held
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("kubectl get validatingwebhookconfigurations"),
        "no advice: {message}"
    );
    assert!(
        secrets
            .get_opt("held-sec")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none(),
        "a Secret got past the webhook"
    );

    // Another operator's webhook fixed (here: removed).
    let configs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    configs
        .delete(&format!("cro-test-hung-{ns}"), &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The refusals came a few seconds apart: the backoff is under a minute.
    wait_for(
        &blobs,
        "held",
        "complete",
        Duration::from_secs(180),
        |b: Option<&BlobStorage>| b.and_then(|b| b.status.as_ref()?.phase) == Some(Phase::Complete),
    )
    .await;
    let secret = secrets
        .get("held-sec")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let data = secret.data.unwrap_or_default();
    for key in [
        "bucketName",
        "bucketRegion",
        "credentialKeyID",
        "credentialSecretKey",
    ] {
        assert!(
            data.get(key).is_some_and(|v| !v.0.is_empty()),
            "{key} empty or missing in {:?}",
            data.keys()
        );
    }
    let failed = crate::support::failed_events(client, ns).await;
    assert!(failed.is_empty(), "Failed Events: {failed:?}");
    let logs = op.logs();
    assert!(
        logs.contains(hook),
        "the operator's log does not name the webhook"
    );
}

/// A node drained under an in-cluster Postgres (issue #62): its pod is
/// evicted and the new one cannot be scheduled. The CR stops promising a
/// usable database (`in progress`) and says why in the scheduler's words,
/// and is `complete` again by itself once the node is back. The node is
/// a kwok node of this test's own, tainted so no other test's pod lands
/// on it.
#[tokio::test]
async fn a_drained_node_is_named_in_the_status_and_the_database_comes_back() {
    use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
    // Deleted only once the namespace is gone: a pod on a node that went
    // first is stuck terminating until the pod garbage collector acts.
    let node = format!("drain-{}", std::process::id());
    let _guard = OwnNode(node.clone());
    with_operator("drain", |client, ns, _op| async move {
        let taint = json!({"key": "cro-testenv/drain", "value": node, "effect": "NoSchedule"});
        let nodes = Api::<Node>::all(client.clone());
        let kwok = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node,
            "labels": {"type": "kwok", "kubernetes.io/hostname": node, "kubernetes.io/os": "linux"},
            "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [taint]}});
        nodes.create(&Default::default(), &serde_json::from_value(kwok).unwrap_or_else(|e| panic!("{e}"))).await.unwrap_or_else(|e| panic!("creating node {node}: {e}"));
        wait_for(&nodes, &node, "Ready (kwok)", DEFAULT_TIMEOUT, |n: Option<&Node>| {
            (n.and_then(|n| n.status.as_ref()?.conditions.clone()).unwrap_or_default()).iter().any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .await;
        let place = json!({"metadata": {"annotations": {
            "scheduler.alpha.kubernetes.io/node-selector": format!("kubernetes.io/hostname={node}"),
            "scheduler.alpha.kubernetes.io/defaultTolerations": json!([{"key": "cro-testenv/drain", "operator": "Exists", "effect": "NoSchedule"}]).to_string(),
        }}});
        Api::<Namespace>::all(client.clone()).patch(&ns, &PatchParams::default(), &Patch::Merge(&place)).await.unwrap_or_else(|e| panic!("{e}"));

        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;

        // kubectl drain: cordon, then evict.
        let cordon = |unschedulable: bool| json!({"spec": {"unschedulable": unschedulable}});
        nodes.patch(&node, &PatchParams::default(), &Patch::Merge(&cordon(true))).await.unwrap_or_else(|e| panic!("{e}"));
        let pods = Api::<Pod>::namespaced(client.clone(), &ns);
        let selector = ListParams::default().labels("app.kubernetes.io/instance=db");
        let running = pods.list(&selector).await.unwrap_or_else(|e| panic!("{e}")).items;
        assert_eq!(running.len(), 1, "one pod of db before the drain");
        assert_eq!(running[0].spec.as_ref().and_then(|s| s.node_name.as_deref()), Some(node.as_str()), "db runs on the test's node");
        pods.evict(&running[0].name_any(), &Default::default()).await.unwrap_or_else(|e| panic!("evicting db's pod: {e}"));
        let held = wait_for(&pgs, "db", "in progress, naming the unschedulable node", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            let s = o.and_then(|o| o.status.as_ref());
            s.and_then(|s| s.phase) == Some(Phase::InProgress) && s.and_then(|s| s.message.as_deref()).is_some_and(|m| m.contains("cannot be scheduled"))
        })
        .await;
        let message = held.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains("Deployment db") && message.contains("unschedulable"), "{message}");

        nodes.patch(&node, &PatchParams::default(), &Patch::Merge(&cordon(false))).await.unwrap_or_else(|e| panic!("{e}"));
        let back = wait_phase(&pgs, "db", Phase::Complete).await;
        assert!(!back.status.and_then(|s| s.message).unwrap_or_default().contains("cannot be scheduled"));
    })
    .await;
}

/// Deletes the test's own node however the test ends.
struct OwnNode(String);

impl Drop for OwnNode {
    fn drop(&mut self) {
        let env = TestEnv::load();
        let _ = std::process::Command::new(&env.kubectl)
            .args([
                "delete",
                "node",
                &self.0,
                "--ignore-not-found",
                "--wait=false",
            ])
            .env("KUBECONFIG", &env.kubeconfig)
            .output();
    }
}
