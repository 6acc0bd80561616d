//! `status` as a platform engineer runs it (issue #42): `kubectl cro
//! status` through kubectl's plugin discovery, against real CRs in each
//! state, with the cloud read through the operator's own configuration.

use std::{path::Path, process::Output};

use cloud_resource_operator::api::{Phase, Postgres, PostgresSnapshot};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt, api::PostParams};
use serde_json::{Value, json};

use crate::{
    aws::{aws_strategies_for, create_postgres},
    support::{TestEnv, wait_phase, with_operator_launched},
};

/// `kubectl cro ARGS` with the operator's binary installed as the plugin
/// `kubectl-cro` on PATH, the way docs/operations.md says to install it.
fn kubectl_cro(args: &[&str]) -> Output {
    let env = TestEnv::load();
    let bin = Path::new(env!("CARGO_BIN_EXE_cloud-resource-operator"));
    let plugins = crate::support::repo_root().join("target/testenv/plugins");
    std::fs::create_dir_all(&plugins).unwrap_or_else(|e| panic!("{e}"));
    let plugin = plugins.join("kubectl-cro");
    if std::fs::read_link(&plugin).ok().as_deref() != Some(bin) {
        let _ = std::fs::remove_file(&plugin);
        std::os::unix::fs::symlink(bin, &plugin).unwrap_or_else(|e| panic!("{e}"));
    }
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    std::process::Command::new(&env.kubectl)
        .arg("cro")
        .args(args)
        .env("PATH", path)
        .env("KUBECONFIG", &env.kubeconfig)
        .env("AWS_ENDPOINT_URL", &env.aws_endpoint_url)
        .env("AWS_REGION", &env.aws_region)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env_remove("OPERATOR_NAMESPACE")
        .output()
        .unwrap_or_else(|e| panic!("running kubectl cro: {e}"))
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "kubectl cro failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_of(out: &Output) -> Value {
    let text = stdout(out);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn status_explains_complete_failed_paused_and_snapshot_crs() {
    // As a new user runs the operator: the cluster ID discovered, so
    // `status` finds the same identifiers with no flag.
    let adjust = |l: &mut crate::support::Launch| l.cluster_id = None;
    with_operator_launched("status", adjust, |client, ns, _op| async move {
        let tiers = json!({"development": {"deleteStrategy": {"SkipFinalSnapshot": true}}});
        aws_strategies_for(&client, &ns, "postgres", tiers).await;
        create_postgres(&client, &ns, "orders-db", json!({})).await;
        create_postgres(&client, &ns, "gold-db", json!({"tier": "gold"})).await;
        create_postgres(&client, &ns, "held-db", json!({"skipCreate": true})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let pg = wait_phase(&pgs, "orders-db", Phase::Complete).await;
        let id = pg.annotations()["resourceIdentifier"].clone();
        wait_phase(&pgs, "gold-db", Phase::Failed).await;
        wait_phase(&pgs, "held-db", Phase::Paused).await;

        // Complete, on AWS: phase, Ready, the Secret by name and keys, the
        // cloud identifier and RDS's own state.
        let text = stdout(&kubectl_cro(&[
            "status", "-n", &ns, "postgres/orders-db", "--operator-namespace", &ns,
        ]));
        for want in [
            &format!("Postgres:         {ns}/orders-db"),
            "Phase:            complete",
            "Provider:         aws (aws-rds)",
            &format!("Cloud identifier: {id}"),
            &format!("Cloud:            RDS instance {id} is available in "),
            &format!("Secret:           {ns}/orders-db-sec (keys database, host, password, port, username)"),
        ] {
            assert!(text.contains(want), "no {want:?} in:\n{text}");
        }
        assert!(
            text.lines().any(|l| l.trim_start().starts_with("Ready") && l.contains("True")),
            "no Ready True condition in:\n{text}"
        );
        // The one thing asked: the emulator's hosts resolve nowhere, and the
        // operator's login check says so.
        let next = text.split("Next:").nth(1).unwrap_or_default();
        assert_eq!(next.matches("\n  - ").count(), 1, "{text}");
        assert!(next.contains("could not log in with the Secret (NameNotResolved)"), "{text}");
        // Never a value of the Secret.
        let secret = Api::<Secret>::namespaced(client.clone(), &ns).get("orders-db-sec").await.unwrap_or_else(|e| panic!("{e}"));
        for (key, value) in secret.data.unwrap_or_default() {
            let value = String::from_utf8_lossy(&value.0).into_owned();
            if value.len() >= 6 && key != "host" && key != "database" && key != "username" {
                assert!(!text.contains(&value), "the value of {key} is shown");
            }
        }
        // The same as JSON, and the kind written as kubectl would.
        let report = json_of(&kubectl_cro(&[
            "status", "-n", &ns, "Postgres.integreatly.org/orders-db", "-o", "json", "--operator-namespace", &ns,
        ]));
        assert_eq!(report["phase"], "complete", "{report}");
        assert_eq!(report["cloudIdentifier"], json!(id));
        assert_eq!(report["secret"]["keys"], json!(["database", "host", "password", "port", "username"]));
        assert!(report["events"].as_array().is_some_and(|e| !e.is_empty()), "no Events: {report}");

        // Failing: names the missing tier and what to change.
        let text = stdout(&kubectl_cro(&["status", "-n", &ns, "postgres/gold-db", "--operator-namespace", &ns]));
        assert!(text.contains("Phase:            failed"), "{text}");
        let next = text.split("Next:").nth(1).unwrap_or_else(|| panic!("no Next: in\n{text}"));
        assert!(next.contains("\"gold\""), "the next step does not name the tier:\n{text}");
        assert!(next.contains("cloud-resources-aws-strategies"), "the next step does not name the ConfigMap:\n{text}");

        // Paused: says how to resume. Without the operator's namespace, the
        // cluster's side is still explained and the cloud's says why not.
        let text = stdout(&kubectl_cro(&["status", "-n", &ns, "postgres/held-db"]));
        assert!(text.contains("Phase:            paused"), "{text}");
        assert!(text.contains("spec.skipCreate is true"), "{text}");
        assert!(text.contains("Cloud:            not read: give --operator-namespace"), "{text}");

        // --kubeconfig and --context, as kubectl takes them, without
        // KUBECONFIG: the context's namespace is the CR's.
        let kubeconfig = context_in_namespace("shop", &ns);
        let cro = |context: &str| {
            std::process::Command::new(env!("CARGO_BIN_EXE_cloud-resource-operator"))
                .args(["status", "postgres/held-db", "--kubeconfig"])
                .arg(&kubeconfig)
                .args(["--context", context])
                .env("KUBECONFIG", "/nonexistent/kubeconfig")
                .env_remove("OPERATOR_NAMESPACE")
                .output()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let text = stdout(&cro("shop"));
        assert!(text.contains(&format!("{ns}/held-db")) && text.contains("Phase:            paused"), "{text}");
        let out = cro("nowhere");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && said.contains("nowhere") && said.contains("--context"), "{said}");

        // A snapshot: its cloud identifier is the snapshot's.
        let snap: PostgresSnapshot = serde_json::from_value(json!({
            "apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
            "metadata": {"name": "orders-snap"}, "spec": {"resourceName": "orders-db"}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let snaps = Api::<PostgresSnapshot>::namespaced(client.clone(), &ns);
        snaps.create(&PostParams::default(), &snap).await.unwrap_or_else(|e| panic!("{e}"));
        let done = wait_phase(&snaps, "orders-snap", Phase::Complete).await;
        let snapshot_id = done.status.and_then(|s| s.snapshot_id).unwrap_or_default();
        let report = json_of(&kubectl_cro(&["status", "-n", &ns, "postgressnapshot/orders-snap", "-o", "json"]));
        assert_eq!(report["phase"], "complete", "{report}");
        assert_eq!(report["resourceName"], "orders-db");
        assert_eq!(report["cloudIdentifier"], json!(snapshot_id));

        // The category lists all of them at once.
        let env = TestEnv::load();
        let got = std::process::Command::new(&env.kubectl)
            .args(["get", "cloudresources", "-n", &ns, "-o", "name"])
            // Discovery fresh from the API server, not an older run's cache.
            .arg(format!("--cache-dir={}", std::env::temp_dir().join(format!("kubectl-{ns}")).display()))
            .env("KUBECONFIG", &env.kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let names = format!("{}{}", String::from_utf8_lossy(&got.stdout), String::from_utf8_lossy(&got.stderr));
        for want in ["postgres.integreatly.org/orders-db", "postgres.integreatly.org/gold-db", "postgressnapshot.integreatly.org/orders-snap"] {
            assert!(names.contains(want), "kubectl get cloudresources lacks {want}: {names}");
        }

        // A wrong target says what is accepted.
        let out = kubectl_cro(&["status", "-n", &ns, "database/orders-db"]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("unknown kind \"database\""));
        let out = kubectl_cro(&["status", "-n", &ns, "postgres/nobody"]);
        assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("Postgres {ns}/nobody not found")));
    })
    .await;
}

/// A copy of the test environment's kubeconfig with one more context,
/// `name`, whose namespace is `namespace`; its current context is left.
fn context_in_namespace(name: &str, namespace: &str) -> std::path::PathBuf {
    let env = TestEnv::load();
    let mut config =
        kube::config::Kubeconfig::read_from(&env.kubeconfig).unwrap_or_else(|e| panic!("{e}"));
    let mut context = config
        .contexts
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no context in {}", env.kubeconfig.display()));
    context.name = name.into();
    if let Some(c) = context.context.as_mut() {
        c.namespace = Some(namespace.into());
    }
    config.contexts.push(context);
    let path =
        crate::support::repo_root().join(format!("target/testenv/kubeconfig-{namespace}-{name}"));
    let yaml = serde_saphyr::to_string(&config).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{e}"));
    path
}
