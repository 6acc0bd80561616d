//! The reconcile skeleton against an API server in memory
//! ([`super::mock_api`]) and a kind whose spec scripts what its reconcile
//! and cleanup answer: the finalizer, status written only on change,
//! Events, failures, deletion, echoes of the operator's own writes. No
//! test environment; each test takes milliseconds.

use std::{sync::Arc, time::Duration};

use cro_provider_api::{Deletion, ErrorKind, ProviderError};
use kube::{CustomResource, core::DeserializeGuard, runtime::controller::Action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    Context, Error, Report,
    finalizer::FINALIZER,
    mock_api::{self, MockApi, Recorded},
};
use crate::{
    api::{Phase, SnapshotStatus},
    connectivity::Checker,
};
use cro_runtime::shard::Shard;

/// A test kind: `outcome` is what its reconcile answers, `cleanup` what
/// its cleanup does.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "test.integreatly.org",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "SnapshotStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    outcome: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    cleanup: String,
    #[serde(default)]
    skip_create: bool,
}

/// What a Widget's controller does: what its spec scripts.
struct Widgets;

#[async_trait::async_trait]
impl super::Reconciler<Widget> for Widgets {
    async fn reconcile(
        &self,
        w: &Widget,
        _: &Context,
    ) -> Result<(Report, Option<Duration>), Error> {
        let message = w.spec.message.clone();
        match w.spec.outcome.as_str() {
            "complete" => Ok((Report::new(Phase::Complete, message), None)),
            "in-progress" => Ok((
                Report::new(Phase::InProgress, message),
                Some(Duration::from_secs(7)),
            )),
            "transient" => Err(ProviderError::transient(message).into()),
            "throttled" => Err(ProviderError::new(ErrorKind::Throttled, message).into()),
            _ => Err(Error::Invalid(message)),
        }
    }

    async fn cleanup(&self, w: &Widget, _: &Context) -> Result<Deletion, Error> {
        match w.spec.cleanup.as_str() {
            "in-progress" => Ok(Deletion::InProgress("deleting the cloud resource".into())),
            _ => Ok(Deletion::Done),
        }
    }

    fn skip_create(&self, w: &Widget) -> bool {
        w.spec.skip_create
    }
}

struct Harness {
    api: MockApi,
    ctx: Arc<Context>,
}

impl Harness {
    fn new() -> Harness {
        Harness::sharded(Shard::default())
    }

    fn sharded(shard: Shard) -> Harness {
        let (api, client) = MockApi::start();
        let timeout = Duration::from_secs(1);
        let objects = Arc::new(super::Objects::default());
        let checker = Arc::new(Checker::new(timeout, timeout, objects.clone()));
        let ctx = mock_api::context(
            client,
            mock_api::settings(shard),
            Vec::new(),
            (checker, objects),
            Vec::new(),
        );
        Harness {
            api,
            ctx: Arc::new(ctx),
        }
    }

    /// A Widget as a user creates it in namespace `app`.
    fn create(&self, namespace: &str, spec: Value) -> Widget {
        let stored = self.api.put(json!({
            "apiVersion": "test.integreatly.org/v1",
            "kind": "Widget",
            "metadata": {
                "name": "w", "namespace": namespace, "uid": "0b5e-uid", "generation": 1,
                "creationTimestamp": "2026-11-27T09:00:00Z",
            },
            "spec": spec,
        }));
        serde_json::from_value(stored).expect("a Widget")
    }

    /// The Widget as the API server holds it now (the next watch event).
    fn current(&self, w: &Widget) -> Option<Widget> {
        let stored = self.api.stored(&serde_json::to_value(w).expect("JSON"))?;
        Some(serde_json::from_value(stored).expect("a Widget"))
    }

    /// `w` as the API server holds it once a user deleted it (its
    /// finalizers hold it).
    fn delete(&self, w: &Widget) -> Widget {
        let mut deleting = self.current(w).expect("stored");
        deleting.metadata.deletion_timestamp = Some(now());
        let stored = self.api.put(serde_json::to_value(&deleting).expect("JSON"));
        serde_json::from_value(stored).expect("a Widget")
    }

