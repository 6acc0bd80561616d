//! Reading the configuration ConfigMaps from the cluster. They are read at
//! reconcile time, so a ConfigMap edit (which triggers the affected
//! reconciles through a watch) is seen at once, without a restart.

use cro_provider_api::ResourceKind;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use super::{
    ConfigError, Located, TYPES_CONFIG_MAP, Tier, resolve_provider, resolve_tier,
    strategies_config_map,
};

/// Reads configuration ConfigMaps.
#[derive(Clone)]
pub struct ConfigReader {
    client: Client,
    operator_namespace: String,
    /// ConfigMaps that stand in for the cluster's of the same namespace
    /// and name (`plan --config`).
    overrides: Vec<Located>,
}

impl ConfigReader {
    pub fn new(client: Client, operator_namespace: impl Into<String>) -> Self {
        ConfigReader {
            client,
            operator_namespace: operator_namespace.into(),
            overrides: Vec::new(),
        }
    }

    /// Reads `overrides` instead of the cluster's ConfigMaps of the same
    /// namespace and name.
    pub fn with_overrides(mut self, overrides: Vec<Located>) -> Self {
        self.overrides = overrides;
        self
    }

    pub fn operator_namespace(&self) -> &str {
        &self.operator_namespace
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Option<Located>, ConfigError> {
        if let Some(cm) = self
            .overrides
            .iter()
            .find(|cm| cm.namespace == namespace && cm.name == name)
        {
            return Ok(Some(cm.clone()));
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        let cm = api.get_opt(name).await.map_err(|e| ConfigError::Read {
            namespace: namespace.to_string(),
            name: name.to_string(),
            error: e.to_string(),
        })?;
        Ok(cm.map(|cm| Located {
            namespace: namespace.to_string(),
            name: name.to_string(),
            data: cm.data.unwrap_or_default(),
        }))
    }

    /// `cloud-resource-config` from the resource's namespace, else the
    /// operator's namespace, else `None` (built-in defaults).
    pub async fn types(&self, namespace: &str) -> Result<Option<Located>, ConfigError> {
        if let Some(cm) = self.get(namespace, TYPES_CONFIG_MAP).await? {
            return Ok(Some(cm));
        }
        if namespace == self.operator_namespace {
            return Ok(None);
        }
        self.get(&self.operator_namespace, TYPES_CONFIG_MAP).await
    }

    /// The provider's strategies ConfigMap in the operator's namespace.
    pub async fn strategies(&self, provider: &str) -> Result<Option<Located>, ConfigError> {
        self.get(&self.operator_namespace, &strategies_config_map(provider))
            .await
    }
}

/// The provider name for a resource of `kind` with `spec.type` in `namespace`.
pub async fn provider_for(
    reader: &ConfigReader,
    namespace: &str,
    deployment_type: &str,
    kind: ResourceKind,
) -> Result<String, ConfigError> {
    let types = reader.types(namespace).await?;
    resolve_provider(types.as_ref(), deployment_type, kind)
}

/// The strategy JSON of `tier` for `kind` on `provider`.
pub async fn tier_strategy(
    reader: &ConfigReader,
    provider: &str,
    kind: ResourceKind,
    tier: &str,
) -> Result<Tier, ConfigError> {
    let strategies = reader.strategies(provider).await?;
    resolve_tier(
        strategies.as_ref(),
        reader.operator_namespace(),
        provider,
        kind,
        tier,
    )
}
