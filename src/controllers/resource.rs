//! Postgres, Redis, BlobStorage and SMTPCredentialSet: resolve the
//! provider and tier, ask the provider, publish the connection Secret.

use std::{collections::BTreeMap, time::Duration};

use cro_provider_api::{
    Adoption, Change, ChangePolicy, Deletion, ErrorKind, Options, Outcome, Owner, Provider,
    ResourceKind, ResourceRequest, cloud_identifier, plan_hash, timestamped_identifier,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use crate::{
    api::{
        ADOPT_ANNOTATION, APPROVE_PLAN_ANNOTATION, BlobStorage, PendingChange, Phase, Postgres,
        PostgresSnapshot, RESOURCE_IDENTIFIER_ANNOTATION, Redis, RedisSnapshot, ResourceTypeStatus,
        SMTPCredentialSet, SecretRef,
    },
    config::{self, ConfigReader},
    connectivity::{self, Changed},
    controllers::{
        kinds::{ResourceCr, SnapshotCr},
        rotation,
    },
    reconcile::{
        Context, Error, Managed, Report, Settings, in_progress_requeue, key, metric_labels,
        output_secret::{self, Target, Written},
        unless_parked,
    },
};

/// Label whose value becomes the `product-name` tag (as in the Go operator).
pub const PRODUCT_NAME_LABEL: &str = "productName";

/// A non-empty annotation of `cr`.
fn annotation<K: Resource>(cr: &K, key: &str) -> Option<String> {
    cr.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn recorded_identifier<K: Resource>(cr: &K) -> Option<String> {
    annotation(cr, RESOURCE_IDENTIFIER_ANNOTATION)
}

// The skeleton's view of each kind: its status, and this module's
// reconcile and cleanup.

#[async_trait::async_trait]
impl Managed for Postgres {
    type Status = ResourceTypeStatus;
    fn status(&self) -> Option<&ResourceTypeStatus> {
        self.status.as_ref()
    }
    fn skip_create(&self) -> bool {
        self.spec.resource.skip_create
    }
    fn tier(&self) -> Option<&str> {
        Some(&self.spec.resource.tier)
    }
    async fn reconcile(&self, ctx: &Context) -> Result<(Report, Option<Duration>), Error> {
        reconcile(self, ctx).await
    }
    async fn cleanup(&self, ctx: &Context) -> Result<Deletion, Error> {
        cleanup(self, ctx).await
    }
}

#[async_trait::async_trait]
impl Managed for Redis {
    type Status = ResourceTypeStatus;
    fn status(&self) -> Option<&ResourceTypeStatus> {
        self.status.as_ref()
    }
    fn skip_create(&self) -> bool {
        self.spec.resource.skip_create
    }
    fn tier(&self) -> Option<&str> {
        Some(&self.spec.resource.tier)
    }
    async fn reconcile(&self, ctx: &Context) -> Result<(Report, Option<Duration>), Error> {
        reconcile(self, ctx).await
    }
    async fn cleanup(&self, ctx: &Context) -> Result<Deletion, Error> {
        cleanup(self, ctx).await
    }
}

#[async_trait::async_trait]
impl Managed for BlobStorage {
    type Status = ResourceTypeStatus;
    fn status(&self) -> Option<&ResourceTypeStatus> {
        self.status.as_ref()
    }
    fn skip_create(&self) -> bool {
        self.spec.resource.skip_create
    }
    fn tier(&self) -> Option<&str> {
        Some(&self.spec.resource.tier)
    }
    async fn reconcile(&self, ctx: &Context) -> Result<(Report, Option<Duration>), Error> {
        reconcile(self, ctx).await
    }
    async fn cleanup(&self, ctx: &Context) -> Result<Deletion, Error> {
        cleanup(self, ctx).await
    }
}

#[async_trait::async_trait]
impl Managed for SMTPCredentialSet {
    type Status = ResourceTypeStatus;
    fn status(&self) -> Option<&ResourceTypeStatus> {
        self.status.as_ref()
    }
    fn skip_create(&self) -> bool {
        self.spec.resource.skip_create
    }
    fn tier(&self) -> Option<&str> {
        Some(&self.spec.resource.tier)
    }
    async fn reconcile(&self, ctx: &Context) -> Result<(Report, Option<Duration>), Error> {
        reconcile(self, ctx).await
    }
    async fn cleanup(&self, ctx: &Context) -> Result<Deletion, Error> {
        cleanup(self, ctx).await
    }
}

/// The `UpToDate` condition: whether the live resource matches its tier,
/// and if not, what differs, when each difference applies and, under a
/// `Plan` tier, how to approve them.
fn up_to_date(
    pending: &[PendingChange],
    hash: &str,
    policy: ChangePolicy,
    approved: Option<&str>,
) -> cro_provider_api::Condition {
    let condition = |status, reason: &str, message| cro_provider_api::Condition {
        type_: "UpToDate".into(),
        status,
        reason: reason.into(),
        message,
    };
    if pending.is_empty() {
        return condition(true, "UpToDate", "the resource matches its tier".into());
    }
    let list: Vec<String> = pending
        .iter()
        .map(|c| format!("{} {} -> {} ({})", c.field, c.current, c.desired, c.when))
        .collect();
    let differences = format!(
        "{} difference(s) from the tier: {}",
        pending.len(),
        list.join("; ")
    );
    match (policy, approved) {
        (ChangePolicy::Automatic, _) => condition(
            false,
            "PendingChanges",
            format!(
                "{differences}; disruptive ones apply with spec.maintenanceWindow (in the cloud's next maintenance window) or spec.applyImmediately"
            ),
        ),
        (ChangePolicy::Plan, Some(stale)) if stale != hash => condition(
            false,
            "StaleApproval",
            format!(
                "{differences}; nothing was applied: {APPROVE_PLAN_ANNOTATION} is {stale:?}, not this plan's hash {hash:?} (the changes differ from the ones approved); review them and set the annotation to {hash:?} to apply them"
            ),
        ),
        (ChangePolicy::Plan, _) => condition(
            false,
            "AwaitingApproval",
            format!(
                "{differences}; the tier's changePolicy is Plan: annotate the resource with {APPROVE_PLAN_ANNOTATION}={hash} to apply them"
            ),
        ),
    }
}

/// Status of a usable resource's differences from its tier: the list, the
/// hash that approves them, and the `UpToDate` condition; then the
/// maintenance the cloud has pending for it, which is the cloud's, not
/// the tier's: listed, never part of the plan or of `UpToDate`.
fn report_pending(
    report: &mut Report,
    pending: Vec<Change>,
    policy: ChangePolicy,
    approved: Option<String>,
) {
    let hash = plan_hash(&pending);
    report.pending = pending.into_iter().map(pending_change).collect();
    let condition = up_to_date(&report.pending, &hash, policy, approved.as_deref());
    report.conditions.push(condition);
    report.plan_hash = (!report.pending.is_empty()).then_some(hash);
    let maintenance = (report.health.as_ref()).and_then(|h| h.maintenance.as_deref());
    report.pending.extend(
        maintenance
            .unwrap_or_default()
            .iter()
            .map(pending_maintenance),
    );
}

/// A maintenance action the cloud has pending, as `status.pendingChanges`
/// lists it.
fn pending_maintenance(m: &cro_provider_api::Maintenance) -> PendingChange {
    let due = m
        .due
        .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t).ok());
    PendingChange {
        field: format!("maintenance {}", m.name),
        current: m.description.clone(),
        desired: "applied".into(),
        when: match due {
            Some(at) => format!("by the cloud provider, due {at}"),
            None => "by the cloud provider, when opted in (no date set)".into(),
        },
        restarts: false,
    }
}

