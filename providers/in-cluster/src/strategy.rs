//! The in-cluster tier strategy: partial overrides of the objects the
//! provider creates, and whether an isolated workload gets a NetworkPolicy
//! (`networkPolicy`) and a Redis a password (`redisPassword`), both `true`
//! unless set `false`; whether a BlobStorage gets a store of its own
//! (`objectStore: "own"`) and an SMTPCredentialSet a mail server of its
//! own (`mailServer: "own"`), or a placeholder Secret a person fills in;
//! whether that mail server relays to a smarthost (`mailRelay`, see
//! `relay`).
//! `{"strategy": {...}}`; the Go operator's
//! `{"createStrategy": {...}}` layout is accepted too. Beside it,
//! `{"deleteStrategy": {"forceBucketDeletion": true}}` lets deleting a
//! BlobStorage delete a bucket that still holds objects, as on AWS.

use std::collections::BTreeMap;

use cro_provider_api::ProviderError;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::merge::merge;

/// Keys an in-cluster strategy may hold.
pub const KEYS: [&str; 10] = [
    "deploymentSpec",
    "serviceSpec",
    "pvcSpec",
    "secretData",
    "configMapData",
    "networkPolicy",
    "redisPassword",
    "objectStore",
    "mailServer",
    crate::relay::KEY,
];

/// What serves an in-cluster BlobStorage or SMTPCredentialSet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Serving {
    /// Nothing: the Secret's keys are placeholders a person fills in (the
    /// Go operator's behaviour, kept until the tier says otherwise).
    #[default]
    Placeholder,
    /// A server of its own (`"own"`): an object store, a mail server.
    Own,
    /// One object store for all the namespace's BlobStorages
    /// (`"namespace"`), each with a bucket and a user of its own.
    Namespace,
}

#[derive(Debug, PartialEq)]
pub struct Overrides {
    pub deployment_spec: Option<Value>,
    pub service_spec: Option<Value>,
    pub pvc_spec: Option<Value>,
    pub secret_data: BTreeMap<String, String>,
    pub config_map_data: BTreeMap<String, String>,
    pub network_policy: bool,
    pub redis_password: bool,
    pub bucket: Serving,
    pub mail: Serving,
    /// Where the mail server passes each mail on, if anywhere.
    pub relay: Option<crate::relay::Relay>,
    /// `deleteStrategy.forceBucketDeletion`: a store whose bucket holds
    /// objects is deleted with the CR, not kept.
    pub force_bucket_deletion: bool,
}

impl Default for Overrides {
    fn default() -> Self {
        Overrides {
            deployment_spec: None,
            service_spec: None,
            pvc_spec: None,
            secret_data: BTreeMap::new(),
            config_map_data: BTreeMap::new(),
            network_policy: true,
            redis_password: true,
            bucket: Serving::Placeholder,
            mail: Serving::Placeholder,
            relay: None,
            force_bucket_deletion: false,
        }
    }
}

pub fn parse(tier: &Value) -> Result<Overrides, ProviderError> {
    Ok(Overrides {
        force_bucket_deletion: force_bucket_deletion(tier)?,
        ..create(tier)?
    })
}

/// `deleteStrategy.forceBucketDeletion`, false unless set; the Go
/// operator's in-cluster tiers hold an empty `deleteStrategy`.
fn force_bucket_deletion(tier: &Value) -> Result<bool, ProviderError> {
    const KEY: &str = "forceBucketDeletion";
    let Some(strategy) = tier.get("deleteStrategy").filter(|s| !s.is_null()) else {
        return Ok(false);
    };
    let invalid = |m: String| Err(ProviderError::invalid_strategy(m));
    let Some(fields) = strategy.as_object() else {
        return invalid(format!(
            "deleteStrategy must be an object with the one key {KEY}"
        ));
    };
    // Matched case-insensitively, as the Go operator matches the AWS
    // tiers' keys.
    let is_key = |k: &String| k.eq_ignore_ascii_case(KEY);
    if let Some(unknown) = fields.keys().find(|k| !is_key(k)) {
        return invalid(format!(
            "deleteStrategy.{unknown} is not a known key; the one key it takes is {KEY}"
        ));
    }
    match fields.iter().find(|(k, _)| is_key(k)).map(|(_, v)| v) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(force)) => Ok(*force),
        Some(other) => invalid(format!(
            "deleteStrategy.{KEY} is {other}; it takes true (a BlobStorage's bucket is deleted with it, objects and all) or false (a bucket holding objects is kept)"
        )),
    }
}

