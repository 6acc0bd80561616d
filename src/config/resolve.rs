//! Pure resolution rules over ConfigMap data; every error names the
//! ConfigMap, the key and what to change.

use std::collections::BTreeMap;

use cro_provider_api::{ChangePolicy, ResourceKind};
use serde_json::Value;

use super::{TYPES_CONFIG_MAP, TierKeyError, strategies_config_map};

/// Deployment types that work without any `cloud-resource-config`.
pub const BUILTIN_TYPES: [(&str, &str); 4] = [
    ("aws", "aws"),
    ("managed", "aws"),
    ("openshift", "openshift"),
    ("workshop", "openshift"),
];

/// Tiers that exist when a provider has no strategies ConfigMap.
const DEFAULT_TIERS: [&str; 2] = ["development", "production"];

/// The tier key this operator reads itself; the rest of a tier is the
/// provider's strategy.
pub const CHANGE_POLICY_KEY: &str = "changePolicy";

/// Tier keys of credential rotation, read by this operator too.
pub const ROTATE_EVERY_KEY: &str = "rotateCredentialsEvery";
pub const ROTATION_GRACE_KEY: &str = "credentialRotationGrace";

/// How long a replaced access key keeps working after a rotation, unless
/// the tier says otherwise.
pub const DEFAULT_ROTATION_GRACE: u64 = 3600;

/// A resolved tier.
#[derive(Clone, Debug, PartialEq)]
pub struct Tier {
    /// What the provider reads (without the operator's keys).
    pub strategy: Value,
    pub change_policy: ChangePolicy,
    /// `rotateCredentialsEvery`, in seconds.
    pub rotate_every: Option<u64>,
    /// `credentialRotationGrace`, in seconds.
    pub rotation_grace: u64,
    /// The namespaces that may use the tier (`None`: all).
    pub access: Option<super::access::Access>,
    /// What a CR of the tier may ask for.
    pub limits: super::limits::Limits,
    /// The same tier under the strategies ConfigMap's `_network` key.
    pub network: Option<Value>,
    /// What deleting a CR of the tier does unless its annotation says.
    pub deletion_policy: super::DeletionPolicy,
}

impl Default for Tier {
    fn default() -> Self {
        Tier {
            strategy: Value::Object(Default::default()),
            change_policy: ChangePolicy::Automatic,
            rotate_every: None,
            rotation_grace: DEFAULT_ROTATION_GRACE,
            access: None,
            limits: Default::default(),
            network: None,
            deletion_policy: Default::default(),
        }
    }
}

/// A duration key of a tier (`30d`, `12h`, `30m`, `0`), in seconds.
fn tier_seconds(tier: &mut Value, key: &'static str) -> Result<Option<u64>, TierKeyError> {
    let Some(value) = tier.as_object_mut().and_then(|t| t.remove(key)) else {
        return Ok(None);
    };
    let text = value.as_str().ok_or_else(|| TierKeyError::NotText {
        key,
        value: value.to_string(),
    })?;
    let duration = (text.parse::<crate::api::Duration>())
        .map_err(|error| TierKeyError::Duration { key, error })?;
    Ok(Some(duration.seconds().unwrap_or(0)))
}

/// Splits a tier into what the operator reads (change policy, credential
/// rotation) and the provider's strategy.
pub fn split_tier(mut tier: Value) -> Result<Tier, TierKeyError> {
    let access = super::access::Access::take(&mut tier)?;
    let limits = super::limits::Limits::take(&mut tier)?;
    let deletion_policy = super::DeletionPolicy::take(&mut tier)?;
    let rotate_every = tier_seconds(&mut tier, ROTATE_EVERY_KEY)?.filter(|s| *s > 0);
    let rotation_grace =
        tier_seconds(&mut tier, ROTATION_GRACE_KEY)?.unwrap_or(DEFAULT_ROTATION_GRACE);
    let policy = tier
        .as_object_mut()
        .and_then(|t| t.remove(CHANGE_POLICY_KEY));
    let change_policy = match policy.as_ref().map(|p| (p, p.as_str())) {
        None | Some((_, Some("Automatic" | ""))) => ChangePolicy::Automatic,
        Some((_, Some("Plan"))) => ChangePolicy::Plan,
        Some((_, Some("Online"))) => ChangePolicy::Online,
        Some((other, _)) => return Err(TierKeyError::ChangePolicy(other.to_string())),
    };
    Ok(Tier {
        strategy: tier,
        change_policy,
        rotate_every,
        rotation_grace,
        access,
        limits,
        network: None,
        deletion_policy,
    })
}