/// The `Adopted` condition: `False` while a cloud resource someone else
/// made waits for a person to adopt it; `True` once adopted (only shown
/// when it was `False` before).
fn adopted(
    adoption: Option<&Adoption>,
    previous: &[Condition],
) -> Option<cro_provider_api::Condition> {
    let condition = |status, reason: &str, message| cro_provider_api::Condition {
        type_: "Adopted".into(),
        status,
        reason: reason.into(),
        message,
    };
    let Some(a) = adoption else {
        return previous
            .iter()
            .any(|c| c.type_ == "Adopted" && c.status == "False")
            .then(|| condition(true, "Adopted", "the cloud resource was adopted".into()));
    };
    let list: Vec<String> = a
        .changes
        .iter()
        .map(|c| format!("{} {} -> {}", c.field, c.current, c.desired))
        .collect();
    Some(condition(
        false,
        "AwaitingAdoption",
        format!(
            "a cloud resource already exists under this resource's identifier without this cluster's clusterID tag; it is neither changed nor deleted until adopted. Adopting it changes: {}; to adopt it, annotate the resource with {ADOPT_ANNOTATION}={}",
            list.join("; "),
            a.hash
        ),
    ))
}

fn pending_change(c: cro_provider_api::Change) -> PendingChange {
    PendingChange {
        field: c.field,
        current: c.current,
        desired: c.desired,
        when: c.timing.describe(),
        restarts: c.restarts,
    }
}

