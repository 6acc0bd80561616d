//! The six custom resources of `integreatly.org/v1alpha1`.
//!
//! Field names, required fields and phase strings match the Go operator's
//! CRDs exactly, so CRs written for it are accepted unchanged. What we add
//! (`conditions`, `observedGeneration`, printer columns, validation) is
//! additive: clients of the Go operator ignore it.

mod common;
mod lenient;
pub mod reference;
mod resources;
mod snapshots;

pub use common::{
    CredentialsRotation, Duration, DurationError, PendingChange, Phase, ResourceTypeSpec,
    ResourceTypeStatus, RestoreSpec, SecretRef, SnapshotSpec, SnapshotStatus, seconds,
};
pub use resources::{
    BlobStorage, BlobStorageSpec, Postgres, PostgresSpec, Redis, RedisSpec, SMTPCredentialSet,
    SMTPCredentialSetSpec,
};
pub use snapshots::{PostgresSnapshot, PostgresSnapshotSpec, RedisSnapshot, RedisSnapshotSpec};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// API group of every kind.
pub const GROUP: &str = "integreatly.org";
/// API version of every kind.
pub const VERSION: &str = "v1alpha1";

/// Annotation holding a resource's cloud identifier once created (the Go
/// operator's name, so resources it created are found again).
pub const RESOURCE_IDENTIFIER_ANNOTATION: &str = "resourceIdentifier";

/// Label whose value becomes the `product-name` tag and the metrics'
/// `productName` label (as in the Go operator).
pub const PRODUCT_NAME_LABEL: &str = "productName";

/// Annotation a person sets to `status.planHash` to apply a `Plan` tier's
/// pending changes to one CR.
pub const APPROVE_PLAN_ANNOTATION: &str = "integreatly.org/approve-plan";

/// Annotation a person sets to `status.adoptionHash` to adopt a cloud
/// resource someone else made under the CR's identifier.
pub const ADOPT_ANNOTATION: &str = "integreatly.org/adopt";

/// Every CRD this operator serves, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Postgres::crd(),
        Redis::crd(),
        BlobStorage::crd(),
        SMTPCredentialSet::crd(),
        PostgresSnapshot::crd(),
        RedisSnapshot::crd(),
    ]
}

