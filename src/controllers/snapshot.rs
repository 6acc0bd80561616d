//! PostgresSnapshot and RedisSnapshot: the parent CR decides the provider;
//! the provider takes (and on deletion removes) the snapshot.

use std::time::Duration;

use cro_provider_api::{
    Deletion, IdentifierRules, Outcome, ResourceKind, SnapshotRequest, cloud_identifier,
    separate_identifier, snapshot_identifier, timestamped_identifier,
};
use kube::{Api, Resource, ResourceExt, core::object::HasStatus, runtime::events::EventType};
use serde_json::Value;

use super::{
    kinds::{ResourceCr, SnapshotCr},
    resource::{admitted, namespace_tag, owner, provider, recorded_identifier, tags},
};
use crate::{
    api::Phase,
    config::{self, DeletionPolicy, limits::MAX_MANUAL_SNAPSHOTS_KEY},
    controllers::{retained_snapshots, schedule},
    reconcile::{Context, Error, Managed, Report, in_progress_requeue, unless_parked},
};

/// The snapshot controller's work, handed to the skeleton for each of
/// PostgresSnapshot and RedisSnapshot.
pub struct Snapshots;

#[async_trait::async_trait]
impl<K: SnapshotCr> crate::reconcile::Reconciler<K> for Snapshots {
    async fn reconcile(
        &self,
        snap: &K,
        ctx: &Context,
    ) -> Result<(Report, Option<Duration>), Error> {
        reconcile_snapshot(snap, ctx).await
    }
    async fn cleanup(&self, snap: &K, ctx: &Context) -> Result<Deletion, Error> {
        cleanup_snapshot(snap, ctx).await
    }
}

async fn parent<K: SnapshotCr>(snap: &K, ctx: &Context) -> Result<Option<K::Parent>, Error> {
    let ns = snap.namespace().unwrap_or_default();
    let api: Api<K::Parent> = Api::namespaced(ctx.client.clone(), &ns);
    let name = &snap.spec().resource_name;
    api.get_opt(name).await.map_err(Error::kube(format!(
        "reading {} {ns}/{name}",
        K::Parent::kind(&())
    )))
}

/// The request for the snapshot `id` of `snap`; `parent` is `None` only
/// when deleting a snapshot whose parent is already gone.
fn request<K: SnapshotCr>(
    snap: &K,
    parent: Option<&K::Parent>,
    strategy: Value,
    id: &str,
    ctx: &Context,
) -> SnapshotRequest {
    let ns = snap.namespace().unwrap_or_default();
    let parent_name = &snap.spec().resource_name;
    let deployment_type = parent.map(|p| p.spec().r#type.clone()).unwrap_or_default();
    // Bound to the namespace, like everything the operator makes.
    let mut tags = tags(&ctx.settings, snap, &deployment_type);
    tags.extend([namespace_tag(&ctx.settings, &ns)]);
    SnapshotRequest {
        kind: <K::Parent as ResourceCr>::KIND,
        resource_default_identifier: cloud_identifier(&ctx.settings.cluster_id, &ns, parent_name),
        resource_separate_identifier: separate_identifier(
            &ctx.settings.cluster_id,
            &ns,
            parent_name,
        ),
        // Only the one the parent recorded: the computed identifier drops
        // separators, so it may be another namespace's resource, and a
        // tenant can remove the annotation at will.
        resource_identifier: parent.and_then(recorded_identifier),
        resource_name: parent_name.clone(),
        namespace: ns,
        name: snap.name_any(),
        owner: owner(snap),
        identifier: id.to_string(),
        strategy,
        tags,
        tag_keys: cro_provider_api::TagKeys::new(&ctx.settings.tag_key_prefix),
    }
}

/// The identifier of a new snapshot: the Go operator's
/// (`BuildTimestampedInfraNameFromObjectCreation`, pkg/resources/config.go:
/// `<clusterID>-<namespace>-<name>-<creation time>`, the time as Go prints
/// a UTC `metav1.Time`, shortened to 40 characters), then a hash of the
/// CR's UID, so that no two CRs ever share one (`snapshot_identifier`).
/// Snapshots the Go operator named keep their `status.snapshotID`.
fn new_snapshot_identifier<K: SnapshotCr>(snap: &K, ctx: &Context) -> String {
    let created = snap
        .meta()
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string())
        .unwrap_or_default();
    let id = timestamped_identifier(
        &ctx.settings.cluster_id,
        &snap.namespace().unwrap_or_default(),
        &snap.name_any(),
        &created,
    );
    let id = snapshot_identifier(&id, snap.meta().uid.as_deref().unwrap_or_default());
    let rules = match <K::Parent as ResourceCr>::KIND {
        ResourceKind::Redis => IdentifierRules::ElastiCacheSnapshot,
        _ => IdentifierRules::RdsSnapshot,
    };
    rules.conform(&id)
}

