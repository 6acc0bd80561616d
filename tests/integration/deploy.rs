//! deploy/ as a platform engineer installs it: the kustomization and the
//! Helm chart both pass the real apiserver's dry run and grant the same
//! RBAC, and the operator running under exactly that RBAC (a token of
//! its ServiceAccount) completes the in-cluster scenario. The apiserver's
//! audit log proves the RBAC least-privilege both ways: no request was
//! refused, and every verb of every rule was used.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet,
};
use k8s_openapi::api::{
    core::v1::{ConfigMap, Namespace, ServiceAccount},
    events::v1::Event,
    rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, PostParams},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};

use crate::support::{
    Audited, DEFAULT_TIMEOUT, Launch, Operator, TestEnv, apply, assert_no_secret_in,
    audited_requests_of, ensure_crds, service_account_kubeconfig, wait_deleted, wait_for,
    with_namespace,
};

const CHART: &str = "deploy/helm";
const RELEASE_NAMESPACE: &str = "cloud-resource-operator";

pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a tool of the test environment; its stdout, or a panic with its stderr.
pub(crate) fn run(program: &Path, args: &[&str]) -> String {
    let env = TestEnv::load();
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .env("KUBECONFIG", &env.kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {}: {}\n{}",
        program.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A JSON string's text; empty for anything else.
fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap_or_else(|e| panic!("rendered YAML: {e}"))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

fn kustomize(dir: &str) -> Vec<Value> {
    documents(&run(&TestEnv::load().kubectl, &["kustomize", dir]))
}

/// The fields that must agree between kustomize and Helm, by kind: what
/// an object grants or carries (labels differ on purpose).
fn compared_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "ConfigMap" => &["data"],
        "CustomResourceDefinition" => &["spec"],
        "ClusterRole" => &["rules"],
        "Role" => &["rules", "metadata.namespace"],
        "ClusterRoleBinding" => &["roleRef", "subjects"],
        "RoleBinding" => &["roleRef", "subjects", "metadata.namespace"],
        "ServiceAccount" | "Service" | "Deployment" => &["metadata.namespace"],
        "ValidatingAdmissionPolicy" | "ValidatingAdmissionPolicyBinding" => &["spec"],
        _ => &[],
    }
}

fn field<'a>(doc: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(doc, |v, key| &v[key])
}

async fn ensure_release_namespace(client: &Client) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": RELEASE_NAMESPACE}}))
        .unwrap_or_else(|e| panic!("{e}"));
    apply(&Api::<Namespace>::all(client.clone()), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {RELEASE_NAMESPACE}: {e}"));
}

/// `kubectl apply --dry-run=server` of `objects` (YAML or JSON) into the
/// release namespace, written to target/testenv/`name` first.
fn server_dry_run(env: &TestEnv, name: &str, objects: &str) {
    let file = repo().join("target/testenv").join(name);
    std::fs::write(&file, objects).unwrap_or_else(|e| panic!("{e}"));
    let path = file.to_string_lossy();
    let args = [
        "apply",
        "--dry-run=server",
        "--namespace",
        RELEASE_NAMESPACE,
        "-f",
        &path,
    ];
    run(&env.kubectl, &args);
}

#[tokio::test]
async fn kustomize_and_helm_pass_the_apiserver_dry_run_and_grant_the_same_rbac() {
    crate::support::bounded(
        "kustomize_and_helm_pass_the_apiserver_dry_run_and_grant_the_same_rbac",
        async move {
            let env = TestEnv::load();
            let client = env.client().await;
            ensure_crds(&client).await;
            ensure_release_namespace(&client).await;

            run(
                &env.kubectl,
                &["apply", "--dry-run=server", "-k", "deploy/"],
            );
            let rendered = run(
                &env.helm,
                &[
                    "template",
                    "cro",
                    CHART,
                    "--namespace",
                    RELEASE_NAMESPACE,
                    "--include-crds",
                ],
            );
            server_dry_run(&env, "helm-rendered.yaml", &rendered);

            // The same objects (Helm creates the namespace itself), granting and
            // carrying the same.
            let (kustomized, charted) = (kustomize("deploy/"), documents(&rendered));
            let by_name = |docs: &[Value]| -> BTreeMap<(String, String), Value> {
                docs.iter()
                    .filter(|d| d["kind"] != "Namespace")
                    .map(|d| {
                        let key = (text(&d["kind"]), text(&d["metadata"]["name"]));
                        (key, d.clone())
                    })
                    .collect()
            };
            let (ko, ho) = (by_name(&kustomized), by_name(&charted));
            assert_eq!(
                ko.keys().collect::<Vec<_>>(),
                ho.keys().collect::<Vec<_>>(),
                "kustomize and Helm render different objects"
            );
            for ((kind, name), k) in &ko {
                let h = &ho[&(kind.clone(), name.clone())];
                for path in compared_fields(kind) {
                    assert_eq!(
                        field(k, path),
                        field(h, path),
                        "{kind} {name}: {path} differs"
                    );
                }
            }
            for kind in [
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ServiceAccount",
            ] {
                assert!(ko.keys().any(|(k, _)| k == kind), "no {kind} rendered");
            }

            // Both run the same operator the same way.
            let deployment = |docs: &[Value]| {
                docs.iter()
                    .find(|d| d["kind"] == "Deployment")
                    .map(|d| d["spec"]["template"]["spec"].clone())
                    .unwrap_or_else(|| panic!("no Deployment rendered"))
            };
            let (kd, hd) = (deployment(&kustomized), deployment(&charted));
            for field in ["serviceAccountName", "securityContext"] {
                assert_eq!(kd[field], hd[field], "Deployment {field} differs");
            }
            same_container(&kd, &hd, "kustomize and Helm");
        },
    )
    .await;
}

/// Asserts that two pod specs run their operator container the same way.
fn same_container(a: &Value, b: &Value, what: &str) {
    let container = |spec: &Value| spec["containers"][0].clone();
    for field in [
        "image",
        "args",
        "securityContext",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "ports",
    ] {
        assert_eq!(
            container(a)[field],
            container(b)[field],
            "{what}: container {field} differs"
        );
    }
}

/// deploy/rbac re-targeted at `ns`: namespaced objects move into it,
/// cluster-scoped ones get a per-test name, bindings follow both.
fn rbac_for(ns: &str) -> Vec<Value> {
    let suffix = format!("-{ns}");
    kustomize("deploy/rbac")
        .into_iter()
        .map(|mut doc| {
            let kind = text(&doc["kind"]);
            match kind.as_str() {
                "ClusterRole" | "ClusterRoleBinding" => {
                    let name = format!("{}{suffix}", text(&doc["metadata"]["name"]));
                    doc["metadata"]["name"] = json!(name);
                }
                _ => doc["metadata"]["namespace"] = json!(ns),
            }
            if doc["roleRef"]["kind"] == "ClusterRole" {
                let name = format!("{}{suffix}", text(&doc["roleRef"]["name"]));
                doc["roleRef"]["name"] = json!(name);
            }
            if let Some(subjects) = doc["subjects"].as_array_mut() {
                for s in subjects {
                    s["namespace"] = json!(ns);
                }
            }
            doc
        })
        .collect()
}

