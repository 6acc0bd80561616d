//! Support for tests against the local test environment (real
//! kube-apiserver, kwok nodes, moto): a client, a fresh namespace per test,
//! waiting on conditions with a deadline, and AWS clients for the emulator.
//!
//! The environment comes from the variables `target/testenv/env.sh` exports
//! (`make test` sources it); when they are unset, that file is read directly,
//! so `cargo test` works after `make testenv-up`.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::{
    collections::BTreeMap,
    fmt::Debug,
    future::Future,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::{Namespace, ServiceAccount},
};
use kube::{
    Api, Client, Config, Resource, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
    runtime::wait::{Condition, await_condition, conditions},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// How long a test waits for something that should happen within seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The test environment's settings.
#[derive(Clone, Debug)]
pub struct TestEnv {
    pub kubeconfig: PathBuf,
    pub aws_endpoint_url: String,
    pub aws_region: String,
    pub kubectl: PathBuf,
    pub helm: PathBuf,
    pub promtool: PathBuf,
    /// The apiserver's audit log (requests of ServiceAccounts).
    pub audit_log: PathBuf,
    /// Every query-protocol call moto served (JSON lines).
    pub moto_request_log: PathBuf,
    /// Faults moto returns instead of calls (a JSON list).
    pub moto_faults: PathBuf,
    pub moto_maintenance: PathBuf,
    /// The test environment's CA, which signed its database servers.
    pub ca: PathBuf,
    /// The system's CAs and `ca`: the operators' SSL_CERT_FILE.
    pub trust: PathBuf,
}

impl TestEnv {
    /// Reads the environment; panics with the command to run when it is absent.
    pub fn load() -> TestEnv {
        let get = |key: &str| {
            env_var(key).unwrap_or_else(|| {
                panic!("{key} is not set and {ENV_SH} has no value for it: run `make testenv-up` first (or `make test`)")
            })
        };
        TestEnv {
            kubeconfig: PathBuf::from(get("KUBECONFIG")),
            aws_endpoint_url: get("AWS_ENDPOINT_URL"),
            aws_region: get("AWS_REGION"),
            kubectl: PathBuf::from(get("CRO_TESTENV_KUBECTL")),
            helm: PathBuf::from(get("CRO_TESTENV_HELM")),
            promtool: PathBuf::from(get("CRO_TESTENV_PROMTOOL")),
            audit_log: PathBuf::from(get("CRO_TESTENV_AUDIT_LOG")),
            moto_request_log: PathBuf::from(get("CRO_TESTENV_MOTO_REQUEST_LOG")),
            moto_faults: PathBuf::from(get("CRO_TESTENV_MOTO_FAULTS")),
            moto_maintenance: PathBuf::from(get("CRO_TESTENV_MOTO_MAINTENANCE")),
            ca: PathBuf::from(get("CRO_TESTENV_CA")),
            trust: PathBuf::from(get("CRO_TESTENV_TRUST")),
        }
    }

    /// A client for the test cluster, as the cluster admin.
    pub async fn client(&self) -> Client {
        client_of(&self.kubeconfig).await
    }

    /// AWS SDK settings pointed at the emulator (static test credentials
    /// come from the environment the SDK reads, set by env.sh, or the
    /// emulator's defaults).
    pub async fn aws_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(self.aws_region.clone()))
            .endpoint_url(self.aws_endpoint_url.clone())
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "testing",
                "testing",
                None,
                None,
                "cro-testenv",
            ))
            .load()
            .await
    }
}

impl TestEnv {
    /// An S3 client for the emulator (path-style addressing).
    pub async fn s3(&self) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::config::Builder::from(&self.aws_config().await)
            .force_path_style(true)
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const ENV_SH: &str = "target/testenv/env.sh";

/// A variable of the test environment: the process's, else env.sh's.
fn env_var(key: &str) -> Option<String> {
    std::env::var(key).ok().or_else(|| {
        let text = std::fs::read_to_string(repo_root().join(ENV_SH)).ok()?;
        parse_env_sh(&text).remove(key)
    })
}

/// Parses the `export KEY='value'` lines of env.sh.
fn parse_env_sh(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
        .collect()
}

/// The longest a test body may run (`CRO_TEST_LIMIT_SECS` overrides it):
/// a hung test fails with its name instead of holding CI until its own
/// deadline. Every wait inside has its own, shorter deadline.
pub fn test_limit() -> Duration {
    std::env::var("CRO_TEST_LIMIT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(Duration::from_secs(20 * 60), Duration::from_secs)
}

/// Runs a test body as a task under [`test_limit`]; a body still running
/// then is aborted and reported as a panic.
pub async fn limited<Fut>(what: &str, body: Fut) -> Result<(), tokio::task::JoinError>
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let task = tokio::spawn(body);
    let abort = task.abort_handle();
    match tokio::time::timeout(test_limit(), task).await {
        Ok(done) => done,
        Err(_) => {
            abort.abort();
            let (limit, what) = (test_limit(), what.to_string());
            tokio::spawn(async move { panic!("{what}: the test ran longer than {limit:?}") }).await
        }
    }
}

/// Runs a test body that makes no namespace of its own under
/// [`test_limit`], as [`with_namespace`] runs the others; its panic is
/// the test's.
pub async fn bounded<Fut>(what: &str, body: Fut)
where
    Fut: Future<Output = ()> + Send + 'static,
{
    if let Err(e) = limited(what, body).await {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Runs `test` with a fresh namespace, deleting the namespace afterwards
/// whether the test passed or panicked.
pub async fn with_namespace<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let client = TestEnv::load().client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let name = create_namespace(&client, prefix).await;
    let result = limited(&name, test(client, name.clone())).await;
    if let Err(e) = namespaces.delete(&name, &DeleteParams::default()).await {
        eprintln!("warning: deleting test namespace {name}: {e}");
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Waits until `condition` holds for the named object, or panics after
/// `timeout` showing the object as last seen.
pub async fn wait_for<K, C>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    condition: C,
) -> K
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    C: Condition<K>,
{
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, condition)).await {
        Ok(Ok(Some(obj))) => obj,
        Ok(Ok(None)) => panic!("{name} was deleted while waiting for {what}"),
        Ok(Err(e)) => panic!("watching {name} while waiting for {what}: {e}"),
        Err(_) => {
            let last = api.get_opt(name).await;
            panic!("timed out after {timeout:?} waiting for {name}: {what}; last seen: {last:#?}")
        }
    }
}

/// Waits until the named object is gone.
pub async fn wait_deleted<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let uid = match api.get_opt(name).await {
        Ok(Some(obj)) => obj.meta().uid.clone().unwrap_or_default(),
        Ok(None) => return,
        Err(e) => panic!("reading {name}: {e}"),
    };
    if tokio::time::timeout(
        timeout,
        await_condition(api.clone(), name, conditions::is_deleted(&uid)),
    )
    .await
    .is_err()
    {
        // Its status says what the deletion waits for.
        let last = api.get_opt(name).await;
        panic!(
            "timed out after {timeout:?} waiting for {name} to be deleted; last seen: {last:#?}"
        );
    }
}