/// The Go operator's contract: once the changes a maintenance window
/// allowed were requested, `spec.maintenanceWindow` goes back to false.
/// Guarded by a `test`, so a person's concurrent edit is never overwritten.
async fn close_maintenance_window<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<(), Error> {
    let api: kube::Api<K> =
        kube::Api::namespaced(ctx.client.clone(), &cr.namespace().unwrap_or_default());
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/spec/maintenanceWindow", "value": true},
        {"op": "replace", "path": "/spec/maintenanceWindow", "value": false}
    ]))
    .map_err(|e| Error::Internal(format!("building the maintenanceWindow patch: {e}")))?;
    let closed = api
        .patch(
            &cr.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::<()>::Json(patch),
        )
        .await
        .map_err(Error::kube(format!(
            "setting spec.maintenanceWindow of {} back to false",
            cr.name_any()
        )))?;
    ctx.wrote(&key(cr), closed.resource_version());
    Ok(())
}

/// The neutral description of `cr` handed to providers.
pub fn owner<K: Resource<DynamicType = ()>>(cr: &K) -> Owner {
    Owner {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: cr.meta().name.clone().unwrap_or_default(),
        uid: cr.meta().uid.clone().unwrap_or_default(),
    }
}

/// The tag that marks a cloud resource this cluster made.
fn owner_tag(settings: &Settings) -> (String, String) {
    (
        format!("{}clusterID", settings.tag_key_prefix),
        settings.cluster_id.clone(),
    )
}

/// The tag binding a cloud resource to the CR's namespace, written when
/// the resource is made (see `ResourceRequest::namespace_tag`).
pub fn namespace_tag(settings: &Settings, namespace: &str) -> (String, String) {
    (
        format!("{}resource-namespace", settings.tag_key_prefix),
        namespace.to_string(),
    )
}

/// Tags for cloud resources (DESIGN §4).
pub fn tags<K: Resource>(
    settings: &Settings,
    cr: &K,
    deployment_type: &str,
) -> BTreeMap<String, String> {
    let p = &settings.tag_key_prefix;
    let mut tags = settings.extra_tags.clone();
    tags.extend([owner_tag(settings)]);
    tags.insert(format!("{p}resource-type"), deployment_type.to_string());
    tags.insert(
        format!("{p}resource-name"),
        cr.meta().name.clone().unwrap_or_default(),
    );
    if let Some(product) = cr
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(PRODUCT_NAME_LABEL))
    {
        tags.insert(format!("{p}product-name"), product.clone());
    }
    // The Go operator's MergeTags(infraTags, defaultTags): the
    // Infrastructure's tags win (pkg/resources/tags.go).
    tags.extend(settings.infrastructure_tags.clone());
    tags
}

