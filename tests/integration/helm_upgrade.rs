//! `helm upgrade` and `helm rollback` with live CRs (issue #62): the chart
//! and image of an earlier commit (`EARLIER_OPERATOR_COMMIT`, its image
//! built by deploy/image/build.sh from that commit's binary) serve a
//! workshop Postgres on the real node and an AWS BlobStorage; the CRDs are
//! applied and the release upgraded to this chart and image, as
//! docs/upgrade.md says; then rolled back. Across both, the pods roll to
//! the other image, every CR stays `complete` and is reconciled without
//! error by the version that leads, no in-cluster Deployment rolls and no
//! AWS write is made. tests/upgrade/main.rs holds the same over every kind
//! with the binaries run directly, under the earlier CRDs first.

use std::{path::Path, process::Command, time::Duration};

use cloud_resource_operator::api::{BlobStorage, Phase, Postgres};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, api::ListParams};
use serde_json::json;

use crate::deploy::{repo, run};
use crate::install::{START, cleaned_up, environment, one_leads, operator_logs, prepared};
use crate::support::{
    Phased, TestEnv, aws_writes, compact, create_json, earlier_operator, generations,
    not_reconciled, wait_deleted,
};

const RELEASE: &str = "cro-upgrade";

/// The image of `binary` under another name than the build's, loaded into
/// the real node; its digest.
fn image_of(binary: &Path, name: &str) -> String {
    let archive = repo().join(format!("target/image/{name}.tar"));
    let out = Command::new(repo().join("deploy/image/build.sh"))
        .arg(binary)
        .env(
            "IMAGE_NAME",
            format!("docker.io/library/cloud-resource-operator:{name}"),
        )
        .env("IMAGE_OUT", &archive)
        .output()
        .unwrap_or_else(|e| panic!("deploy/image/build.sh: {e}"));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "build.sh {}: {said}{}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = crate::install::printed_digest(&said);
    let archive = archive.to_string_lossy().into_owned();
    run(
        &repo().join("tests/testenv/testenv.sh"),
        &["load-image", &archive],
    );
    digest
}