/// Server-side applies `obj` with the test field manager.
pub async fn apply<K>(api: &Api<K>, obj: &K) -> Result<K, kube::Error>
where
    K: Resource + Clone + Debug + DeserializeOwned + serde::Serialize,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("cro-tests").force(),
        &Patch::Apply(obj),
    )
    .await
}

/// Server-side applies ConfigMap `name` in `ns` with `data` (an object of
/// strings), as a platform engineer's `kubectl apply` would.
pub async fn apply_config_map(client: &Client, ns: &str, name: &str, data: Value) {
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": data
    }))
    .unwrap_or_else(|e| panic!("ConfigMap {name}: {e}"));
    apply(&Api::namespaced(client.clone(), ns), &cm)
        .await
        .unwrap_or_else(|e| panic!("applying ConfigMap {ns}/{name}: {e}"));
}

/// Installs (server-side applies) every CRD and waits until each is
/// Established. Idempotent, so every test may call it.
pub async fn ensure_crds(client: &Client) {
    for crd in cloud_resource_operator::api::crds() {
        ensure_crd(client, &crd).await;
    }
}

/// OLM's own CRDs for ClusterServiceVersions and Subscriptions, from the
/// operator-framework/api module the environment cached
/// (`CRO_TESTENV_OLM_CRDS`), as on a cluster with OLM (OpenShift): the
/// operator lists both to find a Go operator that OLM installed. Left
/// installed, cluster-wide: no test but leader.rs's makes a Go operator's
/// CSV, and every operator here watches only its own namespaces.
pub async fn ensure_olm_crds(client: &Client) {
    let files = [
        "operators.coreos.com_clusterserviceversions.yaml",
        "operators.coreos.com_subscriptions.yaml",
    ];
    ensure_published_crds(client, "CRO_TESTENV_OLM_CRDS", &files).await;
}

/// The Cloud Credential Operator's CredentialsRequest CRD, from its module
/// at the version the Go operator pins (`CRO_TESTENV_CCO_CRDS`), as on
/// OpenShift. Left installed, cluster-wide: only a refused IAM action asks
/// for a CredentialsRequest, and a delete of one that does not exist is a
/// 404 either way.
pub async fn ensure_cco_crd(client: &Client) {
    ensure_published_crds(
        client,
        "CRO_TESTENV_CCO_CRDS",
        &["0000_03_cloud-credential-operator_01_crd.yaml"],
    )
    .await;
}

/// Applies the CRDs `files` another project publishes, which the
/// environment copied to the directory `var` names.
async fn ensure_published_crds(client: &Client, var: &str, files: &[&str]) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let dir = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: restart the environment (make testenv-down testenv-up) to fetch the CRDs")
    });
    for file in files {
        let path = Path::new(&dir).join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        ensure_crd(client, &crd).await;
    }
}

/// Applies every CRD of the YAML files in `dir` (another build's `crds/`).
pub async fn ensure_crds_in(client: &Client, dir: &Path) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        // crds/ holds a kustomization.yaml beside them.
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("integreatly.org_"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no CRDs in {}", dir.display());
    for path in files {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        ensure_crd(client, &crd).await;
    }
}

/// Server-side applies `crd` and waits until it is Established.
async fn ensure_crd(
    client: &Client,
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) {
    let api = Api::all(client.clone());
    let name = crd.name_any();
    apply(&api, crd)
        .await
        .unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    wait_for(
        &api,
        &name,
        "CRD Established",
        DEFAULT_TIMEOUT,
        conditions::is_crd_established(),
    )
    .await;
}

/// The operator of `EARLIER_OPERATOR_COMMIT` (tests/testenv/versions.env):
/// its binary and CRDs, built (or found, `make test` builds it beside the
/// suites) by tests/testenv/earlier-operator.sh.
pub fn earlier_operator() -> (PathBuf, PathBuf) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/testenv/earlier-operator.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(out.status.success(), "{} failed", script.display());
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (dir.join("bin/cloud-resource-operator"), dir.join("crds"))
}

