//! The object store a namespace's BlobStorages share (a tier's
//! `objectStore: "namespace"`): the same SeaweedFS workload as a store of
//! a BlobStorage's own, named [`NAME`] and owned by the Namespace, so no
//! CR's deletion takes it. Each BlobStorage has a bucket and a user of its
//! own in it, the user's key kept in the CR's `<name>-credentials`. The
//! store goes with its last bucket: a bucket kept because it holds objects
//! keeps it.

use cro_provider_api::{
    Deletion, Owner, ProviderError, ResourceKind, ResourceRequest, StoreAccess,
};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{Namespace, PersistentVolumeClaim, Secret, Service},
    networking::v1::NetworkPolicy,
};
use kube::Api;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, MutexGuard};

use crate::{InClusterProvider, apply, credentials, strategy, workload};

/// The name of a namespace's shared store: its Deployment, Service, PVC,
/// NetworkPolicy, and `<NAME>-credentials` (its administrator key).
pub const NAME: &str = "cro-object-store";

/// The shared store's volume: it holds the buckets of every BlobStorage of
/// the namespace.
const STORAGE: &str = "10Gi";

/// One turn at a time per namespace on its store: a bucket made while the
/// store's last bucket goes would otherwise be deleted with the store.
/// Namespaces are spread over a few locks (a namespace's CRs are all
/// reconciled by one process, see sharding); two namespaces sharing one
/// only take turns on these rare steps.
pub struct Turns([Mutex<()>; 16]);

impl Default for Turns {
    fn default() -> Self {
        Turns(std::array::from_fn(|_| Mutex::new(())))
    }
}

impl Turns {
    pub async fn take(&self, namespace: &str) -> MutexGuard<'_, ()> {
        let hash = Sha256::digest(namespace.as_bytes());
        self.0[usize::from(hash[0]) % self.0.len()].lock().await
    }
}

/// The bucket of BlobStorage `name` in its namespace's store: its name when
/// S3 allows it (3 to 63 characters), else a shortened or lengthened name
/// with a hash of the whole, so two BlobStorages never share one.
pub fn bucket_name(name: &str) -> String {
    if (3..=63).contains(&name.len()) {
        return name.to_string();
    }
    let hash = Sha256::digest(name.as_bytes());
    let hash: String = hash[..4].iter().map(|b| format!("{b:02x}")).collect();
    let head: String = name.chars().take(54).collect();
    format!("{}-{hash}", head.trim_end_matches(['-', '.']))
}

impl InClusterProvider {
    /// The request the namespace's store is made under: the CR's, named
    /// [`NAME`], owned by its Namespace.
    pub(crate) async fn namespace_store(
        &self,
        req: &ResourceRequest,
    ) -> Result<ResourceRequest, ProviderError> {
        let ns = Api::<Namespace>::all(self.client.clone())
            .get(&req.namespace)
            .await
            .map_err(|e| {
                let message = format!("reading Namespace {}", req.namespace);
                cro_kube::provider_error(message, &e)
            })?;
        let owner = Owner {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: req.namespace.clone(),
            uid: ns.metadata.uid.unwrap_or_default(),
        };
        Ok(ResourceRequest {
            name: NAME.into(),
            owner,
            ..req.clone()
        })
    }

    /// The shared store's workload: the default of a store, on a larger
    /// volume (no tier shapes it, see `strategy`).
    pub(crate) async fn namespace_store_workload(
        &self,
        store: &ResourceRequest,
    ) -> Result<workload::Desired, ProviderError> {
        let overrides = strategy::Overrides {
            pvc_spec: Some(serde_json::json!({"resources": {"requests": {"storage": STORAGE}}})),
            ..Default::default()
        };
        let isolation = self.isolation(store).await?;
        let user = self.pod_user(store).await?;
        let image = &self.images.object_store;
        workload::object_store(store, &overrides, image, isolation, &user)
    }

    /// Whether the BlobStorage's bucket is (or is to be) in the namespace's
    /// store: its credentials say so, or, with nothing made yet, its tier.
    pub(crate) async fn in_namespace_store(
        &self,
        req: &ResourceRequest,
    ) -> Result<bool, ProviderError> {
        if req.kind != ResourceKind::BlobStorage {
            return Ok(false);
        }
        let home = credentials::bucket_home(&self.api::<Secret>(req), req).await?;
        let tier = strategy::parse(&req.strategy).map(|o| o.bucket).ok();
        Ok(home.or(tier) == Some(strategy::Serving::Namespace))
    }