/// Waits until the operator's pods are two Ready pods of image `digest`
/// and no other, and one of them holds the Lease.
async fn rolled_out(client: &Client, ns: &str, digest: &str, what: &str) {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let selector = ListParams::default().labels("app.kubernetes.io/name=cloud-resource-operator");
    let deadline = tokio::time::Instant::now() + START;
    let ready = loop {
        let listed = pods
            .list(&selector)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items;
        let ready_of_digest = |p: &Pod| {
            let status = p.status.as_ref();
            let ready = (status.and_then(|s| s.conditions.as_ref()))
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let image = (status.and_then(|s| s.container_statuses.as_ref()))
                .and_then(|c| c.first())
                .map(|c| c.image_id.clone());
            ready
                && p.metadata.deletion_timestamp.is_none()
                && image.is_some_and(|i| i.ends_with(&format!("@{digest}")))
        };
        if listed.len() == 2 && listed.iter().all(ready_of_digest) {
            break listed;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the operator's pods are not two Ready pods of {digest} within {START:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    one_leads(client, ns, &ready).await;
}

/// Every CR's phase, by `Kind/name`.
async fn phases(client: &Client, ns: &str) -> Vec<(String, Option<Phase>)> {
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await;
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await;
    let mut out = Vec::new();
    for pg in pgs.unwrap_or_else(|e| panic!("{e}")).items {
        out.push((
            format!("Postgres/{}", pg.metadata.name.clone().unwrap_or_default()),
            pg.phase(),
        ));
    }
    for blob in blobs.unwrap_or_else(|e| panic!("{e}")).items {
        out.push((
            format!(
                "BlobStorage/{}",
                blob.metadata.name.clone().unwrap_or_default()
            ),
            blob.phase(),
        ));
    }
    out
}

/// Waits until the operator's pods have logged a reconcile without error
/// of each CR (`names`: `Kind/name`), checking meanwhile that every CR
/// stays complete.
async fn served(
    client: &Client,
    env: &TestEnv,
    operator_ns: &str,
    app_ns: &str,
    names: &[&str],
    who: &str,
) {
    let deadline = tokio::time::Instant::now() + START;
    loop {
        let left: Vec<_> = phases(client, app_ns)
            .await
            .into_iter()
            .filter(|(_, p)| *p != Some(Phase::Complete))
            .collect();
        assert!(left.is_empty(), "under {who}, CRs left complete: {left:?}");
        let log = Command::new(&env.kubectl)
            .args([
                "--kubeconfig",
                &env.kubeconfig.to_string_lossy(),
                "-n",
                operator_ns,
                "logs",
                "-l",
                "app.kubernetes.io/name=cloud-resource-operator",
                "--tail=-1",
            ])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let unseen = not_reconciled(&log, app_ns, names);
        if unseen.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{who} did not reconcile {unseen:?} without error in {START:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What the earlier release's chart lacks to serve CRs where the API server
/// enforces owner-reference permissions (OpenShift, and this environment):
/// that release set `blockOwnerDeletion`, which needs `update` on the CR
/// kinds' `finalizers`, and its RBAC did not grant it (b8679db dropped the
/// block). A user of that release on OpenShift granted it so; the test
/// does the same, named after the operator namespace. Returns its name.
async fn grant_earlier_release_finalizers(client: &Client, operator_ns: &str) -> String {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = format!("{operator_ns}-earlier-finalizers");
    let kinds = [
        "postgres",
        "redis",
        "blobstorages",
        "smtpcredentialsets",
        "postgressnapshots",
        "redissnapshots",
    ];
    let resources: Vec<String> = kinds.iter().map(|k| format!("{k}/finalizers")).collect();
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": name},
        "rules": [{"apiGroups": ["integreatly.org"], "resources": resources, "verbs": ["update"]}]}))
    .unwrap_or_else(|e| panic!("{e}"));
    let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": RELEASE, "namespace": operator_ns}]}))
    .unwrap_or_else(|e| panic!("{e}"));
    let params = kube::api::PostParams::default();
    Api::<ClusterRole>::all(client.clone())
        .create(&params, &role)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&params, &binding)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    name
}

#[tokio::test]
async fn helm_upgrade_and_rollback_from_an_earlier_release_keep_live_crs_complete() {
    // Outside the time limit: make test builds it while the suites run.
    let (earlier, _) = earlier_operator();
    let earlier_chart = earlier
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("deploy/helm"))
        .unwrap_or_else(|| panic!("no directory above {}", earlier.display()));
    crate::support::bounded("helm_upgrade_and_rollback_from_an_earlier_release_keep_live_crs_complete", async move {
        let (_node, env, client, pod_aws) = environment().await;
        let (operator_ns, app_ns, digest) = prepared(&client, "cro-upgrade", "cro-upgrade-app").await;
        let earlier_digest = image_of(&earlier, "earlier");
        let grant = grant_earlier_release_finalizers(&client, &operator_ns).await;
        let helm = env.helm.clone();
        // What both charts take; the digest pins each image.
        let values = |digest: &str| {
            let mut v = vec![
                format!("image.digest={digest}"),
                "image.pullPolicy=Never".into(),
                // Cluster-scoped names of its own, beside install.rs's release.
                format!("fullnameOverride={RELEASE}"),
                format!("operator.watchNamespaces={{{app_ns}}}"),
                format!("operator.awsRegion={}", env.aws_region),
                "operator.logFormat=text".into(),
                "extraEnv[0].name=AWS_ENDPOINT_URL".into(),
                format!("extraEnv[0].value={pod_aws}"),
                // Each reconcile's end, which `served` reads.
                "extraEnv[1].name=RUST_LOG".into(),
                "extraEnv[1].value=info\\,cloud_resource_operator=debug".into(),
                "monitoring.prometheusRule.enabled=false".into(),
            ];
            v.iter_mut().for_each(|s| s.insert_str(0, "--set="));
            v.sort();
            v
        };
        let helm_run = |verb: &[&str], chart: Option<&str>, digest: Option<&str>| {
            let mut args: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
            args.extend(chart.map(str::to_string));
            args.extend(["--namespace".to_string(), operator_ns.clone(), "--wait".into()]);
            args.extend(digest.map(values).unwrap_or_default());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&helm, &args);
        };
        let result = std::panic::AssertUnwindSafe(async {
            let chart = earlier_chart.to_string_lossy().into_owned();
            helm_run(&["install", RELEASE], Some(&chart), Some(&earlier_digest));
            rolled_out(&client, &operator_ns, &earlier_digest, "the earlier release").await;
            let mut offset = std::fs::metadata(&env.moto_request_log).map(|m| m.len()).unwrap_or(0);
            let _: Postgres = create_json(&client, &app_ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
                "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}})).await;
            let _: BlobStorage = create_json(&client, &app_ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "files"},
                "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "files-sec"}}})).await;
            let names = ["Postgres/db", "BlobStorage/files"];
            let deadline = tokio::time::Instant::now() + START;
            while phases(&client, &app_ns).await.iter().any(|(_, p)| *p != Some(Phase::Complete)) {
                assert!(tokio::time::Instant::now() < deadline, "not complete under the earlier release: {:?}", phases(&client, &app_ns).await);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            served(&client, &env, &operator_ns, &app_ns, &names, "the earlier release").await;
            let rolled = generations(&client, &app_ns).await;
            assert!(!rolled.is_empty(), "no in-cluster Deployment");
            // Positive control: the emulator's log shows the pods' writes
            // that made the bucket's user and key.
            let writes = aws_writes(&mut offset, &compact(&app_ns));
            for made in ["CreateUser", "CreateAccessKey"] {
                assert!(writes.iter().any(|w| w == made), "no {made} among the AWS writes that made the CRs: {writes:?}");
            }

            // Upgrade as docs/upgrade.md says: the CRDs, then the chart.
            let crds = repo().join("deploy/helm/crds").to_string_lossy().into_owned();
            run(&env.kubectl, &["apply", "--server-side", "--force-conflicts", "-f", &crds]);
            let chart = repo().join("deploy/helm").to_string_lossy().into_owned();
            helm_run(&["upgrade", RELEASE], Some(&chart), Some(&digest));
            rolled_out(&client, &operator_ns, &digest, "the upgrade").await;
            served(&client, &env, &operator_ns, &app_ns, &names, "this release").await;
            assert_eq!(generations(&client, &app_ns).await, rolled, "a Deployment rolled at the upgrade");
            assert_eq!(aws_writes(&mut offset, &compact(&app_ns)), Vec::<String>::new(), "AWS writes at the upgrade");

            // Rollback: the earlier chart and image, the CRDs left current.
            helm_run(&["rollback", RELEASE, "1"], None, None);
            rolled_out(&client, &operator_ns, &earlier_digest, "the rollback").await;
            served(&client, &env, &operator_ns, &app_ns, &names, "the earlier release again").await;
            assert_eq!(generations(&client, &app_ns).await, rolled, "a Deployment rolled at the rollback");
            assert_eq!(aws_writes(&mut offset, &compact(&app_ns)), Vec::<String>::new(), "AWS writes at the rollback");

            // The release rolled back to deletes what it serves.
            let pgs = Api::<Postgres>::namespaced(client.clone(), &app_ns);
            let blobs = Api::<BlobStorage>::namespaced(client.clone(), &app_ns);
            pgs.delete("db", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            blobs.delete("files", &Default::default()).await.unwrap_or_else(|e| panic!("{e}"));
            wait_deleted(&pgs, "db", START).await;
            wait_deleted(&blobs, "files", START).await;
        });
        let outcome = futures::FutureExt::catch_unwind(result).await;
        let logs = operator_logs(&env, &operator_ns);
        let _ = Command::new(&helm)
            .args(["uninstall", RELEASE, "--namespace", &operator_ns, "--wait"])
            .env("KUBECONFIG", &env.kubeconfig)
            .output();
        let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(client.clone()).delete(&grant, &Default::default()).await;
        let _ = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone()).delete(&grant, &Default::default()).await;
        cleaned_up(&client, &[&operator_ns, &app_ns], outcome, logs).await;
    })
    .await;
}