fn typed<K: DeserializeOwned>(doc: &Value) -> K {
    serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{e}: {doc}"))
}

async fn apply_doc(client: &Client, doc: &Value) {
    let ns = doc["metadata"]["namespace"].as_str().unwrap_or_default();
    async fn put<K>(api: Api<K>, obj: K)
    where
        K: Resource + Clone + std::fmt::Debug + DeserializeOwned + Serialize,
    {
        let name = obj.name_any();
        apply(&api, &obj)
            .await
            .unwrap_or_else(|e| panic!("applying {name}: {e}"));
    }
    match doc["kind"].as_str().unwrap_or_default() {
        "ServiceAccount" => {
            put(
                Api::<ServiceAccount>::namespaced(client.clone(), ns),
                typed(doc),
            )
            .await
        }
        "Role" => put(Api::<Role>::namespaced(client.clone(), ns), typed(doc)).await,
        "RoleBinding" => {
            put(
                Api::<RoleBinding>::namespaced(client.clone(), ns),
                typed(doc),
            )
            .await
        }
        "ClusterRole" => put(Api::<ClusterRole>::all(client.clone()), typed(doc)).await,
        "ClusterRoleBinding" => {
            put(Api::<ClusterRoleBinding>::all(client.clone()), typed(doc)).await
        }
        other => panic!("unexpected {other} in deploy/rbac"),
    }
}

/// Whether `request` exercised `verb` on `group`/`resource` as `rule`
/// allows it. A server-side apply that created its object (201) used
/// `create` as well as `patch`: the apiserver checks both.
fn uses(request: &Audited, group: &str, resource: &str, verb: &str, rule: &PolicyRule) -> bool {
    let verb_matches = request.verb == verb
        || (verb == "create" && request.verb == "patch" && request.code == 201);
    let name_matches = rule
        .resource_names
        .as_ref()
        .is_none_or(|names| names.contains(&request.name));
    request.group == group && request.resource == resource && verb_matches && name_matches
}

/// Every verb on every resource each rule grants, and which were unused.
fn unused_grants(rules: &[PolicyRule], requests: &[Audited]) -> Vec<String> {
    let mut unused = vec![];
    for rule in rules {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    if !requests
                        .iter()
                        .any(|r| uses(r, group, resource, verb, rule))
                    {
                        unused.push(format!("{verb} {resource}.{group}"));
                    }
                }
            }
        }
    }
    unused
}

