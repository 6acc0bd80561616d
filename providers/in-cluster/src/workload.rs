//! Desired objects for in-cluster Postgres and Redis: Deployment (Recreate,
//! one replica), Service, PVC, for Redis a config ConfigMap and, for an
//! isolated workload, a NetworkPolicy. Pure: the request and overrides in,
//! JSON objects out (validated against the typed Kubernetes specs after
//! overrides are merged).

use std::collections::BTreeMap;

use cro_provider_api::{ProviderError, ResourceRequest};
use k8s_openapi::api::{
    apps::v1::DeploymentSpec,
    core::v1::{PersistentVolumeClaimSpec, ServiceSpec},
};
use serde_json::{Value, json};

use crate::strategy::{Overrides, overridden, typed};

use cro_provider_api::{MANAGED_BY, MANAGED_BY_LABEL, OWNER_UID_LABEL};

/// Everything to create for one resource.
#[derive(Debug)]
pub struct Desired {
    pub pvc: Value,
    pub config_map: Option<Value>,
    pub service: Value,
    pub deployment: Value,
    pub network_policy: Option<Value>,
}

/// On the Deployment of a workload made isolated: its pods admit only
/// their own namespace (and the operator's) and a Redis asks for a
/// password. Workloads made before it are left open (their clients in
/// other namespaces, or without the password, would lose them); adding it
/// to a Deployment isolates that workload.
pub const ISOLATED_ANNOTATION: &str = "cro.integreatly.org/isolated";

/// What an isolated workload admits besides its own namespace.
#[derive(Clone, Debug, Default)]
pub struct Isolation {
    /// The operator's namespace, for its `Connectable` check; `None` when
    /// it runs outside the cluster.
    pub operator_namespace: Option<String>,
}

/// Ingress to the port of the pods `pods` selects from pods of their
/// namespace and of the operator's.
pub fn network_policy(
    req: &ResourceRequest,
    app: &str,
    (pods, port): (Value, u16),
    isolation: &Isolation,
) -> Value {
    let mut from = vec![json!({"podSelector": {}})];
    if let Some(ns) = isolation
        .operator_namespace
        .as_ref()
        .filter(|ns| **ns != req.namespace)
    {
        from.push(
            json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}),
        );
    }
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(req, &req.name, app),
        "spec": {
            "podSelector": {"matchLabels": pods},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": from, "ports": [{"protocol": "TCP", "port": port}]}],
        }
    })
}

/// The user a workload's pods run as.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PodUser {
    /// The upstream images' own user, 999.
    #[default]
    Image,
    /// The first UID (and group) of the namespace's ranges: OpenShift's
    /// `restricted-v2` SCC refuses any UID outside them, and the images
    /// run under any UID whose group may write their volume.
    Range { uid: i64, fs_group: i64 },
}

/// The namespace annotations OpenShift sets from its UID and group ranges.
pub const UID_RANGE_ANNOTATION: &str = "openshift.io/sa.scc.uid-range";
pub const GROUPS_ANNOTATION: &str = "openshift.io/sa.scc.supplemental-groups";

impl PodUser {
    /// The user for pods in a namespace with these annotations: the first
    /// of its OpenShift UID range (`<first>/<size>`, or `<first>-<last>`)
    /// when it has one, its first supplemental group owning the volume
    /// (the UID when it names none).
    pub fn of_namespace(
        namespace: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<PodUser, ProviderError> {
        let first = |key: &str| -> Result<Option<i64>, ProviderError> {
            let Some(range) = annotations.get(key) else {
                return Ok(None);
            };
            let first = range.split(['/', '-', ',']).next().unwrap_or_default();
            first.trim().parse::<i64>().map(Some).map_err(|_| {
                ProviderError::permanent(format!(
                    "Namespace {namespace}'s annotation {key} is {range:?}, not a range such as \"1000680000/10000\": fix or remove it (the in-cluster pods run as the range's first UID)"
                ))
            })
        };
        Ok(match first(UID_RANGE_ANNOTATION)? {
            Some(uid) => PodUser::Range {
                uid,
                fs_group: first(GROUPS_ANNOTATION)?.unwrap_or(uid),
            },
            None => PodUser::Image,
        })
    }

    /// The user a Deployment's pods run as: the upstream images' 999, or
    /// the UID (and fsGroup) its pod template names.
    pub fn of_deployment(d: &k8s_openapi::api::apps::v1::Deployment) -> PodUser {
        let context = (d.spec.as_ref())
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.security_context.as_ref());
        match context.and_then(|c| c.run_as_user) {
            Some(uid) if uid != 999 => PodUser::Range {
                uid,
                fs_group: context.and_then(|c| c.fs_group).unwrap_or(uid),
            },
            _ => PodUser::Image,
        }
    }

