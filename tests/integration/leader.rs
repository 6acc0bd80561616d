//! Two replicas: only the leader reconciles; the standby takes over when
//! the leader dies (after the lease duration) or stops (at once, since a
//! stopping leader releases its Lease); a leader that loses its Lease
//! stops at once.

use std::time::Duration;

use cloud_resource_operator::api::{Phase, Postgres};
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, Launch, Operator, assert_no_secret_in, ensure_crds, wait_deleted, wait_for,
    with_namespace,
};

const LEADING: &str = "became the leader";
const WAITING: &str = "waiting to become the leader";

/// A replica with the given lease duration (renewal deadline and retry
/// period scaled down from it).
async fn replica(ns: &str, name: &str, lease_seconds: u64) -> Operator {
    let mut launch = Launch::new(ns);
    launch.log_name = format!("operator-{ns}-{name}.log");
    launch.extra_args.extend([
        format!("--leader-election-lease-duration={lease_seconds}"),
        format!("--leader-election-renew-deadline={}", lease_seconds * 3 / 4),
        "--leader-election-retry-period=1".to_string(),
    ]);
    Operator::launch(launch).await
}

fn postgres(name: &str) -> Postgres {
    serde_json::from_value(json!({
        "apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": name},
        "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}
    }))
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn wait_complete(api: &Api<Postgres>, name: &str) {
    wait_for(
        api,
        name,
        "complete",
        DEFAULT_TIMEOUT,
        |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase) == Some(Phase::Complete)
        },
    )
    .await;
}

/// A leader, and a standby that saw the Lease taken.
async fn leader_and_standby(ns: &str, lease_seconds: u64) -> (Operator, Operator) {
    let first = replica(ns, "a", lease_seconds).await;
    first.wait_log(LEADING, DEFAULT_TIMEOUT).await;
    let second = replica(ns, "b", lease_seconds).await;
    second.wait_log(WAITING, DEFAULT_TIMEOUT).await;
    (first, second)
}

