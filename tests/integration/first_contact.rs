//! A new user's first contact, with defaults: no `--cluster-id` (the
//! cluster ID comes from the `kube-system` UID), AWS errors that need a
//! person stop the CR and say why, transient ones heal, and a tier can run
//! its calls in another AWS account through an assumed role.

use std::collections::BTreeMap;

use cloud_resource_operator::{
    api::{Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot},
    providers::cluster_id::from_kube_system_uid,
};
use cro_provider_api::{IdentifierRules, cloud_identifier};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, Phased, aws_actions_mentioning, aws_requests, create_json,
    create_namespace, events_in, inject_aws_fault, wait_phase, with_operator,
    with_operator_launched,
};

async fn aws_strategies(client: &Client, ns: &str, data: Value) {
    let data: BTreeMap<String, String> = data
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cloud-resources-aws-strategies"}, "data": data
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .patch(
            "cloud-resources-aws-strategies",
            &PatchParams::apply("cro-tests").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap_or_else(|e| panic!("applying aws strategies: {e}"));
}

fn managed(kind: &str, name: &str, tier: &str) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"type": "managed", "tier": tier, "secretRef": {"name": format!("{name}-sec")}}})
}

fn snapshot(kind: &str, name: &str, of: &str) -> Value {
    json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"resourceName": of}})
}

#[tokio::test]
async fn without_a_cluster_id_every_aws_kind_and_snapshot_completes() {
    with_operator_launched(
        "firstcontact",
        |launch| launch.cluster_id = None,
        |client, ns, _op| async move {
            let uid = Api::<Namespace>::all(client.clone())
                .get("kube-system")
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .uid()
                .unwrap_or_default();
            let cluster_id = from_kube_system_uid(&uid);
            create_json::<Postgres>(&client, &ns, managed("Postgres", "db", "development")).await;
            create_json::<Redis>(&client, &ns, managed("Redis", "cache", "development")).await;
            let pg = wait_phase(
                &Api::<Postgres>::namespaced(client.clone(), &ns),
                "db",
                Phase::Complete,
            )
            .await;
            let redis = wait_phase(
                &Api::<Redis>::namespaced(client.clone(), &ns),
                "cache",
                Phase::Complete,
            )
            .await;
            for (id, rules, name) in [
                (
                    pg.annotations().get("resourceIdentifier").cloned(),
                    IdentifierRules::RdsInstance,
                    "db",
                ),
                (
                    redis.annotations().get("resourceIdentifier").cloned(),
                    IdentifierRules::ElastiCacheReplicationGroup,
                    "cache",
                ),
            ] {
                let id = id.unwrap_or_else(|| panic!("{name}: no resourceIdentifier"));
                assert_eq!(
                    id,
                    cloud_identifier(&cluster_id, &ns, name),
                    "the cluster ID is k + 8 hex of the kube-system UID"
                );
                assert_eq!(rules.check(&id), Ok(()), "{id}");
            }
            create_json::<PostgresSnapshot>(
                &client,
                &ns,
                snapshot("PostgresSnapshot", "db-snap", "db"),
            )
            .await;
            create_json::<RedisSnapshot>(
                &client,
                &ns,
                snapshot("RedisSnapshot", "cache-snap", "cache"),
            )
            .await;
            let s = wait_phase(
                &Api::<PostgresSnapshot>::namespaced(client.clone(), &ns),
                "db-snap",
                Phase::Complete,
            )
            .await;
            let id = s.status.and_then(|s| s.snapshot_id).unwrap_or_default();
            assert_eq!(IdentifierRules::RdsSnapshot.check(&id), Ok(()), "{id}");
            let s = wait_phase(
                &Api::<RedisSnapshot>::namespaced(client.clone(), &ns),
                "cache-snap",
                Phase::Complete,
            )
            .await;
            let id = s.status.and_then(|s| s.snapshot_id).unwrap_or_default();
            assert_eq!(
                IdentifierRules::ElastiCacheSnapshot.check(&id),
                Ok(()),
                "{id}"
            );
        },
    )
    .await;
}

#[tokio::test]
async fn a_cluster_id_aws_cannot_accept_is_refused_at_start() {
    crate::support::bounded(
        "a_cluster_id_aws_cannot_accept_is_refused_at_start",
        async move {
            let client = crate::support::TestEnv::load().client().await;
            let ns = create_namespace(&client, "badclusterid").await;
            let mut op = Operator::launch(Launch {
                cluster_id: Some("9lives".into()),
                ..Launch::new(&ns)
            })
            .await;
            let status = op.wait_exit(DEFAULT_TIMEOUT).await;
            assert!(!status.success());
            let log = op.logs();
            assert!(
                log.contains("--cluster-id (CLUSTER_ID)") && log.contains("must be a letter"),
                "{log}"
            );
            let _ = Api::<Namespace>::all(client)
                .delete(&ns, &Default::default())
                .await;
        },
    )
    .await;
}

