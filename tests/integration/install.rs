//! The operator installed as users install it (issue #40): its own image
//! (`deploy/image/build.sh`, as `make image` builds it, from the binary
//! under test) loaded into the real node, the Helm chart installed, pinned
//! to the digest `make image` printed, into a
//! namespace that enforces Pod Security "restricted", under an arbitrary
//! UID as OpenShift assigns one, watching one other "restricted"
//! namespace. The pods become Ready through their own probes, one takes
//! the Lease, a workshop Postgres becomes complete and Connectable, an AWS
//! BlobStorage completes against the emulator, both are deleted, and the
//! metrics are read through the chart's Service. The same again with
//! kustomize: deploy/ under an overlay that moves it to another namespace,
//! as users adapt it.

use std::{process::Command, time::Duration};

use cloud_resource_operator::api::{BlobStorage, Phase, Postgres};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{Namespace, Pod, Secret, Service},
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;

use crate::deploy::{repo, run};
use crate::support::{
    DEFAULT_TIMEOUT, TestEnv, create_json, create_namespace, ensure_crds, place_on_real_node,
    real_node, wait_connected, wait_deleted, wait_for, wait_phase,
};

/// Pods start for real (image import, probes every 10 s).
pub(crate) const START: Duration = Duration::from_secs(180);
/// What OpenShift's restricted-v2 might assign.
const OPENSHIFT_UID: &str = "1000680000";

