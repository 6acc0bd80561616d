//! Maintenance AWS has pending for each database, read as the Go operator
//! exports it (`setPostgresServiceMaintenanceMetric`,
//! `setRedisServiceMaintenanceMetric` in pkg/providers/aws/provider_*.go):
//! RDS pending maintenance actions and ElastiCache service updates.
//!
//! The Go operator lists the whole account's RDS actions, and describes
//! each group's updates, on every reconcile. Here both are account-wide
//! listings shared by every database of the account and region, taken at
//! most once per observation age (a minute by default) and only when a
//! settled database is looked at again: a few pages an hour, whatever the
//! number of databases.

use std::collections::BTreeMap;

use aws_sdk_rds::primitives::DateTime;
use cro_provider_api::{Maintenance, ProviderError};

use crate::describe::every_item;

/// Unix seconds of an optional AWS date; `None` stays `None`.
fn secs(at: Option<&DateTime>) -> Option<i64> {
    at.map(DateTime::secs)
}

/// A date as the Go operator writes it in a label: Unix seconds, with
/// Go's zero time for none where it dereferences nil dates
/// (`SafeTimeDereference`).
fn go_date(at: Option<i64>) -> String {
    const GO_ZERO_TIME: i64 = -62_135_596_800;
    at.unwrap_or(GO_ZERO_TIME).to_string()
}

/// One RDS pending maintenance action of the instance `arn` (pure).
pub fn rds_action(arn: &str, a: &aws_sdk_rds::types::PendingMaintenanceAction) -> Maintenance {
    let auto = secs(a.auto_applied_after_date());
    let current = secs(a.current_apply_date());
    let description = a.description().unwrap_or_default().to_string();
    let dated = |at: Option<i64>| at.map(|t| t.to_string()).unwrap_or_default();
    // The Go operator's value: the date it is applied on, else the one AWS
    // forces it after, else the time it was read.
    let due = current.or(auto);
    Maintenance {
        name: a.action().unwrap_or_default().to_string(),
        labels: vec![
            ("ResourceIdentifier".into(), arn.to_string()),
            ("AutoAppliedAfterDate".into(), dated(auto)),
            ("CurrentApplyDate".into(), dated(current)),
            ("Description".into(), description.clone()),
        ],
        value: due.unwrap_or_else(now),
        description,
        due,
    }
}

fn now() -> i64 {
    DateTime::from(std::time::SystemTime::now()).secs()
}

/// One ElastiCache service update of a replication group (pure).
pub fn elasticache_update(u: &aws_sdk_elasticache::types::UpdateAction) -> Maintenance {
    let text = |v: Option<&str>| v.unwrap_or_default().to_string();
    let recommended = secs(u.service_update_recommended_apply_by_date());
    let severity = u.service_update_severity().map(|s| s.as_str());
    let kind = u.service_update_type().map(|t| t.as_str());
    let labels = [
        ("ReplicationGroupId", text(u.replication_group_id())),
        ("CacheClusterId", text(u.cache_cluster_id())),
        ("Engine", text(u.engine())),
        ("EstimatedUpdateTime", text(u.estimated_update_time())),
        ("NodesUpdated", text(u.nodes_updated())),
        ("ServiceUpdateName", text(u.service_update_name())),
        ("ServiceUpdateRecommendedApplyByDate", go_date(recommended)),
        (
            "ServiceUpdateReleaseDate",
            go_date(secs(u.service_update_release_date())),
        ),
        ("ServiceUpdateSeverity", text(severity)),
        (
            "ServiceUpdateStatus",
            text(u.service_update_status().map(|s| s.as_str())),
        ),
        ("ServiceUpdateType", text(kind)),
        ("SlaMet", text(u.sla_met().map(|s| s.as_str()))),
        (
            "UpdateActionAvailableDate",
            go_date(secs(u.update_action_available_date())),
        ),
        (
            "UpdateActionStatus",
            text(u.update_action_status().map(|s| s.as_str())),
        ),
        (
            "UpdateActionStatusModifiedDate",
            go_date(secs(u.update_action_status_modified_date())),
        ),
    ];
    let description = match (severity, kind) {
        (Some(severity), Some(kind)) => format!("{severity} {kind}"),
        _ => "service update".to_string(),
    };
    Maintenance {
        name: text(u.service_update_name()),
        description,
        due: recommended,
        value: recommended.unwrap_or(-62_135_596_800),
        labels: labels.map(|(k, v)| (k.to_string(), v)).to_vec(),
    }
}

/// The maintenance pending for `id` as a listing no older than
/// `observed_within` shows it; `None` when not looked at (a database not
/// settled yet) or the listing failed (logged: a missing permission for it
/// must not stop the database's reconcile).
pub async fn pending<F, Fut>(
    listing: &crate::listing::Listing<Vec<Maintenance>>,
    id: &str,
    observed_within: Option<std::time::Duration>,
    list: F,
) -> Option<Vec<Maintenance>>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<BTreeMap<String, Vec<Maintenance>>, ProviderError>>,
{
    match listing.get(id, observed_within?, list).await {
        Ok(found) => Some(found.unwrap_or_default()),
        Err(e) => {
            tracing::warn!(resource = id, error = %e, "reading pending maintenance");
            None
        }
    }
}

