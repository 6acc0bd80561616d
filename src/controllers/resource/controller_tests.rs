//! The resource controller (`reconcile_resource`, `cleanup_resource`)
//! through the reconcile skeleton, with a provider whose answers each test
//! scripts and an API server in memory ([`crate::reconcile::mock_api`]):
//! what the provider is asked, and every write it costs. No test
//! environment; each test takes milliseconds (the connection check of a
//! complete Postgres is refused at once by 127.0.0.1:1).

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use cro_provider_api::{
    Change, ConnectionDetails, Deletion, ErrorKind, Outcome, Provider, ProviderError, Provisioned,
    ResourceRequest, SnapshotRequest, Snapshotted, Timing,
};
use kube::{core::DeserializeGuard, runtime::controller::Action};
use serde_json::{Value, json};

use crate::{
    api::{APPROVE_PLAN_ANNOTATION, Phase, Postgres, RESOURCE_IDENTIFIER_ANNOTATION},
    config::Located,
    connectivity::Checker,
    reconcile::{
        Context, Error, Objects,
        finalizer::FINALIZER,
        mock_api::{self, MockApi, Recorded},
    },
};
use cro_runtime::shard::Shard;

/// What the fake provider answers to one `reconcile`.
#[derive(Clone)]
enum Step {
    InProgress(&'static str),
    Ready,
    /// Ready, with changes from the tier not applied.
    ReadyPending,
    /// Ready after requesting what a maintenance window allowed.
    ReadyInWindow,
    Fail(ErrorKind, &'static str),
}

/// A provider whose answers are scripted: each `reconcile` takes the next
/// step (the last repeats), each `delete` the next deletion (then done).
struct Fake {
    steps: Mutex<VecDeque<Step>>,
    deletions: Mutex<VecDeque<Deletion>>,
    asked: Mutex<Vec<ResourceRequest>>,
    deleted: Mutex<Vec<ResourceRequest>>,
    /// Whether it says it takes snapshots (restores need one that does).
    snapshots: std::sync::atomic::AtomicBool,
}

/// A name the configuration accepts (the in-cluster provider's): the
/// controller treats every provider alike.
const PROVIDER: &str = "openshift";

impl Fake {
    fn new(steps: &[Step]) -> Fake {
        Fake {
            steps: Mutex::new(steps.iter().cloned().collect()),
            deletions: Mutex::default(),
            asked: Mutex::default(),
            deleted: Mutex::default(),
            snapshots: Default::default(),
        }
    }

    fn step(&self) -> Step {
        let mut steps = self.steps.lock().unwrap_or_else(|e| e.into_inner());
        match steps.len() {
            0 => Step::Ready,
            1 => steps[0].clone(),
            _ => steps.pop_front().unwrap_or(Step::Ready),
        }
    }

    fn asked(&self) -> Vec<ResourceRequest> {
        self.asked.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The connection Secret's keys: a server nothing listens on.
fn details() -> ConnectionDetails {
    let pairs = [
        ("host", "127.0.0.1"),
        ("port", "1"),
        ("username", "app"),
        ("password", "s3cret"),
        ("database", "orders"),
    ];
    ConnectionDetails(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn change() -> Change {
    Change {
        field: "DBInstanceClass".into(),
        current: "db.t3.small".into(),
        desired: "db.t3.medium".into(),
        timing: Timing::Now,
        restarts: true,
    }
}

#[async_trait::async_trait]
impl Provider for Fake {
    fn name(&self) -> &'static str {
        PROVIDER
    }

    async fn reconcile(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        self.asked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.clone());
        let ready = |p: &mut Provisioned| {
            p.outcome = Outcome::Ready(details());
            p.identifier = Some(format!("fake-{}", req.name));
        };
        let mut p = Provisioned::new("fake-db", Outcome::InProgress(String::new()));
        match self.step() {
            Step::InProgress(why) => p.outcome = Outcome::InProgress(why.into()),
            Step::Ready => ready(&mut p),
            Step::ReadyPending => {
                ready(&mut p);
                p.pending = vec![change()];
            }
            Step::ReadyInWindow => {
                ready(&mut p);
                p.maintenance_window_used = true;
            }
            Step::Fail(kind, why) => return Err(ProviderError::new(kind, why)),
        }
        Ok(p)
    }

    async fn delete(&self, req: &ResourceRequest) -> Result<Deletion, ProviderError> {
        self.deleted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.clone());
        let next = self
            .deletions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front();
        Ok(next.unwrap_or(Deletion::Done))
    }

    async fn snapshot(&self, _: &SnapshotRequest) -> Result<Snapshotted, ProviderError> {
        Err(ProviderError::permanent(
            "the fake provider takes no snapshots",
        ))
    }

    fn takes_snapshots(&self) -> bool {
        self.snapshots.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn delete_snapshot(&self, _: &SnapshotRequest) -> Result<Deletion, ProviderError> {
        Ok(Deletion::Done)
    }

    async fn plan(&self, _: &ResourceRequest) -> Result<Vec<Change>, ProviderError> {
        Ok(Vec::new())
    }
}

/// `cloud-resource-config` mapping type `fake` to the fake provider, and
/// its strategies: tiers `development`, `production` and `planned` (whose
/// changes wait for an approval).
fn configuration() -> Vec<Located> {
    let located = |name: &str, data: &[(&str, Value)]| Located {
        namespace: "cloud-resource-operator".into(),
        name: name.into(),
        data: data
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let types = json!({"postgres": PROVIDER, "redis": PROVIDER, "blobstorage": PROVIDER, "smtpcredentials": PROVIDER});
    let tiers = json!({
        "development": {"region": "", "createStrategy": {"size": "small"}, "deleteStrategy": {}},
        "production": {"region": "", "createStrategy": {"size": "large"}, "deleteStrategy": {}},
        "planned": {"region": "", "createStrategy": {"size": "small"}, "deleteStrategy": {}, "changePolicy": "Plan"},
    });
    vec![
        located("cloud-resource-config", &[("fake", types)]),
        located(
            "cloud-resources-openshift-strategies",
            &[("postgres", tiers)],
        ),
    ]
}

struct Harness {
    api: MockApi,
    ctx: Arc<Context>,
    fake: Arc<Fake>,
}

impl Harness {
    fn new(steps: &[Step]) -> Harness {
        let (api, client) = MockApi::start();
        let objects = Arc::new(Objects::default());
        let checker = Arc::new(Checker::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            objects.clone(),
        ));
        tokio::spawn(checker.clone().run());
        let fake = Arc::new(Fake::new(steps));
        let provider: Arc<dyn Provider> = fake.clone();
        let settings = mock_api::settings(Shard::default());
        let ctx = mock_api::context(
            client,
            settings,
            vec![provider],
            (checker, objects),
            configuration(),
        );
        Harness {
            api,
            ctx: Arc::new(ctx),
            fake,
        }
    }

    /// Postgres `app/db` as a user creates it, with `spec` over type
    /// `fake`, tier `development` and Secret `db-sec`.
    fn create(&self, spec: Value) -> Postgres {
        let mut full =
            json!({"type": "fake", "tier": "development", "secretRef": {"name": "db-sec"}});
        json_patch::merge(&mut full, &spec);
        let stored = self.api.put(json!({
            "apiVersion": "integreatly.org/v1alpha1",
            "kind": "Postgres",
            "metadata": {
                "name": "db", "namespace": "app", "uid": "d0b-uid", "generation": 1,
                "creationTimestamp": "2026-12-01T09:00:00Z",
            },
            "spec": full,
        }));
        serde_json::from_value(stored).expect("a Postgres")
    }

    fn current(&self) -> Postgres {
        let like = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "db", "namespace": "app"}});
        serde_json::from_value(self.api.stored(&like).expect("stored")).expect("a Postgres")
    }

    /// A user's edit: `change` merged into the stored object, a new
    /// generation when it touches the spec.
    fn edit(&self, change: Value) {
        let mut stored = serde_json::to_value(self.current()).expect("JSON");
        let generation = stored["metadata"]["generation"].as_i64().unwrap_or(1);
        if change.get("spec").is_some() {
            stored["metadata"]["generation"] = json!(generation + 1);
        }
        json_patch::merge(&mut stored, &change);
        self.api.put(stored);
    }

    async fn reconcile(&self) -> Result<Action, Error> {
        let guarded = Arc::new(DeserializeGuard(Ok(self.current())));
        crate::reconcile::reconcile(guarded, self.ctx.clone(), Arc::new(super::Resources)).await
    }

    /// One reconcile of the stored Postgres; the requests it made.
    async fn pass(&self) -> (Result<Action, Error>, Vec<Recorded>) {
        let result = self.reconcile().await;
        (result, self.api.take())
    }

    fn secret(&self) -> Option<Value> {
        self.api.stored_at("/api/v1/namespaces/app/secrets/db-sec")
    }

    /// Reconciles until a pass writes nothing (at most five); the writes.
    async fn settle(&self) -> Vec<String> {
        let mut all = Vec::new();
        for _ in 0..5 {
            let (_, sent) = self.pass().await;
            let written = writes(&sent);
            if written.is_empty() {
                return all;
            }
            all.extend(written);
        }
        panic!("still writing after 5 passes: {all:?}");
    }

    /// The stored Postgres as a user's deletion leaves it (its finalizer
    /// holds it).
    fn delete(&self) {
        let mut stored = serde_json::to_value(self.current()).expect("JSON");
        stored["metadata"]["deletionTimestamp"] = json!("2026-12-01T10:00:00Z");
        self.api.put(stored);
    }

    fn gone(&self) -> bool {
        let like = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres",
            "metadata": {"name": "db", "namespace": "app"}});
        self.api.stored(&like).is_none()
    }
}