/// The key of the Go operator's network strategy (`NetworkResourceType`,
/// pkg/providers/types.go): per tier, the CIDR block of the network AWS
/// databases are placed in.
pub const NETWORK_KEY: &str = "_network";

/// `tier` under the strategies ConfigMap's `_network` key, if both exist.
pub fn network_tier(
    strategies: Option<&Located>,
    tier: &str,
) -> Result<Option<Value>, ConfigError> {
    let Some(raw) = strategies.and_then(|cm| cm.data.get(NETWORK_KEY).map(|raw| (cm, raw))) else {
        return Ok(None);
    };
    let (cm, raw) = raw;
    let tiers: BTreeMap<String, Value> =
        serde_json::from_str(raw).map_err(|e| ConfigError::MalformedStrategies {
            at: cm.at(),
            resource: NETWORK_KEY.to_string(),
            error: e.to_string(),
        })?;
    Ok(tiers.get(tier).cloned())
}

/// ConfigMap data together with where it came from (for messages).
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub namespace: String,
    pub name: String,
    pub data: BTreeMap<String, String>,
}

impl Located {
    fn at(&self) -> String {
        if self.namespace.is_empty() {
            format!("ConfigMap {}", self.name)
        } else {
            format!("ConfigMap {}/{}", self.namespace, self.name)
        }
    }
}

/// The resource → provider mapping of deployment type `key` in a
/// `cloud-resource-config`, if the key exists.
pub fn type_mapping(
    cm: &Located,
    key: &str,
) -> Option<Result<BTreeMap<String, String>, ConfigError>> {
    let raw = cm.data.get(key)?;
    Some(
        serde_json::from_str(raw).map_err(|e| ConfigError::MalformedTypes {
            at: cm.at(),
            key: key.to_string(),
            error: e.to_string(),
        }),
    )
}

/// The tier → strategy mapping of `kind` in a strategies ConfigMap, if the
/// key exists.
pub fn tier_mapping(
    cm: &Located,
    kind: ResourceKind,
) -> Option<Result<BTreeMap<String, Value>, ConfigError>> {
    let resource = kind.config_key();
    let raw = cm.data.get(resource)?;
    Some(
        serde_json::from_str(raw).map_err(|e| ConfigError::MalformedStrategies {
            at: cm.at(),
            resource: resource.to_string(),
            error: e.to_string(),
        }),
    )
}