/// Every RDS pending maintenance action of the account and region, by
/// instance ARN.
pub async fn list_rds(
    rds: &aws_sdk_rds::Client,
) -> Result<BTreeMap<String, Vec<Maintenance>>, ProviderError> {
    let call = rds.describe_pending_maintenance_actions().max_records(100);
    let op = "rds:DescribePendingMaintenanceActions";
    let pages = call.into_paginator().send();
    let all = every_item(pages, op, |p| p.pending_maintenance_actions()).await?;
    let mut out: BTreeMap<String, Vec<Maintenance>> = BTreeMap::new();
    for resource in all {
        let arn = resource.resource_identifier().unwrap_or_default();
        let actions = resource.pending_maintenance_action_details();
        (out.entry(arn.to_string()).or_default())
            .extend(actions.iter().map(|a| rds_action(arn, a)));
    }
    Ok(out)
}

/// Every ElastiCache service update the account's replication groups have
/// still to apply, by group.
pub async fn list_elasticache(
    ec: &aws_sdk_elasticache::Client,
) -> Result<BTreeMap<String, Vec<Maintenance>>, ProviderError> {
    use aws_sdk_elasticache::types::{ServiceUpdateStatus, UpdateActionStatus};
    // What is not applied yet (every status but complete, stopped short of
    // it by AWS, or not applicable), of updates AWS still offers.
    let open = [
        UpdateActionStatus::NotApplied,
        UpdateActionStatus::WaitingToStart,
        UpdateActionStatus::InProgress,
        UpdateActionStatus::Scheduling,
        UpdateActionStatus::Scheduled,
        UpdateActionStatus::Stopping,
        UpdateActionStatus::Stopped,
    ];
    let call = ec.describe_update_actions().max_records(100);
    let call = (call.service_update_status(ServiceUpdateStatus::Available))
        .set_update_action_status(Some(open.to_vec()));
    let op = "elasticache:DescribeUpdateActions";
    let all = every_item(call.into_paginator().send(), op, |p| p.update_actions()).await?;
    let mut out: BTreeMap<String, Vec<Maintenance>> = BTreeMap::new();
    for update in all {
        if let Some(group) = update.replication_group_id() {
            (out.entry(group.to_string()).or_default()).push(elasticache_update(&update));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rds_action_is_due_when_scheduled_else_when_forced() {
        use aws_sdk_rds::types::PendingMaintenanceAction;
        let at = |s| DateTime::from_secs(s);
        let action = PendingMaintenanceAction::builder()
            .action("system-update")
            .description("New Operating System update is available")
            .auto_applied_after_date(at(1_800_000_000))
            .build();
        let m = rds_action("arn:aws:rds:eu-west-1:1:db:x", &action);
        assert_eq!(
            (m.name.as_str(), m.due, m.value),
            ("system-update", Some(1_800_000_000), 1_800_000_000)
        );
        assert!(
            m.labels
                .contains(&("AutoAppliedAfterDate".into(), "1800000000".into()))
        );
        assert!(
            m.labels
                .contains(&("CurrentApplyDate".into(), String::new()))
        );
        let scheduled = PendingMaintenanceAction::builder()
            .action("system-update")
            .auto_applied_after_date(at(1_800_000_000))
            .current_apply_date(at(1_700_000_000))
            .build();
        assert_eq!(rds_action("a", &scheduled).due, Some(1_700_000_000));
        // Undated: the Go operator's value is the time it was read.
        let undated = PendingMaintenanceAction::builder()
            .action("db-upgrade")
            .build();
        let m = rds_action("a", &undated);
        assert_eq!(m.due, None);
        assert!((m.value - now()).abs() < 60);
    }

    #[test]
    fn an_elasticache_update_carries_the_go_labels() {
        use aws_sdk_elasticache::types::{ServiceUpdateSeverity, ServiceUpdateType, UpdateAction};
        let update = UpdateAction::builder()
            .replication_group_id("g1")
            .service_update_name("elasticache-20240116-001")
            .service_update_severity(ServiceUpdateSeverity::Critical)
            .service_update_type(ServiceUpdateType::SecurityUpdate)
            .service_update_recommended_apply_by_date(DateTime::from_secs(1_800_000_000))
            .build();
        let m = elasticache_update(&update);
        assert_eq!(m.due, Some(1_800_000_000));
        assert_eq!(m.description, "critical security-update");
        let names: Vec<&str> = m.labels.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names.len(), 15, "{names:?}");
        // Dates AWS did not give read as Go's zero time, as the Go
        // operator's labels show them.
        assert!(
            m.labels
                .contains(&("ServiceUpdateReleaseDate".into(), "-62135596800".into()))
        );
    }
}