    /// Reconciles `w` as the controller would hand it over.
    async fn reconcile(&self, w: &Widget) -> Result<Action, Error> {
        let guarded = Arc::new(DeserializeGuard(Ok(w.clone())));
        super::reconcile(guarded, self.ctx.clone(), Arc::new(Widgets)).await
    }

    /// Reconciles the stored Widget until a pass writes nothing; every
    /// request made on the way.
    async fn settle(&self, w: &Widget) -> Vec<Recorded> {
        let mut all = Vec::new();
        for _ in 0..5 {
            let now = self.current(w).expect("the Widget is stored");
            let _ = self.reconcile(&now).await;
            let sent = self.api.take();
            if sent.is_empty() {
                return all;
            }
            all.extend(sent);
        }
        panic!("still writing after 5 passes: {all:#?}");
    }
}

fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

fn status_writes(sent: &[Recorded]) -> usize {
    sent.iter().filter(|r| r.is_status_write()).count()
}

/// The reasons of the Events sent (created or counted into a series).
fn event_reasons(sent: &[Recorded]) -> Vec<String> {
    (sent.iter().filter(|r| r.is_event()))
        .filter_map(|r| r.body["reason"].as_str().map(str::to_string))
        .collect()
}

fn phase(w: &Widget) -> Option<Phase> {
    w.status.as_ref()?.phase
}

#[tokio::test]
async fn a_new_object_gets_the_finalizer_then_its_status_and_one_event() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "complete", "message": "ready"}));
    let action = h.reconcile(&w).await.expect("reconciled");
    assert_eq!(action, Action::await_change());
    let sent = h.api.take();
    let finalizer = &sent[0];
    assert_eq!(finalizer.method, http::Method::PATCH);
    assert!(finalizer.body.to_string().contains(FINALIZER), "{sent:#?}");
    assert_eq!(status_writes(&sent), 1, "{sent:#?}");
    assert_eq!(event_reasons(&sent), ["Complete"]);
    let now = h.current(&w).expect("stored");
    assert_eq!(phase(&now), Some(Phase::Complete));
    assert_eq!(now.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    let ready = &now.status.as_ref().expect("a status").conditions[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "True")
    );
}

#[tokio::test]
async fn an_unchanged_result_writes_nothing() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "complete", "message": "ready"}));
    h.settle(&w).await;
    let now = h.current(&w).expect("stored");
    assert!(h.reconcile(&now).await.is_ok());
    let sent = h.api.take();
    assert!(
        sent.is_empty(),
        "a reconcile with nothing new wrote: {sent:#?}"
    );
}

#[tokio::test]
async fn a_failure_needing_a_person_is_shown_once_and_retried_after_an_hour() {
    let h = Harness::new();
    let w = h.create(
        "app",
        json!({"outcome": "invalid", "message": "tier gold not found"}),
    );
    let action = h
        .reconcile(&w)
        .await
        .expect("a permanent failure is reported, not retried");
    assert_eq!(action, Action::requeue(Duration::from_secs(3600)));
    let sent = h.api.take();
    assert_eq!(event_reasons(&sent), ["Failed"]);
    let now = h.current(&w).expect("stored");
    assert_eq!(phase(&now), Some(Phase::Failed));
    let status = now.status.as_ref().expect("a status");
    assert_eq!(status.message.as_deref(), Some("tier gold not found"));
    // The same failure again: neither a write nor another Event.
    assert!(h.reconcile(&now).await.is_ok());
    assert!(h.api.take().is_empty());
}

#[tokio::test]
async fn a_transient_failure_is_retried_with_a_warning_and_the_error_in_status() {
    let h = Harness::new();
    let w = h.create(
        "app",
        json!({"outcome": "transient", "message": "RDS did not answer"}),
    );
    let err = h
        .reconcile(&w)
        .await
        .expect_err("a transient failure goes to the error policy");
    assert!(err.is_transient());
    let sent = h.api.take();
    assert!(
        event_reasons(&sent).contains(&"ReconcileError".to_string()),
        "{sent:#?}"
    );
    let now = h.current(&w).expect("stored");
    let message = now.status.and_then(|s| s.message).unwrap_or_default();
    assert_eq!(message, "retrying after error: RDS did not answer");
}