fn secret_namespace<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<String, Error> {
    let ns = cr.namespace().unwrap_or_default();
    let wanted = cr
        .spec()
        .secret_ref
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| ns.clone());
    if wanted != ns && !ctx.settings.allow_cross_namespace_secrets {
        return Err(Error::Invalid(format!(
            "spec.secretRef.namespace {wanted:?} is not this {}'s namespace {ns:?}, and writing Secrets into other namespaces is disabled; remove spec.secretRef.namespace, or start the operator with --allow-cross-namespace-secrets",
            K::kind(&())
        )));
    }
    Ok(wanted)
}

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

/// How old a batched observation of a complete resource may be (never
/// older than the recheck interval). Resources whose rechecks fall within
/// it share one: at most one listing a minute per service, account and
/// region, so at most one call per resource and hour whatever their number
/// (≤ 60 listings of ⌈N/100⌉ pages for N resources).
pub const BATCHED_OBSERVATION_AGE: Duration = Duration::from_secs(60);

/// What the provider is asked for `cr` under `tier`.
pub fn request<K: ResourceCr>(cr: &K, settings: &Settings, tier: config::Tier) -> ResourceRequest {
    let ns = cr.namespace().unwrap_or_default();
    let name = cr.name_any();
    let spec = cr.spec();
    let recorded = recorded_identifier(cr);
    let namespace_tag = namespace_tag(settings, &ns);
    ResourceRequest {
        kind: K::KIND,
        // The provider acts on the recorded one only if it is this CR's own.
        identifier: cloud_identifier(&settings.cluster_id, &ns, &name),
        recorded_identifier: recorded,
        // Resolved from the snapshot CR by `provision`.
        restore_from_snapshot: None,
        final_snapshot_identifier: final_snapshot_identifier(cr, settings),
        namespace: ns,
        name,
        owner: owner(cr),
        tier: spec.tier.clone(),
        strategy: tier.strategy,
        network: tier.network,
        tags: tags(settings, cr, &spec.r#type),
        owner_tag: owner_tag(settings),
        namespace_tag,
        options: Options {
            apply_immediately: spec.apply_immediately,
            maintenance_window: spec.maintenance_window,
            change_policy: tier.change_policy,
            approved_plan: annotation(cr, APPROVE_PLAN_ANNOTATION),
            approved_adoption: annotation(cr, ADOPT_ANNOTATION),
            size: spec.size.clone(),
            observed_within: (cr.status().and_then(|s| s.phase) == Some(Phase::Complete))
                .then(|| settings.recheck_interval.min(BATCHED_OBSERVATION_AGE)),
            recheck_interval: settings.recheck_interval,
            // Decided by `provision` (from what this process has seen).
            defer_unbatched: false,
            // Decided by `provision` (from status and the clock).
            rotate_credentials: None,
            rotation_grace: Duration::from_secs(tier.rotation_grace),
        },
    }
}

/// Once deletion started: `<clusterID>-<namespace>-<name>-<unix time>`
/// shortened, as the Go operator names final snapshots
/// (`BuildTimestampedInfraNameFromObject`, pkg/resources/config.go), with
/// the deletion's time rather than the clock's, so retries of one deletion
/// agree and another deletion of the same name never collides.
fn final_snapshot_identifier<K: ResourceCr>(cr: &K, settings: &Settings) -> Option<String> {
    let deleted = cr.meta().deletion_timestamp.as_ref()?;
    Some(timestamped_identifier(
        &settings.cluster_id,
        &cr.namespace().unwrap_or_default(),
        &cr.name_any(),
        &deleted.0.as_second().to_string(),
    ))
}

async fn reconcile<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
) -> Result<(Report, Option<Duration>), Error> {
    let secret_ns = secret_namespace(cr, ctx)?;
    let first_look = !ctx.reconciled_since_start(&key(cr));
    let provider_name = provider_name(cr, &ctx.config).await?;
    let (provisioned, policy, rotation) = provision(cr, ctx, &provider_name, first_look).await?;
    let found = provider(ctx, &provider_name)?;
    let (takes_snapshots, rotates) = (found.takes_snapshots(), found.rotates_credentials());
    if let Some(id) = &provisioned.identifier
        && recorded_identifier(cr).as_ref() != Some(id)
    {
        record_identifier(cr, ctx, id).await?;
    }
    if provisioned.maintenance_window_used {
        close_maintenance_window(cr, ctx).await?;
    }
    let mut report = report_of_provisioned(cr, provider_name, &provisioned, rotation, rotates);
    match provisioned.outcome {
        Outcome::InProgress(reason) => {
            ctx.connectivity.forget(&key(cr));
            report.message = reason;
            Ok((report, Some(in_progress_requeue(Managed::conditions(cr)))))
        }
        Outcome::Failed(reason) => {
            ctx.connectivity.forget(&key(cr));
            report.phase = Phase::Failed;
            report.message = reason;
            Ok((report, None))
        }
        Outcome::Ready(details) => {
            let approved = annotation(cr, APPROVE_PLAN_ANNOTATION);
            report_pending(&mut report, provisioned.pending, policy, approved);
            publish_secret(cr, ctx, &secret_ns, &details, &mut report).await?;
            connectable(cr, ctx, &details, &mut report);
            // The provider says whether to look again; the operator says when.
            let recheck = provisioned
                .recheck_after
                .map(|after| after.min(ctx.recheck_within(first_look)));
            let scheduled = scheduled_snapshots(cr, ctx, takes_snapshots, &mut report).await?;
            let recheck = match (recheck, scheduled) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            Ok((report, recheck))
        }
    }
}