/// Each write as `METHOD resource` (`postgres`, `postgres/status`,
/// `secrets`, `events`); reads left out.
fn writes(sent: &[Recorded]) -> Vec<String> {
    sent.iter()
        .filter(|r| r.method != http::Method::GET)
        .map(|r| {
            let segments: Vec<&str> = r.path.split('/').collect();
            let n = segments.len();
            let resource = match segments[n - 1] {
                "status" => format!("{}/status", segments[n.saturating_sub(3)]),
                "events" | "secrets" => segments[n - 1].to_string(),
                _ => segments[n.saturating_sub(2)].to_string(),
            };
            format!("{} {resource}", r.method)
        })
        .collect()
}

fn phase(pg: &Postgres) -> Option<Phase> {
    pg.status.as_ref()?.phase
}

fn message(pg: &Postgres) -> String {
    (pg.status.as_ref())
        .and_then(|s| s.message.clone())
        .unwrap_or_default()
}

/// The condition's status and reason.
fn condition(pg: &Postgres, type_: &str) -> Option<(String, String)> {
    let status = pg.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_new_postgres_ready_at_once_writes_its_cr_secret_and_status_once_each() {
    let h = Harness::new(&[Step::Ready]);
    h.create(json!({}));
    let (result, sent) = h.pass().await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        writes(&sent),
        strings(&[
            "PATCH postgres", // the finalizer
            "PATCH postgres", // the identifier
            "POST secrets",
            "PATCH postgres/status", // complete, and its connection
            "POST events",
        ])
    );
    let pg = h.current();
    assert_eq!(phase(&pg), Some(Phase::Complete));
    assert_eq!(pg.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    let annotations = pg.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get(RESOURCE_IDENTIFIER_ANNOTATION)
            .map(String::as_str),
        Some("fake-db")
    );
    // The first connection check's verdict came with `complete`.
    assert_eq!(
        condition(&pg, "Connectable"),
        Some(("False".into(), "ConnectionRefused".into()))
    );
    let secret = h.secret().expect("the Secret was created");
    let keys: Vec<&String> = secret["data"]
        .as_object()
        .map(|d| d.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["database", "host", "password", "port", "username"]);
    // Asked once, for the tier's strategy; nothing more to write.
    let asked = h.fake.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].strategy["createStrategy"]["size"], "small");
    assert_eq!(h.settle().await, Vec::<String>::new());
}

