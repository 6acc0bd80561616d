//! What deleting a CR does to what it provisioned: `Delete` (the default,
//! as the Go operator: the provider's delete, final snapshot and all), or
//! `Retain`: the CR and its Secrets are released and the cloud resource,
//! in-cluster workload and credentials are left as they are, to be taken
//! over again by a CR of the same kind, namespace and name. Chosen by the
//! CR's annotation, else by its tier's `deletionPolicy` key.

use std::collections::BTreeMap;

use serde_json::Value;

use super::TierKeyError;

/// The annotation (on any of the six kinds) that chooses the policy.
pub const ANNOTATION: &str = "integreatly.org/deletion-policy";

/// The tier key that sets the default for the tier's CRs.
pub const TIER_KEY: &str = "deletionPolicy";

/// A CR's [`ANNOTATION`] holds a value that is not a policy.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION}: {0:?} is not a deletion policy; set it to \"retain\" (leave the cloud resource, its data and its Secrets) or \"delete\", and the deletion goes on"
)]
pub struct UnknownPolicy(pub String);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletionPolicy {
    #[default]
    Delete,
    Retain,
}

impl DeletionPolicy {
    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "delete" => Some(DeletionPolicy::Delete),
            "retain" => Some(DeletionPolicy::Retain),
            _ => None,
        }
    }

    /// Takes the tier's [`TIER_KEY`] out of `tier` (the provider never
    /// sees it).
    pub fn take(tier: &mut Value) -> Result<Self, TierKeyError> {
        let Some(given) = tier.as_object_mut().and_then(|t| t.remove(TIER_KEY)) else {
            return Ok(DeletionPolicy::Delete);
        };
        (given.as_str().and_then(DeletionPolicy::parse))
            .ok_or_else(|| TierKeyError::DeletionPolicy(given.to_string()))
    }

    /// The CR's policy: its [`ANNOTATION`], else `tier_default`. A value
    /// the operator does not know is an error naming the annotation: a typo
    /// of `retain` must not delete a database.
    pub fn of(
        annotations: &BTreeMap<String, String>,
        tier_default: DeletionPolicy,
    ) -> Result<Self, UnknownPolicy> {
        match annotations.get(ANNOTATION) {
            None => Ok(tier_default),
            // Cut: an annotation may be 256 KiB, a status message may not.
            Some(value) => DeletionPolicy::parse(value)
                .ok_or_else(|| UnknownPolicy(value.chars().take(64).collect())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_annotation_wins_over_the_tier_and_a_typo_deletes_nothing() {
        let annotated = |v: &str| BTreeMap::from([(ANNOTATION.to_string(), v.to_string())]);
        let none = BTreeMap::new();
        assert_eq!(
            DeletionPolicy::of(&none, DeletionPolicy::Delete),
            Ok(DeletionPolicy::Delete)
        );
        assert_eq!(
            DeletionPolicy::of(&none, DeletionPolicy::Retain),
            Ok(DeletionPolicy::Retain)
        );
        let retain = DeletionPolicy::of(&annotated("Retain"), DeletionPolicy::Delete);
        assert_eq!(retain, Ok(DeletionPolicy::Retain));
        let delete = DeletionPolicy::of(&annotated("delete"), DeletionPolicy::Retain);
        assert_eq!(delete, Ok(DeletionPolicy::Delete));
        let typo = DeletionPolicy::of(&annotated("retian"), DeletionPolicy::Delete);
        let message = typo.unwrap_err().to_string();
        assert!(
            message.contains(ANNOTATION) && message.contains("\"retian\""),
            "{message}"
        );
        let huge = DeletionPolicy::of(&annotated(&"x".repeat(100_000)), DeletionPolicy::Delete);
        let message = huge.unwrap_err().to_string();
        assert!(message.len() < 400, "{} bytes", message.len());
    }

    #[test]
    fn the_tier_key_is_taken_out_of_the_strategy() {
        let mut tier = json!({"deletionPolicy": "retain", "region": "eu-west-1"});
        assert_eq!(DeletionPolicy::take(&mut tier), Ok(DeletionPolicy::Retain));
        assert_eq!(tier, json!({"region": "eu-west-1"}));
        let mut tier = json!({"deletionPolicy": 1});
        let err = DeletionPolicy::take(&mut tier).unwrap_err().to_string();
        assert!(err.contains("deletionPolicy 1"), "{err}");
    }
}
