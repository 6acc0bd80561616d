//! The aws provider through the operator binary, against the moto AWS
//! emulator with the real aws-sdk clients.

use std::collections::BTreeMap;

use cloud_resource_operator::api::{Phase, Postgres};
use cro_provider_api::{IdentifierRules, cloud_identifier};
use k8s_openapi::api::core::v1::Secret;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use crate::support::{
    DEFAULT_TIMEOUT, Phased, TestEnv, apply_config_map, aws_actions_mentioning, aws_requests,
    aws_requests_after, passwords_set, wait_deleted, wait_for, wait_phase, with_operator,
};

async fn aws_strategies(client: &Client, ns: &str, postgres_tiers: Value) {
    aws_strategies_for(client, ns, "postgres", postgres_tiers).await;
}

pub(crate) async fn aws_strategies_for(client: &Client, ns: &str, key: &str, tiers: Value) {
    let data = json!({key: tiers.to_string()});
    apply_config_map(client, ns, "cloud-resources-aws-strategies", data).await;
}

pub(crate) async fn create_postgres(client: &Client, ns: &str, name: &str, extra: Value) {
    let mut spec = json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let pg: Postgres = serde_json::from_value(json!({
        "apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
        "metadata": {"name": name, "labels": {"productName": "orders"}}, "spec": spec
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Postgres>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pg)
        .await
        .unwrap_or_else(|e| panic!("creating Postgres {name}: {e}"));
}

/// Any metadata change makes the operator look again.
pub(crate) async fn poke(api: &Api<Postgres>, name: &str, n: u32) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/poke": n.to_string()}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

pub(crate) async fn rds() -> aws_sdk_rds::Client {
    aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await)
}

pub(crate) async fn instance(
    rds: &aws_sdk_rds::Client,
    id: &str,
) -> Option<aws_sdk_rds::types::DbInstance> {
    rds.describe_db_instances()
        .db_instance_identifier(id)
        .send()
        .await
        .ok()
        .and_then(|o| o.db_instances().first().cloned())
}

pub(crate) async fn tags(rds: &aws_sdk_rds::Client, arn: &str) -> BTreeMap<String, String> {
    rds.list_tags_for_resource()
        .resource_name(arn)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"))
        .tag_list()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_string(),
                t.value().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The tags DESIGN §4 asks for, as the test operator is configured.
fn want_tags(name: &str) -> BTreeMap<String, String> {
    [
        ("clusterID", "testcluster"),
        ("resource-type", "managed"),
        ("resource-name", name),
        ("product-name", "orders"),
    ]
    .into_iter()
    .map(|(k, v)| (format!("integreatly.org/{k}"), v.to_string()))
    .collect()
}

/// The final snapshot identifier of a CR being deleted: the Go operator's
/// `<clusterID>-<namespace>-<name>-<unix time>`, here the deletion's time.
async fn final_snapshot_id<K>(api: &Api<K>, ns: &str, name: &str) -> String
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let obj = api.get(name).await.unwrap_or_else(|e| panic!("{e}"));
    let deleted = obj
        .meta()
        .deletion_timestamp
        .clone()
        .unwrap_or_else(|| panic!("{name} is not being deleted"));
    cro_provider_api::timestamped_identifier(
        "testcluster",
        ns,
        name,
        &deleted.0.as_second().to_string(),
    )
}

#[tokio::test]
async fn postgres_on_rds_from_create_to_final_snapshot() {
    with_operator("rds", |client, ns, _op| async move {
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"dbinstanceclass": "db.t3.micro", "AllocatedStorage": 30}}})).await;
        create_postgres(&client, &ns, "orders-db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_for(&pgs, "orders-db", "in progress while creating", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| o.message().contains("is creating"))
        })
        .await;
        let pg = wait_phase(&pgs, "orders-db", Phase::Complete).await;

        let id = cloud_identifier("testcluster", &ns, "orders-db");
        assert_eq!(pg.annotations().get("resourceIdentifier"), Some(&id));
        assert_eq!(pg.status.as_ref().and_then(|s| s.provider.as_deref()), Some("aws-rds"));
        let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("orders-db-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let data: BTreeMap<String, String> = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
        assert_eq!(data.keys().cloned().collect::<Vec<_>>(), ["database", "host", "password", "port", "username"]);
        assert_eq!(data["password"].len(), 32);
        assert!(!data["host"].is_empty());

        let rds = rds().await;
        let db = instance(&rds, &id).await.unwrap_or_else(|| panic!("no RDS instance {id}"));
        assert_eq!(db.db_instance_class(), Some("db.t3.micro"));
        assert_eq!(db.allocated_storage(), Some(30));
        assert_eq!(db.storage_encrypted(), Some(true));
        assert_eq!(db.deletion_protection(), Some(true));
        assert_eq!(db.publicly_accessible(), Some(false));
        let have = tags(&rds, db.db_instance_arn().unwrap_or_default()).await;
        for (k, v) in want_tags("orders-db") {
            assert_eq!(have.get(&k), Some(&v), "tag {k} on {id}: {have:?}");
        }

        pgs.delete("orders-db", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let final_id = final_snapshot_id(&pgs, &ns, "orders-db").await;
        wait_deleted(&pgs, "orders-db", DEFAULT_TIMEOUT).await;
        assert!(instance(&rds, &id).await.is_none(), "RDS instance {id} still exists");
        let snap = rds.describe_db_snapshots().db_snapshot_identifier(&final_id).send().await.unwrap_or_else(|e| panic!("final snapshot {final_id}: {e:?}"));
        let arn = snap.db_snapshots().first().and_then(|s| s.db_snapshot_arn()).unwrap_or_default().to_string();
        let have = tags(&rds, &arn).await;
        assert_eq!(have.get("integreatly.org/clusterID").map(String::as_str), Some("testcluster"), "{have:?}");
        assert!(Api::<Secret>::namespaced(client.clone(), &ns).get_opt("orders-db-aws-rds-credentials").await.unwrap_or_else(|e| panic!("{e}")).is_none());
    })
    .await;
}

