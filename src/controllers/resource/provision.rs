//! Asking the provider: which provider and tier a CR is under, whether
//! the tier admits it, the snapshot a restore starts from, and the call
//! (skipped while the same inputs stay parked on an error that needs a
//! person).

use cro_provider_api::{ChangePolicy, ErrorKind, Outcome, Provider, ResourceKind};
use kube::{Resource, ResourceExt};

use super::request::{annotation, request};
use crate::{
    api::{Phase, PostgresSnapshot, RedisSnapshot},
    config::{self, ConfigReader},
    controllers::{
        kinds::{ResourceCr, SnapshotCr},
        rotation,
    },
    reconcile::{Context, Error, inputs, unless_parked},
};

/// The provider name: sticky once recorded in `status.strategy`.
pub async fn provider_name<K: ResourceCr>(cr: &K, config: &ConfigReader) -> Result<String, Error> {
    if let Some(s) = cr
        .status()
        .and_then(|s| s.strategy.clone())
        .filter(|s| !s.is_empty())
    {
        return Ok(s);
    }
    let ns = cr.namespace().unwrap_or_default();
    Ok(config::provider_for(config, &ns, &cr.spec().r#type, K::KIND).await?)
}

pub fn provider<'a>(ctx: &'a Context, name: &str) -> Result<&'a dyn Provider, Error> {
    ctx.providers.get(name).map(|p| p.as_ref()).ok_or_else(|| {
        Error::Invalid(format!(
            "provider {name:?} is not available in this operator (available: {}); map the deployment type to one of those in cloud-resource-config",
            ctx.providers.keys().copied().collect::<Vec<_>>().join(", ")
        ))
    })
}

/// Where the snapshot `spec.restoreFromSnapshot` names stands.
enum RestoreSource {
    /// Complete: the cloud snapshot's identifier.
    Ready(String),
    /// Missing or not complete yet: what the resource waits for.
    Waiting(String),
}

/// The cloud snapshot `spec.restoreFromSnapshot` names, for a resource
/// not created yet; an error that needs a person when it is of the other
/// engine or the provider cannot restore.
async fn restore_source<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    provider_name: &str,
    name: &str,
) -> Result<RestoreSource, Error> {
    if !provider(ctx, provider_name)?.takes_snapshots() {
        return Err(Error::Invalid(format!(
            "spec.restoreFromSnapshot is set, but provider {provider_name:?} takes no snapshots and cannot restore one (see spec.type in cloud-resource-config); remove spec.restoreFromSnapshot or use a type whose provider takes snapshots"
        )));
    }
    let ns = cr.namespace().unwrap_or_default();
    match K::KIND {
        ResourceKind::Redis => {
            restore_from::<RedisSnapshot, PostgresSnapshot>(ctx, &ns, name).await
        }
        _ => restore_from::<PostgresSnapshot, RedisSnapshot>(ctx, &ns, name).await,
    }
}

/// Where the `Own` snapshot `ns/name` stands; an error when there is none
/// but one of the `Other` engine.
async fn restore_from<Own: SnapshotCr, Other: SnapshotCr>(
    ctx: &Context,
    ns: &str,
    name: &str,
) -> Result<RestoreSource, Error> {
    let (own, other) = (Own::kind(&()), Other::kind(&()));
    let read = |kind| Error::kube(format!("reading {kind} {ns}/{name}"));
    let own_api = kube::Api::<Own>::namespaced(ctx.client.clone(), ns);
    let Some(snapshot) = own_api.get_opt(name).await.map_err(read(&own))? else {
        let other_api = kube::Api::<Other>::namespaced(ctx.client.clone(), ns);
        if other_api
            .get_opt(name)
            .await
            .map_err(read(&other))?
            .is_some()
        {
            let parent = Own::Parent::kind(&());
            return Err(Error::Invalid(format!(
                "spec.restoreFromSnapshot names {name}, a {other} of another engine; a {parent} restores from a {own} only"
            )));
        }
        return Ok(RestoreSource::Waiting(format!(
            "waiting for {own} {name} (spec.restoreFromSnapshot) to exist"
        )));
    };
    let status = snapshot.status();
    let phase = status.and_then(|s| s.phase);
    match status.and_then(|s| s.snapshot_id.as_deref()) {
        Some(id) if phase == Some(Phase::Complete) && !id.is_empty() => {
            Ok(RestoreSource::Ready(id.to_string()))
        }
        _ => Ok(RestoreSource::Waiting(format!(
            "waiting for {own} {name} (spec.restoreFromSnapshot) to be complete (it is {})",
            phase.map_or("not started", Phase::as_str)
        ))),
    }
}

/// Refuses a tier whose `allowedNamespaces` / `allowedNamespaceSelector`
/// do not admit `namespace` (a tier may hold a production account's role).
pub(crate) async fn admitted(
    ctx: &Context,
    tier: &config::Tier,
    namespace: &str,
    provider: &str,
    kind: ResourceKind,
    tier_name: &str,
) -> Result<(), Error> {
    let Some(access) = &tier.access else {
        return Ok(());
    };
    if access.admits_name(namespace) {
        return Ok(());
    }
    if access.has_selector() {
        let ns = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(ctx.client.clone())
            .get(namespace)
            .await
            .map_err(Error::kube(format!(
                "reading Namespace {namespace} for the tier's allowedNamespaceSelector"
            )))?;
        if access.admits_labels(ns.labels()) {
            return Ok(());
        }
    }
    Err(config::ConfigError::TierRefused {
        at: format!("ConfigMap {}", config::strategies_config_map(provider)),
        resource: kind.config_key().to_string(),
        tier: tier_name.to_string(),
        namespace: namespace.to_string(),
        admits: access.describe(),
    }
    .into())
}