/// How often a snapshot held back by `maxManualSnapshots` looks again.
const MANUAL_SNAPSHOTS_RECHECK: Duration = Duration::from_secs(300);

/// The manual snapshots of this kind in the namespace (none a schedule
/// made, none being deleted or failed) made before `snap`: the earliest
/// ones are the ones a tier's `maxManualSnapshots` admits.
/// Also (second) how many of them are kept in the cloud after their CR
/// was deleted.
async fn manual_snapshots_ahead<K: SnapshotCr>(
    snap: &K,
    ctx: &Context,
) -> Result<(usize, usize), Error> {
    let ns = snap.namespace().unwrap_or_default();
    let listed = Api::<K>::namespaced(ctx.client.clone(), &ns)
        .list(&kube::api::ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "listing the {}s in {ns}",
            K::kind(&())
        )))?;
    let order = |o: &K| {
        (
            o.meta().creation_timestamp.clone().map(|t| t.0),
            o.name_any(),
        )
    };
    let mine = order(snap);
    // Their parents, to tell a schedule's snapshots from copies of its labels.
    let parents = Api::<K::Parent>::namespaced(ctx.client.clone(), &ns)
        .list(&kube::api::ListParams::default())
        .await
        .map_err(Error::kube(format!(
            "listing the {}s in {ns}",
            K::Parent::kind(&())
        )))?;
    let scheduled = |o: &K| {
        (parents.items.iter())
            .find(|p| p.name_any() == o.spec().resource_name)
            .is_some_and(|p| schedule::made_by_schedule(o, p))
    };
    let live = listed
        .items
        .iter()
        .filter(|o| {
            o.meta().deletion_timestamp.is_none()
                && !scheduled(o)
                && o.status().and_then(|s| s.phase) != Some(Phase::Failed)
                && order(o) < mine
        })
        .count();
    // Those whose CR went while their cloud snapshot stayed came first.
    let kept = retained_snapshots::count(ctx, &ns, &K::kind(&())).await?;
    Ok((live + kept, kept))
}

/// The snapshot's recorded identifier (`status.snapshotID`).
fn recorded_id<K: SnapshotCr>(snap: &K) -> Option<String> {
    snap.status()
        .and_then(|s| s.snapshot_id.clone())
        .filter(|id| !id.is_empty())
}

async fn reconcile_snapshot<K: SnapshotCr>(
    snap: &K,
    ctx: &Context,
) -> Result<(Report, Option<Duration>), Error> {
    let ns = snap.namespace().unwrap_or_default();
    let parent_kind = K::Parent::kind(&());
    let Some(parent) = parent(snap, ctx).await? else {
        return Err(Error::Invalid(format!(
            "{parent_kind} {:?} does not exist in namespace {ns:?}; set spec.resourceName to an existing {parent_kind}",
            snap.spec().resource_name
        )));
    };
    let provider_name = parent_provider(&parent, &ns, ctx).await?;
    // The identifier is recorded before the snapshot is taken (the Go
    // operator's order too): a crash in between never takes a second one,
    // and deletion always finds it.
    let Some(id) = recorded_id(snap) else {
        let id = new_snapshot_identifier(snap, ctx);
        let message = format!("taking snapshot {id}");
        let report = snapshot_report(provider_name, id, Phase::InProgress, message);
        return Ok((report, Some(Duration::from_secs(1))));
    };
    // A database still being made has nothing to snapshot yet: wait for
    // it, as the Go operator does ("waiting for postgres instance to be
    // available"); failing here would be final for the user.
    let parent_phase = parent.status().and_then(|s| s.phase);
    if parent_phase != Some(Phase::Complete) {
        let message = waiting_for_parent(snap, parent_phase);
        let report = snapshot_report(provider_name, id, Phase::InProgress, message);
        return Ok((report, Some(in_progress_requeue(Managed::conditions(snap)))));
    }
    take(snap, &parent, ctx, provider_name, id).await
}

/// A report naming the provider and the snapshot's identifier.
fn snapshot_report(provider_name: String, id: String, phase: Phase, message: String) -> Report {
    Report {
        strategy: Some(provider_name),
        snapshot_id: Some(id),
        ..Report::new(phase, message)
    }
}