/// Checks the connection of a complete Postgres or Redis from now on (off
/// this reconcile) and reports the last verdict as `Connectable`.
fn connectable<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    details: &cro_provider_api::ConnectionDetails,
    report: &mut Report,
) {
    let key = key(cr);
    let target = (report.phase == Phase::Complete)
        .then(|| connectivity::Target::of(K::KIND, details))
        .flatten();
    let Some(target) = target else {
        ctx.connectivity.forget(&key);
        return;
    };
    let changed = Changed {
        kind: K::KIND,
        namespace: cr.namespace().unwrap_or_default(),
        name: cr.name_any(),
    };
    let labels = metric_labels(ctx, cr, Some(report));
    let shown = Managed::conditions(cr)
        .iter()
        .find(|c| c.type_ == connectivity::CONNECTABLE)
        .map(|c| cro_provider_api::Condition {
            type_: c.type_.clone(),
            status: c.status == "True",
            reason: c.reason.clone(),
            message: c.message.clone(),
        });
    if let Some(c) = ctx.connectivity.watch(&key, changed, target, labels, shown) {
        report.conditions.push(c);
    }
}

/// The status for what the provider reported, before its outcome is
/// applied: what it runs, its conditions, adoption, and the credential
/// rotation it completed (recorded only with the new credentials ready),
/// or that it cannot rotate them.
fn report_of_provisioned<K: ResourceCr>(
    cr: &K,
    provider_name: String,
    provisioned: &cro_provider_api::Provisioned,
    rotation: Option<String>,
    rotates: bool,
) -> Report {
    let previous = cr.report();
    let mut report = Report {
        provider: Some(provider_name),
        service: Some(provisioned.provider.clone()).filter(|p| !p.is_empty()),
        version: (provisioned.version.clone())
            .or_else(|| previous.as_ref().and_then(|p| p.version.clone())),
        secret_ref: previous.as_ref().and_then(|p| p.secret_ref.clone()),
        instance_id: provisioned.identifier.clone(),
        conditions: provisioned.conditions.clone(),
        rotation: previous.and_then(|p| p.rotation),
        health: provisioned.health.clone(),
        ..Report::new(Phase::InProgress, "")
    };
    let rotated = rotation.as_ref().filter(|token| {
        provisioned.rotated.as_ref() == Some(*token)
            && matches!(provisioned.outcome, Outcome::Ready(_))
    });
    if let Some(token) = rotated {
        let now = k8s_openapi::jiff::Timestamp::now();
        report.rotation = Some(rotation::completed(token, report.rotation.as_ref(), now));
        info!(object = %key(cr), "credentials rotated");
    }
    if rotation.is_some() && !rotates {
        report.conditions.push(rotation::unsupported());
    }
    report.conditions.extend(adopted(
        provisioned.adoption.as_ref(),
        Managed::conditions(cr),
    ));
    if let Some(adoption) = &provisioned.adoption {
        report.adoption_hash = Some(adoption.hash.clone());
        report.pending = adoption
            .changes
            .iter()
            .cloned()
            .map(pending_change)
            .collect();
    }
    report
}