/// A mistaken delete loses nothing (issue #59): a Postgres annotated
/// `integreatly.org/deletion-policy: retain` is released in seconds; its
/// RDS instance stays, deletion protection and tags kept, with no AWS write
/// naming it; its Secrets stay, and a Postgres of the same name takes the
/// instance over again with the same password, creating nothing.
#[tokio::test]
async fn a_postgres_deleted_under_the_retain_policy_keeps_its_instance_for_the_next_cr() {
    with_operator("rdsretain", |client, ns, _op| async move {
        create_postgres(&client, &ns, "keep", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "keep", Phase::Complete).await;
        let id = cloud_identifier("testcluster", &ns, "keep");
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let password = |s: Secret| {
            String::from_utf8_lossy(&s.data.unwrap_or_default()["password"].0).into_owned()
        };
        let before = password(
            secrets
                .get("keep-sec")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let retain =
            json!({"metadata": {"annotations": {"integreatly.org/deletion-policy": "retain"}}});
        pgs.patch("keep", &PatchParams::default(), &Patch::Merge(retain))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let since = aws_requests().len();
        pgs.delete("keep", &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pgs, "keep", std::time::Duration::from_secs(20)).await;
        let writes: Vec<String> = aws_requests()
            .into_iter()
            .skip(since)
            .filter(|r| r["params"].to_string().contains(&id))
            .filter_map(|r| r["action"].as_str().map(str::to_string))
            .filter(|a| !a.starts_with("Describe") && !a.starts_with("List"))
            .collect();
        assert_eq!(
            writes,
            Vec::<String>::new(),
            "AWS writes naming the retained {id}"
        );
        let rds = rds().await;
        let db = instance(&rds, &id)
            .await
            .unwrap_or_else(|| panic!("the retained instance {id} is gone"));
        assert_eq!(db.deletion_protection(), Some(true));
        let have = tags(&rds, db.db_instance_arn().unwrap_or_default()).await;
        for (k, v) in want_tags("keep") {
            assert_eq!(have.get(&k), Some(&v), "tag {k} on the retained {id}");
        }
        // The garbage collector has had the time a delete takes; the
        // Secrets are released, not owned.
        for name in ["keep-sec", "keep-aws-rds-credentials"] {
            let kept = wait_for(
                &secrets,
                name,
                "the released Secret",
                DEFAULT_TIMEOUT,
                |s: Option<&Secret>| {
                    s.is_some_and(|s| {
                        s.annotations()
                            .contains_key("cro.integreatly.org/released-from")
                    })
                },
            )
            .await;
            assert!(
                kept.owner_references().is_empty(),
                "{name} is still owned: {:?}",
                kept.owner_references()
            );
        }

        // Taken over again by a Postgres of the same name.
        let since = aws_requests().len();
        create_postgres(&client, &ns, "keep", json!({})).await;
        wait_phase(&pgs, "keep", Phase::Complete).await;
        let after = password(
            secrets
                .get("keep-sec")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert!(after == before, "the password changed on takeover");
        let created: Vec<String> = aws_requests()
            .into_iter()
            .skip(since)
            .filter_map(|r| r["action"].as_str().map(str::to_string))
            .filter(|a| a == "CreateDBInstance" || a == "DeleteDBInstance")
            .collect();
        assert_eq!(
            created,
            Vec::<String>::new(),
            "the instance was not taken over"
        );
    })
    .await;
}

#[tokio::test]
async fn a_bad_value_fails_naming_the_field_and_a_field_not_read_is_named_not_fatal() {
    with_operator("rdsbad", |client, ns, _op| async move {
        // The production tier as a Go installation may hold it: fields of
        // rds:CreateDBInstance the Go operator passed through (its
        // ConfigMap decoding ignored unknown ones, pkg/providers/aws/
        // config.go getTierStrategyForProvider), and a misspelt one.
        aws_strategies(
            &client,
            &ns,
            json!({
                "development": {"createStrategy": {"AllocatedStorage": "abc"}},
                "production": {"createStrategy": {"DBInstanceClas": "db.t3.micro", "Engine": "postgres", "Tags": [{"Key": "team", "Value": "a"}]}}
            }),
        )
        .await;
        create_postgres(&client, &ns, "typed", json!({})).await;
        create_postgres(&client, &ns, "typo", json!({"tier": "production"})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let m = Phased::message(&wait_phase(&pgs, "typed", Phase::Failed).await);
        assert!(
            m.contains("cloud-resources-aws-strategies")
                && m.contains("createStrategy.AllocatedStorage must be an integer"),
            "{m}"
        );
        let typo = wait_phase(&pgs, "typo", Phase::Complete).await;
        let said = (typo.status.iter().flat_map(|s| &s.conditions))
            .find(|c| c.type_ == "TierUnderstood")
            .map(|c| (c.status.clone(), c.message.clone()));
        let (status, m) = said.unwrap_or_else(|| panic!("no TierUnderstood condition: {:?}", typo.status));
        assert_eq!(status, "False");
        for field in ["createStrategy.DBInstanceClas (did you mean DBInstanceClass?)", "createStrategy.Engine", "createStrategy.Tags"] {
            assert!(m.contains(field), "{field} not named: {m}");
        }
        // The misspelt class is not read: the default is used.
        let id = cloud_identifier("testcluster", &ns, "typo");
        let db = instance(&rds().await, &id).await.unwrap_or_else(|| panic!("no RDS instance {id}"));
        assert_eq!(db.db_instance_class(), Some("db.t3.small"));
    })
    .await;
}

/// The `UpToDate` condition as `(status, message)`.
pub(crate) fn up_to_date(p: &Postgres) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "UpToDate")
        .map(|c| (c.status.clone(), c.message.clone()))
}

#[tokio::test]
async fn out_of_band_changes_wait_for_the_maintenance_window_and_versions_only_go_up() {
    with_operator("rdsdrift", |client, ns, _op| async move {
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"DBInstanceClass": "db.t3.micro", "EngineVersion": "16.4"}}})).await;
        create_postgres(&client, &ns, "db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let pg = wait_phase(&pgs, "db", Phase::Complete).await;
        assert_eq!(up_to_date(&pg).map(|(s, _)| s).as_deref(), Some("True"));
        let id = cloud_identifier("testcluster", &ns, "db");
        let rds = rds().await;

        // Someone changes the class in the console: the CR stays complete
        // and says what differs and when it applies.
        rds.modify_db_instance().db_instance_identifier(&id).db_instance_class("db.m5.large").apply_immediately(true).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        poke(&pgs, "db", 1).await;
        let pg = wait_for(&pgs, "db", "drift reported", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(up_to_date).is_some_and(|(s, m)| s == "False" && m.contains("DBInstanceClass db.m5.large -> db.t3.micro (maintenanceWindow)"))
        })
        .await;
        assert_eq!(pg.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete), "drift does not make a CR in progress");
        assert_eq!(pg.status.as_ref().map(|s| s.pending_changes.len()), Some(1), "{:?}", pg.status);
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.db_instance_class().map(str::to_string)).as_deref(), Some("db.m5.large"), "changed outside the window");

        // The window opens: the change is requested for AWS's maintenance
        // window (not immediately) and the flag goes back to false.
        pgs.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maintenanceWindow": true}}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&pgs, "db", "maintenanceWindow reset", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| !o.spec.resource.maintenance_window)
        })
        .await;
        let modify = crate::support::aws_requests()
            .into_iter()
            .filter(|r| r["action"] == "ModifyDBInstance" && r["params"].to_string().contains(&id))
            .find(|r| r["params"].to_string().contains("db.t3.micro"))
            .unwrap_or_else(|| panic!("no ModifyDBInstance for {id}"));
        assert_eq!(modify["params"]["ApplyImmediately"], json!(["false"]), "{modify}");
        // The emulator applies at once what AWS would apply in the window;
        // the operator's own reset of the flag wakes no reconcile, so the
        // next look (the recheck, in a real account) is asked for here.
        poke(&pgs, "db", 4).await;
        wait_for(&pgs, "db", "up to date again", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(up_to_date).is_some_and(|(s, _)| s == "True")
        })
        .await;
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.db_instance_class().map(str::to_string)).as_deref(), Some("db.t3.micro"));

        // A tag removed out of band is put back at the next look.
        let arn = instance(&rds, &id).await.and_then(|d| d.db_instance_arn().map(str::to_string)).unwrap_or_default();
        rds.remove_tags_from_resource().resource_name(&arn).tag_keys("integreatly.org/clusterID").send().await.unwrap_or_else(|e| panic!("{e:?}"));
        poke(&pgs, "db", 3).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while !tags(&rds, &arn).await.contains_key("integreatly.org/clusterID") {
            assert!(tokio::time::Instant::now() < deadline, "removed tag was not restored");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }

        // A lower engine version in the tier is never applied, and says so.
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"DBInstanceClass": "db.t3.micro", "EngineVersion": "15.8"}}})).await;
        poke(&pgs, "db", 2).await;
        let pg = wait_for(&pgs, "db", "downgrade refused", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(up_to_date).is_some_and(|(_, m)| m.contains("never: engine versions only move up"))
        })
        .await;
        assert_eq!(pg.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete));
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.engine_version().map(str::to_string)).as_deref(), Some("16.4"));
        assert_eq!(pg.status.and_then(|s| s.version).as_deref(), Some("16.4"));
    })
    .await;
}

