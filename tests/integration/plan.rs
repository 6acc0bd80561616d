//! Plan before apply, drift in status, the `Plan` change policy and
//! adoption, on the real apiserver and the AWS emulator (issue 13).

use std::{collections::BTreeSet, path::Path, time::Duration};

use cloud_resource_operator::api::{Phase, Postgres, Redis, ResourceTypeStatus};
use k8s_openapi::api::{apps::v1::Deployment, rbac::v1::ClusterRoleBinding};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::{Value, json};

use crate::{
    aws::{aws_strategies_for, create_postgres, instance, rds, tags, up_to_date},
    support::{
        DEFAULT_TIMEOUT, TestEnv, audited_requests_of, aws_requests, cluster_admin_account,
        create_json, wait_deleted, wait_for, wait_phase, with_operator, with_operator_launched,
    },
};

/// Sets the aws postgres tiers (see [`postgres_tiers`]).
async fn set_tiers(client: &Client, ns: &str, classes: &[(&str, &str)], plan_policy: bool) {
    aws_strategies_for(client, ns, "postgres", postgres_tiers(classes, plan_policy)).await;
}

/// Creates Postgres CRs `(name, tier)` and waits until all are complete;
/// their cloud identifiers.
async fn complete_postgres(client: &Client, ns: &str, crs: &[(&str, &str)]) -> Vec<String> {
    for (name, tier) in crs {
        create_postgres(client, ns, name, json!({"tier": tier})).await;
    }
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns);
    let mut ids = Vec::new();
    for (name, _) in crs {
        ids.push(recorded_id(&wait_phase(&pgs, name, Phase::Complete).await));
    }
    ids
}

/// One tier per name, each an instance class that skips its final snapshot.
fn postgres_tiers(classes: &[(&str, &str)], plan_policy: bool) -> Value {
    let mut tiers = serde_json::Map::new();
    for (tier, class) in classes {
        let mut t = json!({
            "createStrategy": {"DBInstanceClass": class},
            "deleteStrategy": {"SkipFinalSnapshot": true}
        });
        if plan_policy {
            t["changePolicy"] = json!("Plan");
        }
        tiers.insert(tier.to_string(), t);
    }
    Value::Object(tiers)
}

fn condition(p: &Postgres, type_: &str) -> Option<(String, String, String)> {
    status_condition(p.status.as_ref(), type_)
}

/// What to wait for: the CR's condition `type_` is there and `holds` of its
/// status, reason and message.
fn condition_is(
    type_: &'static str,
    holds: impl Fn(&str, &str, &str) -> bool + Copy,
) -> impl Fn(Option<&Postgres>) -> bool + Copy {
    move |o| {
        o.and_then(|p| condition(p, type_))
            .is_some_and(|(s, r, m)| holds(&s, &r, &m))
    }
}

fn status_condition(
    status: Option<&ResourceTypeStatus>,
    type_: &str,
) -> Option<(String, String, String)> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn recorded_id(p: &Postgres) -> String {
    p.annotations()
        .get("resourceIdentifier")
        .cloned()
        .unwrap_or_else(|| panic!("{} has no resourceIdentifier", p.name_any()))
}

async fn annotate(api: &Api<Postgres>, name: &str, key: &str, value: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("annotating {name}: {e}"));
}

fn is_read_only(action: &str) -> bool {
    ["Describe", "List", "Get"]
        .iter()
        .any(|p| action.starts_with(p))
}