/// Runs the snapshot schedule of a complete resource (paused otherwise);
/// when to look again for it.
async fn scheduled_snapshots<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    takes_snapshots: bool,
    report: &mut Report,
) -> Result<Option<Duration>, Error> {
    if report.phase != Phase::Complete {
        return Ok(None);
    }
    let Some(every) = super::schedule::frequency(cr)? else {
        return Ok(None);
    };
    if !takes_snapshots {
        report.conditions.push(cro_provider_api::Condition {
            type_: crate::reconcile::status::SNAPSHOTS_SCHEDULED.into(),
            status: false,
            reason: "Unsupported".into(),
            message: "spec.snapshotFrequency is set, but this resource's provider takes no snapshots (its type maps to an in-cluster provider in cloud-resource-config)".into(),
        });
        return Ok(None);
    }
    super::schedule::run(cr, ctx, every).await.map(Some)
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
            "spec.restoreFromSnapshot is set, but provider {provider_name:?} takes no snapshots and cannot restore one (spec.type maps to an in-cluster provider in cloud-resource-config); remove spec.restoreFromSnapshot or use a cloud type"
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
async fn admitted(
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

/// Asks the provider for the resource, unless the same inputs just failed
/// for a reason that needs a person; with the tier's change policy and the
/// credential rotation asked for.
/// `first_look`: this process has not reconciled the CR before.
async fn provision<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    provider_name: &str,
    first_look: bool,
) -> Result<(cro_provider_api::Provisioned, ChangePolicy, Option<String>), Error> {
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
    let rotate_every = tier.rotate_every;
    let mut req = request(cr, &ctx.settings, tier.clone());
    req.options.rotate_credentials = rotation::due(
        annotation(cr, rotation::ROTATE_ANNOTATION).as_deref(),
        cr.status().and_then(|s| s.credentials_rotation.as_ref()),
        cr.meta().creation_timestamp.as_ref().map(|t| t.0),
        rotate_every,
        k8s_openapi::jiff::Timestamp::now(),
    );
    let rotation = req.options.rotate_credentials.clone();
    if let Some(name) = cr.restore_from_snapshot()
        && req.recorded_identifier.is_none()
    {
        match restore_source::<K>(cr, ctx, provider_name, name).await? {
            RestoreSource::Ready(snapshot_id) => req.restore_from_snapshot = Some(snapshot_id),
            RestoreSource::Waiting(waiting) => {
                // Nothing is provisioned yet: status keeps the provider it had.
                let service = cr.status().and_then(|s| s.provider.clone());
                let outcome = Outcome::InProgress(waiting);
                return Ok((
                    cro_provider_api::Provisioned::new(&service.unwrap_or_default(), outcome),
                    policy,
                    None,
                ));
            }
        }
    }
    // A CR changed since its last reconcile (an edit, a poke) is looked at
    // afresh; a recheck or a restart may use a batched observation.
    if !ctx.unchanged_since_last_reconcile(&key(cr), cr.resource_version()) {
        req.options.observed_within = None;
    }
    req.options.defer_unbatched = req.options.observed_within.is_some() && first_look;
    let provisioned = unless_parked(ctx, &key(cr), &inputs, async {
        provider(ctx, provider_name)?
            .reconcile(&req)
            .await
            .map_err(|e| with_tier_location(e, provider_name, K::KIND, tier_name))
    })
    .await?;
    Ok((provisioned, policy, rotation))
}

/// Writes the connection Secret and sets the report's phase and message
/// from how that went.
async fn publish_secret<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    secret_ns: &str,
    details: &cro_provider_api::ConnectionDetails,
    report: &mut Report,
) -> Result<(), Error> {
    let secret_name = cr.spec().secret_ref.name.clone();
    let same_ns = cr.namespace().as_deref() == Some(secret_ns);
    let target = Target {
        namespace: secret_ns,
        name: &secret_name,
        owner_uid: cr.meta().uid.as_deref().unwrap_or_default(),
        owner_ref: same_ns
            .then(|| cr.controller_owner_ref(&()).map(not_controller))
            .flatten(),
        owner_desc: format!(
            "{} {}/{}",
            K::kind(&()),
            cr.namespace().unwrap_or_default(),
            cr.name_any()
        ),
    };
    match output_secret::write(&ctx.client, &ctx.owned.secrets, &target, details).await? {
        Written::Conflict(message) => {
            report.phase = Phase::Failed;
            report.message = message;
        }
        Written::Ok { placeholders } => {
            report.phase = Phase::Complete;
            report.secret_ref = Some(SecretRef {
                name: secret_name.clone(),
                namespace: Some(secret_ns.to_string()),
            });
            report.message = if placeholders.is_empty() {
                "successfully reconciled".into()
            } else {
                format!(
                    "Secret {secret_ns}/{secret_name} holds placeholders for {}: this provider does not provision the service; fill the values in (they are kept)",
                    placeholders.join(", ")
                )
            };
        }
    }
    Ok(())
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
        | ErrorKind::Throttled
        | ErrorKind::NamespaceTerminating
        | ErrorKind::ApiServerUnavailable => e.into(),
    }
}