fn cr<K: DeserializeOwned>(kind: &str, name: &str, spec: Value) -> K {
    serde_json::from_value(json!({
        "apiVersion": "integreatly.org/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
}

async fn create<K>(api: &Api<K>, obj: K)
where
    K: Resource + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let name = obj.name_any();
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"));
}

/// Waits until the phase of `$name` satisfies `$ok`.
macro_rules! wait_phase {
    ($api:expr, $name:expr, $t:ty, $what:expr, $ok:expr) => {
        wait_for($api, $name, $what, DEFAULT_TIMEOUT, |o: Option<&$t>| {
            $ok(o.and_then(|o| o.status.as_ref()).and_then(|s| s.phase))
        })
        .await
    };
}

/// Every kind, in-cluster, from create to delete.
async fn in_cluster_scenario(client: &Client, ns: &str, operator: &Operator) {
    let spec = |secret: &str| json!({"type": "workshop", "tier": "development", "secretRef": {"name": secret}});
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns);
    let redis = Api::<Redis>::namespaced(client.clone(), ns);
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), ns);
    let smtps = Api::<SMTPCredentialSet>::namespaced(client.clone(), ns);
    let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), ns);
    let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), ns);
    // Tier `broken` makes the apiserver refuse the Deployment again and
    // again: the repeated Warning becomes an Event series (a patch).
    let default_tier = json!({"development": {"strategy": {}}}).to_string();
    let strategies: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cloud-resources-openshift-strategies", "namespace": ns},
        "data": {
            "postgres": json!({"development": {"strategy": {}}, "broken": {"strategy": {"deploymentSpec": {"replicas": -1}}}}).to_string(),
            // A tier open to selected namespaces: the operator reads the namespace's labels.
            "redis": json!({"development": {"strategy": {}, "allowedNamespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}}}).to_string(),
            "blobstorage": default_tier, "smtpcredentials": default_tier,
        }
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    apply(
        &Api::<ConfigMap>::namespaced(client.clone(), ns),
        &strategies,
    )
    .await
    .unwrap_or_else(|e| panic!("applying the strategies: {e}"));
    create(
        &pgs,
        cr(
            "Postgres",
            "broken",
            json!({"type": "workshop", "tier": "broken", "secretRef": {"name": "broken-sec"}}),
        ),
    )
    .await;
    let events = Api::<Event>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
    loop {
        let list = events
            .list(&Default::default())
            .await
            .unwrap_or_else(|e| panic!("listing Events: {e}"));
        let repeated = list.items.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken")
                && e.series.as_ref().is_some_and(|s| s.count >= 2)
        });
        if repeated {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no repeated Event for Postgres broken: {list:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    create(&pgs, cr("Postgres", "db", spec("db-sec"))).await;
    create(&redis, cr("Redis", "cache", spec("cache-sec"))).await;
    create(&blobs, cr("BlobStorage", "blob", spec("blob-sec"))).await;
    create(&smtps, cr("SMTPCredentialSet", "smtp", spec("smtp-sec"))).await;
    let complete = |p: Option<Phase>| p == Some(Phase::Complete);
    wait_phase!(&pgs, "db", Postgres, "complete", complete);
    wait_phase!(&redis, "cache", Redis, "complete", complete);
    wait_phase!(&blobs, "blob", BlobStorage, "complete", complete);
    wait_phase!(&smtps, "smtp", SMTPCredentialSet, "complete", complete);

    // In-cluster snapshots: each makes its backup's PVC and Job (on kwok,
    // neither runs; the real-node test takes and restores backups), and
    // deleting them deletes both.
    create(
        &pg_snaps,
        cr("PostgresSnapshot", "db-snap", json!({"resourceName": "db"})),
    )
    .await;
    create(
        &redis_snaps,
        cr(
            "RedisSnapshot",
            "cache-snap",
            json!({"resourceName": "cache"}),
        ),
    )
    .await;
    let any = |p: Option<Phase>| p.is_some();
    wait_phase!(&pg_snaps, "db-snap", PostgresSnapshot, "a phase", any);
    wait_phase!(&redis_snaps, "cache-snap", RedisSnapshot, "a phase", any);

    scheduled_snapshots_come_and_go(client, ns).await;
    assert_no_secret_in(client, ns, &operator.logs()).await;

    let dp = DeleteParams::default();
    let expect = |r: Result<_, kube::Error>| r.unwrap_or_else(|e| panic!("deleting: {e}"));
    expect(pg_snaps.delete("db-snap", &dp).await.map(|_| ()));
    expect(redis_snaps.delete("cache-snap", &dp).await.map(|_| ()));
    expect(pgs.delete("db", &dp).await.map(|_| ()));
    expect(pgs.delete("broken", &dp).await.map(|_| ()));
    expect(redis.delete("cache", &dp).await.map(|_| ()));
    expect(blobs.delete("blob", &dp).await.map(|_| ()));
    expect(smtps.delete("smtp", &dp).await.map(|_| ()));
    let t = DEFAULT_TIMEOUT;
    wait_deleted(&pg_snaps, "db-snap", t).await;
    wait_deleted(&redis_snaps, "cache-snap", t).await;
    wait_deleted(&pgs, "db", t).await;
    wait_deleted(&pgs, "broken", t).await;
    wait_deleted(&redis, "cache", t).await;
    wait_deleted(&blobs, "blob", t).await;
    wait_deleted(&smtps, "smtp", t).await;
}

/// An AWS Postgres and Redis on a one-minute snapshot schedule keeping one
/// minute: each gets a scheduled snapshot CR, and a period later that one
/// is deleted for the next (the operator's create and delete of snapshot
/// CRs). Everything is deleted again before returning.
async fn scheduled_snapshots_come_and_go(client: &Client, ns: &str) {
    let schedule = |secret: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": secret}, "snapshotFrequency": "1m", "snapshotRetention": "1m"});
    let pgs = Api::<Postgres>::namespaced(client.clone(), ns);
    let redis = Api::<Redis>::namespaced(client.clone(), ns);
    create(&pgs, cr("Postgres", "scheduled", schedule("scheduled-sec"))).await;
    create(&redis, cr("Redis", "scheduled", schedule("scheduled-sec2"))).await;
    let pg_snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), ns);
    let redis_snaps = Api::<RedisSnapshot>::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    let mut first: (Option<String>, Option<String>) = (None, None);
    loop {
        let pg = scheduled_names(&pg_snaps).await;
        let rd = scheduled_names(&redis_snaps).await;
        first.0 = first.0.or_else(|| pg.iter().next().cloned());
        first.1 = first.1.or_else(|| rd.iter().next().cloned());
        let replaced = |first: &Option<String>, now: &BTreeSet<String>| {
            first
                .as_ref()
                .is_some_and(|f| !now.contains(f) && now.iter().any(|n| n > f))
        };
        if replaced(&first.0, &pg) && replaced(&first.1, &rd) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "scheduled snapshots not taken and replaced within 240 s: first {first:?}, now {pg:?} {rd:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let dp = DeleteParams::default();
    pgs.delete("scheduled", &dp)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    redis
        .delete("scheduled", &dp)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&pgs, "scheduled", Duration::from_secs(120)).await;
    wait_deleted(&redis, "scheduled", Duration::from_secs(120)).await;
    // Their snapshot CRs go with them (owner references), each after its
    // cloud snapshot.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !scheduled_names(&pg_snaps).await.is_empty()
        || !scheduled_names(&redis_snaps).await.is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "scheduled snapshot CRs left 120 s after their parents"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Names of the scheduled snapshot CRs of the CRs named `scheduled`.
async fn scheduled_names<K>(api: &Api<K>) -> BTreeSet<String>
where
    K: Resource + Clone + std::fmt::Debug + DeserializeOwned,
{
    api.list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .items
        .iter()
        .map(|s| s.name_any())
        .filter(|n| n.starts_with("scheduled-"))
        .collect()
}

#[tokio::test]
async fn the_operator_needs_every_rule_of_its_rbac_and_nothing_more() {
    with_namespace("rbac", |client, ns| async move {
        ensure_crds(&client).await;
        // As on a cluster with OLM: the operator lists its CSVs and
        // Subscriptions (without OLM, the first list's 404 ends the look).
        crate::support::ensure_olm_crds(&client).await;
        let docs = rbac_for(&ns);
        let cluster_scoped: Vec<(String, String)> = docs
            .iter()
            .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "ClusterRoleBinding")
            .map(|d| (text(&d["kind"]), text(&d["metadata"]["name"])))
            .collect();
        let result = tokio::spawn(run_as_service_account(client.clone(), ns.clone(), docs)).await;
        for (kind, name) in cluster_scoped {
            let deleted = match kind.as_str() {
                "ClusterRole" => Api::<ClusterRole>::all(client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                _ => Api::<ClusterRoleBinding>::all(client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            };
            if let Err(e) = deleted {
                eprintln!("warning: deleting {kind} {name}: {e}");
            }
        }
        if let Err(e) = result {
            std::panic::resume_unwind(e.into_panic());
        }
    })
    .await;
}

async fn run_as_service_account(client: Client, ns: String, docs: Vec<Value>) {
    for doc in &docs {
        apply_doc(&client, doc).await;
    }
    let sa = docs
        .iter()
        .find(|d| d["kind"] == "ServiceAccount")
        .and_then(|d| d["metadata"]["name"].as_str())
        .unwrap_or_else(|| panic!("deploy/rbac has no ServiceAccount"))
        .to_string();
    let kubeconfig = service_account_kubeconfig(&client, &ns, &sa).await;
    // Discovers the cluster ID and elects a leader in its own namespace,
    // as the Deployment does.
    let mut operator = Operator::launch(Launch {
        kubeconfig: Some(kubeconfig),
        cluster_id: None,
        extra_args: vec![],
        ..Launch::new(&ns)
    })
    .await;
    in_cluster_scenario(&client, &ns, &operator).await;
    let status = operator.terminate(DEFAULT_TIMEOUT).await;
    assert!(
        status.success(),
        "the operator exited with {status} on SIGTERM:\n{}",
        operator.logs()
    );

    // Watches are audited when they end, so wait for those of this run.
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let rules: Vec<PolicyRule> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .flat_map(|d| typed::<Vec<PolicyRule>>(&d["rules"]))
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (requests, unused) = loop {
        let requests = audited_requests_of(&user);
        let unused = unused_grants(&rules, &requests);
        if unused.is_empty() || tokio::time::Instant::now() > deadline {
            break (requests, unused);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let refused: BTreeSet<_> = requests.iter().filter(|r| r.code == 403).collect();
    assert!(
        refused.is_empty(),
        "deploy/rbac refused requests the operator needs: {refused:#?}\noperator log:\n{}",
        operator.logs()
    );
    let all: BTreeSet<_> = requests
        .iter()
        .map(|r| format!("{} {}.{} {}", r.verb, r.resource, r.group, r.code))
        .collect();
    assert!(
        unused.is_empty(),
        "deploy/rbac grants what the operator never used: {unused:#?}\nrequests made: {all:#?}"
    );
}

/// `kubectl` as a given kubeconfig (a tenant's token, or the admin's with
/// impersonation in `args`): whether it succeeded, and what it printed.
fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(&TestEnv::load().kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap_or_else(|e| panic!("running kubectl: {e}"));
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), printed)
}

/// deploy/approvals: a tenant who may edit its Postgres cannot approve an
/// adoption or a plan on it; a member of the approvers group can; the
/// Helm chart renders the same policy for the group it is given. The
/// policy is cluster-wide, so the test binds it to its own namespace.
#[tokio::test]
async fn the_approvals_policy_lets_only_its_group_approve() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    with_namespace("approvals", |client, ns| async move {
        ensure_crds(&client).await;
        let shipped = kustomize("deploy/approvals/");
        let kind = |k: &str| shipped.iter().find(|d| d["kind"] == k).cloned().unwrap_or_else(|| panic!("no {k} in deploy/approvals"));
        // deploy/ installs it, and Helm renders the same policy by default.
        let whole = kustomize("deploy/");
        assert!(whole.iter().any(|d| d["kind"] == "ValidatingAdmissionPolicy"), "deploy/ installs no approvals policy");
        let charted = documents(&run(&TestEnv::load().helm, &["template", "cro", CHART]));
        for k in ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] {
            let helm = charted.iter().find(|d| d["kind"] == k).unwrap_or_else(|| panic!("the chart renders no {k} by default"));
            assert_eq!(helm["spec"], kind(k)["spec"], "{k}");
        }
        let off = documents(&run(&TestEnv::load().helm, &["template", "cro", CHART, "--set", "approvals.group="]));
        assert!(!off.iter().any(|d| d["kind"] == "ValidatingAdmissionPolicy"), "approvals.group empty still renders the policy");

        // The shipped policy, under this test's names, bound to its namespace.
        let name = format!("cro-approvals-{ns}");
        let mut policy = kind("ValidatingAdmissionPolicy");
        policy["metadata"] = json!({"name": name});
        let mut binding = kind("ValidatingAdmissionPolicyBinding");
        binding["metadata"] = json!({"name": name});
        binding["spec"]["policyName"] = json!(name);
        binding["spec"]["matchResources"] = json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}});
        let api = |plural: &str, k: &str| {
            let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", k);
            Api::<DynamicObject>::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural))
        };
        let policies = api("validatingadmissionpolicies", "ValidatingAdmissionPolicy");
        let bindings = api("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding");
        let object = |v: Value| serde_json::from_value::<DynamicObject>(v).unwrap_or_else(|e| panic!("{e}"));
        policies.create(&PostParams::default(), &object(policy)).await.unwrap_or_else(|e| panic!("creating the policy: {e}"));
        bindings.create(&PostParams::default(), &object(binding)).await.unwrap_or_else(|e| panic!("creating the binding: {e}"));

        // A tenant that may edit Postgres in its namespace (as may the
        // approvers group), and one of its CRs.
        let tenant: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap_or_else(|e| panic!("{e}"));
        Api::<ServiceAccount>::namespaced(client.clone(), &ns).create(&PostParams::default(), &tenant).await.unwrap_or_else(|e| panic!("{e}"));
        let role: Role = serde_json::from_value(json!({"metadata": {"name": "tenant"}, "rules": [
            {"apiGroups": ["integreatly.org"], "resources": ["postgres"], "verbs": ["get", "list", "create", "update", "patch"]}]}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<Role>::namespaced(client.clone(), &ns).create(&PostParams::default(), &role).await.unwrap_or_else(|e| panic!("{e}"));
        let bound: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "tenant"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns},
                {"kind": "Group", "name": "cloud-resource-approvers", "apiGroup": "rbac.authorization.k8s.io"}]}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<RoleBinding>::namespaced(client.clone(), &ns).create(&PostParams::default(), &bound).await.unwrap_or_else(|e| panic!("{e}"));
        let pg: Postgres = serde_json::from_value(json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        Api::<Postgres>::namespaced(client.clone(), &ns).create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("{e}"));
        let as_tenant = service_account_kubeconfig(&client, &ns, "tenant").await;
        let admin = TestEnv::load().kubeconfig;

        // The policy takes effect once the API server has loaded it: each
        // try sets another value, so an attempt that got through is seen.
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        let mut attempt = 0;
        let refused = loop {
            attempt += 1;
            let value = format!("integreatly.org/adopt=hash{attempt}");
            let (ok, printed) = kubectl_as(&as_tenant, &["-n", &ns, "annotate", "--overwrite", "postgres", "db", &value]);
            if !ok {
                break printed;
            }
            assert!(tokio::time::Instant::now() < deadline, "the tenant could still approve: {printed}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        assert!(refused.contains("only members of the group cloud-resource-approvers may set integreatly.org/adopt"), "{refused}");
        let (ok, printed) = kubectl_as(&as_tenant, &["-n", &ns, "annotate", "--overwrite", "postgres", "db", "integreatly.org/approve-plan=abc"]);
        assert!(!ok && printed.contains("integreatly.org/approve-plan"), "{printed}");
        // Other edits of its own CR still go through.
        let (ok, printed) = kubectl_as(&as_tenant, &["-n", &ns, "annotate", "--overwrite", "postgres", "db", "team/owner=payments"]);
        assert!(ok, "{printed}");
        // A member of the group approves, and so does a cluster administrator.
        let (ok, printed) = kubectl_as(&admin, &["-n", &ns, "annotate", "--overwrite", "postgres", "db", "integreatly.org/adopt=approved",
            "--as=platform-lead", "--as-group=cloud-resource-approvers"]);
        assert!(ok, "{printed}");
        let (ok, printed) = kubectl_as(&admin, &["-n", &ns, "annotate", "--overwrite", "postgres", "db", "integreatly.org/adopt=by-admin"]);
        assert!(ok, "{printed}");

        let _ = bindings.delete(&name, &DeleteParams::default()).await;
        let _ = policies.delete(&name, &DeleteParams::default()).await;
    })
    .await;
}