    /// The pod's securityContext, Pod Security "restricted" either way.
    pub(crate) fn security_context(&self) -> Value {
        let mut context = match self {
            PodUser::Image => json!({"runAsUser": 999, "runAsGroup": 999, "fsGroup": 999}),
            PodUser::Range { uid, fs_group } => json!({"runAsUser": uid, "fsGroup": fs_group}),
        };
        context["runAsNonRoot"] = json!(true);
        context["seccompProfile"] = json!({"type": "RuntimeDefault"});
        context
    }
}

/// The image a tier's Postgres runs when its `deploymentSpec` names none.
pub const DEFAULT_POSTGRES_IMAGE: &str = "docker.io/library/postgres:17";
/// The image a tier's Redis runs when its `deploymentSpec` names none.
pub const DEFAULT_REDIS_IMAGE: &str = "docker.io/library/redis:7";

/// The image a tier's BlobStorage store runs when its `deploymentSpec`
/// names none: SeaweedFS, S3 and an IAM API on one port.
pub const DEFAULT_OBJECT_STORE_IMAGE: &str = "docker.io/chrislusf/seaweedfs:4.48";

/// The image a tier's SMTPCredentialSet server runs when its
/// `deploymentSpec` names none: Mailpit, which keeps what it is sent.
pub const DEFAULT_MAIL_SERVER_IMAGE: &str = "docker.io/axllent/mailpit:v1.33.1";

/// The images Postgres, Redis, the object store and the mail server run
/// unless a tier names its own: the operator's `--postgres-image`,
/// `--redis-image`, `--object-store-image` and `--mail-server-image`, so a
/// platform pins them by digest (or to its mirror) once for every tier.
#[derive(Clone, Debug)]
pub struct Images {
    pub postgres: String,
    pub redis: String,
    pub object_store: String,
    pub mail_server: String,
}

impl Default for Images {
    fn default() -> Self {
        Images {
            postgres: DEFAULT_POSTGRES_IMAGE.into(),
            redis: DEFAULT_REDIS_IMAGE.into(),
            object_store: DEFAULT_OBJECT_STORE_IMAGE.into(),
            mail_server: DEFAULT_MAIL_SERVER_IMAGE.into(),
        }
    }
}

/// What differs between Postgres and Redis.
struct Engine<'a> {
    app: &'static str,
    image: &'a str,
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
    engine: Engine<'_>,
    extra_volume: Option<(Value, &str)>,
    isolation: Option<&Isolation>,
    user: &PodUser,
) -> Result<Desired, ProviderError> {
    let (app, port) = (engine.app, engine.port);
    let pvc_spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    });
    // The type is stated so drift sees a Service turned into an
    // ExternalName (a tenant may edit Services): the Secret's host would
    // then send the application, and the operator's checks, anywhere.
    let service_spec = json!({
        "type": "ClusterIP",
        "selector": selector(req, app),
        "ports": [{"name": app, "port": engine.port, "targetPort": engine.port}],
    });
    let deployment_spec = deployment_spec(req, engine, extra_volume, user);
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
    crate::pod_safety::check(&typed(deployment.clone(), "strategy.deploymentSpec")?)?;
    crate::pod_safety::check_service(&typed(service.clone(), "strategy.serviceSpec")?)?;
    let mut deployment = object("apps/v1", "Deployment", deployment);
    if isolation.is_some() {
        deployment["metadata"]["annotations"] = json!({ISOLATED_ANNOTATION: "true"});
    }
    Ok(Desired {
        pvc: object("v1", "PersistentVolumeClaim", pvc),
        service: object("v1", "Service", service),
        deployment,
        config_map: None,
        network_policy: isolation
            .filter(|_| o.network_policy)
            .map(|i| network_policy(req, app, (selector(req, app), port), i)),
    })
}