/// Which of `names` (`Kind/name` in `ns`) the operator's `log` (text
/// format, debug) shows no reconcile of that finished without error.
pub fn not_reconciled<'a, S: AsRef<str>>(log: &str, ns: &str, names: &'a [S]) -> Vec<&'a str> {
    names
        .iter()
        .map(AsRef::as_ref)
        .filter(|key| {
            let (kind, name) = key.split_once('/').unwrap_or_default();
            let mark = format!("reconcile{{kind={kind} namespace={ns} name={name}}}");
            !log.lines().any(|l| {
                l.contains(&mark)
                    && l.contains("reconcile finished")
                    && l.contains("error=\"none\"")
            })
        })
        .collect()
}

/// How to start the operator binary for a test.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Watched namespace, also the operator namespace (so a test's
    /// configuration ConfigMaps are its own) unless `operator_namespace`.
    pub namespace: String,
    /// Another operator namespace than the watched one.
    pub operator_namespace: Option<String>,
    /// Log file name under target/testenv/logs.
    pub log_name: String,
    /// Kubeconfig to run with; the admin's when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// `--cluster-id`; discovered from the cluster when `None`.
    pub cluster_id: Option<String>,
    /// Flags appended last (they win over the defaults above).
    pub extra_args: Vec<String>,
    /// Environment variables not to pass (e.g. `AWS_REGION`, to see the
    /// region come from elsewhere).
    pub env_remove: Vec<String>,
    /// Environment variables set last (e.g. `AWS_ENDPOINT_URL` of a
    /// fault-injecting proxy).
    pub env: Vec<(String, String)>,
    /// Another build of the operator (benchmarks measure the release
    /// build); this test build's when `None`.
    pub binary: Option<PathBuf>,
    /// A command the operator runs under (e.g. [`in_cluster_dns`]).
    pub wrapper: Vec<String>,
}

impl Launch {
    /// The usual test operator: admin credentials, fixed cluster ID, its
    /// leader-election Lease in `default` (named after the namespace, so
    /// the Lease outlives the namespace's deletion while finalizers run).
    pub fn new(namespace: &str) -> Launch {
        Launch {
            namespace: namespace.to_string(),
            operator_namespace: None,
            log_name: format!("operator-{namespace}.log"),
            kubeconfig: None,
            cluster_id: Some("testcluster".into()),
            extra_args: vec![
                "--leader-election-namespace=default".into(),
                format!("--leader-election-lease-name=cro-{namespace}"),
            ],
            env_remove: Vec::new(),
            env: Vec::new(),
            binary: None,
            wrapper: Vec::new(),
        }
    }
}

/// The operator binary, running against the test environment.
pub struct Operator {
    child: tokio::process::Child,
    pub log: PathBuf,
}

/// Lines of an operator's log a failing test prints.
const LOG_TAIL_ON_FAILURE: usize = 150;

impl Drop for Operator {
    /// A test that fails shows what the operator did last: CI keeps the
    /// test's output, not the log files.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = self.logs();
            let lines: Vec<&str> = logs.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_ON_FAILURE)..];
            eprintln!(
                "--- last {} lines of {} ---\n{}",
                tail.len(),
                self.log.display(),
                tail.join("\n")
            );
        }
    }
}

impl Operator {
    pub async fn start(namespace: &str) -> Operator {
        Operator::launch(Launch::new(namespace)).await
    }

