//! A tier's `serviceUpdates`, applied as the Go operator applies them
//! (provider_postgres.go `rdsApplyServiceUpdates`, provider_redis.go
//! `applySpecifiedSecurityUpdates`):
//! - Postgres: Unix times; under `maintenanceWindow`, every RDS pending
//!   maintenance action of the instance that AWS would apply on its own
//!   before one of them is applied now (`ApplyPendingMaintenanceAction`,
//!   opt-in `immediate`);
//! - Redis: ElastiCache service update names; on every pass over the
//!   available group, each named update available for it is applied
//!   (`BatchApplyUpdateAction`), and a critical security update at once.
//!
//! The decisions are pure and table-tested; the emulator has neither API.

use cro_provider_api::ProviderError;

use crate::{errors::Answer, listing::Listing};

/// An RDS pending maintenance action of one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingAction {
    pub action: String,
    /// When AWS applies it on its own (Unix seconds), if it says.
    pub auto_applied_after: Option<i64>,
}

/// The actions to apply now: those AWS would apply on its own before one
/// of the tier's times (the Go operator's rule), in order.
pub fn rds_due(actions: &[PendingAction], times: &[String]) -> Result<Vec<String>, ProviderError> {
    let times = times
        .iter()
        .map(|t| {
            t.trim().parse::<i64>().map_err(|_| {
                ProviderError::invalid_strategy(format!(
                    "serviceUpdates entry {t:?} is not a Unix time in seconds, as Postgres tiers list them (e.g. \"1642032000\")"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(actions
        .iter()
        .filter(|a| {
            a.auto_applied_after
                .is_some_and(|at| times.iter().any(|t| at < *t))
        })
        .map(|a| a.action.clone())
        .collect())
}

/// An ElastiCache service update as it stands for one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateAction {
    pub name: String,
    pub service_update_status: String,
    pub update_action_status: String,
    /// A critical security update: the Go operator then applies the
    /// group's pending modifications at once.
    pub critical_security: bool,
}

/// The update action states the Go operator applies from
/// (`validServiceUpdateStates`).
const APPLICABLE: [&str; 4] = ["not-applied", "stopping", "stopped", "scheduling"];

/// The named updates to apply now, and whether one of them is a critical
/// security update (pure).
pub fn elasticache_due(actions: &[UpdateAction], wanted: &[String]) -> (Vec<String>, bool) {
    let due: Vec<&UpdateAction> = actions
        .iter()
        .filter(|a| wanted.contains(&a.name))
        .filter(|a| a.service_update_status == "available")
        .filter(|a| APPLICABLE.contains(&a.update_action_status.as_str()))
        .collect();
    let critical = due.iter().any(|a| a.critical_security);
    (due.into_iter().map(|a| a.name.clone()).collect(), critical)
}

/// Applies the RDS actions due for the instance `arn`; what was applied.
pub async fn apply_rds<L: Clone>(
    (rds, listing): (&aws_sdk_rds::Client, &Listing<L>),
    (id, arn): (&str, &str),
    times: &[String],
) -> Result<Vec<String>, ProviderError> {
    if times.is_empty() {
        return Ok(Vec::new());
    }
    let op = "rds:DescribePendingMaintenanceActions";
    let out = rds
        .describe_pending_maintenance_actions()
        .resource_identifier(arn)
        .send()
        .await
        .named(op, arn)?;
    let actions: Vec<PendingAction> = (out.pending_maintenance_actions().iter())
        .flat_map(|r| r.pending_maintenance_action_details())
        .filter_map(|a| {
            Some(PendingAction {
                action: a.action()?.to_string(),
                auto_applied_after: a.auto_applied_after_date().map(|d| d.secs()),
            })
        })
        .collect();
    let due = rds_due(&actions, times)?;
    for action in &due {
        let apply = rds
            .apply_pending_maintenance_action()
            .resource_identifier(arn)
            .apply_action(action)
            .opt_in_type("immediate")
            .send();
        (listing.writing(id, apply).await).named("rds:ApplyPendingMaintenanceAction", arn)?;
    }
    Ok(due)
}

/// Applies the ElastiCache updates due for the group `id`; what was
/// applied.
pub async fn apply_elasticache<L: Clone>(
    (ec, listing): (&aws_sdk_elasticache::Client, &Listing<L>),
    id: &str,
    wanted: &[String],
) -> Result<Vec<String>, ProviderError> {
    use aws_sdk_elasticache::types::{
        ServiceUpdateSeverity, ServiceUpdateStatus, ServiceUpdateType,
    };
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let out = ec
        .describe_update_actions()
        .replication_group_ids(id)
        .service_update_status(ServiceUpdateStatus::Available)
        .send()
        .await
        .named("elasticache:DescribeUpdateActions", id)?;
    let actions: Vec<UpdateAction> = (out.update_actions().iter())
        .filter_map(|a| {
            Some(UpdateAction {
                name: a.service_update_name()?.to_string(),
                service_update_status: a.service_update_status()?.as_str().to_string(),
                update_action_status: a.update_action_status()?.as_str().to_string(),
                critical_security: a.service_update_severity()
                    == Some(&ServiceUpdateSeverity::Critical)
                    && a.service_update_type() == Some(&ServiceUpdateType::SecurityUpdate),
            })
        })
        .collect();
    let (due, critical) = elasticache_due(&actions, wanted);
    for name in &due {
        let apply = ec
            .batch_apply_update_action()
            .replication_group_ids(id)
            .service_update_name(name)
            .send();
        let out =
            (listing.writing(id, apply).await).named("elasticache:BatchApplyUpdateAction", id)?;
        if let Some(unprocessed) = out.unprocessed_update_actions().first() {
            return Err(ProviderError::transient(format!(
                "elasticache:BatchApplyUpdateAction {id}: service update {name} not processed: {}",
                unprocessed.error_message().unwrap_or("no reason given")
            )));
        }
    }
    if critical {
        let modify = ec
            .modify_replication_group()
            .replication_group_id(id)
            .apply_immediately(true)
            .send();
        (listing.writing(id, modify).await).named("elasticache:ModifyReplicationGroup", id)?;
    }
    Ok(due)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rds_actions_due_before_a_listed_time_are_applied() {
        let action = |name: &str, at: Option<i64>| PendingAction {
            action: name.into(),
            auto_applied_after: at,
        };
        let actions = [
            action("system-update", Some(1_600_000_000)),
            action("db-upgrade", Some(1_700_000_000)),
            action("os-upgrade", None),
        ];
        // Row: (the tier's times, actions applied)
        let rows: [(&[&str], &[&str]); 4] = [
            (&[], &[]),
            (&["1642032000"], &["system-update"]),
            (
                &["1500000000", "1800000000"],
                &["system-update", "db-upgrade"],
            ),
            (&["1500000000"], &[]),
        ];
        for (times, want) in rows {
            let times: Vec<String> = times.iter().map(|t| t.to_string()).collect();
            let got = rds_due(&actions, &times).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{times:?}");
        }
        let e = rds_due(&actions, &["elasticache-20210615-002".into()]).unwrap_err();
        assert!(e.to_string().contains("not a Unix time"), "{e}");
    }

    #[test]
    fn elasticache_updates_named_and_applicable_are_applied() {
        let update = |name: &str, status: &str, action: &str, critical: bool| UpdateAction {
            name: name.into(),
            service_update_status: status.into(),
            update_action_status: action.into(),
            critical_security: critical,
        };
        let wanted = vec!["u1".to_string(), "u2".to_string(), "u3".to_string()];
        // Row: (the group's update, applied, critical)
        let rows = [
            (update("u1", "available", "not-applied", false), true, false),
            (update("u1", "available", "scheduling", true), true, true),
            (update("u2", "available", "complete", false), false, false),
            (update("u3", "expired", "not-applied", false), false, false),
            (
                update("other", "available", "not-applied", true),
                false,
                false,
            ),
        ];
        for (u, applied, critical) in rows {
            let (due, crit) = elasticache_due(std::slice::from_ref(&u), &wanted);
            assert_eq!((!due.is_empty(), crit), (applied, critical), "{u:?}");
        }
    }
}
