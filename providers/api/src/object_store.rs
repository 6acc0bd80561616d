//! An S3-compatible object store with an IAM API on its S3 port (the
//! in-cluster provider's SeaweedFS): what the in-cluster provider asks of
//! it, carried out by the AWS provider's S3 and IAM clients, so neither
//! provider speaks the other's protocols.

use crate::ProviderError;

/// Where the store answers and the key calls sign with (its
/// administrator's, or a user's).
#[derive(Clone)]
pub struct StoreAccess {
    /// `http://<service>.<namespace>.svc:<port>`.
    pub endpoint: String,
    pub region: String,
    pub key_id: String,
    pub secret: String,
}

impl std::fmt::Debug for StoreAccess {
    // Never the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreAccess")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// An access key (an AWS IAM user's, a store user's): the secret is
/// returned only when it is made, and never shows in logs.
#[derive(Clone, PartialEq, Eq)]
pub struct AccessKey {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for AccessKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Every call is idempotent as seen from the store: a retry whose first
/// answer was lost finds the bucket or user there (or gone) and says so.
#[async_trait::async_trait]
pub trait ObjectStore: Send + Sync {
    /// Bucket `bucket` exists.
    async fn ensure_bucket(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError>;

    /// User `user` exists with one inline policy: read, write and list on
    /// `bucket` and its objects, nothing else.
    async fn ensure_user(
        &self,
        at: &StoreAccess,
        user: &str,
        bucket: &str,
    ) -> Result<(), ProviderError>;

    /// The ids of `user`'s access keys.
    async fn access_keys(&self, at: &StoreAccess, user: &str)
    -> Result<Vec<String>, ProviderError>;

    async fn create_access_key(
        &self,
        at: &StoreAccess,
        user: &str,
    ) -> Result<AccessKey, ProviderError>;

    /// Whether the key of `at` may use `bucket` (HeadBucket): what an
    /// application with the Secret does first.
    async fn can_use(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError>;

    /// Whether `bucket` holds no object (one that is not there holds none).
    async fn is_empty(&self, at: &StoreAccess, bucket: &str) -> Result<bool, ProviderError>;

    /// The names of the store's buckets (a store shared by a namespace's
    /// BlobStorages goes with its last bucket).
    async fn buckets(&self, at: &StoreAccess) -> Result<Vec<String>, ProviderError>;

    /// Deletes `bucket` with every object in it; one already gone is no
    /// error.
    async fn delete_bucket(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError>;

    /// Deletes `user` with its keys and policy; one already gone is no
    /// error.
    async fn delete_user(&self, at: &StoreAccess, user: &str) -> Result<(), ProviderError>;

    /// Deletes the key; one already gone is no error.
    async fn delete_access_key(
        &self,
        at: &StoreAccess,
        user: &str,
        key_id: &str,
    ) -> Result<(), ProviderError>;
}