    pub async fn launch(launch: Launch) -> Operator {
        let env = TestEnv::load();
        let logs = repo_root().join("target/testenv/logs");
        std::fs::create_dir_all(&logs)
            .unwrap_or_else(|e| panic!("creating {}: {e}", logs.display()));
        let log = logs.join(&launch.log_name);
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let stderr = file.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let ns = &launch.namespace;
        let binary = launch
            .binary
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cloud-resource-operator")));
        let mut command = match launch.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = tokio::process::Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => tokio::process::Command::new(binary),
        };
        command
            .args(["run", "--operator-namespace"])
            .arg(launch.operator_namespace.as_deref().unwrap_or(ns))
            .args(["--watch-namespaces", ns])
            .args(["--metrics-address", "127.0.0.1:0"]);
        if let Some(id) = &launch.cluster_id {
            command.args(["--cluster-id", id]);
        }
        command
            .args(&launch.extra_args)
            .env(
                "KUBECONFIG",
                launch.kubeconfig.as_ref().unwrap_or(&env.kubeconfig),
            )
            .env("AWS_ENDPOINT_URL", &env.aws_endpoint_url)
            .env("AWS_REGION", &env.aws_region)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            // As a platform engineer whose servers have a CA of their own.
            .env("SSL_CERT_FILE", &env.trust)
            .env("RUST_LOG", "info,cloud_resource_operator=debug");
        for var in &launch.env_remove {
            command.env_remove(var);
        }
        command.envs(launch.env.iter().map(|(k, v)| (k, v)));
        let child = command
            .stdout(file)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting the operator binary: {e}"));
        Operator { child, log }
    }

    /// Sends SIGTERM, as Kubernetes does when stopping a pod, and returns
    /// the exit status once the process is gone (panics after `timeout`).
    pub async fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let pid = self
            .child
            .id()
            .unwrap_or_else(|| panic!("the operator already exited"));
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap_or_else(|e| panic!("running kill: {e}"));
        assert!(sent.success(), "kill -TERM {pid} failed");
        self.wait_exit(timeout).await
    }

    /// Sends `signal` (`STOP`, `CONT`, ...): SIGSTOP freezes the process as
    /// a paused VM or container would, SIGCONT wakes it.
    pub fn signal(&self, signal: &str) {
        let pid = self
            .child
            .id()
            .unwrap_or_else(|| panic!("the operator already exited"));
        let sent = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap_or_else(|e| panic!("running kill: {e}"));
        assert!(sent.success(), "kill -{signal} {pid} failed");
    }

    /// SIGKILL: the process dies without any cleanup, like a crashed node.
    pub async fn kill(&mut self) {
        self.child
            .kill()
            .await
            .unwrap_or_else(|e| panic!("killing the operator: {e}"));
    }

    /// Whether the process has exited (by itself or killed).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits for the process to exit by itself (panics after `timeout`).
    pub async fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(status) => status.unwrap_or_else(|e| panic!("waiting for the operator: {e}")),
            Err(_) => panic!(
                "the operator did not exit within {timeout:?}; its log:\n{}",
                self.logs()
            ),
        }
    }

    /// Waits until the log contains `needle` (panics after `timeout`).
    pub async fn wait_log(&self, needle: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.logs().contains(needle) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the operator did not log {needle:?} within {timeout:?}; its log:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// CPU seconds the operator used so far (user and system, from
    /// /proc/<pid>/stat, in clock ticks of 1/100 s as Linux reports them).
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()?)).ok()?;
        // Fields after the command name, which is in parentheses.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
    }

    /// The process's peak resident memory so far (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmHWM:")
    }

    /// The process's resident memory now (VmRSS), in KiB.
    pub fn rss_kib(&self) -> Option<u64> {
        self.proc_status_kib("VmRSS:")
    }

    fn proc_status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Everything the operator logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address the operator serves /metrics on (it picks a free port
    /// and logs it).
    pub async fn metrics_address(&self) -> String {
        let deadline = tokio::time::Instant::now() + DEFAULT_TIMEOUT;
        loop {
            if let Some(addr) = self
                .logs()
                .lines()
                // The last: one served while waiting gives way to the real one.
                .rfind(|l| l.contains("serving /metrics"))
                .and_then(|l| l.split("address=").nth(1))
                .and_then(|rest| rest.split_whitespace().next())
            {
                return addr.to_string();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the operator did not log its metrics address"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The AWS calls this operator made, by operation (its own
    /// `cro_aws_api_calls_total`: other tests share the emulator).
    pub async fn aws_calls(&self) -> BTreeMap<String, u64> {
        let metrics = self.http_get("/metrics").await;
        let mut calls = BTreeMap::new();
        for line in metrics
            .lines()
            .filter(|l| l.starts_with("cro_aws_api_calls_total{"))
        {
            let operation = line
                .split("operation=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or_default();
            let n: u64 = line
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_default();
            *calls.entry(operation.to_string()).or_default() += n;
        }
        calls
    }

    /// GET `path` from the operator's metrics server; the body.
    pub async fn http_get(&self, path: &str) -> String {
        let response = self.http_response(path).await;
        assert!(
            response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200"),
            "{path}: {response}"
        );
        response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_string())
            .unwrap_or_default()
    }

    /// The whole HTTP response to `GET path` on the metrics address.
    pub async fn http_response(&self, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.metrics_address().await;
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        response
    }

    /// How many reconciles of `name` finished so far (from the debug log).
    pub fn reconciles_of(&self, name: &str) -> usize {
        self.logs()
            .lines()
            .filter(|l| l.contains("reconciled") && l.contains(&format!("/{name}.")))
            .count()
    }

    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// Panics when `log` contains the value of any credential (a key naming a
/// password, secret or token) of any Secret in `namespace`.
pub async fn assert_no_secret_in(client: &Client, namespace: &str, log: &str) {
    use k8s_openapi::api::core::v1::Secret;
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace)
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("listing Secrets in {namespace}: {e}"));
    for secret in secrets {
        for (key, value) in secret.data.iter().flatten() {
            let lower = key.to_lowercase();
            let credential = ["password", "secret", "token"]
                .iter()
                .any(|w| lower.contains(w));
            let value = String::from_utf8_lossy(&value.0);
            assert!(
                !(credential && value.len() >= 8 && log.contains(value.as_ref())),
                "the value of {namespace}/{}:{key} appears in the operator log",
                secret.name_any()
            );
        }
    }
}

/// Runs `test` with a fresh namespace and an operator watching it. The
/// namespace is deleted while the operator still runs (so finalizers are
/// honoured), then the operator stops.
pub async fn with_operator<F, Fut>(prefix: &str, test: F)
where
    F: FnOnce(Client, String, std::sync::Arc<Operator>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    with_operator_launched(prefix, |_| {}, test).await;
}

/// As [`with_operator`], with the operator's launch adjusted by `adjust`
/// (e.g. no `--cluster-id`, as a new user runs it).
pub async fn with_operator_launched<F, Fut>(prefix: &str, adjust: impl FnOnce(&mut Launch), test: F)
where
    F: FnOnce(Client, String, std::sync::Arc<Operator>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let client = TestEnv::load().client().await;
    ensure_crds(&client).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let name = create_namespace(&client, prefix).await;
    let mut launch = Launch::new(&name);
    adjust(&mut launch);
    let operator = std::sync::Arc::new(Operator::launch(launch).await);
    let result = limited(&name, test(client.clone(), name.clone(), operator.clone())).await;
    // Every test with an operator also proves its log leaks no credential.
    let result = match result {
        Ok(()) => {
            let (log, ns, client) = (operator.logs(), name.clone(), client.clone());
            tokio::spawn(async move { assert_no_secret_in(&client, &ns, &log).await }).await
        }
        failed => failed,
    };
    if let Err(e) = namespaces.delete(&name, &DeleteParams::default()).await {
        eprintln!("warning: deleting test namespace {name}: {e}");
    }
    let deleted = tokio::time::timeout(DEFAULT_TIMEOUT, async {
        while matches!(namespaces.get_opt(&name).await, Ok(Some(_))) {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    // A namespace the operator cannot let go of (a CR whose finalizer
    // stays) is a failure of the test that left it, named by what is left.
    let stuck = match deleted {
        Ok(()) => None,
        Err(_) => Some(what_holds(&client, &name).await),
    };
    if let Ok(op) = std::sync::Arc::try_unwrap(operator) {
        op.stop().await;
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
    if let Some(left) = stuck {
        panic!(
            "namespace {name} still terminating {DEFAULT_TIMEOUT:?} after the test, with the operator running: {left}"
        );
    }
}

/// The CRs left in `namespace`, with their finalizers and status message.
async fn what_holds(client: &Client, namespace: &str) -> String {
    use kube::{api::DynamicObject, discovery::ApiResource};
    let mut left = Vec::new();
    for crd in cloud_resource_operator::api::crds() {
        let (names, version) = (&crd.spec.names, &crd.spec.versions[0].name);
        let kind = names.kind.as_str();
        let gvk = kube::api::GroupVersionKind::gvk(&crd.spec.group, version, kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &names.plural);
        let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
        match api.list(&Default::default()).await {
            Ok(list) => left.extend(list.items.iter().map(|o| {
                let message = o.data.pointer("/status/message").and_then(Value::as_str);
                format!(
                    "{kind} {} (finalizers {:?}; status {:?})",
                    o.name_any(),
                    o.finalizers(),
                    message.unwrap_or_default()
                )
            })),
            Err(e) => left.push(format!("{kind}s not listed: {e}")),
        }
    }
    match left.is_empty() {
        true => "no CR left (another finalizer holds it)".into(),
        false => left.join("; "),
    }
}

/// The phase and message of any of the six kinds, so one `wait_phase`
/// serves every test.
pub trait Phased {
    fn phase(&self) -> Option<cloud_resource_operator::api::Phase>;
    fn message(&self) -> String;
}

macro_rules! phased {
    ($($t:ty),*) => {$(
        impl Phased for $t {
            fn phase(&self) -> Option<cloud_resource_operator::api::Phase> {
                self.status.as_ref().and_then(|s| s.phase)
            }
            fn message(&self) -> String {
                self.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default()
            }
        }
    )*};
}
phased!(
    cloud_resource_operator::api::Postgres,
    cloud_resource_operator::api::Redis,
    cloud_resource_operator::api::BlobStorage,
    cloud_resource_operator::api::SMTPCredentialSet,
    cloud_resource_operator::api::PostgresSnapshot,
    cloud_resource_operator::api::RedisSnapshot
);

/// Whether a resource CR is `complete` and its `Connectable` condition
/// says the operator logged in with its Secret.
pub trait Connected: Phased {
    fn connected(&self) -> bool;
    /// Its status conditions.
    fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition];
}

macro_rules! connected {
    ($($t:ty),*) => {$(
        impl Connected for $t {
            fn connected(&self) -> bool {
                self.phase() == Some(cloud_resource_operator::api::Phase::Complete)
                    && connectable(self.conditions()) == Some(("True".to_string(), "Connected".to_string()))
            }

            fn conditions(&self) -> &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition] {
                self.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default()
            }
        }
    )*};
}
connected!(
    cloud_resource_operator::api::Postgres,
    cloud_resource_operator::api::Redis,
    cloud_resource_operator::api::BlobStorage,
    cloud_resource_operator::api::SMTPCredentialSet
);

/// Waits until the named resource is complete and Connectable.
pub async fn wait_connected<K>(api: &Api<K>, name: &str, timeout: Duration) -> K
where
    K: Connected + Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    wait_for(
        api,
        name,
        "complete and Connectable",
        timeout,
        |o: Option<&K>| o.is_some_and(Connected::connected),
    )
    .await
}

/// Waits until the named object reaches `phase`.
pub async fn wait_phase<K>(
    api: &Api<K>,
    name: &str,
    phase: cloud_resource_operator::api::Phase,
) -> K
where
    K: Phased + Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    wait_for(
        api,
        name,
        &format!("phase {}", phase.as_str()),
        DEFAULT_TIMEOUT,
        move |o: Option<&K>| o.and_then(Phased::phase) == Some(phase),
    )
    .await
}

/// The `Connectable` condition's status and reason, when it is shown.
pub fn connectable(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<(String, String)> {
    conditions
        .iter()
        .find(|c| c.type_ == "Connectable")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Every Event of a namespace.
pub async fn events_in(client: &Client, ns: &str) -> Vec<k8s_openapi::api::core::v1::Event> {
    Api::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap_or_else(|e| panic!("listing the Events of {ns}: {e}"))
        .items
}

/// The messages of the Warning Events about the object `name` in `ns`, or
/// about any object there when `None`.
pub async fn warnings_about(client: &Client, ns: &str, name: Option<&str>) -> Vec<String> {
    (events_in(client, ns).await.into_iter())
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| name.is_none() || e.involved_object.name.as_deref() == name)
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

/// The Events of a namespace's objects that entered the `failed` phase
/// (reason `Failed`), as `name: message`.
pub async fn failed_events(client: &Client, ns: &str) -> Vec<String> {
    (events_in(client, ns).await.into_iter())
        .filter(|e| e.reason.as_deref() == Some("Failed"))
        .map(|e| {
            let name = e.involved_object.name.unwrap_or_default();
            format!("{name}: {}", e.message.unwrap_or_default())
        })
        .collect()
}

/// Creates a fresh namespace labelled as a test namespace; its name.
pub async fn create_namespace(client: &Client, prefix: &str) -> String {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.generate_name = Some(format!("{prefix}-"));
    ns.metadata.labels = Some(BTreeMap::from([(
        "cro.integreatly.org/test".to_string(),
        "true".to_string(),
    )]));
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating a test namespace: {e}"))
        .name_any()
}

/// Creates any object from JSON in `ns`.
pub async fn create_json<K>(client: &Client, ns: &str, object: serde_json::Value) -> K
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + serde::Serialize
        + DeserializeOwned,
{
    let obj: K = serde_json::from_value(object).unwrap_or_else(|e| panic!("{e}"));
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {} {}: {e}", K::kind(&()), obj.name_any()))
}

/// Serialises edits of moto's fault file by the tests of one binary.
static FAULTS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Makes moto answer matching calls with an AWS error (see
/// tests/testenv/moto_server.py): `service`/`action` as AWS names them,
/// `matching` a text the call's parameters contain (e.g. the test's
/// namespace-derived identifier), `times` how often (`None`: always).
pub fn inject_aws_fault(
    id: &str,
    service: &str,
    action: &str,
    matching: &str,
    (code, status, message): (&str, u16, &str),
    times: Option<u32>,
) {
    edit_faults(|faults| {
        faults.retain(|f| f["id"] != id);
        faults.push(serde_json::json!({
            "id": id, "service": service, "action": action, "match": matching,
            "code": code, "status": status, "message": message, "times": times,
        }));
    });
}

/// Makes moto answer every `every`th call of `service` whose parameters
/// contain `matching` (any action) with `error`: a share of the calls
/// throttled, as a busy account sees it, until [`clear_aws_fault`].
pub fn inject_aws_fault_share(
    id: &str,
    service: &str,
    matching: &str,
    (code, status, message): (&str, u16, &str),
    every: u32,
) {
    edit_faults(|faults| {
        faults.retain(|f| f["id"] != id);
        faults.push(serde_json::json!({
            "id": id, "service": service, "action": "*", "match": matching,
            "code": code, "status": status, "message": message, "every": every,
        }));
    });
}

/// Edits moto's fault file (see [`inject_aws_fault`]) under the lock.
fn edit_faults(edit: impl FnOnce(&mut Vec<serde_json::Value>)) {
    let path = TestEnv::load().moto_faults;
    let _guard = FAULTS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut faults: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    edit(&mut faults);
    std::fs::write(&path, serde_json::to_string(&faults).unwrap_or_default())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Removes the fault `id` (see [`inject_aws_fault`]).
pub fn clear_aws_fault(id: &str) {
    edit_faults(|faults| faults.retain(|f| f["id"] != id));
}

/// Makes moto list `entry` as maintenance AWS has pending (see
/// tests/testenv/moto_server.py): `service` is `rds` (a pending
/// maintenance action with its `ResourceIdentifier`) or `elasticache` (an
/// update action with its `ReplicationGroupId`).
pub fn add_aws_maintenance(service: &str, entry: serde_json::Value) {
    let path = TestEnv::load().moto_maintenance;
    let _guard = FAULTS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut all: serde_json::Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    if !all[service].is_array() {
        all[service] = serde_json::json!([]);
    }
    if let Some(list) = all[service].as_array_mut() {
        list.push(entry);
    }
    std::fs::write(&path, all.to_string())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// The calls moto served (query-protocol services), oldest first.
pub fn aws_requests() -> Vec<serde_json::Value> {
    std::fs::read_to_string(TestEnv::load().moto_request_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The AWS writes (of the services whose calls the emulator logs) since
/// `offset` whose parameters contain `naming` (a namespace's part of the
/// identifiers, see [`compact`]; `""` for every write): other tests'
/// writes are not this one's.
pub fn aws_writes(offset: &mut u64, naming: &str) -> Vec<String> {
    aws_requests_after(offset)
        .into_iter()
        .filter(|r| r["params"].to_string().contains(naming))
        .filter_map(|r| r["action"].as_str().map(str::to_string))
        .filter(|a| {
            !["Describe", "List", "Get"]
                .iter()
                .any(|read| a.starts_with(read))
        })
        .collect()
}

/// `namespace` as AWS identifiers hold it: without its dashes.
pub fn compact(namespace: &str) -> String {
    namespace.replace('-', "")
}

/// Each Deployment's generation, by name.
pub async fn generations(client: &Client, ns: &str) -> BTreeMap<String, i64> {
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), ns)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("listing Deployments: {e}"))
        .items
        .into_iter()
        .map(|d| (d.name_any(), d.metadata.generation.unwrap_or_default()))
        .collect()
}

/// The calls moto served after byte `offset` of its request log, which is
/// moved past them: a test polling for new calls reads only those, not the
/// whole suite's log each time.
pub fn aws_requests_after(offset: &mut u64) -> Vec<serde_json::Value> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(TestEnv::load().moto_request_log) else {
        return Vec::new();
    };
    let mut text = String::new();
    if file.seek(SeekFrom::Start(*offset)).is_err() || file.read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    // Whole lines only: the last may still be being written.
    let whole = text.rfind('\n').map_or(0, |i| i + 1);
    *offset += whole as u64;
    text[..whole]
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The master passwords set on RDS instance `id` (ModifyDBInstance), oldest
/// first.
pub fn passwords_set(id: &str) -> Vec<String> {
    aws_requests()
        .into_iter()
        .filter(|r| r["action"] == "ModifyDBInstance" && r["params"].to_string().contains(id))
        .filter_map(|r| {
            r["params"]["MasterUserPassword"][0]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// The actions of the calls moto served whose parameters mention `text`.
pub fn aws_actions_mentioning(text: &str) -> Vec<String> {
    aws_requests()
        .into_iter()
        .filter(|r| r["params"].to_string().contains(text))
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A kubeconfig for the test cluster that authenticates as `sa` in `ns`
/// with a short-lived token from the TokenRequest API.
pub async fn service_account_kubeconfig(client: &Client, ns: &str, sa: &str) -> PathBuf {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("requesting a token for {ns}/{sa}: {e}"));
    let token = token
        .status
        .map(|s| s.token)
        .unwrap_or_else(|| panic!("TokenRequest returned no token"));
    let admin = std::fs::read_to_string(TestEnv::load().kubeconfig)
        .unwrap_or_else(|e| panic!("reading the admin kubeconfig: {e}"));
    let mut config: Value = serde_saphyr::from_str(&admin).unwrap_or_else(|e| panic!("{e}"));
    config["users"] = json!([{"name": sa, "user": {"token": token}}]);
    config["contexts"][0]["context"]["user"] = json!(sa);
    let path = repo_root().join(format!("target/testenv/kubeconfig-{ns}-{sa}"));
    std::fs::write(
        &path,
        serde_saphyr::to_string(&config).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    // It holds a token: readable by its owner only, like the admin's.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_else(|e| panic!("restricting {}: {e}", path.display()));
    path
}

/// A client acting as a tenant, not as the admin: ServiceAccount `tenant`
/// in `ns`, allowed to read, create, edit and delete the operator's CRs and
/// ordinary objects (ConfigMaps, Secrets, Services, PVCs) in `ns` and
/// nothing else, through a token of its own (docs/security.md's threat
/// model).
pub async fn tenant_client(admin: &Client, ns: &str) -> Client {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "tenant"}}))
        .unwrap_or_else(|e| panic!("{e}"));
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "tenant"}, "rules": [{
        "apiGroups": ["integreatly.org"],
        "resources": ["postgres", "redis", "blobstorages", "smtpcredentialsets", "postgressnapshots", "redissnapshots"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}, {
        "apiGroups": [""],
        "resources": ["configmaps", "secrets", "services", "persistentvolumeclaims"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}))
    .unwrap_or_else(|e| panic!("{e}"));
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]}))
    .unwrap_or_else(|e| panic!("{e}"));
    // Asking twice for the same namespace's tenant gives the same one.
    let created = |r: Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Ok(()) => {}
        Err(e) => panic!("setting up the tenant of {ns}: {e}"),
    };
    let params = PostParams::default();
    created(
        Api::<ServiceAccount>::namespaced(admin.clone(), ns)
            .create(&params, &sa)
            .await
            .map(|_| ()),
    );
    created(
        Api::<Role>::namespaced(admin.clone(), ns)
            .create(&params, &role)
            .await
            .map(|_| ()),
    );
    created(
        Api::<RoleBinding>::namespaced(admin.clone(), ns)
            .create(&params, &binding)
            .await
            .map(|_| ()),
    );
    client_of(&service_account_kubeconfig(admin, ns, "tenant").await).await
}

/// A client with the credentials of the kubeconfig at `path`.
pub async fn client_of(path: &std::path::Path) -> Client {
    let kubeconfig =
        Kubeconfig::read_from(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    Client::try_from(config)
        .unwrap_or_else(|e| panic!("building a client from {}: {e}", path.display()))
}

/// A ServiceAccount `name` in `ns` bound to cluster-admin (binding
/// `<name>-<ns>`, removed by the caller): whatever a process running as it
/// does not do, it did not do by choice. Its kubeconfig and user name (for
/// the audit log).
pub async fn cluster_admin_account(client: &Client, ns: &str, name: &str) -> (PathBuf, String) {
    use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))
        .unwrap_or_else(|e| panic!("{e}"));
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap_or_else(|e| panic!("creating ServiceAccount {ns}/{name}: {e}"));
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-{ns}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("binding {ns}/{name} to cluster-admin: {e}"));
    (
        service_account_kubeconfig(client, ns, name).await,
        format!("system:serviceaccount:{ns}:{name}"),
    )
}