/// File name of a CRD under `crds/` (the kubebuilder convention the Go
/// operator uses: `<group>_<plural>.yaml`).
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// A CRD as YAML, as written to `crds/` and printed by `crd`.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaProps, JSONSchemaPropsOrArray,
    };

    /// `crds/` and the Helm chart's copy are what users install; they must
    /// be what the Rust types say, and crds/kustomization.yaml lists them.
    #[test]
    fn checked_in_crds_match_the_rust_types() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let kustomization =
            std::fs::read_to_string(root.join("crds/kustomization.yaml")).unwrap_or_default();
        for crd in crds() {
            assert!(
                kustomization.contains(&format!("- {}", crd_file_name(&crd))),
                "crds/kustomization.yaml does not list {}",
                crd_file_name(&crd)
            );
        }
        for dir in [root.join("crds"), root.join("deploy/helm/crds")] {
            for crd in crds() {
                let path = dir.join(crd_file_name(&crd));
                let want = crd_yaml(&crd).unwrap_or_else(|e| panic!("{e}"));
                let have = std::fs::read_to_string(&path).unwrap_or_default();
                assert!(
                    have == want,
                    "{} is missing or stale: run `make crds` and commit the result",
                    path.display()
                );
            }
            let files = std::fs::read_dir(&dir)
                .map(|d| {
                    d.filter_map(Result::ok)
                        .filter(|e| e.file_name() != "kustomization.yaml")
                        .count()
                })
                .unwrap_or(0);
            assert_eq!(
                files,
                6,
                "{} should hold exactly the six CRDs",
                dir.display()
            );
        }
    }

    /// What `kubectl explain` and `kubectl get` show users: a real
    /// description for every kind and field, one category for all six, and
    /// the message and Connectable in `-o wide`.
    #[test]
    fn every_kind_and_field_is_described_and_in_the_category() {
        fn described(path: &str, schema: &JSONSchemaProps, missing: &mut Vec<String>) {
            if schema
                .description
                .as_deref()
                .unwrap_or("")
                .trim()
                .is_empty()
            {
                missing.push(path.to_string());
            }
            for (name, child) in schema.properties.iter().flatten() {
                described(&format!("{path}.{name}"), child, missing);
            }
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items
                && item.properties.is_some()
            {
                for (name, child) in item.properties.iter().flatten() {
                    described(&format!("{path}[].{name}"), child, missing);
                }
            }
        }
        for crd in crds() {
            let kind = &crd.spec.names.kind;
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["cloudresources".to_string()][..]),
                "{kind}"
            );
            let version = &crd.spec.versions[0];
            let root = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("a schema");
            let top = root.description.as_deref().unwrap_or("");
            assert!(
                top.len() > 80 && !top.contains("Auto-generated"),
                "{kind}: {top:?}"
            );
            let mut missing = vec![];
            for part in ["spec", "status"] {
                described(part, &root.properties.as_ref().unwrap()[part], &mut missing);
            }
            assert!(missing.is_empty(), "{kind}: no description for {missing:?}");
            let wide: Vec<_> = version
                .additional_printer_columns
                .iter()
                .flatten()
                .filter(|c| c.priority == Some(1))
                .map(|c| c.name.as_str())
                .collect();
            assert!(wide.contains(&"Message"), "{kind}: {wide:?}");
        }
    }

    /// docs/reference.md is what the CRDs say.
    #[test]
    fn the_checked_in_reference_matches_the_crds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let have = std::fs::read_to_string(root.join("docs/reference.md")).unwrap_or_default();
        assert!(
            have == reference::markdown(&crds()),
            "docs/reference.md is missing or stale: run `make crds` and commit the result"
        );
    }

    #[test]
    fn kinds_and_plurals_match_the_go_operator() {
        let names: Vec<_> = crds()
            .iter()
            .map(|c| {
                assert_eq!(c.spec.group, GROUP);
                assert_eq!(c.spec.scope, "Namespaced");
                let v = &c.spec.versions[0];
                assert_eq!(v.name, VERSION);
                assert!(
                    v.subresources
                        .as_ref()
                        .and_then(|s| s.status.as_ref())
                        .is_some()
                );
                (c.spec.names.kind.clone(), c.spec.names.plural.clone())
            })
            .collect();
        let want = [
            ("Postgres", "postgres"),
            ("Redis", "redis"),
            ("BlobStorage", "blobstorages"),
            ("SMTPCredentialSet", "smtpcredentialsets"),
            ("PostgresSnapshot", "postgressnapshots"),
            ("RedisSnapshot", "redissnapshots"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(k, p)| (k.to_string(), p.to_string()))
            .collect();
        assert_eq!(names, want);
    }

    #[test]
    fn phases_serialise_to_the_go_operator_strings() {
        let strings: Vec<_> = Phase::ALL
            .iter()
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect();
        assert_eq!(
            strings,
            [
                "in progress",
                "deletion in progress",
                "complete",
                "paused",
                "failed"
            ]
        );
        for p in Phase::ALL {
            assert_eq!(serde_json::to_value(p).unwrap_or_default(), p.as_str());
        }
    }

    #[test]
    fn a_go_operator_postgres_cr_deserialises() {
        let cr: Postgres = serde_json::from_value(serde_json::json!({
            "apiVersion": "integreatly.org/v1alpha1",
            "kind": "Postgres",
            "metadata": {"name": "db", "namespace": "app"},
            "spec": {
                "type": "managed", "tier": "production",
                "secretRef": {"name": "db-sec", "namespace": "app"},
                "maintenanceWindow": true, "applyImmediately": false, "skipCreate": false,
                "snapshotFrequency": "1d", "snapshotRetention": "7d"
            },
            "status": {"phase": "complete", "strategy": "aws", "provider": "aws-rds",
                       "message": "creation successful", "version": "16.4",
                       "secretRef": {"name": "db-sec", "namespace": "app"}}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cr.spec.resource.r#type, "managed");
        assert!(cr.spec.resource.maintenance_window);
        let retention = cr.spec.resource.snapshot_retention.as_ref();
        assert_eq!(
            retention.map(|d| (d.as_str(), d.seconds())),
            Some(("7d", Some(7 * 86_400)))
        );
        assert_eq!(cr.status.and_then(|s| s.phase), Some(Phase::Complete));
    }

    #[test]
    fn any_status_reads_and_odd_fields_read_as_absent() {
        let redis = |status: serde_json::Value| {
            serde_json::from_value::<Redis>(serde_json::json!({
                "apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
                "metadata": {"name": "r", "namespace": "app"},
                "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "s"}},
                "status": status
            }))
            .map(|r| r.status.unwrap_or_default())
        };
        let s =
            redis(serde_json::json!({"phase": "", "strategy": "aws", "secretRef": {"name": ""}}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.phase, s.strategy.as_deref()), (None, Some("aws")));
        assert_eq!(s.secret_ref.map(|r| r.name), Some(String::new()));
        let s = redis(serde_json::json!({"phase": "creating"})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.phase, None);
        let s = redis(serde_json::json!({
            "phase": 3, "version": 5, "secretRef": "x", "observedGeneration": "abc",
            "conditions": [{"type": "Ready"}, {"type": "Ready", "status": "True", "reason": "Complete", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "message": "kept"
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.phase, s.version, s.secret_ref, s.observed_generation),
            (None, None, None, None)
        );
        assert_eq!(s.conditions.len(), 1, "the malformed condition is dropped");
        assert_eq!(s.message.as_deref(), Some("kept"));
    }

    #[test]
    fn a_spec_of_the_wrong_type_is_an_invalid_object_not_a_failed_list() {
        let list: Vec<kube::core::DeserializeGuard<Redis>> =
            serde_json::from_value(serde_json::json!([
                {"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
                 "metadata": {"name": "bad", "namespace": "app"},
                 "spec": {"type": "workshop", "tier": 5, "secretRef": {"name": "s"}}},
                {"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis",
                 "metadata": {"name": "good", "namespace": "app"},
                 "spec": {"type": "workshop", "tier": "development", "secretRef": {"name": "s"}}}
            ]))
            .unwrap_or_else(|e| panic!("{e}"));
        let bad = list[0]
            .0
            .as_ref()
            .err()
            .map(|e| e.error.clone())
            .unwrap_or_default();
        assert!(bad.to_lowercase().contains("invalid type"), "{bad}");
        assert!(list[1].0.is_ok());
    }

    #[test]
    fn printer_columns_are_type_tier_provider_phase_age_and_wide_connectable_message() {
        let crd = Postgres::crd();
        let cols: Vec<_> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            [
                "Type",
                "Tier",
                "Provider",
                "Phase",
                "Up-To-Date",
                "Age",
                "Connectable",
                "Message"
            ]
        );
    }
}