/// A tier's `Port` moves an instance, as the Go operator moved it
/// (buildRDSUpdateStrategy): shown as pending until the maintenance
/// window; then the database network's security group admits the new port
/// first, ModifyDBInstance moves it (AWS restarts it at once), and the
/// Secret's port follows the endpoint (issue #41).
#[tokio::test]
async fn a_tier_port_moves_the_instance_in_the_window_and_the_secret_follows() {
    with_operator("rdsport", |client, ns, _op| async move {
        aws_strategies(&client, &ns, json!({"development": {}})).await;
        create_postgres(&client, &ns, "db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let port = |s: &Secret| {
            s.data
                .as_ref()
                .and_then(|d| d.get("port"))
                .map(|p| String::from_utf8_lossy(&p.0).into_owned())
        };
        let sec = secrets
            .get("db-sec")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(port(&sec).as_deref(), Some("5432"));

        aws_strategies(
            &client,
            &ns,
            json!({"development": {"createStrategy": {"Port": 5433}}}),
        )
        .await;
        poke(&pgs, "db", 1).await;
        wait_for(
            &pgs,
            "db",
            "the port change pending",
            DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| {
                o.and_then(up_to_date).is_some_and(|(s, m)| {
                    s == "False" && m.contains("Port 5432 -> 5433 (maintenanceWindow)")
                })
            },
        )
        .await;
        let id = cloud_identifier("testcluster", &ns, "db");
        let rds = rds().await;
        let endpoint_port =
            |d: Option<aws_sdk_rds::types::DbInstance>| d.and_then(|d| d.endpoint()?.port());
        assert_eq!(
            endpoint_port(instance(&rds, &id).await),
            Some(5432),
            "moved outside the window"
        );

        pgs.patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maintenanceWindow": true}})),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while endpoint_port(instance(&rds, &id).await) != Some(5433) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the instance was not moved to port 5433"
            );
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        // Its security groups admit the new port (the database network's).
        let groups: Vec<String> = (instance(&rds, &id)
            .await
            .unwrap_or_else(|| panic!("no instance"))
            .vpc_security_groups()
            .iter())
        .filter_map(|g| g.vpc_security_group_id().map(str::to_string))
        .collect();
        let ec2 = aws_sdk_ec2::Client::new(&TestEnv::load().aws_config().await);
        let described = ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.clone()))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        let admits = described
            .security_groups()
            .iter()
            .flat_map(|g| g.ip_permissions())
            .any(|r| {
                r.from_port().is_some_and(|f| f <= 5433) && r.to_port().is_some_and(|t| t >= 5433)
            });
        assert!(admits, "no rule of {groups:?} admits 5433: {described:?}");
        poke(&pgs, "db", 2).await;
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        loop {
            let sec = secrets
                .get("db-sec")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            if port(&sec).as_deref() == Some("5433") {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the Secret's port did not follow: {:?}",
                port(&sec)
            );
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        wait_for(
            &pgs,
            "db",
            "up to date on 5433",
            DEFAULT_TIMEOUT,
            |o: Option<&Postgres>| o.and_then(up_to_date).is_some_and(|(s, _)| s == "True"),
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_vanished_instance_is_reported_not_recreated() {
    with_operator("rdsgone", |client, ns, _op| async move {
        aws_strategies(
            &client,
            &ns,
            json!({"development": {"deleteStrategy": {"SkipFinalSnapshot": true}}}),
        )
        .await;
        create_postgres(&client, &ns, "db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        let id = cloud_identifier("testcluster", &ns, "db");
        let rds = rds().await;
        rds.modify_db_instance()
            .db_instance_identifier(&id)
            .deletion_protection(false)
            .apply_immediately(true)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        rds.delete_db_instance()
            .db_instance_identifier(&id)
            .skip_final_snapshot(true)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        poke(&pgs, "db", 1).await;
        let pg = wait_phase(&pgs, "db", Phase::Failed).await;
        assert!(
            Phased::message(&pg).contains("no longer exists"),
            "{}",
            Phased::message(&pg)
        );
        assert!(
            instance(&rds, &id).await.is_none(),
            "the instance was silently re-created"
        );
    })
    .await;
}

#[tokio::test]
async fn blob_storage_on_s3_with_a_bucket_scoped_user() {
    use cloud_resource_operator::api::BlobStorage;
    with_operator("s3", |client, ns, _op| async move {
        aws_strategies_for(&client, &ns, "blobstorage", json!({
            "development": {"deleteStrategy": {"forceBucketDeletion": false}},
            "production": {"deleteStrategy": {"forceBucketDeletion": true}}
        }))
        .await;
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        for (name, tier) in [("keep", "development"), ("force", "production")] {
            let b: BlobStorage = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
                "metadata": {"name": name, "labels": {"productName": "orders"}},
                "spec": {"type": "managed", "tier": tier, "secretRef": {"name": format!("{name}-sec")}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            blobs.create(&PostParams::default(), &b).await.unwrap_or_else(|e| panic!("{e}"));
        }
        let env = TestEnv::load();
        let config = env.aws_config().await;
        let s3 = env.s3().await;
        let iam = aws_sdk_iam::Client::new(&config);
        for name in ["keep", "force"] {
            wait_for(&blobs, name, "phase complete", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| {
                o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
            })
            .await;
            let bucket = cloud_identifier("testcluster", &ns, name);
            let secret = Api::<Secret>::namespaced(client.clone(), &ns).get(&format!("{name}-sec")).await.unwrap_or_else(|e| panic!("{e}"));
            let data: BTreeMap<String, String> = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
            assert_eq!(data.keys().cloned().collect::<Vec<_>>(), ["bucketName", "bucketRegion", "credentialKeyID", "credentialSecretKey"]);
            assert_eq!(data["bucketName"], bucket);
            assert_eq!(data["bucketRegion"], env.aws_region);
            assert!(!data["credentialSecretKey"].is_empty());

            let block = s3.get_public_access_block().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            let block = block.public_access_block_configuration().cloned().unwrap_or_else(|| panic!("no public access block"));
            assert_eq!((block.block_public_acls(), block.ignore_public_acls(), block.block_public_policy(), block.restrict_public_buckets()), (Some(true), Some(true), Some(true), Some(true)));
            s3.get_bucket_encryption().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("no default encryption: {e:?}"));
            let tags: BTreeMap<String, String> = s3.get_bucket_tagging().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"))
                .tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
            for (k, v) in want_tags(name) {
                assert_eq!(tags.get(&k), Some(&v), "tag {k} on bucket {bucket}");
            }
            let keys = iam.list_access_keys().user_name(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            let ids: Vec<_> = keys.access_key_metadata().iter().filter_map(|k| k.access_key_id()).collect();
            assert_eq!(ids, [data["credentialKeyID"].as_str()], "exactly the published key exists");
            iam.get_user_policy().user_name(&bucket).policy_name("cro-bucket-access").send().await.unwrap_or_else(|e| panic!("{e:?}"));
            if name == "keep" {
                // Someone opens the bucket and drops its encryption: the
                // next look (an edit here, the recheck at rest) puts both
                // back, as the Go operator does on every reconcile.
                s3.delete_public_access_block().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
                s3.delete_bucket_encryption().bucket(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"));
                let poke = json!({"metadata": {"annotations": {"test/poke": "1"}}});
                blobs.patch(name, &PatchParams::default(), &Patch::Merge(poke)).await.unwrap_or_else(|e| panic!("{e}"));
                let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
                loop {
                    let block = s3.get_public_access_block().bucket(&bucket).send().await;
                    let blocked = block.ok().and_then(|b| b.public_access_block_configuration().cloned()).is_some_and(|b| {
                        [b.block_public_acls(), b.ignore_public_acls(), b.block_public_policy(), b.restrict_public_buckets()] == [Some(true); 4]
                    });
                    let encrypted = s3.get_bucket_encryption().bucket(&bucket).send().await.is_ok();
                    if blocked && encrypted {
                        break;
                    }
                    assert!(tokio::time::Instant::now() < deadline, "{bucket}: public access block and encryption were not put back");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
            s3.put_object().bucket(&bucket).key("data.txt").body(aws_sdk_s3::primitives::ByteStream::from_static(b"x")).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        }

        for name in ["keep", "force"] {
            blobs.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&blobs, name, DEFAULT_TIMEOUT).await;
            let bucket = cloud_identifier("testcluster", &ns, name);
            let user = iam.get_user().user_name(&bucket).send().await;
            assert!(user.is_err(), "IAM user {bucket} left behind");
        }
        let kept = cloud_identifier("testcluster", &ns, "keep");
        s3.head_bucket().bucket(&kept).send().await.unwrap_or_else(|e| panic!("the non-empty bucket was deleted: {e:?}"));
        let forced = cloud_identifier("testcluster", &ns, "force");
        assert!(s3.head_bucket().bucket(&forced).send().await.is_err(), "forceBucketDeletion did not delete {forced}");
    })
    .await;
}

/// A bucket carries its tags from its CreateBucket on, so a leader that
/// dies between the create and the set-up leaves a bucket any later
/// leader knows as this CR's and sets up; an identity without
/// s3:TagResource still gets its bucket, tagged after.
#[tokio::test]
async fn a_bucket_is_tagged_at_create_and_any_leader_finishes_its_set_up() {
    use cloud_resource_operator::api::BlobStorage;
    with_operator("s3-cut", |client, ns, op| async move {
        let env = TestEnv::load();
        let s3 = env.s3().await;
        // As a leader leaves it when it dies right after CreateBucket:
        // tagged for the CR, neither public access block nor encryption.
        let cut = cloud_identifier("testcluster", &ns, "cut");
        let mut at_create = want_tags("cut");
        at_create.remove("integreatly.org/product-name");
        at_create.insert("integreatly.org/resource-namespace".into(), ns.clone());
        let tags = at_create.iter().map(|(k, v)| aws_sdk_s3::types::Tag::builder().key(k).value(v).build().unwrap_or_else(|e| panic!("{e}")));
        let mut config = aws_sdk_s3::types::CreateBucketConfiguration::builder().set_tags(Some(tags.collect()));
        if env.aws_region != "us-east-1" {
            config = config.location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(env.aws_region.as_str()));
        }
        s3.create_bucket().bucket(&cut).create_bucket_configuration(config.build()).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert!(s3.get_bucket_encryption().bucket(&cut).send().await.is_err(), "moto encrypts new buckets by default: the test proves nothing");
        // No s3:TagResource for this one: CreateBucket with tags is refused.
        let untagged = cloud_identifier("testcluster", &ns, "untagged");
        crate::support::inject_aws_fault(&format!("{ns}-tags"), "s3", "CreateBucket", &format!("\"Bucket\": \"{untagged}\", \"Tags\": {{\""), ("AccessDenied", 403, "not authorized to perform: s3:TagResource"), None);
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        for name in ["cut", "untagged"] {
            let b: BlobStorage = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
                "metadata": {"name": name, "labels": {"productName": "orders"}},
                "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            blobs.create(&PostParams::default(), &b).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for (name, bucket) in [("cut", &cut), ("untagged", &untagged)] {
            wait_phase(&blobs, name, Phase::Complete).await;
            let block = s3.get_public_access_block().bucket(bucket).send().await.unwrap_or_else(|e| panic!("{name}: no public access block: {e:?}"));
            let block = block.public_access_block_configuration().cloned().unwrap_or_else(|| panic!("no public access block"));
            assert_eq!(block.block_public_acls(), Some(true), "{name}");
            s3.get_bucket_encryption().bucket(bucket).send().await.unwrap_or_else(|e| panic!("{name}: no default encryption: {e:?}"));
            let tags: BTreeMap<String, String> = s3.get_bucket_tagging().bucket(bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"))
                .tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect();
            for (k, v) in want_tags(name) {
                assert_eq!(tags.get(&k), Some(&v), "tag {k} on bucket {bucket}");
            }
        }
        assert!(op.logs().contains("s3:CreateBucket with tags was refused"), "the refused tagged create was not the one that ran");
        for name in ["cut", "untagged"] {
            blobs.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&blobs, name, DEFAULT_TIMEOUT).await;
        }
    })
    .await;
}

/// The users the operator makes sit under its IAM path, bounded by the
/// managed policy `--iam-permissions-boundary` names.
#[tokio::test]
async fn iam_users_go_under_the_path_with_the_boundary() {
    use cloud_resource_operator::api::SMTPCredentialSet;
    let config = TestEnv::load().aws_config().await;
    let iam = aws_sdk_iam::Client::new(&config);
    let account = aws_sdk_sts::Client::new(&config)
        .get_caller_identity()
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let boundary = format!(
        "arn:aws:iam::{}:policy/cro-test-boundary",
        account.account().unwrap_or_default()
    );
    let document = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["ses:SendRawEmail", "s3:*"], "Resource": "*"}]});
    // Made once per emulator; a second run finds it.
    let _ = iam
        .create_policy()
        .policy_name("cro-test-boundary")
        .policy_document(document.to_string())
        .send()
        .await;
    let flag = format!("--iam-permissions-boundary={boundary}");
    crate::support::with_operator_launched("iampath", move |l| l.extra_args.push(flag), |client, ns, _op| async move {
        let smtps = Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns);
        let cr: SMTPCredentialSet = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "SMTPCredentialSet", "metadata": {"name": "mail"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "mail-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        smtps.create(&PostParams::default(), &cr).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&smtps, "mail", Phase::Complete).await;
        let name = IdentifierRules::IamUser.conform(&format!("{}-ses", cloud_identifier("testcluster", &ns, "mail")));
        let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
        let user = iam.get_user().user_name(&name).send().await.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let user = user.user().unwrap_or_else(|| panic!("{name}: no user in the answer"));
        assert_eq!(user.path(), cro_provider_aws::DEFAULT_IAM_PATH);
        // The emulator keeps permissions boundaries of roles only, so the
        // user's is read from the CreateUser call it was made with.
        let created: Vec<Value> = aws_requests()
            .into_iter()
            .filter(|r| r["action"] == "CreateUser" && r["params"]["UserName"][0] == name.as_str())
            .collect();
        assert_eq!(created.len(), 1, "{created:?}");
        assert_eq!(created[0]["params"]["PermissionsBoundary"][0], boundary.as_str());
    })
    .await;
}

#[tokio::test]
async fn smtp_credentials_through_iam_and_ses() {
    use cloud_resource_operator::api::SMTPCredentialSet;
    with_operator("ses", |client, ns, _op| async move {
        aws_strategies_for(&client, &ns, "smtpcredentials", json!({"development": {"createStrategy": {"EmailIdentity": format!("noreply@{ns}.example.com")}}})).await;
        let smtps = Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns);
        let cr: SMTPCredentialSet = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "SMTPCredentialSet",
            "metadata": {"name": "mail", "labels": {"productName": "orders"}},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "mail-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        smtps
            .create(&PostParams::default(), &cr)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_for(
            &smtps,
            "mail",
            "phase complete",
            DEFAULT_TIMEOUT,
            |o: Option<&SMTPCredentialSet>| {
                o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
            },
        )
        .await;
        let env = TestEnv::load();
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let read = |s: Secret| -> BTreeMap<String, String> {
            s.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect()
        };
        let out = read(
            secrets
                .get("mail-sec")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(
            out.keys().cloned().collect::<Vec<_>>(),
            ["host", "password", "port", "tls", "username"]
        );
        assert_eq!(
            out["host"],
            format!("email-smtp.{}.amazonaws.com", env.aws_region)
        );
        assert_eq!((out["port"].as_str(), out["tls"].as_str()), ("587", "true"));
        let key = read(
            secrets
                .get("mail-aws-ses-credentials")
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
        assert_eq!(out["username"], key["accessKeyID"]);
        assert_eq!(
            out["password"],
            cro_provider_aws::smtp_password::smtp_password(
                &key["secretAccessKey"],
                &env.aws_region
            )
        );

        // The tier names a sending identity that does not exist yet.
        let identity = |o: Option<&SMTPCredentialSet>| {
            o.and_then(|o| o.status.as_ref())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "SendingIdentityVerified"))
                .map(|c| (c.status.clone(), c.reason.clone()))
        };
        wait_for(&smtps, "mail", "identity NotFound", DEFAULT_TIMEOUT, move |o: Option<&SMTPCredentialSet>| identity(o) == Some(("False".into(), "NotFound".into()))).await;
        let ses = aws_sdk_sesv2::Client::new(&env.aws_config().await);
        ses.create_email_identity().email_identity(format!("noreply@{ns}.example.com")).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        smtps.patch("mail", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"test/poke": "1"}}}))).await.unwrap_or_else(|e| panic!("{e}"));
        // A new identity awaits verification (the emulator cannot verify one).
        wait_for(&smtps, "mail", "identity NotVerified", DEFAULT_TIMEOUT, move |o: Option<&SMTPCredentialSet>| identity(o) == Some(("False".into(), "NotVerified".into()))).await;

        let iam = aws_sdk_iam::Client::new(&env.aws_config().await);
        // Not the identifier: a BlobStorage of the same name has that user.
        let user = IdentifierRules::IamUser.conform(&format!("{}-ses", cloud_identifier("testcluster", &ns, "mail")));
        let policy = iam
            .get_user_policy()
            .user_name(&user)
            .policy_name("cro-ses-send")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
        // Only through the tier's identity, only from its address.
        let document = percent_encoding::percent_decode_str(policy.policy_document()).decode_utf8_lossy().into_owned();
        let document: Value = serde_json::from_str(&document).unwrap_or_else(|e| panic!("{e}: {document}"));
        let statement = &document["Statement"][0];
        let identity = format!("noreply@{ns}.example.com");
        assert_eq!(statement["Resource"], format!("arn:aws:ses:{}:*:identity/{identity}", env.aws_region));
        assert_eq!(statement["Condition"]["StringLike"]["ses:FromAddress"], identity);
        assert_eq!(statement["Action"], json!(["ses:SendRawEmail", "ses:SendEmail"]));

        smtps
            .delete("mail", &Default::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&smtps, "mail", DEFAULT_TIMEOUT).await;
        assert!(
            iam.get_user().user_name(&user).send().await.is_err(),
            "IAM user {user} left behind"
        );
        assert!(
            secrets
                .get_opt("mail-aws-ses-credentials")
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
    })
    .await;
}

