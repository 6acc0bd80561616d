//! The cluster's private services access, which Cloud SQL's and
//! Memorystore's private IPs need, as the Go operator's
//! cluster_network_provider.go makes it, so an installation's network is
//! found again and the same names are used:
//! - the cluster VPC: the one network named `<clusterID>-*`, with at least
//!   two subnetworks (the installer's);
//! - a global INTERNAL address for VPC_PEERING named `<clusterID>-ip-range`
//!   shortened as Go does (`ShortenString`, 40), /22 unless the `_network`
//!   tier's `CidrBlock` names the range, which must not overlap the
//!   cluster's subnetworks;
//! - the Service Networking connection of that VPC with that range, which
//!   peers it (`servicenetworking-googleapis-com`).
//!
//! [`ensure`] makes one step a pass and says what it waits for; [`remove`]
//! undoes them in Go's order (peering, connection, range) once no database
//! uses them. Every step looks first, so a call whose answer was lost is
//! found on the next pass rather than made twice.

use std::net::Ipv4Addr;

use cro_provider_api::{ErrorKind, ProviderError, shorten};
use http::Method;
use serde_json::{Value, json};

use crate::errors::{GoogleError, Meaning};
use crate::rest::{Rest, segment};

/// The production endpoints (the discovery documents' `rootUrl`).
pub const COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com/";
pub const SERVICE_NETWORKING_ENDPOINT: &str = "https://servicenetworking.googleapis.com/";
/// The service, and the peering its connection makes (Go's constants).
const SERVICE: &str = "services/servicenetworking.googleapis.com";
pub const PEERING: &str = "servicenetworking-googleapis-com";
/// The largest range Go accepts, and its default: a /22.
const DEFAULT_PREFIX: u8 = 22;

/// The two APIs the network is made with.
pub struct Apis<'a> {
    pub compute: &'a Rest,
    pub services: &'a Rest,
}

/// Whose network: the project, and the cluster's ID (the Infrastructure's
/// `infrastructureName`, which names the installer's VPC).
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    pub project: &'a str,
    pub id: &'a str,
}

/// Go's name of the cluster's reserved range.
pub fn ip_range_name(cluster_id: &str) -> String {
    shorten(&format!("{cluster_id}-ip-range"), 40)
}

/// The range a tier asks for: GCP's choice of a /22, or the `_network`
/// tier's `CidrBlock`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Wanted {
    pub address: Option<Ipv4Addr>,
    pub prefix: u8,
}

impl Default for Wanted {
    fn default() -> Self {
        Wanted {
            address: None,
            prefix: DEFAULT_PREFIX,
        }
    }
}

impl Wanted {
    /// Reads `createStrategy.CidrBlock` of the `_network` tier `tier`.
    pub fn from_cidr(cidr: &str, tier: &str) -> Result<Wanted, ProviderError> {
        let at = format!(
            "createStrategy.CidrBlock of the _network tier {tier:?} in cloud-resources-gcp-strategies"
        );
        let parsed = cidr
            .split_once('/')
            .and_then(|(a, p)| Some((a.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)));
        match parsed {
            Some((address, prefix)) if (8..=DEFAULT_PREFIX).contains(&prefix) => Ok(Wanted {
                address: Some(network_of(address, prefix)),
                prefix,
            }),
            Some(_) => Err(ProviderError::invalid_strategy(format!(
                "{at} is {cidr}: Cloud SQL and Memorystore need a range of /{DEFAULT_PREFIX} or larger (a prefix of 8 to {DEFAULT_PREFIX})"
            ))),
            None => Err(ProviderError::invalid_strategy(format!(
                "{at} is {cidr:?}, not an IPv4 CIDR block such as 10.120.0.0/22; leave it empty for a /{DEFAULT_PREFIX} GCP chooses"
            ))),
        }
    }

    fn overlaps(&self, cidr: &str) -> bool {
        let Some(address) = self.address else {
            return false;
        };
        let Some((other, prefix)) = cidr
            .split_once('/')
            .and_then(|(a, p)| Some((a.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)))
        else {
            return false;
        };
        let shorter = prefix.min(self.prefix);
        network_of(address, shorter) == network_of(other, shorter)
    }
}