/// The `strategy` (or Go `createStrategy`) part of the tier.
fn create(tier: &Value) -> Result<Overrides, ProviderError> {
    let (key, strategy) = match (tier.get("strategy"), tier.get("createStrategy")) {
        (Some(s), _) => ("strategy", s),
        (None, Some(s)) => ("createStrategy", s),
        (None, None) => return Ok(Overrides::default()),
    };
    let Some(fields) = strategy.as_object() else {
        return Err(invalid(format!(
            "{key} must be an object with keys {}",
            KEYS.join(", ")
        )));
    };
    if let Some(unknown) = fields.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "{key}.{unknown} is not a known key; use one of {}",
            KEYS.join(", ")
        )));
    }
    let s = Strategy { key, fields };
    let mail = s.serving(
        "mailServer",
        "\"own\" (a mail server of the SMTPCredentialSet's own)",
    )?;
    let bucket = s.serving(
        "objectStore",
        "\"own\" (a store of the BlobStorage's own) and \"namespace\" (one store the namespace's BlobStorages share)",
    )?;
    s.shared_store_unshaped(bucket)?;
    Ok(Overrides {
        deployment_spec: s.spec("deploymentSpec"),
        service_spec: s.spec("serviceSpec"),
        pvc_spec: s.spec("pvcSpec"),
        secret_data: s.data("secretData")?,
        config_map_data: s.data("configMapData")?,
        network_policy: s.switch("networkPolicy")?,
        redis_password: s.switch("redisPassword")?,
        relay: s.relay(mail)?,
        bucket,
        mail,
        force_bucket_deletion: false,
    })
}

fn invalid(message: String) -> ProviderError {
    ProviderError::invalid_strategy(message)
}

/// A tier's create strategy, read field by field; errors name the field.
struct Strategy<'a> {
    key: &'a str,
    fields: &'a serde_json::Map<String, Value>,
}

impl Strategy<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.fields.get(name).filter(|v| !v.is_null())
    }

    fn data(&self, name: &str) -> Result<BTreeMap<String, String>, ProviderError> {
        match self.get(name) {
            None => Ok(BTreeMap::new()),
            Some(v) => typed(v.clone(), &format!("{}.{name}", self.key)),
        }
    }

    fn spec(&self, name: &str) -> Option<Value> {
        self.get(name).cloned()
    }

    fn serving(&self, name: &str, what: &str) -> Result<Serving, ProviderError> {
        match self.get(name) {
            None => Ok(Serving::Placeholder),
            Some(Value::String(s)) if s == "own" => Ok(Serving::Own),
            Some(Value::String(s)) if s == "namespace" && name == "objectStore" => {
                Ok(Serving::Namespace)
            }
            Some(other) => Err(invalid(format!(
                "{}.{name} is {other}; the values it takes are {what}; leave it out for a placeholder Secret",
                self.key
            ))),
        }
    }

    fn switch(&self, name: &str) -> Result<bool, ProviderError> {
        match self.get(name) {
            None => Ok(true),
            Some(v) => typed::<bool>(v.clone(), &format!("{}.{name}", self.key)),
        }
    }

    /// The relay of an own mail server's mail.
    fn relay(&self, mail: Serving) -> Result<Option<crate::relay::Relay>, ProviderError> {
        let key = self.key;
        match self.get(crate::relay::KEY) {
            None => Ok(None),
            Some(_) if mail != Serving::Own => Err(invalid(format!(
                "{key}.{} relays the mail of a server of the SMTPCredentialSet's own; set {key}.mailServer to \"own\" beside it",
                crate::relay::KEY
            ))),
            Some(v) => Ok(Some(crate::relay::parse(
                v.clone(),
                &format!("{key}.{}", crate::relay::KEY),
            )?)),
        }
    }

    /// Tiers share the namespace's store: none may shape it, or two tiers
    /// would rewrite it in turn.
    fn shared_store_unshaped(&self, bucket: Serving) -> Result<(), ProviderError> {
        let key = self.key;
        let shaping = ["deploymentSpec", "serviceSpec", "pvcSpec", "networkPolicy"];
        match shaping.iter().find(|f| self.get(f).is_some()) {
            Some(field) if bucket == Serving::Namespace => Err(invalid(format!(
                "{key}.{field} shapes a store, but {key}.objectStore is \"namespace\": the namespace's BlobStorages share one store whatever their tiers, so no tier shapes it; use \"own\" for a store this tier shapes, or remove {key}.{field}"
            ))),
            _ => Ok(()),
        }
    }
}

