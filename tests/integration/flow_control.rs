//! API Priority and Fairness as a crowded cluster applies it: the
//! operator's identity put in a priority level of its own with the
//! smallest share and no queue, so the API server turns its requests away
//! with HTTP 429 and `Retry-After` whenever its few seats are taken
//! (reads, writes, watches and its Lease alike). Every CR still completes,
//! none fails, the operator keeps its leadership, and the audit log shows
//! the 429s it was given (issue #62: docs/operations.md claimed this
//! tested on unit level only).

use std::time::Duration;

use cloud_resource_operator::api::{BlobStorage, Phase};
use k8s_openapi::api::{
    core::v1::Event,
    flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration},
    rbac::v1::ClusterRoleBinding,
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

use crate::support::{
    Launch, Operator, audited_requests_of, cluster_admin_account, ensure_crds, with_namespace,
};

const CRS: usize = 100;

/// A priority level of one share (about three seats of the server's 600)
/// that rejects rather than queues, and the flow schema that puts the
/// ServiceAccount `account` of `ns` in it ahead of every other schema but
/// the exempt one.
async fn squeeze(client: &kube::Client, ns: &str, account: &str) -> String {
    let name = format!("cro-squeezed-{ns}");
    let level: PriorityLevelConfiguration = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "lendablePercent": 0,
            "limitResponse": {"type": "Reject"}}}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<PriorityLevelConfiguration>::all(client.clone())
        .create(&PostParams::default(), &level)
        .await
        .unwrap_or_else(|e| panic!("creating PriorityLevelConfiguration {name}: {e}"));
    let schema: FlowSchema = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 2,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{
                "subjects": [{"kind": "ServiceAccount",
                    "serviceAccount": {"name": account, "namespace": ns}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
            }]
        }
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<FlowSchema>::all(client.clone())
        .create(&PostParams::default(), &schema)
        .await
        .unwrap_or_else(|e| panic!("creating FlowSchema {name}: {e}"));
    name
}

#[tokio::test]
async fn a_squeezed_priority_level_slows_the_operator_and_fails_nothing() {
    with_namespace("apf", |client, ns| async move {
        ensure_crds(&client).await;
        let (kubeconfig, user) = cluster_admin_account(&client, &ns, "squeezed").await;
        let squeezed = squeeze(&client, &ns, "squeezed").await;
        let op = Operator::launch(Launch {
            kubeconfig: Some(kubeconfig),
            ..Launch::new(&ns)
        })
        .await;
        let names: Vec<String> = (0..CRS).map(|i| format!("blob-{i}")).collect();
        crate::support::create_workshop_blobs(&client, &ns, &names).await;
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
        loop {
            let list = blobs
                .list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let phases: Vec<Option<Phase>> = list
                .items
                .iter()
                .map(|b| b.status.as_ref().and_then(|s| s.phase))
                .collect();
            assert!(
                !phases.contains(&Some(Phase::Failed)),
                "a CR failed under throttling: {phases:?}"
            );
            let complete = phases
                .iter()
                .filter(|p| **p == Some(Phase::Complete))
                .count();
            if complete == CRS {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{complete} of {CRS} BlobStorage complete after 300 s"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // The squeeze happened: the API server turned the operator away.
        let rejected: Vec<_> = audited_requests_of(&user)
            .into_iter()
            .filter(|r| r.code == 429)
            .collect();
        assert!(
            !rejected.is_empty(),
            "no request of {user} was turned away with 429: the squeeze tested nothing"
        );
        eprintln!(
            "{} requests of the operator turned away with 429, e.g. {:?}",
            rejected.len(),
            &rejected[..rejected.len().min(5)]
        );
        let events = Api::<Event>::namespaced(client.clone(), &ns);
        let warnings: Vec<String> = (events.list(&ListParams::default()).await)
            .unwrap_or_else(|e| panic!("{e}"))
            .items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .map(|e| format!("{:?}: {:?}", e.reason, e.message))
            .collect();
        assert!(
            warnings.is_empty(),
            "throttling is no failure to warn of: {warnings:?}"
        );
        let logs = op.logs();
        assert!(
            !logs.contains("lost leadership"),
            "leadership lost under throttling:\n{logs}"
        );
        op.stop().await;
        Api::<FlowSchema>::all(client.clone())
            .delete(&squeezed, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<PriorityLevelConfiguration>::all(client.clone())
            .delete(&squeezed, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<ClusterRoleBinding>::all(client.clone())
            .delete(&format!("squeezed-{ns}"), &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    })
    .await;
}
