//! Status as observed state: phase, message, the `Ready` condition and
//! `observedGeneration`, written only when something changed.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use super::conditions::{ConditionType, find, status_of};
use crate::api::{Phase, SecretRef};

/// What a reconcile found, independent of the kind's status type.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub phase: Phase,
    pub message: String,
    /// `status.strategy`, as the Go operator calls the provider's name in
    /// `cloud-resource-config` (e.g. `aws`).
    pub strategy: Option<String>,
    /// `status.provider`: what the provider made (e.g. `aws-rds`).
    pub provider: Option<String>,
    pub version: Option<String>,
    pub secret_ref: Option<SecretRef>,
    pub snapshot_id: Option<String>,
    /// The cloud identifier, when known (a metrics label).
    pub instance_id: Option<String>,
    /// Conditions a provider reports besides Ready.
    pub conditions: Vec<cro_provider_api::Condition>,
    /// Differences from the tier not applied yet.
    pub pending: Vec<crate::api::PendingChange>,
    /// The hash a person approves `pending` with.
    pub plan_hash: Option<String>,
    /// The hash a person adopts someone else's resource with.
    pub adoption_hash: Option<String>,
    /// The last credential rotation.
    pub rotation: Option<crate::api::CredentialsRotation>,
    /// What the cloud said of the resource in this pass (metrics only).
    pub health: Option<cro_provider_api::Health>,
    /// The fingerprint of the inputs a reconcile answered (see
    /// [`super::inputs`]).
    pub observed_inputs: Option<String>,
}

impl Report {
    pub fn new(phase: Phase, message: impl Into<String>) -> Self {
        Report {
            phase,
            message: message.into(),
            strategy: None,
            provider: None,
            version: None,
            secret_ref: None,
            snapshot_id: None,
            instance_id: None,
            conditions: Vec::new(),
            pending: Vec::new(),
            plan_hash: None,
            adoption_hash: None,
            rotation: None,
            health: None,
            observed_inputs: None,
        }
    }
}

/// Reason of the `Ready` condition for a phase (CamelCase, as Kubernetes
/// conventions ask).
pub fn ready_reason(phase: Phase) -> &'static str {
    match phase {
        Phase::Complete => "Complete",
        Phase::InProgress => "InProgress",
        Phase::DeleteInProgress => "Deleting",
        Phase::Paused => "Paused",
        Phase::Failed => "Failed",
    }
}

/// The `Ready` condition for `report`, keeping `lastTransitionTime` from
/// `previous` when the condition's status did not change.
pub fn ready_condition(
    report: &Report,
    generation: Option<i64>,
    previous: &[Condition],
) -> Condition {
    let status = status_of(report.phase == Phase::Complete);
    let old = find(previous, ConditionType::Ready);
    let last_transition_time = match old {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    Condition {
        type_: ConditionType::Ready.to_string(),
        status: status.into(),
        reason: ready_reason(report.phase).into(),
        message: report.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// Conditions the operator reports only while they hold (a feature asked of
/// a provider that lacks it): once not reported, they are removed, not kept
/// as if another writer had set them.
const WHILE_THEY_HOLD: [ConditionType; 3] = [
    ConditionType::SnapshotsScheduled,
    ConditionType::CredentialsRotated,
    ConditionType::Connectable,
];

/// Conditions with Ready, the provider's conditions and those reported
/// while they hold replaced (others, e.g. set by another writer, kept). A
/// condition keeps its `lastTransitionTime` while its status stays the same.
pub fn merged(
    previous: &[Condition],
    ready: Condition,
    extra: &[cro_provider_api::Condition],
    generation: Option<i64>,
) -> Vec<Condition> {
    let extra: Vec<Condition> = extra
        .iter()
        .map(|c| {
            let status = status_of(c.status);
            let last_transition_time = match find(previous, c.type_) {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => Time(Timestamp::now()),
            };
            Condition {
                type_: c.type_.to_string(),
                status: status.into(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect();
    let replaced = |t: &str| {
        ConditionType::parse(t)
            .is_some_and(|t| t == ConditionType::Ready || WHILE_THEY_HOLD.contains(&t))
            || extra.iter().any(|e| e.type_ == t)
    };
    let mut out = vec![ready];
    out.extend(extra.iter().cloned());
    out.extend(previous.iter().filter(|c| !replaced(&c.type_)).cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_kept_while_status_unchanged() {
        let old = Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "InProgress".into(),
            message: "creating".into(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        let r = Report::new(Phase::Failed, "boom");
        let c = ready_condition(&r, Some(2), std::slice::from_ref(&old));
        assert_eq!(c.last_transition_time, old.last_transition_time);
        assert_eq!((c.reason.as_str(), c.message.as_str()), ("Failed", "boom"));
        let done = ready_condition(
            &Report::new(Phase::Complete, "ok"),
            Some(2),
            std::slice::from_ref(&old),
        );
        assert_eq!(done.status, "True");
        assert_ne!(done.last_transition_time, old.last_transition_time);
    }

    #[test]
    fn a_condition_reported_while_it_holds_goes_when_it_no_longer_does() {
        let condition = |type_: &str| Condition {
            type_: type_.to_string(),
            status: "False".into(),
            reason: "Unsupported".into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        };
        let previous = [
            condition(ConditionType::SnapshotsScheduled.as_str()),
            condition("SetByAnotherWriter"),
        ];
        let ready = condition("Ready");
        let kept = merged(&previous, ready.clone(), &[], Some(1));
        let types: Vec<&str> = kept.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready", "SetByAnotherWriter"]);
        let still = cro_provider_api::Condition {
            type_: ConditionType::SnapshotsScheduled,
            status: false,
            reason: "Unsupported".into(),
            message: String::new(),
        };
        let kept = merged(&previous, ready, &[still], Some(1));
        assert_eq!(
            kept[1].last_transition_time,
            previous[0].last_transition_time
        );
    }
}