async fn create(pgs: &Api<Postgres>, name: &str) {
    pgs.create(&PostParams::default(), &postgres(name))
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

/// Deletes the CRs and waits until their finalizers are done.
async fn delete_all(pgs: &Api<Postgres>, names: &[&str]) {
    for name in names {
        pgs.delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    }
    for name in names {
        wait_deleted(pgs, name, DEFAULT_TIMEOUT).await;
    }
}

fn lease_api(client: &kube::Client) -> Api<Lease> {
    Api::namespaced(client.clone(), "default")
}

async fn holder(client: &kube::Client, ns: &str) -> Option<String> {
    lease_api(client)
        .get_opt(&format!("cro-{ns}"))
        .await
        .unwrap_or_else(|e| panic!("reading the Lease: {e}"))
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn the_standby_takes_over_when_the_leader_dies_and_finishes_new_work() {
    with_namespace("leader-dies", |client, ns| async move {
        ensure_crds(&client).await;
        let (mut first, mut second) = leader_and_standby(&ns, 4).await;

        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        create(&pgs, "before").await;
        wait_complete(&pgs, "before").await;
        assert!(
            first.reconciles_of("before") > 0,
            "the leader did not reconcile"
        );
        assert_eq!(
            second.reconciles_of("before"),
            0,
            "the standby reconciled:\n{}",
            second.logs()
        );
        assert!(!second.logs().contains(LEADING), "both replicas lead");

        // A crash: no release, the Lease must expire.
        first.kill().await;
        create(&pgs, "after").await;
        second.wait_log(LEADING, DEFAULT_TIMEOUT).await;
        wait_complete(&pgs, "after").await;
        assert!(
            second.reconciles_of("after") > 0,
            "the new leader did not reconcile"
        );

        for op in [&first, &second] {
            assert_no_secret_in(&client, &ns, &op.logs()).await;
        }
        // The new leader also honours the finalizers the old one added.
        delete_all(&pgs, &["before", "after"]).await;
        let status = second.terminate(DEFAULT_TIMEOUT).await;
        assert!(status.success(), "exit status {status}");
    })
    .await;
}

#[tokio::test]
async fn a_stopping_leader_releases_the_lease_so_the_standby_leads_at_once() {
    with_namespace("leader-stops", |client, ns| async move {
        ensure_crds(&client).await;
        // A lease far longer than the wait below: only a release can
        // explain a prompt takeover.
        let (mut first, mut second) = leader_and_standby(&ns, 60).await;

        // Stopped mid-work: whatever it left, the next leader finishes.
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let names = ["one", "two", "three"];
        for name in names {
            create(&pgs, name).await;
        }
        first.wait_log("reconciled", DEFAULT_TIMEOUT).await;
        let status = first.terminate(DEFAULT_TIMEOUT).await;
        assert!(
            status.success(),
            "SIGTERM: exit status {status}:\n{}",
            first.logs()
        );
        assert!(
            first.logs().contains("released the Lease"),
            "{}",
            first.logs()
        );
        second.wait_log(LEADING, Duration::from_secs(20)).await;
        let now_holding = holder(&client, &ns).await.unwrap_or_default();
        assert!(
            second.logs().contains(&now_holding) && !now_holding.is_empty(),
            "the Lease is held by {now_holding:?}, not the standby"
        );
        for name in names {
            wait_complete(&pgs, name).await;
            let secret = Api::<Secret>::namespaced(client.clone(), &ns)
                .get(&format!("{name}-sec"))
                .await
                .unwrap_or_else(|e| panic!("{name}-sec: {e}"));
            assert_eq!(
                secret.data.map(|d| d.len()),
                Some(5),
                "{name}-sec is incomplete"
            );
        }
        for op in [&first, &second] {
            assert_no_secret_in(&client, &ns, &op.logs()).await;
        }
        delete_all(&pgs, &names).await;
        let status = second.terminate(DEFAULT_TIMEOUT).await;
        assert!(status.success(), "exit status {status}");
        // A wake-up queued for a CR that is gone by its turn (its owned
        // objects' deletions) is not an error to warn about.
        assert!(
            !second.logs().contains("not found in local store"),
            "{}",
            second.logs()
        );
        assert_eq!(
            holder(&client, &ns).await,
            None,
            "the last leader kept the Lease"
        );
    })
    .await;
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_at_once() {
    with_namespace("leader-lost", |client, ns| async move {
        ensure_crds(&client).await;
        let mut leader = replica(&ns, "a", 60).await;
        leader.wait_log(LEADING, DEFAULT_TIMEOUT).await;

        // Another holder appears (as after a network partition healed).
        let now = MicroTime(Timestamp::now());
        lease_api(&client)
            .patch(
                &format!("cro-{ns}"),
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"holderIdentity": "someone-else", "renewTime": now}}),
                ),
            )
            .await
            .unwrap_or_else(|e| panic!("taking the Lease: {e}"));
        let status = leader.wait_exit(Duration::from_secs(20)).await;
        assert!(
            !status.success(),
            "a leader that lost its Lease exited successfully"
        );
        assert!(
            leader.logs().contains("lost leadership"),
            "{}",
            leader.logs()
        );
        assert_eq!(holder(&client, &ns).await.as_deref(), Some("someone-else"));
    })
    .await;
}

/// The Go operator's Lease as controller-runtime's leader election keeps it
/// (main.go `LeaderElectionID`, leaseDurationSeconds 15, renewed every 2 s
/// while it runs), written in `ns` until `stop` is set.
fn go_operator_leading(
    client: &kube::Client,
    ns: &str,
    holder: &str,
) -> tokio::sync::watch::Sender<bool> {
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = holder.to_string();
    tokio::spawn(async move {
        loop {
            let now = MicroTime(Timestamp::now());
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "ce8de7ea.integreatly.org"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": now, "acquireTime": now}});
            let _ = leases
                .patch(
                    "ce8de7ea.integreatly.org",
                    &PatchParams::apply("go-operator").force(),
                    &Patch::Apply(lease),
                )
                .await;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
                _ = stopped.changed() => return,
            }
        }
    });
    stop
}