/// Checks the provider named for `resource` under deployment type `key`.
pub fn known_provider(
    cm: &Located,
    key: &str,
    resource: &str,
    provider: &str,
) -> Result<(), ConfigError> {
    if crate::providers::is_known(provider) {
        Ok(())
    } else {
        Err(ConfigError::UnknownProvider {
            at: cm.at(),
            key: key.to_string(),
            resource: resource.to_string(),
            provider: provider.to_string(),
        })
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error(
        "{at} has no key {key:?} for deployment type {key:?}; add it (known types: {known}) or change spec.type"
    )]
    UnknownType {
        at: String,
        key: String,
        known: String,
    },
    #[error(
        "deployment type {0:?} is unknown and no {TYPES_CONFIG_MAP} ConfigMap exists in the resource's or the operator's namespace; create one with key {0:?} or use one of: aws, managed, openshift, workshop"
    )]
    UnknownBuiltinType(String),
    #[error(
        "{at} key {key:?} is not valid JSON ({error}); expected e.g. {{\"postgres\": \"aws\", \"redis\": \"aws\"}}"
    )]
    MalformedTypes {
        at: String,
        key: String,
        error: String,
    },
    #[error(
        "{at} key {key:?} has no entry for {resource:?}; add \"{resource}\": \"aws\" or \"openshift\""
    )]
    MissingResourceType {
        at: String,
        key: String,
        resource: String,
    },
    #[error(
        "{at} key {key:?} maps {resource:?} to unknown provider {provider:?}; use one of: aws, openshift"
    )]
    UnknownProvider {
        at: String,
        key: String,
        resource: String,
        provider: String,
    },
    #[error("{at} has no key {resource:?}; add a {resource:?} key mapping tiers to strategies")]
    MissingStrategiesKey { at: String, resource: String },
    #[error("{at} key {resource:?} is not valid JSON ({error}); expected {{\"<tier>\": {{...}}}}")]
    MalformedStrategies {
        at: String,
        resource: String,
        error: String,
    },
    #[error(
        "{at} key {resource:?} has no tier {tier:?} (tiers: {known}); add it or change spec.tier"
    )]
    UnknownTier {
        at: String,
        resource: String,
        tier: String,
        known: String,
    },
    #[error(
        "no {name} ConfigMap in namespace {namespace} and tier {tier:?} is not a default tier (development, production); create the ConfigMap or change spec.tier"
    )]
    UnknownDefaultTier {
        namespace: String,
        name: String,
        tier: String,
    },
    #[error("{at} key {resource:?} tier {tier:?}: {error}")]
    InvalidChangePolicy {
        at: String,
        resource: String,
        tier: String,
        error: Box<TierKeyError>,
    },
    #[error(
        "tier {tier:?} of {at} key {resource:?} is not open to namespace {namespace} (it admits {admits}); ask the platform team to admit this namespace, or use another tier"
    )]
    TierRefused {
        at: String,
        resource: String,
        tier: String,
        namespace: String,
        admits: String,
    },
    #[error(
        "{error}: tier {tier:?} of {at} key {resource:?}; change the CR, or ask the platform team for a tier that allows it"
    )]
    TierLimit {
        at: String,
        resource: String,
        tier: String,
        error: String,
    },
    #[error(
        "tier {tier:?} of {at} sets {key}, which only a tier in the operator namespace {operator_namespace} may set (it reaches beyond the namespaces that read the tier: an AWS identity, a Secret of the operator namespace); move the tier to the ConfigMap of the same name in namespace {operator_namespace}, or remove {key}"
    )]
    OperatorOnlyKey {
        /// The ConfigMap and its key.
        at: String,
        tier: String,
        key: String,
        operator_namespace: String,
    },
    #[error("reading ConfigMap {namespace}/{name}: {error}")]
    Read {
        namespace: String,
        name: String,
        error: String,
    },
}

impl ConfigError {
    /// Short stable label for metrics and Events.
    pub fn label(&self) -> &'static str {
        match self {
            ConfigError::Read { .. } => "config_read",
            _ => "config_invalid",
        }
    }

    /// Reading can be retried; everything else needs a ConfigMap change.
    pub fn is_transient(&self) -> bool {
        matches!(self, ConfigError::Read { .. })
    }
}

/// The provider for `deployment_type` and `kind`, from the first
/// `cloud-resource-config` found (`types`), else the built-in defaults.
pub fn resolve_provider(
    types: Option<&Located>,
    deployment_type: &str,
    kind: ResourceKind,
) -> Result<String, ConfigError> {
    let Some(cm) = types else {
        return BUILTIN_TYPES
            .iter()
            .find(|(t, _)| *t == deployment_type)
            .map(|(_, p)| p.to_string())
            .ok_or_else(|| ConfigError::UnknownBuiltinType(deployment_type.to_string()));
    };
    let mapping = type_mapping(cm, deployment_type).ok_or_else(|| ConfigError::UnknownType {
        at: cm.at(),
        key: deployment_type.to_string(),
        known: join_keys(cm.data.keys()),
    })??;
    let resource = kind.config_key();
    let provider = mapping
        .get(resource)
        .ok_or_else(|| ConfigError::MissingResourceType {
            at: cm.at(),
            key: deployment_type.to_string(),
            resource: resource.to_string(),
        })?;
    known_provider(cm, deployment_type, resource, provider)?;
    Ok(provider.clone())
}

