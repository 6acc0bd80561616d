//! What a platform engineer scrapes and reads: /metrics, /healthz, and
//! logs without secrets.

use cloud_resource_operator::api::{BlobStorage, Phase, Postgres};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, api::PostParams};
use serde_json::json;

use crate::support::{DEFAULT_TIMEOUT, assert_no_secret_in, wait_for, with_operator};

#[tokio::test]
async fn metrics_after_a_scenario_and_no_secret_in_the_logs() {
    with_operator("metrics", |client, ns, op| async move {
        let pg: Postgres = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let blob: BlobStorage = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "blob"},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "blob-sec"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        pgs.create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("{e}"));
        blobs.create(&PostParams::default(), &blob).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&pgs, "db", "complete", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;
        wait_for(&blobs, "blob", "complete", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        })
        .await;
        // A tier nobody defined: counted as an error with its label.
        let mut bad = pg.clone();
        bad.metadata.name = Some("bad".into());
        bad.spec.resource.tier = "gold".into();
        pgs.create(&PostParams::default(), &bad).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&pgs, "bad", "failed", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Failed)
        })
        .await;

        assert_eq!(op.http_get("/healthz").await, "ok");
        assert_eq!(op.http_get("/readyz").await, "ok");
        let metrics = op.http_get("/metrics").await;
        for want in [
            "cro_reconciles_total{kind=\"Postgres\"}".to_string(),
            "cro_reconcile_duration_seconds_bucket{".to_string(),
            // The Go operator's labels, so its alert rules keep matching.
            format!("cro_postgres_status_phase{{clusterID=\"testcluster\",resourceID=\"db\",namespace=\"{ns}\",instanceID=\"\",productName=\"\",strategy=\"openshift-postgres-template\",statusPhase=\"complete\"}} 1"),
            format!("cro_postgres_status_phase{{clusterID=\"testcluster\",resourceID=\"db\",namespace=\"{ns}\",instanceID=\"\",productName=\"\",strategy=\"openshift-postgres-template\",statusPhase=\"failed\"}} 0"),
            format!("cro_blobstorage_status_phase{{clusterID=\"testcluster\",resourceID=\"blob\",namespace=\"{ns}\",instanceID=\"{}\",productName=\"\",strategy=\"aws-s3\",statusPhase=\"complete\"}} 1", cro_provider_api::cloud_identifier("testcluster", &ns, "blob")),
            "cro_aws_api_calls_total{service=\"s3\",operation=\"CreateBucket\",outcome=\"success\"} 1".to_string(),
            "cro_time_to_ready_seconds_count{kind=\"Postgres\",provider=\"openshift\",tier=\"development\"} 1".to_string(),
            "cro_time_to_ready_seconds_count{kind=\"BlobStorage\",provider=\"aws\",tier=\"development\"} 1".to_string(),
            "cro_reconcile_errors_total{kind=\"Postgres\",error=\"config_invalid\"}".to_string(),
            "cro_leader 1".to_string(),
        ] {
            assert!(metrics.contains(&want), "missing {want} in:\n{metrics}");
        }

        let logs = op.logs();
        let span = format!("reconcile{{kind=Postgres namespace={ns} name=db}}");
        assert!(logs.contains(&span), "no line logged in the span {span}:\n{logs}");

        // Every credential the operator handled, absent from its log: the
        // credentials exist (so the check below has something to find).
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        for (secret, key) in [("db-sec", "password"), ("blob-sec", "credentialSecretKey"), ("blob-aws-s3-credentials", "secretAccessKey")] {
            let s = secrets.get(secret).await.unwrap_or_else(|e| panic!("{e}"));
            let value = s.data.and_then(|d| d.get(key).map(|v| String::from_utf8_lossy(&v.0).into_owned())).unwrap_or_default();
            assert!(value.len() >= 16, "{secret}/{key} looks empty");
        }
        assert_no_secret_in(&client, &ns, &logs).await;
    })
    .await;
}