/// deploy/monitoring/ through kustomize and through Helm: the same
/// PrometheusRule and dashboard. Helm leaves the rule out where the
/// cluster does not serve its CRD (this one), and the dashboard unless
/// asked.
#[test]
fn kustomize_and_helm_ship_the_same_monitoring() {
    let helm = TestEnv::load().helm;
    let find = |docs: &[Value], kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in {docs:#?}"))
    };
    let kustomized = kustomize("deploy/monitoring/");
    let asked = [
        "template",
        "cro",
        CHART,
        "-n",
        RELEASE_NAMESPACE,
        "--set",
        "monitoring.prometheusRule.enabled=true",
        "--set",
        "monitoring.dashboard.enabled=true",
        "--set",
        "monitoring.serviceMonitor.enabled=true",
    ];
    let charted = documents(&run(&helm, &asked));
    // Prometheus scrapes the chart's metrics Service by its labels and port.
    let (km, hm) = (
        find(&kustomized, "ServiceMonitor"),
        find(&charted, "ServiceMonitor"),
    );
    assert_eq!(km["spec"], hm["spec"]);
    let service = find(&charted, "Service");
    let selects = hm["spec"]["selector"]["matchLabels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !selects.is_empty()
            && selects
                .iter()
                .all(|(k, v)| service["metadata"]["labels"][k] == *v),
        "the ServiceMonitor selects the chart's Service: {selects:?} against {:#}",
        service["metadata"]["labels"]
    );
    let port = text(&hm["spec"]["endpoints"][0]["port"]);
    assert!(
        service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| text(&p["name"]) == port),
        "the Service has the port {port}"
    );
    let (kr, hr) = (
        find(&kustomized, "PrometheusRule"),
        find(&charted, "PrometheusRule"),
    );
    assert_eq!(kr["spec"], hr["spec"]);
    assert!(
        kr["spec"]["groups"][0]["rules"]
            .as_array()
            .is_some_and(|r| r.len() >= 7),
        "{kr:#}"
    );
    let dashboard = |docs: &[Value]| {
        let cm = docs
            .iter()
            .find(|d| {
                d["kind"] == "ConfigMap"
                    && d["metadata"]["name"] == "cloud-resource-operator-dashboard"
            })
            .cloned()
            .unwrap_or_default();
        assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1", "{cm:#}");
        serde_json::from_str::<Value>(cm["data"]["dashboard.json"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("dashboard.json: {e}"))
    };
    assert_eq!(dashboard(&kustomized), dashboard(&charted));
    let default = documents(&run(&helm, &["template", "cro", CHART]));
    assert!(
        !default.iter().any(|d| d["kind"] == "PrometheusRule"
            || d["kind"] == "ServiceMonitor"
            || d["metadata"]["name"] == "cloud-resource-operator-dashboard"),
        "on by default"
    );
}

/// `make run` against a cluster of one's own (KUBECONFIG set) creates only
/// the configuration ConfigMaps that are missing (config/install-missing.sh):
/// tiers a platform engineer edited stay as they are, and it says so.
#[tokio::test]
async fn make_run_leaves_an_edited_strategies_config_map_as_it_was() {
    with_namespace("runcfg", |client, ns| async move {
        let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &ns);
        let edited: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "cloud-resources-aws-strategies"},
            "data": {"postgres": "{\"development\": {\"region\": \"\", \"createStrategy\": {\"DBInstanceClass\": \"db.r6g.large\"}}}"}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let edited = config_maps.create(&PostParams::default(), &edited).await.unwrap_or_else(|e| panic!("{e}"));

        let said = run(&repo().join("config/install-missing.sh"), &[&ns]);
        assert!(said.contains(&format!("left {ns} configmap/cloud-resources-aws-strategies as it is")), "{said}");
        for name in ["cloud-resource-config", "cloud-resources-openshift-strategies"] {
            assert!(said.contains(&format!("created {ns} configmap/{name}")), "{said}");
            config_maps.get(name).await.unwrap_or_else(|e| panic!("{name} was not created: {e}"));
        }
        let after = config_maps.get("cloud-resources-aws-strategies").await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((after.data, after.metadata.resource_version), (edited.data, edited.metadata.resource_version), "the edited tiers were rewritten");

        // Run again: everything exists, nothing is written.
        let again = run(&repo().join("config/install-missing.sh"), &[&ns]);
        assert_eq!(again.matches("as it is").count(), 3, "{again}");
    })
    .await;
}