/// One replica, recreated (never two pods on one volume), its data on the
/// PVC, running as a non-root user (see [`PodUser`]).
fn deployment_spec(
    req: &ResourceRequest,
    engine: Engine<'_>,
    extra_volume: Option<(Value, &str)>,
    user: &PodUser,
) -> Value {
    let app = engine.app;
    let mut container = engine.container;
    container["name"] = json!(app);
    container["image"] = json!(engine.image);
    container["ports"] = json!([{"name": app, "containerPort": engine.port}]);
    container["resources"] = json!({"requests": {"cpu": "100m", "memory": "256Mi"}});
    // Pod Security "restricted": no capabilities, no escalation, the
    // runtime's seccomp profile, a non-root user.
    container["securityContext"] =
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    let mut mounts = vec![json!({"name": "data", "mountPath": engine.data_path})];
    let mut volumes =
        vec![json!({"name": "data", "persistentVolumeClaim": {"claimName": req.name}})];
    if let Some((volume, path)) = extra_volume {
        mounts.push(json!({"name": volume["name"], "mountPath": path}));
        volumes.push(volume);
    }
    container["volumeMounts"] = json!(mounts);
    json!({
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": selector(req, app)},
        "template": {
            "metadata": {"labels": labels(req, app)},
            "spec": {
                "securityContext": user.security_context(),
                "containers": [container],
                "volumes": volumes,
            }
        }
    })
}

/// The environment variable `var` from `key` of the CR's credentials
/// Secret.
fn from_credentials(req: &ResourceRequest, var: &str, key: &str) -> Value {
    let secret = credentials_secret_name(&req.name);
    json!({"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
}

/// Readiness and liveness of a server without a client in its image: its
/// port accepts connections.
fn port_probes(port: u16, first_look: u32) -> (Value, Value) {
    let ready = json!({"tcpSocket": {"port": port}, "periodSeconds": 5});
    let live = json!({"tcpSocket": {"port": port}, "periodSeconds": 20, "initialDelaySeconds": first_look});
    (ready, live)
}

/// `image` runs unless the tier's `deploymentSpec` names another.
pub fn postgres(
    req: &ResourceRequest,
    o: &Overrides,
    image: &str,
    isolation: Option<&Isolation>,
    user: &PodUser,
) -> Result<Desired, ProviderError> {
    let from_secret = |var: &str, key: &str| from_credentials(req, var, key);
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
            image,
            port: 5432,
            data_path: "/var/lib/postgresql/data",
            container,
        },
        None,
        isolation,
        user,
    )
}

pub const REDIS_CONF: &str = "dir /data\nappendonly yes\nprotected-mode no\nport 6379\n";

/// Whether a Redis asks for the password of its credentials Secret: an
/// isolated one, unless the tier says `redisPassword: false`.
pub fn redis_password(o: &Overrides, isolation: Option<&Isolation>) -> bool {
    isolation.is_some() && o.redis_password
}

