//! What every BlobStorage store has, its own or its namespace's: the
//! region clients sign for, the client that makes buckets, users and keys
//! in it, its endpoint, and what a failed call to it says.

use cro_provider_api::{ObjectStore, ProviderError, ResourceRequest, StoreAccess};

use crate::{InClusterProvider, workload};

/// The store's region: SeaweedFS answers to any; clients must sign for one.
pub const REGION: &str = "us-east-1";

impl InClusterProvider {
    /// `http://<host>:<port>` of a store (the CR's own, or the namespace's),
    /// as the Secret gives it.
    pub(crate) fn store_endpoint(&self, store: &ResourceRequest) -> String {
        format!(
            "http://{}:{}",
            self.host(store),
            workload::OBJECT_STORE_PORT
        )
    }

    pub(crate) fn store_client(&self) -> Result<&dyn ObjectStore, ProviderError> {
        self.object_store.as_deref().ok_or_else(|| {
            ProviderError::permanent(
                "this operator was built without an S3 client for in-cluster BlobStorage stores",
            )
        })
    }
}

/// A failed call to the store at `at`: unreachable or not answering, where
/// the operator runs is what to look at; the store's own refusals speak
/// for themselves.
pub(crate) fn reach(e: ProviderError, at: &StoreAccess) -> ProviderError {
    let advice = match e.is_transient() {
        true => {
            ", which the operator reaches through its Service: run the operator in the cluster (or resolve the cluster's names, as `make run` does) and check the store's pod"
        }
        false => "",
    };
    e.context(format!("store {}{advice}", at.endpoint))
}