fn network_of(address: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
    Ipv4Addr::from(u32::from(address) & mask)
}

/// What a pass of [`ensure`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum Ready {
    /// Databases may be made on `network` (its self link, Cloud SQL's
    /// `privateNetwork`) in `range` (its `allocatedIpRange`).
    Yes { network: String, range: String },
    /// A step is under way: what it waits for.
    Waiting(String),
}

/// What a pass of [`remove`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum Removed {
    Gone,
    Waiting(String),
}

fn failed(e: GoogleError, doing: &str) -> ProviderError {
    e.into_provider_error(doing)
}

fn networks_path(project: &str) -> String {
    format!("compute/v1/projects/{}/global/networks", segment(project))
}

fn address_path(project: &str, name: &str) -> String {
    format!(
        "compute/v1/projects/{}/global/addresses/{}",
        segment(project),
        segment(name)
    )
}

/// Service Networking's name of a consumer network.
fn consumer_network(project: &str, vpc: &Value) -> String {
    let name = vpc["name"].as_str().unwrap_or_default();
    format!("projects/{project}/global/networks/{name}")
}

/// The cluster's VPC: the one network named `<clusterID>-*` with two
/// subnetworks or more.
pub async fn cluster_vpc(apis: &Apis<'_>, cluster: Cluster<'_>) -> Result<Value, ProviderError> {
    let filter = segment(&format!("name = \"{}-*\"", cluster.id));
    let path = format!("{}?filter={filter}", networks_path(cluster.project));
    let listed = (apis.compute.call(Method::GET, &path, None).await).map_err(|e| {
        failed(
            e,
            &format!("listing the networks of project {}", cluster.project),
        )
    })?;
    let found = listed["items"].as_array().cloned().unwrap_or_default();
    let [vpc] = found.as_slice() else {
        return Err(ProviderError::new(
            ErrorKind::Permanent,
            format!(
                "{} networks of project {} are named {}-*: the cluster's VPC is the one network the installer named after the cluster ID; check the cluster ID and the project (the tier's projectID, else the Infrastructure's)",
                found.len(),
                cluster.project,
                cluster.id
            ),
        ));
    };
    let subnets = vpc["subnetworks"].as_array().map_or(0, Vec::len);
    if subnets < 2 {
        return Err(ProviderError::new(
            ErrorKind::Permanent,
            format!(
                "network {} has {subnets} subnetworks; a cluster's VPC has two or more (control plane and workers), so it is not the cluster's",
                vpc["name"].as_str().unwrap_or_default()
            ),
        ));
    }
    Ok(vpc.clone())
}

async fn get(rest: &Rest, path: &str, doing: &str) -> Result<Option<Value>, ProviderError> {
    match rest.call(Method::GET, path, None).await {
        Ok(found) => Ok(Some(found)),
        Err(e) if e.meaning() == Meaning::NotFound => Ok(None),
        Err(e) => Err(failed(e, doing)),
    }
}

/// Sends a create or delete: started, or already done (`done`: a
/// create's "already exists", a delete's "not found", perhaps the work of
/// a call whose answer was lost); the next pass looks. The other answer
/// of the two is a failure: a create told "not found" names a project or
/// network that is not there.
async fn start(
    rest: &Rest,
    (verb, path, body): (Method, &str, Option<&Value>),
    done: Meaning,
    doing: &str,
) -> Result<(), ProviderError> {
    match rest.call(verb, path, body).await {
        Ok(_) => Ok(()),
        Err(e) if e.meaning() == done => Ok(()),
        Err(e) => Err(failed(e, doing)),
    }
}

/// The VPC's Service Networking connection, if any.
async fn connection(
    apis: &Apis<'_>,
    cluster: Cluster<'_>,
    vpc: &Value,
) -> Result<Option<Value>, ProviderError> {
    let network = segment(&consumer_network(cluster.project, vpc));
    let path = format!("v1/{SERVICE}/connections?network={network}");
    let listed = (apis.services.call(Method::GET, &path, None).await).map_err(|e| {
        failed(
            e,
            "listing the cluster VPC's Service Networking connections",
        )
    })?;
    Ok(listed["connections"]
        .as_array()
        .and_then(|c| c.first())
        .cloned())
}