/// `image` runs unless the tier's `deploymentSpec` names another.
pub fn redis(
    req: &ResourceRequest,
    o: &Overrides,
    image: &str,
    isolation: Option<&Isolation>,
    user: &PodUser,
) -> Result<Desired, ProviderError> {
    let probe = json!({"exec": {"command": ["redis-cli", "ping"]}, "periodSeconds": 10});
    let mut live = probe.clone();
    live["initialDelaySeconds"] = json!(15);
    let mut container = json!({
        "command": ["redis-server", "/etc/redis/redis.conf"],
        "readinessProbe": probe,
        "livenessProbe": live,
    });
    if redis_password(o, isolation) {
        // redis-cli (the probes) reads REDISCLI_AUTH; the server gets it
        // expanded by the kubelet.
        container["env"] = json!([from_credentials(req, "REDISCLI_AUTH", "password")]);
        container["command"] = json!([
            "redis-server",
            "/etc/redis/redis.conf",
            "--requirepass",
            "$(REDISCLI_AUTH)"
        ]);
    }
    let cm_name = config_map_name(&req.name);
    let config_volume = json!({"name": "config", "configMap": {"name": cm_name}});
    let mut desired = build(
        req,
        o,
        Engine {
            app: "redis",
            image,
            port: 6379,
            data_path: "/data",
            container,
        },
        Some((config_volume, "/etc/redis")),
        isolation,
        user,
    )?;
    let mut data = BTreeMap::from([("redis.conf".to_string(), REDIS_CONF.to_string())]);
    data.extend(o.config_map_data.clone());
    desired.config_map = Some(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(req, &cm_name, "redis"), "data": data
    }));
    Ok(desired)
}

/// The S3 port of a BlobStorage's store (SeaweedFS's default).
pub const OBJECT_STORE_PORT: u16 = 8333;

/// A BlobStorage's own S3-compatible store: SeaweedFS's master, volume
/// server and filer listen on the pod's loopback only, S3 (with its IAM
/// API) on every address; the administrator's keys come from the
/// credentials Secret. `image` runs unless the tier's `deploymentSpec`
/// names another.
pub fn object_store(
    req: &ResourceRequest,
    o: &Overrides,
    image: &str,
    isolation: Option<&Isolation>,
    user: &PodUser,
) -> Result<Desired, ProviderError> {
    let port = OBJECT_STORE_PORT;
    let (ready, live) = port_probes(port, 30);
    let mut env = vec![
        from_credentials(req, "AWS_ACCESS_KEY_ID", ADMIN_KEY_ID),
        from_credentials(req, "AWS_SECRET_ACCESS_KEY", ADMIN_SECRET),
        // One volume at a time per bucket: the default grows seven,
        // which a small volume runs out of.
        json!({"name": "WEED_MASTER_VOLUME_GROWTH_COPY_1", "value": "1"}),
    ];
    env.extend(crate::store_tls::env());
    let items: Vec<Value> = (crate::store_tls::FILES.iter())
        .map(|(key, path)| json!({"key": key, "path": path}))
        .collect();
    let secret = credentials_secret_name(&req.name);
    let tls = json!({"name": "grpc-tls", "secret": {"secretName": secret, "items": items, "defaultMode": 0o440}});
    let container = json!({
        "command": [
            "weed", "server", "-dir=/data", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-s3", "-s3.ip.bind=0.0.0.0", format!("-s3.port={port}"),
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.iam.readOnly=false",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=256", "-volume.max=0",
        ],
        "env": env,
        "readinessProbe": ready,
        "livenessProbe": live,
    });
    build(
        req,
        o,
        Engine {
            app: "object-store",
            image,
            port,
            data_path: "/data",
            container,
        },
        Some((tls, crate::store_tls::MOUNT_PATH)),
        isolation,
        user,
    )
}

/// The SMTP port of an SMTPCredentialSet's mail server (Mailpit's).
pub const MAIL_SERVER_PORT: u16 = 1025;
/// The user an SMTPCredentialSet's Secret names.
pub const MAIL_USER: &str = "app";