/// The calls moto served after `since` (unix seconds) that mention `ids`.
fn aws_calls_on(ids: &[String], since: f64) -> Vec<String> {
    aws_requests()
        .into_iter()
        .filter(|r| r["time"].as_f64().unwrap_or_default() >= since)
        .filter(|r| {
            let params = r["params"].to_string();
            ids.iter().any(|id| params.contains(id.as_str()))
        })
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// `cloud-resource-operator plan` as a user runs it: its exit code and
/// output.
async fn run_plan(kubeconfig: &Path, args: &[&str]) -> (i32, String, String) {
    let env = TestEnv::load();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_cloud-resource-operator"))
        .arg("plan")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("AWS_ENDPOINT_URL", &env.aws_endpoint_url)
        .env("AWS_REGION", &env.aws_region)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .output()
        .await
        .unwrap_or_else(|e| panic!("running plan: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn plan_of_an_edited_tier_lists_exactly_the_affected_fields_and_writes_nothing() {
    // As a new user runs it: no --cluster-id anywhere, so the operator
    // and plan both derive it from the cluster.
    with_operator_launched("plan", |l| l.cluster_id = None, |client, ns, _op| async move {
        set_tiers(&client, &ns, &[("development", "db.t3.micro"), ("production", "db.t3.micro")], false).await;
        let redis: Redis = create_json(&client, &ns, json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
            "metadata": {"name": "cache"},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "cache-sec"}}
        }))
        .await;
        let ids = complete_postgres(&client, &ns, &[("dev-a", "development"), ("dev-b", "development"), ("prod", "production")]).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_for(&Api::<Deployment>::namespaced(client.clone(), &ns), &redis.name_any(), "Redis Deployment", DEFAULT_TIMEOUT, |d: Option<&Deployment>| d.is_some()).await;

        // Production's database is to be kept if deleted: the plan says so.
        let retain = json!({"metadata": {"annotations": {"integreatly.org/deletion-policy": "retain"}}});
        pgs.patch("prod", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&retain))
            .await
            .unwrap_or_else(|e| panic!("{e}"));

        let (kubeconfig, user) = cluster_admin_account(&client, &ns, "planner").await;
        let base = ["--operator-namespace", &ns, "--namespaces", &ns];

        // The cluster as it is: nothing to do.
        let (code, stdout, stderr) = run_plan(&kubeconfig, &base).await;
        assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");

        // The edit: development gets a larger class, and in-cluster Redis
        // a newer image. Production is untouched.
        let edit = std::env::temp_dir().join(format!("{ns}-edit.yaml"));
        let aws = postgres_tiers(&[("development", "db.t3.small"), ("production", "db.t3.micro")], false);
        let image = json!({"development": {"strategy": {"deploymentSpec": {"template": {"spec": {"containers": [{"name": "redis", "image": "docker.io/library/redis:7.2"}]}}}}}});
        std::fs::write(&edit, format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloud-resources-aws-strategies\ndata:\n  postgres: '{aws}'\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloud-resources-openshift-strategies\n  namespace: {ns}\ndata:\n  redis: '{image}'\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let since = now();
        let config = edit.to_string_lossy().into_owned();
        let (code, stdout, stderr) = run_plan(&kubeconfig, &[&base[..], &["--config", &config, "-o", "json"]].concat()).await;
        let until = now();
        assert_eq!(code, 2, "{stdout}\n{stderr}");
        let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        let lines: BTreeSet<(String, String, String, String, String)> = plan["changes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
                (format!("{} {}", s("kind"), s("name")), s("field"), s("current"), s("desired"), s("when"))
            })
            .collect();
        let pg = |name: &str| (format!("Postgres {name}"), "DBInstanceClass".to_string(), "db.t3.micro".to_string(), "db.t3.small".to_string(), "maintenanceWindow".to_string());
        let want = BTreeSet::from([
            pg("dev-a"),
            pg("dev-b"),
            (
                "Redis cache".to_string(),
                "Deployment.spec.template.spec.containers[redis].image".to_string(),
                "docker.io/library/redis:7".to_string(),
                "docker.io/library/redis:7.2".to_string(),
                "now".to_string(),
            ),
        ]);
        assert_eq!(lines, want, "{stdout}");
        assert_eq!(plan["errors"], json!([]));
        let kept = json!([{"kind": "Postgres", "namespace": ns, "name": "prod", "by": "annotation"}]);
        assert_eq!(plan["retained"], kept, "{stdout}");

        // The text form: one line per field, as documented.
        let (code, text, summary) = run_plan(&kubeconfig, &[&base[..], &["--config", &config]].concat()).await;
        assert_eq!(code, 2);
        assert!(summary.contains(&format!("retain: deleting Postgres {ns}/prod leaves its cloud resource")), "{summary}");
        assert!(text.lines().any(|l| l == format!("Postgres {ns}/dev-a DBInstanceClass: db.t3.micro -> db.t3.small (maintenanceWindow, restarts)")), "{text}");

        // Read-only: AWS saw reads of our instances and nothing else, the
        // apiserver saw gets and lists and nothing else, and nothing changed.
        // Its reads: our instances, one by one or in a page of all.
        let reads = aws_requests()
            .into_iter()
            .filter(|r| r["time"].as_f64().is_some_and(|t| t >= since && t <= until) && r["action"] == "DescribeDBInstances")
            .filter(|r| r["params"].get("DBInstanceIdentifier").is_none() || ids.iter().any(|id| r["params"].to_string().contains(id.as_str())))
            .count();
        assert!(reads >= 1, "plan read no instance");
        let writes: Vec<_> = aws_calls_on(&ids, since).into_iter().filter(|a| !is_read_only(a)).collect();
        assert!(writes.is_empty(), "plan called AWS to write: {writes:?} (between {since} and {until})");
        let requests = audited_requests_of(&user);
        assert!(requests.iter().any(|r| r.verb == "list" && r.resource == "postgres"), "{requests:?}");
        let kube_writes: Vec<_> = requests.iter().filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch")).collect();
        assert!(kube_writes.is_empty(), "plan wrote to Kubernetes: {kube_writes:?}");
        for name in ["dev-a", "dev-b"] {
            let p = pgs.get(name).await.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(up_to_date(&p).map(|(s, _)| s).as_deref(), Some("True"), "the plan applied something to {name}");
        }

        // A mistake in the edit is an error naming where it is, exit 1.
        std::fs::write(&edit, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cloud-resources-aws-strategies\ndata:\n  postgres: '{\"development\": {\"changePolicy\": \"plan\"}, \"production\": {}}'\n").unwrap_or_else(|e| panic!("{e}"));
        let (code, _, stderr) = run_plan(&kubeconfig, &[&base[..], &["--config", &config]].concat()).await;
        assert_eq!(code, 1, "{stderr}");
        assert!(stderr.contains(&format!("Postgres {ns}/dev-a")) && stderr.contains("changePolicy") && stderr.contains("cloud-resources-aws-strategies"), "{stderr}");
        let _ = std::fs::remove_file(&edit);
        Api::<ClusterRoleBinding>::all(client.clone()).delete(&format!("planner-{ns}"), &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
    })
    .await;
}

