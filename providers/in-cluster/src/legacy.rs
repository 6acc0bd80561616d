//! Workloads the Go operator created (pkg/providers/openshift/, v1.1.x),
//! taken over without an outage, a new password or lost data.
//!
//! They are recognised by the Go operator's immutable Deployment selector
//! `deployment: <name>` (or, with the Deployment gone, by its credentials
//! Secret `<name>-postgres-credentials` / its unlabelled PVC). Existing
//! objects are adopted as they are: this operator's labels and owner
//! references are added, specs are left alone (its rhscl images keep their
//! own data layout on the PVC, so neither the tier's overrides nor this
//! operator's images apply to them). An object deleted by hand is created
//! again in the Go operator's shape, so the PVC's data is served as before.

use std::collections::BTreeMap;

use cro_provider_api::ResourceRequest;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{PersistentVolumeClaim, Secret},
};
use serde_json::{Value, json};

use crate::workload::{Desired, ISOLATED_ANNOTATION, Isolation, metadata, network_policy};

/// The Go operator's Postgres credentials Secret (`buildDefaultPostgresSecret`).
pub fn postgres_secret_name(name: &str) -> String {
    format!("{name}-postgres-credentials")
}

/// The ConfigMap all of a namespace's Go-operator Redis share
/// (`provider_redis.go`); never owned by one CR.
pub const REDIS_CONFIG_MAP: &str = "redis-config";

/// The Go operator's host for in-cluster services (`.svc.cluster.local`),
/// kept so the output Secret of an adopted resource does not change.
pub fn host(req: &ResourceRequest) -> String {
    format!("{}.{}.svc.cluster.local", req.name, req.namespace)
}

fn selector(name: &str) -> Value {
    json!({"deployment": name})
}

/// Whether `deployment` was made by the Go operator for `name`.
pub fn is_go_deployment(deployment: &Deployment, name: &str) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .is_some_and(|labels| {
            labels.len() == 1 && labels.get("deployment").map(String::as_str) == Some(name)
        })
}

/// What a PVC named like the CR says of its layout, when no Go Deployment
/// or Go credentials Secret is there to say it.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// Adopted from the Go operator (or marked so by a person): its layout.
    Go,
    /// This operator's own.
    Ours,
    /// Neither labelled nor annotated: the Go operator's (it put nothing on
    /// its PVCs) or anyone's. Never taken without a person saying so.
    Unknown,
}

pub fn claim(pvc: &PersistentVolumeClaim) -> Claim {
    let annotated = pvc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAYOUT_ANNOTATION))
        .is_some_and(|v| v == GO_LAYOUT);
    let labelled = pvc
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(cro_provider_api::MANAGED_BY_LABEL));
    match (annotated, labelled) {
        (true, _) => Claim::Go,
        (false, true) => Claim::Ours,
        (false, false) => Claim::Unknown,
    }
}

/// The credentials of a Go-operator Postgres (`user`, `password`,
/// `database`), if its Secret exists.
pub fn postgres_credentials(secret: &Secret) -> Option<BTreeMap<String, String>> {
    let data = secret.data.as_ref()?;
    let get = |k: &str| {
        data.get(k)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
    };
    Some(BTreeMap::from([
        ("user".to_string(), get("user")?),
        ("password".to_string(), get("password")?),
        ("database".to_string(), get("database")?),
    ]))
}

/// Marks an adopted object, so it keeps the Go operator's layout even
/// after its Deployment is deleted by hand.
pub const LAYOUT_ANNOTATION: &str = "cro.integreatly.org/layout";
pub const GO_LAYOUT: &str = "go-operator";

/// This operator's metadata for an adopted object named `name`.
pub fn adopted_metadata(req: &ResourceRequest, name: &str, app: &str) -> Value {
    let mut meta = metadata(req, name, app);
    meta["annotations"] = json!({LAYOUT_ANNOTATION: GO_LAYOUT});
    meta
}

