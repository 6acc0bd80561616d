//! `cloud-resource-operator status -n NS KIND/NAME` (also `kubectl cro
//! status`): one CR's state in one place — phase and conditions, provider,
//! cloud identifier and the cloud's own view, the Secret's keys (never its
//! values), owned objects, pending changes, recent Events, and what to
//! change. Read-only: nothing is written to the cluster or the cloud.

mod render;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Event, PersistentVolumeClaim, Secret, Service},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{ApiResource, DynamicObject, ListParams},
};
use serde::Serialize;

use crate::{
    api::{
        self, BlobStorage, PendingChange, Postgres, Redis, ResourceTypeStatus, SMTPCredentialSet,
        SnapshotStatus,
    },
    cli::plan::Scope,
    config,
    controllers::{
        kinds::ResourceCr,
        resource::{provider_name, request},
    },
    reconcile::conditions::{self, ConditionType},
};

pub use render::text;

/// Events shown, newest last.
const EVENTS_SHOWN: usize = 10;

/// What `status` says of one CR; `-o json` prints it as is.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `spec.type` and `spec.tier`; a snapshot's `spec.resourceName`.
    pub r#type: Option<String>,
    pub tier: Option<String>,
    pub resource_name: Option<String>,
    pub phase: Option<String>,
    pub message: Option<String>,
    /// `metadata.generation`, and the one the status describes.
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    pub deleting: bool,
    pub finalizers: Vec<String>,
    pub conditions: Vec<ConditionLine>,
    /// `status.strategy` (`aws`, `openshift`) and `status.provider`
    /// (`aws-rds`, ...).
    pub strategy: Option<String>,
    pub provider: Option<String>,
    /// The `resourceIdentifier` annotation, or a snapshot's `snapshotID`.
    pub cloud_identifier: Option<String>,
    /// The cloud's own view (read-only calls), or why it was not read.
    pub cloud: Option<String>,
    pub secret: Option<SecretLine>,
    pub owned: Vec<String>,
    pub pending_changes: Vec<PendingChange>,
    pub plan_hash: Option<String>,
    pub adoption_hash: Option<String>,
    pub skip_create: bool,
    pub events: Vec<EventLine>,
    /// What a person does next, when anything.
    pub next_steps: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    pub r#type: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    /// Since its last transition, e.g. `5m`.
    pub age: String,
}

impl ConditionLine {
    /// Whether this is a condition of type `t` whose status is `holds`.
    pub fn is(&self, t: ConditionType, holds: bool) -> bool {
        self.r#type == t.as_str() && self.status == conditions::status_of(holds)
    }
}

/// The output Secret: where it is and its keys, never the values.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretLine {
    pub namespace: String,
    pub name: String,
    pub exists: bool,
    pub keys: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    pub age: String,
    pub r#type: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// The six kinds, as `kubectl` would accept them (kind, plural, singular,
/// any case).
pub fn kind_of(name: &str) -> Option<ApiResource> {
    api::crds().into_iter().find_map(|crd| {
        let n = &crd.spec.names;
        let wanted = name.to_lowercase();
        let matches = [Some(&n.kind), Some(&n.plural), n.singular.as_ref()]
            .into_iter()
            .flatten()
            .any(|s| s.to_lowercase() == wanted);
        matches.then(|| ApiResource {
            group: api::GROUP.into(),
            version: api::VERSION.into(),
            api_version: format!("{}/{}", api::GROUP, api::VERSION),
            kind: n.kind.clone(),
            plural: n.plural.clone(),
        })
    })
}

/// Why `status` could not explain the CR.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(
        "{0:?} is not KIND/NAME: write e.g. postgres/orders-db (kinds: postgres, redis, blobstorage, smtpcredentialset, postgressnapshot, redissnapshot)"
    )]
    Target(String),
    #[error(
        "unknown kind {0:?}: one of postgres, redis, blobstorage, smtpcredentialset, postgressnapshot, redissnapshot"
    )]
    Kind(String),
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        kind: String,
        namespace: String,
        name: String,
    },
    #[error("reading {what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// `KIND/NAME` into the kind and the name.
pub fn target(text: &str) -> Result<(ApiResource, String), StatusError> {
    let Some((kind, name)) = text
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
    else {
        return Err(StatusError::Target(text.into()));
    };
    let kind = kind.split('.').next().unwrap_or(kind);
    let resource = kind_of(kind).ok_or_else(|| StatusError::Kind(kind.into()))?;
    Ok((resource, name.into()))
}

