//! The operator's reconcile context over the API server in memory
//! ([`cro_runtime::mock_api`]), for the skeleton's and the controllers'
//! tests: no test environment, no network.

use std::sync::Arc;

pub use cro_runtime::mock_api::{MockApi, Recorded};

/// What the tests' operator is told: operator namespace
/// `cloud-resource-operator`, cluster ID `testcluster`, all namespaces.
pub fn settings(shard: cro_runtime::shard::Shard) -> super::Settings {
    super::Settings {
        operator_namespace: "cloud-resource-operator".into(),
        watch_namespaces: Vec::new(),
        concurrency: 1,
        cluster_id: "testcluster".into(),
        tag_key_prefix: "integreatly.org/".into(),
        extra_tags: Default::default(),
        infrastructure_tags: Default::default(),
        allow_cross_namespace_secrets: false,
        recheck_interval: std::time::Duration::from_secs(3600),
        cloud_metrics_interval: std::time::Duration::from_secs(300),
        shard,
        namespace_config: false,
    }
}

/// A reconcile context answered by this server. No watch runs: the
/// objects it owns are read and written through the API (their cache
/// covers no namespace the tests use), and `config` (ConfigMaps of the
/// operator namespace) stands in for the cluster's configuration.
pub fn context(
    client: kube::Client,
    settings: super::Settings,
    providers: Vec<Arc<dyn cro_provider_api::Provider>>,
    connectivity: (Arc<crate::connectivity::Checker>, Arc<super::Objects>),
    config: Vec<crate::config::Located>,
) -> super::Context {
    let unwatched = cro_runtime::cache::scopes(&["no-test-uses-it".to_string()]);
    let owned = Arc::new(crate::providers::owned::Owned::new(&client, &unwatched));
    let metrics = Arc::new(crate::metrics::Metrics::new(|_| {}));
    let reader = crate::config::ConfigReader::new(
        client.clone(),
        settings.operator_namespace.clone(),
        &cro_runtime::cache::scopes(&settings.watch_namespaces),
    )
    .with_namespace_config(false)
    .with_overrides(config);
    let mut ctx = super::Context::new(client, settings, owned, providers, metrics, connectivity);
    ctx.config = reader;
    ctx
}
