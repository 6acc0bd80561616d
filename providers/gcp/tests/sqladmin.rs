//! The Cloud SQL calls against the test environment's Cloud SQL Admin
//! stand-in (tests/testenv/gcp_server.py), which holds every request and
//! answer to Google's discovery document: an instance made from the Go
//! operator's default tier, found again with nothing to patch, changed,
//! refused deletion while protected, and deleted; a create whose answer is
//! lost, found on the retry; throttling classified as such. The instances
//! are made on a cluster network the provider made (`network::ensure`), as
//! Cloud SQL refuses a private IP without one.

mod support;

use std::time::{Duration, Instant};

use cro_provider_api::ErrorKind;
use cro_provider_gcp::{
    cloud_sql::{Inputs, desired_instance, diff},
    network::Cluster,
    rest::Rest,
    sqladmin::{self, Started},
};
use serde_json::{Value, json};
use support::{fault, installer_vpc, private_access, rest, unique};

/// The private services access of this binary's cluster (its network's
/// self link and its range), made once, as the provider makes it before
/// its first database.
static ACCESS: tokio::sync::OnceCell<(String, String)> = tokio::sync::OnceCell::const_new();

async fn access() -> &'static (String, String) {
    ACCESS
        .get_or_init(|| async {
            let (rest, cluster) = (rest(), unique("sqltest"));
            installer_vpc(&rest, "p1", &cluster).await;
            let cluster = Cluster {
                project: "p1",
                id: &cluster,
            };
            private_access(&rest, cluster).await
        })
        .await
}

async fn body(name: &str) -> Value {
    with_tier(name, &json!({})).await
}

/// The instance `desired_instance` builds for the tier's `createStrategy`.
async fn with_tier(name: &str, create_strategy: &Value) -> Value {
    let (network, range) = access().await;
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
        allocated_ip_range: range,
        private_network: network,
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
    let wanted = body(&name).await;
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
    let edited = with_tier(&name, &tier).await;
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

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_on_the_retry_and_throttling_is_named() {
    let (rest, name) = (rest(), unique("lost"));
    fault(
        &name,
        Some(
            json!({"method": "sql.instances.insert", "match": name, "lose_answer": true, "times": 1}),
        ),
    );
    let lost = sqladmin::insert(&rest, "p1", &body(&name).await)
        .await
        .expect_err("the answer was lost");
    assert_eq!(lost.kind(), ErrorKind::Transient, "{lost}");
    // The retry finds the instance the lost call made.
    assert_eq!(
        sqladmin::insert(&rest, "p1", &body(&name).await).await.ok(),
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
        Some(
            json!({"method": "sql.instances.get", "match": name, "code": 429, "status": "RESOURCE_EXHAUSTED",
        "reason": "rateLimitExceeded", "message": "Quota exceeded", "times": 1}),
        ),
    );
    let throttled = sqladmin::get(&rest, "p1", &name)
        .await
        .expect_err("throttled once");
    assert_eq!(throttled.kind(), ErrorKind::Throttled, "{throttled}");
    assert!(sqladmin::get(&rest, "p1", &name).await.is_ok());
    fault(&name, None);
}

/// A positive control: the stand-in refuses what the discovery document
/// does not allow, naming each field, so the tests above could fail.
#[tokio::test]
async fn the_stand_in_refuses_a_body_outside_google_s_schema() {
    let mut wrong = body(&unique("wrong")).await;
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

/// A control for the network: Cloud SQL refuses a private IP on a network
/// that has no Service Networking connection, so the instances above could
/// not have been made without `network::ensure`.
#[tokio::test]
async fn an_instance_on_a_vpc_without_private_access_is_refused() {
    let (rest, cluster) = (rest(), unique("bare"));
    installer_vpc(&rest, "p1", &cluster).await;
    let mut bare = body(&unique("bare")).await;
    bare["settings"]["ipConfiguration"]["privateNetwork"] = json!(format!(
        "https://www.googleapis.com/compute/v1/projects/p1/global/networks/{cluster}-network"
    ));
    let refused = sqladmin::insert(&rest, "p1", &bare)
        .await
        .expect_err("no private services access");
    assert_eq!(refused.kind(), ErrorKind::Permanent, "{refused}");
    assert!(
        refused.message().contains("SERVICE_NETWORKING_NOT_ENABLED"),
        "{refused}"
    );
}