#[tokio::test]
async fn a_postgres_in_progress_writes_its_status_once_per_phase() {
    let h = Harness::new(&[
        Step::InProgress("creating"),
        Step::InProgress("creating"),
        Step::Ready,
    ]);
    h.create(json!({}));
    let (_, first) = h.pass().await;
    assert_eq!(
        writes(&first),
        strings(&["PATCH postgres", "PATCH postgres/status", "POST events"])
    );
    assert_eq!(
        (phase(&h.current()), message(&h.current())),
        (Some(Phase::InProgress), "creating".into())
    );
    // The same answer again: nothing to write.
    let (_, second) = h.pass().await;
    assert_eq!(writes(&second), Vec::<String>::new());
    let (_, third) = h.pass().await;
    assert_eq!(
        writes(&third),
        strings(&[
            "PATCH postgres",
            "POST secrets",
            "PATCH postgres/status",
            "POST events"
        ])
    );
    assert_eq!(phase(&h.current()), Some(Phase::Complete));
    assert_eq!(h.fake.asked().len(), 3);
}

#[tokio::test]
async fn a_spec_edit_is_asked_of_the_provider_and_costs_one_status_write() {
    let h = Harness::new(&[Step::Ready]);
    h.create(json!({}));
    h.settle().await;
    h.edit(json!({"spec": {"applyImmediately": true}}));
    let (_, sent) = h.pass().await;
    assert_eq!(writes(&sent), strings(&["PATCH postgres/status"]));
    let asked = h.fake.asked();
    assert!(asked.last().is_some_and(|r| r.options.apply_immediately));
    let pg = h.current();
    assert_eq!(
        pg.status.as_ref().and_then(|s| s.observed_generation),
        Some(2)
    );
}

