//! The provider's answer as the CR's status: what it runs, the `UpToDate`
//! and `Adopted` conditions, pending changes and maintenance, and the
//! credential rotation it completed (pure, table-tested below).

use cro_provider_api::{Adoption, Change, ChangePolicy, Outcome, plan_hash};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use tracing::info;

use crate::{
    api::{ADOPT_ANNOTATION, APPROVE_PLAN_ANNOTATION, PendingChange, Phase},
    controllers::{kinds::ResourceCr, rotation},
    reconcile::{
        Managed, Report,
        conditions::{self, ConditionType},
        key,
    },
};

/// The `UpToDate` condition: whether the live resource matches its tier,
/// and if not, what differs, when each difference applies and, under a
/// `Plan` tier, how to approve them.
fn up_to_date(
    pending: &[PendingChange],
    hash: &str,
    policy: ChangePolicy,
    approved: Option<&str>,
) -> cro_provider_api::Condition {
    let condition = |status, reason: &str, message| cro_provider_api::Condition {
        type_: ConditionType::UpToDate,
        status,
        reason: reason.into(),
        message,
    };
    if pending.is_empty() {
        return condition(true, "UpToDate", "the resource matches its tier".into());
    }
    let list: Vec<String> = pending
        .iter()
        .map(|c| format!("{} {} -> {} ({})", c.field, c.current, c.desired, c.when))
        .collect();
    let differences = format!(
        "{} difference(s) from the tier: {}",
        pending.len(),
        list.join("; ")
    );
    match (policy, approved) {
        (ChangePolicy::Automatic, _) => condition(
            false,
            "PendingChanges",
            format!(
                "{differences}; they apply when spec.maintenanceWindow is true (disruptive ones in the cloud's next maintenance window, at once with spec.applyImmediately too)"
            ),
        ),
        (ChangePolicy::Online, _) => condition(
            false,
            "PendingChanges",
            format!(
                "{differences}; disruptive ones apply when spec.maintenanceWindow is true (in the cloud's next maintenance window, at once with spec.applyImmediately too)"
            ),
        ),
        (ChangePolicy::Plan, Some(stale)) if stale != hash => condition(
            false,
            "StaleApproval",
            format!(
                "{differences}; nothing was applied: {APPROVE_PLAN_ANNOTATION} is {stale:?}, not this plan's hash {hash:?} (the changes differ from the ones approved); review them and set the annotation to {hash:?} to apply them"
            ),
        ),
        (ChangePolicy::Plan, _) => condition(
            false,
            "AwaitingApproval",
            format!(
                "{differences}; the tier's changePolicy is Plan: annotate the resource with {APPROVE_PLAN_ANNOTATION}={hash} to apply them"
            ),
        ),
    }
}

/// Status of a usable resource's differences from its tier: the list, the
/// hash that approves them, and the `UpToDate` condition; then the
/// maintenance the cloud has pending for it, which is the cloud's, not
/// the tier's: listed, never part of the plan or of `UpToDate`.
pub(super) fn report_pending(
    report: &mut Report,
    (identifier, pending): (&str, Vec<Change>),
    policy: ChangePolicy,
    approved: Option<String>,
) {
    let hash = plan_hash(identifier, &pending);
    report.pending = pending.into_iter().map(pending_change).collect();
    let condition = up_to_date(&report.pending, &hash, policy, approved.as_deref());
    report.conditions.push(condition);
    report.plan_hash = (!report.pending.is_empty()).then_some(hash);
    let maintenance = (report.health.as_ref()).and_then(|h| h.maintenance.as_deref());
    report.pending.extend(
        maintenance
            .unwrap_or_default()
            .iter()
            .map(pending_maintenance),
    );
}

/// A maintenance action the cloud has pending, as `status.pendingChanges`
/// lists it.
/// Under a `Plan` tier, deleting the resource is a change like any other:
/// it waits until a person approves it by its hash (`approved`, the CR's
/// annotation). What the deletion waits for, or `None` to go on.
pub(super) fn deletion_awaiting_approval(
    kind: &str,
    identifier: &str,
    policy: ChangePolicy,
    approved: Option<&str>,
) -> Option<String> {
    if policy != ChangePolicy::Plan {
        return None;
    }
    let deletion = Change {
        field: "deletion".into(),
        current: identifier.into(),
        desired: "deleted".into(),
        timing: cro_provider_api::Timing::Now,
        restarts: true,
    };
    let hash = plan_hash(identifier, &[deletion]);
    (approved != Some(hash.as_str())).then(|| {
        format!(
            "the tier's changePolicy is Plan: {kind} {identifier} and its data are deleted once a person approves it: annotate the resource with {APPROVE_PLAN_ANNOTATION}={hash}, or with {}=retain to leave it as it is",
            crate::config::deletion_policy::ANNOTATION
        )
    })
}