/// The strategy JSON of `tier` for `kind` from the provider's strategies
/// ConfigMap; without one, the default tiers with empty strategies.
pub fn resolve_tier(
    strategies: Option<&Located>,
    operator_namespace: &str,
    provider: &str,
    kind: ResourceKind,
    tier: &str,
) -> Result<Tier, ConfigError> {
    let resource = kind.config_key();
    let Some(cm) = strategies else {
        return if DEFAULT_TIERS.contains(&tier) {
            Ok(Tier::default())
        } else {
            Err(ConfigError::UnknownDefaultTier {
                namespace: operator_namespace.to_string(),
                name: strategies_config_map(provider),
                tier: tier.to_string(),
            })
        };
    };
    let tiers = tier_mapping(cm, kind).ok_or_else(|| ConfigError::MissingStrategiesKey {
        at: cm.at(),
        resource: resource.to_string(),
    })??;
    let found = tiers
        .get(tier)
        .cloned()
        .ok_or_else(|| ConfigError::UnknownTier {
            at: cm.at(),
            resource: resource.to_string(),
            tier: tier.to_string(),
            known: join_keys(tiers.keys()),
        })?;
    let split = split_tier(found).map_err(|error| ConfigError::InvalidChangePolicy {
        at: cm.at(),
        resource: resource.to_string(),
        tier: tier.to_string(),
        error: Box::new(error),
    })?;
    // A watched namespace's tiers (`--namespace-config`, the Go layout)
    // are read only for what the Go operator read there.
    if cm.namespace != operator_namespace
        && let Some(key) = crate::providers::operator_only_key(provider, &split.strategy)
    {
        return Err(ConfigError::OperatorOnlyKey {
            at: format!("{} key {resource:?}", cm.at()),
            tier: tier.to_string(),
            key,
            operator_namespace: operator_namespace.to_string(),
        });
    }
    Ok(split)
}

