//! What a tier's `deploymentSpec` may not give a database's pod, wherever
//! the tier comes from: the operator writes the Deployment with its own
//! identity, so a tier that asked for the node (host namespaces, a
//! hostPath, a privileged container, root) or for another ServiceAccount
//! would get it from whoever can write tiers, not from whoever may run such
//! pods. Everything else a tier overrides (images, resources, probes, env,
//! affinity) stays open.

use cro_provider_api::ProviderError;
use k8s_openapi::api::{
    apps::v1::DeploymentSpec,
    core::v1::{PodSpec, SecurityContext, ServiceSpec},
};

const AT: &str = "strategy.deploymentSpec.template.spec";

/// The first thing the merged Deployment spec asks for that no tier may
/// give, as an error naming its field.
pub fn check(spec: &DeploymentSpec) -> Result<(), ProviderError> {
    match spec.template.spec.as_ref().and_then(refused) {
        None => Ok(()),
        Some(what) => Err(ProviderError::invalid_strategy(format!(
            "{AT}.{what}: a tier may not give a database's pod this (host access, root or another ServiceAccount); remove it from the tier's strategy.deploymentSpec"
        ))),
    }
}

/// A tier's `serviceSpec` may not make the Service an alias of another
/// host: the Secret's host would then lead applications, and the
/// operator's connection checks, wherever the name points.
pub fn check_service(spec: &ServiceSpec) -> Result<(), ProviderError> {
    let alias = spec.type_.as_deref() == Some("ExternalName") || spec.external_name.is_some();
    if alias {
        return Err(ProviderError::invalid_strategy(
            "strategy.serviceSpec.type: ExternalName (or externalName) makes the database's Service an alias of another host; remove it from the tier's strategy.serviceSpec".to_string(),
        ));
    }
    Ok(())
}

fn refused(pod: &PodSpec) -> Option<String> {
    let set = |flag: Option<bool>| flag == Some(true);
    if set(pod.host_network) {
        return Some("hostNetwork".into());
    }
    if set(pod.host_pid) {
        return Some("hostPID".into());
    }
    if set(pod.host_ipc) {
        return Some("hostIPC".into());
    }
    if pod.service_account_name.is_some() {
        return Some("serviceAccountName".into());
    }
    if pod.service_account.is_some() {
        return Some("serviceAccount".into());
    }
    if set(pod.automount_service_account_token) {
        return Some("automountServiceAccountToken".into());
    }
    let volumes = pod.volumes.iter().flatten().enumerate();
    if let Some((i, _)) = volumes.into_iter().find(|(_, v)| v.host_path.is_some()) {
        return Some(format!("volumes[{i}].hostPath"));
    }
    if let Some(context) = &pod.security_context {
        if context.run_as_user == Some(0) {
            return Some("securityContext.runAsUser".into());
        }
        if context.run_as_non_root == Some(false) {
            return Some("securityContext.runAsNonRoot".into());
        }
    }
    let containers = [
        ("containers", pod.containers.iter().collect::<Vec<_>>()),
        (
            "initContainers",
            pod.init_containers.iter().flatten().collect(),
        ),
    ];
    for (list, containers) in containers {
        for (i, c) in containers.into_iter().enumerate() {
            let at = |field: &str| format!("{list}[{i}].{field}");
            let host_port = c.ports.iter().flatten().any(|p| p.host_port.is_some());
            if host_port {
                return Some(at("ports.hostPort"));
            }
            if let Some(field) = c.security_context.as_ref().and_then(refused_context) {
                return Some(at(&format!("securityContext.{field}")));
            }
        }
    }
    if pod.ephemeral_containers.is_some() {
        return Some("ephemeralContainers".into());
    }
    None
}

fn refused_context(context: &SecurityContext) -> Option<&'static str> {
    if context.privileged == Some(true) {
        return Some("privileged");
    }
    if context.allow_privilege_escalation == Some(true) {
        return Some("allowPrivilegeEscalation");
    }
    if context.run_as_user == Some(0) {
        return Some("runAsUser");
    }
    if context.run_as_non_root == Some(false) {
        return Some("runAsNonRoot");
    }
    if context.proc_mount.as_deref() == Some("Unmasked") {
        return Some("procMount");
    }
    let added = context.capabilities.as_ref().and_then(|c| c.add.as_ref());
    if added.is_some_and(|a| !a.is_empty()) {
        return Some("capabilities.add");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn spec(pod: Value) -> DeploymentSpec {
        serde_json::from_value(json!({
            "selector": {"matchLabels": {"app": "postgres"}},
            "template": {"spec": pod},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn refusal(pod: Value) -> Option<String> {
        check(&spec(pod)).err().map(|e| e.to_string())
    }

    fn container(security: Value) -> Value {
        json!({"containers": [{"name": "postgres", "securityContext": security}]})
    }

    #[test]
    fn the_operators_own_pod_passes() {
        let pod = json!({
            "securityContext": {"runAsUser": 999, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "postgres", "image": "postgres:17",
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}],
        });
        assert_eq!(refusal(pod), None);
    }

    #[test]
    fn host_access_root_and_other_service_accounts_are_refused_by_field() {
        let cases = [
            (
                json!({"containers": [], "hostNetwork": true}),
                "spec.hostNetwork:",
            ),
            (json!({"containers": [], "hostPID": true}), "spec.hostPID:"),
            (json!({"containers": [], "hostIPC": true}), "spec.hostIPC:"),
            (
                json!({"containers": [], "serviceAccountName": "admin"}),
                "spec.serviceAccountName:",
            ),
            (
                json!({"containers": [], "volumes": [{"name": "d", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]}),
                "spec.volumes[1].hostPath:",
            ),
            (
                json!({"containers": [], "securityContext": {"runAsUser": 0}}),
                "spec.securityContext.runAsUser:",
            ),
            (
                container(json!({"privileged": true})),
                "spec.containers[0].securityContext.privileged:",
            ),
            (
                container(json!({"capabilities": {"add": ["SYS_ADMIN"]}})),
                "spec.containers[0].securityContext.capabilities.add:",
            ),
            (
                container(json!({"allowPrivilegeEscalation": true})),
                "spec.containers[0].securityContext.allowPrivilegeEscalation:",
            ),
            (
                container(json!({"runAsUser": 0})),
                "spec.containers[0].securityContext.runAsUser:",
            ),
            (
                json!({"containers": [], "initContainers": [{"name": "i", "securityContext": {"privileged": true}}]}),
                "spec.initContainers[0].securityContext.privileged:",
            ),
            (
                json!({"containers": [{"name": "p", "ports": [{"containerPort": 5432, "hostPort": 5432}]}]}),
                "spec.containers[0].ports.hostPort:",
            ),
        ];
        for (pod, field) in cases {
            let message = refusal(pod.clone()).unwrap_or_else(|| panic!("{pod} was let through"));
            assert!(message.contains(field), "{field} not named: {message}");
            assert!(message.contains("remove it from the tier"), "{message}");
        }
    }

    #[test]
    fn a_service_may_not_become_an_alias_of_another_host() {
        let spec = |v: serde_json::Value| -> ServiceSpec {
            serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
        };
        assert!(check_service(&spec(serde_json::json!({"type": "ClusterIP"}))).is_ok());
        assert!(check_service(&spec(serde_json::json!({"type": "LoadBalancer"}))).is_ok());
        let e = check_service(&spec(
            serde_json::json!({"type": "ExternalName", "externalName": "db.example.com"}),
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("strategy.serviceSpec.type"), "{e}");
        assert!(check_service(&spec(serde_json::json!({"externalName": "x"}))).is_err());
    }
}