#[tokio::test]
async fn redis_on_elasticache_through_creating_and_deleting() {
    use cloud_resource_operator::api::Redis;
    with_operator("elasticache", |client, ns, _op| async move {
        let redis = Api::<Redis>::namespaced(client.clone(), &ns);
        let cr: Redis = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
            "metadata": {"name": "cache", "labels": {"productName": "orders"}},
            "spec": {"type": "managed", "tier": "development", "size": "cache.m5.large", "secretRef": {"name": "cache-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        redis.create(&PostParams::default(), &cr).await.unwrap_or_else(|e| panic!("{e}"));
        let phase = |want: Phase, text: &'static str| {
            move |o: Option<&Redis>| {
                o.and_then(|o| o.status.as_ref()).is_some_and(|s| s.phase == Some(want) && s.message.as_deref().unwrap_or_default().contains(text))
            }
        };
        // The emulator keeps the group `creating` for a few seconds.
        wait_for(&redis, "cache", "in progress while creating", DEFAULT_TIMEOUT, phase(Phase::InProgress, "creating")).await;
        wait_for(&redis, "cache", "complete", DEFAULT_TIMEOUT, phase(Phase::Complete, "")).await;

        let id = cloud_identifier("testcluster", &ns, "cache");
        let ec = aws_sdk_elasticache::Client::new(&TestEnv::load().aws_config().await);
        let group = ec.describe_replication_groups().replication_group_id(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let group = group.replication_groups().first().cloned().unwrap_or_else(|| panic!("no group {id}"));
        assert_eq!(group.cache_node_type(), Some("cache.m5.large"), "spec.size is the node type");
        assert_eq!(group.at_rest_encryption_enabled(), Some(true));
        let address = group.node_groups().first().and_then(|g| g.primary_endpoint()).and_then(|e| e.address()).unwrap_or_default().to_string();
        let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("cache-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let data: BTreeMap<String, String> = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
        // A new group is encrypted in transit with an AUTH token (#25): the
        // token sent at create was stored first, and is the Secret's password.
        assert_eq!(data.keys().cloned().collect::<Vec<_>>(), ["password", "port", "tls", "uri"]);
        assert_eq!(data["uri"], address);
        assert_eq!(data["tls"], "true");
        assert_eq!((group.transit_encryption_enabled(), group.auth_token_enabled()), (Some(true), Some(true)));
        let sent: Vec<String> = aws_requests().into_iter().filter(|r| r["action"] == "CreateReplicationGroup" && r["params"].to_string().contains(&id))
            .filter_map(|r| r["params"]["AuthToken"][0].as_str().map(str::to_string)).collect();
        assert_eq!(sent, [data["password"].clone()], "the AUTH token sent at create");
        let stored = Api::<Secret>::namespaced(client.clone(), &ns).get("cache-aws-elasticache-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(stored.data.unwrap_or_default().get("authToken").map(|v| v.0.clone()), Some(data["password"].clone().into_bytes()));
        let tags: BTreeMap<String, String> = ec.list_tags_for_resource().resource_name(group.arn().unwrap_or_default()).send().await.unwrap_or_else(|e| panic!("{e:?}"))
            .tag_list().iter().map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect();
        for (k, v) in want_tags("cache") {
            assert_eq!(tags.get(&k), Some(&v), "tag {k} on {id}");
        }

        // Version and maintenance window live on the nodes (#24 item 9):
        // status.version is what they run, and a tier's window reaches them.
        let node_id = group.member_clusters().first().cloned().unwrap_or_else(|| panic!("no member of {id}"));
        let node = |ec: aws_sdk_elasticache::Client, node_id: String| async move {
            let out = ec.describe_cache_clusters().cache_cluster_id(&node_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
            out.cache_clusters().first().cloned().unwrap_or_else(|| panic!("no node {node_id}"))
        };
        let running = node(ec.clone(), node_id.clone()).await.engine_version().unwrap_or_default().to_string();
        let cache = redis.get("cache").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cache.status.and_then(|s| s.version), Some(running));
        // As the Go operator (provider_redis.go, `if maintenanceWindow {
        // buildElasticacheUpdateStrategy … }`), nothing is modified until the
        // CR opens its window, though AWS would make this change online.
        let mut log_offset = 0u64;
        aws_requests_after(&mut log_offset);
        aws_strategies_for(&client, &ns, "redis", json!({"development": {"createStrategy": {"PreferredMaintenanceWindow": "tue:03:00-tue:04:00"}}})).await;
        wait_for(&redis, "cache", "the window change pending", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            (o.and_then(|o| o.status.as_ref()).map(|s| s.pending_changes.clone()).unwrap_or_default().iter())
                .any(|c| c.field == "PreferredMaintenanceWindow" && c.when == "maintenanceWindow")
        })
        .await;
        let modified = aws_requests_after(&mut log_offset).into_iter().any(|r| r["action"] == "ModifyReplicationGroup");
        assert!(!modified, "ModifyReplicationGroup sent while spec.maintenanceWindow is false");
        let node_window = node(ec.clone(), node_id.clone()).await.preferred_maintenance_window().map(str::to_string);
        assert_ne!(node_window.as_deref(), Some("tue:03:00-tue:04:00"), "the window changed before the CR opened it");
        redis.patch("cache", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"maintenanceWindow": true}}))).await.unwrap_or_else(|e| panic!("{e}"));
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while node(ec.clone(), node_id.clone()).await.preferred_maintenance_window() != Some("tue:03:00-tue:04:00") {
            assert!(tokio::time::Instant::now() < deadline, "the tier's maintenance window did not reach {node_id}");
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        wait_for(&redis, "cache", "complete again", DEFAULT_TIMEOUT, phase(Phase::Complete, "")).await;

        // A node type EC2 does not offer in the nodes' zones is not
        // requested, even in the window, and says why (the Go operator's
        // check in buildElasticacheUpdateStrategy).
        let unoffered = json!({"spec": {"size": "cache.x9.nope", "maintenanceWindow": true}});
        redis.patch("cache", &PatchParams::default(), &Patch::Merge(&unoffered)).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&redis, "cache", "the node type held back", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            (o.and_then(|o| o.status.as_ref()).map(|s| s.conditions.clone()).unwrap_or_default().iter())
                .any(|c| c.type_ == "UpToDate" && c.message.contains("EC2 does not offer x9.nope in availability zone"))
        })
        .await;
        let group = ec.describe_replication_groups().replication_group_id(&id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(group.replication_groups().first().and_then(|g| g.cache_node_type()), Some("cache.m5.large"));
        let asked = aws_requests().into_iter().any(|r| r["action"] == "ModifyReplicationGroup" && r["params"].to_string().contains("x9.nope"));
        assert!(!asked, "ModifyReplicationGroup asked for a node type the zones do not offer");
        let back = json!({"spec": {"size": "cache.m5.large", "maintenanceWindow": false}});
        redis.patch("cache", &PatchParams::default(), &Patch::Merge(&back)).await.unwrap_or_else(|e| panic!("{e}"));

        redis.delete("cache", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        let final_id = final_snapshot_id(&redis, &ns, "cache").await;
        wait_for(&redis, "cache", "deletion in progress", DEFAULT_TIMEOUT, phase(Phase::DeleteInProgress, "")).await;
        wait_deleted(&redis, "cache", DEFAULT_TIMEOUT).await;
        assert!(ec.describe_replication_groups().replication_group_id(&id).send().await.is_err(), "group {id} still exists");
        let snap = ec.describe_snapshots().snapshot_name(&final_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let arn = snap.snapshots().first().and_then(|s| s.arn()).unwrap_or_else(|| panic!("no final snapshot")).to_string();
        let tags = ec.list_tags_for_resource().resource_name(arn).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert!(tags.tag_list().iter().any(|t| t.key() == Some("integreatly.org/clusterID")), "final snapshot untagged");
        let stored = Api::<Secret>::namespaced(client.clone(), &ns).get_opt("cache-aws-elasticache-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(stored.is_none(), "the AUTH token Secret outlived its group");
    })
    .await;
}

#[tokio::test]
async fn snapshots_are_tagged_deleted_with_their_cr_and_kept_with_skip_delete() {
    use cloud_resource_operator::api::{PostgresSnapshot, Redis, RedisSnapshot};
    with_operator("snapshots", |client, ns, _op| async move {
        create_postgres(&client, &ns, "db", json!({})).await;
        let cache: Redis = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "cache-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        Api::<Redis>::namespaced(client.clone(), &ns).create(&PostParams::default(), &cache).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&Api::<Postgres>::namespaced(client.clone(), &ns), "db", Phase::Complete).await;

        let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), &ns);
        for (name, skip) in [("snap", false), ("keep", true), ("foreign", false)] {
            let s: PostgresSnapshot = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot", "metadata": {"name": name},
                "spec": {"resourceName": "db", "skipDelete": skip}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            pg_snaps.create(&PostParams::default(), &s).await.unwrap_or_else(|e| panic!("{e}"));
        }
        let rs: RedisSnapshot = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "RedisSnapshot", "metadata": {"name": "rsnap"},
            "spec": {"resourceName": "cache"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        redis_snaps.create(&PostParams::default(), &rs).await.unwrap_or_else(|e| panic!("{e}"));

        let complete = |o: Option<&PostgresSnapshot>| o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete);
        let snap = wait_for(&pg_snaps, "snap", "snapshot complete", DEFAULT_TIMEOUT, complete).await;
        let keep = wait_for(&pg_snaps, "keep", "snapshot complete", DEFAULT_TIMEOUT, complete).await;
        // The Go operator's identifier (cluster, namespace, name and the
        // CR's creation time, as Go prints it, shortened), then a hash of
        // the CR's UID: the Go naming alone is shared by colliding CRs.
        let identifier = |o: &PostgresSnapshot| {
            let created = o.metadata.creation_timestamp.as_ref().unwrap_or_else(|| panic!("no creationTimestamp"));
            let go = cro_provider_api::timestamped_identifier("testcluster", &ns, &o.name_any(), &created.0.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string());
            cro_provider_api::snapshot_identifier(&go, o.metadata.uid.as_deref().unwrap_or_default())
        };
        let snap_id = identifier(&snap);
        assert_ne!(snap_id, identifier(&keep), "each CR has its own");
        assert_eq!(snap.status.and_then(|s| s.snapshot_id).as_deref(), Some(snap_id.as_str()));
        let rsnap = wait_for(&redis_snaps, "rsnap", "redis snapshot complete", DEFAULT_TIMEOUT, |o: Option<&RedisSnapshot>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;

        let rds = rds().await;
        let found = rds.describe_db_snapshots().db_snapshot_identifier(&snap_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let arn = found.db_snapshots().first().and_then(|s| s.db_snapshot_arn()).unwrap_or_default().to_string();
        let snap_tags = tags(&rds, &arn).await;
        assert_eq!(snap_tags.get("integreatly.org/clusterID").map(String::as_str), Some("testcluster"));
        assert_eq!(snap_tags.get("integreatly.org/resource-namespace"), Some(&ns), "snapshots are bound to the namespace");
        // A snapshot its tags bind to another namespace (another team's,
        // reached by a colliding identifier) is never deleted for this CR.
        let foreign = wait_for(&pg_snaps, "foreign", "snapshot complete", DEFAULT_TIMEOUT, complete).await;
        let foreign_id = foreign.status.and_then(|s| s.snapshot_id).unwrap_or_default();
        let found = rds.describe_db_snapshots().db_snapshot_identifier(&foreign_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        let foreign_arn = found.db_snapshots().first().and_then(|s| s.db_snapshot_arn()).unwrap_or_default().to_string();
        let elsewhere = aws_sdk_rds::types::Tag::builder().key("integreatly.org/resource-namespace").value("another-team").build();
        rds.add_tags_to_resource().resource_name(&foreign_arn).tags(elsewhere).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        pg_snaps.delete("foreign", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&pg_snaps, "foreign", DEFAULT_TIMEOUT).await;
        rds.describe_db_snapshots().db_snapshot_identifier(&foreign_id).send().await.unwrap_or_else(|e| panic!("another namespace's snapshot {foreign_id} was deleted: {e:?}"));
        let ec = aws_sdk_elasticache::Client::new(&TestEnv::load().aws_config().await);
        let rsnap_id = rsnap.status.and_then(|s| s.snapshot_id).unwrap_or_default();
        let found = ec.describe_snapshots().snapshot_name(&rsnap_id).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(found.snapshots().len(), 1, "no ElastiCache snapshot {rsnap_id}");

        for name in ["snap", "keep"] {
            pg_snaps.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pg_snaps, name, DEFAULT_TIMEOUT).await;
        }
        redis_snaps.delete("rsnap", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        wait_deleted(&redis_snaps, "rsnap", DEFAULT_TIMEOUT).await;
        assert!(rds.describe_db_snapshots().db_snapshot_identifier(&snap_id).send().await.is_err(), "snapshot {snap_id} not deleted");
        let kept = keep.status.and_then(|s| s.snapshot_id).unwrap_or_default();
        rds.describe_db_snapshots().db_snapshot_identifier(&kept).send().await.unwrap_or_else(|e| panic!("skipDelete snapshot {kept} was deleted: {e:?}"));
        let left = ec.describe_snapshots().snapshot_name(&rsnap_id).send().await.map(|o| o.snapshots().len()).unwrap_or(0);
        assert_eq!(left, 0, "ElastiCache snapshot {rsnap_id} not deleted");
    })
    .await;
}

/// `spec.restoreFromSnapshot` (issue 14): a clone of a database from a
/// snapshot CR, with its own credentials; a snapshot not there yet is
/// waited for, and one of the other engine is refused.
#[tokio::test]
async fn a_clone_is_restored_from_a_snapshot_with_its_own_password() {
    use cloud_resource_operator::api::{PostgresSnapshot, Redis, RedisSnapshot};
    with_operator("clone", |client, ns, _op| async move {
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let redis = Api::<Redis>::namespaced(client.clone(), &ns);
        let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), &ns);
        let redis_cr = |name: &str, extra: Value| {
            let mut spec = json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
            if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
                s.extend(e.clone());
            }
            serde_json::from_value::<Redis>(json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": name}, "spec": spec}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        create_postgres(&client, &ns, "source", json!({})).await;
        redis.create(&PostParams::default(), &redis_cr("cache", json!({}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&pgs, "source", Phase::Complete).await;
        wait_phase(&redis, "cache", Phase::Complete).await;
        let snapshot = |kind: &str, name: &str, of: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": {"resourceName": of}});
        let pg_snap: PostgresSnapshot = serde_json::from_value(snapshot("PostgresSnapshot", "snap", "source")).unwrap_or_else(|e| panic!("{e}"));
        pg_snaps.create(&PostParams::default(), &pg_snap).await.unwrap_or_else(|e| panic!("{e}"));
        let redis_snap: RedisSnapshot = serde_json::from_value(snapshot("RedisSnapshot", "rsnap", "cache")).unwrap_or_else(|e| panic!("{e}"));
        redis_snaps.create(&PostParams::default(), &redis_snap).await.unwrap_or_else(|e| panic!("{e}"));
        let snap = wait_for(&pg_snaps, "snap", "snapshot complete", DEFAULT_TIMEOUT, |o: Option<&PostgresSnapshot>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;
        let rsnap = wait_for(&redis_snaps, "rsnap", "snapshot complete", DEFAULT_TIMEOUT, |o: Option<&RedisSnapshot>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;
        let snap_id = snap.status.and_then(|s| s.snapshot_id).unwrap_or_default();
        let rsnap_id = rsnap.status.and_then(|s| s.snapshot_id).unwrap_or_default();

        create_postgres(&client, &ns, "clone", json!({"restoreFromSnapshot": "snap"})).await;
        create_postgres(&client, &ns, "early", json!({"restoreFromSnapshot": "later"})).await;
        create_postgres(&client, &ns, "crossed", json!({"restoreFromSnapshot": "rsnap"})).await;
        redis.create(&PostParams::default(), &redis_cr("cache-clone", json!({"restoreFromSnapshot": "rsnap"}))).await.unwrap_or_else(|e| panic!("{e}"));

        let clone = wait_phase(&pgs, "clone", Phase::Complete).await;
        let clone_id = cloud_identifier("testcluster", &ns, "clone");
        let actions = aws_actions_mentioning(&clone_id);
        assert!(actions.iter().any(|a| a == "RestoreDBInstanceFromDBSnapshot"), "{actions:?}");
        assert!(!actions.iter().any(|a| a == "CreateDBInstance"), "{actions:?}");
        let restored = aws_requests().into_iter().find(|r| r["action"] == "RestoreDBInstanceFromDBSnapshot" && r["params"].to_string().contains(&clone_id));
        assert_eq!(restored.map(|r| r["params"]["DBSnapshotIdentifier"].to_string()), Some(json!([snap_id]).to_string()));
        // The clone's own password, not the source's, in its Secret and on the instance.
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let value = |s: &Secret, k: &str| s.data.as_ref().and_then(|d| d.get(k)).map(|v| String::from_utf8_lossy(&v.0).into_owned());
        let clone_secret = secrets.get("clone-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let source_secret = secrets.get("source-sec").await.unwrap_or_else(|e| panic!("{e}"));
        let password = value(&clone_secret, "password").unwrap_or_default();
        assert_ne!(Some(password.clone()), value(&source_secret, "password"));
        let set = passwords_set(&clone_id);
        assert_eq!(set, vec![password], "the restored instance's master password was not set once to the clone's");
        let credentials = secrets.get("clone-aws-rds-credentials").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value(&credentials, "passwordPending"), None, "the restore mark stayed");
        assert!(clone.metadata.annotations.is_some_and(|a| a.get("resourceIdentifier") == Some(&clone_id)));

        let cache_clone = wait_phase(&redis, "cache-clone", Phase::Complete).await;
        let group = cloud_identifier("testcluster", &ns, "cache-clone");
        let created = aws_requests().into_iter().find(|r| r["action"] == "CreateReplicationGroup" && r["params"].to_string().contains(&group));
        assert_eq!(created.map(|r| r["params"]["SnapshotName"].to_string()), Some(json!([rsnap_id]).to_string()));
        drop(cache_clone);

        let early = wait_for(&pgs, "early", "waiting for its snapshot", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.is_some_and(|o| Phased::message(o).contains("waiting for PostgresSnapshot later"))
        })
        .await;
        assert_eq!(early.status.as_ref().and_then(|s| s.phase), Some(Phase::InProgress));
        assert_eq!(early.status.and_then(|s| s.provider), None, "a clone waiting for its snapshot reports an empty provider");
        assert!(aws_actions_mentioning(&cloud_identifier("testcluster", &ns, "early")).is_empty(), "a clone without its snapshot called AWS");
        let crossed = wait_phase(&pgs, "crossed", Phase::Failed).await;
        assert!(Phased::message(&crossed).contains("RedisSnapshot"), "{}", Phased::message(&crossed));
    })
    .await;
}

/// Credential rotation (issue 14): annotating a CR rotates its
/// credentials; an RDS master password changes at once, an IAM access key
/// is replaced and the old one keeps working through the tier's grace
/// period, then goes. Status records when and which request.
#[tokio::test]
async fn credentials_rotate_on_request_and_a_replaced_key_works_through_its_grace() {
    use cloud_resource_operator::api::BlobStorage;
    with_operator("rotate", |client, ns, _op| async move {
        let tiers = json!({
            "postgres": json!({"development": {}}).to_string(),
            "blobstorage": json!({"development": {"credentialRotationGrace": "1m"}}).to_string(),
        });
        apply_config_map(&client, &ns, "cloud-resources-aws-strategies", tiers).await;
        create_postgres(&client, &ns, "db", json!({})).await;
        let blob: BlobStorage = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "files"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "files-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        blobs.create(&PostParams::default(), &blob).await.unwrap_or_else(|e| panic!("{e}"));
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        wait_phase(&blobs, "files", Phase::Complete).await;
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        let value = |s: &Secret, k: &str| s.data.as_ref().and_then(|d| d.get(k)).map(|v| String::from_utf8_lossy(&v.0).into_owned()).unwrap_or_default();
        let read = |name: &'static str, key: &'static str| {
            let secrets = secrets.clone();
            async move { value(&secrets.get(name).await.unwrap_or_else(|e| panic!("{e}")), key) }
        };
        let (old_password, old_key) = (read("db-sec", "password").await, read("files-sec", "credentialKeyID").await);

        let rotate = json!({"metadata": {"annotations": {"integreatly.org/rotate-credentials": "2026-11-23"}}});
        pgs.patch("db", &PatchParams::default(), &Patch::Merge(&rotate)).await.unwrap_or_else(|e| panic!("{e}"));
        blobs.patch("files", &PatchParams::default(), &Patch::Merge(&rotate)).await.unwrap_or_else(|e| panic!("{e}"));
        let answered = |requested: Option<String>| requested.as_deref() == Some("2026-11-23");
        let db = wait_for(&pgs, "db", "rotation recorded", DEFAULT_TIMEOUT, move |o: Option<&Postgres>| {
            answered(o.and_then(|o| o.status.as_ref()?.credentials_rotation.as_ref()?.requested.clone()))
        })
        .await;
        assert_eq!(db.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete));
        let new_password = read("db-sec", "password").await;
        assert_ne!(new_password, old_password, "the published password did not change");
        let id = cloud_identifier("testcluster", &ns, "db");
        let set = passwords_set(&id);
        assert_eq!(set, vec![new_password], "the instance's master password was not set once to the published one");

        wait_for(&blobs, "files", "rotation recorded", DEFAULT_TIMEOUT, move |o: Option<&BlobStorage>| {
            answered(o.and_then(|o| o.status.as_ref()?.credentials_rotation.as_ref()?.requested.clone()))
        })
        .await;
        let new_key = read("files-sec", "credentialKeyID").await;
        assert_ne!(new_key, old_key);
        let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
        let bucket = cloud_identifier("testcluster", &ns, "files");
        let keys = || async {
            let mut ids: Vec<String> = iam.list_access_keys().user_name(&bucket).send().await.unwrap_or_else(|e| panic!("{e:?}"))
                .access_key_metadata().iter().filter_map(|k| k.access_key_id().map(str::to_string)).collect();
            ids.sort();
            ids
        };
        let mut both = vec![old_key.clone(), new_key.clone()];
        both.sort();
        assert_eq!(keys().await, both, "the replaced key must keep working during the grace period");
        // After the minute of grace, only the new key is left.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(150);
        while keys().await != vec![new_key.clone()] {
            assert!(tokio::time::Instant::now() < deadline, "the replaced key outlived its grace period: {:?}", keys().await);
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        assert_eq!(read("files-aws-s3-credentials", "previousAccessKeyID").await, "", "the replaced key is still remembered");
        assert_eq!(read("files-sec", "credentialKeyID").await, new_key);
    })
    .await;
}

/// STS mode (#24 item 5), as the Go operator detects it
/// (NewCredentialManager, pkg/providers/aws/credentials.go): Secret
/// `sts-credentials` with `role_arn` in the operator's namespace. AWS calls
/// run as that role, assumed with the pod's token; a BlobStorage gets its
/// bucket and no IAM user, its key fields empty (CreateStorage,
/// provider_blobstorage.go), and deleting it touches no IAM user.
#[tokio::test]
async fn sts_mode_runs_as_the_role_and_makes_no_iam_user() {
    use cloud_resource_operator::api::BlobStorage;
    let role = "arn:aws:iam::123456789012:role/cro-sts";
    let token_file = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("target/testenv/sts-token-{}", std::process::id()));
    // Projected only later: first as an install that forgot to mount it.
    let _ = std::fs::remove_file(&token_file);
    crate::support::with_namespace("sts", |client, ns| async move {
            crate::support::ensure_crds(&client).await;
            // Read when the operator starts, as the Go operator reads it.
            // Without its role first: the operator waits, says why on the
            // Go operator's gauge, and is not ready.
            let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "sts-credentials"}, "stringData": {"role": role}}))
                .unwrap_or_else(|e| panic!("{e}"));
            let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
            secrets.create(&PostParams::default(), &secret).await.unwrap_or_else(|e| panic!("{e}"));
            let mut launch = crate::support::Launch::new(&ns);
            launch.extra_args.push(format!("--sts-token-file={}", token_file.display()));
            // As on an STS cluster: no keys of its own (they would win).
            launch.env_remove.extend(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"].map(String::from));
            let restarted = crate::support::Operator::launch(launch).await;
            restarted.wait_log("waiting for Secret sts-credentials", DEFAULT_TIMEOUT).await;
            let metrics = restarted.http_get("/metrics").await;
            let gauge = metrics.lines().find(|l| l.starts_with("cro_sts_credentials_secret{")).unwrap_or_else(|| panic!("no cro_sts_credentials_secret:\n{metrics}"));
            assert!(gauge.contains(&format!("namespace=\"{ns}\"")) && gauge.contains("has no role_arn") && gauge.ends_with(" 1"), "{gauge}");
            let readyz = restarted.http_response("/readyz").await;
            assert!(readyz.contains(" 503 ") && readyz.ends_with("not ready"), "{readyz}");
            // Fixed: taken up without a restart.
            let fixed = json!({"stringData": {"role_arn": role}});
            secrets.patch("sts-credentials", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&fixed)).await.unwrap_or_else(|e| panic!("{e}"));
            // The role is there, the pod's token is not: said, not retried
            // call by call for ever.
            restarted.wait_log("but the pod has no ServiceAccount token at", DEFAULT_TIMEOUT).await;
            let metrics = restarted.http_get("/metrics").await;
            let gauge = metrics.lines().find(|l| l.starts_with("cro_sts_credentials_secret{")).unwrap_or_else(|| panic!("no cro_sts_credentials_secret:\n{metrics}"));
            assert!(gauge.contains("sts.enabled=true") && gauge.ends_with(" 1"), "{gauge}");
            std::fs::write(&token_file, "eyJhbGciOiJSUzI1NiJ9.e30.c2ln").unwrap_or_else(|e| panic!("{e}"));
            restarted.wait_log("AWS identity source=STS mode: role", DEFAULT_TIMEOUT).await;
            // The server that answered while it waited gives way to the
            // ready one, on another address, logged just after.
            restarted.wait_log("serving /metrics, /healthz, /readyz address=", DEFAULT_TIMEOUT).await;
            let metrics = restarted.http_get("/metrics").await;
            assert!(!metrics.contains("cro_sts_credentials_secret{"), "{metrics}");
            let blob: BlobStorage = serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "files"},
                "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "files-sec"}}
            }))
            .unwrap_or_else(|e| panic!("{e}"));
            let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
            blobs.create(&PostParams::default(), &blob).await.unwrap_or_else(|e| panic!("{e}"));
            wait_phase(&blobs, "files", Phase::Complete).await;
            let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("files-sec").await.unwrap_or_else(|e| panic!("{e}"));
            let data: BTreeMap<String, String> = secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
            let bucket = cloud_identifier("testcluster", &ns, "files");
            assert_eq!(data.get("bucketName"), Some(&bucket));
            assert_eq!((data["credentialKeyID"].as_str(), data["credentialSecretKey"].as_str()), ("", ""), "{:?}", data.keys());
            let iam = aws_sdk_iam::Client::new(&TestEnv::load().aws_config().await);
            assert!(iam.get_user().user_name(&bucket).send().await.is_err(), "an IAM user was made in STS mode");
            let assumed = aws_requests().into_iter().any(|r| r["action"] == "AssumeRoleWithWebIdentity" && r["params"].to_string().contains(role));
            assert!(assumed, "the role of sts-credentials was not assumed");

            blobs.delete("files", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&blobs, "files", DEFAULT_TIMEOUT).await;
            // The test's own GetUser above aside.
            let iam_calls: Vec<String> = aws_actions_mentioning(&bucket).into_iter().filter(|a| a != "GetUser" && (a.contains("User") || a.contains("AccessKey"))).collect();
            assert!(iam_calls.is_empty(), "IAM calls in STS mode: {iam_calls:?}");
            restarted.stop().await;
    })
    .await;
}