#[tokio::test]
async fn a_status_whose_answer_was_lost_is_written_again_over_a_stale_cache() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "complete", "message": "ready"}));
    h.reconcile(&w).await.expect("reconciled");
    let complete = h.current(&w).expect("stored");
    h.api.take();
    // A pass fails, and the answer to its error status is lost: the
    // status is written, this process does not know it.
    let mut failing = complete.clone();
    failing.spec.outcome = "transient".into();
    failing.spec.message = "RDS did not answer".into();
    h.api.lose_next_answer();
    h.reconcile(&failing)
        .await
        .expect_err("a transient failure");
    let now = h.current(&w).expect("stored");
    assert_eq!(
        now.status.and_then(|s| s.message).as_deref(),
        Some("retrying after error: RDS did not answer")
    );
    h.api.take();
    // The next pass starts from a cache that never showed that write: its
    // status matches the cache, yet must be written.
    h.reconcile(&complete).await.expect("reconciled");
    assert_eq!(status_writes(&h.api.take()), 1);
    let now = h.current(&w).expect("stored");
    assert_eq!(now.status.and_then(|s| s.message).as_deref(), Some("ready"));
}

#[tokio::test]
async fn throttling_is_retried_without_a_warning() {
    let h = Harness::new();
    let w = h.create(
        "app",
        json!({"outcome": "throttled", "message": "Rate exceeded"}),
    );
    let err = h.reconcile(&w).await.expect_err("throttling is retried");
    assert!(err.is_throttled());
    let sent = h.api.take();
    assert!(
        !event_reasons(&sent).contains(&"ReconcileError".to_string()),
        "{sent:#?}"
    );
    assert_eq!(
        status_writes(&sent),
        1,
        "the retry is still shown in status"
    );
}

#[tokio::test]
async fn in_progress_is_looked_at_again_when_the_kind_asks() {
    let h = Harness::new();
    let w = h.create(
        "app",
        json!({"outcome": "in-progress", "message": "creating"}),
    );
    let action = h.reconcile(&w).await.expect("reconciled");
    assert_eq!(action, Action::requeue(Duration::from_secs(7)));
    let now = h.current(&w).expect("stored");
    assert_eq!(phase(&now), Some(Phase::InProgress));
}

#[tokio::test]
async fn skip_create_pauses_without_asking_the_kind() {
    let h = Harness::new();
    // `invalid` would fail: a paused object must never get that far.
    let w = h.create("app", json!({"outcome": "invalid", "skipCreate": true}));
    assert_eq!(
        h.reconcile(&w).await.expect("paused"),
        Action::await_change()
    );
    let now = h.current(&w).expect("stored");
    assert_eq!(phase(&now), Some(Phase::Paused));
    let message = now.status.and_then(|s| s.message).unwrap_or_default();
    assert_eq!(message, super::SKIP_CREATE_MESSAGE);
}

#[tokio::test]
async fn a_deletion_in_progress_keeps_the_finalizer_and_says_so() {
    let h = Harness::new();
    let w = h.create(
        "app",
        json!({"outcome": "complete", "cleanup": "in-progress"}),
    );
    h.settle(&w).await;
    let deleting = h.delete(&w);
    let action = h.reconcile(&deleting).await.expect("reconciled");
    assert!(
        action != Action::await_change(),
        "a deletion in progress is looked at again"
    );
    let now = h.current(&w).expect("still there: the finalizer holds it");
    assert_eq!(phase(&now), Some(Phase::DeleteInProgress));
    assert_eq!(now.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
}

#[tokio::test]
async fn a_finished_cleanup_removes_the_finalizer_and_the_object_goes() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "complete"}));
    h.settle(&w).await;
    let deleting = h.delete(&w);
    assert_eq!(
        h.reconcile(&deleting).await.expect("deleted"),
        Action::await_change()
    );
    let sent = h.api.take();
    assert_eq!(
        status_writes(&sent),
        0,
        "nothing is written to an object on its way out"
    );
    assert!(
        h.current(&w).is_none(),
        "the finalizer was not removed: {sent:#?}"
    );
}

