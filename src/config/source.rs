//! Reading the configuration ConfigMaps. They come from watches (every
//! ConfigMap of the operator namespace, and `cloud-resource-config` in the
//! watched namespaces), so a reconcile reads no ConfigMap from the API
//! server and an edit is seen at once, without a restart.

use std::sync::Arc;

use cro_provider_api::ResourceKind;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, runtime::watcher};

use super::{
    ConfigError, Located, TYPES_CONFIG_MAP, Tier, network_tier, resolve_provider, resolve_tier,
    strategies_config_map,
};
use cro_runtime::cache::{OWNED_OBJECT_LIMIT, Scoped, Shared, Subscription};

/// The annotation (value `"true"`) on the configuration ConfigMaps this
/// operator ships: defaults that yield to the Go operator's of the same
/// name. Remove it from a ConfigMap you edit to make it win.
pub const SHIPPED_DEFAULTS: &str = "cloud-resource-operator.integreatly.org/shipped-defaults";

/// Reads configuration ConfigMaps.
#[derive(Clone)]
pub struct ConfigReader {
    client: Client,
    operator_namespace: String,
    /// Every ConfigMap of the operator namespace: the strategies and the
    /// fallback `cloud-resource-config`.
    operator: Arc<Shared<ConfigMap>>,
    /// `cloud-resource-config` in each watched scope.
    types: Scoped<ConfigMap>,
    /// Where the Go operator reads the strategies ConfigMaps: its
    /// `WATCH_NAMESPACE` (pkg/providers/aws/config.go,
    /// `DefaultConfigMapNamespace`), when that is one namespace other than
    /// the operator's. Its ConfigMaps stand in for those the operator
    /// namespace lacks.
    go_namespace: Option<(String, Arc<Shared<ConfigMap>>)>,
    /// ConfigMaps that stand in for the cluster's of the same namespace
    /// and name (`plan --config`).
    overrides: Vec<Located>,
    /// Whether a CR's own namespace's `cloud-resource-config` is read
    /// (`--namespace-config`); off, only the operator namespace's is.
    namespace_config: bool,
}

impl ConfigReader {
    /// Reads the operator namespace and `scopes` (`None`: all namespaces)
    /// once `run` runs.
    pub fn new(
        client: Client,
        operator_namespace: impl Into<String>,
        scopes: &[Option<String>],
    ) -> Self {
        let operator_namespace = operator_namespace.into();
        let operator = Shared::new(
            Api::namespaced(client.clone(), &operator_namespace),
            Some(operator_namespace.clone()),
            watcher::Config::default(),
        );
        let by_name =
            watcher::Config::default().fields(&format!("metadata.name={TYPES_CONFIG_MAP}"));
        // One object per namespace, but a tenant's: one larger than
        // anything a tier needs is held as a stub and read directly.
        let types = Scoped::bounded(&client, scopes, &by_name, OWNED_OBJECT_LIMIT);
        let go_namespace = match scopes {
            [Some(ns)] if *ns != operator_namespace => Some((
                ns.clone(),
                Arc::new(Shared::new(
                    Api::namespaced(client.clone(), ns),
                    Some(ns.clone()),
                    watcher::Config::default(),
                )),
            )),
            _ => None,
        };
        ConfigReader {
            client,
            operator_namespace,
            operator: Arc::new(operator),
            types,
            go_namespace,
            overrides: Vec::new(),
            namespace_config: true,
        }
    }

    /// Whether a CR's own namespace's `cloud-resource-config` is read.
    /// Off, no ConfigMap outside the operator's namespace is watched: the
    /// watched namespaces' tenants may fill theirs, and a watch would hold
    /// what nothing reads.
    pub fn with_namespace_config(mut self, read: bool) -> Self {
        self.namespace_config = read;
        if !read {
            self.types = Scoped(Vec::new());
            self.go_namespace = None;
        }
        self
    }

