//! An in-cluster BlobStorage: an S3-compatible store (SeaweedFS, a
//! Deployment with a Service and a PVC, as a Postgres has) of its own or
//! its namespace's (see `shared_store`), and in it one bucket and one user
//! whose key may use that bucket only. The Secret is `complete` only once
//! the bucket, the user and its key are made.

use cro_provider_api::{
    AccessKey, ConnectionDetails, ObjectStore, Outcome, ProviderError, Provisioned, ResourceKind,
    ResourceRequest, StoreAccess,
};
use k8s_openapi::api::core::v1::Secret;

use crate::{
    InClusterProvider, Layout, credentials,
    objects::Objects,
    provisioned,
    store::{REGION, reach},
    strategy::Serving,
    workload,
};

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
        let secrets = self.api::<Secret>(req);
        let home = credentials::bucket_home(&secrets, req).await?;
        if let Some(home) = home.filter(|h| *h != overrides.bucket) {
            return Err(moved(req, home, overrides.bucket));
        }
        let (store, desired, _turn) = match overrides.bucket {
            Serving::Namespace => {
                let store = self.namespace_store(req).await?;
                let turn = self.store_turns.take(&req.namespace).await;
                (
                    store.clone(),
                    self.namespace_store_workload(&store).await?,
                    Some(turn),
                )
            }
            _ => {
                self.layout_to_make(req).await?;
                let isolation = self.isolation(req).await?;
                let user = self.pod_user(req).await?;
                let image = &self.images.object_store;
                let desired = workload::object_store(req, &overrides, image, isolation, &user)?;
                (req.clone(), desired, None)
            }
        };
        let (key_id, secret) = credentials::object_store_admin(&secrets, &store).await?;
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(&store, &desired, Layout::Ours).await?;
        let outcome = match outcome {
            Outcome::Ready(()) => {
                let at = StoreAccess {
                    endpoint: self.store_endpoint(&store),
                    region: REGION.into(),
                    key_id,
                    secret,
                };
                let (bucket, user) = match overrides.bucket {
                    Serving::Namespace => {
                        let bucket = crate::shared_store::bucket_name(&req.name);
                        (bucket.clone(), bucket)
                    }
                    _ => (bucket_name(&req.name), USER.to_string()),
                };
                Outcome::Ready(self.bucket(req, &at, &bucket, &user).await?)
            }
            Outcome::InProgress(r) => Outcome::InProgress(r),
            Outcome::Failed(r) => Outcome::Failed(r),
        };
        Ok(Provisioned {
            pending,
            ..provisioned("openshift-blobstorage-template", outcome, version)
        })
    }

    /// The bucket and its user in the running store, and the Secret's
    /// details: the Go operator's keys and the endpoint.
    async fn bucket(
        &self,
        req: &ResourceRequest,
        at: &StoreAccess,
        bucket: &str,
        user: &str,
    ) -> Result<ConnectionDetails, ProviderError> {
        let store = self.store_client()?;
        let secrets = self.api::<Secret>(req);
        let reach = |e| reach(e, at);
        store.ensure_bucket(at, bucket).await.map_err(reach)?;
        store.ensure_user(at, user, bucket).await.map_err(reach)?;
        let key = user_key(store, &secrets, req, at, user)
            .await
            .map_err(reach)?;
        Ok(ConnectionDetails::of(&[
            ("bucketName", bucket),
            ("bucketRegion", REGION),
            ("credentialKeyID", &key.id),
            ("credentialSecretKey", &key.secret),
            ("bucketEndpoint", &at.endpoint),
        ]))
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

/// A tier that now puts the bucket in another store than the one holding
/// it: objects are never moved, so nothing is changed.
fn moved(req: &ResourceRequest, home: Serving, tier: Serving) -> ProviderError {
    let (name, ns) = (&req.name, &req.namespace);
    let store = |s: Serving| match s {
        Serving::Namespace => format!(
            "the namespace's shared store (objectStore \"namespace\", Deployment {ns}/{})",
            crate::shared_store::NAME
        ),
        Serving::Own => format!("a store of its own (objectStore \"own\", Deployment {ns}/{name})"),
        Serving::Placeholder => "no store (a placeholder Secret)".to_string(),
    };
    ProviderError::permanent(format!(
        "BlobStorage {ns}/{name}'s bucket is in {}, but its tier {} now says {}: the operator does not move objects between stores, so nothing was changed. Set the tier's objectStore back, or move the objects to a new BlobStorage under this tier",
        store(home),
        req.tier,
        store(tier)
    ))
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
    let outcome = Outcome::Ready(ConnectionDetails::of(&empty));
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
    user: &str,
) -> Result<AccessKey, ProviderError> {
    let kept = credentials::bucket_user_key(secrets, req).await?;
    let listed = store.access_keys(at, user).await?;
    if let Some(key) = kept.filter(|k| listed.contains(&k.id)) {
        return Ok(key);
    }
    for id in &listed {
        store.delete_access_key(at, user, id).await?;
    }
    let key = store.create_access_key(at, user).await?;
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
