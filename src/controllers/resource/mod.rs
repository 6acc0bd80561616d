//! Postgres, Redis, BlobStorage and SMTPCredentialSet: resolve the
//! provider and tier, ask the provider, publish the connection Secret.
//! [`Resources`] is its work as the skeleton calls it, and
//! `reconcile_resource` names the steps; each lives in a module of its own:
//! - `request`: what the provider is asked for a CR (pure);
//! - `provision`: the provider and tier, the checks a tier makes, the
//!   snapshot a restore starts from, and the call;
//! - `report`: the provider's answer as status, conditions and pending
//!   changes (pure, table-tested);
//! - `writes`: the operator's writes to the CR and to its Secret.

#[cfg(test)]
mod controller_tests;
mod provision;
pub(crate) use provision::admitted;
mod report;
mod request;
mod writes;

use std::time::Duration;

use cro_provider_api::{Deletion, Outcome};
use kube::{ResourceExt, runtime::events::EventType};
use tracing::warn;

use crate::{
    api::{APPROVE_PLAN_ANNOTATION, Phase, RESOURCE_IDENTIFIER_ANNOTATION},
    config::{self, DeletionPolicy},
    connectivity::{self, Changed},
    controllers::{kinds::ResourceCr, release, schedule},
    reconcile::{
        Context, Error, Managed, Report,
        conditions::{self, ConditionType},
        in_progress_requeue, metric_labels, output_secret,
    },
};
use cro_runtime::own_writes::object_key;

use provision::{Answer, provision};
pub use provision::{provider, provider_name};
use report::{deletion_awaiting_approval, report_of_provisioned, report_pending};
use request::{annotation, secret_namespace};
pub use request::{namespace_tag, owner, recorded_identifier, request, tags};
use writes::{close_maintenance_window, publish_secret, record_identifier};

/// The resource controller's work, handed to the skeleton for each of
/// Postgres, Redis, BlobStorage and SMTPCredentialSet.
pub struct Resources;

#[async_trait::async_trait]
impl<K: ResourceCr> crate::reconcile::Reconciler<K> for Resources {
    async fn reconcile(&self, cr: &K, ctx: &Context) -> Result<(Report, Option<Duration>), Error> {
        reconcile_resource(cr, ctx).await
    }
    async fn cleanup(&self, cr: &K, ctx: &Context) -> Result<Deletion, Error> {
        cleanup_resource(cr, ctx).await
    }
    fn skip_create(&self, cr: &K) -> bool {
        cr.spec().skip_create
    }
    fn tier<'a>(&self, cr: &'a K) -> Option<&'a str> {
        Some(&cr.spec().tier)
    }
}

