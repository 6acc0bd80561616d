//! Property tests over everything the operator parses from people and
//! other tools: ConfigMap values (arbitrary and adversarial JSON: deep
//! nesting, 1 MiB strings, unicode, wrong types at every level, duplicate
//! keys), every CR spec the CRD schema admits, identifiers for each AWS
//! service, and both providers' strategy parsers. Properties: no panic,
//! an answer within a bound, and every error names where it is.
//!
//! `make test` runs the default case count (PROPTEST_CASES, 256 here);
//! `make proptest-long` runs many more.

use std::{path::PathBuf, sync::mpsc, time::Duration};

use cloud_resource_operator::{
    api::{BlobStorage, Postgres, PostgresSnapshot, Redis, SMTPCredentialSet},
    cli::validate::{self, Document, Options},
    config::{Located, resolve_provider, resolve_tier},
};
use cro_provider_api::{IdentifierRules, ResourceKind, cloud_identifier};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Generous: a case takes microseconds; only a hang or a blow-up reaches it.
const BOUND: Duration = Duration::from_secs(20);

/// Runs `f` on another thread and fails the case if it panics or does not
/// answer within [`BOUND`].
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap_or_else(|e| panic!("spawning: {e}"));
    match rx.recv_timeout(BOUND) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            let panic = handle.join().err();
            panic!("{what} panicked: {panic:?}")
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} took longer than {BOUND:?}"),
    }
}

/// Field names the parsers know, so generated JSON reaches deep code paths.
const NAMES: &[&str] = &[
    "development",
    "production",
    "region",
    "roleArn",
    "externalId",
    "_network",
    "createStrategy",
    "deleteStrategy",
    "serviceUpdates",
    "DBInstanceClass",
    "AllocatedStorage",
    "MultiAZ",
    "EngineVersion",
    "VpcSecurityGroupIds",
    "CacheNodeType",
    "SkipFinalSnapshot",
    "forceBucketDeletion",
    "EmailIdentity",
    "strategy",
    "deploymentSpec",
    "serviceSpec",
    "pvcSpec",
    "secretData",
    "configMapData",
    "template",
    "spec",
    "containers",
    "name",
    "image",
    "replicas",
    "resources",
    "requests",
    "storage",
    "accessModes",
    "ports",
    "postgres",
    "redis",
    "blobstorage",
    "smtpcredentials",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(NAMES).prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => Just(Value::Null),
        8 => any::<bool>().prop_map(Value::Bool),
        8 => any::<i64>().prop_map(Value::from),
        8 => any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        8 => any::<String>().prop_map(Value::String),
        8 => proptest::sample::select(NAMES).prop_map(|s| Value::String(s.to_string())),
        // A 1 MiB string, now and then.
        1 => Just(Value::String("x".repeat(1 << 20))),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A ConfigMap value as text: valid JSON, JSON nested far deeper than any
/// parser should follow, duplicate keys, or not JSON at all.
fn config_text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => json_value().prop_map(|v| v.to_string()),
        1 => (1usize..5000).prop_map(|depth| format!("{}1{}", "[".repeat(depth), "]".repeat(depth))),
        1 => (1usize..5000).prop_map(|depth| format!("{}{{}}", "{\"development\":".repeat(depth))),
        1 => (json_value(), json_value()).prop_map(|(a, b)| format!("{{\"development\": {a}, \"development\": {b}}}")),
        1 => any::<String>(),
    ]
}

fn located(name: &str, key: &str, value: String) -> Located {
    Located {
        namespace: "ops".into(),
        name: name.into(),
        data: [(key.to_string(), value)].into_iter().collect(),
    }
}

fn kind() -> impl Strategy<Value = ResourceKind> {
    proptest::sample::select(ResourceKind::ALL.to_vec())
}