/// One request as the apiserver audited it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Audited {
    pub group: String,
    pub namespace: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub name: String,
    pub verb: String,
    pub code: i64,
}

/// Requests `user` made, as the apiserver audited them (in the audit log
/// and the backups it rotated out at its size limit).
pub fn audited_requests_of(user: &str) -> Vec<Audited> {
    audited_requests_where(user, |_| true)
}

/// As [`audited_requests_of`], those the apiserver received in
/// `[from, to)`: a window by the audit's own clock, whatever else the log
/// holds (other tests' requests, backups rotated out meanwhile).
pub fn audited_requests_between(
    user: &str,
    (from, to): (k8s_openapi::jiff::Timestamp, k8s_openapi::jiff::Timestamp),
) -> Vec<Audited> {
    audited_requests_where(user, |e| {
        let received = e["requestReceivedTimestamp"].as_str().unwrap_or_default();
        received
            .parse::<k8s_openapi::jiff::Timestamp>()
            .is_ok_and(|t| from <= t && t < to)
    })
}

fn audited_requests_where(user: &str, keep: impl Fn(&Value) -> bool) -> Vec<Audited> {
    let log = TestEnv::load().audit_log;
    let dir = log
        .parent()
        .unwrap_or_else(|| panic!("{} has no directory", log.display()));
    let stem = log.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            p.as_path() != log && name.starts_with(&format!("{stem}-")) && name.ends_with(".log")
        })
        .collect();
    logs.sort();
    logs.push(log);
    let content: String = logs
        .iter()
        .map(|l| {
            std::fs::read_to_string(l)
                .unwrap_or_else(|e| panic!("reading the audit log {}: {e}", l.display()))
        })
        .collect();
    content
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == user && e["stage"] == "ResponseComplete")
        .filter(|e| keep(e))
        .map(|e| {
            let o = &e["objectRef"];
            let resource = match o["subresource"].as_str() {
                Some(sub) => format!("{}/{sub}", json_text(&o["resource"])),
                None => json_text(&o["resource"]),
            };
            Audited {
                group: json_text(&o["apiGroup"]),
                namespace: json_text(&o["namespace"]),
                resource,
                name: json_text(&o["name"]),
                verb: json_text(&e["verb"]),
                code: e["responseStatus"]["code"].as_i64().unwrap_or_default(),
            }
        })
        .collect()
}

