//! The Memorystore calls against the test environment's stand-in
//! (tests/testenv/gcp_redis.py, held to Google's discovery document): an
//! instance of the Go operator's default tier made on the cluster's private
//! services access, found again with nothing to change, updated and
//! upgraded as a tier edit asks, never downgraded, and deleted; a create
//! whose answer is lost found on the retry.

mod support;

use std::collections::BTreeMap;

use cro_provider_api::ErrorKind;
use cro_provider_gcp::{
    memorystore::{Diff, Inputs, desired_instance, diff},
    network::Cluster,
    redis_api::{self, At},
    rest::Rest,
    sqladmin::Started,
};
use serde_json::{Value, json};
use support::{fault, installer_vpc, private_access, removed, rest, unique, until};

/// The instance `desired_instance` builds for `tier` on the cluster's
/// network.
fn wanted(id: &str, tier: &Value, access: &(String, String)) -> Value {
    let labels: BTreeMap<String, String> = [(
        "integreatly-org_clusterid".to_string(),
        "testcluster".to_string(),
    )]
    .into();
    let inputs = Inputs {
        project: "p1",
        region: "europe-west2",
        instance_id: id,
        labels: &labels,
        size: None,
        network: &access.0,
        reserved_ip_range: &access.1,
    };
    desired_instance(tier, &inputs)
        .unwrap_or_else(|e| panic!("{e}"))
        .instance
}

fn at(id: &str) -> At<'_> {
    At {
        project: "p1",
        region: "europe-west2",
        id,
    }
}

/// Waits until the instance is READY with nothing left of `desired` to do.
async fn settled(rest: &Rest, id: &str, desired: &Value) -> Value {
    until(&format!("{id} READY as wanted"), 60, || async {
        let found = redis_api::get(rest, at(id))
            .await
            .unwrap_or_else(|e| panic!("{e}"))?;
        (found["state"] == "READY" && diff(desired, &found) == Diff::default()).then_some(found)
    })
    .await
}

/// A cluster network of its own, made as the provider makes it.
async fn cluster_access(rest: &Rest, id: &str) -> (String, String) {
    installer_vpc(rest, "p1", id).await;
    private_access(rest, Cluster { project: "p1", id }).await
}

#[tokio::test]
async fn an_instance_of_the_go_default_tier_lives_changes_and_is_deleted() {
    let (rest, cluster, id) = (rest(), unique("rnet"), unique("cache"));
    let access = cluster_access(&rest, &cluster).await;
    let desired = wanted(&id, &Value::Null, &access);
    let created = redis_api::create(&rest, at(&id), &desired)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(created, Started::Operation(_)), "{created:?}");
    let found = settled(&rest, &id, &desired).await;
    let range = access.1.clone();
    assert_eq!(found["port"], 6379);
    assert!(
        found["host"].as_str().is_some_and(|h| h.starts_with("10.")),
        "{found}"
    );
    assert_eq!(found["reservedIpRange"], json!(range));
    assert_eq!(
        redis_api::create(&rest, at(&id), &desired).await.ok(),
        Some(Started::AlreadyDone)
    );
    // A control: a field Memorystore does not update is refused.
    let unpatchable = redis_api::patch(&rest, at(&id), &json!({"tier": "BASIC"}), "tier")
        .await
        .expect_err("tier cannot be updated");
    assert!(
        unpatchable.message().contains("cannot be updated"),
        "{unpatchable}"
    );

    let found = changed_by_tier_edits(&rest, &id, &access, found).await;
    assert_eq!(found["redisVersion"], "REDIS_7_2");
    deleted_with_its_network(&rest, &id, &cluster).await;
}

/// A tier edit as Go's tests write one (more memory, a window) is an
/// update; an older version is held, a newer one an upgrade.
async fn changed_by_tier_edits(
    rest: &Rest,
    id: &str,
    access: &(String, String),
    found: Value,
) -> Value {
    let tier = json!({"instance": {"memory_size_gb": 2,
        "maintenance_policy": {"weekly_maintenance_window": [{"day": 7, "start_time": {"hours": 3}}]}}});
    let edited = wanted(id, &tier, access);
    let (body, mask) = diff(&edited, &found)
        .update
        .unwrap_or_else(|| panic!("an update"));
    assert_eq!(mask, "memory_size_gb,maintenance_policy");
    redis_api::patch(rest, at(id), &body, &mask)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let found = settled(rest, id, &edited).await;
    assert_eq!(found["memorySizeGb"], 2);
    let older = wanted(
        id,
        &json!({"instance": {"redis_version": "REDIS_5_0"}}),
        access,
    );
    assert!(diff(&older, &found).upgrade.is_none() && !diff(&older, &found).held.is_empty());
    let newer = wanted(
        id,
        &json!({"instance": {"memory_size_gb": 2, "redis_version": "REDIS_7_2",
        "maintenance_policy": {"weekly_maintenance_window": [{"day": 7, "start_time": {"hours": 3}}]}}}),
        access,
    );
    let version = diff(&newer, &found).upgrade.unwrap_or_default();
    redis_api::upgrade(rest, at(id), &version)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    settled(rest, id, &newer).await
}

/// Deletes the instance; then the network goes, as with the last database.
async fn deleted_with_its_network(rest: &Rest, id: &str, cluster: &str) {
    assert!(matches!(
        redis_api::delete(rest, at(id)).await,
        Ok(Started::Operation(_))
    ));
    until("the instance gone", 60, || async {
        redis_api::get(rest, at(id))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none()
            .then_some(())
    })
    .await;
    removed(
        rest,
        Cluster {
            project: "p1",
            id: cluster,
        },
    )
    .await;
}

#[tokio::test]
async fn a_create_whose_answer_is_lost_is_found_on_the_retry() {
    let (rest, cluster, id) = (rest(), unique("rlost"), unique("lost"));
    let access = cluster_access(&rest, &cluster).await;
    let desired = wanted(&id, &Value::Null, &access);
    fault(
        &id,
        Some(
            json!({"method": "redis.projects.locations.instances.create", "match": id,
            "lose_answer": true, "times": 1}),
        ),
    );
    let lost = redis_api::create(&rest, at(&id), &desired)
        .await
        .expect_err("the answer is lost");
    fault(&id, None);
    assert_eq!(lost.kind(), ErrorKind::Transient, "{lost}");
    assert_eq!(
        redis_api::create(&rest, at(&id), &desired).await.ok(),
        Some(Started::AlreadyDone)
    );
    settled(&rest, &id, &desired).await;
    let _ = redis_api::delete(&rest, at(&id)).await;
}

/// A control: Memorystore refuses a private IP on a network without
/// private services access, so the instances above needed the network.
#[tokio::test]
async fn an_instance_without_private_access_is_refused() {
    let (rest, cluster, id) = (rest(), unique("rbare"), unique("bare"));
    installer_vpc(&rest, "p1", &cluster).await;
    let bare = (
        format!(
            "https://www.googleapis.com/compute/v1/projects/p1/global/networks/{cluster}-network"
        ),
        "norange".to_string(),
    );
    let refused = redis_api::create(&rest, at(&id), &wanted(&id, &Value::Null, &bare))
        .await
        .expect_err("no private services access");
    assert_eq!(refused.kind(), ErrorKind::Permanent, "{refused}");
    assert!(
        refused.message().contains("private service access"),
        "{refused}"
    );
}
