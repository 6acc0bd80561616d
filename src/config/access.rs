//! Which namespaces may use a tier: the tier keys `allowedNamespaces`
//! (names) and `allowedNamespaceSelector` (a Kubernetes label selector over
//! the namespace's labels). A tier with neither is open to every namespace,
//! as in the Go operator; with either, a namespace must match one.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::TierKeyError;

pub const ALLOWED_NAMESPACES_KEY: &str = "allowedNamespaces";
pub const ALLOWED_NAMESPACE_SELECTOR_KEY: &str = "allowedNamespaceSelector";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Access {
    names: Vec<String>,
    selector: Option<LabelSelector>,
}

impl Access {
    /// Takes the access keys out of `tier`; `None` when it has neither.
    pub fn take(tier: &mut Value) -> Result<Option<Access>, TierKeyError> {
        let Some(t) = tier.as_object_mut() else {
            return Ok(None);
        };
        let names = t.remove(ALLOWED_NAMESPACES_KEY);
        let selector = t.remove(ALLOWED_NAMESPACE_SELECTOR_KEY);
        if names.is_none() && selector.is_none() {
            return Ok(None);
        }
        let names = match names {
            None => Vec::new(),
            Some(v) => serde_json::from_value(v).map_err(|_| TierKeyError::AllowedNamespaces)?,
        };
        let selector = match selector {
            None => None,
            Some(v) => {
                let s: LabelSelector =
                    serde_json::from_value(v).map_err(|e| TierKeyError::Selector(e.to_string()))?;
                check_operators(&s)?;
                Some(s)
            }
        };
        Ok(Some(Access { names, selector }))
    }

    /// Whether `namespace` is admitted by name alone.
    pub fn admits_name(&self, namespace: &str) -> bool {
        self.names.iter().any(|n| n == namespace)
    }

    /// Whether a namespace not admitted by name needs its labels looked at.
    pub fn has_selector(&self) -> bool {
        self.selector.is_some()
    }

    /// Whether a namespace with `labels` is admitted by the selector.
    pub fn admits_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.as_ref().is_some_and(|s| matches(s, labels))
    }

    /// What the tier admits, for messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.names.is_empty() {
            parts.push(format!("{ALLOWED_NAMESPACES_KEY} {:?}", self.names));
        }
        if let Some(s) = &self.selector {
            let json = serde_json::to_string(s).unwrap_or_default();
            parts.push(format!("{ALLOWED_NAMESPACE_SELECTOR_KEY} {json}"));
        }
        parts.join(", ")
    }
}

const OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

fn check_operators(s: &LabelSelector) -> Result<(), TierKeyError> {
    for e in s.match_expressions.iter().flatten() {
        if !OPERATORS.contains(&e.operator.as_str()) {
            return Err(TierKeyError::SelectorOperator {
                operator: e.operator.clone(),
                key: e.key.clone(),
            });
        }
    }
    Ok(())
}

/// Label selector semantics of the Kubernetes API: every `matchLabels`
/// pair and every expression must hold; an empty selector matches all.
fn matches(s: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = s.match_labels.iter().flatten();
    let pairs_hold = pairs.into_iter().all(|(k, v)| labels.get(k) == Some(v));
    let expressions_hold = s.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs_hold && expressions_hold
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn access(tier: Value) -> Result<Option<Access>, TierKeyError> {
        let mut tier = tier;
        let access = Access::take(&mut tier);
        assert!(tier.get(ALLOWED_NAMESPACES_KEY).is_none());
        assert!(tier.get(ALLOWED_NAMESPACE_SELECTOR_KEY).is_none());
        access
    }

    #[test]
    fn a_tier_without_access_keys_is_open() {
        assert_eq!(access(json!({"createStrategy": {}})), Ok(None));
    }

    #[test]
    fn names_and_selectors_admit_as_kubernetes_selects() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let a = access(json!({
            "allowedNamespaces": ["ops"],
            "allowedNamespaceSelector": {
                "matchLabels": {"tier-access": "production"},
                "matchExpressions": [
                    {"key": "team", "operator": "In", "values": ["a", "b"]},
                    {"key": "quarantined", "operator": "DoesNotExist"}
                ]
            }
        }))
        .ok()
        .flatten()
        .unwrap_or_default();
        assert!(a.admits_name("ops") && !a.admits_name("team-a"));
        assert!(a.admits_labels(&labels(&[("tier-access", "production"), ("team", "a")])));
        assert!(!a.admits_labels(&labels(&[("tier-access", "production"), ("team", "c")])));
        assert!(!a.admits_labels(&labels(&[("team", "a")])));
        assert!(!a.admits_labels(&labels(&[
            ("tier-access", "production"),
            ("team", "a"),
            ("quarantined", "")
        ])));
        let names_only = access(json!({"allowedNamespaces": ["ops"]}))
            .ok()
            .flatten()
            .unwrap_or_default();
        assert!(!names_only.has_selector() && !names_only.admits_labels(&labels(&[])));
    }

    #[test]
    fn malformed_access_keys_name_the_key() {
        let e = access(json!({"allowedNamespaces": "ops"}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("allowedNamespaces must be a list"), "{e}");
        let e = access(json!({"allowedNamespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]}}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("operator \"Equals\""), "{e}");
    }
}
