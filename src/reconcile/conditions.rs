//! Condition types as an enum, and the one place where a condition's
//! status string becomes a bool.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

pub use cro_provider_api::ConditionType;

/// Kubernetes' condition status for whether a condition holds.
pub fn status_of(holds: bool) -> &'static str {
    match holds {
        true => "True",
        false => "False",
    }
}

/// The condition of type `t` among `conditions`.
pub fn find(conditions: &[Condition], t: ConditionType) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == t.as_str())
}

/// Whether `conditions` hold one of type `t` whose status is `holds`
/// (`Unknown` is neither).
pub fn is(conditions: &[Condition], t: ConditionType, holds: bool) -> bool {
    find(conditions, t).is_some_and(|c| c.status == status_of(holds))
}