/// The OLM bundle (bundle/, how the Go operator is installed) is what
/// deploy/bundle/generate.py makes of the chart, crds/ and the samples: the
/// ClusterServiceVersion owns the six CRDs, runs the chart's image and
/// Deployment (WATCH_NAMESPACE from OLM's target namespaces) with the
/// chart's RBAC, and the operator framework's own validator
/// (operator-verify, built from its Go module) finds no error in it.
#[test]
fn the_olm_bundle_is_the_charts_and_passes_the_operator_frameworks_validator() {
    let env = TestEnv::load();
    let fresh = repo().join("target/testenv/bundle");
    let _ = std::fs::remove_dir_all(&fresh);
    run(
        Path::new("python3"),
        &[
            "deploy/bundle/generate.py",
            &env.helm.to_string_lossy(),
            &fresh.to_string_lossy(),
        ],
    );
    let files = |dir: &Path| -> BTreeMap<String, String> {
        ["manifests", "metadata"]
            .iter()
            .flat_map(|sub| {
                std::fs::read_dir(dir.join(sub))
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.join(sub).display()))
            })
            .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
            .map(|p| {
                (
                    p.strip_prefix(dir)
                        .unwrap_or(&p)
                        .to_string_lossy()
                        .to_string(),
                    std::fs::read_to_string(&p).unwrap_or_default(),
                )
            })
            .collect()
    };
    let (checked_in, generated) = (files(&repo().join("bundle")), files(&fresh));
    assert_eq!(
        checked_in.keys().collect::<Vec<_>>(),
        generated.keys().collect::<Vec<_>>(),
        "bundle/ is stale: run make bundle"
    );
    for (name, text) in &generated {
        assert!(
            checked_in[name] == *text,
            "bundle/{name} is stale: run make bundle"
        );
    }

    let csv: Value =
        documents(&generated["manifests/cloud-resource-operator.clusterserviceversion.yaml"])
            .remove(0);
    let owned: BTreeSet<String> = csv["spec"]["customresourcedefinitions"]["owned"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| text(&c["name"]))
        .collect();
    let crds: BTreeSet<String> = kustomize("crds/")
        .iter()
        .map(|d| text(&d["metadata"]["name"]))
        .collect();
    assert_eq!(
        (owned.len(), &owned),
        (6, &crds),
        "the CSV owns the six CRDs"
    );
    let chart = documents(&run(&env.helm, &["template", "cro", CHART]));
    let of = |kind: &str| {
        chart
            .iter()
            .find(|d| d["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("the chart renders no {kind}"))
    };
    let install = &csv["spec"]["install"]["spec"];
    let deployed = &install["deployments"][0]["spec"];
    let container = |spec: &Value| spec["template"]["spec"]["containers"][0].clone();
    let chart_deployment = of("Deployment")["spec"].clone();
    assert_eq!(
        csv["metadata"]["annotations"]["containerImage"],
        container(&chart_deployment)["image"],
        "the chart's image"
    );
    same_container(
        &deployed["template"]["spec"],
        &chart_deployment["template"]["spec"],
        "the CSV and the chart",
    );
    assert_eq!(
        deployed["template"]["spec"]["securityContext"],
        chart_deployment["template"]["spec"]["securityContext"]
    );
    let watch = container(deployed)["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "WATCH_NAMESPACE")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        watch["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['olm.targetNamespaces']"
    );
    // Between them, exactly the chart's rules; cluster-wide only what is
    // cluster-scoped: OLM grants `permissions` in each target namespace
    // (cluster-wide only where the OperatorGroup targets all), so a
    // single-namespace install reads no other namespace's Secrets.
    let rules = |v: &Value| v.as_array().cloned().unwrap_or_default();
    // Whatever order a rule's keys come in (the CSV's YAML sorts them).
    let canonical = |rule: &Value| {
        let sorted: BTreeMap<String, Value> =
            serde_json::from_value(rule.clone()).unwrap_or_default();
        serde_json::to_string(&sorted).unwrap_or_default()
    };
    let (cluster, namespaced) = (
        rules(&install["clusterPermissions"][0]["rules"]),
        rules(&install["permissions"][0]["rules"]),
    );
    let mut granted: Vec<String> = cluster.iter().chain(&namespaced).map(canonical).collect();
    let mut chart_rules: Vec<String> = rules(&of("ClusterRole")["rules"])
        .iter()
        .chain(&rules(&of("Role")["rules"]))
        .map(canonical)
        .collect();
    granted.sort();
    chart_rules.sort();
    assert_eq!(granted, chart_rules, "the chart's ClusterRole and Role");
    let cluster_resources: BTreeSet<String> = cluster
        .iter()
        .flat_map(|r| rules(&r["resources"]))
        .map(|r| text(&r))
        .collect();
    assert_eq!(
        cluster_resources,
        [
            "clusterserviceversions",
            "infrastructures",
            "leases",
            "namespaces",
            "networks",
            "nodes",
            "subscriptions"
        ]
        .map(String::from)
        .into(),
        "cluster-wide grants of the CSV"
    );

    assert_valid_bundle(&repo().join("bundle"));
}

/// The operator framework's validator finds no error in the bundle at `dir`.
fn assert_valid_bundle(dir: &Path) {
    let verify = std::env::var("CRO_TESTENV_OPERATOR_VERIFY").unwrap_or_else(|_| panic!("CRO_TESTENV_OPERATOR_VERIFY is not set: restart the environment (make testenv-down testenv-up) to build operator-verify"));
    let out = Command::new(&verify)
        .args(["manifests", &dir.to_string_lossy()])
        .output()
        .unwrap_or_else(|e| panic!("{verify}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && !said.contains("level=error"),
        "operator-verify manifests {}: {said}",
        dir.display()
    );
}

/// The chart's values schema refuses, before anything is installed and
/// naming the value, what install.md says it refuses: a misspelt key, a
/// flag in `extraArgs` without its `--`, and an image digest that is not
/// `sha256:` and 64 hex digits (a tag or a truncated digest).
#[test]
fn the_chart_refuses_values_its_schema_does_not_allow() {
    let env = TestEnv::load();
    let digest = format!("image.digest=sha256:{}", "ab".repeat(31));
    let refused = [
        ("image.tga=1.0", "tga"),
        ("extraArgs[0]=concurrency=4", "/extraArgs/0"),
        (digest.as_str(), "/image/digest"),
        ("image.digest=0.1.0", "/image/digest"),
    ];
    for (value, named) in refused {
        let out = Command::new(&env.helm)
            .args(["template", "cro", CHART, "--set", value])
            .current_dir(repo())
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains(named),
            "--set {value}: {said}"
        );
    }
}

/// A release's bundle, pinned as docs/install.md says
/// (`make bundle BUNDLE_VALUES="image.repository=... image.digest=..."`,
/// with the in-cluster images): the Deployment, `containerImage` and
/// `relatedImages` (what mirroring for a disconnected cluster copies) name
/// the operator's image by digest, the in-cluster images reach the
/// operator as RELATED_IMAGE_* and are related images too, and the
/// validator accepts it. The checked-in bundle's relatedImages name the
/// chart's default image alone.
#[test]
fn a_release_bundle_names_its_image_by_digest_everywhere() {
    let env = TestEnv::load();
    let out = repo().join("target/testenv/bundle-pinned");
    let _ = std::fs::remove_dir_all(&out);
    let pinned = format!(
        "quay.io/example/cloud-resource-operator@sha256:{}",
        "0123456789abcdef".repeat(4)
    );
    let (repository, digest) = pinned.split_once('@').unwrap_or_default();
    let postgres = format!("docker.io/library/postgres@sha256:{}", "1f".repeat(32));
    let redis = format!("docker.io/library/redis@sha256:{}", "2f".repeat(32));
    run(
        Path::new("python3"),
        &[
            "deploy/bundle/generate.py",
            &env.helm.to_string_lossy(),
            &out.to_string_lossy(),
            &format!("image.repository={repository}"),
            &format!("image.digest={digest}"),
            &format!("operator.postgresImage={postgres}"),
            &format!("operator.redisImage={redis}"),
        ],
    );
    let csv_at = |dir: &Path| {
        let file = dir.join("manifests/cloud-resource-operator.clusterserviceversion.yaml");
        documents(&std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{e}"))).remove(0)
    };
    let images = |csv: &Value| {
        let deployment = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
        vec![
            text(&deployment["template"]["spec"]["containers"][0]["image"]),
            text(&csv["metadata"]["annotations"]["containerImage"]),
            text(&csv["spec"]["relatedImages"][0]["image"]),
        ]
    };
    let csv = csv_at(&out);
    assert_eq!(images(&csv), vec![pinned.clone(); 3]);
    let container = &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"]
        [0];
    let env_of = |name: &str| {
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .map(|e| text(&e["value"]))
    };
    assert_eq!(env_of("RELATED_IMAGE_POSTGRES"), Some(postgres.clone()));
    assert_eq!(env_of("RELATED_IMAGE_REDIS"), Some(redis.clone()));
    assert_eq!(
        csv["spec"]["relatedImages"],
        json!([{"name": "cloud-resource-operator", "image": pinned},
            {"name": "postgres", "image": postgres}, {"name": "redis", "image": redis}])
    );
    let shipped = "cloud-resource-operator:0.1.0".to_string();
    let checked_in = csv_at(&repo().join("bundle"));
    assert_eq!(images(&checked_in), vec![shipped.clone(); 3]);
    assert_eq!(
        checked_in["spec"]["relatedImages"],
        json!([{"name": "cloud-resource-operator", "image": shipped}])
    );

    assert_valid_bundle(&out);
}

/// The chart's values for the operator's flags become its environment,
/// and `sts.enabled` mounts the projected ServiceAccount token (audience
/// `openshift`) where the operator reads it by default, as OpenShift STS
/// needs.
#[test]
fn the_charts_flag_values_and_sts_mount_reach_the_operator() {
    let rendered = run(
        &TestEnv::load().helm,
        &[
            "template",
            "cro",
            CHART,
            "--set",
            "sts.enabled=true",
            "--set",
            "operator.namespaceConfig=false",
            "--set",
            "operator.goCompatibleResources=false",
            "--set",
            "operator.recheckInterval=600",
            "--set",
            "operator.awsVpcId=vpc-0abc",
            "--set",
            "operator.shardCount=2",
            "--set",
            "operator.shardIndex=1",
            "--set",
            "extraArgs[0]=--connection-check-interval=60",
        ],
    );
    let docs = documents(&rendered);
    let pod = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(|d| d["spec"]["template"]["spec"].clone())
        .unwrap_or_else(|| panic!("no Deployment rendered"));
    let container = &pod["containers"][0];
    let env: BTreeMap<String, String> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((text(&e["name"]), e["value"].as_str()?.to_string())))
        .collect();
    for (name, value) in [
        ("NAMESPACE_CONFIG", "false"),
        ("GO_COMPATIBLE_RESOURCES", "false"),
        ("RECHECK_INTERVAL", "600"),
        ("AWS_VPC_ID", "vpc-0abc"),
        ("SHARD_COUNT", "2"),
        ("SHARD_INDEX", "1"),
    ] {
        assert_eq!(env.get(name).map(String::as_str), Some(value), "{name}");
    }
    assert_eq!(
        container["args"],
        json!(["run", "--connection-check-interval=60"])
    );
    // The operator's default --sts-token-file is <mountPath>/token.
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == "sts-token")
        .cloned()
        .unwrap_or_else(|| panic!("no sts-token mount: {container:#}"));
    assert_eq!(
        mount["mountPath"],
        "/var/run/secrets/openshift/serviceaccount"
    );
    let volume = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "sts-token")
        .cloned()
        .unwrap_or_default();
    let token = &volume["projected"]["sources"][0]["serviceAccountToken"];
    assert_eq!(
        (token["audience"].as_str(), token["path"].as_str()),
        (Some("openshift"), Some("token")),
        "{volume:#}"
    );
    // By default: no mount, and the flags keep the operator's defaults.
    let default = documents(&run(&TestEnv::load().helm, &["template", "cro", CHART]));
    let text_of = serde_json::to_string(&default).unwrap_or_default();
    assert!(
        !text_of.contains("sts-token") && !text_of.contains("RECHECK_INTERVAL"),
        "defaults set nothing"
    );
}

