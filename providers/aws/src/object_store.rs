//! [`ObjectStore`] over this provider's S3 and IAM clients: an
//! S3-compatible store in the cluster (SeaweedFS) speaks both APIs on one
//! port, so its buckets, users and keys are made as on AWS.

use aws_credential_types::Credentials;
use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::{http::SharedHttpClient, orchestrator::HttpResponse};
use cro_provider_api::{AccessKey, Fence, ObjectStore, ProviderError, StoreAccess};
use serde_json::{Value, json};

use crate::{
    budget::{Budget, limited_client},
    errors::{already_exists, classify},
};

/// The SDK clients for stores, one HTTP client (with its own budget)
/// behind the operator's fence.
pub struct CompatibleStores {
    http: SharedHttpClient,
}

impl CompatibleStores {
    pub fn new(fence: Fence) -> Self {
        // A store in the cluster has no AWS rate limits: the budget only
        // keeps a burst of reconciles from flooding one small server.
        let budget = Budget {
            rate: 50.0,
            burst: 50,
        };
        CompatibleStores {
            http: limited_client(budget, fence),
        }
    }

    fn credentials(at: &StoreAccess) -> Credentials {
        Credentials::new(&at.key_id, &at.secret, None, None, "store")
    }

    fn s3(&self, at: &StoreAccess) -> aws_sdk_s3::Client {
        let config = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .endpoint_url(&at.endpoint)
            .region(aws_sdk_s3::config::Region::new(at.region.clone()))
            .credentials_provider(Self::credentials(at))
            // `<bucket>.<service>.svc` does not resolve.
            .force_path_style(true)
            .http_client(self.http.clone())
            .build();
        aws_sdk_s3::Client::from_conf(config)
    }

    fn iam(&self, at: &StoreAccess) -> aws_sdk_iam::Client {
        let config = aws_sdk_iam::Config::builder()
            .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
            .endpoint_url(&at.endpoint)
            .region(aws_sdk_iam::config::Region::new(at.region.clone()))
            .credentials_provider(Self::credentials(at))
            .http_client(self.http.clone())
            .build();
        aws_sdk_iam::Client::from_conf(config)
    }
}

/// Read, write and list on one bucket and its objects, in the actions
/// SeaweedFS's IAM knows (it refuses a policy naming any other).
fn bucket_policy(bucket: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
             "Resource": [format!("arn:aws:s3:::{bucket}")]},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
             "Resource": [format!("arn:aws:s3:::{bucket}/*")]}
        ]
    })
}

/// A failed call to the store, naming the operation, what it named and the
/// store's own code and message (AWS's advice on tiers does not apply).
fn store_error<E>(operation: &str, resource: &str, e: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let (kind, _) = classify(&e);
    // A HEAD answer has no body to carry a code: its status stands in.
    let status = e.raw_response().map(|r| r.status().as_u16());
    let code = (e.code().map(str::to_string)).or_else(|| status.map(|s| format!("HTTP {s}")));
    let said = match (&code, e.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.clone(),
        _ => DisplayErrorContext(&e).to_string(),
    };
    ProviderError::new(kind, format!("{operation} {resource}: {said}")).with_code(code.as_deref())
}

/// What a call to the store answered; `Ok(None)` for an error `quiet`
/// picks (already there, or not there).
fn answer<T, E>(
    result: Result<T, SdkError<E, HttpResponse>>,
    quiet: impl FnOnce(&str) -> bool,
    operation: &str,
    resource: &str,
) -> Result<Option<T>, ProviderError>
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match result {
        Ok(out) => Ok(Some(out)),
        Err(e) if e.code().is_some_and(quiet) => Ok(None),
        Err(e) => Err(store_error(operation, resource, e)),
    }
}

/// The store's answer that what a call names is not there.
fn gone(code: &str) -> bool {
    code == "NoSuchEntity"
}

/// Never quiet: every error is one.
fn none(_: &str) -> bool {
    false
}