#[tokio::test]
async fn a_plan_tier_changes_one_database_once_its_hash_is_approved() {
    with_operator("plantier", |client, ns, _op| async move {
        set_tiers(&client, &ns, &[("gated", "db.t3.micro")], true).await;
        let ids = complete_postgres(&client, &ns, &[("one", "gated"), ("two", "gated")]).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let rds = rds().await;
        let class = |id: String| {
            let rds = rds.clone();
            async move {
                instance(&rds, &id)
                    .await
                    .and_then(|d| d.db_instance_class().map(str::to_string))
                    .unwrap_or_default()
            }
        };

        // The tier changes; with a Plan policy nothing is applied, and
        // each CR shows what would change and the hash that approves it.
        let since = now();
        set_tiers(&client, &ns, &[("gated", "db.t3.small")], true).await;
        let awaiting = condition_is("UpToDate", |s, r, _| {
            s == "False" && r == "AwaitingApproval"
        });
        let one = wait_for(
            &pgs,
            "one",
            "plan awaiting approval",
            DEFAULT_TIMEOUT,
            awaiting,
        )
        .await;
        wait_for(
            &pgs,
            "two",
            "plan awaiting approval",
            DEFAULT_TIMEOUT,
            awaiting,
        )
        .await;
        let status = one.status.clone().unwrap_or_default();
        let hash = status
            .plan_hash
            .clone()
            .unwrap_or_else(|| panic!("no planHash: {status:?}"));
        assert_eq!(
            status
                .pending_changes
                .iter()
                .map(|c| (c.field.as_str(), c.current.as_str(), c.desired.as_str()))
                .collect::<Vec<_>>(),
            [("DBInstanceClass", "db.t3.micro", "db.t3.small")]
        );
        assert!(
            condition(&one, "UpToDate").is_some_and(
                |(_, _, m)| m.contains(&format!("integreatly.org/approve-plan={hash}"))
            )
        );

        // A stale hash applies nothing and says so.
        annotate(&pgs, "one", "integreatly.org/approve-plan", "0123456789").await;
        wait_for(
            &pgs,
            "one",
            "stale approval reported",
            DEFAULT_TIMEOUT,
            condition_is("UpToDate", |_, r, m| {
                r == "StaleApproval" && m.contains("nothing was applied")
            }),
        )
        .await;
        assert_eq!(class(ids[0].clone()).await, "db.t3.micro");

        // The right hash applies the plan to that one database only.
        annotate(&pgs, "one", "integreatly.org/approve-plan", &hash).await;
        wait_for(
            &pgs,
            "one",
            "approved plan applied",
            DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| {
                o.is_some_and(|p| {
                    p.status.as_ref().and_then(|s| s.phase) == Some(Phase::Complete)
                        && condition(p, "UpToDate").is_some_and(|(s, _, _)| s == "True")
                })
            },
        )
        .await;
        assert_eq!(class(ids[0].clone()).await, "db.t3.small");
        assert_eq!(
            class(ids[1].clone()).await,
            "db.t3.micro",
            "the other database changed without approval"
        );
        let modified_two = aws_calls_on(&ids[1..], since)
            .into_iter()
            .filter(|a| a == "ModifyDBInstance")
            .count();
        assert_eq!(modified_two, 0);
        let two = pgs.get("two").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            condition(&two, "UpToDate")
                .is_some_and(|(s, r, _)| s == "False" && r == "AwaitingApproval")
        );
    })
    .await;
}

