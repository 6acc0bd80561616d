//! The one reconcile skeleton every controller uses. It owns each
//! cross-cutting rule once: finalizer, deletion, `skipCreate`, phases,
//! the `Ready` condition, `observedGeneration`, Events, status writes only
//! on change, and retry policy. A controller hands its work to it as a
//! [`Reconciler`] value.

pub mod conditions;
mod context;
mod error;
pub mod finalizer;
pub mod inputs;
mod invalid;
#[cfg(test)]
pub(crate) mod mock_api;
pub mod output_secret;
pub use cro_runtime::share::Woken;
#[cfg(test)]
mod skeleton_tests;
pub mod status;

use std::{fmt::Debug, sync::Arc, time::Duration};

pub use context::{Context, Objects, Settings};
pub use error::Error;
pub use status::Report;

use conditions::ConditionType;
use cro_provider_api::Deletion;
use cro_runtime::own_writes::Cached;
use k8s_openapi::{
    NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::Condition, jiff::Timestamp,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    core::{DeserializeGuard, object::HasStatus},
    runtime::{controller::Action, events::EventType},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Value, json};
use tracing::{Instrument, debug, info, warn};

use crate::{
    api::{PRODUCT_NAME_LABEL, Phase, RESOURCE_IDENTIFIER_ANNOTATION},
    metrics::ObjectLabels,
};

/// When a CR that failed for a reason needing a person is tried again
/// although neither it nor its configuration changed (someone may have
/// fixed the cause outside Kubernetes, e.g. raised an AWS quota).
const FAILED_RETRY: Duration = Duration::from_secs(3600);

/// The message the Go operator shows for `skipCreate`.
pub const SKIP_CREATE_MESSAGE: &str = "skipping create or update for maintenance";

/// When to look again at a CR the cache shows older than the operator's
/// last write to it, if the watch showing the write (it does so within
/// moments) has not brought it first; see `stale`.
const CACHE_BEHIND_RETRY: Duration = Duration::from_secs(1);

/// When a CR whose namespace held its share of reconciles comes again if
/// no wake (a slot given back, see `share`) brings it first: wakes can be
/// missed (a lagging receiver) and must never leave a CR waiting for good.
const SHARE_RETRY: Duration = Duration::from_secs(30);

/// When a CR of a namespace held back for a Go operator is looked at
/// again: the elector lists the Go Leases every 10 s.
const HELD_BACK_RETRY: Duration = Duration::from_secs(10);

/// How soon a resource that is still converging is looked at again when no
/// event arrives first: a quarter of the time it has been in progress,
/// between 5 seconds and 2 minutes, so a quick creation is seen quickly and
/// a long one (RDS takes many minutes) costs few cloud API calls.
pub fn in_progress_requeue(conditions: &[Condition]) -> Duration {
    let since = conditions::find(conditions, ConditionType::Ready)
        .filter(|c| c.status == conditions::status_of(false))
        .map(|c| c.last_transition_time.0);
    let elapsed = since
        .and_then(|t| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(t)
                .try_into()
                .ok()
        })
        .unwrap_or(Duration::ZERO);
    (elapsed / 4).clamp(Duration::from_secs(5), Duration::from_secs(120))
}

/// What the skeleton needs from a kind: a namespaced resource whose
/// status it reads and writes. Every CRD type whose status is a
/// [`KindStatus`] is one; what a kind does is its [`Reconciler`].
pub trait Managed:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + HasStatus<Status: KindStatus>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The status as it stands (for keeping fields a reconcile does not set).
    fn report(&self) -> Option<Report> {
        self.status()?.report()
    }
    /// Current conditions.
    fn conditions(&self) -> &[Condition] {
        self.status().map_or(&[], |s| s.conditions())
    }
    /// The status object to write for `report`.
    fn status_json(&self, report: &Report, conditions: Vec<Condition>) -> Value {
        <Self as HasStatus>::Status::json(report, conditions, self.meta().generation)
    }
}