/// Records the cloud identifier on the CR, so a resource that later
/// vanishes is reported instead of silently re-created.
async fn record_identifier<K: ResourceCr>(cr: &K, ctx: &Context, id: &str) -> Result<(), Error> {
    let api: kube::Api<K> =
        kube::Api::namespaced(ctx.client.clone(), &cr.namespace().unwrap_or_default());
    let patch =
        serde_json::json!({"metadata": {"annotations": {RESOURCE_IDENTIFIER_ANNOTATION: id}}});
    let recorded = api
        .patch(
            &cr.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "recording {RESOURCE_IDENTIFIER_ANNOTATION} on {}",
            cr.name_any()
        )))?;
    ctx.wrote(&key(cr), recorded.resource_version());
    Ok(())
}

/// The output Secret is owned by the CR for garbage collection, but is not
/// its controller object (the provider's children are).
fn not_controller(mut o: OwnerReference) -> OwnerReference {
    o.controller = None;
    o
}

async fn cleanup<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<Deletion, Error> {
    ctx.connectivity.forget(&key(cr));
    // Nothing was ever provisioned when no provider was recorded.
    let Some(provider_name) = cr
        .status()
        .and_then(|s| s.strategy.clone())
        .filter(|s| !s.is_empty())
    else {
        return delete_secret(cr, ctx).await;
    };
    let tier =
        match config::tier_strategy(&ctx.config, &provider_name, K::KIND, &cr.spec().tier).await {
            Ok(t) => t,
            Err(e) => {
                // Delete with the provider's safe defaults rather than never.
                warn!(error = %e, "tier strategy unavailable during deletion; using defaults");
                config::Tier::default()
            }
        };
    match provider(ctx, &provider_name)?
        .delete(&request(cr, &ctx.settings, tier))
        .await?
    {
        Deletion::Done => delete_secret(cr, ctx).await,
        other => Ok(other),
    }
}