/// A Plan tier that pins its database's identifier (DBInstanceIdentifier,
/// honoured as the Go operator did): the hash in status is the one the
/// provider checks, so approving it applies the change.
#[tokio::test]
async fn an_approved_plan_applies_under_an_identifier_the_tier_pins() {
    with_operator("planpin", |client, ns, _op| async move {
        let pinned = format!("pinned-{ns}");
        let tier = |class: &str| {
            json!({"gated": {
                "changePolicy": "Plan",
                "createStrategy": {"DBInstanceClass": class, "DBInstanceIdentifier": pinned},
                "deleteStrategy": {"SkipFinalSnapshot": true}
            }})
        };
        aws_strategies_for(&client, &ns, "postgres", tier("db.t3.micro")).await;
        let ids = complete_postgres(&client, &ns, &[("db", "gated")]).await;
        assert_eq!(
            ids,
            [pinned.as_str()],
            "the tier's identifier is used as given"
        );
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);

        aws_strategies_for(&client, &ns, "postgres", tier("db.t3.small")).await;
        let awaiting = wait_for(
            &pgs,
            "db",
            "plan awaiting approval",
            DEFAULT_TIMEOUT,
            condition_is("UpToDate", |s, r, _| {
                s == "False" && r == "AwaitingApproval"
            }),
        )
        .await;
        let hash = (awaiting.status.as_ref().and_then(|s| s.plan_hash.clone()))
            .unwrap_or_else(|| panic!("no planHash: {:?}", awaiting.status));
        annotate(&pgs, "db", "integreatly.org/approve-plan", &hash).await;
        wait_for(
            &pgs,
            "db",
            "approved plan applied",
            DEFAULT_TIMEOUT,
            condition_is("UpToDate", |s, _, _| s == "True"),
        )
        .await;
        let rds = rds().await;
        let class = instance(&rds, &pinned)
            .await
            .and_then(|d| d.db_instance_class().map(str::to_string));
        assert_eq!(class.as_deref(), Some("db.t3.small"));
    })
    .await;
}

