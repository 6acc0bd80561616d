//! The operator's watch-backed copies of the objects it owns (labelled as
//! managed by it): providers read them from here first, so a reconcile of
//! a complete resource reads nothing from the API server. The operator
//! implements it over its watches; providers never watch on their own.

use std::sync::Arc;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service},
    networking::v1::NetworkPolicy,
};

/// Each object as last seen; `None` when the watch does not hold it.
pub trait OwnedObjects: Send + Sync {
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>>;
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>>;
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Secret>>;
    fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>>;
    fn network_policy(&self, namespace: &str, name: &str) -> Option<Arc<NetworkPolicy>>;
}
