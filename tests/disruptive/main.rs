//! Tests that change what every test would see — a CRD's schema, the API
//! server process itself — so they run in their own test binary (cargo
//! runs test binaries one after another) and, within it, one at a time.

#[path = "../support/mod.rs"]
mod support;

mod fairness;
mod faults;
mod openshift;
mod poison;
mod relist;
mod restore;
mod rollout;

/// Runs `tests/testenv/testenv.sh` with `args` (restart a process,
/// compact etcd), failing the test if it fails.
fn testenv(args: &[&str]) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testenv/testenv.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("running testenv.sh: {e}"));
    assert!(status.success(), "testenv.sh {args:?} failed");
}

/// Held for the whole of each test: no two of these run at once.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A workshop (in-cluster) BlobStorage `name` publishing `<name>-sec`.
fn workshop_blob(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage", "metadata": {"name": name},
           "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}})
}

/// A namespace of `prefix` and an operator of it without leader election,
/// which rides out an API server's outage instead of exiting when its
/// Lease could not be renewed.
async fn riding_out_outages(prefix: &str) -> (kube::Client, String, support::Operator) {
    let client = support::TestEnv::load().client().await;
    support::ensure_crds(&client).await;
    let ns = support::create_namespace(&client, prefix).await;
    let operator = support::Operator::launch(support::Launch {
        log_name: format!("operator-{ns}.log"),
        extra_args: vec!["--leader-election=false".into()],
        ..support::Launch::new(&ns)
    })
    .await;
    (client, ns, operator)
}

/// Waits until the Secret `name` exists.
async fn wait_secret(secrets: &kube::Api<k8s_openapi::api::core::v1::Secret>, name: &str) {
    let deadline = tokio::time::Instant::now() + support::DEFAULT_TIMEOUT;
    while secrets.get_opt(name).await.ok().flatten().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Secret {name} was not published within {:?}",
            support::DEFAULT_TIMEOUT
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}