/// The actions of docs/operations.md's "AWS permissions" table, with their
/// service prefixes (remarks in parentheses left out).
pub(crate) fn documented_aws_actions() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md"))
        .unwrap_or_else(|e| panic!("{e}"));
    let table = doc
        .split("| service | actions |")
        .nth(1)
        .unwrap_or_else(|| panic!("no permissions table"));
    let prefixes = [
        ("EC2", "ec2"),
        ("RDS", "rds"),
        ("ElastiCache", "elasticache"),
        ("S3", "s3"),
        ("IAM", "iam"),
        ("SES", "ses"),
        ("CloudWatch", "cloudwatch"),
        ("Resource Groups Tagging API", "tag"),
        ("STS", "sts"),
    ];
    let mut actions = BTreeSet::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').collect();
        let service = cells.get(1).map(|c| c.trim()).unwrap_or_default();
        let prefix = prefixes
            .iter()
            .find(|(name, _)| service.starts_with(name))
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("unknown service row {service:?}"));
        // Remarks in parentheses (nested once) name calls, not actions.
        let (mut text, mut depth) = (String::new(), 0);
        for c in cells.get(2).copied().unwrap_or_default().chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                c if depth == 0 => text.push(c),
                _ => {}
            }
        }
        for name in text.split('`').skip(1).step_by(2) {
            if name.contains(':') {
                actions.insert(name.to_string());
            } else if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                actions.insert(format!("{prefix}:{name}"));
            }
        }
    }
    actions
}

