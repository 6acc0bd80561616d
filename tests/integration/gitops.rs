//! deploy/gitops/ as an Argo CD user installs it: the health script of
//! the six kinds, run in Lua 5.1 (the language of Argo CD's gopher-lua)
//! against statuses as the operator writes them.

use cloud_resource_operator::api::{
    BlobStorage, Phase, Postgres, PostgresSnapshot, Redis, RedisSnapshot, SMTPCredentialSet,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use serde_json::{Value, json};

use crate::support::repo_root;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `value` as a Lua table constructor (JSON null is nil: no key).
fn lua(value: &Value) -> String {
    match value {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!(
            "{{{}}}",
            items.iter().map(lua).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(fields) => {
            let fields = fields.iter().map(|(k, v)| format!("[{k:?}] = {}", lua(v)));
            format!("{{{}}}", fields.collect::<Vec<_>>().join(", "))
        }
    }
}

/// What `script` answers for `obj`, as Argo CD calls it: `obj` global,
/// the script's chunk returning `hs`. (status, message).
fn health(script: &str, obj: &Value) -> (String, String) {
    use std::io::Write;
    let program = format!(
        "obj = {}\nlocal health = function()\n{script}\nend\nlocal hs = health()\nio.write(hs.status, \"\\t\", hs.message or \"\")\n",
        lua(obj)
    );
    let mut child = std::process::Command::new("lua5.1")
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running lua5.1 (make deps installs it): {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin
        .write_all(program.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "lua5.1 failed: {}{said}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, message) = said.split_once('\t').unwrap_or((&said, ""));
    (status.to_string(), message.to_string())
}

#[test]
fn argo_cds_health_of_each_kind_follows_the_phase_the_operator_writes() {
    let script = read("deploy/gitops/argocd-health.lua");
    // argocd-cm.yaml carries the script unchanged for each of the six kinds.
    let cm: ConfigMap = serde_saphyr::from_str(&read("deploy/gitops/argocd-cm.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let data = cm.data.unwrap_or_default();
    let kinds = [
        Postgres::kind(&()),
        Redis::kind(&()),
        BlobStorage::kind(&()),
        SMTPCredentialSet::kind(&()),
        PostgresSnapshot::kind(&()),
        RedisSnapshot::kind(&()),
    ];
    for kind in &kinds {
        let key = format!("resource.customizations.health.integreatly.org_{kind}");
        let carried = data
            .get(&key)
            .unwrap_or_else(|| panic!("argocd-cm.yaml has no {key}"));
        assert_eq!(
            carried.trim_end(),
            script.trim_end(),
            "{key} differs from argocd-health.lua"
        );
    }
    let health_keys = data
        .keys()
        .filter(|k| k.starts_with("resource.customizations.health."))
        .count();
    assert_eq!(
        health_keys,
        kinds.len(),
        "one health script per kind, no other"
    );

    // Every phase the operator writes, with its message.
    let expected = |phase: Phase| match phase {
        Phase::Complete => "Healthy",
        Phase::Failed => "Degraded",
        Phase::Paused => "Suspended",
        Phase::InProgress | Phase::DeleteInProgress => "Progressing",
    };
    for phase in Phase::ALL {
        let message = format!("as the operator says for {}", phase.as_str());
        let obj = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": {"name": "db"},
            "spec": {"type": "managed", "tier": "production"}, "status": {"phase": phase, "message": message}});
        assert_eq!(
            health(&script, &obj),
            (expected(phase).to_string(), message),
            "phase {}",
            phase.as_str()
        );
    }
    // A CR the operator has not seen yet (no status at all).
    let fresh = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": {"name": "cache"}, "spec": {}});
    let (status, message) = health(&script, &fresh);
    assert_eq!(status, "Progressing");
    assert!(message.contains("cloud-resource-operator"), "{message}");
}