fn pending_maintenance(m: &cro_provider_api::Maintenance) -> PendingChange {
    let due = m
        .due
        .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t).ok());
    PendingChange {
        field: format!("maintenance {}", m.name),
        current: m.description.clone(),
        desired: "applied".into(),
        when: match due {
            Some(at) => format!("by the cloud provider, due {at}"),
            None => "by the cloud provider, when opted in (no date set)".into(),
        },
        restarts: false,
    }
}

/// The `Adopted` condition: `False` while a cloud resource someone else
/// made waits for a person to adopt it; `True` once adopted (only shown
/// when it was `False` before).
fn adopted(
    adoption: Option<&Adoption>,
    previous: &[Condition],
) -> Option<cro_provider_api::Condition> {
    let condition = |status, reason: &str, message| cro_provider_api::Condition {
        type_: ConditionType::Adopted,
        status,
        reason: reason.into(),
        message,
    };
    let Some(a) = adoption else {
        return conditions::is(previous, ConditionType::Adopted, false)
            .then(|| condition(true, "Adopted", "the cloud resource was adopted".into()));
    };
    let list: Vec<String> = a
        .changes
        .iter()
        .map(|c| format!("{} {} -> {}", c.field, c.current, c.desired))
        .collect();
    Some(condition(
        false,
        "AwaitingAdoption",
        format!(
            "a cloud resource already exists under this resource's identifier without this cluster's clusterID tag; it is neither changed nor deleted until adopted. Adopting it changes: {}; to adopt it, annotate the resource with {ADOPT_ANNOTATION}={}",
            list.join("; "),
            a.hash
        ),
    ))
}

fn pending_change(c: cro_provider_api::Change) -> PendingChange {
    PendingChange {
        field: c.field,
        current: c.current,
        desired: c.desired,
        when: c.timing.describe(),
        restarts: c.restarts,
    }
}