async fn delete_secret<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<Deletion, Error> {
    let ns = cr
        .spec()
        .secret_ref
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| cr.namespace().unwrap_or_default());
    let uid = cr.meta().uid.clone().unwrap_or_default();
    output_secret::delete(&ctx.client, &ns, &cr.spec().secret_ref.name, &uid).await?;
    Ok(Deletion::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cro_provider_api::Timing;

    fn change(field: &str, timing: Timing) -> Change {
        Change {
            field: field.into(),
            current: "a".into(),
            desired: "b".into(),
            timing,
            restarts: false,
        }
    }

    #[test]
    fn up_to_date_says_what_differs_and_how_to_apply_it() {
        let pending = vec![pending_change(change(
            "DBInstanceClass",
            Timing::MaintenanceWindow,
        ))];
        // (pending, policy, approved) -> (status, reason, a phrase of the message)
        use ChangePolicy::{Automatic, Plan};
        type Case<'a> = (&'a [PendingChange], ChangePolicy, Option<&'a str>);
        let cases: [(Case<'_>, bool, &str, &str); 5] = [
            ((&[], Automatic, None), true, "UpToDate", "matches its tier"),
            (
                (&[], Plan, Some("old")),
                true,
                "UpToDate",
                "matches its tier",
            ),
            (
                (&pending, Automatic, None),
                false,
                "PendingChanges",
                "spec.maintenanceWindow",
            ),
            (
                (&pending, Plan, None),
                false,
                "AwaitingApproval",
                "=h1 to apply",
            ),
            (
                (&pending, Plan, Some("old")),
                false,
                "StaleApproval",
                "is \"old\", not this plan's hash \"h1\"",
            ),
        ];
        for ((pending, policy, approved), status, reason, phrase) in cases {
            let c = up_to_date(pending, "h1", policy, approved);
            assert_eq!((c.status, c.reason.as_str()), (status, reason), "{c:?}");
            assert!(c.message.contains(phrase), "{}", c.message);
        }
        let c = up_to_date(&pending, "h1", ChangePolicy::Automatic, None);
        assert!(
            c.message
                .contains("1 difference(s) from the tier: DBInstanceClass a -> b"),
            "{}",
            c.message
        );
    }

    #[test]
    fn maintenance_is_listed_but_never_part_of_the_plan() {
        let mut report = Report::new(Phase::Complete, "ready".to_string());
        report.health = Some(cro_provider_api::Health {
            maintenance: Some(vec![cro_provider_api::Maintenance {
                name: "system-update".into(),
                description: "New OS".into(),
                due: Some(1_800_000_000),
                ..Default::default()
            }]),
            ..Default::default()
        });
        report_pending(&mut report, Vec::new(), ChangePolicy::Plan, None);
        assert_eq!(report.plan_hash, None);
        assert!(
            report
                .conditions
                .iter()
                .any(|c| c.type_ == "UpToDate" && c.status)
        );
        let listed = &report.pending[0];
        assert_eq!(listed.field, "maintenance system-update");
        assert_eq!(
            listed.when,
            "by the cloud provider, due 2027-01-15T08:00:00Z"
        );
        // With a tier difference, the hash is the difference's alone.
        let mut with_change = Report::new(Phase::Complete, "ready".to_string());
        with_change.health = report.health.clone();
        let diff = vec![change("AllocatedStorage", Timing::Now)];
        let hash = plan_hash(&diff);
        report_pending(&mut with_change, diff, ChangePolicy::Plan, None);
        assert_eq!(with_change.plan_hash, Some(hash));
        assert_eq!(with_change.pending.len(), 2);
    }

    #[test]
    fn adopted_waits_for_a_person_and_says_so_once_done() {
        let adoption = Adoption {
            changes: vec![change("tag integreatly.org/clusterID", Timing::Now)],
            hash: "h2".into(),
        };
        let waiting = adopted(Some(&adoption), &[]).unwrap_or_else(|| panic!("no condition"));
        assert_eq!(
            (waiting.status, waiting.reason.as_str()),
            (false, "AwaitingAdoption")
        );
        assert!(
            waiting.message.contains("integreatly.org/adopt=h2"),
            "{}",
            waiting.message
        );
        // Never waited: no condition; waited before: True once adopted.
        assert_eq!(adopted(None, &[]), None);
        let before: Condition = serde_json::from_value(serde_json::json!({
            "type": "Adopted", "status": "False", "reason": "AwaitingAdoption", "message": "",
            "lastTransitionTime": "2026-11-25T00:00:00Z"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let done = adopted(None, &[before]).map(|c| (c.status, c.reason));
        assert_eq!(done, Some((true, "Adopted".to_string())));
    }
}