/// One step towards the cluster's private services access.
pub async fn ensure(
    apis: &Apis<'_>,
    cluster: Cluster<'_>,
    wanted: Wanted,
) -> Result<Ready, ProviderError> {
    let vpc = cluster_vpc(apis, cluster).await?;
    let vpc_link = vpc["selfLink"].as_str().unwrap_or_default().to_string();
    let range = ip_range_name(cluster.id);
    let path = address_path(cluster.project, &range);
    let doing = format!(
        "reserving the IP range {range} in project {}",
        cluster.project
    );
    let Some(address) = get(apis.compute, &path, &doing).await? else {
        reserve(apis, cluster, &vpc, &range, wanted).await?;
        return Ok(Ready::Waiting(format!(
            "the IP range {range} is being reserved"
        )));
    };
    if address["network"].as_str() != Some(vpc_link.as_str()) {
        return Err(ProviderError::new(
            ErrorKind::Permanent,
            format!(
                "the IP range {range} of project {} is on network {}, not the cluster's VPC {vpc_link}: delete it (gcloud compute addresses delete {range} --global) or use another cluster ID",
                cluster.project,
                address["network"].as_str().unwrap_or("none")
            ),
        ));
    }
    if address["status"] == "RESERVING" {
        return Ok(Ready::Waiting(format!(
            "the IP range {range} is being reserved"
        )));
    }
    let Some(found) = connection(apis, cluster, &vpc).await? else {
        connect(apis, cluster, &vpc, &range).await?;
        return Ok(Ready::Waiting(format!(
            "the cluster's VPC is being connected to Service Networking with the range {range}"
        )));
    };
    let ranges: Vec<&str> = (found["reservedPeeringRanges"]
        .as_array()
        .into_iter()
        .flatten())
    .filter_map(Value::as_str)
    .collect();
    if !ranges.contains(&range.as_str()) {
        return Err(ProviderError::new(
            ErrorKind::Permanent,
            format!(
                "the cluster's VPC has a Service Networking connection with the ranges {ranges:?}, not {range}: add it (gcloud services vpc-peerings update --service=servicenetworking.googleapis.com --network={} --ranges={},{range})",
                vpc["name"].as_str().unwrap_or_default(),
                ranges.join(",")
            ),
        ));
    }
    Ok(Ready::Yes {
        network: vpc_link,
        range,
    })
}

async fn reserve(
    apis: &Apis<'_>,
    cluster: Cluster<'_>,
    vpc: &Value,
    range: &str,
    wanted: Wanted,
) -> Result<(), ProviderError> {
    for subnet in vpc["subnetworks"].as_array().into_iter().flatten() {
        let link = subnet.as_str().unwrap_or_default();
        let path = link.split_once("compute/v1/").map_or(link, |(_, p)| p);
        let doing = format!("reading the cluster's subnetwork {link}");
        let Some(found) = get(apis.compute, &format!("compute/v1/{path}"), &doing).await? else {
            continue;
        };
        let cidr = found["ipCidrRange"].as_str().unwrap_or_default();
        if wanted.overlaps(cidr) {
            return Err(ProviderError::invalid_strategy(format!(
                "the _network tier's CidrBlock {}/{} overlaps the cluster's subnetwork {} ({cidr}): choose a range outside the cluster's subnetworks",
                wanted.address.map(|a| a.to_string()).unwrap_or_default(),
                wanted.prefix,
                found["name"].as_str().unwrap_or_default()
            )));
        }
    }
    let mut body = json!({
        "name": range,
        "addressType": "INTERNAL",
        "ipVersion": "IPV4",
        "purpose": "VPC_PEERING",
        "network": vpc["selfLink"],
        "prefixLength": wanted.prefix,
    });
    if let Some(address) = wanted.address {
        body["address"] = json!(address.to_string());
    }
    let path = format!(
        "compute/v1/projects/{}/global/addresses",
        segment(cluster.project)
    );
    start(
        apis.compute,
        (Method::POST, &path, Some(&body)),
        Meaning::AlreadyExists,
        &format!("reserving the IP range {range}"),
    )
    .await
}

