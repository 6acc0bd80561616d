//! A node type change is requested only where EC2 offers that type in
//! every availability zone the group's nodes are in, as the Go operator
//! checks before it (buildElasticacheUpdateStrategy,
//! pkg/providers/aws/provider_redis.go); elsewhere it is shown as never
//! applied, saying why, rather than refused by AWS.

use aws_sdk_ec2::types::{Filter, LocationType};
use cro_provider_api::{ProviderError, Timing};

use super::strategy::Field;
use crate::{clients::Clients, database::Plan, errors::Answer};

/// `plan` with its node type change held back when a zone of `zones`
/// does not offer `node_type` (one EC2 call, only when the change would
/// be requested now; zones AWS did not name are not judged).
pub async fn checked(
    c: &Clients,
    plan: Plan<Field>,
    node_type: &str,
    zones: &[String],
) -> Result<Plan<Field>, ProviderError> {
    let Plan::Converge(mut drift) = plan else {
        return Ok(plan);
    };
    let requested = (drift.changes.apply.iter()).position(|d| d.field == Field::CacheNodeType);
    let (Some(at), false) = (requested, zones.is_empty()) else {
        return Ok(Plan::Converge(drift));
    };
    if let Some(zone) = lacking(&offered(c, node_type).await?, zones) {
        let mut held = drift.changes.apply.remove(at).change;
        held.timing = Timing::Never(format!(
            "EC2 does not offer {} in availability zone {zone}, where a node of the group is (ec2:DescribeInstanceTypeOfferings): choose another CacheNodeType",
            ec2_type(node_type)
        ));
        drift.changes.pending.push(held);
    }
    Ok(Plan::Converge(drift))
}

/// ElastiCache's `cache.m5.large` is EC2's `m5.large`.
fn ec2_type(node_type: &str) -> &str {
    node_type.strip_prefix("cache.").unwrap_or(node_type)
}

/// The zones offering `node_type`.
async fn offered(c: &Clients, node_type: &str) -> Result<Vec<String>, ProviderError> {
    let ec2_type = ec2_type(node_type);
    let filter = Filter::builder()
        .name("instance-type")
        .values(ec2_type)
        .build();
    let out = (c.ec2.describe_instance_type_offerings())
        .location_type(LocationType::AvailabilityZone)
        .filters(filter)
        .send()
        .await
        .named("ec2:DescribeInstanceTypeOfferings", ec2_type)?;
    Ok((out.instance_type_offerings().iter())
        .filter_map(|o| o.location().map(str::to_string))
        .collect())
}

/// The first of `zones` not in `offered` (pure).
fn lacking<'z>(offered: &[String], zones: &'z [String]) -> Option<&'z str> {
    (zones.iter())
        .find(|z| !offered.contains(z))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zone_without_the_type_holds_the_change_back() {
        let s = |v: &[&str]| v.iter().map(|z| z.to_string()).collect::<Vec<_>>();
        let offered = s(&["eu-west-1a", "eu-west-1b"]);
        assert_eq!(lacking(&offered, &s(&["eu-west-1b", "eu-west-1a"])), None);
        assert_eq!(
            lacking(&offered, &s(&["eu-west-1a", "eu-west-1c"])),
            Some("eu-west-1c")
        );
        assert_eq!(ec2_type("cache.m5.large"), "m5.large");
    }
}
