//! The cluster's database security group (`BuildInfraName(..,
//! "security-group", 40)`): admits the cluster's VPC blocks on each
//! engine's port, and nothing else.

use aws_sdk_ec2::types::{IpPermission, IpRange, ResourceType};
use cro_provider_api::ProviderError;

use super::{
    Cidr, Network,
    ec2::{at_creation, filter},
};
use crate::errors::Answer;

/// The group named for the cluster in `vpc`, made when missing; its id.
pub async fn ensure(
    net: &Network<'_>,
    vpc: &str,
    description: &str,
    tags: &[(String, String)],
) -> Result<String, ProviderError> {
    let name = net.security_group();
    if let Some(id) = find(net, vpc).await? {
        return Ok(id);
    }
    let sent = net
        .ec2
        .create_security_group()
        .group_name(&name)
        .description(description)
        .vpc_id(vpc)
        .tag_specifications(at_creation(ResourceType::SecurityGroup, tags))
        .send()
        .await;
    match sent.unless_code("InvalidGroup.Duplicate", "ec2:CreateSecurityGroup", &name)? {
        Some(out) => out.group_id().map(str::to_string).ok_or_else(|| {
            ProviderError::transient(format!(
                "ec2:CreateSecurityGroup {name}: no group id in AWS's answer; looking again"
            ))
        }),
        // A lost answer's retry: the group is there; look at it.
        None => find(net, vpc)
            .await?
            .ok_or_else(|| crate::errors::not_yet_visible("security group", &name)),
    }
}

/// The id of the group named for the cluster in `vpc`.
pub async fn find(net: &Network<'_>, vpc: &str) -> Result<Option<String>, ProviderError> {
    let name = net.security_group();
    let call = net.ec2.describe_security_groups();
    let call = call
        .filters(filter("group-name", &[&name]))
        .filters(filter("vpc-id", &[vpc]));
    let out = call
        .send()
        .await
        .named("ec2:DescribeSecurityGroups", &name)?;
    Ok(out
        .security_groups()
        .iter()
        .find(|g| g.group_name() == Some(name.as_str()) && g.vpc_id() == Some(vpc))
        .and_then(|g| g.group_id().map(str::to_string)))
}

/// Admits each of `blocks` on `port` unless a rule already does (the Go
/// operator's rule admits every protocol from the cluster's block).
pub async fn admit(
    net: &Network<'_>,
    group: &str,
    blocks: &[Cidr],
    port: i32,
) -> Result<(), ProviderError> {
    let call = net.ec2.describe_security_groups().group_ids(group);
    let out = call
        .send()
        .await
        .named("ec2:DescribeSecurityGroups", group)?;
    let rules = out
        .security_groups()
        .first()
        .map(|g| g.ip_permissions().to_vec())
        .unwrap_or_default();
    for block in blocks {
        let cidr = block.to_string();
        if rules.iter().any(|r| covers(r, &cidr, port)) {
            continue;
        }
        let sent = net
            .ec2
            .authorize_security_group_ingress()
            .group_id(group)
            .ip_permissions(
                IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(port)
                    .to_port(port)
                    .ip_ranges(
                        IpRange::builder()
                            .cidr_ip(&cidr)
                            .description("the cluster's VPC, to its databases")
                            .build(),
                    )
                    .build(),
            )
            .send()
            .await;
        let op = "ec2:AuthorizeSecurityGroupIngress";
        sent.unless_code("InvalidPermission.Duplicate", op, group)?;
    }
    Ok(())
}

/// Whether `rule` admits TCP on `port` from exactly `cidr`.
fn covers(rule: &IpPermission, cidr: &str, port: i32) -> bool {
    let from = rule.ip_ranges().iter().any(|r| r.cidr_ip() == Some(cidr));
    let protocol = rule.ip_protocol().unwrap_or_default();
    let port_ok = match protocol {
        "-1" => true,
        "tcp" | "6" => {
            rule.from_port().is_some_and(|f| f <= port) && rule.to_port().is_some_and(|t| t >= port)
        }
        _ => false,
    };
    from && port_ok
}

/// Removes the group named for the cluster in `vpc`, if there.
pub async fn remove(net: &Network<'_>, vpc: &str) -> Result<(), ProviderError> {
    let Some(id) = find(net, vpc).await? else {
        return Ok(());
    };
    net.ec2
        .delete_security_group()
        .group_id(&id)
        .send()
        .await
        .unless_code("InvalidGroup.NotFound", "ec2:DeleteSecurityGroup", &id)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(protocol: &str, ports: Option<(i32, i32)>, cidr: &str) -> IpPermission {
        IpPermission::builder()
            .ip_protocol(protocol)
            .set_from_port(ports.map(|p| p.0))
            .set_to_port(ports.map(|p| p.1))
            .ip_ranges(IpRange::builder().cidr_ip(cidr).build())
            .build()
    }

    #[test]
    fn a_rule_covers_its_block_and_port_only() {
        let go = rule("-1", None, "10.0.0.0/16");
        assert!(covers(&go, "10.0.0.0/16", 5432));
        assert!(!covers(&go, "10.1.0.0/16", 5432));
        let pg = rule("tcp", Some((5432, 5432)), "10.0.0.0/16");
        assert!(covers(&pg, "10.0.0.0/16", 5432));
        assert!(!covers(&pg, "10.0.0.0/16", 6379));
        assert!(!covers(
            &rule("udp", Some((0, 65535)), "10.0.0.0/16"),
            "10.0.0.0/16",
            5432
        ));
    }
}
