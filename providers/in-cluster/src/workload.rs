//! Desired objects for in-cluster Postgres and Redis: Deployment (Recreate,
//! one replica), Service, PVC and, for Redis, a config ConfigMap. Pure: the
//! request and overrides in, JSON objects out (validated against the typed
//! Kubernetes specs after overrides are merged).

use std::collections::BTreeMap;

use cro_provider_api::{ProviderError, ResourceRequest};
use k8s_openapi::api::{
    apps::v1::DeploymentSpec,
    core::v1::{PersistentVolumeClaimSpec, ServiceSpec},
};
use serde_json::{Value, json};

use crate::strategy::{Overrides, overridden};

use cro_provider_api::{MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// Everything to create for one resource.
#[derive(Debug)]
pub struct Desired {
    pub pvc: Value,
    pub config_map: Option<Value>,
    pub service: Value,
    pub deployment: Value,
}

/// What differs between Postgres and Redis.
struct Engine {
    app: &'static str,
    image: &'static str,
    port: u16,
    data_path: &'static str,
    container: Value,
}

pub fn credentials_secret_name(name: &str) -> String {
    format!("{name}-credentials")
}

pub fn config_map_name(name: &str) -> String {
    format!("{name}-config")
}

pub fn labels(req: &ResourceRequest, app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.into(), MANAGED_BY.into()),
        ("app.kubernetes.io/name".into(), app.into()),
        ("app.kubernetes.io/instance".into(), req.name.clone()),
        (OWNER_UID_LABEL.into(), req.owner.uid.clone()),
    ])
}

fn selector(req: &ResourceRequest, app: &str) -> Value {
    json!({"app.kubernetes.io/name": app, "app.kubernetes.io/instance": req.name})
}

/// `metadata` of an object named `name` owned by the request's CR.
pub fn metadata(req: &ResourceRequest, name: &str, app: &str) -> Value {
    json!({
        "name": name,
        "namespace": req.namespace,
        "labels": labels(req, app),
        "ownerReferences": [req.owner.controller_reference()],
    })
}

fn build(
    req: &ResourceRequest,
    o: &Overrides,
    engine: Engine,
    extra_volume: Option<Value>,
) -> Result<Desired, ProviderError> {
    let app = engine.app;
    let pvc_spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    });
    let service_spec = json!({
        "selector": selector(req, app),
        "ports": [{"name": app, "port": engine.port, "targetPort": engine.port}],
    });
    let deployment_spec = deployment_spec(req, engine, extra_volume);
    let object = |api_version: &str, kind: &str, spec: Value| json!({"apiVersion": api_version, "kind": kind, "metadata": metadata(req, &req.name, app), "spec": spec});
    let pvc =
        overridden::<PersistentVolumeClaimSpec>(pvc_spec, o.pvc_spec.as_ref(), "strategy.pvcSpec")?;
    let service = overridden::<ServiceSpec>(
        service_spec,
        o.service_spec.as_ref(),
        "strategy.serviceSpec",
    )?;
    let deployment = overridden::<DeploymentSpec>(
        deployment_spec,
        o.deployment_spec.as_ref(),
        "strategy.deploymentSpec",
    )?;
    Ok(Desired {
        pvc: object("v1", "PersistentVolumeClaim", pvc),
        service: object("v1", "Service", service),
        deployment: object("apps/v1", "Deployment", deployment),
        config_map: None,
    })
}

/// One replica, recreated (never two pods on one volume), its data on the
/// PVC, running as the upstream images' non-root user.
fn deployment_spec(req: &ResourceRequest, engine: Engine, extra_volume: Option<Value>) -> Value {
    let app = engine.app;
    let mut container = engine.container;
    container["name"] = json!(app);
    container["image"] = json!(engine.image);
    container["ports"] = json!([{"name": app, "containerPort": engine.port}]);
    container["resources"] = json!({"requests": {"cpu": "100m", "memory": "256Mi"}});
    container["securityContext"] = json!({"allowPrivilegeEscalation": false});
    let mut mounts = vec![json!({"name": "data", "mountPath": engine.data_path})];
    let mut volumes =
        vec![json!({"name": "data", "persistentVolumeClaim": {"claimName": req.name}})];
    if let Some(config) = extra_volume {
        mounts.push(json!({"name": "config", "mountPath": "/etc/redis"}));
        volumes.push(config);
    }
    container["volumeMounts"] = json!(mounts);
    json!({
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": selector(req, app)},
        "template": {
            "metadata": {"labels": labels(req, app)},
            "spec": {
                // The upstream images run as uid 999 once initialised.
                "securityContext": {"runAsNonRoot": true, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999},
                "containers": [container],
                "volumes": volumes,
            }
        }
    })
}