fn object(req: &ResourceRequest, api_version: &str, kind: &str, app: &str, spec: Value) -> Value {
    // A Deployment's annotations are copied to its ReplicaSets, so changing
    // them bumps its generation (a rollout); its selector marks it anyway.
    let metadata = if kind == "Deployment" {
        metadata(req, &req.name, app)
    } else {
        adopted_metadata(req, &req.name, app)
    };
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec})
}

fn pvc(req: &ResourceRequest, app: &str) -> Value {
    let spec =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    object(req, "v1", "PersistentVolumeClaim", app, spec)
}

/// The Go operator's Postgres (`buildDefaultPostgresDeployment`,
/// `buildDefaultPostgresService`), for objects that have to be created
/// (again, or new under `--go-compatible-resources`); with a NetworkPolicy
/// of this operator's when `isolation` is given.
pub fn postgres(req: &ResourceRequest, isolation: Option<&Isolation>) -> Desired {
    let name = req.name.as_str();
    let secret = postgres_secret_name(name);
    let env = |var: &str, key: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}});
    let container = json!({
        "name": name,
        "image": "registry.redhat.io/rhscl/postgresql-13-rhel7",
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": 5432, "protocol": "TCP"}],
        "env": [env("POSTGRESQL_USER", "user"), env("POSTGRESQL_PASSWORD", "password"), env("POSTGRESQL_DATABASE", "database")],
        "resources": {"limits": {"cpu": "250m", "memory": "2Gi"}, "requests": {"cpu": "50m", "memory": "512Mi"}},
        "volumeMounts": [{"name": name, "mountPath": "/var/lib/pgsql/data"}],
        "livenessProbe": {"tcpSocket": {"port": 5432}, "initialDelaySeconds": 30, "periodSeconds": 10},
        "readinessProbe": {"exec": {"command": ["/bin/sh", "-i", "-c", "psql -h 127.0.0.1 -U $POSTGRESQL_USER -q -d $POSTGRESQL_DATABASE -c 'SELECT 1'"]},
                           "initialDelaySeconds": 10, "periodSeconds": 30, "timeoutSeconds": 5},
    });
    let deployment = deployment_spec(
        req,
        json!([{"name": name, "persistentVolumeClaim": {"claimName": name}}]),
        container,
        POSTGRES_GROUP,
    );
    let service = json!({
        "type": "ClusterIP",
        "ports": [{"name": "postgresql", "protocol": "TCP", "port": 5432, "targetPort": 5432}],
        "selector": selector(name),
    });
    Desired {
        pvc: pvc(req, "postgres"),
        config_map: None,
        service: object(req, "v1", "Service", "postgres", service),
        deployment: deployment_object(req, "postgres", deployment, isolation),
        network_policy: isolation
            .map(|i| network_policy(req, "postgres", (selector(name), 5432), i)),
    }
}

/// The Go operator's Redis (`buildDefaultRedisDeployment`,
/// `buildDefaultRedisService`), made as [`postgres`] is.
pub fn redis(req: &ResourceRequest, isolation: Option<&Isolation>) -> Desired {
    let name = req.name.as_str();
    let container = json!({
        "name": "redis",
        "image": "registry.redhat.io/rhel9/redis-7",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/bin/redis-server"],
        "args": ["/etc/redis.d/redis.conf", "--daemonize", "no"],
        "resources": {"limits": {"cpu": "500m", "memory": "6Gi"}, "requests": {"cpu": "150m", "memory": "256Mi"}},
        "volumeMounts": [{"name": name, "mountPath": "/var/lib/redis/data"}, {"name": REDIS_CONFIG_MAP, "mountPath": "/etc/redis.d/"}],
        "readinessProbe": {"exec": {"command": ["container-entrypoint", "bash", "-c", "redis-cli set liveness-probe \"`date`\" | grep OK"]},
                           "initialDelaySeconds": 10, "periodSeconds": 30, "timeoutSeconds": 1},
        "livenessProbe": {"tcpSocket": {"port": 6379}, "initialDelaySeconds": 10, "periodSeconds": 10},
    });
    let deployment = deployment_spec(
        req,
        json!([
            {"name": name, "persistentVolumeClaim": {"claimName": name}},
            {"name": REDIS_CONFIG_MAP, "configMap": {"name": REDIS_CONFIG_MAP, "items": [{"key": "redis.conf", "path": "redis.conf"}]}},
        ]),
        container,
        REDIS_GROUP,
    );
    let service = json!({"type": "ClusterIP", "ports": [{"port": 6379, "targetPort": 6379, "protocol": "TCP"}], "selector": selector(name)});
    Desired {
        pvc: pvc(req, "redis"),
        config_map: None,
        service: object(req, "v1", "Service", "redis", service),
        deployment: deployment_object(req, "redis", deployment, isolation),
        network_policy: isolation.map(|i| network_policy(req, "redis", (selector(name), 6379), i)),
    }
}

