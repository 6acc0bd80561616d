//! Where the provider reads the objects it owns: from the operator's
//! watches when they hold the object, so a reconcile of a complete
//! workload reads nothing from the API server; else (not labelled as the
//! operator's, e.g. the Go operator's, or not seen yet) from the API
//! server. Writes always go to the API server.

use std::{ops::Deref, sync::Arc};

use cro_kube::{Owned, OwnedObjects, owned};
use kube::Api;

/// A namespaced kind the provider writes and the cache holds.
pub trait Stored:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Owned
    + serde::de::DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
{
}

impl<K> Stored for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Owned
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
{
}

/// The objects of kind `K` in one namespace: `get_opt` reads the cache
/// first; everything else is the `Api`'s.
pub struct Objects<K> {
    api: Api<K>,
    namespace: String,
    cache: Option<Arc<dyn OwnedObjects>>,
}

impl<K> Objects<K>
where
    K: Owned + kube::Resource + serde::de::DeserializeOwned + std::fmt::Debug,
{
    pub fn new(api: Api<K>, namespace: &str, cache: Option<Arc<dyn OwnedObjects>>) -> Self {
        Objects {
            api,
            namespace: namespace.to_string(),
            cache,
        }
    }

    /// The object as last seen, from the cache when it holds it.
    pub async fn get_opt(&self, name: &str) -> kube::Result<Option<K>> {
        let cached = self
            .cache
            .as_deref()
            .and_then(|c| owned::<K>(c, &self.namespace, name));
        match cached {
            Some(obj) => Ok(Some(K::clone(&obj))),
            None => self.api.get_opt(name).await,
        }
    }

    /// The object as the API server has it now (to confirm a deletion).
    pub async fn fresh(&self, name: &str) -> kube::Result<Option<K>> {
        self.api.get_opt(name).await
    }
}

impl<K> Deref for Objects<K> {
    type Target = Api<K>;

    fn deref(&self) -> &Api<K> {
        &self.api
    }
}