/// deploy/openshift-migration/credentials-request.yaml grants exactly the
/// documented actions (less STS's web identity, which CCO does not mint):
/// a switched Go installation widens its minted user's policy with it.
#[test]
fn the_go_credentials_request_grants_the_documented_actions() {
    let path = repo().join("deploy/openshift-migration/credentials-request.yaml");
    let docs = documents(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}")));
    let granted: BTreeSet<String> = docs
        .iter()
        .flat_map(|d| {
            d["spec"]["providerSpec"]["statementEntries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|e| e["action"].as_array().cloned().unwrap_or_default())
        .map(|a| text(&a))
        .collect();
    assert_eq!(
        docs.first()
            .map(|d| text(&d["metadata"]["name"]))
            .as_deref(),
        Some("cloud-resources-aws-credentials")
    );
    let mut documented = documented_aws_actions();
    documented.remove("sts:AssumeRoleWithWebIdentity");
    assert!(documented.len() > 70, "the table parsed to {documented:?}");
    assert_eq!(
        granted,
        documented,
        "{} and docs/operations.md differ",
        path.display()
    );
}

/// With `operator.watchNamespaces`, the chart grants access to Secrets
/// (and everything else in namespaces) only in the watched namespaces and
/// its own, never cluster-wide (issue #43); the install test runs the
/// operator as a pod under exactly that.
#[test]
fn with_watched_namespaces_the_chart_binds_no_cluster_wide_secret_access() {
    let env = TestEnv::load();
    let rendered = run(
        &env.helm,
        &[
            "template",
            "cro",
            CHART,
            "--namespace",
            RELEASE_NAMESPACE,
            "--set",
            "operator.watchNamespaces={team-a,team-b}",
        ],
    );
    let docs = documents(&rendered);
    let roles: BTreeMap<String, Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ClusterRole")
        .map(|d| (text(&d["metadata"]["name"]), d.clone()))
        .collect();
    let grants_secrets = |role: &Value| {
        role["rules"].as_array().into_iter().flatten().any(|r| {
            r["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x == "secrets" || x == "*")
        })
    };
    for binding in docs.iter().filter(|d| d["kind"] == "ClusterRoleBinding") {
        let role = &roles[&text(&binding["roleRef"]["name"])];
        assert!(
            !grants_secrets(role),
            "ClusterRoleBinding {} grants Secrets cluster-wide",
            text(&binding["metadata"]["name"])
        );
    }
    let mut bound: Vec<String> = docs
        .iter()
        .filter(|d| {
            d["kind"] == "RoleBinding"
                && grants_secrets(
                    &roles
                        .get(&text(&d["roleRef"]["name"]))
                        .cloned()
                        .unwrap_or_default(),
                )
        })
        .map(|d| text(&d["metadata"]["namespace"]))
        .collect();
    bound.sort();
    assert_eq!(bound, ["cloud-resource-operator", "team-a", "team-b"]);
}

/// `networkPolicy` (issue #59: /metrics names every tenant's CRs and
/// carries RDS ARNs): by default one NetworkPolicy selecting exactly the
/// release's operator pods, admitting only the monitoring namespaces and
/// only on the metrics port, accepted by the API server; none when
/// `networkPolicy.enabled=false`. kustomize's deploy/network-policy/,
/// which deploy/ includes, is the same.
#[tokio::test]
async fn the_charts_network_policy_admits_only_its_peers_to_the_metrics_port() {
    crate::support::bounded("the_charts_network_policy_admits_only_its_peers_to_the_metrics_port", async move {
    let env = TestEnv::load();
    let client = env.client().await;
    ensure_release_namespace(&client).await;
    let args = ["template", "cro", CHART, "--namespace", RELEASE_NAMESPACE];
    let rendered = run(&env.helm, &args);
    let docs = documents(&rendered);
    let policies: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "NetworkPolicy")
        .collect();
    assert_eq!(policies.len(), 1, "{rendered}");
    let policy = policies[0];
    let pods = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(|d| d["spec"]["template"]["metadata"]["labels"].clone());
    let pods = pods.unwrap_or_else(|| panic!("no Deployment rendered"));
    for (k, v) in policy["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        assert_eq!(
            &pods[k], v,
            "the policy selects pod label {k}={v}; the pods have {pods}"
        );
    }
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "openshift-monitoring"}}}],
            "ports": [{"port": "metrics", "protocol": "TCP"}]}])
    );
    // kustomize's (deploy/network-policy/) is the same policy for the
    // pods of deploy/manager.
    let kustomized = kustomize("deploy/network-policy/");
    assert_eq!(kustomized.len(), 1);
    assert_eq!(kustomized[0]["spec"]["ingress"], policy["spec"]["ingress"]);
    assert_eq!(
        kustomized[0]["spec"]["policyTypes"],
        policy["spec"]["policyTypes"]
    );
    let manager = kustomize("deploy/manager/");
    let manager_pods = manager
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .map(|d| d["spec"]["template"]["metadata"]["labels"].clone())
        .unwrap_or_default();
    for (k, v) in kustomized[0]["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        assert_eq!(&manager_pods[k], v, "deploy/network-policy selects {k}={v}");
    }
    run(
        &env.kubectl,
        &["apply", "--dry-run=server", "-k", "deploy/network-policy/"],
    );
    let policy = serde_json::to_string(policy).unwrap_or_default();
    server_dry_run(&env, "helm-network-policy.yaml", &policy);
    assert!(
        kustomize("deploy/").iter().any(|d| d["kind"] == "NetworkPolicy"),
        "deploy/ installs no NetworkPolicy"
    );
    let off = ["template", "cro", CHART, "--set", "networkPolicy.enabled=false"];
    assert!(
        !documents(&run(&env.helm, &off)).iter().any(|d| d["kind"] == "NetworkPolicy"),
        "networkPolicy.enabled=false still renders one"
    );
}).await;
}