impl<K> Managed for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + HasStatus<Status: KindStatus>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A controller's own work on CRs of kind `K`, handed to the skeleton as a
/// value (see [`reconcile`]): the skeleton calls it for a CR that is this
/// process's, not deleted, finalized and not paused.
#[async_trait::async_trait]
pub trait Reconciler<K>: Send + Sync + 'static {
    /// Creates or converges the CR's resource; `Ok` carries the status to
    /// report and when to look again.
    async fn reconcile(&self, cr: &K, ctx: &Context) -> Result<(Report, Option<Duration>), Error>;
    /// Removes what the CR owns outside Kubernetes' garbage collection.
    async fn cleanup(&self, cr: &K, ctx: &Context) -> Result<Deletion, Error>;
    /// `spec.skipCreate`, for kinds that have it.
    fn skip_create(&self, _cr: &K) -> bool {
        false
    }
    /// `spec.tier`, for kinds that have one (a metrics label).
    fn tier<'a>(&self, _cr: &'a K) -> Option<&'a str> {
        None
    }
}

/// A status type as the skeleton reads and writes it.
pub trait KindStatus: Send + Sync {
    /// What it reports (`None` before a first phase).
    fn report(&self) -> Option<Report>;
    fn conditions(&self) -> &[Condition];
    /// The status object that says `report`.
    fn json(report: &Report, conditions: Vec<Condition>, generation: Option<i64>) -> Value;
}

pub(crate) fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// The reconcile entry point for every kind. Objects are read through
/// kube's `DeserializeGuard`, so one object whose spec does not parse is
/// reported and skipped instead of failing the list of its whole kind
/// (status is lenient, see `api::lenient`, so only the spec can make an
/// object invalid).
pub async fn reconcile<K: Managed, R: Reconciler<K>>(
    obj: Arc<DeserializeGuard<K>>,
    ctx: Arc<Context>,
    with: Arc<R>,
) -> Result<Action, Error> {
    // One span per reconcile: every line it logs carries the object.
    let span = tracing::info_span!(
        "reconcile",
        kind = %K::kind(&()),
        namespace = %obj.namespace().unwrap_or_default(),
        name = %obj.name_any()
    );
    if let Some(later) = elsewhere(obj.as_ref(), &ctx) {
        return Ok(later);
    }
    // A version older than the operator's last write: reconcile the newer
    // one. The watch brings it as a wake, not as a change (it changes no
    // input), and this run may stand for a requeue it absorbed.
    match ctx.cache_behind(obj.as_ref()) {
        Cached::Current => {}
        Cached::Behind => return Ok(Action::requeue(CACHE_BEHIND_RETRY)),
        Cached::Superseded => return Ok(Action::requeue(Duration::ZERO)),
    }
    // Its namespace holds its share of the kind's slots (see `share`):
    // this slot goes to another namespace's CR meanwhile.
    let namespace = obj.namespace().unwrap_or_default();
    let Ok(_slot) = ctx.reconcile_slot(&K::kind(&()), &namespace, &obj.name_any()) else {
        debug!(object = %key(obj.as_ref()), "its namespace holds its share of reconciles; waiting for a slot");
        ctx.metrics.deferred(&K::kind(&()));
        return Ok(Action::requeue(SHARE_RETRY));
    };
    match &obj.0 {
        Ok(valid) => reconcile_valid(valid, &ctx, &*with).instrument(span).await,
        Err(invalid) => {
            invalid::report::<K>(obj.as_ref(), invalid, &ctx)
                .instrument(span)
                .await
        }
    }
}

/// When a CR is not this process's to reconcile now, what to do instead:
/// another shard's namespace is its replicas' (wait for a change); a
/// namespace with a Go operator's trace in it may be the Go operator's
/// (see `leader::held`: looked at again until the trace is gone).
fn elsewhere<K: Resource<DynamicType = ()>>(obj: &K, ctx: &Context) -> Option<Action> {
    let namespace = obj.namespace().unwrap_or_default();
    if !ctx.settings.shard.owns(&namespace) {
        return Some(Action::await_change());
    }
    let why = ctx.held_back.why(&namespace)?;
    debug!(object = %key(obj), "left alone: {why}");
    Some(Action::requeue(HELD_BACK_RETRY))
}