#[tokio::test]
async fn an_untagged_instance_is_neither_changed_nor_deleted_until_adopted() {
    with_operator("adopt", |client, ns, _op| async move {
        set_tiers(&client, &ns, &[("development", "db.t3.micro")], false).await;
        // Someone made an instance under the identifier the CR will use.
        let id = cro_provider_api::cloud_identifier("testcluster", &ns, "db");
        let rds = rds().await;
        rds.create_db_instance()
            .db_instance_identifier(&id)
            .db_instance_class("db.t3.small")
            .engine("postgres")
            .allocated_storage(20)
            .master_username("someone")
            .master_user_password("someone-elses-password")
            .tags(
                aws_sdk_rds::types::Tag::builder()
                    .key("team")
                    .value("billing")
                    .build(),
            )
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let arn = instance(&rds, &id)
            .await
            .and_then(|d| d.db_instance_arn().map(str::to_string))
            .unwrap_or_default();
        let since = now();

        create_postgres(&client, &ns, "db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let pg = wait_for(
            &pgs,
            "db",
            "adoption awaited",
            DEFAULT_TIMEOUT,
            condition_is("Adopted", |s, _, _| s == "False"),
        )
        .await;
        let (_, reason, message) = condition(&pg, "Adopted").unwrap_or_default();
        let hash = pg
            .status
            .as_ref()
            .and_then(|s| s.adoption_hash.clone())
            .unwrap_or_else(|| panic!("no adoptionHash: {:?}", pg.status));
        assert_eq!(reason, "AwaitingAdoption");
        assert!(
            message.contains("DBInstanceClass db.t3.small -> db.t3.micro")
                && message.contains("tag integreatly.org/clusterID absent -> testcluster")
                && message.contains(&hash),
            "{message}"
        );
        assert_eq!(
            pg.status.as_ref().and_then(|s| s.phase),
            Some(Phase::Failed)
        );

        // Deleting the CR leaves the instance alone.
        pgs.delete("db", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
        let untouched = instance(&rds, &id)
            .await
            .unwrap_or_else(|| panic!("the unadopted instance {id} was deleted"));
        assert_eq!(untouched.db_instance_class(), Some("db.t3.small"));
        assert!(
            !tags(&rds, &arn)
                .await
                .contains_key("integreatly.org/clusterID")
        );
        let writes: Vec<_> = aws_calls_on(std::slice::from_ref(&id), since)
            .into_iter()
            .filter(|a| !is_read_only(a))
            .collect();
        assert!(
            writes.is_empty(),
            "an unadopted instance was written to: {writes:?}"
        );

        // A person adopts it by its hash: tagged, then the tier applies
        // under its (automatic) policy: the class waits for a window.
        create_postgres(&client, &ns, "db", json!({})).await;
        let pg = wait_for(
            &pgs,
            "db",
            "adoption awaited again",
            DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| {
                o.and_then(|p| p.status.as_ref()?.adoption_hash.clone())
                    .is_some()
            },
        )
        .await;
        assert_eq!(
            pg.status.as_ref().and_then(|s| s.adoption_hash.clone()),
            Some(hash.clone()),
            "the same resource and tier give the same hash"
        );
        annotate(&pgs, "db", "integreatly.org/adopt", &hash).await;
        let pg = wait_phase(&pgs, "db", Phase::Complete).await;
        assert!(
            condition(&pg, "Adopted").is_some_and(|(s, _, _)| s == "True"),
            "{:?}",
            pg.status
        );
        assert!(
            up_to_date(&pg).is_some_and(|(s, m)| s == "False"
                && m.contains("DBInstanceClass db.t3.small -> db.t3.micro (maintenanceWindow)")),
            "{:?}",
            pg.status
        );
        assert_eq!(
            tags(&rds, &arn)
                .await
                .get("integreatly.org/clusterID")
                .map(String::as_str),
            Some("testcluster")
        );
        assert_eq!(recorded_id(&pg), id);
    })
    .await;
}

#[tokio::test]
async fn an_out_of_band_change_shows_within_one_recheck() {
    // Nothing pokes the CR: only the recheck can see the change.
    with_operator_launched(
        "recheck",
        |l| l.extra_args.push("--recheck-interval=3".into()),
        |client, ns, _op| async move {
            set_tiers(&client, &ns, &[("development", "db.t3.micro")], false).await;
            let id = complete_postgres(&client, &ns, &[("db", "development")])
                .await
                .remove(0);
            let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
            rds()
                .await
                .modify_db_instance()
                .db_instance_identifier(&id)
                .db_instance_class("db.m5.large")
                .apply_immediately(true)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e:?}"));
            let pg = wait_for(
                &pgs,
                "db",
                "drift seen by the recheck",
                Duration::from_secs(30),
                |o: Option<&Postgres>| o.and_then(up_to_date).is_some_and(|(s, _)| s == "False"),
            )
            .await;
            let pending = pg.status.map(|s| s.pending_changes).unwrap_or_default();
            assert_eq!(
                pending
                    .iter()
                    .map(|c| (
                        c.field.as_str(),
                        c.current.as_str(),
                        c.desired.as_str(),
                        c.restarts
                    ))
                    .collect::<Vec<_>>(),
                [("DBInstanceClass", "db.m5.large", "db.t3.micro", true)]
            );
        },
    )
    .await;
}