/// Waits until the Go operator's Lease in `ns` has been renewed `times`
/// more times: the operator has had that many election rounds meanwhile.
async fn go_renewals(client: &kube::Client, ns: &str, times: usize) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let renew_time = || async {
        let lease = leases
            .get_opt("ce8de7ea.integreatly.org")
            .await
            .ok()
            .flatten();
        lease.and_then(|l| l.spec?.renew_time)
    };
    let (mut last, mut seen) = (renew_time().await, 0);
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    while seen < times {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Go Lease was not renewed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = renew_time().await;
        if now != last {
            (last, seen) = (now, seen + 1);
        }
    }
}

/// A live Go operator (its Lease renewed) keeps this one from leading, so
/// the two never write the same resources; once it stops, this one leads
/// and completes the waiting CR; a Go operator that comes back (OLM
/// reinstalling it) makes the leader stop at once.
#[tokio::test]
async fn no_leading_while_a_go_operator_holds_its_lease() {
    with_namespace("leader-go", |client, ns| async move {
        ensure_crds(&client).await;
        let go = go_operator_leading(&client, &ns, "cloud-resource-operator-7d9f_1a2b");
        let mut op = replica(&ns, "a", 5).await;
        op.wait_log(
            "not leading: the Go cloud-resource-operator leads",
            DEFAULT_TIMEOUT,
        )
        .await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        create(&pgs, "db").await;
        // Several election rounds (one a second) pass with the CR there.
        go_renewals(&client, &ns, 3).await;
        assert!(
            !op.logs().contains(LEADING),
            "led beside a live Go operator"
        );
        let untouched = pgs.get("db").await.unwrap_or_else(|e| panic!("{e}"));
        let touched = untouched.status.is_some() || untouched.metadata.finalizers.is_some();
        assert!(
            !touched,
            "the CR was touched beside a live Go operator: {untouched:?}"
        );

        // The Go operator stops: its Lease stands still for its duration.
        go.send_replace(true);
        op.wait_log(LEADING, Duration::from_secs(60)).await;
        wait_complete(&pgs, "db").await;

        // It comes back: the leader stops reconciling and exits.
        let back = go_operator_leading(&client, &ns, "cloud-resource-operator-7d9f_3c4d");
        let status = op.wait_exit(Duration::from_secs(30)).await;
        assert!(
            !status.success(),
            "a leader beside a Go operator exited successfully"
        );
        let logs = op.logs();
        assert!(
            logs.contains("lost leadership (the Go cloud-resource-operator leads"),
            "{logs}"
        );

        // Gone for good (its Lease deleted with its namespace or by hand).
        back.send_replace(true);
        let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
        leases
            .delete("ce8de7ea.integreatly.org", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let after = replica(&ns, "b", 5).await;
        after.wait_log(LEADING, DEFAULT_TIMEOUT).await;
        delete_all(&pgs, &["db"]).await;
    })
    .await;
}

/// RHOAM's layout seen by an operator that watches more than it: the Go
/// operator runs in a namespace of its own and writes only there. Whoever
/// may write that namespace could have made its Lease, so a Go trace there
/// holds back that namespace only, never the whole operator: a tenant
/// cannot stop it for everyone (a Subscription to the Go package in a
/// tenant's namespace neither). This operator leads, completes a CR of its
/// own namespace, leaves the CRs of the other two alone while their traces
/// stand, and completes each once its trace is gone.
#[tokio::test]
async fn a_go_trace_in_another_namespace_holds_back_that_namespace_only() {
    use cloud_resource_operator::api::BlobStorage;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    with_namespace("leader-rhoam", |client, ns| async move {
        ensure_crds(&client).await;
        crate::support::ensure_olm_crds(&client).await;
        let rhoam = crate::support::create_namespace(&client, "rhoam").await;
        let tenant = crate::support::create_namespace(&client, "tenant").await;
        let go = go_operator_leading(&client, &rhoam, "cloud-resource-operator-5c8d_9f0e");
        let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "Subscription");
        let subscriptions = Api::<DynamicObject>::namespaced_with(client.clone(), &tenant, &ApiResource::from_gvk_with_plural(&gvk, "subscriptions"));
        let subscription: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "rhmi-cloud-resources"},
            "spec": {"name": "rhmi-cloud-resources", "channel": "rhmi", "source": "rhmi-operators", "sourceNamespace": "openshift-marketplace"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        subscriptions.create(&PostParams::default(), &subscription).await.unwrap_or_else(|e| panic!("creating the Subscription: {e}"));

        let mut launch = Launch::new(&ns);
        launch.extra_args.extend([
            format!("--watch-namespaces={ns},{rhoam},{tenant}"),
            "--leader-election-lease-duration=5".into(),
            "--leader-election-renew-deadline=3".into(),
            "--leader-election-retry-period=1".into(),
        ]);
        let op = Operator::launch(launch).await;
        op.wait_log(LEADING, DEFAULT_TIMEOUT).await;
        op.wait_log(&format!("leaving the CRs of namespace {rhoam} alone: the Go cloud-resource-operator leads (Lease {rhoam}/ce8de7ea.integreatly.org"), DEFAULT_TIMEOUT).await;
        op.wait_log(&format!("leaving the CRs of namespace {tenant} alone: OLM Subscription {tenant}/rhmi-cloud-resources installs"), DEFAULT_TIMEOUT).await;

        let bucket = |name: &str| json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
            "spec": {"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}
        });
        let blobs = |namespace: &str| Api::<BlobStorage>::namespaced(client.clone(), namespace);
        for namespace in [&ns, &rhoam, &tenant] {
            crate::support::create_json::<BlobStorage>(&client, namespace, bucket("files")).await;
        }
        crate::support::wait_phase(&blobs(&ns), "files", Phase::Complete).await;
        // Election rounds pass with the other two CRs there (the held
        // ones are looked at every 10 s).
        go_renewals(&client, &rhoam, 12).await;
        for namespace in [&rhoam, &tenant] {
            let untouched = blobs(namespace).get("files").await.unwrap_or_else(|e| panic!("{e}"));
            assert!(
                untouched.status.is_none() && untouched.metadata.finalizers.is_none(),
                "a CR in {namespace} was touched beside a Go trace there: {untouched:?}"
            );
        }

        go.send_replace(true);
        op.wait_log(&format!("reconciling namespace {rhoam} again"), Duration::from_secs(90)).await;
        crate::support::wait_phase(&blobs(&rhoam), "files", Phase::Complete).await;
        let untouched = blobs(&tenant).get("files").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(untouched.status.is_none(), "{untouched:?}");
        subscriptions.delete("rhmi-cloud-resources", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        crate::support::wait_phase(&blobs(&tenant), "files", Phase::Complete).await;
        assert!(!op.logs().contains("lost leadership"), "{}", op.logs());

        for namespace in [&ns, &rhoam, &tenant] {
            blobs(namespace).delete("files", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            crate::support::wait_deleted(&blobs(namespace), "files", DEFAULT_TIMEOUT).await;
        }
        let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
        for namespace in [&rhoam, &tenant] {
            if let Err(e) = namespaces.delete(namespace, &DeleteParams::default()).await {
                eprintln!("warning: deleting namespace {namespace}: {e}");
            }
        }
    })
    .await;
}

/// The Go operator as RHOAM installs it through OLM, under OLM's real CRDs:
/// a ClusterServiceVersion named as the Go bundles name theirs
/// (bundles/1.1.0/manifests/cloud-resources.v1.1.0.clusterserviceversion.yaml)
/// in a namespace of its own whose OperatorGroup targets the watched one
/// keeps this operator from leading, though no Go pod runs; so does, once
/// it is deleted, a Subscription to its package (`rhmi-cloud-resources`,
/// bundles/1.1.0/metadata/annotations.yaml), from which OLM would install
/// it again. OLM's copy of the CSV in the watched namespace (labelled
/// `olm.copiedFrom`) does not count: with the other two gone, this operator
/// leads and completes the waiting CR beside it.
#[tokio::test]
async fn no_leading_while_olm_has_the_go_operator_installed() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    with_namespace("leader-olm", |client, ns| async move {
        ensure_crds(&client).await;
        crate::support::ensure_olm_crds(&client).await;
        let rhoam = crate::support::create_namespace(&client, "rhoam").await;
        let olm = |namespace: &str, kind: &str, plural: &str| {
            let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", kind);
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, plural))
        };
        let object = |v: serde_json::Value| serde_json::from_value::<DynamicObject>(v).unwrap_or_else(|e| panic!("{e}"));
        let csv_name = "cloud-resources.v1.1.0";
        let csv = |labels: serde_json::Value| object(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": csv_name, "labels": labels,
                "annotations": {"olm.operatorGroup": "rhmi-cloud-resources", "olm.operatorNamespace": rhoam, "olm.targetNamespaces": ns}},
            "spec": {"displayName": "Cloud Resource Operator", "version": "1.1.0", "install": {"strategy": "deployment", "spec": {"deployments": []}}}
        }));
        let original = olm(&rhoam, "ClusterServiceVersion", "clusterserviceversions");
        original.create(&PostParams::default(), &csv(json!({}))).await.unwrap_or_else(|e| panic!("creating the Go CSV: {e}"));
        let copy = olm(&ns, "ClusterServiceVersion", "clusterserviceversions");
        copy.create(&PostParams::default(), &csv(json!({"olm.copiedFrom": rhoam}))).await.unwrap_or_else(|e| panic!("creating OLM's copy: {e}"));

        let op = replica(&ns, "a", 5).await;
        op.wait_log(&format!("not leading: the Go cloud-resource-operator is installed by OLM (ClusterServiceVersion {rhoam}/{csv_name})"), DEFAULT_TIMEOUT).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        create(&pgs, "db").await;

        // The CSV deleted, the Subscription OLM installs it from is left.
        let subscriptions = olm(&ns, "Subscription", "subscriptions");
        let subscription = object(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "rhmi-cloud-resources"},
            "spec": {"name": "rhmi-cloud-resources", "channel": "rhmi", "source": "rhmi-operators", "sourceNamespace": "openshift-marketplace"}
        }));
        subscriptions.create(&PostParams::default(), &subscription).await.unwrap_or_else(|e| panic!("creating the Subscription: {e}"));
        original.delete(csv_name, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        op.wait_log(&format!("not leading: OLM Subscription {ns}/rhmi-cloud-resources installs the Go cloud-resource-operator"), Duration::from_secs(60)).await;
        assert!(!op.logs().contains(LEADING), "led while OLM had the Go operator installed");
        let untouched = pgs.get("db").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(untouched.status.is_none() && untouched.metadata.finalizers.is_none(), "{untouched:?}");

        subscriptions.delete("rhmi-cloud-resources", &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        op.wait_log(LEADING, Duration::from_secs(60)).await;
        wait_complete(&pgs, "db").await;
        assert!(copy.get_opt(csv_name).await.unwrap_or_else(|e| panic!("{e}")).is_some(), "OLM's copy was to stay through the takeover");
        delete_all(&pgs, &["db"]).await;
        let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
        if let Err(e) = namespaces.delete(&rhoam, &DeleteParams::default()).await {
            eprintln!("warning: deleting namespace {rhoam}: {e}");
        }
    })
    .await;
}

