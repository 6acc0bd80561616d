//! The cluster's private services access against the test environment's
//! Compute and Service Networking stand-in (tests/testenv/gcp_network.py,
//! held to Google's discovery documents): made as the Go operator makes
//! it on the installer's VPC, used by a Cloud SQL instance, and removed in
//! Go's order once no database uses it; lost answers found by looking; a
//! tier's range that overlaps the cluster refused.

mod support;

use cro_provider_api::ErrorKind;
use cro_provider_gcp::{
    network::{self, Apis, Cluster, PEERING, Ready, Wanted, ip_range_name},
    rest::Rest,
};
use http::Method;
use serde_json::{Value, json};
use support::{fault, installer_vpc, private_access, removed, rest, unique, until};

async fn read(rest: &Rest, path: &str) -> Value {
    rest.call(Method::GET, path, None)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

#[tokio::test]
async fn the_private_access_go_makes_is_made_and_removed_in_go_s_order() {
    let (rest, id) = (rest(), unique("net"));
    installer_vpc(&rest, "p1", &id).await;
    let cluster = Cluster {
        project: "p1",
        id: &id,
    };
    let (network, range) = private_access(&rest, cluster).await;
    assert_eq!(range, ip_range_name(&id));
    let address = read(
        &rest,
        &format!("compute/v1/projects/p1/global/addresses/{range}"),
    )
    .await;
    assert_eq!(
        (
            &address["addressType"],
            &address["purpose"],
            &address["prefixLength"],
            &address["network"]
        ),
        (
            &json!("INTERNAL"),
            &json!("VPC_PEERING"),
            &json!(22),
            &json!(network)
        )
    );
    let vpc = read(
        &rest,
        &format!("compute/v1/projects/p1/global/networks/{id}-network"),
    )
    .await;
    assert_eq!(vpc["peerings"][0]["name"], PEERING, "{vpc}");
    // Found again as it is: nothing more is made.
    let apis = Apis {
        compute: &rest,
        services: &rest,
    };
    assert_eq!(
        network::ensure(&apis, cluster, Wanted::default())
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        Ready::Yes {
            network: network.clone(),
            range: range.clone()
        }
    );

    removed(&rest, cluster).await;
    let vpc = read(
        &rest,
        &format!("compute/v1/projects/p1/global/networks/{id}-network"),
    )
    .await;
    assert_eq!(vpc["peerings"], json!([]), "{vpc}");
    let gone = rest
        .call(
            Method::GET,
            &format!("compute/v1/projects/p1/global/addresses/{range}"),
            None,
        )
        .await
        .expect_err("the range is deleted");
    assert_eq!(gone.code, 404, "{gone:?}");
}

#[tokio::test]
async fn creates_whose_answers_are_lost_are_found_not_made_twice() {
    let (rest, id) = (rest(), unique("lost"));
    installer_vpc(&rest, "p1", &id).await;
    let cluster = Cluster {
        project: "p1",
        id: &id,
    };
    // Each call is made, and its answer lost, once: the range's insert
    // (its body names the range, the cluster ID without dashes) and the
    // connection's create (its body names the VPC).
    fault(
        &format!("{id}-address"),
        Some(
            json!({"method": "compute.globalAddresses.insert", "match": id.replace('-', ""),
            "lose_answer": true, "times": 1}),
        ),
    );
    fault(
        &format!("{id}-connection"),
        Some(
            json!({"method": "servicenetworking.services.connections.create", "match": format!("{id}-network"),
            "lose_answer": true, "times": 1}),
        ),
    );
    let apis = Apis {
        compute: &rest,
        services: &rest,
    };
    let lost = std::sync::atomic::AtomicUsize::new(0);
    let (network, _) = until("made despite two lost answers", 90, || async {
        match network::ensure(&apis, cluster, Wanted::default()).await {
            Ok(Ready::Yes { network, range }) => Some((network, range)),
            Ok(Ready::Waiting(_)) => None,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
                lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                None
            }
        }
    })
    .await;
    fault(&format!("{id}-address"), None);
    fault(&format!("{id}-connection"), None);
    assert_eq!(lost.into_inner(), 2, "each lost answer is seen once");
    let connections = read(
        &rest,
        &format!("v1/services/servicenetworking.googleapis.com/connections?network=projects%2Fp1%2Fglobal%2Fnetworks%2F{id}-network"),
    )
    .await;
    assert_eq!(connections["connections"].as_array().map(Vec::len), Some(1));
    assert!(network.ends_with(&format!("/networks/{id}-network")));
    removed(&rest, cluster).await;
}

#[tokio::test]
async fn a_range_over_the_cluster_s_subnetworks_and_a_missing_vpc_are_refused_by_name() {
    let (rest, id) = (rest(), unique("overlap"));
    let apis = Apis {
        compute: &rest,
        services: &rest,
    };
    let cluster = Cluster {
        project: "p1",
        id: &id,
    };
    let none = network::ensure(&apis, cluster, Wanted::default())
        .await
        .expect_err("no VPC yet");
    assert!(
        none.message()
            .contains(&format!("0 networks of project p1 are named {id}-*")),
        "{none}"
    );
    installer_vpc(&rest, "p1", &id).await;
    let wanted = Wanted::from_cidr("10.0.128.0/22", "production").unwrap_or_default();
    let overlap = network::ensure(&apis, cluster, wanted)
        .await
        .expect_err("the range overlaps the workers' subnetwork");
    assert_eq!(overlap.kind(), ErrorKind::InvalidStrategy);
    assert!(
        overlap
            .message()
            .contains(&format!("{id}-worker-subnet (10.0.128.0/17)")),
        "{overlap}"
    );
}
