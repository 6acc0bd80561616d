//! The aws provider through the operator binary, against the moto AWS
//! emulator with the real aws-sdk clients.

use std::collections::BTreeMap;

use cloud_resource_operator::api::{Phase, Postgres};
use cro_provider_api::cloud_identifier;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::{Value, json};

use crate::support::{DEFAULT_TIMEOUT, TestEnv, wait_deleted, wait_for, with_operator};

async fn aws_strategies(client: &Client, ns: &str, postgres_tiers: Value) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cloud-resources-aws-strategies"},
        "data": {"postgres": postgres_tiers.to_string()}
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

async fn create_postgres(client: &Client, ns: &str, name: &str, extra: Value) {
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

async fn wait_phase(api: &Api<Postgres>, name: &str, phase: Phase) -> Postgres {
    wait_for(
        api,
        name,
        &format!("phase {}", phase.as_str()),
        DEFAULT_TIMEOUT,
        move |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(phase)
        },
    )
    .await
}

fn message(p: &Postgres) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

/// Any metadata change makes the operator look again.
async fn poke(api: &Api<Postgres>, name: &str, n: u32) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"test/poke": n.to_string()}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

async fn rds() -> aws_sdk_rds::Client {
    aws_sdk_rds::Client::new(&TestEnv::load().aws_config().await)
}

async fn instance(rds: &aws_sdk_rds::Client, id: &str) -> Option<aws_sdk_rds::types::DbInstance> {
    rds.describe_db_instances()
        .db_instance_identifier(id)
        .send()
        .await
        .ok()
        .and_then(|o| o.db_instances().first().cloned())
}

async fn tags(rds: &aws_sdk_rds::Client, arn: &str) -> BTreeMap<String, String> {
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

#[tokio::test]
async fn postgres_on_rds_from_create_to_final_snapshot() {
    with_operator("rds", |client, ns, _op| async move {
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"dbinstanceclass": "db.t3.micro", "AllocatedStorage": 30}}})).await;
        create_postgres(&client, &ns, "orders-db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
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
        wait_deleted(&pgs, "orders-db", DEFAULT_TIMEOUT).await;
        assert!(instance(&rds, &id).await.is_none(), "RDS instance {id} still exists");
        let snap = rds.describe_db_snapshots().db_snapshot_identifier(format!("{id}-final")).send().await.unwrap_or_else(|e| panic!("final snapshot: {e:?}"));
        let arn = snap.db_snapshots().first().and_then(|s| s.db_snapshot_arn()).unwrap_or_default().to_string();
        let have = tags(&rds, &arn).await;
        assert_eq!(have.get("integreatly.org/clusterID").map(String::as_str), Some("testcluster"), "{have:?}");
        assert!(Api::<Secret>::namespaced(client.clone(), &ns).get_opt("orders-db-aws-rds-credentials").await.unwrap_or_else(|e| panic!("{e}")).is_none());
    })
    .await;
}

#[tokio::test]
async fn a_bad_strategy_value_fails_naming_the_field() {
    with_operator("rdsbad", |client, ns, _op| async move {
        aws_strategies(
            &client,
            &ns,
            json!({
                "development": {"createStrategy": {"AllocatedStorage": "abc"}},
                "production": {"createStrategy": {"DBInstanceClas": "db.t3.micro"}}
            }),
        )
        .await;
        create_postgres(&client, &ns, "typed", json!({})).await;
        create_postgres(&client, &ns, "typo", json!({"tier": "production"})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let m = message(&wait_phase(&pgs, "typed", Phase::Failed).await);
        assert!(
            m.contains("cloud-resources-aws-strategies")
                && m.contains("createStrategy.AllocatedStorage must be an integer"),
            "{m}"
        );
        let m = message(&wait_phase(&pgs, "typo", Phase::Failed).await);
        assert!(
            m.contains("createStrategy.DBInstanceClas")
                && m.contains("did you mean DBInstanceClass?"),
            "{m}"
        );
    })
    .await;
}

#[tokio::test]
async fn out_of_band_changes_wait_for_the_maintenance_window_and_versions_only_go_up() {
    with_operator("rdsdrift", |client, ns, _op| async move {
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"DBInstanceClass": "db.t3.micro", "EngineVersion": "16.4"}}})).await;
        create_postgres(&client, &ns, "db", json!({})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        let id = cloud_identifier("testcluster", &ns, "db");
        let rds = rds().await;

        // Someone changes the class in the console.
        rds.modify_db_instance().db_instance_identifier(&id).db_instance_class("db.m5.large").apply_immediately(true).send().await.unwrap_or_else(|e| panic!("{e:?}"));
        poke(&pgs, "db", 1).await;
        let pg = wait_for(&pgs, "db", "drift reported", DEFAULT_TIMEOUT, |o: Option<&Postgres>| o.is_some_and(|o| message(o).contains("DBInstanceClass"))).await;
        assert!(message(&pg).contains("maintenanceWindow"), "{}", message(&pg));
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.db_instance_class().map(str::to_string)).as_deref(), Some("db.m5.large"), "changed outside the window");

        pgs.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"maintenanceWindow": true}}))).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&pgs, "db", "class corrected and complete", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete) && o.and_then(|o| o.status.as_ref()).and_then(|s| s.observed_generation) == Some(2)
        })
        .await;
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.db_instance_class().map(str::to_string)).as_deref(), Some("db.t3.micro"));

        // A lower engine version in the tier is never applied.
        aws_strategies(&client, &ns, json!({"development": {"createStrategy": {"DBInstanceClass": "db.t3.micro", "EngineVersion": "15.8"}}})).await;
        poke(&pgs, "db", 2).await;
        let pg = wait_phase(&pgs, "db", Phase::Complete).await;
        assert_eq!(instance(&rds, &id).await.and_then(|d| d.engine_version().map(str::to_string)).as_deref(), Some("16.4"));
        assert_eq!(pg.status.and_then(|s| s.version).as_deref(), Some("16.4"));
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
            message(&pg).contains("no longer exists"),
            "{}",
            message(&pg)
        );
        assert!(
            instance(&rds, &id).await.is_none(),
            "the instance was silently re-created"
        );
    })
    .await;
}