/// How many Warning Events an object has had, counting each series' repeats.
async fn warnings(client: &Client, ns: &str, name: &str) -> i32 {
    (events_in(client, ns).await.iter())
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| e.series.as_ref().and_then(|s| s.count).unwrap_or(1))
        .sum()
}

/// Every Event of `ns`, a line each, for a failure message.
async fn events_of(client: &Client, ns: &str) -> Vec<String> {
    (events_in(client, ns).await.iter())
        .map(|e| {
            let field = |v: &Option<String>| v.clone().unwrap_or_default();
            let count = e.series.as_ref().and_then(|s| s.count).unwrap_or(1);
            format!(
                "{} {} {} x{count}: {}",
                field(&e.involved_object.name),
                field(&e.type_),
                field(&e.reason),
                field(&e.message)
            )
        })
        .collect()
}

#[tokio::test]
async fn errors_that_need_a_person_stop_and_transient_ones_heal() {
    with_operator("awserrors", |client, ns, op| async move {
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let id = |name: &str| cloud_identifier("testcluster", &ns, name);
        // AWS refuses a parameter combination, every time.
        inject_aws_fault(
            &format!("{ns}-perm"),
            "rds",
            "CreateDBInstance",
            &id("perm"),
            (
                "InvalidParameterCombination",
                400,
                "storage type gp3 needs at least 20 GiB",
            ),
            None,
        );
        // AWS has a bad minute, then a throttled one.
        inject_aws_fault(
            &format!("{ns}-flaky"),
            "rds",
            "CreateDBInstance",
            &id("flaky"),
            ("InternalFailure", 500, "internal error"),
            Some(2),
        );
        inject_aws_fault(
            &format!("{ns}-busy"),
            "rds",
            "CreateDBInstance",
            &id("busy"),
            ("Throttling", 400, "Rate exceeded"),
            Some(2),
        );
        for name in ["perm", "flaky", "busy"] {
            create_json::<Postgres>(&client, &ns, managed("Postgres", name, "development")).await;
        }

        let failed = wait_phase(&pgs, "perm", Phase::Failed).await;
        let message = failed.message();
        assert!(
            message.contains("InvalidParameterCombination")
                && message.contains("storage type gp3")
                && message.contains("fix the tier's createStrategy")
                && message.contains("cloud-resources-aws-strategies"),
            "{message}"
        );
        wait_phase(&pgs, "flaky", Phase::Complete).await;
        wait_phase(&pgs, "busy", Phase::Complete).await;
        let creates = |name: &str| {
            aws_actions_mentioning(&id(name))
                .iter()
                .filter(|a| *a == "CreateDBInstance")
                .count()
        };
        assert_eq!(creates("flaky"), 3, "two server errors, then success");
        assert_eq!(creates("busy"), 3, "two throttled calls, then success");
        let metrics = op.http_get("/metrics").await;
        let throttled: u64 = metrics
            .lines()
            .filter(|l| {
                l.starts_with("cro_aws_api_calls_total")
                    && l.contains("outcome=\"throttled\"")
                    && l.contains("CreateDBInstance")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        assert!(throttled >= 2, "{metrics}");
        assert_eq!(
            warnings(&client, &ns, "busy").await,
            0,
            "throttling is no reason for a Warning: {:#?}",
            events_of(&client, &ns).await
        );

        // The permanent failure is not retried on its own, and its Warning
        // is one Event. A change to the CR is tried again (still failing).
        assert_eq!(creates("perm"), 1, "a permanent error was retried");
        assert_eq!(
            warnings(&client, &ns, "perm").await,
            1,
            "{:#?}",
            events_of(&client, &ns).await
        );
        pgs.patch(
            "perm",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"applyImmediately": true}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_for(
            &pgs,
            "perm",
            "generation 2 observed",
            DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| {
                o.and_then(|o| o.status.as_ref())
                    .and_then(|s| s.observed_generation)
                    == Some(2)
            },
        )
        .await;
        assert_eq!(creates("perm"), 2);
        assert_eq!(
            wait_phase(&pgs, "perm", Phase::Failed).await.phase(),
            Some(Phase::Failed)
        );
    })
    .await;
}

#[tokio::test]
async fn a_tier_can_run_in_another_account_through_a_role() {
    with_operator("roles", |client, ns, op| async move {
        let role = "arn:aws:iam::222233334444:role/cro-production";
        let denied = format!("arn:aws:iam::555566667777:role/cro-{ns}-denied");
        aws_strategies(
            &client,
            &ns,
            json!({"postgres": {
                // A tier in another account brings its own network: the
                // cluster's VPC is in the cluster's account.
                "production": {"roleArn": role, "externalId": "platform-team",
                               "createStrategy": {"VpcSecurityGroupIds": ["sg-0platformteam"]}},
                "locked": {"roleArn": denied}
            }}),
        )
        .await;
        inject_aws_fault(
            &format!("{ns}-denied"),
            "sts",
            "AssumeRole",
            &denied,
            (
                "AccessDenied",
                403,
                "not authorized to perform sts:AssumeRole",
            ),
            None,
        );
        create_json::<Postgres>(&client, &ns, managed("Postgres", "db", "production")).await;
        create_json::<Postgres>(&client, &ns, managed("Postgres", "locked", "locked")).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;

        let id = cloud_identifier("testcluster", &ns, "db");
        let requests = aws_requests();
        let create = requests
            .iter()
            .find(|r| r["action"] == "CreateDBInstance" && r["params"].to_string().contains(&id))
            .unwrap_or_else(|| panic!("no CreateDBInstance for {id}"));
        assert_eq!(
            create["account"], "222233334444",
            "created in the role's account: {create}"
        );
        let assumed = requests
            .iter()
            .find(|r| r["action"] == "AssumeRole" && r["params"].to_string().contains(role))
            .unwrap_or_else(|| panic!("the role was never assumed"));
        assert!(
            assumed["params"].to_string().contains("platform-team"),
            "externalId not passed: {assumed}"
        );

        // The role by name, its account hidden (anyone who may read the CR
        // reads its status); the operator's log keeps the whole ARN.
        let locked = wait_phase(&pgs, "locked", Phase::Failed).await;
        let shown = format!("arn:aws:iam::<account>:role/cro-{ns}-denied");
        assert!(
            locked.message().contains(&shown)
                && locked.message().contains("trust policy")
                && !locked.message().contains("555566667777"),
            "{}",
            locked.message()
        );
        assert!(op.logs().contains(&denied), "the log lacks {denied}");
    })
    .await;
}

/// `make run`'s quick start, as a new user meets it: the shipped
/// configuration ConfigMaps, no `--cluster-id`, and both sample sets
/// (in-cluster and AWS, snapshots included) applied at once in ten fresh
/// namespaces: every sample reaches `complete` (but the in-cluster
/// BlobStorage, whose store kwok never starts: it stays `in progress`
/// naming the store, never a hollow `complete`), a snapshot reconciled
/// before its database has an instance included (it waits, it does not
/// fail).
#[tokio::test]
async fn the_quick_start_samples_all_complete() {
    use crate::foundation::{api_for, objects_in};
    let client = crate::support::TestEnv::load().client().await;
    let mut others = Vec::new();
    for _ in 0..9 {
        others.push(create_namespace(&client, "quickstart").await);
    }
    let watched = others.join(",");
    with_operator_launched(
        "quickstart",
        |launch| {
            launch.cluster_id = None;
            launch
                .extra_args
                .push(format!("--watch-namespaces={watched}"));
        },
        |client, ns, _op| async move {
            for (file, cm) in objects_in("config") {
                let cm: ConfigMap =
                    serde_json::from_value(serde_json::to_value(&cm).unwrap_or_default())
                        .unwrap_or_else(|e| panic!("{file}: {e}"));
                crate::support::apply(&Api::<ConfigMap>::namespaced(client.clone(), &ns), &cm)
                    .await
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
            }
            let mut samples = objects_in("config/samples");
            samples.extend(objects_in("config/samples/aws"));
            assert!(samples.len() >= 10, "{samples:?}");
            let namespaces: Vec<String> = std::iter::once(ns).chain(others).collect();
            // As `kubectl apply -f config/samples/ -f config/samples/aws/`
            // in every namespace, all at once.
            let applies = namespaces.iter().map(|ns| {
                let (client, samples) = (client.clone(), &samples);
                async move {
                    for (file, obj) in samples {
                        api_for(&client, ns, obj)
                            .create(&Default::default(), obj)
                            .await
                            .unwrap_or_else(|e| panic!("{ns}: {file}: {e}"));
                    }
                }
            });
            futures::future::join_all(applies).await;
            for ns in &namespaces {
                for (_, obj) in &samples {
                    let name = obj.name_any();
                    // Its store runs on kwok here, which starts no
                    // container: the bucket cannot be made, so it is not
                    // complete (real_node.rs has it complete).
                    let hollow = obj.types.as_ref().is_some_and(|t| t.kind == "BlobStorage")
                        && obj.data["spec"]["type"] == "workshop";
                    let store = format!("store http://{name}.{ns}.svc:8333");
                    let what = match hollow {
                        true => "in progress, naming its store",
                        false => "phase complete",
                    };
                    let reached = move |o: &kube::api::DynamicObject| {
                        let status = &o.data["status"];
                        match hollow {
                            true => {
                                status["phase"] == "in progress"
                                    && (status["message"].as_str())
                                        .is_some_and(|m| m.contains(&store))
                            }
                            false => status["phase"] == "complete",
                        }
                    };
                    crate::support::wait_for(
                        &api_for(&client, ns, obj),
                        &name,
                        what,
                        DEFAULT_TIMEOUT * 3,
                        |o: Option<&kube::api::DynamicObject>| o.is_some_and(&reached),
                    )
                    .await;
                }
                let failed = crate::support::failed_events(&client, ns).await;
                assert!(
                    failed.is_empty(),
                    "{ns}: samples went failed on the way: {failed:#?}"
                );
            }
            // The other namespaces go while the operator still runs, so
            // their finalizers are honoured.
            let all: Api<Namespace> = Api::all(client.clone());
            for ns in &namespaces[1..] {
                all.delete(ns, &Default::default())
                    .await
                    .unwrap_or_else(|e| panic!("deleting {ns}: {e}"));
            }
            for ns in &namespaces[1..] {
                crate::support::wait_deleted(&all, ns, DEFAULT_TIMEOUT * 3).await;
            }
        },
    )
    .await;
}

/// `tests/testenv/install-deps.sh` as `make run` calls it, run by user
/// `nobody` with `PATH` holding only stand-ins for `tools` and `id` (this
/// machine has a kubectl of its own): its exit code, its stderr and the
/// commands the stand-ins ran.
fn install_deps_as_nobody(mode: &str, tools: &[&str]) -> (i32, String, String) {
    let dir = std::env::temp_dir().join(format!("cro-deps-{}-{mode}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let ran = dir.join("ran");
    std::fs::write(&ran, "").unwrap_or_else(|e| panic!("{e}"));
    // Stand-ins that note they ran: what installs must never be called.
    for tool in ["sudo", "apt-get"].iter().chain(tools) {
        let script = format!("#!/bin/sh\necho {tool} \"$@\" >> '{}'\n", ran.display());
        let path = dir.join(tool);
        std::fs::write(&path, script).unwrap_or_else(|e| panic!("{e}"));
        std::process::Command::new("chmod")
            .args(["-R", "a+rwx"])
            .arg(&dir)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let script = crate::support::repo_root().join("tests/testenv/install-deps.sh");
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--",
            "/bin/bash",
        ])
        .arg(&script)
        .arg(mode)
        .env_clear()
        .env("PATH", &dir)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        ran,
    )
}

/// `make run` against a cluster of the user's own needs no root and
/// installs nothing; without one, a user who is not root is told what
/// needs root before anything is installed (issue #64).
#[test]
fn make_run_against_an_existing_cluster_needs_no_root_and_installs_nothing() {
    let (code, said, ran) =
        install_deps_as_nobody("--existing-cluster", &["cargo", "cc", "kubectl"]);
    assert_eq!((code, ran.as_str()), (0, ""), "stderr: {said}");
    // Without kubectl it says what to do, and still installs nothing.
    let (code, said, ran) = install_deps_as_nobody("--existing-cluster", &["cargo", "cc"]);
    assert_eq!((code, ran.as_str()), (1, ""));
    assert!(
        said.contains("kubectl is required") && said.contains("PATH"),
        "{said}"
    );
    // The local environment, as a user who is not root: refused before
    // any sudo or apt-get, naming what needs root and the way around it.
    let (code, said, ran) =
        install_deps_as_nobody("--local-environment", &["cargo", "cc", "kubectl"]);
    assert_eq!((code, ran.as_str()), (1, ""), "stderr: {said}");
    assert!(
        said.contains("needs root") && said.contains("KUBECONFIG"),
        "{said}"
    );
}
