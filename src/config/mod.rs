//! Configuration from ConfigMaps: deployment `type` → provider through
//! `cloud-resource-config`, and `tier` → strategy through
//! `cloud-resources-<provider>-strategies` (DESIGN §3).
//!
//! `resolve` holds the pure rules; `source` reads the ConfigMaps.

pub mod access;
pub mod deletion_policy;
pub mod limits;
mod resolve;
mod source;
mod tier_key;

pub use deletion_policy::DeletionPolicy;
pub use resolve::{
    BUILTIN_TYPES, CHANGE_POLICY_KEY, ConfigError, Located, NETWORK_KEY, Tier, known_provider,
    network_tier, resolve_provider, resolve_tier, split_tier, tier_mapping, type_mapping,
};
pub use source::{ConfigReader, provider_for, tier_strategy};
pub use tier_key::TierKeyError;

/// Name of the ConfigMap mapping deployment types to providers.
pub const TYPES_CONFIG_MAP: &str = "cloud-resource-config";

/// Name of a provider's strategies ConfigMap.
pub fn strategies_config_map(provider: &str) -> String {
    format!("cloud-resources-{provider}-strategies")
}

/// The provider name a strategies ConfigMap belongs to, if it is one.
pub fn provider_of_strategies_map(name: &str) -> Option<&str> {
    name.strip_prefix("cloud-resources-")?
        .strip_suffix("-strategies")
}
