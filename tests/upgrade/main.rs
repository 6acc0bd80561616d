//! Upgrade and downgrade with live CRs (issue #62): the operator of an
//! earlier commit (`EARLIER_OPERATOR_COMMIT` in tests/testenv/versions.env,
//! built by tests/testenv/earlier-operator.sh) serves AWS and in-cluster
//! CRs under its own CRDs; this build takes over under the current CRDs;
//! then the earlier one again, under the current CRDs still (a Helm
//! rollback leaves `crds/` as they are). Across both switches every CR
//! stays `complete`, no in-cluster Deployment rolls, and no AWS resource is
//! created, modified or deleted; deleting the namespace then completes.
//! A test binary of its own, which cargo runs after the others: it
//! changes the CRDs, and `make test` builds the earlier operator while the
//! other suites run.

#[path = "../support/mod.rs"]
mod support;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, SMTPCredentialSet,
};
use kube::{Api, Client, ResourceExt, api::ListParams};
use serde_json::json;

use support::{
    DEFAULT_TIMEOUT, Launch, Operator, Phased, TestEnv, aws_writes, create_json, create_namespace,
    earlier_operator, ensure_crds, ensure_crds_in, generations, not_reconciled,
};

/// The CRs of the test: every kind on AWS (and a Postgres snapshot), and
/// the in-cluster databases and bucket.
const AWS: [(&str, &str); 4] = [
    ("Postgres", "pg"),
    ("Redis", "cache"),
    ("BlobStorage", "bucket"),
    ("SMTPCredentialSet", "mail"),
];
const IN_CLUSTER: [(&str, &str); 3] = [
    ("Postgres", "local-pg"),
    ("Redis", "local-cache"),
    ("BlobStorage", "local-bucket"),
];

/// Creates the CR `kind`/`name` of deployment type `type_`, tier
/// `development`, publishing `<name>-sec`.
async fn create(client: &Client, ns: &str, kind: &str, name: &str, type_: &str) {
    let cr = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind, "metadata": {"name": name},
           "spec": {"type": type_, "tier": "development", "secretRef": {"name": format!("{name}-sec")}}});
    match kind {
        "Postgres" => drop(create_json::<Postgres>(client, ns, cr).await),
        "Redis" => drop(create_json::<Redis>(client, ns, cr).await),
        "BlobStorage" => drop(create_json::<BlobStorage>(client, ns, cr).await),
        _ => drop(create_json::<SMTPCredentialSet>(client, ns, cr).await),
    }
}

/// Every CR's phase, by `Kind/name`.
async fn phases(client: &Client, ns: &str) -> BTreeMap<String, Option<Phase>> {
    async fn of<K>(client: &Client, ns: &str, out: &mut BTreeMap<String, Option<Phase>>)
    where
        K: Phased
            + kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        let list = Api::<K>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing {}: {e}", K::kind(&())));
        for item in list.items {
            out.insert(
                format!("{}/{}", K::kind(&()), item.name_any()),
                item.phase(),
            );
        }
    }
    let mut out = BTreeMap::new();
    of::<Postgres>(client, ns, &mut out).await;
    of::<Redis>(client, ns, &mut out).await;
    of::<BlobStorage>(client, ns, &mut out).await;
    of::<SMTPCredentialSet>(client, ns, &mut out).await;
    of::<PostgresSnapshot>(client, ns, &mut out).await;
    out
}

