//! Whose access key a BlobStorage or an SMTPCredentialSet hands out: this
//! operator's IAM user's, kept in the CR's credentials Secret; or, for a
//! resource taken over from the Go operator (no Secret of ours), the key
//! the Cloud Credential Operator minted for it, used as it is. The choice
//! is made here, above both: `iam_user` only talks to IAM, `cco` only
//! reads and deletes what CCO made.

use std::collections::BTreeMap;

use cro_provider_api::{Change, ProviderError, ResourceRequest};
use serde_json::Value;
use tracing::warn;

use crate::{
    cco,
    clients::Clients,
    credentials::{AccessKey, CredentialsStore},
    iam_user::{self, Keys, Stored, User, UserPlan},
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
    /// A new resource's key from CCO where it runs, as the Go operator's
    /// (see `AwsSettings::go_compatible`).
    pub go_compatible: bool,
}

/// The CR's user `user`, whose one inline policy is `policy_name`, and
/// the Secret `secret_name` that keeps its key; or the Cloud Credential
/// Operator's CredentialsRequest `cco_request`.
pub struct UserSecrets<'a> {
    pub user: &'a str,
    pub policy_name: &'a str,
    pub secret_name: &'a str,
    pub cco_request: &'a str,
    /// Where IAM refuses this identity a user of its own, the key CCO
    /// mints instead, as the Go operator asked for a bucket's; `None`:
    /// such a refusal stands.
    pub mint: Option<Mint<'a>>,
}

/// What CCO is asked to grant (IAM statements), and whether it may be
/// asked now. Only before the resource is made: a resource that exists is
/// the CR's by its identifier alone where tags may not be read, which a
/// tenant could forge (docs/migration.md), so a key for it is only the one
/// asked for when this CR made it.
#[derive(Clone, Copy)]
pub struct Mint<'a> {
    pub statements: &'a Value,
    pub ask: bool,
}

/// Whose key the CR hands out, as observed.
pub enum Observed {
    /// The key CCO minted for a resource taken over from the Go operator
    /// (no Secret of ours), used as it is.
    Minted(AccessKey),
    /// CCO was asked for a key (IAM refuses this identity a user of its
    /// own) and has not filled its Secret yet.
    Minting,
    /// Ours: what the Secret holds, and the user as IAM shows it.
    Ours {
        stored: Option<BTreeMap<String, String>>,
        user: Option<User>,
    },
}

pub async fn observe(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    u: &UserSecrets<'_>,
) -> Result<Observed, ProviderError> {
    let stored = k.store.read(req, u.secret_name).await?;
    if stored.is_none()
        && let Some(key) = cco::read(k.store, req, u.cco_request).await?
    {
        return Ok(Observed::Minted(key));
    }
    if k.go_compatible
        && stored.is_none()
        && let Some(mint) = u.mint
        && (k.store)
            .request_credentials(req, u.cco_request, (mint.statements, mint.ask))
            .await?
    {
        return Ok(Observed::Minting);
    }
    let user = match iam_user::observe_user((c, k.users), req, u.user, u.policy_name).await {
        Ok(user) => user,
        Err(e) if stored.is_none() && crate::permissions::refused(&e) => {
            return minted_instead(k, req, u, e).await;
        }
        Err(e) => return Err(e),
    };
    Ok(Observed::Ours { stored, user })
}

/// IAM refused to show the CR's user and no key of ours was ever stored
/// (the Go operator's policy has no IAM actions): where CCO runs, its key
/// is asked for instead, and handed out once CCO has filled the Secret;
/// elsewhere the refusal stands.
async fn minted_instead(
    k: &KeySource<'_>,
    req: &ResourceRequest,
    u: &UserSecrets<'_>,
    refused: ProviderError,
) -> Result<Observed, ProviderError> {
    let Some(mint) = u.mint else {
        return Err(refused);
    };
    let asked = (mint.statements, mint.ask);
    match k
        .store
        .request_credentials(req, u.cco_request, asked)
        .await?
    {
        true => Ok(Observed::Minting),
        false if mint.ask => Err(refused),
        false => Err(refused.context(format!(
            "no key of {}/{}: neither Secret {} nor {} (the Cloud Credential Operator's) exists, and CCO is asked for one only before the resource is made",
            req.namespace, req.name, u.secret_name, u.cco_request
        ))),
    }
}

/// Waiting for CCO to fill the Secret of the CredentialsRequest `name`.
fn minting(req: &ResourceRequest, name: &str) -> ProviderError {
    ProviderError::transient(format!(
        "waiting for the Cloud Credential Operator to fill Secret {ns}/{name} for CredentialsRequest {ns}/{name} (this identity may not make IAM users); if it stays empty, that CredentialsRequest's status says why",
        ns = req.namespace
    ))
    .retry_in(CCO_POLL)
}