proptest! {
    /// Resolving a type or tier from any ConfigMap value answers, and an
    /// error names the ConfigMap and the key.
    #[test]
    fn configmap_values_never_crash_resolution(text in config_text(), kind in kind(), tier in key()) {
        let resource = kind.config_key();
        let (strategies, types) = (
            located("cloud-resources-aws-strategies", resource, text.clone()),
            located("cloud-resource-config", "custom", text),
        );
        let tier2 = tier.clone();
        let (tiered, typed) = bounded("resolution", move || {
            (
                resolve_tier(Some(&strategies), "ops", "aws", kind, &tier2).map_err(|e| e.to_string()),
                resolve_provider(Some(&types), "custom", kind).map_err(|e| e.to_string()),
            )
        });
        if let Err(e) = tiered {
            prop_assert!(e.contains("ops/cloud-resources-aws-strategies") || e.contains("cloud-resources-aws-strategies"), "{e}");
            prop_assert!(e.contains(resource), "{e}");
        }
        if let Err(e) = typed {
            prop_assert!(e.contains("cloud-resource-config") && e.contains("custom"), "{e}");
        }
    }

    /// Both providers' strategy parsers take any tier value; an error is
    /// bounded in size and, when it is about a field, names it.
    #[test]
    fn strategy_parsers_never_crash(tier in json_value(), kind in kind()) {
        let t = tier.clone();
        let (aws, in_cluster) = bounded("strategy validation", move || {
            (
                cro_provider_aws::validate_strategy(kind, &t).map_err(|e| e.to_string()),
                cro_provider_in_cluster::validate_strategy(kind, &t).map_err(|e| e.to_string()),
            )
        });
        for e in [aws, in_cluster].into_iter().filter_map(Result::err) {
            prop_assert!(e.len() < 4096, "an error of {} bytes", e.len());
            prop_assert!(!e.is_empty());
        }
    }

    /// The offline linter over a strategies ConfigMap of any content: no
    /// panic, and every finding names the ConfigMap and the key.
    #[test]
    fn the_linter_names_configmap_and_key(text in config_text(), kind in kind(), provider in proptest::sample::select(vec!["aws", "openshift"])) {
        let name = format!("cloud-resources-{provider}-strategies");
        let doc = Document {
            file: PathBuf::from("strategies.yaml"),
            index: 1,
            value: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ops"}, "data": {kind.config_key(): text}}),
        };
        let findings = bounded("validate", move || {
            validate::validate(&[doc], &Options::default())
                .into_iter()
                .map(|f| (f.object, f.key, f.message))
                .collect::<Vec<_>>()
        });
        for (object, key, message) in findings {
            prop_assert!(object.contains(&name), "{object}");
            prop_assert!(key.as_deref().is_some_and(|k| k.contains(kind.config_key())), "{key:?}: {message}");
        }
    }

    /// Every identifier, whatever the cluster ID, namespace and name (as
    /// Kubernetes admits them), is made valid for each AWS service, and an
    /// already valid one is kept.
    #[test]
    fn identifiers_are_valid_for_every_service(cluster in "[a-zA-Z0-9-]{1,60}", ns in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", name in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?") {
        let id = cloud_identifier(&cluster, &ns, &name);
        for rules in IdentifierRules::ALL {
            let conformed = rules.conform(&id);
            prop_assert_eq!(rules.check(&conformed), Ok(()), "{:?}: {} from {}", rules, conformed, id);
            if rules.check(&id).is_ok() {
                prop_assert_eq!(&conformed, &id);
            }
        }
    }

    /// Any string at all conforms to every service's rules.
    #[test]
    fn any_string_conforms(s in any::<String>()) {
        for rules in IdentifierRules::ALL {
            let conformed = rules.conform(&s);
            prop_assert_eq!(rules.check(&conformed), Ok(()), "{:?}: {:?} from {:?}", rules, conformed, s);
        }
    }

    /// Every spec the CRD schema admits deserialises into each kind, and
    /// the linter judges it without a panic.
    #[test]
    fn every_admitted_spec_is_read(
        type_ in ".{1,40}", tier in ".{1,40}",
        secret in "[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?(\\.[a-z0-9]{1,10})?",
        secret_ns in proptest::option::of("[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?"),
        flags in any::<(bool, bool, bool)>(),
        size in proptest::option::of(".{0,30}"),
        frequency in proptest::option::of("(0|([0-9]{1,3}d)?([0-9]{1,3}h)?([0-9]{1,3}m)?)"),
    ) {
        let mut spec = json!({"type": type_, "tier": tier, "secretRef": {"name": secret},
            "applyImmediately": flags.0, "maintenanceWindow": flags.1, "skipCreate": flags.2});
        if let Some(ns) = secret_ns { spec["secretRef"]["namespace"] = json!(ns); }
        if let Some(size) = size { spec["size"] = json!(size); }
        if let Some(f) = frequency { spec["snapshotFrequency"] = json!(f); spec["snapshotRetention"] = json!(f); }
        for kind in ["Postgres", "Redis", "BlobStorage", "SMTPCredentialSet"] {
            let cr = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": kind,
                            "metadata": {"name": "cr", "namespace": "app"}, "spec": spec});
            let read = match kind {
                "Postgres" => serde_json::from_value::<Postgres>(cr.clone()).map(drop),
                "Redis" => serde_json::from_value::<Redis>(cr.clone()).map(drop),
                "BlobStorage" => serde_json::from_value::<BlobStorage>(cr.clone()).map(drop),
                _ => serde_json::from_value::<SMTPCredentialSet>(cr.clone()).map(drop),
            };
            prop_assert!(read.is_ok(), "{kind}: {read:?}");
            let doc = Document { file: PathBuf::from("cr.yaml"), index: 1, value: cr };
            bounded("validate", move || validate::validate(&[doc], &Options::default()).len());
        }
        let snap = json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "PostgresSnapshot",
                          "metadata": {"name": "s", "namespace": "app"}, "spec": {"resourceName": secret}});
        prop_assert!(serde_json::from_value::<PostgresSnapshot>(snap).is_ok());
    }
}
