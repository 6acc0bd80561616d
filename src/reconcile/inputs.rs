//! What a reconcile answers. A CR's inputs are its generation (its spec),
//! its labels, its annotations and whether it is being deleted. A watch
//! event that changes none of them (the echo of the operator's own status
//! write or finalizer) starts no reconcile: it is the predicate of every
//! CR watch. The identifier the operator records in an annotation wakes one
//! reconcile when it is first written, as a person's edit of it must.
//! A reconcile whose inputs the status says were answered already is a
//! recheck, which may use batched cloud observations; the status keeps
//! them (without the recorded identifier, which the reconcile that answered
//! them may have written) across restarts and leader changes.

use std::collections::BTreeMap;

use kube::Resource;
use serde::Serialize;

use crate::api::RESOURCE_IDENTIFIER_ANNOTATION;

#[derive(Serialize)]
struct Inputs<'a> {
    generation: Option<i64>,
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: BTreeMap<&'a str, &'a str>,
    deleting: bool,
}

/// The watch predicate: a hash of `obj`'s inputs.
pub fn inputs<K: Resource>(obj: &K) -> Option<u64> {
    Some(u64::from(hash(obj, true)))
}

/// `obj`'s inputs as `status.observedInputs` records them.
pub fn fingerprint<K: Resource>(obj: &K) -> String {
    format!("{:08x}", hash(obj, false))
}

/// Whether `observed` (a status's `observedInputs`) is `obj`'s inputs: its
/// reconcile is a recheck, a restart or an owned object's event, not the
/// answer to a change. A status without it (written before this field, or
/// by the Go operator) counts as answered, so the first start of this
/// version looks at the cloud in batches as any start does.
pub fn answered<K: Resource>(obj: &K, observed: Option<&str>) -> bool {
    observed.is_none_or(|o| o == fingerprint(obj))
}

fn hash<K: Resource>(obj: &K, with_identifier: bool) -> u32 {
    let meta = obj.meta();
    let inputs = Inputs {
        generation: meta.generation,
        labels: meta.labels.as_ref(),
        annotations: (meta.annotations.iter().flatten())
            .filter(|(k, _)| with_identifier || *k != RESOURCE_IDENTIFIER_ANNOTATION)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        deleting: meta.deletion_timestamp.is_some(),
    };
    super::fingerprint(&serde_json::to_string(&inputs).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn cr(metadata: serde_json::Value) -> ConfigMap {
        serde_json::from_value(json!({"metadata": metadata})).expect("a ConfigMap")
    }

    #[test]
    fn the_operators_own_writes_leave_the_inputs_as_they_were() {
        let created = cr(
            json!({"name": "db", "generation": 1, "resourceVersion": "1",
            "annotations": {"team": "a"}}),
        );
        // The finalizer and a new resourceVersion (the status) are no
        // input.
        let written = cr(
            json!({"name": "db", "generation": 1, "resourceVersion": "4",
            "finalizers": ["cloud-resources-operator.integreatly.org/finalizers"],
            "annotations": {"team": "a"}}),
        );
        assert_eq!(inputs(&created), inputs(&written));
        // The recorded identifier wakes a reconcile (a person may remove
        // or change it), which finds its inputs answered.
        let recorded = cr(
            json!({"name": "db", "generation": 1, "resourceVersion": "5",
            "annotations": {"team": "a", RESOURCE_IDENTIFIER_ANNOTATION: "appdb"}}),
        );
        assert_ne!(inputs(&recorded), inputs(&written));
        assert!(answered(&recorded, Some(&fingerprint(&created))));
    }

    #[test]
    fn a_persons_changes_and_a_deletion_are_inputs() {
        let base = json!({"name": "db", "generation": 1, "annotations": {"team": "a"}});
        let seen = fingerprint(&cr(base.clone()));
        let changed = [
            json!({"name": "db", "generation": 2, "annotations": {"team": "a"}}),
            json!({"name": "db", "generation": 1, "annotations": {"team": "b"}}),
            json!({"name": "db", "generation": 1, "annotations": {"team": "a", "test/poke": "1"}}),
            json!({"name": "db", "generation": 1, "annotations": {"team": "a"}, "labels": {"productName": "x"}}),
            json!({"name": "db", "generation": 1, "annotations": {"team": "a"},
                "deletionTimestamp": "2026-11-27T09:00:00Z"}),
        ];
        for metadata in changed {
            let now = cr(metadata.clone());
            assert!(!answered(&now, Some(&seen)), "{metadata}");
            assert_ne!(inputs(&now), inputs(&cr(base.clone())), "{metadata}");
        }
        assert!(
            answered(&cr(base), None),
            "a status from before observedInputs"
        );
    }
}
