//! The Cloud SQL calls against the test environment's Cloud SQL Admin
//! stand-in (tests/testenv/gcp_server.py), which holds every request and
//! answer to Google's discovery document: an instance made from the Go
//! operator's default tier, found again with nothing to patch, changed,
//! refused deletion while protected, and deleted; a create whose answer is
//! lost, found on the retry; throttling classified as such.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use cro_provider_api::{ErrorKind, Fence, proxy::Proxies};
use cro_provider_gcp::{
    cloud_sql::{Inputs, desired_instance, diff},
    rest::Rest,
    service_account::{ServiceAccountKey, ServiceAccountToken},
    sqladmin::{self, Started},
};
use serde_json::{Value, json};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run `make testenv-up` and source target/testenv/env.sh (make test does both)")
    })
}

/// Calls with tokens of the stand-in's service account, exchanged for its
/// key file as for any key Google issues.
fn rest() -> Rest {
    let path = env("CRO_TESTENV_GCP_CREDENTIALS");
    let file = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let key = ServiceAccountKey::parse(&file, &path).unwrap_or_else(|e| panic!("{e:?}"));
    let token = ServiceAccountToken::new(key, Fence::open(), Proxies::from_env());
    Rest::new(
        &env("CRO_TESTENV_GCP_ENDPOINT"),
        Arc::new(token),
        Fence::open(),
        Proxies::from_env(),
    )
}

/// A name of this run's own: the stand-in keeps a deleted name for a week,
/// as Cloud SQL does.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}", nanos % 0xffff_ffff_ffff)
}

fn body(name: &str) -> Value {
    with_tier(name, &json!({}))
}

/// The instance `desired_instance` builds for the tier's `createStrategy`.
fn with_tier(name: &str, create_strategy: &Value) -> Value {
    let labels = [(
        "integreatly-org_clusterid".to_string(),
        "testcluster".to_string(),
    )]
    .into();
    let inputs = Inputs {
        name,
        region: "europe-west2",
        root_password: "s3cret",
        labels: &labels,
        allocated_ip_range: "testcluster-ip-range",
        private_network: "https://www.googleapis.com/compute/v1/projects/p1/global/networks/testcluster-network",
    };
    desired_instance(create_strategy, &inputs).unwrap_or_else(|e| panic!("{e}"))
}