async fn restricted_namespace(client: &Client, prefix: &str) -> String {
    let ns = create_namespace(client, prefix).await;
    place_on_real_node(client, &ns).await;
    let labels =
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    Api::<Namespace>::all(client.clone())
        .patch(&ns, &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    ns
}

/// GET `path` from `host:port` over plain HTTP/1.0; the body.
async fn http_get(host: &str, port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect((host, port))
        .await
        .unwrap_or_else(|e| panic!("{host}:{port}: {e}"));
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut body = String::new();
    tcp.read_to_string(&mut body)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    body
}

#[tokio::test]
async fn helm_installs_the_image_into_restricted_namespaces_under_an_arbitrary_uid() {
    crate::support::bounded(
        "helm_installs_the_image_into_restricted_namespaces_under_an_arbitrary_uid",
        async move {
            let (node, env, client, pod_aws) = environment().await;

            let (operator_ns, app_ns, digest) = prepared(&client, "cro-install", "cro-app").await;
            // The chart as a release packages it (make release), not the directory.
            let chart = released(&env, &digest);
            let helm = env.helm.clone();
            let release = "cro";
            // As a platform engineer on OpenShift would, with the emulator's
            // endpoint for the AWS samples.
            let args = [
                "install".to_string(),
                release.to_string(),
                chart,
                "--namespace".into(),
                operator_ns.clone(),
                "--set".into(),
                format!("podSecurityContext.runAsUser={OPENSHIFT_UID}"),
                "--set".into(),
                format!("operator.watchNamespaces={{{app_ns}}}"),
                // The packaged chart pins the image by digest itself.
                "--set".into(),
                "image.pullPolicy=Never".into(),
                "--set".into(),
                format!("operator.awsRegion={}", env.aws_region),
                "--set".into(),
                "extraEnv[0].name=AWS_ENDPOINT_URL".into(),
                "--set".into(),
                format!("extraEnv[0].value={pod_aws}"),
                "--set".into(),
                "monitoring.prometheusRule.enabled=false".into(),
                // A switch from the Go operator keeps its metrics Service.
                "--set".into(),
                "monitoring.goCompatible=true".into(),
            ];
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let result = std::panic::AssertUnwindSafe(async {
                run(&helm, &args);
                let chart = Expect {
                    pods: 2,
                    uid: Some(OPENSHIFT_UID),
                    image: &format!("cloud-resource-operator@{digest}"),
                    digest: &digest,
                    services: &[
                        ("cloud-resource-operator-metrics", 8080),
                        ("operator-metrics-service", 8383),
                    ],
                };
                installed(&client, &node, &operator_ns, &app_ns, &chart).await;
            });
            let outcome = futures::FutureExt::catch_unwind(result).await;

            // Whatever happened: the release and both namespaces go.
            let logs = operator_logs(&env, &operator_ns);
            let _ = Command::new(&helm)
                .args(["uninstall", release, "--namespace", &operator_ns, "--wait"])
                .env("KUBECONFIG", &env.kubeconfig)
                .output();
            cleaned_up(&client, &[&operator_ns, &app_ns], outcome, logs).await;
        },
    )
    .await;
}

/// deploy/ as a user adapts it: an overlay moving it into their namespace
/// (cluster-scoped names made unique here, as a second installation
/// would), with the image, the one namespace to watch and the AWS
/// endpoint; applied server-side as docs/install.md says.
#[tokio::test]
async fn kustomize_installs_deploy_under_an_overlay_into_restricted_namespaces() {
    crate::support::bounded("kustomize_installs_deploy_under_an_overlay_into_restricted_namespaces", async move {
    let (node, env, client, pod_aws) = environment().await;
    let (operator_ns, app_ns, digest) = prepared(&client, "cro-kustomize", "cro-kapp").await;
    let overlay = repo().join(format!("target/overlays/{operator_ns}"));
    std::fs::create_dir_all(&overlay).unwrap_or_else(|e| panic!("{e}"));
    let region = &env.aws_region;
    let kustomization = format!(
        r#"namespace: {operator_ns}
resources:
  - ../../../deploy
images:
  - name: cloud-resource-operator
    newName: docker.io/library/cloud-resource-operator
    newTag: 0.1.0
patches:
  - target: {{kind: ClusterRole, name: cloud-resource-operator}}
    patch: '[{{"op": "replace", "path": "/metadata/name", "value": "{operator_ns}"}}]'
  - target: {{kind: ClusterRoleBinding, name: cloud-resource-operator}}
    patch: '[{{"op": "replace", "path": "/metadata/name", "value": "{operator_ns}"}}]'
  - target: {{kind: ValidatingAdmissionPolicy, name: cloud-resource-operator-approvals}}
    patch: '[{{"op": "replace", "path": "/metadata/name", "value": "{operator_ns}-approvals"}}]'
  - target: {{kind: ValidatingAdmissionPolicyBinding, name: cloud-resource-operator-approvals}}
    patch: '[{{"op": "replace", "path": "/metadata/name", "value": "{operator_ns}-approvals"}}, {{"op": "replace", "path": "/spec/policyName", "value": "{operator_ns}-approvals"}}]'
  - target: {{kind: Deployment, name: cloud-resource-operator}}
    patch: |-
      - {{op: replace, path: /spec/replicas, value: 1}}
      - {{op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}}
      - {{op: add, path: /spec/template/spec/containers/0/env/-, value: {{name: WATCH_NAMESPACE, value: {app_ns}}}}}
      - {{op: add, path: /spec/template/spec/containers/0/env/-, value: {{name: AWS_REGION, value: {region}}}}}
      - {{op: add, path: /spec/template/spec/containers/0/env/-, value: {{name: AWS_ENDPOINT_URL, value: "{pod_aws}"}}}}
"#
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization)
        .unwrap_or_else(|e| panic!("{e}"));
    let overlay_arg = overlay.to_string_lossy().into_owned();
    let result = std::panic::AssertUnwindSafe(async {
        let args = [
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            &overlay_arg,
        ];
        run(&env.kubectl, &args);
        let deployed = Expect {
            pods: 1,
            uid: None,
            image: "docker.io/library/cloud-resource-operator:0.1.0",
            digest: &digest,
            services: &[("cloud-resource-operator-metrics", 8080)],
        };
        installed(&client, &node, &operator_ns, &app_ns, &deployed).await;
    });
    let outcome = futures::FutureExt::catch_unwind(result).await;

    // Whatever happened: what it made goes, but not the CRDs other tests use.
    let logs = operator_logs(&env, &operator_ns);
    let approvals = format!("{operator_ns}-approvals");
    let cluster_scoped = [
        ("clusterrolebinding", operator_ns.as_str()),
        ("clusterrole", &operator_ns),
        ("validatingadmissionpolicybinding", &approvals),
        ("validatingadmissionpolicy", &approvals),
    ];
    for (kind, name) in cluster_scoped {
        let _ = Command::new(&env.kubectl)
            .args(["delete", kind, name, "--ignore-not-found"])
            .env("KUBECONFIG", &env.kubeconfig)
            .output();
    }
    let _ = std::fs::remove_dir_all(&overlay);
    cleaned_up(&client, &[&operator_ns, &app_ns], outcome, logs).await;
}).await;
}

/// The real node's name, the environment and its client (CRDs installed),
/// and the emulator's endpoint as pods reach it.
pub(crate) async fn environment() -> (String, TestEnv, Client, String) {
    let node = real_node();
    let env = TestEnv::load();
    let client = env.client().await;
    ensure_crds(&client).await;
    let pod_aws = std::env::var("CRO_TESTENV_POD_AWS_ENDPOINT").unwrap_or_else(|_| {
        panic!("CRO_TESTENV_POD_AWS_ENDPOINT is not set: the environment has no real node")
    });
    (node, env, client, pod_aws)
}

/// The image of the binary under test, loaded into the real node; a
/// namespace for the operator and one for applications, both enforcing
/// Pod Security "restricted", and the AWS credentials Secret. The last is
/// the image's digest.
pub(crate) async fn prepared(
    client: &Client,
    operator: &str,
    app: &str,
) -> (String, String, String) {
    // Once for all the tests here (they would write the same archive).
    static IMAGE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let digest = IMAGE.get_or_init(|| async { image() }).await.clone();
    let operator_ns = restricted_namespace(client, operator).await;
    let app_ns = restricted_namespace(client, app).await;
    // AWS credentials for the emulator, in the Secret the Deployment reads.
    let creds: Secret =
        serde_json::from_value(json!({"metadata": {"name": "cloud-resource-operator-aws"},
        "stringData": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}}))
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<Secret>::namespaced(client.clone(), &operator_ns)
        .create(&PostParams::default(), &creds)
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    (operator_ns, app_ns, digest)
}