/// The writes (create, update, patch, delete) `user` made whose request
/// the apiserver received after `after`, as `verb resource namespace/name`.
pub fn audited_writes_received_after(
    user: &str,
    after: k8s_openapi::jiff::Timestamp,
) -> Vec<String> {
    let log = TestEnv::load().audit_log;
    let mut content = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("reading the audit log {}: {e}", log.display()));
    // And what the API server rotated out (audit-<time>.log beside it).
    let dir = log
        .parent()
        .unwrap_or_else(|| panic!("{} has no directory", log.display()));
    let stem = log
        .file_stem()
        .map(|s| format!("{}-", s.to_string_lossy()))
        .unwrap_or_default();
    for rotated in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = rotated.file_name().to_string_lossy().into_owned();
        if name.starts_with(&stem) && name.ends_with(".log") {
            content += &std::fs::read_to_string(rotated.path()).unwrap_or_default();
        }
    }
    let writes = ["create", "update", "patch", "delete", "deletecollection"];
    content
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == user && e["stage"] == "ResponseComplete")
        .filter(|e| writes.contains(&e["verb"].as_str().unwrap_or_default()))
        .filter(|e| {
            let received = e["requestReceivedTimestamp"].as_str().unwrap_or_default();
            received
                .parse::<k8s_openapi::jiff::Timestamp>()
                .is_ok_and(|t| t > after)
        })
        .map(|e| {
            let o = &e["objectRef"];
            format!(
                "{} {} {}/{}",
                json_text(&e["verb"]),
                json_text(&o["resource"]),
                json_text(&o["namespace"]),
                json_text(&o["name"])
            )
        })
        .collect()
}