/// Takes (or follows) snapshot `id` of a complete `parent`, under its
/// tier: one this namespace may use, within its `maxManualSnapshots`.
async fn take<K: SnapshotCr>(
    snap: &K,
    parent: &K::Parent,
    ctx: &Context,
    provider_name: String,
    id: String,
) -> Result<(Report, Option<Duration>), Error> {
    let kind = <K::Parent as ResourceCr>::KIND;
    let tier_name = &parent.spec().tier;
    let tier = config::tier_strategy(&ctx.config, &provider_name, kind, tier_name).await?;
    // Never under a tier this namespace may not use (its role may be
    // another account's).
    let namespace = snap.namespace().unwrap_or_default();
    admitted(ctx, &tier, &namespace, &provider_name, kind, tier_name).await?;
    if let Some(message) = over_quota(snap, parent, ctx, &tier, &provider_name).await? {
        let report = snapshot_report(provider_name, id, Phase::Failed, message);
        return Ok((report, Some(MANUAL_SNAPSHOTS_RECHECK)));
    }
    let strategy = tier.strategy;
    // The parent's recorded identifier too: a snapshot refused because it
    // named another's resource is tried again once the parent records its own.
    let source = recorded_identifier(parent);
    let inputs = (
        snap.spec(),
        snap.annotations(),
        &strategy,
        &provider_name,
        &source,
    );
    let snapshotted = unless_parked(ctx, snap, &inputs, async {
        Ok(provider(ctx, &provider_name)?
            .snapshot(&request(snap, Some(parent), strategy.clone(), &id, ctx))
            .await?)
    })
    .await?;
    let report = snapshot_report(provider_name, id, Phase::InProgress, String::new());
    Ok(outcome_report(snap, report, snapshotted.outcome))
}

/// Why a manual snapshot not taken yet waits, if its namespace holds the
/// most manual snapshots its tier allows (`maxManualSnapshots`): the
/// account's quota is shared.
async fn over_quota<K: SnapshotCr>(
    snap: &K,
    parent: &K::Parent,
    ctx: &Context,
    tier: &config::Tier,
    provider_name: &str,
) -> Result<Option<String>, Error> {
    let Some(max) = tier.limits.max_manual_snapshots() else {
        return Ok(None);
    };
    if snap.status().and_then(|s| s.phase) == Some(Phase::Complete)
        || schedule::made_by_schedule(snap, parent)
    {
        return Ok(None);
    }
    let (ahead, kept) = manual_snapshots_ahead(snap, ctx).await?;
    if ahead < max {
        return Ok(None);
    }
    let kept = match kept {
        0 => String::new(),
        n => format!(
            " ({n} of them kept in the cloud after their CR was deleted, listed in ConfigMap {}/{}: a platform engineer removes an entry once the snapshot is deleted)",
            ctx.settings.operator_namespace,
            retained_snapshots::CONFIG_MAP
        ),
    };
    let namespace = snap.namespace().unwrap_or_default();
    let tier_name = &parent.spec().tier;
    Ok(Some(format!(
        "namespace {namespace} holds {ahead} manual {}s made before this one{kept}, the most tier {tier_name:?} allows ({MAX_MANUAL_SNAPSHOTS_KEY} {max} in ConfigMap {}): delete one and this one is taken within 5 minutes, or at the next edit of this CR",
        K::kind(&()),
        config::strategies_config_map(provider_name),
    )))
}

/// What a snapshot of a database that is not complete waits for.
fn waiting_for_parent<K: SnapshotCr>(snap: &K, phase: Option<Phase>) -> String {
    format!(
        "waiting for {} {:?} to be complete (it is {}); the snapshot is taken then",
        K::Parent::kind(&()),
        snap.spec().resource_name,
        phase.map_or("not reconciled yet", |p| p.as_str()),
    )
}