/// Whether `cr` asks for no more than its tier allows (see `config::limits`).
fn within_limits<K: ResourceCr>(cr: &K, tier: &config::Tier, provider: &str) -> Result<(), Error> {
    let spec = cr.spec();
    let asked = config::limits::Asked {
        snapshot_frequency: spec.snapshot_frequency.as_ref(),
        snapshot_retention: spec.snapshot_retention.as_ref(),
        size: spec.size.as_deref(),
    };
    let Some(error) = tier.limits.exceeded(&asked) else {
        return Ok(());
    };
    Err(config::ConfigError::TierLimit {
        at: format!("ConfigMap {}", config::strategies_config_map(provider)),
        resource: K::KIND.config_key().to_string(),
        tier: spec.tier.clone(),
        error,
    }
    .into())
}

/// The provider's answer, with the tier's change policy, the credential
/// rotation that was asked for, and the identifier the request named
/// (the plan hash of its pending changes is bound to it).
pub(super) struct Answer {
    pub provisioned: cro_provider_api::Provisioned,
    pub policy: ChangePolicy,
    pub rotation: Option<String>,
    pub identifier: String,
}

/// Asks the provider for the resource, unless the same inputs just failed
/// for a reason that needs a person; with the tier's change policy and the
/// credential rotation asked for.
/// `first_look`: this process has not reconciled the CR before.
pub(super) async fn provision<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    provider_name: &str,
    first_look: bool,
) -> Result<Answer, Error> {
    let tier_name = &cr.spec().tier;
    let tier = config::tier_strategy(&ctx.config, provider_name, K::KIND, tier_name).await?;
    let namespace = cr.namespace().unwrap_or_default();
    admitted(ctx, &tier, &namespace, provider_name, K::KIND, tier_name).await?;
    within_limits(cr, &tier, provider_name)?;
    let policy = tier.change_policy;
    let inputs = (
        cr.spec(),
        cr.annotations(),
        cr.labels(),
        &tier.strategy,
        policy == ChangePolicy::Plan,
        provider_name,
    );
    let mut req = request(cr, &ctx.settings, tier.clone());
    req.options.rotate_credentials = rotation_due(cr, tier.rotate_every);
    let rotation = req.options.rotate_credentials.clone();
    if let Some(name) = cr.restore_from_snapshot()
        && req.recorded_identifier.is_none()
    {
        match restore_source::<K>(cr, ctx, provider_name, name).await? {
            RestoreSource::Ready(snapshot_id) => req.restore_from_snapshot = Some(snapshot_id),
            RestoreSource::Waiting(waiting) => {
                return Ok(waiting_for_source(cr, waiting, policy, req.identifier));
            }
        }
    }
    // A CR changed since its last reconcile (an edit, a poke) is looked at
    // afresh; a recheck or a restart may use a batched observation.
    let observed = cr.status().and_then(|s| s.observed_inputs.as_deref());
    if !inputs::answered(cr, observed) {
        req.options.observed_within = None;
    }
    req.options.defer_unbatched = req.options.observed_within.is_some() && first_look;
    let provisioned = unless_parked(ctx, cr, &inputs, async {
        provider(ctx, provider_name)?
            .reconcile(&req)
            .await
            .map_err(|e| with_tier_location(e, provider_name, K::KIND, tier_name))
    })
    .await?;
    Ok(Answer {
        provisioned,
        policy,
        rotation,
        identifier: req.identifier,
    })
}

/// The rotation token due now, if any: asked for in the CR's annotation,
/// or its tier's `rotateCredentialsEvery` has passed.
fn rotation_due<K: ResourceCr>(cr: &K, rotate_every: Option<u64>) -> Option<String> {
    rotation::due(
        annotation(cr, rotation::ROTATE_ANNOTATION).as_deref(),
        cr.status().and_then(|s| s.credentials_rotation.as_ref()),
        cr.meta().creation_timestamp.as_ref().map(|t| t.0),
        rotate_every,
        k8s_openapi::jiff::Timestamp::now(),
    )
}

/// The answer while the snapshot to restore from is not ready: nothing is
/// provisioned yet, so status keeps the provider it had.
fn waiting_for_source<K: ResourceCr>(
    cr: &K,
    waiting: String,
    policy: ChangePolicy,
    identifier: String,
) -> Answer {
    let service = cr.status().and_then(|s| s.provider.clone());
    let outcome = Outcome::InProgress(waiting);
    Answer {
        provisioned: cro_provider_api::Provisioned::new(&service.unwrap_or_default(), outcome),
        policy,
        rotation: None,
        identifier,
    }
}

/// A tier problem is reported with where the tier lives, so the message
/// says which ConfigMap, key and tier to change.
fn with_tier_location(
    e: cro_provider_api::ProviderError,
    provider: &str,
    kind: ResourceKind,
    tier: &str,
) -> Error {
    let location = format!(
        "ConfigMap {} key {:?} tier {tier:?}",
        config::strategies_config_map(provider),
        kind.config_key()
    );
    match e.kind() {
        ErrorKind::InvalidStrategy => e.context(location).into(),
        ErrorKind::Permanent => {
            let message = format!("{} (the resource's tier: {location})", e.message());
            cro_provider_api::ProviderError::permanent(message)
                .with_source(e)
                .into()
        }
        ErrorKind::Transient
        | ErrorKind::NotVisibleYet
        | ErrorKind::Throttled
        | ErrorKind::NamespaceTerminating
        | ErrorKind::ApiServerUnavailable => e.into(),
    }
}