fn as_text(v: &serde_json::Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// What a snapshot CR's spec and status say.
fn snapshot_fields(report: &mut Report, spec: &serde_json::Value, status: serde_json::Value) {
    report.resource_name = as_text(&spec["resourceName"]);
    let s: SnapshotStatus = serde_json::from_value(status).unwrap_or_default();
    report.phase = s.phase.map(|p| p.as_str().to_string());
    report.message = s.message;
    report.observed_generation = s.observed_generation;
    report.strategy = s.strategy;
    report.cloud_identifier = s.snapshot_id;
    report.conditions = conditions(&s.conditions);
}

/// What a resource CR's spec and status say; the Secret it names (status
/// first, as the Go operator records it there).
fn resource_fields(
    report: &mut Report,
    spec: &serde_json::Value,
    status: serde_json::Value,
) -> Option<api::SecretRef> {
    report.r#type = as_text(&spec["type"]);
    report.tier = as_text(&spec["tier"]);
    report.skip_create = spec["skipCreate"].as_bool().unwrap_or(false);
    let s: ResourceTypeStatus = serde_json::from_value(status).unwrap_or_default();
    report.phase = s.phase.map(|p| p.as_str().to_string());
    report.message = s.message;
    report.observed_generation = s.observed_generation;
    report.strategy = s.strategy;
    report.provider = s.provider;
    report.conditions = conditions(&s.conditions);
    report.pending_changes = s.pending_changes;
    report.plan_hash = s.plan_hash;
    report.adoption_hash = s.adoption_hash;
    s.secret_ref
        .or_else(|| serde_json::from_value::<api::SecretRef>(spec["secretRef"].clone()).ok())
}

/// Everything `status` shows of `kind/name` in `namespace`. `cloud` is how
/// the operator would reach the cloud (its ConfigMaps and providers);
/// `None` leaves the cloud unread, for the reason given.
pub async fn gather(
    client: &Client,
    (resource, namespace, name): (&ApiResource, &str, &str),
    cloud: Result<&Scope<'_>, &str>,
) -> Result<Report, StatusError> {
    let kube = |what: String| move |source| StatusError::Kube { what, source };
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, resource);
    let what = format!("{} {namespace}/{name}", resource.kind);
    let Some(obj) = api.get_opt(name).await.map_err(kube(what.clone()))? else {
        return Err(StatusError::NotFound {
            kind: resource.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
        });
    };
    let mut report = Report {
        kind: resource.kind.clone(),
        namespace: namespace.into(),
        name: name.into(),
        generation: obj.metadata.generation,
        deleting: obj.metadata.deletion_timestamp.is_some(),
        finalizers: obj.finalizers().to_vec(),
        cloud_identifier: obj
            .annotations()
            .get(api::RESOURCE_IDENTIFIER_ANNOTATION)
            .cloned(),
        ..Report::default()
    };
    let status = obj.data.get("status").cloned().unwrap_or_default();
    if resource.kind.ends_with("Snapshot") {
        snapshot_fields(&mut report, &obj.data["spec"], status);
    } else {
        let secret_ref = resource_fields(&mut report, &obj.data["spec"], status);
        if let Some(r) = secret_ref {
            let ns = r.namespace.filter(|n| !n.is_empty());
            let ns = ns.unwrap_or_else(|| namespace.to_string());
            report.secret = Some(secret(client, &ns, &r.name).await?);
        }
        report.cloud = Some(match cloud {
            Ok(scope) => cloud_state(&obj, scope).await,
            Err(why) => format!("not read: {why}"),
        })
        .filter(|c| !c.is_empty());
    }
    if let Some(uid) = obj.uid() {
        report.owned = owned(client, namespace, &uid).await?;
        report.events = events(client, namespace, &uid).await?;
    }
    report.next_steps = render::next_steps(&report);
    Ok(report)
}