/// Waits, with a deadline, until `get` shows `state` (`None`: gone).
async fn until_state(rest: &Rest, name: &str, state: Option<&str>) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let found = sqladmin::get(rest, "p1", name)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if found
            .as_ref()
            .map(|f| f["state"].as_str().unwrap_or_default())
            == state
        {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never reached {state:?}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn until_done(rest: &Rest, op: &Value) {
    let name = op["name"]
        .as_str()
        .unwrap_or_else(|| panic!("an operation has a name: {op}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while sqladmin::operation(rest, "p1", name)
        .await
        .unwrap_or_else(|e| panic!("{e}"))["status"]
        != "DONE"
    {
        assert!(Instant::now() < deadline, "operation {name} never finished");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn operation(started: Started) -> Value {
    match started {
        Started::Operation(op) => op,
        Started::AlreadyDone => panic!("expected an operation"),
    }
}

/// Inserts `wanted` and waits for it to run; what is read back then.
async fn created(rest: &Rest, name: &str, wanted: &Value) -> Value {
    let created = sqladmin::insert(rest, "p1", wanted)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(operation(created)["operationType"], "CREATE");
    let pending = sqladmin::get(rest, "p1", name)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        pending.as_ref().map(|p| &p["state"]),
        Some(&json!("PENDING_CREATE"))
    );
    let found = until_state(rest, name, Some("RUNNABLE"))
        .await
        .unwrap_or_default();
    assert!(
        found.get("rootPassword").is_none(),
        "the password is never read back"
    );
    assert!(sqladmin::private_ip(&found).is_some(), "{found}");
    found
}

#[tokio::test]
async fn an_instance_of_the_go_default_tier_lives_and_is_deleted() {
    let (rest, name) = (rest(), unique("pg"));
    let wanted = body(&name);
    let found = created(&rest, &name, &wanted).await;
    // What was made, read back, is what the tier wants.
    assert_eq!(diff(&wanted, &found), Default::default());
    assert_eq!(
        sqladmin::insert(&rest, "p1", &wanted).await.ok(),
        Some(Started::AlreadyDone)
    );

    // A tier edit: the patch `diff` builds is what Google's schema takes,
    // and the instance then is as the edited tier wants.
    let tier = json!({"instance": {"settings": {"tier": "db-custom-4-15360", "dataDiskSizeGb": "50",
        "maintenanceWindow": {"day": 7, "hour": 3}}}});
    let edited = with_tier(&name, &tier);
    let bigger = diff(&edited, &found)
        .patch
        .unwrap_or_else(|| panic!("the tier edit is a patch"));
    let op = sqladmin::patch(&rest, "p1", &name, &bigger)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let busy = sqladmin::patch(&rest, "p1", &name, &bigger)
        .await
        .expect_err("one operation at a time");
    assert_eq!(busy.kind(), ErrorKind::Transient, "{busy}");
    until_done(&rest, &op).await;
    let found = sqladmin::get(&rest, "p1", &name)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_default();
    assert_eq!(diff(&edited, &found), Default::default(), "{found}");
    deleted(&rest, &name, &wanted).await;
}

/// Deletes the instance as the Go operator does (protection off first),
/// and checks that its name then stays taken.
async fn deleted(rest: &Rest, name: &str, wanted: &Value) {
    let Err(protected) = sqladmin::delete(rest, "p1", name).await else {
        panic!("deletion protection holds");
    };
    assert_eq!(protected.kind(), ErrorKind::Permanent, "{protected}");
    assert!(
        protected.message().contains("deletionProtectionEnabled"),
        "{protected}"
    );
    let off = json!({"settings": {"deletionProtectionEnabled": false}});
    let op = sqladmin::patch(rest, "p1", name, &off)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    until_done(rest, &op).await;
    operation(
        sqladmin::delete(rest, "p1", name)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    );
    until_state(rest, name, None).await;
    assert_eq!(
        sqladmin::delete(rest, "p1", name).await.ok(),
        Some(Started::AlreadyDone)
    );
    // Cloud SQL keeps a deleted instance's name for a week.
    assert_eq!(
        sqladmin::insert(rest, "p1", wanted).await.ok(),
        Some(Started::AlreadyDone)
    );
}

/// Sets the stand-in's faults (its CRO_GCP_FAULTS file) for this test's
/// instance only; other tests' calls do not match. `Value::Null` removes it.
fn fault(name: &str, fault: Value) {
    let path = env("CRO_TESTENV_GCP_FAULTS");
    let mut all: Vec<Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut fault = fault;
    if fault.is_null() {
        fault = json!({});
    }
    fault["id"] = json!(name);
    fault["match"] = json!(name);
    all.retain(|f| f["id"] != name);
    if !fault["method"].is_null() {
        all.push(fault);
    }
    std::fs::write(&path, serde_json::to_string(&all).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{path}: {e}"));
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_on_the_retry_and_throttling_is_named() {
    let (rest, name) = (rest(), unique("lost"));
    fault(
        &name,
        json!({"method": "sql.instances.insert", "lose_answer": true, "times": 1}),
    );
    let lost = sqladmin::insert(&rest, "p1", &body(&name))
        .await
        .expect_err("the answer was lost");
    assert_eq!(lost.kind(), ErrorKind::Transient, "{lost}");
    // The retry finds the instance the lost call made.
    assert_eq!(
        sqladmin::insert(&rest, "p1", &body(&name)).await.ok(),
        Some(Started::AlreadyDone)
    );
    assert!(
        sqladmin::get(&rest, "p1", &name)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_some()
    );

    fault(
        &name,
        json!({"method": "sql.instances.get", "code": 429, "status": "RESOURCE_EXHAUSTED",
        "reason": "rateLimitExceeded", "message": "Quota exceeded", "times": 1}),
    );
    let throttled = sqladmin::get(&rest, "p1", &name)
        .await
        .expect_err("throttled once");
    assert_eq!(throttled.kind(), ErrorKind::Throttled, "{throttled}");
    assert!(sqladmin::get(&rest, "p1", &name).await.is_ok());
    fault(&name, Value::Null);
}

/// A positive control: the stand-in refuses what the discovery document
/// does not allow, naming each field, so the tests above could fail.
#[tokio::test]
async fn the_stand_in_refuses_a_body_outside_google_s_schema() {
    let mut wrong = body(&unique("wrong"));
    wrong["createTime"] = json!("2026-01-01T00:00:00Z");
    let s = &mut wrong["settings"];
    s["storageAutoResise"] = json!(true);
    s["tier"] = json!(5);
    s["availabilityType"] = json!("SOMETIMES");
    s["dataDiskSizeGb"] = json!("big");
    let refused = sqladmin::insert(&rest(), "p1", &wrong)
        .await
        .expect_err("the body is refused");
    assert_eq!(refused.kind(), ErrorKind::Permanent, "{refused}");
    for named in [
        "createTime: is output only",
        "settings.storageAutoResise: no such field",
        "settings.tier: 5 is not of type string",
        "settings.availabilityType: 'SOMETIMES' is not one of",
        "settings.dataDiskSizeGb: 'big' is not an int64",
    ] {
        assert!(refused.message().contains(named), "{named:?} in {refused}");
    }
}