async fn reconcile_valid<K: Managed>(
    obj: &K,
    ctx: &Context,
    with: &impl Reconciler<K>,
) -> Result<Action, Error> {
    let key = key(obj);
    let started = std::time::Instant::now();
    let result = reconcile_inner(obj, ctx, with).await;
    let kind = K::kind(&());
    let error = result.as_ref().err().map(Error::label);
    ctx.metrics.reconciled(&kind, started.elapsed(), error);
    debug!(
        seconds = started.elapsed().as_secs_f64(),
        error = error.unwrap_or("none"),
        "reconcile finished"
    );
    match result {
        Ok(action) => {
            ctx.succeeded(obj);
            Ok(action)
        }
        // The namespace is being deleted and refuses new objects: the CR's
        // own deletion follows, and is what to wait for.
        Err(e) if e.namespace_terminating() => {
            debug!(object = %key, "namespace is terminating; waiting for the deletion");
            Ok(Action::await_change())
        }
        Err(e) if e.is_transient() => {
            // Show it where a person looks, then retry with backoff.
            // Throttling is expected under load: no Warning for it.
            warn!(object = %key, error = %e, label = e.label(), "reconcile failed; retrying");
            if !e.is_throttled() {
                publish(
                    ctx,
                    obj,
                    EventType::Warning,
                    "ReconcileError",
                    &e.to_string(),
                )
                .await;
            }
            let mut report = obj
                .report()
                .unwrap_or_else(|| Report::new(Phase::InProgress, ""));
            report.message = format!("retrying after error: {e}");
            if let Err(status_err) = write_status(ctx, obj, report).await {
                warn!(object = %key, error = %status_err, "could not record the error in status");
            }
            Err(e)
        }
        Err(e) => {
            // Needs a change to the CR or its configuration: report and wait.
            warn!(object = %key, error = %e, label = e.label(), "reconcile failed; waiting for a change");
            let mut report = obj
                .report()
                .unwrap_or_else(|| Report::new(Phase::Failed, ""));
            report.phase = Phase::Failed;
            report.message = e.to_string();
            write_status(ctx, obj, report).await?;
            Ok(Action::requeue(FAILED_RETRY))
        }
    }
}

/// Retry policy for transient errors (the others never reach here).
pub fn error_policy<K: Managed>(
    obj: Arc<DeserializeGuard<K>>,
    err: &Error,
    ctx: Arc<Context>,
) -> Action {
    if let Some(asked) = err.retry_after() {
        // Spread, so the objects it turned away do not all return at once.
        return Action::requeue(asked.mul_f64(rand::random_range(1.0..1.5)));
    }
    Action::requeue(ctx.backoff(obj.as_ref(), err.api_server_unavailable()))
}

async fn reconcile_inner<K: Managed>(
    obj: &K,
    ctx: &Context,
    with: &impl Reconciler<K>,
) -> Result<Action, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);

    if obj.meta().deletion_timestamp.is_some() {
        if !finalizer::has_ours(obj) {
            return Ok(Action::await_change());
        }
        return match with.cleanup(obj, ctx).await? {
            // Kept: the controller released what the provider kept.
            Deletion::Done | Deletion::Keep(_) => {
                finalizer::remove(&api, obj).await?;
                ctx.forget(obj);
                ctx.metrics
                    .object(&K::kind(&()), metric_labels(ctx, obj, None), None);
                info!(object = %key(obj), "deleted");
                Ok(Action::await_change())
            }
            Deletion::InProgress(reason) => {
                let mut report = obj
                    .report()
                    .unwrap_or_else(|| Report::new(Phase::DeleteInProgress, ""));
                report.phase = Phase::DeleteInProgress;
                report.message = reason;
                write_status(ctx, obj, report).await?;
                Ok(Action::requeue(in_progress_requeue(obj.conditions())))
            }
        };
    }

    let finalized = finalizer::ensure(&api, obj).await?;
    ctx.wrote(obj, finalized);

    if with.skip_create(obj) {
        let mut report = obj
            .report()
            .unwrap_or_else(|| Report::new(Phase::Paused, ""));
        report.phase = Phase::Paused;
        report.message = SKIP_CREATE_MESSAGE.into();
        write_status(ctx, obj, report).await?;
        return Ok(Action::await_change());
    }

    let (mut report, requeue) = with.reconcile(obj, ctx).await?;
    // What this reconcile answered: a later one of the same inputs is a
    // recheck (see `inputs`).
    report.observed_inputs = Some(inputs::fingerprint(obj));
    let first_ready = became_ready_first_time(obj, obj.report().as_ref(), &report);
    let strategy = report.strategy.clone().unwrap_or_default();
    write_status(ctx, obj, report).await?;
    if first_ready {
        let tier = with.tier(obj).unwrap_or_default();
        record_time_to_ready(ctx, obj, &strategy, tier);
    }
    ctx.reconciled(obj);
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Writes the status for `report` unless it is already exactly that, and
/// publishes an Event when the phase or a failure message changes.
async fn write_status<K: Managed>(ctx: &Context, obj: &K, mut report: Report) -> Result<(), Error> {
    shown_safely(&mut report);
    let previous = obj.report();
    let connectable = connectable_turned(obj.conditions(), &report.conditions);
    let ready = status::ready_condition(&report, obj.meta().generation, obj.conditions());
    let conditions = status::merged(
        obj.conditions(),
        ready,
        &report.conditions,
        obj.meta().generation,
    );
    let desired = obj.status_json(&report, conditions);
    let shown = crate::metrics::Shown {
        phase: Some(report.phase),
        health: report.health.clone(),
        deleting_since: (obj.meta().deletion_timestamp.as_ref()).map(|t| t.0.as_second()),
    };
    ctx.metrics.object(
        &K::kind(&()),
        metric_labels(ctx, obj, Some(&report)),
        Some(shown),
    );
    let current = serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .unwrap_or(Value::Null);
    let digest = fingerprint(&desired.to_string());
    if desired == current && ctx.may_skip_status(obj, digest) {
        return Ok(());
    }
    ctx.sending_status(obj, digest);
    let version = put_status::<K>(ctx, obj, desired).await?;
    ctx.wrote(obj, version);

    let changed = previous.as_ref().is_none_or(|p| {
        p.phase != report.phase || (report.phase == Phase::Failed && p.message != report.message)
    });
    if changed {
        let kind = if report.phase == Phase::Failed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        publish(
            ctx,
            obj,
            kind,
            status::ready_reason(report.phase),
            &report.message,
        )
        .await;
    }
    if let Some(c) = connectable {
        let kind = if c.status {
            EventType::Normal
        } else {
            EventType::Warning
        };
        publish(ctx, obj, kind, &c.reason, &c.message).await;
    }
    Ok(())
}