/// The digest deploy/image/build.sh printed (`said`, its output).
pub(crate) fn printed_digest(said: &str) -> String {
    said.lines()
        .find_map(|l| l.strip_prefix("digest: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("build.sh printed no digest: {said}"))
        .to_string()
}

/// The image, as `make image` builds it, of the binary under test, loaded
/// into the real node; its digest, as build.sh printed it.
fn image() -> String {
    let said = run(
        &repo().join("deploy/image/build.sh"),
        &[env!("CARGO_BIN_EXE_cloud-resource-operator")],
    );
    assert!(
        said.contains("docker.io/library/cloud-resource-operator:0.1.0"),
        "{said}"
    );
    let digest = printed_digest(&said);
    let file = std::fs::read_to_string(repo().join("target/image/cloud-resource-operator.digest"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.trim(), digest);
    run(
        &repo().join("tests/testenv/testenv.sh"),
        &["load-image", "target/image/cloud-resource-operator.tar"],
    );
    digest
}

/// `make release` of the binary under test, as a pre-release (it takes
/// CHANGELOG's [Unreleased] section); its image loaded into the real node.
/// Checks what a user checks before installing (checksums, the image's
/// digest, the chart's version and pin, the krew manifest, the plugin, the
/// SBOM); the packaged chart's path.
fn released(env: &TestEnv, digest: &str) -> String {
    let script = repo().join("deploy/release/release.sh");
    let refused = Command::new(&script)
        .args(["9.9.9", env!("CARGO_BIN_EXE_cloud-resource-operator")])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("CHANGELOG.md has no section '## [9.9.9]'"),
        "a release without its CHANGELOG section: {said}"
    );

    let version = "0.1.1-rc.1";
    run(
        &script,
        &[version, env!("CARGO_BIN_EXE_cloud-resource-operator")],
    );
    let dir = repo().join("target/dist").join(version);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let sums = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let listed = read("SHA256SUMS");
    assert!(
        sums.status.success() && listed.lines().count() == 8,
        "SHA256SUMS: {listed}"
    );
    // The same binary gives the same image, whatever its name.
    assert_eq!(
        read(&format!("cloud-resource-operator-{version}.digest")).trim(),
        digest
    );
    let chart = dir.join(format!("cloud-resource-operator-{version}.tgz"));
    let chart = chart.to_string_lossy().into_owned();
    let shown = run(&env.helm, &["show", "all", &chart]);
    assert!(
        shown.contains(&format!("version: {version}"))
            && shown.contains(&format!("appVersion: {version}"))
            && shown.contains(&format!("digest: \"{digest}\"")),
        "the packaged chart: {shown}"
    );
    let notes = read("RELEASE_NOTES.md");
    assert!(
        notes.starts_with(&format!("## [{version}]\n")) && notes.contains("### "),
        "{notes}"
    );
    let sbom: serde_json::Value =
        serde_json::from_str(&read("sbom.cdx.json")).unwrap_or_else(|e| panic!("sbom: {e}"));
    let components: Vec<&str> = sbom["components"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        sbom["bomFormat"] == "CycloneDX"
            && ["kube-client", "aws-sdk-rds", "redis", "rustls"]
                .iter()
                .all(|c| components.contains(c)),
        "the SBOM lists {} components",
        components.len()
    );

    // The plugin, as krew would unpack it, found by kubectl on PATH.
    let plugin = format!("kubectl-cro_{version}_linux_amd64.tar.gz");
    let manifest = read("cro.yaml");
    let sum = run(
        std::path::Path::new("sha256sum"),
        &[&dir.join(&plugin).to_string_lossy()],
    );
    let sum = sum.split_whitespace().next().unwrap_or_default();
    assert!(
        manifest.contains(&format!("sha256: {sum}")) && manifest.contains(&format!("/{plugin}")),
        "cro.yaml: {manifest}"
    );
    let unpacked = dir.join("plugin");
    std::fs::create_dir_all(&unpacked).unwrap_or_else(|e| panic!("{e}"));
    run(
        std::path::Path::new("tar"),
        &[
            "-xzf",
            &dir.join(&plugin).to_string_lossy(),
            "-C",
            &unpacked.to_string_lossy(),
        ],
    );
    let path = format!(
        "{}:{}",
        unpacked.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let help = Command::new(&env.kubectl)
        .args(["cro", "status", "--help"])
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        help.status.success() && String::from_utf8_lossy(&help.stdout).contains("Read-only"),
        "kubectl cro status --help: {help:?}"
    );

    run(
        &repo().join("tests/testenv/testenv.sh"),
        &[
            "load-image",
            &dir.join(format!("cloud-resource-operator-{version}.oci.tar"))
                .to_string_lossy(),
        ],
    );
    chart
}

/// The operator pods' last log lines.
pub(crate) fn operator_logs(env: &TestEnv, ns: &str) -> std::io::Result<std::process::Output> {
    Command::new(&env.kubectl)
        .args([
            "--kubeconfig",
            &env.kubeconfig.to_string_lossy(),
            "-n",
            ns,
            "logs",
            "-l",
            "app.kubernetes.io/name=cloud-resource-operator",
            "--tail",
            "40",
            "--prefix",
        ])
        .output()
}

/// Deletes `namespaces`, then fails with the logs if the test did.
pub(crate) async fn cleaned_up(
    client: &Client,
    namespaces: &[&str],
    outcome: std::thread::Result<()>,
    logs: std::io::Result<std::process::Output>,
) {
    for ns in namespaces {
        let _ = Api::<Namespace>::all(client.clone())
            .delete(ns, &Default::default())
            .await;
    }
    if let Err(e) = outcome {
        if let Ok(out) = logs {
            eprintln!(
                "operator pods' last log lines:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::panic::resume_unwind(e);
    }
}

/// What an installation shows when it works.
struct Expect<'a> {
    /// Replicas that become Ready.
    pods: usize,
    /// The UID their spec sets (`None`: none, the image's user applies;
    /// `runAsNonRoot` has the kubelet check it is not root).
    uid: Option<&'a str>,
    /// The Services that serve the metrics, and their ports.
    services: &'a [(&'a str, u16)],
    /// The operator container's image as the installation names it.
    image: &'a str,
    /// The digest the running image must have: the kubelet reports
    /// containerd's, which it computed from the archive's manifest.
    digest: &'a str,
}

/// Waits until one of `pods` holds the operator's Lease.
pub(crate) async fn one_leads(client: &Client, ns: &str, pods: &[Pod]) {
    let leases = Api::<Lease>::namespaced(client.clone(), ns);
    let names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    wait_for(
        &leases,
        "cloud-resource-operator",
        "one of the pods holding the Lease",
        START,
        move |l: Option<&Lease>| {
            l.and_then(|l| l.spec.as_ref()?.holder_identity.clone())
                .is_some_and(|h| names.iter().any(|n| h.contains(n.as_str())))
        },
    )
    .await;
}

async fn installed(
    client: &Client,
    node: &str,
    operator_ns: &str,
    app_ns: &str,
    expect: &Expect<'_>,
) {
    // Ready through the pods' own probes, on the real node, as the UID asked.
    let pods = Api::<Pod>::namespaced(client.clone(), operator_ns);
    let selector = ListParams::default().labels("app.kubernetes.io/name=cloud-resource-operator");
    let started = tokio::time::Instant::now();
    let ready = loop {
        let listed = pods.list(&selector).await.unwrap_or_else(|e| panic!("{e}"));
        let ready: Vec<Pod> = listed
            .items
            .into_iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .collect();
        if ready.len() == expect.pods {
            break ready;
        }
        assert!(
            started.elapsed() < START,
            "the operator's {} pods are not Ready within {START:?}: {} ready",
            expect.pods,
            ready.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for pod in &ready {
        let spec = pod.spec.clone().unwrap_or_default();
        assert_eq!(spec.node_name.as_deref(), Some(node));
        let uid = spec.security_context.and_then(|s| s.run_as_user);
        assert_eq!(uid.map(|u| u.to_string()).as_deref(), expect.uid);
        assert_eq!(spec.containers[0].image.as_deref(), Some(expect.image));
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        let image_id = running.and_then(|c| c.first()).map(|c| c.image_id.as_str());
        assert!(
            image_id.is_some_and(|id| id.ends_with(&format!("@{}", expect.digest))),
            "the operator runs {image_id:?}, not the image of digest {}",
            expect.digest
        );
    }

    // One of them leads.
    one_leads(client, operator_ns, &ready).await;

    // A workshop Postgres in the other restricted namespace: complete,
    // and Connectable from the operator's own pod.
    let _: Postgres = create_json(client, app_ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
        "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "db-sec"}}})).await;
    let _: BlobStorage = create_json(client, app_ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": "files"},
        "spec": {"type": "managed", "tier": "development", "secretRef": {"name": "files-sec"}}})).await;
    let pgs = Api::<Postgres>::namespaced(client.clone(), app_ns);
    wait_connected(&pgs, "db", START).await;
    let blobs = Api::<BlobStorage>::namespaced(client.clone(), app_ns);
    wait_phase(&blobs, "files", Phase::Complete).await;
    let secret = Api::<Secret>::namespaced(client.clone(), app_ns)
        .get("files-sec")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(secret.data.unwrap_or_default().contains_key("bucketName"));

    // The metrics, through the chart's Service (kube-proxy), name both;
    // and through the Go operator's Service, as its ServiceMonitor scrapes.
    for &(name, port) in expect.services {
        let service = Api::<Service>::namespaced(client.clone(), operator_ns)
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("Service {name}: {e}"));
        let ip = service.spec.and_then(|s| s.cluster_ip).unwrap_or_default();
        let started = tokio::time::Instant::now();
        loop {
            let metrics = http_get(&ip, port, "/metrics").await;
            if metrics.contains("cro_postgres_status_phase")
                && metrics.contains("cro_blobstorage_status_phase")
            {
                break;
            }
            assert!(
                started.elapsed() < DEFAULT_TIMEOUT,
                "the metrics through {name} {ip}:{port} lack the phase gauges:\n{metrics}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    pgs.delete("db", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    blobs
        .delete("files", &Default::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    wait_deleted(&pgs, "db", DEFAULT_TIMEOUT).await;
    wait_deleted(&blobs, "files", DEFAULT_TIMEOUT).await;
}