/// Deserialises `value` as `T`, naming the exact field path on error.
/// Fields `T` does not have are refused too: serde would drop them, and a
/// misspelt override (`replica`) would silently do nothing.
pub fn typed<T: DeserializeOwned + Serialize>(value: Value, at: &str) -> Result<T, ProviderError> {
    let parsed: T = serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            at.to_string()
        } else {
            format!("{at}.{path}")
        };
        // serde quotes the offending value whole; cut it, so a huge value
        // cannot make a status or Event too big to write.
        let mut message = e.inner().to_string();
        if let Some((cut, _)) = message.char_indices().nth(200) {
            message.truncate(cut);
            message.push('…');
        }
        ProviderError::invalid_strategy(format!("{field}: {message}"))
    })?;
    let kept = serde_json::to_value(&parsed)
        .map_err(|e| ProviderError::invalid_strategy(format!("{at}: {e}")))?;
    if let Some(path) = dropped(&value, &kept) {
        return Err(ProviderError::invalid_strategy(format!(
            "{at}{path} is not a field of this object; check its spelling against the Kubernetes API reference"
        )));
    }
    Ok(parsed)
}

/// The path of the first non-null field in `given` that `kept` lacks.
fn dropped(given: &Value, kept: &Value) -> Option<String> {
    match (given, kept) {
        (Value::Object(given), Value::Object(kept)) => given.iter().find_map(|(key, value)| {
            if value.is_null() {
                return None;
            }
            match kept.get(key) {
                None => Some(format!(".{key}")),
                Some(k) => dropped(value, k).map(|path| format!(".{key}{path}")),
            }
        }),
        (Value::Array(given), Value::Array(kept)) => given
            .iter()
            .zip(kept)
            .enumerate()
            .find_map(|(i, (g, k))| dropped(g, k).map(|path| format!("[{i}]{path}"))),
        _ => None,
    }
}

