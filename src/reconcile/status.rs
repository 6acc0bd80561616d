//! Status as observed state: phase, message, the `Ready` condition and
//! `observedGeneration`, written only when something changed.

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

use crate::api::{Phase, SecretRef};

/// What a reconcile found, independent of the kind's status type.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub phase: Phase,
    pub message: String,
    pub strategy: Option<String>,
    pub provider: Option<String>,
    pub version: Option<String>,
    pub secret_ref: Option<SecretRef>,
    pub snapshot_id: Option<String>,
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
    let status = if report.phase == Phase::Complete {
        "True"
    } else {
        "False"
    };
    let old = previous.iter().find(|c| c.type_ == "Ready");
    let last_transition_time = match old {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: ready_reason(report.phase).into(),
        message: report.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}

/// Conditions with Ready replaced (others, e.g. set by another writer, kept).
pub fn with_ready(previous: &[Condition], ready: Condition) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| c.type_ != "Ready")
        .cloned()
        .collect();
    out.insert(0, ready);
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
}