/// A JSON string's text; empty for anything else.
fn json_text(v: &serde_json::Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The test environment's real node (kubelet, containerd): its name, or a
/// panic saying why this machine has none (`tests/testenv/real-node`).
pub fn real_node() -> String {
    match (
        env_var("CRO_TESTENV_REAL_NODE"),
        env_var("CRO_TESTENV_NO_REAL_NODE"),
    ) {
        (Some(node), _) => node,
        (None, Some(why)) => panic!("the test environment has no real node: {why}"),
        (None, None) => panic!(
            "the test environment has no real node: run `make testenv-up` first (or `make test`)"
        ),
    }
}

/// A command prefix under which a process resolves names as a pod of the
/// test cluster does (the real node's cluster DNS and search path), as the
/// operator does when it runs in the cluster.
pub fn in_cluster_dns() -> Vec<String> {
    let script = env_var("CRO_TESTENV_IN_CLUSTER_DNS").unwrap_or_else(|| {
        panic!("CRO_TESTENV_IN_CLUSTER_DNS is not set: the test environment has no real node")
    });
    vec![script]
}

/// Makes the pods of namespace `ns` run on the real node: the annotations
/// the API server's PodNodeSelector and PodTolerationRestriction admission
/// plugins read (the node is labelled and tainted `cro-testenv/real-node`).
pub async fn place_on_real_node(client: &Client, ns: &str) {
    let patch = json!({"metadata": {"annotations": {
        "scheduler.alpha.kubernetes.io/node-selector": "cro-testenv/real-node=true",
        "scheduler.alpha.kubernetes.io/defaultTolerations":
            r#"[{"key": "cro-testenv/real-node", "operator": "Exists", "effect": "NoSchedule"}]"#,
    }}});
    Api::<Namespace>::all(client.clone())
        .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("annotating namespace {ns} for the real node: {e}"));
}

/// In-cluster (`workshop`, tier `development`) BlobStorage CRs named
/// `names` in `ns`, each with the Secret `<name>-sec`, 16 created at a time.
pub async fn create_workshop_blobs(client: &Client, ns: &str, names: &[String]) {
    use futures::StreamExt;
    futures::stream::iter(names)
        .for_each_concurrent(16, |name| async move {
            let _: cloud_resource_operator::api::BlobStorage = create_json(client, ns, json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "BlobStorage",
                "metadata": {"name": name},
                "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": format!("{name}-sec")}}
            }))
            .await;
        })
        .await;
}