/// `base` with the override merged in, checked against the typed spec `T`.
pub fn overridden<T: DeserializeOwned + Serialize>(
    mut base: Value,
    patch: Option<&Value>,
    at: &str,
) -> Result<Value, ProviderError> {
    if let Some(p) = patch {
        merge(&mut base, p);
    }
    typed::<T>(base.clone(), at)?;
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use serde_json::json;

    #[test]
    fn empty_and_missing_strategies_mean_defaults() {
        assert_eq!(parse(&json!({})).ok(), Some(Overrides::default()));
        assert_eq!(
            parse(&json!({"strategy": {}})).ok(),
            Some(Overrides::default())
        );
    }

    #[test]
    fn go_operator_layout_is_accepted() {
        let o = parse(&json!({"createStrategy": {"secretData": {"username": "app"}}}))
            .unwrap_or_default();
        assert_eq!(
            o.secret_data.get("username").map(String::as_str),
            Some("app")
        );
    }

    #[test]
    fn object_store_is_own_shared_by_the_namespace_or_left_out() {
        let own = parse(&json!({"createStrategy": {"objectStore": "own"}}));
        assert_eq!(own.map(|o| o.bucket).ok(), Some(Serving::Own));
        let own = parse(&json!({"strategy": {"mailServer": "own"}}));
        assert_eq!(own.map(|o| o.mail).ok(), Some(Serving::Own));
        let shared = parse(&json!({"strategy": {"objectStore": "namespace"}}));
        assert_eq!(shared.map(|o| o.bucket).ok(), Some(Serving::Namespace));
        let err = parse(&json!({"strategy": {"objectStore": "shared"}}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("strategy.objectStore") && err.contains("\"namespace\""),
            "{err}"
        );
        // No tier shapes a store the namespace shares.
        let shaped = json!({"strategy": {"objectStore": "namespace", "pvcSpec": {}}});
        let err = parse(&shaped)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("strategy.pvcSpec"), "{err}");
        // A mail server is never shared.
        let err = parse(&json!({"strategy": {"mailServer": "namespace"}}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("strategy.mailServer"), "{err}");
    }

    #[test]
    fn a_relay_needs_a_mail_server_of_its_own() {
        let relay = json!({"host": "smtp.example.com"});
        let alone = parse(&json!({"createStrategy": {"mailRelay": relay}}));
        let err = alone.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            err.contains("createStrategy.mailRelay") && err.contains("mailServer"),
            "{err}"
        );
        let beside = parse(&json!({"createStrategy": {"mailServer": "own", "mailRelay": relay}}));
        let host = beside.ok().and_then(|o| o.relay).map(|r| r.host);
        assert_eq!(host.as_deref(), Some("smtp.example.com"));
    }

    #[test]
    fn force_bucket_deletion_is_a_boolean_beside_the_strategy() {
        let force = |tier: Value| parse(&tier).map(|o| o.force_bucket_deletion);
        assert_eq!(force(json!({})).ok(), Some(false));
        assert_eq!(force(json!({"deleteStrategy": {}})).ok(), Some(false));
        let set = json!({"deleteStrategy": {"forceBucketDeletion": true}});
        assert_eq!(force(set).ok(), Some(true));
        let lower = json!({"deleteStrategy": {"forcebucketdeletion": true}});
        assert_eq!(
            force(lower).ok(),
            Some(true),
            "keys match as the Go operator's do"
        );
        let both = json!({"createStrategy": {"objectStore": "own"}, "deleteStrategy": {"forceBucketDeletion": true}});
        assert_eq!(
            parse(&both)
                .map(|o| (o.bucket, o.force_bucket_deletion))
                .ok(),
            Some((Serving::Own, true))
        );
        for (tier, named) in [
            (
                json!({"deleteStrategy": {"forceBucketDeletion": "yes"}}),
                "deleteStrategy.forceBucketDeletion",
            ),
            (
                json!({"deleteStrategy": {"force": true}}),
                "deleteStrategy.force ",
            ),
            (
                json!({"deleteStrategy": true}),
                "deleteStrategy must be an object",
            ),
        ] {
            let err = force(tier).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(named), "{err}");
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse(&json!({"strategy": {"deploymentSpecs": {}}}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("strategy.deploymentSpecs") && err.contains("deploymentSpec"),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_the_field_path() {
        let base = json!({"replicas": 1, "selector": {}, "template": {}});
        let err = overridden::<DeploymentSpec>(
            base,
            Some(&json!({"replicas": "abc"})),
            "strategy.deploymentSpec",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("strategy.deploymentSpec.replicas"), "{err}");
    }

    #[test]
    fn misspelt_fields_are_refused_with_their_path() {
        let base = json!({"replicas": 1, "selector": {}, "template": {"spec": {"containers": [{"name": "a"}]}}});
        let err = |patch: Value| {
            overridden::<DeploymentSpec>(base.clone(), Some(&patch), "strategy.deploymentSpec")
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        let e = err(json!({"replica": 2}));
        assert!(
            e.contains("strategy.deploymentSpec.replica is not a field"),
            "{e}"
        );
        let e = err(json!({"template": {"spec": {"containers": [{"name": "a", "imag": "x"}]}}}));
        assert!(
            e.contains("strategy.deploymentSpec.template.spec.containers[0].imag"),
            "{e}"
        );
        assert!(err(json!({"replicas": 2, "paused": null})).is_empty());
    }
}