/// Takes account IDs out of what the status shows, and keeps its message
/// far below etcd's size limit whatever configuration and cloud errors it
/// quotes.
fn shown_safely(report: &mut Report) {
    report.message = truncate(&without_account_ids(&report.message), 4096);
    for condition in &mut report.conditions {
        condition.message = without_account_ids(&condition.message);
    }
    // A pending change's values may be ARNs too (a KMS key, a role).
    for change in &mut report.pending {
        change.current = without_account_ids(&change.current);
        change.desired = without_account_ids(&change.desired);
    }
}

/// The `Connectable` condition of `now` when it turned: a check that held
/// fails (or fails for another reason), or holds again. A first verdict is
/// news only in the status (a resource just complete, a restart).
fn connectable_turned<'a>(
    before: &[Condition],
    now: &'a [cro_provider_api::Condition],
) -> Option<&'a cro_provider_api::Condition> {
    let now = now.iter().find(|c| c.type_ == ConditionType::Connectable)?;
    let before = conditions::find(before, ConditionType::Connectable)?;
    let held = before.status == conditions::status_of(true);
    match now.status {
        true => (!held).then_some(now),
        false => (held || before.reason != now.reason).then_some(now),
    }
}

/// Observes the time from `obj`'s creation to its first complete phase,
/// by kind, strategy and tier.
fn record_time_to_ready<K: Managed>(ctx: &Context, obj: &K, strategy: &str, tier: &str) {
    let created = obj.meta().creation_timestamp.as_ref().map(|t| t.0);
    if let Some(age) = created.and_then(|c| (Timestamp::now() - c).try_into().ok()) {
        ctx.metrics
            .time_to_ready(&K::kind(&()), strategy, tier, age);
    }
}

/// The longest identifier a metric label takes from the CR's annotation
/// (AWS's longest, an S3 bucket's, is 63; a GCP or pinned one fits too).
const MAX_IDENTIFIER_LABEL: usize = 255;

/// The Go operator's labels for `obj`'s phase gauge.
pub fn metric_labels<K: Managed>(ctx: &Context, obj: &K, report: Option<&Report>) -> ObjectLabels {
    let label = |key: &str| obj.labels().get(key).cloned().unwrap_or_default();
    // The annotation is the tenant's to write, at any length: a label
    // value longer than any cloud identifier is not one.
    let instance = report
        .and_then(|r| r.instance_id.clone().or_else(|| r.snapshot_id.clone()))
        .or_else(|| {
            (obj.annotations().get(RESOURCE_IDENTIFIER_ANNOTATION))
                .filter(|id| id.len() <= MAX_IDENTIFIER_LABEL)
                .cloned()
        });
    ObjectLabels {
        clusterID: ctx.settings.cluster_id.clone(),
        resourceID: obj.name_any(),
        namespace: obj.namespace().unwrap_or_default(),
        instanceID: instance.unwrap_or_default(),
        productName: label(PRODUCT_NAME_LABEL),
        strategy: report
            .and_then(|r| r.provider.clone().or_else(|| r.strategy.clone()))
            .unwrap_or_default(),
    }
}