/// The status for what the provider reported, before its outcome is
/// applied: what it runs, its conditions, adoption, and the credential
/// rotation it completed (recorded only with the new credentials ready),
/// or that it cannot rotate them.
pub(super) fn report_of_provisioned<K: ResourceCr>(
    cr: &K,
    provider_name: String,
    provisioned: &cro_provider_api::Provisioned,
    rotation: Option<String>,
    rotates: bool,
) -> Report {
    let previous = cr.report();
    let mut report = Report {
        strategy: Some(provider_name),
        provider: Some(provisioned.provider.clone()).filter(|p| !p.is_empty()),
        version: (provisioned.version.clone())
            .or_else(|| previous.as_ref().and_then(|p| p.version.clone())),
        secret_ref: previous.as_ref().and_then(|p| p.secret_ref.clone()),
        instance_id: provisioned.identifier.clone(),
        conditions: provisioned.conditions.clone(),
        rotation: previous.and_then(|p| p.rotation),
        health: provisioned.health.clone(),
        ..Report::new(Phase::InProgress, "")
    };
    let rotated = rotation.as_ref().filter(|token| {
        provisioned.rotated.as_ref() == Some(*token)
            && matches!(provisioned.outcome, Outcome::Ready(_))
    });
    if let Some(token) = rotated {
        let now = k8s_openapi::jiff::Timestamp::now();
        report.rotation = Some(rotation::completed(token, report.rotation.as_ref(), now));
        info!(object = %key(cr), "credentials rotated");
    }
    if rotation.is_some() && !rotates {
        report.conditions.push(rotation::unsupported());
    }
    report.conditions.extend(adopted(
        provisioned.adoption.as_ref(),
        Managed::conditions(cr),
    ));
    if let Some(adoption) = &provisioned.adoption {
        report.adoption_hash = Some(adoption.hash.clone());
        report.pending = adoption
            .changes
            .iter()
            .cloned()
            .map(pending_change)
            .collect();
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_tier_deletes_only_what_was_approved_by_its_hash() {
        let waiting = deletion_awaiting_approval("Postgres", "db-1", ChangePolicy::Plan, None)
            .unwrap_or_default();
        let hash = waiting
            .split(&format!("{APPROVE_PLAN_ANNOTATION}="))
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_default()
            .to_string();
        assert_eq!(hash.len(), 10, "{waiting}");
        assert!(
            waiting.contains("db-1") && waiting.contains("=retain"),
            "{waiting}"
        );
        assert_eq!(
            deletion_awaiting_approval("Postgres", "db-1", ChangePolicy::Plan, Some(&hash)),
            None
        );
        // A hash approves the deletion of one resource only, and no
        // plan's hash of changes approves a deletion.
        assert!(
            deletion_awaiting_approval("Postgres", "db-2", ChangePolicy::Plan, Some(&hash))
                .is_some()
        );
        let change = plan_hash("db-1", &[]);
        assert!(
            deletion_awaiting_approval("Postgres", "db-1", ChangePolicy::Plan, Some(&change))
                .is_some()
        );
        for policy in [ChangePolicy::Automatic, ChangePolicy::Online] {
            assert_eq!(
                deletion_awaiting_approval("Postgres", "db-1", policy, None),
                None
            );
        }
    }
    use cro_provider_api::Timing;

    fn change(field: &str, timing: Timing) -> Change {
        Change {
            field: field.into(),
            current: "a".into(),
            desired: "b".into(),
            timing,
            restarts: false,
        }
    }

    #[test]
    fn up_to_date_says_what_differs_and_how_to_apply_it() {
        let pending = vec![pending_change(change(
            "DBInstanceClass",
            Timing::MaintenanceWindow,
        ))];
        // (pending, policy, approved) -> (status, reason, a phrase of the message)
        use ChangePolicy::{Automatic, Plan};
        type Case<'a> = (&'a [PendingChange], ChangePolicy, Option<&'a str>);
        let cases: [(Case<'_>, bool, &str, &str); 5] = [
            ((&[], Automatic, None), true, "UpToDate", "matches its tier"),
            (
                (&[], Plan, Some("old")),
                true,
                "UpToDate",
                "matches its tier",
            ),
            (
                (&pending, Automatic, None),
                false,
                "PendingChanges",
                "spec.maintenanceWindow",
            ),
            (
                (&pending, Plan, None),
                false,
                "AwaitingApproval",
                "=h1 to apply",
            ),
            (
                (&pending, Plan, Some("old")),
                false,
                "StaleApproval",
                "is \"old\", not this plan's hash \"h1\"",
            ),
        ];
        for ((pending, policy, approved), status, reason, phrase) in cases {
            let c = up_to_date(pending, "h1", policy, approved);
            assert_eq!((c.status, c.reason.as_str()), (status, reason), "{c:?}");
            assert!(c.message.contains(phrase), "{}", c.message);
        }
        let c = up_to_date(&pending, "h1", ChangePolicy::Automatic, None);
        assert!(
            c.message
                .contains("1 difference(s) from the tier: DBInstanceClass a -> b"),
            "{}",
            c.message
        );
    }

    #[test]
    fn maintenance_is_listed_but_never_part_of_the_plan() {
        let mut report = Report::new(Phase::Complete, "ready".to_string());
        report.health = Some(cro_provider_api::Health {
            maintenance: Some(vec![cro_provider_api::Maintenance {
                name: "system-update".into(),
                description: "New OS".into(),
                due: Some(1_800_000_000),
                ..Default::default()
            }]),
            ..Default::default()
        });
        report_pending(&mut report, ("db", Vec::new()), ChangePolicy::Plan, None);
        assert_eq!(report.plan_hash, None);
        assert!(
            report
                .conditions
                .iter()
                .any(|c| c.type_ == ConditionType::UpToDate && c.status)
        );
        let listed = &report.pending[0];
        assert_eq!(listed.field, "maintenance system-update");
        assert_eq!(
            listed.when,
            "by the cloud provider, due 2027-01-15T08:00:00Z"
        );
        // With a tier difference, the hash is the difference's alone.
        let mut with_change = Report::new(Phase::Complete, "ready".to_string());
        with_change.health = report.health.clone();
        let diff = vec![change("AllocatedStorage", Timing::Now)];
        let hash = plan_hash("db", &diff);
        report_pending(&mut with_change, ("db", diff), ChangePolicy::Plan, None);
        assert_eq!(with_change.plan_hash, Some(hash));
        assert_eq!(with_change.pending.len(), 2);
    }

    #[test]
    fn adopted_waits_for_a_person_and_says_so_once_done() {
        let adoption = Adoption {
            changes: vec![change("tag integreatly.org/clusterID", Timing::Now)],
            hash: "h2".into(),
        };
        let waiting = adopted(Some(&adoption), &[]).unwrap_or_else(|| panic!("no condition"));
        assert_eq!(
            (waiting.status, waiting.reason.as_str()),
            (false, "AwaitingAdoption")
        );
        assert!(
            waiting.message.contains("integreatly.org/adopt=h2"),
            "{}",
            waiting.message
        );
        // Never waited: no condition; waited before: True once adopted.
        assert_eq!(adopted(None, &[]), None);
        let before: Condition = serde_json::from_value(serde_json::json!({
            "type": "Adopted", "status": "False", "reason": "AwaitingAdoption", "message": "",
            "lastTransitionTime": "2026-11-25T00:00:00Z"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let done = adopted(None, &[before]).map(|c| (c.status, c.reason));
        assert_eq!(done, Some((true, "Adopted".to_string())));
    }
}