#[tokio::test]
async fn an_object_deleted_without_our_finalizer_is_left_alone() {
    let h = Harness::new();
    let mut w = h.create("app", json!({"outcome": "complete"}));
    w.metadata.deletion_timestamp = Some(now());
    w.metadata.finalizers = Some(vec!["someone.else/finalizer".into()]);
    assert_eq!(
        h.reconcile(&w).await.expect("reconciled"),
        Action::await_change()
    );
    assert!(h.api.take().is_empty());
}

#[tokio::test]
async fn another_shards_namespace_is_not_touched() {
    let shard = Shard::new(0, 2).expect("two shards");
    let namespace = (0..100)
        .map(|i| format!("team-{i}"))
        .find(|ns| !shard.owns(ns))
        .expect("some namespace belongs to the other shard");
    let h = Harness::sharded(shard);
    let w = h.create(&namespace, json!({"outcome": "complete"}));
    assert_eq!(
        h.reconcile(&w).await.expect("skipped"),
        Action::await_change()
    );
    assert!(h.api.take().is_empty());
}

#[tokio::test]
async fn a_cache_behind_the_operators_last_write_waits_for_it() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "complete"}));
    h.reconcile(&w).await.expect("reconciled");
    h.api.take();
    // The cache still shows the version before the operator's own writes.
    let action = h.reconcile(&w).await.expect("not reconciled again");
    assert_eq!(action, Action::requeue(super::CACHE_BEHIND_RETRY));
    assert!(h.api.take().is_empty(), "a stale version was written over");
    // Once it shows the write, the reconcile runs, and finds nothing to do.
    let caught_up = h.current(&w).expect("stored");
    assert_eq!(
        h.reconcile(&caught_up).await.expect("reconciled"),
        Action::await_change()
    );
    assert!(h.api.take().is_empty());
}

#[tokio::test]
async fn account_ids_never_reach_status_or_events() {
    let h = Harness::new();
    let message =
        "AccessDenied: arn:aws:iam::123456789012:role/cro may not call rds:CreateDBInstance";
    let w = h.create("app", json!({"outcome": "invalid", "message": message}));
    h.reconcile(&w).await.expect("reported");
    let sent = h.api.take();
    let written =
        serde_json::to_string(&sent.iter().map(|r| &r.body).collect::<Vec<_>>()).expect("JSON");
    assert!(!written.contains("123456789012"), "{written}");
    assert!(written.contains("may not call rds:CreateDBInstance"));
}

#[tokio::test]
async fn an_object_whose_spec_does_not_parse_is_failed_naming_the_field() {
    let h = Harness::new();
    let stored = h.api.put(json!({
        "apiVersion": "test.integreatly.org/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "app", "uid": "0b5e-uid", "generation": 1},
        "spec": {"outcome": "complete", "skipCreate": "yes"},
    }));
    let guarded: DeserializeGuard<Widget> =
        serde_json::from_value(stored.clone()).expect("guarded");
    assert!(
        guarded.0.is_err(),
        "the test needs a spec that does not parse"
    );
    super::reconcile(Arc::new(guarded), h.ctx.clone(), Arc::new(Widgets))
        .await
        .expect("reported");
    let status = &h.api.stored(&stored).expect("stored")["status"];
    assert_eq!(status["phase"], "failed");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("skipCreate"), "{message}");
}

/// Transient failures back off per object, doubling; a success starts the
/// count again, and another object's failures do not count.
#[tokio::test]
async fn transient_failures_back_off_per_object_until_one_succeeds() {
    let h = Harness::new();
    let w = h.create("app", json!({"outcome": "transient"}));
    let other = h.create("other", json!({"outcome": "transient"}));
    let waits: Vec<u64> = (0..3).map(|_| h.ctx.backoff(&w, false).as_secs()).collect();
    assert_eq!(waits, [5, 10, 20]);
    assert_eq!(h.ctx.backoff(&other, false).as_secs(), 5);
    h.ctx.succeeded(&w);
    assert_eq!(h.ctx.backoff(&w, false).as_secs(), 5);
    // The API server unavailable: back within 30 s whatever the count.
    for _ in 0..10 {
        assert!(h.ctx.backoff(&w, true) <= Duration::from_secs(30));
    }
}