/// A Go operator from a bundle before 0.43 runs without leader election
/// (no Lease): its Deployment, as its CSV makes it
/// (packagemanifests/0.38.0/cloud-resource-operator.clusterserviceversion.yaml,
/// `install.spec.deployments`), with a ready replica keeps this one from
/// leading; scaled to zero (OLM's Subscription and CSV deleted), this one
/// leads and completes the waiting CR.
#[tokio::test]
async fn no_leading_while_a_go_operators_deployment_runs() {
    use k8s_openapi::api::apps::v1::Deployment;
    with_namespace("leader-godep", |client, ns| async move {
        ensure_crds(&client).await;
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let go: Deployment = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cloud-resource-operator"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"name": "cloud-resource-operator"}},
                "template": {"metadata": {"labels": {"name": "cloud-resource-operator"}},
                    "spec": {"serviceAccountName": "default", "containers": [{
                        "name": "cloud-resource-operator", "command": ["cloud-resource-operator"],
                        "image": "quay.io/integreatly/cloud-resource-operator:v0.38.0",
                        "env": [
                            {"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}}},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "OPERATOR_NAME", "value": "cloud-resource-operator"},
                            {"name": "TAG_KEY_PREFIX", "value": "integreatly.org/"}]}]}}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        deployments.create(&PostParams::default(), &go).await.unwrap_or_else(|e| panic!("{e}"));
        wait_for(&deployments, "cloud-resource-operator", "a ready replica", DEFAULT_TIMEOUT, |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref()?.ready_replicas).unwrap_or(0) > 0
        })
        .await;
        let op = replica(&ns, "a", 5).await;
        op.wait_log("not leading: the Go cloud-resource-operator runs (Deployment", DEFAULT_TIMEOUT).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        create(&pgs, "db").await;
        // Election rounds (one a second) pass with the CR there.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!op.logs().contains(LEADING), "led beside a running Go operator");
        let untouched = pgs.get("db").await.unwrap_or_else(|e| panic!("{e}"));
        assert!(untouched.status.is_none() && untouched.metadata.finalizers.is_none(), "{untouched:?}");

        // Stopped as OLM leaves it once its CSV is gone: no replica. It is
        // read once a minute (its Lease, where it holds one, more often).
        let stopped = json!({"spec": {"replicas": 0}});
        deployments
            .patch("cloud-resource-operator", &PatchParams::default(), &Patch::Merge(&stopped))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        op.wait_log(LEADING, Duration::from_secs(120)).await;
        wait_complete(&pgs, "db").await;
        delete_all(&pgs, &["db"]).await;
    })
    .await;
}