/// An SMTPCredentialSet's own mail server: Mailpit, which asks for the
/// credentials Secret's password on SMTP and on its web UI and API (port
/// 8025, for a person to read what was sent), and keeps the mail on the
/// PVC. `image` runs unless the tier's `deploymentSpec` names another.
/// With the tier's `mailRelay`, it passes each mail on to the smarthost,
/// logging in with `relay_login` (see `relay`).
pub fn mail_server(
    req: &ResourceRequest,
    o: &Overrides,
    image: &str,
    isolation: Option<&Isolation>,
    user: &PodUser,
    relay_login: Option<&crate::relay::Login>,
) -> Result<Desired, ProviderError> {
    let port = MAIL_SERVER_PORT;
    let (ready, live) = port_probes(port, 15);
    // `$(MAIL_PASSWORD)` is expanded by the kubelet: the password never
    // appears in the Deployment.
    let login = format!("{MAIL_USER}:$(MAIL_PASSWORD)");
    let mut env = vec![
        from_credentials(req, "MAIL_PASSWORD", "password"),
        json!({"name": "MP_SMTP_AUTH", "value": login}),
        json!({"name": "MP_UI_AUTH", "value": login}),
    ];
    let secret = credentials_secret_name(&req.name);
    let (relay_env, ca) = match &o.relay {
        Some(relay) => crate::relay::mailpit_env(relay, relay_login, &secret),
        None => (Vec::new(), None),
    };
    env.extend(relay_env);
    let container = json!({
        "command": [
            "/mailpit", "--smtp", format!("0.0.0.0:{port}"), "--listen", "0.0.0.0:8025",
            "--database", "/data/mailpit.db", "--smtp-auth-allow-insecure",
        ],
        "env": env,
        "readinessProbe": ready,
        "livenessProbe": live,
    });
    let engine = Engine {
        app: "mailpit",
        image,
        port,
        data_path: "/data",
        container,
    };
    let ca = ca.map(|volume| (volume, crate::relay::CA_DIR));
    let mut desired = build(req, o, engine, ca, isolation, user)?;
    if let Some(login) = relay_login.filter(|_| o.relay.is_some()) {
        // Mailpit reads the login when it starts: a new one rolls the pod.
        let template = &mut desired.deployment["spec"]["template"]["metadata"];
        template["annotations"] = json!({crate::relay::LOGIN_VERSION: login.version});
    }
    Ok(desired)
}

/// The keys of the store's administrator in the credentials Secret.
pub const ADMIN_KEY_ID: &str = "adminAccessKeyID";
pub const ADMIN_SECRET: &str = "adminSecretAccessKey";

