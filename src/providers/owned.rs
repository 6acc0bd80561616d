//! The objects this operator owns (output Secrets, the in-cluster
//! provider's workloads), watched by their label in each watched scope:
//! what providers read through [`cro_kube::OwnedObjects`].

use std::{sync::Arc, time::Duration};

use cro_provider_api::{MANAGED_BY, MANAGED_BY_LABEL};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
    networking::v1::NetworkPolicy,
};
use kube::{Client, runtime::watcher};

use cro_runtime::cache::{OWNED_OBJECT_LIMIT, Scoped};

/// Objects per page of an owned-object list. The label is anyone's to
/// set, and a page is parsed whole before large objects become stubs:
/// 20 Secrets of etcd's 1.5 MiB limit stay within the operator's memory
/// limit, where the watcher's default 500 would not. A list is only made
/// at start and after a 410 Gone.
const OWNED_PAGE: u32 = 20;

/// What the operator creates carries this label; only that is watched.
pub fn owned() -> watcher::Config {
    (watcher::Config::default())
        .labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"))
        .page_size(OWNED_PAGE)
}

/// The objects this operator owns, one watch per kind and scope: the
/// output Secrets, and the in-cluster provider's workloads.
pub struct Owned {
    pub secrets: Scoped<Secret>,
    pub deployments: Scoped<Deployment>,
    pub services: Scoped<Service>,
    pub claims: Scoped<PersistentVolumeClaim>,
    pub config_maps: Scoped<ConfigMap>,
    pub network_policies: Scoped<NetworkPolicy>,
}

impl Owned {
    pub fn new(client: &Client, scopes: &[Option<String>]) -> Self {
        let owned = owned();
        let limit = OWNED_OBJECT_LIMIT;
        Owned {
            secrets: Scoped::bounded(client, scopes, &owned, limit),
            deployments: Scoped::bounded(client, scopes, &owned, limit),
            services: Scoped::bounded(client, scopes, &owned, limit),
            claims: Scoped::bounded(client, scopes, &owned, limit),
            config_maps: Scoped::bounded(client, scopes, &owned, limit),
            network_policies: Scoped::bounded(client, scopes, &owned, limit),
        }
    }

    /// Runs every watch until dropped.
    pub async fn run(&self) {
        tokio::join!(
            self.secrets.run(),
            self.deployments.run(),
            self.services.run(),
            self.claims.run(),
            self.config_maps.run(),
            self.network_policies.run(),
        );
    }

    /// Resolves once every watch has listed (or `limit` has passed).
    pub async fn ready(&self, limit: Duration) {
        tokio::join!(
            self.secrets.ready(limit),
            self.deployments.ready(limit),
            self.services.ready(limit),
            self.claims.ready(limit),
            self.config_maps.ready(limit),
            self.network_policies.ready(limit),
        );
    }
}

/// Providers read the objects the operator owns from these watches.
impl cro_kube::OwnedObjects for Owned {
    fn deployment(&self, ns: &str, name: &str) -> Option<Arc<Deployment>> {
        self.deployments.peek(ns, name)
    }
    fn service(&self, ns: &str, name: &str) -> Option<Arc<Service>> {
        self.services.peek(ns, name)
    }
    fn claim(&self, ns: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.peek(ns, name)
    }
    fn secret(&self, ns: &str, name: &str) -> Option<Arc<Secret>> {
        self.secrets.peek(ns, name)
    }
    fn config_map(&self, ns: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.config_maps.peek(ns, name)
    }
    fn network_policy(&self, ns: &str, name: &str) -> Option<Arc<NetworkPolicy>> {
        self.network_policies.peek(ns, name)
    }
    fn wrote_secret(&self, secret: Secret) {
        self.secrets.wrote(secret);
    }
    fn deleted_secret(&self, ns: &str, name: &str) {
        self.secrets.deleted(ns, name);
    }
}