/// How often a key CCO is minting is looked for (the Go operator polled
/// every 5 s, `reconcileCredentials`).
const CCO_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// What [`act`] does, decided from what was observed: hand out the key
/// CCO minted, or carry out `plan` on our user and hand out our key.
pub enum KeyPlan {
    Minted(AccessKey),
    Minting,
    Ours {
        stored: Option<BTreeMap<String, String>>,
        user: Option<User>,
        plan: UserPlan,
    },
}

/// What the user needs (pure): nothing where the minted key is used.
pub fn decide(
    req: &ResourceRequest,
    u: &UserSecrets<'_>,
    policy: &Value,
    live: &Observed,
) -> KeyPlan {
    match live {
        Observed::Minted(key) => KeyPlan::Minted(key.clone()),
        Observed::Minting => KeyPlan::Minting,
        Observed::Ours { stored, user } => KeyPlan::Ours {
            stored: stored.clone(),
            user: user.clone(),
            plan: iam_user::decide_user(user.as_ref(), req, u.user, (u.policy_name, policy)),
        },
    }
}

/// Every change [`act`] would make to the user (pure): none where the
/// Cloud Credential Operator's key is used.
pub fn shown(u: &UserSecrets<'_>, plan: &KeyPlan) -> Vec<Change> {
    match plan {
        KeyPlan::Minted(_) | KeyPlan::Minting => Vec::new(),
        KeyPlan::Ours { user, plan, .. } => {
            iam_user::shown_user(plan, user.as_ref(), u.policy_name)
        }
    }
}

/// The key to hand out: the minted one, or, once the plan is carried out
/// on the user, ours (made when missing, rotated when due).
pub async fn act(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    (u, policy): (&UserSecrets<'_>, &Value),
    plan: KeyPlan,
) -> Result<Keys, ProviderError> {
    let (stored, user, plan) = match plan {
        KeyPlan::Minted(key) => return Ok(Keys::minted(key)),
        KeyPlan::Minting => return Err(minting(req, u.cco_request)),
        KeyPlan::Ours { stored, user, plan } => (stored, user, plan),
    };
    let (names, found) = ((u.user, u.policy_name, policy), user.is_some());
    let existed = iam_user::act_user((c, k.users), k.iam_users, req, names, (found, plan)).await?;
    let stored = Stored::new(stored.unwrap_or_default());
    let user_secret = (u.user, u.secret_name);
    // The clock is read here, once: what follows decides from it.
    let now = iam_user::unix_now();
    let looked = (stored, existed);
    iam_user::ensure_access_key(k.store, &c.iam, req, user_secret, looked, now).await
}

/// The key of the CR's user: [`observe`], [`decide`], [`act`].
pub async fn user_keys(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    (u, policy): (&UserSecrets<'_>, &Value),
) -> Result<Keys, ProviderError> {
    let live = observe(k, c, req, u).await?;
    let plan = decide(req, u, policy, &live);
    act(k, c, req, (u, policy), plan).await
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
    let minted = cco::read(k.store, req, cco_request).await?.is_some();
    let stored = k.store.read(req, secret_name).await?.is_some();
    // A key the Cloud Credential Operator minted, with no Secret of ours
    // (see `observe`), has no user of ours behind it: IAM is not asked,
    // which the Go operator's policy does not allow. A user of this name
    // that is not the CR's (another CR's, or made by someone else) stays,
    // with its keys.
    if stored || !minted {
        match iam_user::user_tags(iam, user).await {
            Ok(Some(tags)) if !crate::plan::ours(req, &tags) => {}
            Ok(_) => iam_user::delete_user(iam, user).await?,
            // No key was ever stored, and IAM may not even be read (the Go
            // operator's policy): such an identity made no user either, so
            // a CR refused before anything was made is deleted, not stuck.
            Err(e) if !stored && crate::permissions::refused(&e) => {
                warn!(
                    user,
                    "IAM refuses to say whether user {user} exists; no key of it was stored, so nothing is deleted there (if an earlier, wider policy made it, delete it by hand)"
                );
            }
            Err(e) => return Err(e),
        }
    }
    // A CredentialsRequest this operator made (IAM refused a user) is the
    // CR's (owner reference): the garbage collector deletes it with the CR,
    // filled or not, and CCO then removes its user.
    if minted {
        cco::delete(k.store, req, cco_request).await?;
    }
    k.store.delete(req, secret_name).await
}