/// Two releases of the chart side by side, as the sharding setup
/// (docs/operations.md, Sharding) installs them: each with its own names,
/// the second without the configuration ConfigMaps. Helm installs both into
/// one namespace (no object owned twice), each Deployment selects only its
/// own pods, and both uninstall cleanly.
#[tokio::test]
async fn two_releases_install_side_by_side_as_two_shards() {
    with_namespace("tworel", |client, ns| async move {
        let env = TestEnv::load();
        // Names of their own: other tests install the default names at once.
        let names = [format!("cro-{ns}-0"), format!("cro-{ns}-1")];
        let mut installed = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let mut args: Vec<String> = [
                "install",
                &format!("shard-{index}"),
                CHART,
                "--namespace",
                &ns,
                "--skip-crds",
                "--set",
                "replicaCount=0",
                "--set",
                "operator.shardCount=2",
                "--set",
                &format!("operator.shardIndex={index}"),
                "--set",
                &format!("fullnameOverride={name}"),
                "--set",
                "monitoring.prometheusRule.enabled=false",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if index > 0 {
                args.extend(["--set".into(), "installConfiguration=false".into()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&env.helm, &args);
            installed.push(format!("shard-{index}"));
        }
        let deployments =
            Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns)
                .list(&Default::default())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        let selectors: BTreeMap<String, Value> = deployments
            .items
            .iter()
            .map(|d| {
                (
                    d.name_any(),
                    json!(d.spec.as_ref().map(|s| s.selector.clone())),
                )
            })
            .collect();
        let cluster_roles: Vec<bool> = {
            let roles = Api::<ClusterRole>::all(client.clone());
            let mut found = Vec::new();
            for name in &names {
                found.push(
                    roles
                        .get_opt(name)
                        .await
                        .unwrap_or_else(|e| panic!("{e}"))
                        .is_some(),
                );
            }
            found
        };
        for release in &installed {
            run(
                &env.helm,
                &["uninstall", release, "--namespace", &ns, "--wait"],
            );
        }
        assert_eq!(
            selectors.keys().cloned().collect::<Vec<_>>(),
            names.to_vec()
        );
        assert_ne!(
            selectors[&names[0]], selectors[&names[1]],
            "the Deployments select each other's pods"
        );
        assert_eq!(
            cluster_roles,
            [true, true],
            "each release has its ClusterRole"
        );
        let roles = Api::<ClusterRole>::all(client.clone());
        for name in &names {
            assert!(
                roles
                    .get_opt(name)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
                    .is_none(),
                "ClusterRole {name} left behind"
            );
        }
    })
    .await;
}

/// deploy/openshift-sts, the kustomize component for OpenShift STS, mounts
/// the same projected token as the chart's `sts.enabled=true`.
#[test]
fn the_openshift_sts_component_mounts_the_token_as_the_chart_does() {
    let env = TestEnv::load();
    let overlay = repo().join("target/testenv/sts-overlay");
    std::fs::create_dir_all(&overlay).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources: [../../../deploy]\ncomponents: [../../../deploy/openshift-sts]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let kustomized = kustomize(&overlay.to_string_lossy());
    let charted = documents(&run(
        &env.helm,
        &[
            "template",
            "cro",
            CHART,
            "--namespace",
            RELEASE_NAMESPACE,
            "--set",
            "sts.enabled=true",
        ],
    ));
    let mounts = |docs: &[Value]| {
        let pod = docs
            .iter()
            .find(|d| d["kind"] == "Deployment")
            .map(|d| d["spec"]["template"]["spec"].clone())
            .unwrap_or_else(|| panic!("no Deployment rendered"));
        (
            pod["volumes"].clone(),
            pod["containers"][0]["volumeMounts"].clone(),
        )
    };
    let (k, h) = (mounts(&kustomized), mounts(&charted));
    assert!(
        k.0.is_array() && k.1.is_array(),
        "the component added nothing: {k:?}"
    );
    assert_eq!(k, h, "kustomize's STS mount differs from the chart's");
}

/// The Dockerfile is not built here (its base images come from registries
/// CI cannot reach): it must at least promise what `make image` builds.
#[test]
fn the_dockerfile_keeps_the_image_contract_of_make_image() {
    let read =
        |p: &str| std::fs::read_to_string(repo().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let script = read("deploy/image/build.sh");
    let config = script
        .split_once("<<JSON\n")
        .and_then(|(_, rest)| rest.split_once("\nJSON\n"))
        .map(|(json, _)| json)
        .unwrap_or_else(|| panic!("build.sh writes no config.json heredoc"));
    let config: Value =
        serde_json::from_str(config).unwrap_or_else(|e| panic!("build.sh's config.json: {e}"));
    let dockerfile = read("Dockerfile");
    let last = |instruction: &str| {
        dockerfile
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(instruction)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("the Dockerfile has no {instruction}"))
            .trim()
            .to_string()
    };
    let json = |text: String| {
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
    };
    assert_eq!(json(last("ENTRYPOINT")), config["Entrypoint"]);
    assert_eq!(json(last("CMD")), config["Cmd"]);
    assert_eq!(Value::String(last("USER")), config["User"]);
    let port = format!("{}/tcp", last("EXPOSE"));
    assert!(
        config["ExposedPorts"].get(&port).is_some(),
        "build.sh exposes {}, the Dockerfile {port}",
        config["ExposedPorts"]
    );
    // The toolchain the Dockerfile builds with is the one rust-toolchain.toml names.
    let toolchain = read("rust-toolchain.toml");
    let channel = toolchain
        .lines()
        .find_map(|l| {
            l.strip_prefix("channel = ")?
                .trim()
                .strip_prefix('"')?
                .strip_suffix('"')
        })
        .unwrap_or_else(|| panic!("rust-toolchain.toml names no channel"));
    let minor = channel.rsplit_once('.').map_or(channel, |(m, _)| m);
    let from = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("FROM docker.io/library/rust:"))
        .unwrap_or_default();
    assert!(
        from.starts_with(&format!("{minor}-")),
        "the Dockerfile builds with rust:{from}, rust-toolchain.toml names {channel}"
    );
}