#[tokio::test]
async fn a_tier_change_asks_the_provider_for_the_new_tiers_strategy() {
    let h = Harness::new(&[Step::Ready]);
    h.create(json!({}));
    h.settle().await;
    h.edit(json!({"spec": {"tier": "production"}}));
    h.settle().await;
    let last = h.fake.asked().pop().expect("asked");
    assert_eq!(
        (last.tier.as_str(), &last.strategy["createStrategy"]["size"]),
        ("production", &json!("large"))
    );
    assert_eq!(phase(&h.current()), Some(Phase::Complete));
}

#[tokio::test]
async fn a_transient_failure_is_shown_and_retried_until_complete() {
    let h = Harness::new(&[
        Step::Fail(ErrorKind::Transient, "the cloud answered 503"),
        Step::Ready,
    ]);
    h.create(json!({}));
    let (result, sent) = h.pass().await;
    let error = result.expect_err("a transient error is returned for the retry");
    assert!(error.is_transient());
    // The error where a person looks (a Warning), then the phase (Normal).
    assert_eq!(
        writes(&sent),
        strings(&[
            "PATCH postgres",
            "POST events",
            "PATCH postgres/status",
            "POST events"
        ])
    );
    assert_eq!(sent[1].body["reason"], "ReconcileError");
    assert_eq!(sent[1].body["type"], "Warning");
    let pg = h.current();
    assert_eq!(phase(&pg), Some(Phase::InProgress));
    assert!(
        message(&pg).contains("retrying after error") && message(&pg).contains("503"),
        "{}",
        message(&pg)
    );
    let (result, _) = h.pass().await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(phase(&h.current()), Some(Phase::Complete));
    assert_eq!(h.fake.asked().len(), 2);
}

#[tokio::test]
async fn a_failure_needing_a_person_is_not_asked_again_until_the_cr_changes() {
    let h = Harness::new(&[
        Step::Fail(ErrorKind::Permanent, "the account's quota is exceeded"),
        Step::Ready,
    ]);
    h.create(json!({}));
    let (result, sent) = h.pass().await;
    assert!(result.is_ok(), "waits for a change: {result:?}");
    assert_eq!(
        writes(&sent),
        strings(&["PATCH postgres", "PATCH postgres/status", "POST events"])
    );
    assert_eq!(phase(&h.current()), Some(Phase::Failed));
    assert!(message(&h.current()).contains("quota"));
    // The same inputs again: the provider is not asked, nothing written.
    let (_, again) = h.pass().await;
    assert_eq!((h.fake.asked().len(), writes(&again)), (1, Vec::new()));
    // A person's change is asked at once.
    h.edit(json!({"spec": {"applyImmediately": true}}));
    let (result, _) = h.pass().await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        (h.fake.asked().len(), phase(&h.current())),
        (2, Some(Phase::Complete))
    );
}

#[tokio::test]
async fn a_deletion_waits_for_the_provider_then_removes_the_secret_and_the_finalizer() {
    let h = Harness::new(&[Step::Ready]);
    h.create(json!({}));
    h.settle().await;
    h.fake
        .deletions
        .lock()
        .unwrap()
        .push_back(Deletion::InProgress("deleting the database".into()));
    h.delete();
    let (_, sent) = h.pass().await;
    assert_eq!(
        writes(&sent),
        strings(&["PATCH postgres/status", "POST events"])
    );
    assert_eq!(phase(&h.current()), Some(Phase::DeleteInProgress));
    assert!(h.secret().is_some(), "the Secret went before the database");
    let (_, sent) = h.pass().await;
    assert_eq!(
        writes(&sent),
        strings(&["DELETE secrets", "PATCH postgres"])
    );
    assert!(h.gone() && h.secret().is_none());
    let deleted = h.fake.deleted.lock().unwrap().clone();
    assert_eq!(deleted.len(), 2);
    assert_eq!(deleted[0].recorded_identifier.as_deref(), Some("fake-db"));
}

#[tokio::test]
async fn skip_create_pauses_without_asking_the_provider() {
    let h = Harness::new(&[Step::Ready]);
    h.create(json!({"skipCreate": true}));
    let (_, sent) = h.pass().await;
    assert_eq!(
        writes(&sent),
        strings(&["PATCH postgres", "PATCH postgres/status", "POST events"])
    );
    assert_eq!(phase(&h.current()), Some(Phase::Paused));
    assert!(h.fake.asked().is_empty() && h.secret().is_none());
}

