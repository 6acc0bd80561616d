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

/// Every kind of object the operator watches, as last seen: each answers
/// `None` when the watches do not hold it.
pub trait OwnedObjects: Send + Sync {
    fn deployment(&self, namespace: &str, name: &str) -> Option<Arc<Deployment>>;
    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>>;
    fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>>;
    fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Secret>>;
    fn config_map(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>>;
    fn network_policy(&self, namespace: &str, name: &str) -> Option<Arc<NetworkPolicy>>;
    /// This process wrote `secret` (as the API server answered the write):
    /// reads answer with it until the watch shows that write.
    fn wrote_secret(&self, secret: Secret);
    /// This process deleted the Secret `namespace/name`: reads do not
    /// answer with the watch's copy until the watch shows the deletion.
    fn deleted_secret(&self, namespace: &str, name: &str);
}

/// A kind of object the operator's watches hold, and which of
/// [`OwnedObjects`]' accessors reads it.
pub trait Owned: k8s_openapi::Resource + Clone + Send + Sync + 'static {
    fn held(cache: &dyn OwnedObjects, namespace: &str, name: &str) -> Option<Arc<Self>>;
}

macro_rules! owned {
    ($($kind:ty => $accessor:ident),+ $(,)?) => {$(
        impl Owned for $kind {
            fn held(cache: &dyn OwnedObjects, namespace: &str, name: &str) -> Option<Arc<Self>> {
                cache.$accessor(namespace, name)
            }
        }
    )+};
}

owned!(
    Deployment => deployment,
    Service => service,
    PersistentVolumeClaim => claim,
    Secret => secret,
    ConfigMap => config_map,
    NetworkPolicy => network_policy,
);

/// The `K` `namespace/name` as last seen (`None`: not held).
pub fn owned<K: Owned>(cache: &dyn OwnedObjects, namespace: &str, name: &str) -> Option<Arc<K>> {
    K::held(cache, namespace, name)
}
