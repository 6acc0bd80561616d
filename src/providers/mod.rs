//! The providers this operator has, in one place: `run` builds them from
//! here, and `validate` and the configuration checks reach their strategy
//! validation and names through here rather than matching names.

pub mod aws_identity;
pub mod cluster_id;
pub mod credentials;
pub mod owned;

use std::sync::Arc;

use cro_provider_api::{Provider, ProviderError, ResourceKind};
use serde_json::Value;

/// Checks a tier's strategy offline, with the provider's own code.
type ValidateStrategy = fn(ResourceKind, &Value) -> Result<(), ProviderError>;

/// The first key of a tier that only the operator namespace may set.
type OperatorOnly = fn(&Value) -> Option<String>;

/// Every provider: its name in `cloud-resource-config`, its validation,
/// and the tier keys it reads only from the operator namespace.
const REGISTRY: [(&str, ValidateStrategy, OperatorOnly); 2] = [
    (
        cro_provider_aws::NAME,
        cro_provider_aws::validate_strategy,
        cro_provider_aws::operator_only_key,
    ),
    (
        cro_provider_in_cluster::NAME,
        cro_provider_in_cluster::validate_strategy,
        cro_provider_in_cluster::operator_only_key,
    ),
];

/// The providers' names (`aws`, `openshift`).
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|(name, ..)| *name)
}

pub fn is_known(name: &str) -> bool {
    names().any(|n| n == name)
}

/// Checks `strategy` of a `kind` tier with provider `name`'s own code.
pub fn validate_strategy(
    name: &str,
    kind: ResourceKind,
    strategy: &Value,
) -> Result<(), ProviderError> {
    match REGISTRY.iter().find(|(n, ..)| *n == name) {
        Some((_, validate, _)) => validate(kind, strategy),
        None => Err(ProviderError::invalid_strategy(format!(
            "{name:?} is not a provider; use one of: {}",
            names().collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// A key of provider `name`'s tier that a tier read from outside the
/// operator namespace may not set (it would reach beyond the namespaces
/// that wrote it, e.g. another account's role).
pub fn operator_only_key(name: &str, strategy: &Value) -> Option<String> {
    let (.., operator_only) = REGISTRY.iter().find(|(n, ..)| *n == name)?;
    operator_only(strategy)
}

/// Everything `run` needs to build the providers.
pub struct Settings {
    pub cluster_domain: Option<String>,
    /// What in-cluster Postgres and Redis run unless a tier names an image.
    pub images: cro_provider_in_cluster::Images,
    /// Admitted by the in-cluster workloads' NetworkPolicies.
    pub operator_namespace: Option<String>,
    /// New resources are made as the Go operator made them, so it can
    /// take them back (`--go-compatible-resources`); sets the AWS one.
    pub go_compatible: bool,
    pub aws: cro_provider_aws::AwsSettings,
}

/// Builds every provider, in the registry's order; they read the objects
/// the operator owns from `cache` when given.
pub fn build(
    client: &kube::Client,
    mut settings: Settings,
    cache: Option<Arc<owned::Owned>>,
) -> Vec<Arc<dyn Provider>> {
    // What the process remembers of each cloud resource and owned object:
    // one table for every provider.
    let memory = Arc::new(cro_provider_api::Memory::default());
    let mut in_cluster =
        cro_provider_in_cluster::InClusterProvider::new(client.clone(), settings.cluster_domain)
            .with_memory(&memory)
            .with_operator_namespace(settings.operator_namespace)
            .with_images(settings.images)
            .with_go_layout_for_new(settings.go_compatible);
    settings.aws.go_compatible = settings.go_compatible;
    let stores = cro_provider_aws::CompatibleStores::new(settings.aws.fence.clone());
    in_cluster = in_cluster.with_object_store(Arc::new(stores));
    let owned = cache.clone().map(|c| c as Arc<dyn cro_kube::OwnedObjects>);
    let credentials = crate::providers::credentials::CredentialsSecrets::new(client.clone(), owned);
    let aws = cro_provider_aws::AwsProvider::new(Arc::new(credentials), settings.aws)
        .with_memory(&memory);
    if let Some(cache) = cache {
        in_cluster = in_cluster.with_cache(cache);
    }
    vec![Arc::new(aws), Arc::new(in_cluster)]
}