#[async_trait::async_trait]
impl ObjectStore for CompatibleStores {
    async fn ensure_bucket(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError> {
        let sent = self.s3(at).create_bucket().bucket(bucket).send().await;
        // Made now, or by an attempt whose answer was lost: a bucket of
        // this name is this BlobStorage's (the store is its own, or its
        // namespace's, whose buckets are named after the BlobStorages).
        answer(sent, already_exists, "s3:CreateBucket", bucket).map(drop)
    }

    async fn ensure_user(
        &self,
        at: &StoreAccess,
        user: &str,
        bucket: &str,
    ) -> Result<(), ProviderError> {
        let iam = self.iam(at);
        let sent = iam.create_user().user_name(user).send().await;
        answer(sent, already_exists, "iam:CreateUser", user)?;
        let policy = bucket_policy(bucket).to_string();
        let put = iam
            .put_user_policy()
            .user_name(user)
            .policy_name(bucket)
            .policy_document(policy)
            .send()
            .await;
        answer(put, none, "iam:PutUserPolicy", user).map(drop)
    }

    async fn access_keys(
        &self,
        at: &StoreAccess,
        user: &str,
    ) -> Result<Vec<String>, ProviderError> {
        let listed = self.iam(at).list_access_keys().user_name(user).send().await;
        let listed = answer(listed, gone, "iam:ListAccessKeys", user)?;
        Ok(listed
            .map(|out| {
                out.access_key_metadata()
                    .iter()
                    .filter_map(|k| k.access_key_id().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn create_access_key(
        &self,
        at: &StoreAccess,
        user: &str,
    ) -> Result<AccessKey, ProviderError> {
        let made = self
            .iam(at)
            .create_access_key()
            .user_name(user)
            .send()
            .await;
        let made = answer(made, none, "iam:CreateAccessKey", user)?;
        let key = made.as_ref().and_then(|m| m.access_key()).ok_or_else(|| {
            ProviderError::transient(format!(
                "iam:CreateAccessKey for {user} at {} answered without a key",
                at.endpoint
            ))
        })?;
        Ok(AccessKey {
            id: key.access_key_id().to_string(),
            secret: key.secret_access_key().to_string(),
        })
    }

    async fn can_use(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError> {
        let sent = self.s3(at).head_bucket().bucket(bucket).send().await;
        answer(sent, none, "s3:HeadBucket", bucket).map(drop)
    }

    async fn is_empty(&self, at: &StoreAccess, bucket: &str) -> Result<bool, ProviderError> {
        let sent = (self.s3(at).list_objects_v2())
            .bucket(bucket)
            .max_keys(1)
            .send()
            .await;
        let no_bucket = |code: &str| code == "NoSuchBucket";
        let listed = answer(sent, no_bucket, "s3:ListObjectsV2", bucket)?;
        Ok(listed.is_none_or(|out| out.contents().is_empty()))
    }

    async fn buckets(&self, at: &StoreAccess) -> Result<Vec<String>, ProviderError> {
        let sent = self.s3(at).list_buckets().send().await;
        let listed = answer(sent, none, "s3:ListBuckets", &at.endpoint)?;
        Ok((listed.iter())
            .flat_map(|out| out.buckets())
            .filter_map(|b| b.name().map(str::to_string))
            .collect())
    }

    async fn delete_bucket(&self, at: &StoreAccess, bucket: &str) -> Result<(), ProviderError> {
        let s3 = self.s3(at);
        // Not there (a lost answer's delete acted): nothing to delete.
        let objects = match crate::s3::list(&s3, bucket).await {
            Err(e) if e.code() == Some("NoSuchBucket") => return Ok(()),
            listed => listed?,
        };
        crate::s3::delete_with_objects(&s3, bucket, &objects).await
    }

    async fn delete_user(&self, at: &StoreAccess, user: &str) -> Result<(), ProviderError> {
        crate::iam_user::delete_user(&self.iam(at), user).await
    }

    async fn delete_access_key(
        &self,
        at: &StoreAccess,
        user: &str,
        key_id: &str,
    ) -> Result<(), ProviderError> {
        let sent = (self.iam(at).delete_access_key())
            .user_name(user)
            .access_key_id(key_id)
            .send()
            .await;
        answer(sent, gone, "iam:DeleteAccessKey", user).map(drop)
    }
}