/// Server-side applies the status. A stored status that does not match the
/// schema (written under an older one) makes the API server refuse any
/// apply ("failed to create typed live object"); such a status is replaced
/// whole, once, and applies work again from then on.
async fn put_status<K: Managed>(
    ctx: &Context,
    obj: &K,
    desired: Value,
) -> Result<Option<String>, Error> {
    let name = obj.name_any();
    let action = || format!("writing status of {} {name}", K::kind(&()));
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": desired,
    });
    let applied = api
        .patch_status(
            &name,
            &PatchParams::apply("cloud-resource-operator").force(),
            &Patch::Apply(&patch),
        )
        .await;
    match applied {
        Ok(written) => Ok(written.resource_version()),
        Err(kube::Error::Api(e)) if schema_mismatch(&e.message) => {
            warn!(error = %e.message, "the stored status does not match the schema; replacing it whole");
            let replace: json_patch::Patch = serde_json::from_value(json!([
                {"op": "add", "path": "/status", "value": desired}
            ]))
            .map_err(|e| Error::Internal(format!("building a status patch: {e}")))?;
            let written = api
                .patch_status(&name, &PatchParams::default(), &Patch::<()>::Json(replace))
                .await
                .map_err(Error::kube(action()))?;
            Ok(written.resource_version())
        }
        Err(e) => Err(Error::kube(action())(e)),
    }
}

/// How the API server's server-side apply says a stored object does not
/// match the schema.
fn schema_mismatch(message: &str) -> bool {
    message.contains("typed live object") || message.contains("to smd typed")
}

/// The first move to `complete` since creation: from no phase or `in
/// progress`, never Ready before, spec never changed.
fn became_ready_first_time<K: Managed>(
    obj: &K,
    previous: Option<&Report>,
    report: &Report,
) -> bool {
    let from_start = previous.is_none_or(|p| p.phase == Phase::InProgress);
    let never_ready = !conditions::is(obj.conditions(), ConditionType::Ready, true);
    report.phase == Phase::Complete
        && from_start
        && never_ready
        && obj.meta().generation.is_none_or(|g| g <= 1)
}

/// Publishes an Event about `obj`. Repeats of the same reason and note on
/// the same object are one Event series (see [`events`]), not
/// a stream of Events: the reference leaves out the resourceVersion (every
/// status write changes it), and the action carries a fingerprint of the
/// note, so a changed message starts a new Event instead of hiding behind
/// the first one's text.
pub(crate) async fn publish<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let note = truncate(&without_account_ids(note), 1000);
    let action = format!("Reconcile-{:08x}", fingerprint(&note));
    let mut reference = obj.object_ref(&());
    reference.resource_version = None;
    let event = (type_, reason, action.as_str());
    match ctx.events.publish(event, &note, &reference).await {
        Ok(()) => {}
        // A namespace being deleted takes no new Events; nothing is lost.
        Err(e) if error::namespace_terminating(&e) => {
            debug!(object = %key(obj), "namespace terminating; event not published")
        }
        Err(e) => warn!(object = %key(obj), error = %e, "could not publish event"),
    }
}

/// Calls `call` (the provider) unless the same inputs failed less than
/// [`FAILED_RETRY`] ago for a reason that needs a person: the status
/// write of that failure triggers another reconcile, and the cloud would
/// only refuse again. A change to the CR or its configuration changes the
/// inputs and calls at once.
pub async fn unless_parked<T, K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    inputs: &impl Serialize,
    call: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let inputs = u64::from(fingerprint(
        &serde_json::to_string(inputs).unwrap_or_default(),
    ));
    if let Some((label, message)) = ctx.parked(obj, inputs, FAILED_RETRY) {
        return Err(Error::Parked { label, message });
    }
    let result = call.await;
    if let Err(e) = &result
        && !e.is_transient()
    {
        ctx.park(obj, inputs, e.label(), e.to_string());
    }
    result
}