#[tokio::test]
async fn a_planned_tiers_changes_wait_for_an_approval_of_their_hash() {
    let h = Harness::new(&[Step::ReadyPending]);
    h.create(json!({"tier": "planned"}));
    h.settle().await;
    let pg = h.current();
    let status = pg.status.clone().expect("a status");
    assert_eq!(status.pending_changes.len(), 1, "{status:?}");
    assert_eq!(status.pending_changes[0].field, "DBInstanceClass");
    let hash = status.plan_hash.clone().expect("a plan hash");
    assert_eq!(
        condition(&pg, "UpToDate").map(|c| c.0),
        Some("False".into())
    );
    assert!(
        h.fake
            .asked()
            .iter()
            .all(|r| r.options.approved_plan.is_none())
    );
    // A person approves that plan: the provider is told.
    h.edit(json!({"metadata": {"annotations": {APPROVE_PLAN_ANNOTATION: hash}}}));
    let (_, sent) = h.pass().await;
    assert!(
        !writes(&sent).contains(&"PATCH postgres".to_string()),
        "{sent:?}"
    );
    let last = h.fake.asked().pop().expect("asked");
    assert_eq!(last.options.approved_plan.as_deref(), Some(hash.as_str()));
}

#[tokio::test]
async fn a_maintenance_window_the_provider_used_is_closed_on_the_cr() {
    let h = Harness::new(&[Step::ReadyInWindow, Step::Ready]);
    h.create(json!({"maintenanceWindow": true}));
    let (_, sent) = h.pass().await;
    let window = sent
        .iter()
        .find(|r| r.body.to_string().contains("/spec/maintenanceWindow"))
        .expect("spec.maintenanceWindow patched");
    assert_eq!(window.body[0]["op"], "test", "guarded: {:?}", window.body);
    assert!(h.fake.asked()[0].options.maintenance_window);
    assert!(!h.current().spec.resource.maintenance_window);
    h.settle().await;
    assert!(
        h.fake
            .asked()
            .last()
            .is_some_and(|r| !r.options.maintenance_window)
    );
}

#[tokio::test]
async fn a_restore_waits_for_its_snapshot_then_names_it_to_the_provider() {
    let h = Harness::new(&[Step::Ready]);
    h.fake
        .snapshots
        .store(true, std::sync::atomic::Ordering::Relaxed);
    h.create(json!({"restoreFromSnapshot": "nightly"}));
    h.settle().await;
    let pg = h.current();
    assert_eq!(phase(&pg), Some(Phase::InProgress));
    assert!(
        message(&pg).contains("waiting for PostgresSnapshot nightly"),
        "{}",
        message(&pg)
    );
    assert!(
        h.fake.asked().is_empty(),
        "asked before the snapshot exists"
    );
    h.api.put(json!({
        "apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
        "metadata": {"name": "nightly", "namespace": "app", "uid": "snap-uid"},
        "spec": {"resourceName": "other-db"},
        "status": {"phase": "complete", "snapshotID": "fake-snapshot-1"},
    }));
    let (result, _) = h.pass().await;
    assert!(result.is_ok(), "{result:?}");
    let asked = h.fake.asked();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].restore_from_snapshot.as_deref(),
        Some("fake-snapshot-1")
    );
    assert_eq!(phase(&h.current()), Some(Phase::Complete));
}

/// A CR complete before (a restart, a switch from the Go operator, whose
/// status shows no verdict) is not held up by its first connection check:
/// the verdict wakes a reconcile of its own, which writes it.
#[tokio::test]
async fn a_cr_complete_before_is_not_held_up_by_its_first_check() {
    let h = Harness::new(&[Step::Ready]);
    let mut cr = serde_json::to_value(h.create(json!({}))).expect("JSON");
    cr["status"] =
        json!({"phase": "complete", "message": "successfully reconciled", "strategy": PROVIDER});
    h.api.put(cr);
    let mut woken = h.ctx.connectivity.subscribe();
    let (result, sent) = h.pass().await;
    assert!(result.is_ok(), "{result:?}");
    assert!(
        writes(&sent).contains(&"PATCH postgres/status".to_string()),
        "{sent:?}"
    );
    assert_eq!(
        condition(&h.current(), "Connectable"),
        None,
        "waited for the check"
    );
    let changed = tokio::time::timeout(Duration::from_secs(10), woken.recv()).await;
    assert!(
        matches!(changed, Ok(Ok(ref c)) if c.name == "db"),
        "no wake: {changed:?}"
    );
    let (_, sent) = h.pass().await;
    assert_eq!(writes(&sent), strings(&["PATCH postgres/status"]));
    assert_eq!(
        condition(&h.current(), "Connectable"),
        Some(("False".into(), "ConnectionRefused".into()))
    );
}