    /// Whether the watched namespaces' own configuration is read.
    pub fn reads_namespace_config(&self) -> bool {
        self.namespace_config
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

    /// Runs the watches until dropped.
    pub async fn run(&self) {
        let go = async {
            if let Some((_, go)) = &self.go_namespace {
                go.run().await;
            }
        };
        tokio::join!(self.operator.run(), self.types.run(), go);
    }

    /// Resolves once the watches have listed (or `limit` has passed).
    pub async fn ready(&self, limit: std::time::Duration) {
        let go = async {
            if let Some((_, go)) = &self.go_namespace {
                go.ready(limit).await;
            }
        };
        tokio::join!(self.operator.ready(limit), self.types.ready(limit), go);
    }

    /// Every change to a ConfigMap of the operator namespace.
    pub fn subscribe_operator(&self) -> Option<Subscription<ConfigMap>> {
        self.operator.subscribe()
    }

    /// Every change to a ConfigMap of the Go operator's strategies
    /// namespace, when it is watched.
    /// Whether the Go operator's namespace is read besides the operator's.
    pub fn reads_go_namespace(&self) -> bool {
        self.go_namespace.is_some()
    }

    pub fn subscribe_go_namespace(&self) -> Option<Subscription<ConfigMap>> {
        self.go_namespace.as_ref()?.1.subscribe()
    }

    /// Every change to `cloud-resource-config` in `scope`.
    pub fn subscribe_types(&self, scope: Option<&str>) -> Option<Subscription<ConfigMap>> {
        self.types.scope(scope)?.subscribe()
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<Option<Located>, ConfigError> {
        Ok(self.get_marked(namespace, name).await?.map(|(cm, _)| cm))
    }

    /// The ConfigMap, and whether it is marked as shipped defaults
    /// ([`SHIPPED_DEFAULTS`]).
    async fn get_marked(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<(Located, bool)>, ConfigError> {
        if let Some(cm) = self
            .overrides
            .iter()
            .find(|cm| cm.namespace == namespace && cm.name == name)
        {
            return Ok(Some((cm.clone(), false)));
        }
        let read_error = |error: String| ConfigError::Read {
            namespace: namespace.to_string(),
            name: name.to_string(),
            error,
        };
        let go = (self.go_namespace.as_ref())
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, go)| go);
        let cached = if namespace == self.operator_namespace {
            (self.operator.get(namespace, name).await).map_err(|e| read_error(e.to_string()))?
        } else if let Some(go) = go {
            (go.get(namespace, name).await).map_err(|e| read_error(e.to_string()))?
        } else if name == TYPES_CONFIG_MAP {
            (self.types.get(namespace, name).await).map_err(|e| read_error(e.to_string()))?
        } else {
            None
        };
        let marked = |cm: &ConfigMap| {
            let annotations = cm.metadata.annotations.as_ref();
            let shipped = annotations
                .and_then(|a| a.get(SHIPPED_DEFAULTS))
                .is_some_and(|v| v == "true");
            (cm.data.clone(), shipped)
        };
        let cm = match cached {
            Some(cm) => cm.map(|cm| marked(&cm)),
            // Not watched (a namespace outside the watched ones).
            None => Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| read_error(e.to_string()))?
                .map(|cm| marked(&cm)),
        };
        Ok(cm.map(|(data, shipped)| {
            let located = Located {
                namespace: namespace.to_string(),
                name: name.to_string(),
                data: data.unwrap_or_default(),
            };
            (located, shipped)
        }))
    }

    /// `cloud-resource-config` from the resource's namespace (unless the
    /// operator reads no namespace's own), else the operator's namespace,
    /// else `None` (built-in defaults).
    pub async fn types(&self, namespace: &str) -> Result<Option<Located>, ConfigError> {
        if self.namespace_config
            && namespace != self.operator_namespace
            && let Some(cm) = self.get(namespace, TYPES_CONFIG_MAP).await?
        {
            return Ok(Some(cm));
        }
        self.get(&self.operator_namespace, TYPES_CONFIG_MAP).await
    }

    /// The provider's strategies ConfigMap in the operator's namespace,
    /// else where the Go operator reads it (its single watch namespace):
    /// a cluster that switches keeps its tiers rather than meeting the
    /// built-in ones. Only while the watched namespaces' own configuration
    /// is read (`--namespace-config`): off, nothing but the operator's
    /// namespace says what a tier is.
    pub async fn strategies(&self, provider: &str) -> Result<Option<Located>, ConfigError> {
        self.operator_or_go(&strategies_config_map(provider)).await
    }

    /// `name` in the operator's namespace, else in the Go operator's. One
    /// marked as shipped defaults (what deploy/, the chart and the bundle
    /// install) yields to the Go operator's: installing this operator
    /// beside a Go installation never shadows the tiers its databases
    /// were made with.
    async fn operator_or_go(&self, name: &str) -> Result<Option<Located>, ConfigError> {
        let ours = self.get_marked(&self.operator_namespace, name).await?;
        if let Some((cm, false)) = ours {
            return Ok(Some(cm));
        }
        let go = match &self.go_namespace {
            Some((ns, _)) if self.namespace_config => self.get(ns, name).await?,
            _ => None,
        };
        Ok(go.or(ours.map(|(cm, _)| cm)))
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
    let mut resolved = resolve_tier(
        strategies.as_ref(),
        reader.operator_namespace(),
        provider,
        kind,
        tier,
    )?;
    if matches!(kind, ResourceKind::Postgres | ResourceKind::Redis) {
        resolved.network = network_tier(strategies.as_ref(), tier)?;
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;

    /// A client no request of this test reaches.
    fn client() -> Client {
        let service = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(Body::empty()))
        });
        Client::new(service, "default")
    }

    #[tokio::test]
    async fn without_namespace_config_no_configmap_of_a_watched_namespace_is_watched() {
        let scopes = [Some("team-a".to_string())];
        let on = ConfigReader::new(client(), "cro", &scopes).with_namespace_config(true);
        assert!(on.reads_go_namespace());
        assert!(on.subscribe_types(Some("team-a")).is_some());
        // Off (the default): the tenant's ConfigMaps are nobody's to hold.
        let off = ConfigReader::new(client(), "cro", &scopes).with_namespace_config(false);
        assert!(!off.reads_go_namespace());
        assert!(off.subscribe_types(Some("team-a")).is_none());
        assert!(off.subscribe_operator().is_some());
    }
}
