//! The operator's watch-backed copies of the objects it owns (labelled as
//! managed by it): providers read them from here first, so a reconcile of
//! a complete resource reads nothing from the API server. The operator
//! implements it over its watches; providers never watch on their own.

use std::{any::Any, sync::Arc};

/// Every kind of object the operator watches, as last seen.
pub trait OwnedObjects: Send + Sync {
    /// The object of kind `kind` (its `k8s_openapi::Resource::KIND`);
    /// `None` when the watches do not hold it, or watch no such kind.
    /// Read it typed with [`owned`].
    fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<dyn Any + Send + Sync>>;
}

/// A kind of object the operator's watches may hold.
pub trait Owned: k8s_openapi::Resource + Clone + Send + Sync + 'static {}

impl<K: k8s_openapi::Resource + Clone + Send + Sync + 'static> Owned for K {}

/// The `K` `namespace/name` as last seen (`None`: not held).
pub fn owned<K: Owned>(cache: &dyn OwnedObjects, namespace: &str, name: &str) -> Option<Arc<K>> {
    cache.get(K::KIND, namespace, name)?.downcast().ok()
}

/// `held` as [`OwnedObjects::get`] answers it.
pub fn as_any<K: Owned>(held: Option<Arc<K>>) -> Option<Arc<dyn Any + Send + Sync>> {
    held.map(|k| k as Arc<dyn Any + Send + Sync>)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        Resource as _,
        api::core::v1::{ConfigMap, Secret},
    };

    use super::*;

    /// Holds one Secret, `ns/s`.
    struct OneSecret(Arc<Secret>);

    impl OwnedObjects for OneSecret {
        fn get(&self, kind: &str, ns: &str, name: &str) -> Option<Arc<dyn Any + Send + Sync>> {
            let held = (kind, ns, name) == (Secret::KIND, "ns", "s");
            as_any(held.then(|| self.0.clone()))
        }
    }

    #[test]
    fn an_object_is_read_as_its_own_kind_only() {
        let mut secret = Secret::default();
        secret.metadata.name = Some("s".into());
        let cache = OneSecret(Arc::new(secret));
        let found = owned::<Secret>(&cache, "ns", "s");
        assert_eq!(
            found.and_then(|s| s.metadata.name.clone()).as_deref(),
            Some("s")
        );
        assert!(owned::<ConfigMap>(&cache, "ns", "s").is_none());
        assert!(owned::<Secret>(&cache, "other", "s").is_none());
    }
}
