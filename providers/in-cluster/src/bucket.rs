//! An in-cluster BlobStorage: its own S3-compatible store (SeaweedFS, a
//! Deployment with a Service and a PVC, as a Postgres has), and in it one
//! bucket and one user whose key may use that bucket only. The Secret is
//! `complete` only once the bucket, the user and its key are made.

use cro_provider_api::{
    AccessKey, ConnectionDetails, ObjectStore, Outcome, ProviderError, Provisioned, ResourceKind,
    ResourceRequest, StoreAccess,
};
use k8s_openapi::api::core::v1::Secret;

use crate::{
    InClusterProvider, Layout, credentials, objects::Objects, provisioned, strategy::Serving,
    workload,
};

/// The store's region: SeaweedFS answers to any; clients must sign for one.
pub const REGION: &str = "us-east-1";

/// The one user of a store: the application's.
const USER: &str = "app";

/// The bucket of a BlobStorage named `name`: its name when S3 allows it
/// (3 to 63 characters; a Kubernetes name is lowercase letters, digits,
/// `-` and `.` already), else cut to 63 or lengthened to 3.
pub fn bucket_name(name: &str) -> String {
    let mut bucket: String = name.chars().take(63).collect();
    while bucket.ends_with(['-', '.']) {
        bucket.pop();
    }
    while bucket.len() < 3 {
        bucket.push('0');
    }
    bucket
}

impl InClusterProvider {
    pub(crate) async fn blob_storage(
        &self,
        req: &ResourceRequest,
    ) -> Result<Provisioned, ProviderError> {
        let overrides = crate::strategy::parse(&req.strategy)?;
        if overrides.bucket == Serving::Placeholder || self.keeps_placeholder(req).await? {
            return Ok(placeholder());
        }
        self.layout_to_make(req).await?;
        let secrets = self.api::<Secret>(req);
        let (admin_key_id, admin_secret) = credentials::object_store_admin(&secrets, req).await?;
        let isolation = self.isolation(req).await?;
        let user = self.pod_user(req).await?;
        let image = &self.images.object_store;
        let desired = workload::object_store(req, &overrides, image, isolation, &user)?;
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(req, &desired, Layout::Ours).await?;
        let outcome = match outcome {
            Outcome::Ready(()) => {
                let at = StoreAccess {
                    endpoint: self.store_endpoint(req),
                    region: REGION.into(),
                    key_id: admin_key_id,
                    secret: admin_secret,
                };
                Outcome::Ready(self.bucket(req, &secrets, &at).await?)
            }
            Outcome::InProgress(r) => Outcome::InProgress(r),
            Outcome::Failed(r) => Outcome::Failed(r),
        };
        Ok(Provisioned {
            pending,
            ..provisioned("openshift-blobstorage-template", outcome, version)
        })
    }

    /// `http://<host>:<port>` of the CR's store, as the Secret gives it.
    fn store_endpoint(&self, req: &ResourceRequest) -> String {
        format!("http://{}:{}", self.host(req), workload::OBJECT_STORE_PORT)
    }

    /// The bucket and its user in the running store, and the Secret's
    /// details: the Go operator's keys and the endpoint.
    async fn bucket(
        &self,
        req: &ResourceRequest,
        secrets: &Objects<Secret>,
        at: &StoreAccess,
    ) -> Result<ConnectionDetails, ProviderError> {
        let store = self.store_client()?;
        let bucket = bucket_name(&req.name);
        let reach = |e| reach(e, at);
        store.ensure_bucket(at, &bucket).await.map_err(reach)?;
        store.ensure_user(at, USER, &bucket).await.map_err(reach)?;
        let key = user_key(store, secrets, req, at).await.map_err(reach)?;
        Ok(crate::details(&[
            ("bucketName", &bucket),
            ("bucketRegion", REGION),
            ("credentialKeyID", &key.id),
            ("credentialSecretKey", &key.secret),
            ("bucketEndpoint", &at.endpoint),
        ]))
    }

    fn store_client(&self) -> Result<&dyn ObjectStore, ProviderError> {
        self.object_store.as_deref().ok_or_else(|| {
            ProviderError::permanent(
                "this operator was built without an S3 client for in-cluster BlobStorage stores",
            )
        })
    }

