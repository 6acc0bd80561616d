//! What the GCP crate's tests against the test environment's stand-in
//! (tests/testenv/gcp_server.py) share: its endpoint and service account,
//! names of each run's own, the cluster VPC the installer would have made,
//! and waiting with a deadline.

#![allow(dead_code)] // Each test binary uses its part.

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use cro_provider_api::{Fence, proxy::Proxies};
use cro_provider_gcp::{
    network::{self, Apis, Cluster, Ready, Removed, Wanted},
    rest::{Rest, Token},
    service_account::{ServiceAccountKey, ServiceAccountToken},
};
use serde_json::{Value, json};

pub fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run `make testenv-up` and source target/testenv/env.sh (make test does both)")
    })
}

/// The stand-in's service account's key file.
pub fn key_file() -> Value {
    let path = env("CRO_TESTENV_GCP_CREDENTIALS");
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Tokens exchanged for `file`, as for any key Google issues.
pub fn token_of(file: &Value) -> Arc<ServiceAccountToken> {
    let key = ServiceAccountKey::parse(file.to_string().as_bytes(), "the test's key file")
        .unwrap_or_else(|e| panic!("{e:?}"));
    Arc::new(ServiceAccountToken::new(
        key,
        Fence::open(),
        Proxies::from_env(),
    ))
}

pub fn rest_with(token: Arc<dyn Token>) -> Rest {
    Rest::new(
        &env("CRO_TESTENV_GCP_ENDPOINT"),
        token,
        Fence::open(),
        Proxies::from_env(),
    )
}

/// Calls with the stand-in's service account. Every API is served at its
/// own service path there, as at its own host at Google.
pub fn rest() -> Rest {
    rest_with(token_of(&key_file()))
}

/// A name of this run's own: the stand-in keeps a deleted name for a week,
/// as Cloud SQL does.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{:x}", nanos % 0xffff_ffff_ffff)
}

/// Calls `step` until it answers `Some`, within `seconds`.
pub async fn until<T, F, Fut>(what: &str, seconds: u64, mut step: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(done) = step().await {
            return done;
        }
        assert!(Instant::now() < deadline, "{what}: not within {seconds} s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The cluster's VPC and its two subnetworks, as the OpenShift installer
/// names them (`<infraID>-network`, `-master-subnet`, `-worker-subnet`,
/// the machine network 10.0.0.0/16 split in two).
pub async fn installer_vpc(rest: &Rest, project: &str, cluster: &str) {
    let networks = format!("compute/v1/projects/{project}/global/networks");
    let vpc = json!({"name": format!("{cluster}-network"), "autoCreateSubnetworks": false});
    rest.call(http::Method::POST, &networks, Some(&vpc))
        .await
        .unwrap_or_else(|e| panic!("{e:?}"));
    let link = format!(
        "https://www.googleapis.com/compute/v1/projects/{project}/global/networks/{cluster}-network"
    );
    for (role, cidr) in [("master", "10.0.0.0/17"), ("worker", "10.0.128.0/17")] {
        let subnet = json!({"name": format!("{cluster}-{role}-subnet"), "network": link, "ipCidrRange": cidr});
        let path = format!("compute/v1/projects/{project}/regions/europe-west2/subnetworks");
        rest.call(http::Method::POST, &path, Some(&subnet))
            .await
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

/// Makes the cluster's private services access: its network's self link
/// and the range's name.
pub async fn private_access(rest: &Rest, cluster: Cluster<'_>) -> (String, String) {
    let apis = Apis {
        compute: rest,
        services: rest,
    };
    until("the cluster's private services access", 90, || async {
        match network::ensure(&apis, cluster, Wanted::default()).await {
            Ok(Ready::Yes { network, range }) => Some((network, range)),
            Ok(Ready::Waiting(_)) => None,
            Err(e) => panic!("{e}"),
        }
    })
    .await
}

/// Sets the stand-in's fault `id` (its CRO_GCP_FAULTS file: which method,
/// what text of the path or body it matches, what it does); `None`
/// removes it. Each is written anew, as the stand-in counts a fault's
/// uses by its text.
pub fn fault(id: &str, fault: Option<Value>) {
    let path = env("CRO_TESTENV_GCP_FAULTS");
    let mut all: Vec<Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.retain(|f| f["id"] != id);
    if let Some(mut fault) = fault {
        fault["id"] = json!(id);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        fault["written"] = json!(now.map(|d| d.as_nanos()).unwrap_or_default().to_string());
        all.push(fault);
    }
    std::fs::write(&path, serde_json::to_string(&all).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// Removes the cluster's private services access, pass by pass.
pub async fn removed(rest: &Rest, cluster: Cluster<'_>) {
    let apis = Apis {
        compute: rest,
        services: rest,
    };
    until("the private services access removed", 90, || async {
        match network::remove(&apis, cluster).await {
            Ok(Removed::Gone) => Some(()),
            Ok(Removed::Waiting(_)) => None,
            Err(e) => panic!("{e}"),
        }
    })
    .await
}