/// The Deployment; one made isolated says so, as this operator's own do
/// (an adopted one without the mark stays open, as it was).
fn deployment_object(
    req: &ResourceRequest,
    app: &str,
    spec: Value,
    isolation: Option<&Isolation>,
) -> Value {
    let mut deployment = object(req, "apps/v1", "Deployment", app, spec);
    if isolation.is_some() {
        deployment["metadata"]["annotations"] = json!({ISOLATED_ANNOTATION: "true"});
    }
    deployment
}

/// The group the rhscl Postgres image runs as, and the Redis image.
const POSTGRES_GROUP: i64 = 26;
const REDIS_GROUP: i64 = 1001;

/// The Deployment spec both Go workloads share: one replica, recreated,
/// selected by `deployment: <name>`; in a namespace named `openshift-*`,
/// its pods' group (`NamespacePrefixOpenShift`, config.go).
fn deployment_spec(req: &ResourceRequest, volumes: Value, container: Value, group: i64) -> Value {
    let name = req.name.as_str();
    let mut spec = json!({
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": selector(name)},
        "template": {
            "metadata": {"labels": selector(name)},
            "spec": {"volumes": volumes, "containers": [container]},
        },
    });
    if req.namespace.starts_with("openshift-") {
        spec["template"]["spec"]["securityContext"] =
            json!({"fsGroup": group, "supplementalGroups": [group]});
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_selector_is_recognised_and_ours_is_not() {
        let go: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"selector": {"matchLabels": {"deployment": "db"}}, "template": {}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(is_go_deployment(&go, "db"));
        assert!(!is_go_deployment(&go, "other"));
        let ours: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "db"},
            "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "postgres", "app.kubernetes.io/instance": "db"}}, "template": {}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!is_go_deployment(&ours, "db"));
    }

    #[test]
    fn a_new_go_layout_workload_is_isolated_by_its_go_selector_and_an_adopted_one_is_not() {
        let isolation = Isolation {
            operator_namespace: Some("cro".into()),
        };
        let mut req = crate::workload::tests::req();
        for (d, port) in [
            (postgres(&req, Some(&isolation)), 5432),
            (redis(&req, Some(&isolation)), 6379),
        ] {
            let policy = d.network_policy.unwrap_or_else(|| panic!("no policy"));
            assert_eq!(
                policy["spec"]["podSelector"]["matchLabels"],
                json!({"deployment": "db"})
            );
            assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], port);
            assert_eq!(
                d.deployment["metadata"]["annotations"][ISOLATED_ANNOTATION],
                "true"
            );
            assert!(d.deployment["spec"]["template"]["spec"]["securityContext"].is_null());
        }
        let adopted = postgres(&req, None);
        assert!(adopted.network_policy.is_none());
        assert!(adopted.deployment["metadata"]["annotations"].is_null());
        // buildDefaultPostgresDeployment / buildDefaultRedisDeployment in
        // a namespace named openshift-*.
        req.namespace = "openshift-app".into();
        for (d, group) in [(postgres(&req, None), 26), (redis(&req, None), 1001)] {
            assert_eq!(
                d.deployment["spec"]["template"]["spec"]["securityContext"],
                json!({"fsGroup": group, "supplementalGroups": [group]})
            );
        }
    }
}
