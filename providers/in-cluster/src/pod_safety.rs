//! What a tier's `deploymentSpec` may not give a database's pod, wherever
//! the tier comes from: the operator writes the Deployment with its own
//! identity, so a tier that asked for the node (host namespaces, a
//! hostPath, a privileged container, root) or for another ServiceAccount
//! would get it from whoever can write tiers, not from whoever may run such
//! pods. The merged pod must meet Pod Security "restricted" (as the
//! operator's own pod does), checked as an allow-list: a field a tier
//! removes (a `null` in the merge) fails as surely as one it sets, so a
//! tier cannot take the non-root user or the seccomp profile away.
//! Everything else a tier overrides (images, resources, probes, env,
//! affinity) stays open.

use cro_provider_api::ProviderError;
use k8s_openapi::api::{
    apps::v1::DeploymentSpec,
    core::v1::{
        PodSecurityContext, PodSpec, SELinuxOptions, SeccompProfile, SecurityContext, ServiceSpec,
        Volume,
    },
};

const AT: &str = "strategy.deploymentSpec.template.spec";

/// The first thing the merged Deployment spec asks for that no tier may
/// give, as an error naming its field.
pub fn check(spec: &DeploymentSpec) -> Result<(), ProviderError> {
    let Some(pod) = spec.template.spec.as_ref() else {
        return Ok(());
    };
    let annotations = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref());
    let unconfined = annotations.into_iter().flatten().find(|(k, v)| {
        k.starts_with("container.apparmor.security.beta.kubernetes.io/") && *v == "unconfined"
    });
    let refusal = match unconfined {
        Some((key, _)) => Some(format!(
            "strategy.deploymentSpec.template.metadata.annotations[{key}]"
        )),
        None => refused(pod).map(|what| format!("{AT}.{what}")),
    };
    match refusal {
        None => Ok(()),
        Some(what) => Err(ProviderError::invalid_strategy(format!(
            "{what}: a tier may not give a database's pod this (host access, root, an unconfined or escalating process, a volume of the node or another ServiceAccount: the pod must meet Pod Security \"restricted\", as the operator's own pod does); remove it, or the null that took the operator's own setting away, from the tier's strategy.deploymentSpec"
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

/// The volume sources Pod Security "restricted" allows: none reaches the
/// node or another namespace.
fn allowed_volume(v: &Volume) -> bool {
    v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.persistent_volume_claim.is_some()
        || v.projected.is_some()
        || v.secret.is_some()
}

/// The sysctls Pod Security calls safe: namespaced, and isolated from the
/// node and other pods.
const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// SELinux types a container may run as (Pod Security baseline).
const SELINUX_TYPES: [&str; 4] = [
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

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
    if pod.ephemeral_containers.is_some() {
        return Some("ephemeralContainers".into());
    }
    let volumes = pod.volumes.iter().flatten().enumerate();
    if let Some((i, v)) = volumes.into_iter().find(|(_, v)| !allowed_volume(v)) {
        let kind = if v.host_path.is_some() {
            ".hostPath"
        } else {
            ""
        };
        return Some(format!("volumes[{i}]{kind}"));
    }
    let default = PodSecurityContext::default();
    let pod_context = pod.security_context.as_ref().unwrap_or(&default);
    if let Some(field) = refused_pod_context(pod_context) {
        return Some(format!("securityContext.{field}"));
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
            let context = c.security_context.clone().unwrap_or_default();
            if let Some(field) = refused_context(&context, pod_context) {
                return Some(at(&format!("securityContext.{field}")));
            }
        }
    }
    None
}

/// A seccomp profile that confines: the runtime's default or one of the
/// node's own (never `Unconfined`).
fn confines(profile: Option<&SeccompProfile>) -> Option<bool> {
    profile.map(|p| matches!(p.type_.as_str(), "RuntimeDefault" | "Localhost"))
}

/// SELinux options that name a user or role, or a type no container runs
/// as (Pod Security baseline).
fn escapes_selinux(options: Option<&SELinuxOptions>) -> bool {
    options.is_some_and(|o| {
        let odd_type = o
            .type_
            .as_deref()
            .is_some_and(|t| !SELINUX_TYPES.contains(&t));
        o.user.is_some() || o.role.is_some() || odd_type
    })
}

fn refused_pod_context(context: &PodSecurityContext) -> Option<&'static str> {
    if context.run_as_user == Some(0) {
        return Some("runAsUser");
    }
    if context.run_as_non_root == Some(false) {
        return Some("runAsNonRoot");
    }
    if confines(context.seccomp_profile.as_ref()) == Some(false) {
        return Some("seccompProfile");
    }
    let apparmor = context.app_armor_profile.as_ref();
    if apparmor.is_some_and(|p| p.type_ == "Unconfined") {
        return Some("appArmorProfile");
    }
    if escapes_selinux(context.se_linux_options.as_ref()) {
        return Some("seLinuxOptions");
    }
    let sysctls = context.sysctls.iter().flatten();
    if sysctls
        .into_iter()
        .any(|s| !SAFE_SYSCTLS.contains(&s.name.as_str()))
    {
        return Some("sysctls");
    }
    if context
        .windows_options
        .as_ref()
        .is_some_and(|w| w.host_process == Some(true))
    {
        return Some("windowsOptions.hostProcess");
    }
    None
}

/// A container's own context, over the pod's where Pod Security reads
/// both: it must state no escalation, drop every capability and add none,
/// and run as non-root under a confining seccomp profile (its own or the
/// pod's).
fn refused_context(context: &SecurityContext, pod: &PodSecurityContext) -> Option<&'static str> {
    if context.privileged == Some(true) {
        return Some("privileged");
    }
    if context.allow_privilege_escalation != Some(false) {
        return Some("allowPrivilegeEscalation");
    }
    if context.run_as_user.or(pod.run_as_user) == Some(0) {
        return Some("runAsUser");
    }
    if context.run_as_non_root.or(pod.run_as_non_root) != Some(true) {
        return Some("runAsNonRoot");
    }
    let seccomp = context
        .seccomp_profile
        .as_ref()
        .or(pod.seccomp_profile.as_ref());
    if confines(seccomp) != Some(true) {
        return Some("seccompProfile");
    }
    if context
        .app_armor_profile
        .as_ref()
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        return Some("appArmorProfile");
    }
    if escapes_selinux(context.se_linux_options.as_ref()) {
        return Some("seLinuxOptions");
    }
    if context
        .windows_options
        .as_ref()
        .is_some_and(|w| w.host_process == Some(true))
    {
        return Some("windowsOptions.hostProcess");
    }
    if context
        .proc_mount
        .as_deref()
        .is_some_and(|m| m != "Default")
    {
        return Some("procMount");
    }
    let capabilities = context.capabilities.as_ref();
    let added = capabilities.and_then(|c| c.add.as_ref());
    if added.is_some_and(|a| !a.is_empty()) {
        return Some("capabilities.add");
    }
    let dropped = capabilities.and_then(|c| c.drop.as_ref());
    if !dropped.is_some_and(|d| d.iter().any(|c| c == "ALL")) {
        return Some("capabilities.drop");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The operator's own pod with the tier's `patch` merged as tiers are
    /// (so `null` removes a field).
    fn spec(patch: Value) -> DeploymentSpec {
        let mut pod = json!({"template": {"spec": {
            "securityContext": {"runAsUser": 999, "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "postgres", "image": "postgres:17",
                "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}],
        }}});
        crate::merge::merge(&mut pod, &patch);
        pod["selector"] = json!({"matchLabels": {"app": "postgres"}});
        serde_json::from_value(pod).unwrap_or_else(|e| panic!("{e}"))
    }

    fn refusal(patch: Value) -> Option<String> {
        check(&spec(patch)).err().map(|e| e.to_string())
    }

    fn pod(fields: Value) -> Value {
        json!({"template": {"spec": fields}})
    }

    fn container(security: Value) -> Value {
        pod(json!({"containers": [{"name": "postgres", "securityContext": security}]}))
    }

    #[test]
    fn the_operators_own_pod_and_what_tiers_may_change_pass() {
        let allowed = [
            json!({}),
            container(
                json!({"capabilities": {"drop": ["ALL", "CHOWN"]}, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}),
            ),
            pod(
                json!({"securityContext": {"runAsUser": 1000, "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]}}),
            ),
            pod(
                json!({"volumes": [{"name": "conf", "configMap": {"name": "pg-conf"}}, {"name": "tmp", "emptyDir": {}}]}),
            ),
            pod(
                json!({"containers": [{"name": "exporter", "image": "exporter:1", "securityContext":
                {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}),
            ),
        ];
        for patch in allowed {
            assert_eq!(refusal(patch.clone()), None, "{patch}");
        }
    }

    /// Each patch is refused, naming its field and where it came from.
    fn each_refused_naming(cases: Vec<(serde_json::Value, &str)>) {
        for (patch, field) in cases {
            let message =
                refusal(patch.clone()).unwrap_or_else(|| panic!("{patch} was let through"));
            assert!(message.contains(field), "{field} not named: {message}");
            assert!(
                message.contains("from the tier's strategy.deploymentSpec"),
                "{message}"
            );
        }
    }

    #[test]
    fn host_access_and_other_service_accounts_are_refused_by_field() {
        each_refused_naming(vec![
            (pod(json!({"hostNetwork": true})), "spec.hostNetwork:"),
            (pod(json!({"hostPID": true})), "spec.hostPID:"),
            (pod(json!({"hostIPC": true})), "spec.hostIPC:"),
            (
                pod(json!({"serviceAccountName": "admin"})),
                "spec.serviceAccountName:",
            ),
            (
                pod(json!({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]})),
                "spec.volumes[1].hostPath:",
            ),
            (
                pod(json!({"volumes": [{"name": "n", "nfs": {"server": "nas", "path": "/"}}]})),
                "spec.volumes[1]:",
            ),
            (
                pod(json!({"securityContext": {"runAsUser": 0}})),
                "spec.securityContext.runAsUser:",
            ),
        ]);
    }

    #[test]
    fn root_escalation_and_unconfined_containers_are_refused_by_field() {
        each_refused_naming(vec![
            (
                pod(json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}})),
                "spec.securityContext.seccompProfile:",
            ),
            (
                pod(
                    json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
                ),
                "spec.securityContext.sysctls:",
            ),
            (
                pod(json!({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}})),
                "spec.securityContext.seLinuxOptions:",
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
                container(json!({"procMount": "Unmasked"})),
                "spec.containers[0].securityContext.procMount:",
            ),
            (
                pod(
                    json!({"initContainers": [{"name": "i", "securityContext": {"privileged": true}}]}),
                ),
                "spec.initContainers[0].securityContext.privileged:",
            ),
            (
                pod(
                    json!({"containers": [{"name": "postgres", "ports": [{"containerPort": 5432, "hostPort": 5432}]}]}),
                ),
                "spec.containers[0].ports.hostPort:",
            ),
            (
                json!({"template": {"metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/postgres": "unconfined"}}}}),
                "template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/postgres]:",
            ),
        ]);
    }

    #[test]
    fn a_floor_taken_away_or_missed_by_a_sidecar_is_refused_by_field() {
        each_refused_naming(vec![
            // Taken away by a null in the merge: the allow-list misses
            // what is gone as it misses what is set.
            (
                pod(json!({"securityContext": {"runAsNonRoot": null, "runAsUser": null}})),
                "spec.containers[0].securityContext.runAsNonRoot:",
            ),
            (
                pod(json!({"securityContext": {"seccompProfile": null}})),
                "spec.containers[0].securityContext.seccompProfile:",
            ),
            (
                container(json!({"allowPrivilegeEscalation": null})),
                "spec.containers[0].securityContext.allowPrivilegeEscalation:",
            ),
            (
                container(json!({"capabilities": null})),
                "spec.containers[0].securityContext.capabilities.drop:",
            ),
            // A sidecar the tier adds meets the same floor.
            (
                pod(json!({"containers": [{"name": "sidecar", "image": "busybox"}]})),
                "spec.containers[1].securityContext.allowPrivilegeEscalation:",
            ),
        ]);
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