/// Waits up to 300 s until every CR is complete.
async fn all_complete(client: &Client, ns: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    loop {
        let now = phases(client, ns).await;
        if now.values().all(|p| *p == Some(Phase::Complete)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not complete in 300 s: {now:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until `operator` has finished a reconcile without error of every
/// CR (its log says so), checking meanwhile that every CR stays complete.
async fn served_by(client: &Client, ns: &str, operator: &Operator, names: &[String], who: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let now = phases(client, ns).await;
        let not_complete: Vec<_> = now
            .iter()
            .filter(|(_, p)| **p != Some(Phase::Complete))
            .collect();
        assert!(
            not_complete.is_empty(),
            "under {who}, CRs left complete: {not_complete:?}"
        );
        let log = operator.logs();
        let unseen = not_reconciled(&log, ns, names);
        if unseen.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{who} did not reconcile {unseen:?} without error in 180 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn launch(ns: &str, binary: Option<PathBuf>, log: &str) -> Launch {
    Launch {
        log_name: format!("operator-{ns}-{log}.log"),
        binary,
        ..Launch::new(ns)
    }
}

#[tokio::test]
async fn the_earlier_operator_and_this_one_take_over_from_each_other() {
    // Waits for make test's build of it, or builds it: outside the test's
    // time limit.
    let (binary, crds) = earlier_operator();
    support::bounded("the_earlier_operator_and_this_one_take_over_from_each_other", async move {
    let client = TestEnv::load().client().await;
    ensure_crds_in(&client, &crds).await;
    let ns = create_namespace(&client, "upgrade").await;

    // The earlier operator makes them.
    let moto_log = TestEnv::load().moto_request_log;
    let mut created = std::fs::metadata(&moto_log).map(|m| m.len()).unwrap_or(0);
    let mut earlier = Operator::launch(launch(&ns, Some(binary.clone()), "earlier")).await;
    for (kind, name) in AWS {
        create(&client, &ns, kind, name, "managed").await;
    }
    for (kind, name) in IN_CLUSTER {
        create(&client, &ns, kind, name, "workshop").await;
    }
    let mut names: Vec<String> = AWS.iter().chain(IN_CLUSTER.iter()).map(|(k, n)| format!("{k}/{n}")).collect();
    all_complete(&client, &ns, "made by the earlier operator").await;
    create_json::<PostgresSnapshot>(&client, &ns, json!({
        "apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot", "metadata": {"name": "backup"},
        "spec": {"resourceName": "pg"}
    }))
    .await;
    names.push("PostgresSnapshot/backup".into());
    all_complete(&client, &ns, "the snapshot taken by the earlier operator").await;
    served_by(&client, &ns, &earlier, &names, "the earlier operator").await;
    earlier.terminate(DEFAULT_TIMEOUT).await;
    // Positive control: the emulator's log shows the writes that made them.
    let writes = aws_writes(&mut created, "");
    for made in ["CreateDBInstance", "CreateReplicationGroup", "CreateDBSnapshot", "CreateUser", "CreateAccessKey"] {
        assert!(writes.iter().any(|w| w == made), "no {made} among the AWS writes that made the CRs: {writes:?}");
    }
    let rolled = generations(&client, &ns).await;
    assert!(rolled.len() >= 2, "no in-cluster Deployments: {rolled:?}");

    // Upgrade: the current CRDs over the stored objects, this build.
    let mut offset = std::fs::metadata(&moto_log).map(|m| m.len()).unwrap_or(0);
    ensure_crds(&client).await;
    let mut current = Operator::launch(launch(&ns, None, "current")).await;
    served_by(&client, &ns, &current, &names, "this operator").await;
    assert_eq!(generations(&client, &ns).await, rolled, "a Deployment rolled at the upgrade");
    assert_eq!(aws_writes(&mut offset, ""), Vec::<String>::new(), "AWS writes at the upgrade");
    current.terminate(DEFAULT_TIMEOUT).await;

    // Downgrade: the earlier operator again, the CRDs left current.
    let mut again = Operator::launch(launch(&ns, Some(binary), "earlier-again")).await;
    served_by(&client, &ns, &again, &names, "the earlier operator again").await;
    assert_eq!(generations(&client, &ns).await, rolled, "a Deployment rolled at the downgrade");
    assert_eq!(aws_writes(&mut offset, ""), Vec::<String>::new(), "AWS writes at the downgrade");
    again.terminate(DEFAULT_TIMEOUT).await;

    // This build once more, and the namespace deleted with everything in it.
    let current = Operator::launch(launch(&ns, None, "current-again")).await;
    served_by(&client, &ns, &current, &names, "this operator again").await;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    namespaces.delete(&ns, &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while namespaces.get_opt(&ns).await.ok().flatten().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "namespace {ns} still there 300 s after its deletion");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    current.stop().await;
    })
    .await;
}