fn conditions(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Vec<ConditionLine> {
    conditions
        .iter()
        .map(|c| ConditionLine {
            r#type: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
            age: render::age(Some(c.last_transition_time.0)),
        })
        .collect()
}

async fn secret(client: &Client, namespace: &str, name: &str) -> Result<SecretLine, StatusError> {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let found = (api.get_opt(name).await).map_err(|source| StatusError::Kube {
        what: format!("Secret {namespace}/{name}"),
        source,
    })?;
    Ok(SecretLine {
        namespace: namespace.into(),
        name: name.into(),
        exists: found.is_some(),
        keys: found
            .and_then(|s| s.data)
            .map(|d| d.into_keys().collect())
            .unwrap_or_default(),
    })
}

/// The cloud's view through the CR's provider; an error is shown, not
/// fatal: the cluster's side is worth reading without it.
async fn cloud_state(obj: &DynamicObject, scope: &Scope<'_>) -> String {
    let read = match obj.types.as_ref().map(|t| t.kind.as_str()) {
        Some("Postgres") => typed::<Postgres>(obj, scope).await,
        Some("Redis") => typed::<Redis>(obj, scope).await,
        Some("BlobStorage") => typed::<BlobStorage>(obj, scope).await,
        Some("SMTPCredentialSet") => typed::<SMTPCredentialSet>(obj, scope).await,
        _ => Ok(None),
    };
    match read {
        Ok(state) => state.unwrap_or_default(),
        Err(why) => format!("could not be read: {why}"),
    }
}

/// Why the cloud's view of a CR could not be read.
#[derive(Debug, thiserror::Error)]
enum CloudReadError {
    #[error("the CR does not read as its kind: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("{0}")]
    Resolve(#[from] crate::reconcile::Error),
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("provider {0:?} is not available to this command")]
    Unavailable(String),
    #[error("{0}")]
    Provider(#[from] cro_provider_api::ProviderError),
}

async fn typed<K: ResourceCr>(
    obj: &DynamicObject,
    scope: &Scope<'_>,
) -> Result<Option<String>, CloudReadError> {
    let cr: K = serde_json::from_value(serde_json::to_value(obj)?)?;
    let provider = provider_name(&cr, scope.config).await?;
    let tier = config::tier_strategy(scope.config, &provider, K::KIND, &cr.spec().tier).await?;
    let Some(p) = scope.providers.get(provider.as_str()) else {
        return Err(CloudReadError::Unavailable(provider));
    };
    let req = request(&cr, scope.settings, tier);
    Ok(p.cloud_state(&req).await?)
}

/// The objects the operator made for the CR: they carry its UID as a label.
async fn owned(client: &Client, namespace: &str, uid: &str) -> Result<Vec<String>, StatusError> {
    let selector = format!("{}={uid}", cro_provider_api::OWNER_UID_LABEL);
    let mut out = Vec::new();
    out.extend(names::<Deployment>(client, namespace, &selector).await?);
    out.extend(names::<Service>(client, namespace, &selector).await?);
    out.extend(names::<PersistentVolumeClaim>(client, namespace, &selector).await?);
    out.extend(names::<Secret>(client, namespace, &selector).await?);
    out.extend(names::<ConfigMap>(client, namespace, &selector).await?);
    Ok(out)
}

async fn names<K>(
    client: &Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<String>, StatusError>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let kind = K::kind(&()).to_string();
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let listed = (api
        .list_metadata(&ListParams::default().labels(selector))
        .await)
        .map_err(|source| StatusError::Kube {
            what: format!("the {kind}s in {namespace}"),
            source,
        })?;
    Ok(listed
        .items
        .iter()
        .map(|o| format!("{kind}/{}", o.name_any()))
        .collect())
}

/// The CR's last Events, oldest first.
async fn events(
    client: &Client,
    namespace: &str,
    uid: &str,
) -> Result<Vec<EventLine>, StatusError> {
    let api = Api::<Event>::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
    let listed = (api.list(&params).await).map_err(|source| StatusError::Kube {
        what: format!("the Events in {namespace}"),
        source,
    })?;
    let mut events: Vec<(Option<Timestamp>, EventLine)> = listed
        .items
        .into_iter()
        .map(|e| {
            let at = e
                .series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
                .or(e.last_timestamp.as_ref().map(|t| t.0))
                .or(e.event_time.as_ref().map(|t| t.0))
                .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0));
            let count = e.series.as_ref().and_then(|s| s.count).or(e.count);
            (
                at,
                EventLine {
                    age: render::age(at),
                    r#type: e.type_.unwrap_or_default(),
                    reason: e.reason.unwrap_or_default(),
                    message: e.message.unwrap_or_default(),
                    count: count.unwrap_or(1),
                },
            )
        })
        .collect();
    events.sort_by_key(|(at, _)| *at);
    let skip = events.len().saturating_sub(EVENTS_SHOWN);
    Ok(events.into_iter().skip(skip).map(|(_, e)| e).collect())
}
