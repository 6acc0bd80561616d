//! Whose access key a BlobStorage or an SMTPCredentialSet hands out: this
//! operator's IAM user's, kept in the CR's credentials Secret; or, for a
//! resource taken over from the Go operator (no Secret of ours), the key
//! the Cloud Credential Operator minted for it, used as it is. The choice
//! is made here, above both: `iam_user` only talks to IAM, `cco` only
//! reads and deletes what CCO made.

use cro_provider_api::{Change, ProviderError, ResourceRequest};
use serde_json::Value;

use crate::{
    cco,
    clients::Clients,
    credentials::CredentialsStore,
    iam_user::{self, Keys, Stored},
    sdk::IamUsers,
};

/// Where access keys come from, as the provider is set up.
pub struct KeySource<'a> {
    pub store: &'a dyn CredentialsStore,
    pub iam_users: &'a IamUsers,
    /// STS mode: workloads reach AWS through roles of their own, so no IAM
    /// user and no key is made (and the operator's role may not touch IAM).
    pub sts: bool,
    /// The IAM users of the request's account, as last seen.
    pub users: &'a iam_user::AccountCache,
}

/// The key of the CR's user `user`, whose one inline policy is `policy`:
/// ours, kept in the Secret `secret_name` (the user and key made when
/// missing), or the one CCO minted through CredentialsRequest
/// `cco_request`.
pub async fn user_keys(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    (user, policy_name, policy): (&str, &str, &Value),
    (secret_name, cco_request): (&str, &str),
) -> Result<Keys, ProviderError> {
    let ours = k.store.read(req, secret_name).await?;
    if ours.is_none()
        && let Some(key) = cco::read(k.store, req, cco_request).await?
    {
        return Ok(Keys::minted(key));
    }
    let existed =
        iam_user::ensure_user((c, k.users), k.iam_users, req, user, policy_name, policy).await?;
    let stored = Stored::new(ours.unwrap_or_default());
    let user_secret = (user, secret_name);
    // The clock is read here, once: what follows decides from it.
    let now = iam_user::unix_now();
    let looked = (stored, existed);
    iam_user::ensure_access_key(k.store, &c.iam, req, user_secret, looked, now).await
}

/// Every change [`user_keys`] would make to the user, from read-only
/// calls: none where the Cloud Credential Operator's key is used.
pub async fn plan_user(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    (user, policy_name, policy): (&str, &str, &Value),
    (secret_name, cco_request): (&str, &str),
) -> Result<Vec<Change>, ProviderError> {
    if k.store.read(req, secret_name).await?.is_none()
        && cco::read(k.store, req, cco_request).await?.is_some()
    {
        return Ok(Vec::new());
    }
    iam_user::plan_user((c, k.users), req, user, (policy_name, policy)).await
}

/// Deletes the CR's user `user` (if it is the CR's) and its credentials:
/// the Secret `secret_name` with our key, or the CredentialsRequest
/// `cco_request` (CCO then removes the user it made).
pub async fn delete_user_and_keys(
    k: &KeySource<'_>,
    iam: &aws_sdk_iam::Client,
    req: &ResourceRequest,
    user: &str,
    (secret_name, cco_request): (&str, &str),
) -> Result<(), ProviderError> {
    // A user of this name that is not the CR's (another CR's, or made by
    // someone else) stays, with its keys.
    match iam_user::user_tags(iam, user).await? {
        Some(tags) if !crate::plan::ours(req, &tags) => {}
        _ => iam_user::delete_user(iam, user).await?,
    }
    if cco::read(k.store, req, cco_request).await?.is_some() {
        cco::delete(k.store, req, cco_request).await?;
    }
    k.store.delete(req, secret_name).await
}