    /// Deletes the BlobStorage's bucket and user from the namespace's
    /// store, unless the bucket holds objects the tier keeps; then the
    /// store itself if no bucket is left in it.
    pub(crate) async fn delete_from_namespace_store(
        &self,
        req: &ResourceRequest,
    ) -> Result<Deletion, ProviderError> {
        let store = self.namespace_store(req).await?;
        let _turn = self.store_turns.take(&req.namespace).await;
        let secrets = self.api::<Secret>(req);
        let own_secret = workload::credentials_secret_name(&req.name);
        if !self.store_going(&store).await? {
            let admin = credentials::kept_object_store_admin(&secrets, &store).await?;
            let Some(admin) = admin else {
                return Err(ProviderError::transient(format!(
                    "Secret {}/{NAME}-credentials, the namespace's object store's key, is missing while its PersistentVolumeClaim {NAME} is there: the operator cannot delete bucket {} without it; restore the Secret, or delete the PersistentVolumeClaim (and every bucket in it) by hand",
                    req.namespace,
                    bucket_name(&req.name)
                )));
            };
            let at = StoreAccess {
                endpoint: self.store_endpoint(&store),
                region: crate::store::REGION.into(),
                key_id: admin.id,
                secret: admin.secret,
            };
            if let Some(kept) = self.shared_bucket_kept(req, &at).await? {
                return Ok(Deletion::Keep(kept));
            }
            let client = self.store_client()?;
            let reach = |e| crate::store::reach(e, &at);
            let bucket = bucket_name(&req.name);
            client.delete_user(&at, &bucket).await.map_err(reach)?;
            client.delete_bucket(&at, &bucket).await.map_err(reach)?;
            // The store goes only when it lists no bucket and no other
            // BlobStorage holds a key to one: a store still starting could
            // answer an empty list.
            let buckets = client.buckets(&at).await.map_err(reach)?;
            let users =
                credentials::namespace_store_users(&self.client, &req.namespace, &own_secret)
                    .await?;
            if !buckets.is_empty() || !users.is_empty() {
                let deleted = apply::delete(&secrets, &own_secret, &req.owner, false).await?;
                return Ok(match deleted {
                    true => Deletion::Done,
                    false => Deletion::InProgress(format!(
                        "waiting for Secret {own_secret} to be deleted"
                    )),
                });
            }
        }
        let mut left = self.delete_store(&store).await?;
        if !apply::delete(&secrets, &own_secret, &req.owner, false).await? {
            left.push(format!("Secret {own_secret}"));
        }
        Ok(match left.is_empty() {
            true => Deletion::Done,
            false => Deletion::InProgress(format!(
                "waiting for {} (the namespace's object store, whose last bucket went) to be deleted",
                left.join(", ")
            )),
        })
    }

    /// Why the bucket is kept (as on AWS): it holds objects and the tier
    /// does not force its deletion.
    async fn shared_bucket_kept(
        &self,
        req: &ResourceRequest,
        at: &StoreAccess,
    ) -> Result<Option<String>, ProviderError> {
        let force = strategy::parse(&req.strategy).is_ok_and(|o| o.force_bucket_deletion);
        let secrets = self.api::<Secret>(req);
        // Nobody was ever given a key: nothing can have been written.
        if force || credentials::bucket_user_key(&secrets, req).await?.is_none() {
            return Ok(None);
        }
        let bucket = bucket_name(&req.name);
        let empty = self.store_client()?.is_empty(at, &bucket).await;
        let empty = empty.map_err(|e| {
            crate::store::reach(e, at).context(format!(
                "checking that bucket {bucket} holds no objects before it is deleted (the tier's deleteStrategy.forceBucketDeletion is not true; with it true the bucket is deleted unchecked)"
            ))
        })?;
        let name = &req.name;
        Ok((!empty).then(|| format!(
            "bucket {bucket} in the namespace's object store {NAME} still holds objects and the tier's deleteStrategy.forceBucketDeletion is not true, so the bucket, its user and key (Secret {name}-credentials) are kept"
        )))
    }

    /// The store is going or gone: its PVC (deleted first, see
    /// [`Self::delete_store`]) is being deleted or is not there.
    async fn store_going(&self, store: &ResourceRequest) -> Result<bool, ProviderError> {
        let pvc = self.api::<PersistentVolumeClaim>(store).get_opt(NAME).await;
        let pvc = pvc.map_err(|e| {
            let message = format!("reading PersistentVolumeClaim {}/{NAME}", store.namespace);
            cro_kube::provider_error(message, &e)
        })?;
        Ok(pvc.is_none_or(|p| p.metadata.deletion_timestamp.is_some()))
    }

    /// Deletes the store's objects, the PVC first: a PVC being deleted
    /// says the store is going, which the next pass must know with the
    /// Deployment gone. What is left is returned.
    async fn delete_store(&self, store: &ResourceRequest) -> Result<Vec<String>, ProviderError> {
        let owner = &store.owner;
        let mut left = Vec::new();
        let pvc = self.api::<PersistentVolumeClaim>(store);
        if !apply::delete(&pvc, NAME, owner, false).await? {
            left.push(format!("PersistentVolumeClaim {NAME}"));
        }
        if !apply::delete(&self.api::<Deployment>(store), NAME, owner, false).await? {
            left.push(format!("Deployment {NAME}"));
        }
        if !apply::delete(&self.api::<Service>(store), NAME, owner, false).await? {
            left.push(format!("Service {NAME}"));
        }
        if !apply::delete(&self.api::<NetworkPolicy>(store), NAME, owner, false).await? {
            left.push(format!("NetworkPolicy {NAME}"));
        }
        let secret = workload::credentials_secret_name(NAME);
        if !apply::delete(&self.api::<Secret>(store), &secret, owner, false).await? {
            left.push(format!("Secret {secret}"));
        }
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_bucket_names_are_what_s3_allows_and_never_collide() {
        assert_eq!(bucket_name("uploads"), "uploads");
        let (a, a00) = (bucket_name("a"), bucket_name("a00"));
        assert_ne!(a, a00, "a short name is lengthened to no other's bucket");
        assert!(a.len() >= 3 && a.starts_with("a-"), "{a}");
        let long = |tail: &str| bucket_name(&format!("{}-{tail}", "x".repeat(62)));
        let (one, two) = (long("one"), long("two"));
        assert_ne!(one, two, "names differing after 63 characters");
        assert!(one.len() <= 63 && two.len() <= 63);
        assert!(!one.contains("-.") && !one.ends_with('-'), "{one}");
    }
}