/// The tag of the first container's image (e.g. `17`), reported as the
/// engine version; none for an image named by digest alone, whose digest
/// says nothing of the version.
pub fn image_tag(deployment: &Value) -> Option<String> {
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"].as_str()?;
    let name = image.split('@').next()?;
    let last = name.rsplit('/').next()?;
    Some(last.split_once(':')?.1.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::strategy::parse;
    use cro_provider_api::{Options, Owner, ResourceKind};

    pub(crate) fn req() -> ResourceRequest {
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
            tag_keys: Default::default(),
            options: Options::default(),
        }
    }

    /// Postgres with the operator's default image.
    fn pg(o: &Overrides, user: &PodUser) -> Desired {
        postgres(&req(), o, DEFAULT_POSTGRES_IMAGE, None, user).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Redis with the operator's default image, as its pods' own user.
    fn rd(o: &Overrides, isolation: Option<&Isolation>) -> Desired {
        redis(&req(), o, DEFAULT_REDIS_IMAGE, isolation, &PodUser::Image)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn postgres_defaults() {
        let d = pg(&Overrides::default(), &PodUser::Image);
        let spec = &d.deployment["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["strategy"]["type"], "Recreate");
        let c = &spec["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "docker.io/library/postgres:17");
        assert!(c["readinessProbe"]["exec"].is_object());
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        for obj in [&d.deployment, &d.service, &d.pvc] {
            assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "u1");
            assert_eq!(obj["metadata"]["labels"][MANAGED_BY_LABEL], MANAGED_BY);
        }
        assert_eq!(image_tag(&d.deployment).as_deref(), Some("17"));
    }

    /// Only S3 listens beyond the pod's loopback, and every gRPC port
    /// needs the store's certificate (what reaches the pod could change
    /// its identities otherwise).
    #[test]
    fn an_object_stores_internals_stay_in_its_pod() {
        let isolated = Isolation::default();
        let d = object_store(
            &req(),
            &Overrides::default(),
            DEFAULT_OBJECT_STORE_IMAGE,
            Some(&isolated),
            &PodUser::Image,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let pod = &d.deployment["spec"]["template"]["spec"];
        let c = &pod["containers"][0];
        let args: Vec<&str> = (c["command"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        for arg in ["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-s3.ip.bind=0.0.0.0"] {
            assert!(args.contains(&arg), "{arg} in {args:?}");
        }
        let env: BTreeMap<&str, &Value> = (c["env"].as_array().into_iter().flatten())
            .filter_map(|e| Some((e["name"].as_str()?, e)))
            .collect();
        for component in ["MASTER", "VOLUME", "FILER", "S3", "CLIENT"] {
            let cert = format!("WEED_GRPC_{component}_CERT");
            assert!(env.contains_key(cert.as_str()), "{cert}");
        }
        assert_eq!(
            env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["name"],
            "db-credentials"
        );
        assert_eq!(pod["volumes"][1]["secret"]["secretName"], "db-credentials");
        let policy = d.network_policy.unwrap_or_default();
        assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], 8333);
        assert_eq!(d.service["spec"]["ports"][0]["port"], 8333);
    }

    /// The password reaches Mailpit through the kubelet's expansion, for
    /// SMTP and for its UI alike, never written in the Deployment.
    #[test]
    fn a_mail_server_asks_for_the_secrets_password_everywhere() {
        let d = mail_server(
            &req(),
            &Overrides::default(),
            DEFAULT_MAIL_SERVER_IMAGE,
            Some(&Isolation::default()),
            &PodUser::Image,
            None,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let c = &d.deployment["spec"]["template"]["spec"]["containers"][0];
        let env: BTreeMap<&str, &Value> = (c["env"].as_array().into_iter().flatten())
            .filter_map(|e| Some((e["name"].as_str()?, e)))
            .collect();
        let from = &env["MAIL_PASSWORD"]["valueFrom"]["secretKeyRef"];
        assert_eq!(
            (from["name"].as_str(), from["key"].as_str()),
            (Some("db-credentials"), Some("password"))
        );
        for var in ["MP_SMTP_AUTH", "MP_UI_AUTH"] {
            assert_eq!(env[var]["value"], "app:$(MAIL_PASSWORD)", "{var}");
        }
        assert_eq!(d.service["spec"]["ports"][0]["port"], 1025);
        assert_eq!(image_tag(&d.deployment).as_deref(), Some("v1.33.1"));
    }

    #[test]
    fn the_version_is_the_images_tag_never_its_digest() {
        let digest = format!("sha256:{}", "ab".repeat(32));
        let cases = [
            ("docker.io/library/postgres:17", Some("17")),
            ("registry.example.com:5000/postgres:16.4", Some("16.4")),
            (&format!("postgres:17@{digest}"), Some("17")),
            (&format!("docker.io/library/postgres@{digest}"), None),
            ("registry.example.com:5000/postgres", None),
        ];
        for (image, want) in cases {
            let d = json!({"spec": {"template": {"spec": {"containers": [{"image": image}]}}}});
            assert_eq!(image_tag(&d).as_deref(), want, "{image}");
        }
    }

    #[test]
    fn image_override_changes_only_the_image() {
        let o = parse(&json!({"strategy": {"deploymentSpec": {"template": {"spec": {"containers": [{"name": "postgres", "image": "postgres:16.4"}]}}}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        // Over the operator's --postgres-image too.
        let pinned = format!("mirror.example.com/postgres@sha256:{}", "ab".repeat(32));
        let d =
            postgres(&req(), &o, &pinned, None, &PodUser::Image).unwrap_or_else(|e| panic!("{e}"));
        let c = &d.deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "postgres:16.4");
        assert!(c["readinessProbe"].is_object() && c["env"].is_array());
        assert_eq!(image_tag(&d.deployment).as_deref(), Some("16.4"));
    }

    #[test]
    fn invalid_override_names_the_field() {
        let o = parse(&json!({"strategy": {"pvcSpec": {"accessModes": "ReadWriteOnce"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = postgres(&req(), &o, DEFAULT_POSTGRES_IMAGE, None, &PodUser::Image)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("strategy.pvcSpec.accessModes"), "{err}");
    }

    #[test]
    fn an_isolated_workload_admits_its_namespace_and_the_operators() {
        let isolation = Isolation {
            operator_namespace: Some("cro".into()),
        };
        let d = rd(&Overrides::default(), Some(&isolation));
        let policy = d.network_policy.unwrap_or_default();
        assert_eq!(
            policy["spec"]["ingress"][0]["from"],
            json!([{"podSelector": {}}, {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "cro"}}}])
        );
        assert_eq!(
            d.deployment["metadata"]["annotations"][ISOLATED_ANNOTATION],
            "true"
        );
        // Off in the tier: neither the policy nor the password.
        let o = parse(&json!({"strategy": {"networkPolicy": false, "redisPassword": false}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let d = rd(&o, Some(&isolation));
        assert!(d.network_policy.is_none());
        let c = &d.deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            c["command"],
            json!(["redis-server", "/etc/redis/redis.conf"])
        );
        // Made before isolation: open, as it was.
        let d = rd(&Overrides::default(), None);
        assert!(d.network_policy.is_none() && d.deployment["metadata"]["annotations"].is_null());
        let err = parse(&json!({"strategy": {"networkPolicy": "no"}}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("strategy.networkPolicy"), "{err}");
    }

    /// OpenShift's restricted-v2 admits only UIDs of the namespace's range.
    #[test]
    fn pods_run_as_the_first_uid_of_an_openshift_namespaces_range() {
        let annotations = |pairs: &[(&str, &str)]| {
            (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        let of = |pairs: &[(&str, &str)]| PodUser::of_namespace("app", &annotations(pairs));
        assert_eq!(of(&[]).ok(), Some(PodUser::Image));
        let range = of(&[
            (UID_RANGE_ANNOTATION, "1000680000/10000"),
            (GROUPS_ANNOTATION, "1000690000/10000"),
        ]);
        let want = PodUser::Range {
            uid: 1000680000,
            fs_group: 1000690000,
        };
        assert_eq!(range.ok(), Some(want.clone()));
        let d = pg(&Overrides::default(), &want);
        let context = &d.deployment["spec"]["template"]["spec"]["securityContext"];
        assert_eq!(context["runAsUser"], 1000680000);
        assert_eq!(context["fsGroup"], 1000690000);
        assert!(context.get("runAsGroup").is_none(), "{context}");
        assert_eq!(context["runAsNonRoot"], true);
        // A Deployment made so says the same (what an available one keeps).
        let deployment =
            serde_json::from_value(d.deployment.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(PodUser::of_deployment(&deployment), want);
        let image = pg(&Overrides::default(), &PodUser::Image);
        let deployment = serde_json::from_value(image.deployment).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(PodUser::of_deployment(&deployment), PodUser::Image);
        let no_groups = of(&[(UID_RANGE_ANNOTATION, "1000680000-1000689999")]);
        assert!(matches!(
            no_groups,
            Ok(PodUser::Range {
                uid: 1000680000,
                fs_group: 1000680000
            })
        ));
        let err = of(&[(UID_RANGE_ANNOTATION, "any")])
            .err()
            .map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.contains("Namespace app") && err.contains(UID_RANGE_ANNOTATION),
            "{err}"
        );
    }

    #[test]
    fn redis_config_map_merges_overrides() {
        let o = parse(&json!({"strategy": {"configMapData": {"extra.conf": "x"}}}))
            .unwrap_or_else(|e| panic!("{e}"));
        let d = rd(&o, None);
        let cm = d.config_map.unwrap_or_default();
        assert_eq!(cm["metadata"]["name"], "db-config");
        assert_eq!(cm["data"]["redis.conf"], REDIS_CONF);
        assert_eq!(cm["data"]["extra.conf"], "x");
    }
}