fn join_keys<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let keys: Vec<_> = keys.map(String::as_str).collect();
    if keys.is_empty() {
        "none".to_string()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shipped AWS tiers are the Go operator's built-in ones
    /// (pkg/providers/aws/config.go, `BuildDefaultConfigMap`: each tier
    /// `{"region": "", "_network": "", "createStrategy": {}, "deleteStrategy": {}}`,
    /// an empty `_network` being the absent one), so an installation that
    /// ran the Go operator without a ConfigMap keeps every setting.
    #[test]
    fn the_shipped_aws_tiers_are_the_go_operators_built_in_ones() {
        let shipped = include_str!("../../config/cloud-resources-aws-strategies.yaml");
        let cm: k8s_openapi::api::core::v1::ConfigMap =
            serde_saphyr::from_str(shipped).unwrap_or_else(|e| panic!("{e}"));
        let data = cm.data.unwrap_or_default();
        let empty = json!({"region": "", "createStrategy": {}, "deleteStrategy": {}});
        let go = json!({"development": empty, "production": empty});
        for key in ["postgres", "redis", "blobstorage"] {
            let tiers: Value = serde_json::from_str(data.get(key).map_or("", String::as_str))
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(tiers, go, "{key}");
        }
    }

    fn cm(name: &str, data: &[(&str, &str)]) -> Located {
        Located {
            namespace: "ops".into(),
            name: name.into(),
            data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn builtin_types_without_configmap() {
        let p = |t| resolve_provider(None, t, ResourceKind::Redis);
        assert_eq!(p("managed").as_deref(), Ok("aws"));
        assert_eq!(p("workshop").as_deref(), Ok("openshift"));
        let err = p("nope").unwrap_err().to_string();
        assert!(
            err.contains("\"nope\"") && err.contains("cloud-resource-config"),
            "{err}"
        );
    }

    #[test]
    fn configmap_type_maps_each_resource() {
        let types = cm(
            "cloud-resource-config",
            &[("custom", r#"{"postgres": "openshift", "redis": "aws"}"#)],
        );
        assert_eq!(
            resolve_provider(Some(&types), "custom", ResourceKind::Postgres).as_deref(),
            Ok("openshift")
        );
        let err = resolve_provider(Some(&types), "custom", ResourceKind::BlobStorage)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ConfigMap ops/cloud-resource-config") && err.contains("\"blobstorage\""),
            "{err}"
        );
    }

    #[test]
    fn malformed_types_json_names_configmap_key_and_error() {
        let types = cm("cloud-resource-config", &[("custom", "{not json")]);
        let err = resolve_provider(Some(&types), "custom", ResourceKind::Postgres)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ops/cloud-resource-config"), "{err}");
        assert!(
            err.contains("\"custom\"") && err.contains("not valid JSON"),
            "{err}"
        );
        assert!(err.contains("line 1"), "serde's position is kept: {err}");
    }

    #[test]
    fn unknown_provider_is_refused() {
        let types = cm("cloud-resource-config", &[("x", r#"{"postgres": "gcp"}"#)]);
        let err = resolve_provider(Some(&types), "x", ResourceKind::Postgres).unwrap_err();
        assert!(matches!(err, ConfigError::UnknownProvider { .. }), "{err}");
    }

    #[test]
    fn missing_strategies_configmap_means_default_tiers() {
        let t = |tier| resolve_tier(None, "ops", "openshift", ResourceKind::Postgres, tier);
        assert_eq!(t("development").map(|t| t.strategy), Ok(json!({})));
        assert_eq!(t("production").map(|t| t.strategy), Ok(json!({})));
        let err = t("gold").unwrap_err().to_string();
        assert!(
            err.contains("cloud-resources-openshift-strategies") && err.contains("\"gold\""),
            "{err}"
        );
    }

    #[test]
    fn tier_strategy_is_returned_verbatim() {
        let s = cm(
            "cloud-resources-aws-strategies",
            &[(
                "postgres",
                r#"{"development": {"region": "eu-west-1", "createStrategy": {"AllocatedStorage": 20}}}"#,
            )],
        );
        let v = resolve_tier(
            Some(&s),
            "ops",
            "aws",
            ResourceKind::Postgres,
            "development",
        );
        assert_eq!(
            v.map(|t| t.strategy),
            Ok(json!({"region": "eu-west-1", "createStrategy": {"AllocatedStorage": 20}}))
        );
        let err = resolve_tier(Some(&s), "ops", "aws", ResourceKind::Postgres, "production")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no tier \"production\"") && err.contains("development"),
            "{err}"
        );
        let err = resolve_tier(Some(&s), "ops", "aws", ResourceKind::Redis, "development")
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no key \"redis\""), "{err}");
    }

    #[test]
    fn a_watched_namespaces_tier_may_not_choose_the_aws_identity() {
        let role = r#"{"development": {"roleArn": "arn:aws:iam::1:role/admin", "region": "eu-west-1", "_network": ""}}"#;
        let s = cm("cloud-resources-aws-strategies", &[("postgres", role)]);
        let t = |operator_namespace| {
            resolve_tier(
                Some(&s),
                operator_namespace,
                "aws",
                ResourceKind::Postgres,
                "development",
            )
        };
        assert!(t("ops").is_ok(), "the operator namespace's own tier");
        let err = t("cro").unwrap_err().to_string();
        assert!(
            err.contains("ops/cloud-resources-aws-strategies")
                && err.contains("sets roleArn")
                && err.contains("namespace cro"),
            "{err}"
        );
        // The Go operator's keys stay readable there (its layout).
        let go = r#"{"development": {"region": "eu-west-1", "_network": "", "createStrategy": {"DBInstanceClass": "db.t3.small"}}}"#;
        let s = cm("cloud-resources-aws-strategies", &[("postgres", go)]);
        let t = resolve_tier(
            Some(&s),
            "cro",
            "aws",
            ResourceKind::Postgres,
            "development",
        );
        assert!(t.is_ok(), "{t:?}");
    }

    /// A tenant's own tier could otherwise copy any Secret of the operator
    /// namespace into its namespace as a relay's login.
    #[test]
    fn a_watched_namespaces_tier_may_not_name_a_relay_login() {
        let relay = r#"{"development": {"createStrategy": {"mailServer": "own", "mailRelay": {"host": "smtp", "credentialsSecret": "cloud-resources-aws-credentials"}}}}"#;
        let s = cm(
            "cloud-resources-openshift-strategies",
            &[("smtpcredentials", relay)],
        );
        let t = |operator_namespace| {
            let kind = ResourceKind::Smtp;
            resolve_tier(
                Some(&s),
                operator_namespace,
                "openshift",
                kind,
                "development",
            )
        };
        assert!(t("ops").is_ok(), "the operator namespace's own tier");
        let err = t("cro").unwrap_err().to_string();
        assert!(
            err.contains("sets createStrategy.mailRelay.credentialsSecret")
                && err.contains("namespace cro"),
            "{err}"
        );
    }

    #[test]
    fn malformed_strategies_json_names_configmap_and_key() {
        let s = cm(
            "cloud-resources-aws-strategies",
            &[("redis", r#"{"development": }"#)],
        );
        let err = resolve_tier(Some(&s), "ops", "aws", ResourceKind::Redis, "development")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("ops/cloud-resources-aws-strategies")
                && err.contains("\"redis\"")
                && err.contains("not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn change_policy_is_the_operators_and_checked() {
        let s = cm(
            "cloud-resources-aws-strategies",
            &[(
                "postgres",
                r#"{"gated": {"changePolicy": "Plan", "region": "eu-west-1"}, "typo": {"changePolicy": "plan"}, "plain": {}, "online": {"changePolicy": "Online"}}"#,
            )],
        );
        let t = |tier| resolve_tier(Some(&s), "ops", "aws", ResourceKind::Postgres, tier);
        assert_eq!(
            t("gated"),
            Ok(Tier {
                strategy: json!({"region": "eu-west-1"}),
                change_policy: ChangePolicy::Plan,
                ..Tier::default()
            })
        );
        assert_eq!(
            t("plain").map(|t| t.change_policy),
            Ok(ChangePolicy::Automatic)
        );
        assert_eq!(
            t("online").map(|t| t.change_policy),
            Ok(ChangePolicy::Online)
        );
        let err = t("typo").unwrap_err().to_string();
        assert!(
            err.contains("ops/cloud-resources-aws-strategies")
                && err.contains("tier \"typo\"")
                && err.contains("\"Plan\""),
            "{err}"
        );
    }

    #[test]
    fn credential_rotation_keys_are_the_operators_and_checked() {
        let s = cm(
            "cloud-resources-aws-strategies",
            &[(
                "postgres",
                r#"{"monthly": {"rotateCredentialsEvery": "30d", "credentialRotationGrace": "2h", "region": "eu-west-1"}, "plain": {}, "typo": {"rotateCredentialsEvery": "30days"}, "number": {"credentialRotationGrace": 60}}"#,
            )],
        );
        let t = |tier| resolve_tier(Some(&s), "ops", "aws", ResourceKind::Postgres, tier);
        assert_eq!(
            t("monthly"),
            Ok(Tier {
                strategy: json!({"region": "eu-west-1"}),
                rotate_every: Some(30 * 86_400),
                rotation_grace: 7200,
                ..Tier::default()
            })
        );
        assert_eq!(
            t("plain").map(|t| (t.rotate_every, t.rotation_grace)),
            Ok((None, DEFAULT_ROTATION_GRACE))
        );
        for (tier, key) in [
            ("typo", "rotateCredentialsEvery"),
            ("number", "credentialRotationGrace"),
        ] {
            let err = t(tier).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("30d"), "{err}");
        }
    }
}
