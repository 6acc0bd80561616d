//! What differs between a workload's live objects and what the tier
//! describes, as changes named by kind and spec path
//! (`Deployment.spec.template.spec.containers[postgres].image`). Pure.

use cro_provider_api::{Change, Timing};
use serde_json::Value;

use crate::merge::diff;

/// The changes that make `live` (absent: `None`) hold `desired`.
pub fn changes(kind: &str, desired: &Value, live: Option<&Value>) -> Vec<Change> {
    let Some(live) = live else {
        return vec![Change {
            field: kind.to_string(),
            current: "absent".into(),
            desired: "created".into(),
            timing: Timing::Now,
            restarts: false,
        }];
    };
    diff(desired, live)
        .into_iter()
        .map(|(path, current, want)| Change {
            // A new pod template replaces the pod (Recreate): a restart.
            restarts: kind == "Deployment" && path.starts_with("spec.template"),
            field: format!("{kind}.{path}"),
            current: render(&current),
            desired: render(&want),
            timing: Timing::Now,
        })
        .collect()
}

/// Whether `changes` would create the workload rather than change it.
pub fn creates_workload(changes: &[Change]) -> bool {
    changes
        .iter()
        .any(|c| c.field == "Deployment" && c.current == "absent")
}

fn render(v: &Value) -> String {
    match v {
        Value::Null => "absent".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_changed_image_restarts_a_missing_object_is_created() {
        let desired = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "redis", "image": "redis:7"}]}}}});
        let live = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "redis", "image": "redis:6"}]}}}});
        let got: Vec<_> = changes("Deployment", &desired, Some(&live))
            .into_iter()
            .map(|c| (c.field, c.current, c.desired, c.restarts))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "Deployment.spec.replicas".to_string(),
                    "2".to_string(),
                    "1".to_string(),
                    false
                ),
                (
                    "Deployment.spec.template.spec.containers[redis].image".to_string(),
                    "redis:6".to_string(),
                    "redis:7".to_string(),
                    true
                ),
            ]
        );
        let created = changes("Deployment", &desired, None);
        assert!(creates_workload(&created));
        assert!(!creates_workload(&changes("Service", &desired, None)));
        assert!(changes("Deployment", &desired, Some(&desired)).is_empty());
    }
}