    /// Why deleting this BlobStorage's store would lose objects the tier
    /// keeps (as the AWS tier keeps a bucket): its bucket holds some and
    /// `deleteStrategy.forceBucketDeletion` is not true. Asked whatever
    /// the tier says now: a store made under an earlier tier holds data
    /// as well.
    pub(crate) async fn bucket_kept(
        &self,
        req: &ResourceRequest,
    ) -> Result<Option<String>, ProviderError> {
        // An invalid tier forces nothing.
        let force = crate::strategy::parse(&req.strategy).is_ok_and(|o| o.force_bucket_deletion);
        if req.kind != ResourceKind::BlobStorage || force {
            return Ok(None);
        }
        let secrets = self.api::<Secret>(req);
        // Nobody was ever given a key: nothing can have been written.
        if credentials::bucket_user_key(&secrets, req).await?.is_none() {
            return Ok(None);
        }
        let Some(admin) = credentials::kept_object_store_admin(&secrets, req).await? else {
            return Ok(None);
        };
        let at = StoreAccess {
            endpoint: self.store_endpoint(req),
            region: REGION.into(),
            key_id: admin.id,
            secret: admin.secret,
        };
        let bucket = bucket_name(&req.name);
        let empty = self.store_client()?.is_empty(&at, &bucket).await;
        let empty = empty.map_err(|e| {
            reach(e, &at).context(format!(
                "checking that bucket {bucket} holds no objects before its store is deleted (the tier's deleteStrategy.forceBucketDeletion is not true; with it true the store is deleted unchecked)"
            ))
        })?;
        let name = &req.name;
        Ok((!empty).then(|| format!(
            "bucket {bucket} still holds objects and the tier's deleteStrategy.forceBucketDeletion is not true, so its store (Deployment, Service and PersistentVolumeClaim {name}, Secret {name}-credentials) is kept, running"
        )))
    }
}

/// A failed call to the store at `at`: unreachable or not answering, where
/// the operator runs is what to look at; the store's own refusals speak
/// for themselves.
fn reach(e: ProviderError, at: &StoreAccess) -> ProviderError {
    let advice = match e.is_transient() {
        true => {
            ", which the operator reaches through its Service: run the operator in the cluster (or resolve the cluster's names, as `make run` does) and check the store's pod"
        }
        false => "",
    };
    e.context(format!("store {}{advice}", at.endpoint))
}

/// The Go operator's Secret of an in-cluster BlobStorage: its keys,
/// empty, for a person to fill in.
fn placeholder() -> Provisioned {
    let keys = [
        "bucketName",
        "bucketRegion",
        "credentialKeyID",
        "credentialSecretKey",
    ];
    let empty: Vec<(&str, &str)> = keys.iter().map(|k| (*k, "")).collect();
    let outcome = Outcome::Ready(crate::details(&empty));
    provisioned("openshift-blobstorage-template", outcome, None)
}

/// The user's key: the one the credentials Secret keeps while the store
/// still has it; else a new one, kept at once. Keys of the user nobody
/// kept (a create whose answer was lost, or not written down) are
/// deleted first: their secret is known to no one.
async fn user_key(
    store: &dyn ObjectStore,
    secrets: &Objects<Secret>,
    req: &ResourceRequest,
    at: &StoreAccess,
) -> Result<AccessKey, ProviderError> {
    let kept = credentials::bucket_user_key(secrets, req).await?;
    let listed = store.access_keys(at, USER).await?;
    if let Some(key) = kept.filter(|k| listed.contains(&k.id)) {
        return Ok(key);
    }
    for id in &listed {
        store.delete_access_key(at, USER, id).await?;
    }
    let key = store.create_access_key(at, USER).await?;
    credentials::keep_bucket_user_key(secrets, req, &key).await?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_are_what_s3_allows() {
        assert_eq!(bucket_name("uploads"), "uploads");
        assert_eq!(bucket_name("a"), "a00");
        let long = format!("{}-{}", "x".repeat(62), "tail");
        assert_eq!(bucket_name(&long), "x".repeat(62));
        assert_eq!(bucket_name("my.site"), "my.site");
    }
}