async fn reconcile_resource<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
) -> Result<(Report, Option<Duration>), Error> {
    let secret_ns = secret_namespace(cr, ctx)?;
    let first_look = !ctx.reconciled_since_start(cr);
    let provider_name = provider_name(cr, &ctx.config).await?;
    let Answer {
        provisioned,
        policy,
        rotation,
        identifier,
    } = provision(cr, ctx, &provider_name, first_look).await?;
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
            ctx.connectivity.forget(&object_key(cr));
            report.message = reason;
            Ok((report, Some(in_progress_requeue(Managed::conditions(cr)))))
        }
        Outcome::Failed(reason) => {
            ctx.connectivity.forget(&object_key(cr));
            report.phase = Phase::Failed;
            report.message = reason;
            Ok((report, None))
        }
        Outcome::Ready(details) => {
            let approved = annotation(cr, APPROVE_PLAN_ANNOTATION);
            // The identifier the provider used (pinned by the tier or
            // conformed to the cloud's rules): the one it checks an
            // approval against.
            let used = provisioned.identifier.as_deref().unwrap_or(&identifier);
            report_pending(&mut report, (used, provisioned.pending), policy, approved);
            publish_secret(cr, ctx, &secret_ns, &details, &mut report).await?;
            connectable(cr, ctx, &details, &mut report).await;
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

/// Checks the connection of a complete resource whose Secret names a
/// server (see [`connectivity::Target::of`]) from now on (off
/// this reconcile) and reports the last verdict as `Connectable`.
async fn connectable<K: ResourceCr>(
    cr: &K,
    ctx: &Context,
    details: &cro_provider_api::ConnectionDetails,
    report: &mut Report,
) {
    let key = object_key(cr);
    let cloud = report.strategy.as_deref() == Some(cro_provider_aws::NAME);
    let target = (report.phase == Phase::Complete)
        .then(|| connectivity::Target::of(K::KIND, details, cloud))
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
    let shown = conditions::find(Managed::conditions(cr), ConditionType::Connectable).map(|c| {
        cro_provider_api::Condition {
            type_: ConditionType::Connectable,
            status: c.status == conditions::status_of(true),
            reason: c.reason.clone(),
            message: c.message.clone(),
        }
    });
    let known = ctx.connectivity.watch(&key, changed, target, labels, shown);
    // An in-cluster server becoming complete now: its first verdict (a
    // login within the cluster, milliseconds) goes into this status write.
    // Not a CR complete before (a restart, a switch from the Go operator,
    // which shows no verdict), and not a cloud database, whose first check
    // may take the whole timeout (a name to resolve, TLS): neither holds
    // up its reconcile; their verdict wakes one of its own.
    let becoming = cr.status().and_then(|s| s.phase) != Some(Phase::Complete);
    let condition = match known {
        None if becoming && !cloud => ctx.connectivity.first_verdict(&key).await,
        known => known,
    };
    report.conditions.extend(condition);
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
    let Some(every) = schedule::frequency(cr)? else {
        return Ok(None);
    };
    if !takes_snapshots {
        report.conditions.push(cro_provider_api::Condition {
            type_: ConditionType::SnapshotsScheduled,
            status: false,
            reason: "Unsupported".into(),
            message: "spec.snapshotFrequency is set, but this resource's provider takes no snapshots (see its type in cloud-resource-config)".into(),
        });
        return Ok(None);
    }
    schedule::run(cr, ctx, every).await.map(Some)
}

async fn cleanup_resource<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<Deletion, Error> {
    ctx.connectivity.forget(&object_key(cr));
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
    let policy = DeletionPolicy::of(cr.annotations(), tier.deletion_policy);
    if policy.map_err(|e| Error::Invalid(e.to_string()))? == DeletionPolicy::Retain {
        let why = format!(
            "deleted under {}: retain",
            config::deletion_policy::ANNOTATION
        );
        return retain(cr, ctx, &why).await;
    }
    // A tier this namespace may not use is never acted under, deleting
    // included: it may hold another account's role (switch a CR to it,
    // then delete the CR). The finalizer stays until the CR names a tier
    // that admits it again.
    let namespace = cr.namespace().unwrap_or_default();
    let tier_name = &cr.spec().tier;
    if let Err(refused) = admitted(ctx, &tier, &namespace, &provider_name, K::KIND, tier_name).await
    {
        return Err(Error::Invalid(format!(
            "{refused}; it is not deleted under that tier: set spec.tier back to a tier this namespace may use (the one it was made with) and the deletion goes on"
        )));
    }
    let identifier = recorded_identifier(cr).unwrap_or_else(|| cr.name_any());
    let approved = annotation(cr, APPROVE_PLAN_ANNOTATION);
    let kind = K::KIND.cr_kind();
    let policy = tier.change_policy;
    if let Some(waiting) =
        deletion_awaiting_approval(kind, &identifier, policy, approved.as_deref())
    {
        return Ok(Deletion::InProgress(waiting));
    }
    let Ok(provider) = provider(ctx, &provider_name) else {
        return Err(Error::Invalid(unknown_provider_on_delete::<K>(
            cr,
            &provider_name,
        )));
    };
    match provider.delete(&request(cr, &ctx.settings, tier)).await? {
        Deletion::Done => delete_secret(cr, ctx).await,
        Deletion::Keep(why) => retain(cr, ctx, &why).await,
        other => Ok(other),
    }
}

/// A CR made by a provider this operator does not have (the Go
/// operator's `gcp`) cannot have its cloud resources deleted here: the
/// finalizer stays (nothing is leaked silently) and the message says what
/// a person does instead.
fn unknown_provider_on_delete<K: ResourceCr>(cr: &K, provider: &str) -> String {
    let name = cr.name_any();
    let identifier = (cr
        .annotations()
        .get(RESOURCE_IDENTIFIER_ANNOTATION)
        .cloned())
    .map(|id| format!(" ({id}, its {RESOURCE_IDENTIFIER_ANNOTATION} annotation)"))
    .unwrap_or_default();
    format!(
        "{kind} {name} was provisioned by provider {provider:?}, which this operator does not have, so it cannot delete what that provider made: delete that resource{identifier} yourself, then remove the CR's finalizers: kubectl -n {ns} patch {kind} {name} --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}'",
        kind = K::KIND.cr_kind(),
        ns = cr.namespace().unwrap_or_default(),
    )
}

/// Releases the CR and everything made for it, deleting nothing: the
/// cloud resource keeps its deletion protection and tags, an in-cluster
/// workload its volume, and the Secrets their keys, for a CR of the same
/// kind, namespace and name to take over again. `why` opens the Event:
/// the retain policy, or what the provider would not delete.
async fn retain<K: ResourceCr>(cr: &K, ctx: &Context, why: &str) -> Result<Deletion, Error> {
    let namespace = cr.namespace().unwrap_or_default();
    let released = release::Released {
        namespace: &namespace,
        uid: cr.meta().uid.as_deref().unwrap_or_default(),
        from: format!("{namespace}/{}/{}", K::kind(&()), cr.name_any()),
    };
    let secret = (secret_namespace_of(cr), cr.spec().secret_ref.name.as_str());
    let count = release::release(&ctx.client, &released, (&secret.0, secret.1)).await?;
    let identifier = recorded_identifier(cr)
        .map(|id| format!(" ({id})"))
        .unwrap_or_default();
    let note = format!(
        "{why}; its {} resource{identifier} and its data are left as they are (deletion protection and tags kept), and {count} object(s) made for it, its Secret {}/{} included, are released; a {} named {} in this namespace takes them over again",
        K::KIND.cr_kind(),
        secret.0,
        secret.1,
        K::KIND.cr_kind(),
        cr.name_any(),
    );
    crate::reconcile::publish(ctx, cr, EventType::Normal, "Retained", &note).await;
    Ok(Deletion::Done)
}

/// The namespace of the CR's output Secret (its own unless `secretRef`
/// names another).
fn secret_namespace_of<K: ResourceCr>(cr: &K) -> String {
    cr.spec()
        .secret_ref
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| cr.namespace().unwrap_or_default())
}

async fn delete_secret<K: ResourceCr>(cr: &K, ctx: &Context) -> Result<Deletion, Error> {
    let ns = secret_namespace_of(cr);
    let uid = cr.meta().uid.clone().unwrap_or_default();
    output_secret::delete(&ctx.client, &ns, &cr.spec().secret_ref.name, &uid).await?;
    Ok(Deletion::Done)
}
