//! Credentials the Go operator did not make itself: on OpenShift it asked
//! the Cloud Credential Operator (CCO) for them with a CredentialsRequest
//! in the CR's namespace, whose Secret of the same name holds
//! `aws_access_key_id` and `aws_secret_access_key`
//! (`reconcileCredentialRequest`, pkg/providers/aws/credentials.go). A
//! resource taken over from it keeps using those credentials, so its
//! output Secret does not change; deleting it deletes the
//! CredentialsRequest, and CCO removes the IAM user.

use cro_provider_api::{ProviderError, ResourceRequest};
use serde_json::{Value, json};

use crate::credentials::{AccessKey, CredentialsStore};

/// The CredentialsRequest of a bucket's user (`cro-aws-s3-<bucket>-creds`).
pub fn s3_request(bucket: &str) -> String {
    format!("cro-aws-s3-{bucket}-creds")
}

/// What the Go operator's CredentialsRequest for a bucket grants: every S3
/// action on the bucket and its objects (`buildPutBucketObjectEntries`,
/// pkg/providers/aws/credentials.go), CCO's `StatementEntry` fields.
pub fn bucket_entries(bucket: &str) -> Value {
    json!([
        {"effect": "Allow", "action": ["s3:*"], "resource": format!("arn:aws:s3:::{bucket}")},
        {"effect": "Allow", "action": ["s3:*"], "resource": format!("arn:aws:s3:::{bucket}/*")},
    ])
}

/// The CredentialsRequest of an SMTPCredentialSet (v0.13.3): named after
/// the resource's identifier.
pub fn ses_request(identifier: &str) -> String {
    identifier.to_string()
}

/// The CCO-minted key, when its Secret exists.
pub async fn read(
    store: &dyn CredentialsStore,
    req: &ResourceRequest,
    name: &str,
) -> Result<Option<AccessKey>, ProviderError> {
    let data = store.read(req, name).await?.unwrap_or_default();
    Ok(
        match (
            data.get("aws_access_key_id"),
            data.get("aws_secret_access_key"),
        ) {
            (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => Some(AccessKey {
                id: id.clone(),
                secret: secret.clone(),
            }),
            _ => None,
        },
    )
}

/// Deletes the CredentialsRequest `name` (CCO then removes the IAM user
/// and the Secret); where no CCO runs, the Secret itself.
pub async fn delete(
    store: &dyn CredentialsStore,
    req: &ResourceRequest,
    name: &str,
) -> Result<(), ProviderError> {
    store.delete_credentials_request(req, name).await
}