pub fn postgres(req: &ResourceRequest, o: &Overrides) -> Result<Desired, ProviderError> {
    let secret = credentials_secret_name(&req.name);
    let from_secret = |var: &str, key: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}});
    let ready = json!({"exec": {"command": ["sh", "-c", "pg_isready -U \"$POSTGRES_USER\" -d \"$POSTGRES_DB\""]}, "periodSeconds": 10});
    let mut live = ready.clone();
    live["initialDelaySeconds"] = json!(30);
    let container = json!({
        "env": [
            from_secret("POSTGRES_USER", "username"),
            from_secret("POSTGRES_PASSWORD", "password"),
            from_secret("POSTGRES_DB", "database"),
            {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"},
        ],
        "readinessProbe": ready,
        "livenessProbe": live,
    });
    build(
        req,
        o,
        Engine {
            app: "postgres",
            image: "docker.io/library/postgres:17",
            port: 5432,
            data_path: "/var/lib/postgresql/data",
            container,
        },
        None,
    )
}

pub const REDIS_CONF: &str = "dir /data\nappendonly yes\nprotected-mode no\nport 6379\n";

pub fn redis(req: &ResourceRequest, o: &Overrides) -> Result<Desired, ProviderError> {
    let probe = json!({"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 10});
    let mut live = probe.clone();
    live["initialDelaySeconds"] = json!(15);
    let container = json!({
        "command": ["redis-server", "/etc/redis/redis.conf"],
        "readinessProbe": probe,
        "livenessProbe": live,
    });
    let cm_name = config_map_name(&req.name);
    let config_volume = json!({"name": "config", "configMap": {"name": cm_name}});
    let mut desired = build(
        req,
        o,
        Engine {
            app: "redis",
            image: "docker.io/library/redis:7",
            port: 6379,
            data_path: "/data",
            container,
        },
        Some(config_volume),
    )?;
    let mut data = BTreeMap::from([("redis.conf".to_string(), REDIS_CONF.to_string())]);
    data.extend(o.config_map_data.clone());
    desired.config_map = Some(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(req, &cm_name, "redis"), "data": data
    }));
    Ok(desired)
}

/// The tag of the first container's image (e.g. `17`), reported as the
/// engine version.
pub fn image_tag(deployment: &Value) -> Option<String> {
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"].as_str()?;
    let last = image.rsplit('/').next()?;
    let tag = last.split_once(':')?.1;
    Some(tag.split('@').next().unwrap_or(tag).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::parse;
    use cro_provider_api::{Options, Owner, ResourceKind};

    fn req() -> ResourceRequest {
        ResourceRequest {
            kind: ResourceKind::Postgres,
            namespace: "app".into(),
            name: "db".into(),
            owner: Owner {
                api_version: "integreatly.org/v1alpha1".into(),
                kind: "Postgres".into(),
                name: "db".into(),
                uid: "u1".into(),
            },
            identifier: "id".into(),
            recorded_identifier: None,
            restore_from_snapshot: None,
            final_snapshot_identifier: None,
            tier: "development".into(),
            strategy: json!({}),
            network: None,
            tags: Default::default(),
            owner_tag: Default::default(),
            namespace_tag: Default::default(),
            options: Options::default(),
        }
    }

    #[test]
    fn postgres_defaults() {
        let d = postgres(&req(), &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
        let spec = &d.deployment["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["strategy"]["type"], "Recreate");
        let c = &spec["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "docker.io/library/postgres:17");
        assert!(c["readinessProbe"]["exec"].is_object());
        assert_eq!(
            spec["template"]["spec"]["securityContext"]["runAsNonRoot"],
            true
        );
        for obj in [&d.deployment, &d.service, &d.pvc] {
            assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "u1");
            assert_eq!(obj["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        }
        assert_eq!(image_tag(&d.deployment).as_deref(), Some("17"));
    }

    #[test]
    fn image_override_changes_only_the_image() {
        let o = parse(&json!({"strategy": {"deploymentSpec": {"template": {"spec": {"containers": [{"name": "postgres", "image": "postgres:16.4"}]}}}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let d = postgres(&req(), &o).unwrap_or_else(|e| panic!("{e}"));
        let c = &d.deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "postgres:16.4");
        assert!(c["readinessProbe"].is_object() && c["env"].is_array());
        assert_eq!(image_tag(&d.deployment).as_deref(), Some("16.4"));
    }

    #[test]
    fn invalid_override_names_the_field() {
        let o = parse(&json!({"strategy": {"pvcSpec": {"accessModes": "ReadWriteOnce"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = postgres(&req(), &o)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("strategy.pvcSpec.accessModes"), "{err}");
    }

    #[test]
    fn redis_config_map_merges_overrides() {
        let o = parse(&json!({"strategy": {"configMapData": {"extra.conf": "x"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let d = redis(&req(), &o).unwrap_or_else(|e| panic!("{e}"));
        let cm = d.config_map.unwrap_or_default();
        assert_eq!(cm["metadata"]["name"], "db-config");
        assert_eq!(cm["data"]["redis.conf"], REDIS_CONF);
        assert_eq!(cm["data"]["extra.conf"], "x");
    }
}