/// The parent's provider: the one it recorded, else its type's.
async fn parent_provider<P: ResourceCr>(
    parent: &P,
    ns: &str,
    ctx: &Context,
) -> Result<String, Error> {
    if let Some(s) = parent
        .status()
        .and_then(|s| s.strategy.clone())
        .filter(|s| !s.is_empty())
    {
        return Ok(s);
    }
    Ok(config::provider_for(&ctx.config, ns, &parent.spec().r#type, P::KIND).await?)
}

fn outcome_report<K: SnapshotCr>(
    snap: &K,
    mut report: Report,
    outcome: Outcome<String>,
) -> (Report, Option<Duration>) {
    let requeue = match outcome {
        Outcome::Ready(id) => {
            report.phase = Phase::Complete;
            report.message = format!("snapshot {id} created");
            report.snapshot_id = Some(id);
            None
        }
        Outcome::InProgress(reason) => {
            report.message = reason;
            Some(in_progress_requeue(Managed::conditions(snap)))
        }
        Outcome::Failed(reason) => {
            report.phase = Phase::Failed;
            report.message = reason;
            None
        }
    };
    (report, requeue)
}

/// A manual snapshot kept in the cloud when its CR goes still counts
/// toward `maxManualSnapshots` ([`retained_snapshots`]); one that was
/// never taken (failed) or that a schedule made does not, nor one whose
/// parent's tier sets no such limit. Without its parent the tier is not
/// known, and it counts: deleting the database first is no way around
/// the limit. (What the list holds is bounded by the cloud's own snapshot
/// quota.)
async fn keep_counting<K: SnapshotCr>(
    snap: &K,
    parent: Option<&K::Parent>,
    id: &str,
    ctx: &Context,
) -> Result<(), Error> {
    let failed = snap.status().and_then(|s| s.phase) == Some(Phase::Failed);
    if failed || parent.is_some_and(|p| schedule::made_by_schedule(snap, p)) {
        return Ok(());
    }
    if let Some(parent) = parent {
        let ns = snap.namespace().unwrap_or_default();
        let provider_name = parent_provider(parent, &ns, ctx).await?;
        let kind = <K::Parent as ResourceCr>::KIND;
        let tier =
            config::tier_strategy(&ctx.config, &provider_name, kind, &parent.spec().tier).await;
        if tier.is_ok_and(|t| t.limits.max_manual_snapshots().is_none()) {
            return Ok(());
        }
    }
    let kind = K::kind(&()).into_owned();
    let retained = retained_snapshots::Retained {
        from: format!("{kind}/{}", snap.name_any()),
        kind,
        snapshot_id: id.to_string(),
    };
    retained_snapshots::record(ctx, &snap.namespace().unwrap_or_default(), retained).await
}

async fn cleanup_snapshot<K: SnapshotCr>(snap: &K, ctx: &Context) -> Result<Deletion, Error> {
    let Some(id) = recorded_id(snap) else {
        return Ok(Deletion::Done);
    };
    let parent = parent(snap, ctx).await?;
    if snap.spec().skip_delete {
        keep_counting(snap, parent.as_ref(), &id, ctx).await?;
        return Ok(Deletion::Done);
    }
    // As `skipDelete`, by the annotation the other kinds take; a typo in
    // it deletes nothing.
    let policy = DeletionPolicy::of(snap.annotations(), DeletionPolicy::Delete);
    if policy.map_err(|e| Error::Invalid(e.to_string()))? == DeletionPolicy::Retain {
        keep_counting(snap, parent.as_ref(), &id, ctx).await?;
        let note = format!(
            "deleted under {}: retain; snapshot {id} is left as it is",
            config::deletion_policy::ANNOTATION
        );
        crate::reconcile::publish(ctx, snap, EventType::Normal, "Retained", &note).await;
        return Ok(Deletion::Done);
    }
    // The Go operator's RedisSnapshot never records its strategy; only
    // the aws provider takes snapshots.
    let provider_name = snap
        .status()
        .and_then(|s| s.strategy.clone())
        .or_else(|| parent.as_ref().and_then(|p| p.status()?.strategy.clone()))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| cro_provider_aws::NAME.to_string());
    // Without the parent or its tier, the default region is the best guess.
    let kind = <K::Parent as ResourceCr>::KIND;
    let strategy = match &parent {
        Some(p) => {
            match config::tier_strategy(&ctx.config, &provider_name, kind, &p.spec().tier).await {
                Ok(tier) => {
                    let namespace = snap.namespace().unwrap_or_default();
                    let tier_name = &p.spec().tier;
                    if let Err(refused) =
                        admitted(ctx, &tier, &namespace, &provider_name, kind, tier_name).await
                    {
                        return Err(Error::Invalid(format!(
                            "{refused}; the snapshot is not deleted under that tier: set the {} {}'s spec.tier back to a tier this namespace may use and the deletion goes on",
                            kind.cr_kind(),
                            p.name_any()
                        )));
                    }
                    tier.strategy
                }
                Err(_) => Value::Null,
            }
        }
        None => Value::Null,
    };
    let deletion = provider(ctx, &provider_name)?
        .delete_snapshot(&request(snap, parent.as_ref(), strategy, &id, ctx))
        .await?;
    // Not this CR's (its reconcile refused it and said so): not counted
    // either, it is whoever's it is.
    if let Deletion::Keep(why) = &deletion {
        crate::reconcile::publish(ctx, snap, EventType::Normal, "Retained", why).await;
    }
    Ok(deletion)
}