/// Fencing (issue #46's "done when"): two replicas, each reaching AWS
/// through its own proxy and the API server as its own ServiceAccount;
/// the leader frozen (SIGSTOP, as a paused VM or container) while it works
/// on 20 new AWS BlobStorages and SMTPCredentialSets; the standby takes the
/// Lease and completes them; the old leader, woken, sends no AWS request
/// and no Kubernetes write but its Lease's, and stops. Every CR stays
/// complete and no IAM user holds more than one access key.
#[tokio::test]
async fn a_frozen_leader_wakes_and_writes_nothing() {
    use crate::{
        lost_answers::Proxy,
        support::{audited_writes_received_after, cluster_admin_account, create_json},
    };
    use cloud_resource_operator::api::{BlobStorage, SMTPCredentialSet};
    use cro_provider_api::{IdentifierRules, cloud_identifier};
    with_namespace("fence", |client, ns| async move {
        ensure_crds(&client).await;
        let env = crate::support::TestEnv::load();
        let iam = aws_sdk_iam::Client::new(&env.aws_config().await);
        let (proxy_a, proxy_b) = (Proxy::lossless(&format!("{ns}-a")).await, Proxy::lossless(&format!("{ns}-b")).await);
        let (kubeconfig_a, user_a) = cluster_admin_account(&client, &ns, "replica-a").await;
        let (kubeconfig_b, _) = cluster_admin_account(&client, &ns, "replica-b").await;
        let launch = |name: &str, proxy: &Proxy, kubeconfig: std::path::PathBuf| {
            let mut launch = Launch::new(&ns);
            launch.log_name = format!("operator-{ns}-{name}.log");
            launch.kubeconfig = Some(kubeconfig);
            launch.env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
            launch.extra_args.extend(["--leader-election-lease-duration=6", "--leader-election-renew-deadline=4", "--leader-election-retry-period=1"].map(String::from));
            launch
        };
        let a = Operator::launch(launch("a", &proxy_a, kubeconfig_a)).await;
        a.wait_log(LEADING, DEFAULT_TIMEOUT).await;
        let b = Operator::launch(launch("b", &proxy_b, kubeconfig_b)).await;
        b.wait_log(WAITING, DEFAULT_TIMEOUT).await;

        let started = k8s_openapi::jiff::Timestamp::now();
        let names: Vec<String> = (0..10).map(|i| format!("r{i}")).collect();
        let spec = |name: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
        for name in &names {
            create_json::<BlobStorage>(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": format!("{name}-b")}, "spec": spec(&format!("{name}-b"))})).await;
            create_json::<SMTPCredentialSet>(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "SMTPCredentialSet", "metadata": {"name": format!("{name}-m")}, "spec": spec(&format!("{name}-m"))})).await;
        }
        // Frozen in the middle of the work: once it has made some AWS writes.
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        while proxy_a.passed().iter().filter(|c| c.starts_with("Create") || c.starts_with("PUT")).count() < 3 {
            assert!(tokio::time::Instant::now() < deadline, "the leader made no AWS writes: {:?}", proxy_a.passed());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        a.signal("STOP");
        b.wait_log(LEADING, DEFAULT_TIMEOUT).await;
        let blobs = Api::<BlobStorage>::namespaced(client.clone(), &ns);
        let mails = Api::<SMTPCredentialSet>::namespaced(client.clone(), &ns);
        let complete = |phase: Option<Phase>| phase == Some(Phase::Complete);
        for name in &names {
            wait_for(&blobs, &format!("{name}-b"), "complete", DEFAULT_TIMEOUT, |o: Option<&BlobStorage>| complete(o.and_then(|o| o.status.as_ref()?.phase))).await;
            wait_for(&mails, &format!("{name}-m"), "complete", DEFAULT_TIMEOUT, |o: Option<&SMTPCredentialSet>| complete(o.and_then(|o| o.status.as_ref()?.phase))).await;
        }

        // Wake the old leader: it may finish sending what it began before
        // it froze, but begins nothing (AWS: the proxy saw no request begin
        // after the wake; Kubernetes: the API server received no write but
        // the Lease's after it).
        let woke = k8s_openapi::jiff::Timestamp::now();
        let woke_unix = woke.as_millisecond() as f64 / 1000.0;
        a.signal("CONT");
        let mut a = a;
        let status = a.wait_exit(Duration::from_secs(30)).await;
        assert!(!status.success(), "the old leader exited successfully");
        let aws_after = proxy_a.received_after(woke_unix);
        assert_eq!(aws_after, Vec::<String>::new(), "AWS requests the old leader began after it woke");
        // Positive control: the same query finds the writes it made while
        // it led (a wrong user or an unread log would find none).
        let led: Vec<String> = audited_writes_received_after(&user_a, started).into_iter().filter(|w| !w.contains(" leases ")).collect();
        assert!(led.iter().any(|w| w.contains(&ns)), "no write of the leader's in the audit log: {led:?}");
        let kube_after: Vec<String> = audited_writes_received_after(&user_a, woke).into_iter().filter(|w| !w.contains(" leases ")).collect();
        assert_eq!(kube_after, Vec::<String>::new(), "Kubernetes writes the old leader sent after it woke");
        let logs = a.logs();
        assert!(logs.contains("lost leadership"), "{logs}");

        // Everything stays complete, with one key per user, the published one.
        for name in &names {
            let blob = blobs.get(&format!("{name}-b")).await.unwrap_or_else(|e| panic!("{e}"));
            assert!(complete(blob.status.as_ref().and_then(|s| s.phase)), "{blob:?}");
            let mail = mails.get(&format!("{name}-m")).await.unwrap_or_else(|e| panic!("{e}"));
            assert!(complete(mail.status.as_ref().and_then(|s| s.phase)), "{mail:?}");
            let bucket = cloud_identifier("testcluster", &ns, &format!("{name}-b"));
            let mail_user = IdentifierRules::IamUser.conform(&format!("{}-ses", cloud_identifier("testcluster", &ns, &format!("{name}-m"))));
            for user in [bucket, mail_user] {
                let keys = iam.list_access_keys().user_name(&user).send().await.unwrap_or_else(|e| panic!("{user}: {e:?}"));
                assert_eq!(keys.access_key_metadata().len(), 1, "IAM user {user} holds {:?}", keys.access_key_metadata());
            }
        }
        for name in &names {
            blobs.delete(&format!("{name}-b"), &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
            mails.delete(&format!("{name}-m"), &DeleteParams::default()).await.unwrap_or_else(|e| panic!("{e}"));
        }
        for name in &names {
            wait_deleted(&blobs, &format!("{name}-b"), DEFAULT_TIMEOUT).await;
            wait_deleted(&mails, &format!("{name}-m"), DEFAULT_TIMEOUT).await;
        }
        b.stop().await;
    })
    .await;
}