async fn connect(
    apis: &Apis<'_>,
    cluster: Cluster<'_>,
    vpc: &Value,
    range: &str,
) -> Result<(), ProviderError> {
    let body = json!({
        "network": consumer_network(cluster.project, vpc),
        "reservedPeeringRanges": [range],
    });
    let path = format!("v1/{SERVICE}/connections");
    match apis.services.call(Method::POST, &path, Some(&body)).await {
        Ok(_) => Ok(()),
        // Another create of it is under way (perhaps one whose answer was
        // lost): the next pass looks.
        Err(e) if e.status == "FAILED_PRECONDITION" || e.meaning() == Meaning::AlreadyExists => {
            Ok(())
        }
        Err(e) => Err(failed(
            e,
            "connecting the cluster's VPC to Service Networking",
        )),
    }
}

/// One step towards removing the cluster's private services access, in
/// Go's order: the peering (a connection's removal can stick while it
/// stays), the connection, the range.
pub async fn remove(apis: &Apis<'_>, cluster: Cluster<'_>) -> Result<Removed, ProviderError> {
    let vpc = cluster_vpc(apis, cluster).await?;
    let name = vpc["name"].as_str().unwrap_or_default();
    let peered = (vpc["peerings"].as_array().into_iter().flatten()).any(|p| p["name"] == PEERING);
    if peered {
        let path = format!(
            "{}/{}/removePeering",
            networks_path(cluster.project),
            segment(name)
        );
        let body = json!({ "name": PEERING });
        start(
            apis.compute,
            (Method::POST, &path, Some(&body)),
            Meaning::NotFound,
            "removing the Service Networking peering",
        )
        .await?;
        return Ok(Removed::Waiting(format!(
            "the peering {PEERING} of {name} is being removed"
        )));
    }
    if connection(apis, cluster, &vpc).await?.is_some() {
        let path = format!("v1/{SERVICE}/connections/{PEERING}");
        let body = json!({ "consumerNetwork": consumer_network(cluster.project, &vpc) });
        start(
            apis.services,
            (Method::POST, &path, Some(&body)),
            Meaning::NotFound,
            "deleting the cluster VPC's Service Networking connection",
        )
        .await?;
        return Ok(Removed::Waiting(format!(
            "the Service Networking connection of {name} is being deleted"
        )));
    }
    let range = ip_range_name(cluster.id);
    let path = address_path(cluster.project, &range);
    if get(apis.compute, &path, "reading the IP range")
        .await?
        .is_some()
    {
        start(
            apis.compute,
            (Method::DELETE, &path, None),
            Meaning::NotFound,
            &format!("deleting the IP range {range}"),
        )
        .await?;
        return Ok(Removed::Waiting(format!(
            "the IP range {range} is being deleted"
        )));
    }
    Ok(Removed::Gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_named_as_go_names_it() {
        // ShortenString drops what is not a letter or digit, lowercases,
        // and hashes what is longer than 40.
        assert_eq!(ip_range_name("mycluster-x7k2p"), "myclusterx7k2piprange");
        let long = ip_range_name("a-very-long-cluster-identifier-of-a-cluster-abcde");
        assert_eq!(long.len(), 40, "{long}");
    }

    #[test]
    fn a_tier_s_cidr_block_is_read_checked_and_compared() {
        let wanted = Wanted::from_cidr("10.120.0.0/22", "production").unwrap_or_default();
        assert_eq!(wanted.address, Some(Ipv4Addr::new(10, 120, 0, 0)));
        assert!(wanted.overlaps("10.120.2.0/24"));
        assert!(wanted.overlaps("10.0.0.0/8"));
        assert!(!wanted.overlaps("10.0.0.0/17"));
        assert!(!Wanted::default().overlaps("10.0.0.0/8"), "GCP chooses");
        for (cidr, says) in [
            ("10.120.0.0/24", "a range of /22 or larger"),
            ("10.120.0.0", "not an IPv4 CIDR block"),
        ] {
            let e = Wanted::from_cidr(cidr, "production").expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidStrategy);
            assert!(
                e.message().contains(says) && e.message().contains("\"production\""),
                "{e}"
            );
        }
    }
}