/// FNV-1a: stable across processes and releases (unlike std's hasher).
fn fingerprint(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5, |h: u32, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// `s` with the account ID of every ARN in it hidden
/// (`arn:aws:iam::<account>:role/x`): status and Events are read by anyone
/// who may read the CR, and a tenant has no need of the platform's account
/// IDs; the logs keep them.
pub(crate) fn without_account_ids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("arn:") {
        out.push_str(&rest[..i]);
        let arn = &rest[i..];
        // arn:<partition>:<service>:<region>:<account>:<resource>
        let colons: Vec<usize> = arn.match_indices(':').map(|(j, _)| j).take(5).collect();
        if let [_, _, _, region_end, account_end] = colons[..]
            && !arn[..account_end].contains(char::is_whitespace)
            && arn[region_end + 1..account_end].len() == 12
            && arn[region_end + 1..account_end]
                .bytes()
                .all(|b| b.is_ascii_digit())
        {
            out.push_str(&arn[..=region_end]);
            out.push_str("<account>");
            rest = &arn[account_end..];
        } else {
            out.push_str("arn:");
            rest = &arn[4..];
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};

    #[test]
    fn account_ids_are_hidden_in_arns_and_nothing_else_changes() {
        let cases = [
            (
                "role arn:aws:iam::555566667777:role/cro-denied cannot be assumed: check its trust policy",
                "role arn:aws:iam::<account>:role/cro-denied cannot be assumed: check its trust policy",
            ),
            (
                "User: arn:aws:sts::123456789012:assumed-role/cro/s is not authorized (arn:aws-cn:rds:cn-north-1:123456789012:db:x)",
                "User: arn:aws:sts::<account>:assumed-role/cro/s is not authorized (arn:aws-cn:rds:cn-north-1:<account>:db:x)",
            ),
            // No account, or not an ARN: unchanged.
            (
                "bucket arn:aws:s3:::b1 and 123456789012",
                "bucket arn:aws:s3:::b1 and 123456789012",
            ),
            ("arn: 123456789012: x", "arn: 123456789012: x"),
            ("ends with arn:", "ends with arn:"),
            ("é arn:aws:iam::1234:role/x", "é arn:aws:iam::1234:role/x"),
        ];
        for (given, shown) in cases {
            assert_eq!(without_account_ids(given), shown);
        }
    }

    fn ready_false_since(secs_ago: i64) -> Vec<Condition> {
        vec![Condition {
            type_: ConditionType::Ready.to_string(),
            status: "False".into(),
            reason: "InProgress".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(
                Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(secs_ago),
            ),
        }]
    }

    #[test]
    fn connectable_is_news_when_it_turns() {
        let before = |status: bool, reason: &str| Condition {
            type_: ConditionType::Connectable.to_string(),
            status: conditions::status_of(status).into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::UNIX_EPOCH,
            ),
        };
        let now = |status: bool, reason: &str| {
            [cro_provider_api::Condition {
                type_: ConditionType::Connectable,
                status,
                reason: reason.into(),
                message: String::new(),
            }]
        };
        let turned = |b: Option<Condition>, n: &[cro_provider_api::Condition]| {
            connectable_turned(b.as_slice(), n).map(|c| c.reason.clone())
        };
        let full = now(false, "StorageFull");
        assert_eq!(
            turned(Some(before(true, "Connected")), &full).as_deref(),
            Some("StorageFull")
        );
        assert_eq!(
            turned(Some(before(false, "TimedOut")), &full).as_deref(),
            Some("StorageFull")
        );
        assert_eq!(turned(Some(before(false, "StorageFull")), &full), None);
        let back = now(true, "Connected");
        assert_eq!(
            turned(Some(before(false, "StorageFull")), &back).as_deref(),
            Some("Connected")
        );
        assert_eq!(turned(Some(before(true, "Connected")), &back), None);
        assert_eq!(turned(None, &full), None, "a first verdict");
        assert_eq!(turned(Some(before(true, "Connected")), &[]), None);
    }

    #[test]
    fn in_progress_polling_backs_off_with_elapsed_time() {
        assert_eq!(in_progress_requeue(&[]), Duration::from_secs(5));
        assert_eq!(
            in_progress_requeue(&ready_false_since(8)),
            Duration::from_secs(5)
        );
        let mid = in_progress_requeue(&ready_false_since(200));
        assert!(
            mid >= Duration::from_secs(49) && mid <= Duration::from_secs(51),
            "{mid:?}"
        );
        assert_eq!(
            in_progress_requeue(&ready_false_since(3600)),
            Duration::from_secs(120)
        );
    }
}