#[tokio::test]
async fn an_in_cluster_plan_tier_waits_for_approval_too() {
    with_operator("planic", |client, ns, _op| async move {
        let strategies = |tier: Value| {
            let client = client.clone();
            let ns = ns.clone();
            async move {
                let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cloud-resources-openshift-strategies"},
                    "data": {"redis": json!({"gated": tier}).to_string()}
                }))
                .unwrap_or_else(|e| panic!("{e}"));
                crate::support::apply(&Api::namespaced(client, &ns), &cm).await.unwrap_or_else(|e| panic!("{e}"));
            }
        };
        strategies(json!({"changePolicy": "Plan"})).await;
        let _: Redis = create_json(&client, &ns, json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
            "metadata": {"name": "cache"},
            "spec": {"type": "workshop", "tier": "gated", "secretRef": {"name": "cache-sec"}}
        }))
        .await;
        let redises = Api::<Redis>::namespaced(client.clone(), &ns);
        wait_phase(&redises, "cache", Phase::Complete).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let image = |d: &Deployment| {
            d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|p| p.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default()
        };

        strategies(json!({"changePolicy": "Plan", "strategy": {"deploymentSpec": {"template": {"spec": {"containers": [{"name": "redis", "image": "docker.io/library/redis:7.2"}]}}}}})).await;
        let r = wait_for(&redises, "cache", "plan awaiting approval", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            status_condition(o.and_then(|r| r.status.as_ref()), "UpToDate").is_some_and(|(_, r, _)| r == "AwaitingApproval")
        })
        .await;
        let status = r.status.clone().unwrap_or_default();
        assert_eq!(status.pending_changes.iter().map(|c| (c.field.as_str(), c.desired.as_str(), c.restarts)).collect::<Vec<_>>(), [("Deployment.spec.template.spec.containers[redis].image", "docker.io/library/redis:7.2", true)]);
        let live = deployments.get("cache").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(image(&live), "docker.io/library/redis:7", "changed before approval");

        let hash = status.plan_hash.unwrap_or_default();
        redises.patch("cache", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"integreatly.org/approve-plan": hash}}}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&deployments, "cache", "approved image rolled out", DEFAULT_TIMEOUT, |d: Option<&Deployment>| d.is_some_and(|d| image(d) == "docker.io/library/redis:7.2")).await;
        wait_for(&redises, "cache", "up to date", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            status_condition(o.and_then(|r| r.status.as_ref()), "UpToDate").is_some_and(|(s, _, _)| s == "True")
        })
        .await;

        // Deleting is a change too: the workload and its data stay until
        // the deletion's own hash is approved.
        redises.delete("cache", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let waiting = wait_for(&redises, "cache", "deletion awaiting approval", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            o.and_then(|r| r.status.as_ref()).is_some_and(|s| s.phase == Some(Phase::DeleteInProgress) && s.message.as_deref().is_some_and(|m| m.contains("integreatly.org/approve-plan=")))
        })
        .await;
        let message = waiting.status.unwrap_or_default().message.unwrap_or_default();
        let hash = message.split("integreatly.org/approve-plan=").nth(1).and_then(|r| r.split(',').next()).unwrap_or_default().to_string();
        assert_eq!(hash.len(), 10, "{message}");
        // The earlier plan's approval is still on the CR and approves
        // nothing here.
        assert!(deployments.get_opt("cache").await.unwrap_or_else(|e| panic!("{e}")).is_some(), "deleted before approval");
        redises.patch("cache", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"integreatly.org/approve-plan": hash}}}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&redises, "cache", DEFAULT_TIMEOUT).await;
        wait_deleted(&deployments, "cache", DEFAULT_TIMEOUT).await;
    })
    .await;
}