/// STS mode when its credentials expire and the pod's token is rotated
/// (issue #62): STS (through a proxy) gives the role's credentials for 30 s
/// only, and once the kubelet has written a new projected token, refuses
/// the old one with `ExpiredTokenException`. The operator renews the
/// credentials with the token file's new content, without a restart: STS
/// sees the new token, a BlobStorage made after the rotation completes,
/// and no CR fails.
#[tokio::test]
async fn sts_credentials_are_renewed_with_the_rotated_token() {
    use cloud_resource_operator::api::BlobStorage;
    let role = "arn:aws:iam::123456789012:role/cro-sts-rotation";
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/testenv");
    let pid = std::process::id();
    let (token_file, expired) = (
        dir.join(format!("sts-rotated-token-{pid}")),
        dir.join(format!("sts-expired-tokens-{pid}")),
    );
    // Two projected tokens, as the kubelet writes them one after the other.
    let (first, second) = (
        "eyJhbGciOiJSUzI1NiJ9.eyJnZW4iOjF9.Zmlyc3Q",
        "eyJhbGciOiJSUzI1NiJ9.eyJnZW4iOjJ9.c2Vjb25k",
    );
    std::fs::write(&token_file, first).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&expired);
    let proxy = crate::lost_answers::Proxy::shortening_web_identity(
        &format!("sts-rotation-{pid}"),
        30,
        &expired,
    )
    .await;
    crate::support::with_namespace("stsrot", |client, ns| async move {
        crate::support::ensure_crds(&client).await;
        let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "sts-credentials"}, "stringData": {"role_arn": role}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<Secret>::namespaced(client.clone(), &ns).create(&PostParams::default(), &secret).await.unwrap_or_else(|e| panic!("{e}"));
        let mut launch = crate::support::Launch::new(&ns);
        launch.extra_args.push(format!("--sts-token-file={}", token_file.display()));
        launch.env_remove.extend(["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"].map(String::from));
        launch.env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
        let op = crate::support::Operator::launch(launch).await;
        op.wait_log("AWS identity source=STS mode: role", DEFAULT_TIMEOUT).await;
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let blob = |name: &str| -> BlobStorage {
            serde_json::from_value(json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
                "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        blobs.create(&PostParams::default(), &blob("before")).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&blobs, "before", Phase::Complete).await;
        let assumed_with = |token: &str| {
            aws_requests().iter().filter(|r| r["action"] == "AssumeRoleWithWebIdentity" && r["params"].to_string().contains(token)).count()
        };
        assert!(assumed_with(first) > 0, "the role was not assumed with the first token");

        // The kubelet rotates the token; STS refuses the old one from now on.
        std::fs::write(&token_file, second).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&expired, first).unwrap_or_else(|e| panic!("{e}"));
        // Once the first token's credentials (30 s) have expired, the next
        // AWS call needs new ones: the credentials are renewed on demand.
        // The scenario, not a wait for something to happen: the first
        // credentials' 30 s lifetime passes.
        tokio::time::sleep(std::time::Duration::from_secs(35)).await;
        blobs.create(&PostParams::default(), &blob("after")).await.unwrap_or_else(|e| panic!("{e}"));
        wait_phase(&blobs, "after", Phase::Complete).await;
        assert!(assumed_with(second) > 0, "the credentials were not renewed with the rotated token");
        let failed = crate::support::failed_events(&client, &ns).await;
        assert!(failed.is_empty(), "Failed Events: {failed:?}");
        for name in ["before", "after"] {
            blobs.delete(name, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for name in ["before", "after"] {
            wait_deleted(&blobs, name, DEFAULT_TIMEOUT).await;
        }
        op.stop().await;
        let _ = std::fs::remove_file(&token_file);
        let _ = std::fs::remove_file(&expired);
    })
    .await;
}

/// AWS throttling for the whole life of three resources (issue #62): every
/// RDS and ElastiCache call naming the test's resources is answered with a
/// throttling error (RDS's `Throttling`, the query APIs' common
/// `ThrottlingException`) for two minutes, then every other one, and S3's
/// CreateBucket with `SlowDown` (503) twice, while a Postgres, a Redis and
/// a BlobStorage are created, snapshotted and deleted. The SDK retries, the
/// operator backs off and says why it waits: no CR is ever `failed`, all
/// complete and then go, and `cro_aws_api_calls_total` counts the
/// throttled calls.
#[tokio::test]
async fn sustained_throttling_slows_creation_and_fails_no_cr() {
    use crate::support::{clear_aws_fault, inject_aws_fault, inject_aws_fault_share};
    use cloud_resource_operator::api::{BlobStorage, PostgresSnapshot, Redis, RedisSnapshot};
    with_operator("throttled", |client, ns, op| async move {
        let tier = json!({"development": {"createStrategy": {}}}).to_string();
        apply_config_map(&client, &ns, "cloud-resources-aws-strategies", json!({"postgres": tier, "redis": tier, "blobstorage": tier})).await;
        let id = |name: &str| cloud_identifier("testcluster", &ns, name);
        let (rds, ec, s3) = (format!("{ns}-rds"), format!("{ns}-ec"), format!("{ns}-s3"));
        let throttled_from = std::time::Instant::now();
        let throttle = |every: u32| {
            inject_aws_fault_share(&rds, "rds", &id("db"), ("Throttling", 400, "Rate exceeded"), every);
            inject_aws_fault_share(&ec, "elasticache", &id("cache"), ("ThrottlingException", 400, "Rate exceeded"), every);
        };
        throttle(1);
        let bucket = format!("\"Bucket\": \"{}\"", id("bucket"));
        inject_aws_fault(&s3, "s3", "CreateBucket", &bucket, ("SlowDown", 503, "Please reduce your request rate."), Some(2));

        create_postgres(&client, &ns, "db", json!({})).await;
        let spec = |name: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
        let meta = |name: &str| json!({"name": name, "labels": {"productName": "orders"}});
        let cr = |kind: &str, name: &str, spec: Value| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": meta(name), "spec": spec});
        let _: Redis = crate::support::create_json(&client, &ns, cr("Redis", "cache", spec("cache"))).await;
        let _: BlobStorage = crate::support::create_json(&client, &ns, cr("BlobStorage", "bucket", spec("bucket"))).await;

        let (pgs, caches, blobs) = (Api::<Postgres>::namespaced(client.clone(), &ns), Api::<Redis>::namespaced(client.clone(), &ns), Api::<BlobStorage>::namespaced(client.clone(), &ns));
        let (pg_snaps, redis_snaps) = (Api::<PostgresSnapshot>::namespaced(client.clone(), &ns), Api::<RedisSnapshot>::namespaced(client.clone(), &ns));
        // Every CR's phase and message; a missing one is gone (`None`).
        type Phases = [Option<(Option<Phase>, String)>; 5];
        let phases = || async {
            let of = |o: Result<Option<(Option<Phase>, String)>, kube::Error>| o.unwrap_or_else(|e| panic!("{e}"));
            [
                of(pgs.get_opt("db").await.map(|o| o.map(|o| (o.phase(), o.message())))),
                of(caches.get_opt("cache").await.map(|o| o.map(|o| (o.phase(), o.message())))),
                of(blobs.get_opt("bucket").await.map(|o| o.map(|o| (o.phase(), o.message())))),
                of(pg_snaps.get_opt("db-snap").await.map(|o| o.map(|o| (o.phase(), o.message())))),
                of(redis_snaps.get_opt("cache-snap").await.map(|o| o.map(|o| (o.phase(), o.message())))),
            ]
        };
        // Waits until `done` holds for the phases, failing on any `failed`.
        let until = |what: &'static str, done: fn(&Phases) -> bool| {
            let phases = &phases;
            async move {
                // After two minutes of failures a CR's backoff reaches
                // minutes (5 s doubling, at most 300 s).
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(400);
                loop {
                    let now = phases().await;
                    for (phase, message) in now.iter().flatten() {
                        assert_ne!(*phase, Some(Phase::Failed), "a throttled call failed a CR: {message}");
                    }
                    if done(&now) {
                        return;
                    }
                    assert!(tokio::time::Instant::now() < deadline, "not {what} under throttling: {now:?}");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        };
        // Two minutes of nothing but throttling: the databases wait, saying
        // why, and never fail.
        let all_throttled = std::time::Duration::from_secs(120);
        let mut said_why = [false; 2];
        while throttled_from.elapsed() < all_throttled {
            let now = phases().await;
            for (phase, message) in now.iter().flatten() {
                assert_ne!(*phase, Some(Phase::Failed), "a throttled call failed a CR: {message}");
            }
            for (said, p) in said_why.iter_mut().zip(&now) {
                *said |= p.as_ref().is_some_and(|(phase, message)| *phase == Some(Phase::InProgress) && message.contains("AWS is throttling requests"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        assert_eq!(said_why, [true; 2], "the Postgres and the Redis said they were throttled: {:?}", phases().await);
        throttle(2);
        let lifted = std::time::Instant::now();
        fn complete(p: &Option<(Option<Phase>, String)>) -> bool {
            p.as_ref().is_none_or(|(phase, _)| *phase == Some(Phase::Complete))
        }
        until("all complete", |p| p[..3].iter().all(|p| p.is_some()) && p.iter().all(complete)).await;
        let completed_after = lifted.elapsed();

        // Snapshots of both databases, still throttled.
        let snapshot = |kind: &str, name: &str, of: &str| json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": {"resourceName": of}});
        let _: PostgresSnapshot = crate::support::create_json(&client, &ns, snapshot("PostgresSnapshot", "db-snap", "db")).await;
        let _: RedisSnapshot = crate::support::create_json(&client, &ns, snapshot("RedisSnapshot", "cache-snap", "cache")).await;
        until("all snapshots complete", |p| p.iter().all(|p| p.is_some()) && p.iter().all(complete)).await;

        // Everything deleted, still throttled.
        let dp = kube::api::DeleteParams::default();
        let deleted = [pg_snaps.delete("db-snap", &dp).await.map(|_| ()), redis_snaps.delete("cache-snap", &dp).await.map(|_| ()),
            pgs.delete("db", &dp).await.map(|_| ()), caches.delete("cache", &dp).await.map(|_| ()), blobs.delete("bucket", &dp).await.map(|_| ())];
        for d in deleted {
            d.unwrap_or_else(|e| panic!("{e}"));
        }
        until("all deleted", |p| p.iter().all(Option::is_none)).await;
        let throttled_for = throttled_from.elapsed();
        for fault in [&rds, &ec, &s3] {
            clear_aws_fault(fault);
        }

        // The throttled attempts, by service, as the operator counted them.
        let metrics = op.http_get("/metrics").await;
        let throttled = |service: &str| -> u64 {
            metrics
                .lines()
                .filter(|l| l.starts_with("cro_aws_api_calls_total{") && l.contains("outcome=\"throttled\""))
                .filter(|l| l.to_lowercase().contains(&format!("service=\"{service}\"")))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum()
        };
        // Backed off: a retry every second for the whole time would be
        // hundreds of throttled attempts per service, not tens.
        let throttled_secs = throttled_for.as_secs();
        for service in ["rds", "elasticache"] {
            assert!(throttled(service) < throttled_secs / 2, "{} throttled {service} attempts in {throttled_secs} s: no backoff", throttled(service));
        }
        for service in ["rds", "elasticache", "s3"] {
            assert!(throttled(service) > 0, "no throttled {service} call counted:\n{}", metrics.lines().filter(|l| l.starts_with("cro_aws_api_calls_total")).collect::<Vec<_>>().join("\n"));
        }
        println!(
            "throttled for {:.0} s (all calls for the first 120 s; complete {:.0} s after that): {} RDS, {} ElastiCache and {} S3 attempts throttled",
            throttled_for.as_secs_f64(),
            completed_after.as_secs_f64(),
            throttled("rds"),
            throttled("elasticache"),
            throttled("s3")
        );
    })
    .await;
}
