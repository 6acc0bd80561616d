//! An IAM user with one inline policy and one access key, for workloads
//! that need AWS credentials (blob storage). The secret key is returned
//! only at creation, so the caller stores it at once; deletion removes
//! keys, policies and the user, tolerating parts already gone.

use std::collections::BTreeMap;

use aws_sdk_iam::{
    Client, error::ProvideErrorMetadata, operation::list_access_keys::ListAccessKeysOutput,
};
use cro_provider_api::{Change, ProviderError, Provisioned, ResourceRequest, Timing};
use serde_json::{Value, json};

pub mod user;

pub use user::User;

use crate::{
    clients::Clients,
    credentials::{AccessKey, CredentialsStore},
    errors::{Answer, Created, created, not_yet_visible, taken},
    listing::Listing,
};

/// Sending mail through SES, nothing else: when the tier names its
/// `EmailIdentity` (an address or a domain), only through that identity
/// and only from that address or the domain's addresses (condition key
/// `ses:FromAddress`, see "Identity and access management in Amazon SES");
/// else through any identity of the account.
pub fn ses_send_policy(identity: Option<&str>, region: &str) -> Value {
    let actions = ["ses:SendRawEmail", "ses:SendEmail"];
    let Some(identity) = identity else {
        return json!({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]
        });
    };
    let from = match identity.contains('@') {
        true => identity.to_string(),
        false => format!("*@{identity}"),
    };
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": actions,
            "Resource": format!("arn:{}:ses:{region}:*:identity/{identity}", partition(region)),
            "Condition": {"StringLike": {"ses:FromAddress": from}}
        }]
    })
}

/// The ARN partition of `region` (China and GovCloud have their own).
fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

/// Read/write/list on one bucket and its objects, nothing else.
pub fn bucket_policy(bucket: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"],
             "Resource": [format!("arn:aws:s3:::{bucket}")]},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
             "Resource": [format!("arn:aws:s3:::{bucket}/*")]}
        ]
    })
}

/// IAM returns policy documents URL-encoded (RFC 3986).
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn same_policy(document: &str, want: &Value) -> bool {
    [document.to_string(), percent_decode(document)]
        .iter()
        .any(|d| serde_json::from_str::<Value>(d).is_ok_and(|v| &v == want))
}

/// Whether IAM user `user` exists.
pub async fn user_exists(iam: &Client, user: &str) -> Result<bool, ProviderError> {
    let found = iam.get_user().user_name(user).send().await;
    Ok(found.unless_missing(gone, "iam:GetUser", user)?.is_some())
}

/// IAM's answer that the user, or the part of it a call names, is not there.
fn gone<E: ProvideErrorMetadata>(e: &E) -> bool {
    e.code() == Some("NoSuchEntity")
}

/// Every user of the account with its tags and inline policies, by name:
/// GetAccountAuthorizationDetails, one call for up to 1,000 users.
pub async fn list_users(iam: &Client) -> Result<BTreeMap<String, User>, ProviderError> {
    let mut pages = iam
        .get_account_authorization_details()
        .filter(aws_sdk_iam::types::EntityType::User)
        .into_paginator()
        .send();
    let mut all = BTreeMap::new();
    while let Some(page) = pages.next().await {
        let page = page.named("iam:GetAccountAuthorizationDetails", "(all)")?;
        for u in page.user_detail_list() {
            let Some(name) = u.user_name() else { continue };
            let user = User {
                tags: u
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect(),
                policies: u
                    .user_policy_list()
                    .iter()
                    .filter_map(|p| {
                        Some((
                            p.policy_name()?.to_string(),
                            p.policy_document()?.to_string(),
                        ))
                    })
                    .collect(),
            };
            all.insert(name.to_string(), user);
        }
    }
    Ok(all)
}

/// User `user` with its tags and the inline policy `policy_name`, read on
/// its own (a recheck reads it from [`list_users`] instead).
async fn describe_user(
    iam: &Client,
    user: &str,
    policy_name: &str,
) -> Result<Option<User>, ProviderError> {
    if !user_exists(iam, user).await? {
        return Ok(None);
    }
    let call = iam
        .get_user_policy()
        .user_name(user)
        .policy_name(policy_name);
    let policy = call
        .send()
        .await
        .unless_missing(gone, "iam:GetUserPolicy", user)?;
    Ok(Some(User {
        tags: crate::tags::Tagging::tags(iam, user).await?,
        policies: policy
            .map(|out| (policy_name.to_string(), out.policy_document().to_string()))
            .into_iter()
            .collect(),
    }))
}

/// What this operator last saw of IAM users in one account, shared by
/// every BlobStorage and SMTPCredentialSet there (see [`crate::listing`]).
pub struct AccountCache {
    users: Listing<User>,
}

impl AccountCache {
    pub fn new(memory: &std::sync::Arc<cro_provider_api::Memory>) -> Self {
        AccountCache {
            users: Listing::new(memory),
        }
    }
}

/// The user `user`: from the account's listing on a recheck, else read on
/// its own.
pub async fn observe_user(
    (c, cache): (&Clients, &AccountCache),
    req: &ResourceRequest,
    user: &str,
    policy_name: &str,
) -> Result<Option<User>, ProviderError> {
    if let Some(max_age) = req.options.observed_within
        && let Some(live) = cache
            .users
            .get(user, max_age, || list_users(&c.iam))
            .await?
    {
        return Ok(Some(live));
    }
    let described = describe_user(&c.iam, user, policy_name).await;
    cache.users.described(user);
    described
}

/// What the CR's IAM user needs.
#[derive(Debug, PartialEq)]
pub enum UserPlan {
    /// Not this CR's: its keys are neither used, changed nor deleted.
    Refuse(String),
    Create,
    /// This CR's: add the tags it lacks; put the inline policy when it
    /// is not exactly the one wanted.
    Converge {
        tags: Vec<(String, String)>,
        put_policy: bool,
    },
}

/// The plan for the user `user` as it is (`None`: no such user), pure.
pub fn decide_user(
    live: Option<&User>,
    req: &ResourceRequest,
    user: &str,
    (policy_name, policy): (&str, &Value),
) -> UserPlan {
    let Some(live) = live else {
        return UserPlan::Create;
    };
    if !crate::plan::ours(req, &live.tags) {
        return UserPlan::Refuse(match crate::plan::another_crs(req, &live.tags) {
            Some(owner) => crate::plan::another_crs_message("IAM user", user, &owner),
            None => format!(
                "IAM user {user} exists and was not made by this cluster (it lacks this cluster's owner tag): its keys are neither used, changed nor deleted; give this CR another name or remove the user"
            ),
        });
    }
    let up_to_date =
        (live.policies.get(policy_name)).is_some_and(|document| same_policy(document, policy));
    UserPlan::Converge {
        tags: crate::tags::missing(&req.tags, &live.tags),
        put_policy: !up_to_date,
    }
}

/// What `plan` shows for `plan` of the user `live` (pure).
pub fn shown_user(plan: &UserPlan, live: Option<&User>, policy_name: &str) -> Vec<Change> {
    match (plan, live) {
        (UserPlan::Converge { tags, put_policy }, Some(live)) => (tags.iter())
            .map(|(k, v)| crate::plan::tag_change(k, v, &live.tags))
            .chain(put_policy.then(|| {
                let field = format!("inline policy {policy_name}");
                crate::plan::change(
                    &field,
                    "other or absent",
                    "the operator's",
                    Timing::Now,
                    false,
                )
            }))
            .collect(),
        (UserPlan::Refuse(why), _) => vec![crate::plan::reported("IAMUser", "there", why)],
        _ => vec![crate::plan::missing_resource("IAMUser", None)],
    }
}

/// Carries out `plan`, what [`decide_user`] said of the user (`existed`:
/// whether it was found): it exists, tagged, with exactly `policy` as its
/// inline policy; whether it existed already.
pub async fn act_user(
    (c, cache): (&Clients, &AccountCache),
    placed: &crate::IamUsers,
    req: &ResourceRequest,
    (user, policy_name, policy): (&str, &str, &Value),
    (mut existed, mut plan): (bool, UserPlan),
) -> Result<bool, ProviderError> {
    let iam = &c.iam;
    if plan == UserPlan::Create {
        let all: Vec<(String, String)> = req.creation_tags().into_iter().collect();
        let create = iam
            .create_user()
            .user_name(user)
            .path(&placed.path)
            .set_permissions_boundary(placed.permissions_boundary.clone())
            .set_tags(Some(crate::tags::iam_tags(&all)?))
            .send();
        let sent = cache.users.writing(user, create).await;
        plan = match created(sent, "iam:CreateUser", user)? {
            Created::Now => UserPlan::Converge {
                tags: Vec::new(),
                put_policy: true,
            },
            Created::Already => {
                existed = true;
                let found = made_for_it(iam, req, user, policy_name).await?;
                decide_user(Some(&found), req, user, (policy_name, policy))
            }
        };
    }
    let (tags, put_policy) = match plan {
        UserPlan::Refuse(why) => return Err(ProviderError::permanent(why)),
        UserPlan::Converge { tags, put_policy } => (tags, put_policy),
        // Made above, or found made for this CR.
        UserPlan::Create => (Vec::new(), true),
    };
    if !tags.is_empty() {
        let tag = crate::tags::Tagging::add_tags(iam, user, &tags);
        cache.users.writing(user, tag).await?;
    }
    if put_policy {
        let put = iam
            .put_user_policy()
            .user_name(user)
            .policy_name(policy_name)
            .policy_document(policy.to_string())
            .send();
        (cache.users.writing(user, put).await).named("iam:PutUserPolicy", user)?;
    }
    Ok(existed)
}

/// After CreateUser met a user of its name (a retry whose first attempt's
/// answer was lost): the user, when a fresh look finds it made for this
/// CR; an error says what else.
async fn made_for_it(
    iam: &Client,
    req: &ResourceRequest,
    user: &str,
    policy_name: &str,
) -> Result<User, ProviderError> {
    match describe_user(iam, user, policy_name).await? {
        Some(live) if crate::tags::made_for(&req.tag_keys, &req.creation_tags(), &live.tags) => {
            Ok(live)
        }
        Some(_) => Err(taken("IAM user", user)),
        None => Err(not_yet_visible("IAM user", user)),
    }
}

/// Keys of the credentials Secret besides the key itself: the rotation
/// token the key answers, and the key it replaced with the time (Unix
/// seconds) until which that one keeps working.
const ROTATION: &str = "rotation";
const PREVIOUS_KEY: &str = "previousAccessKeyID";
const PREVIOUS_UNTIL: &str = "previousAccessKeyValidUntil";

/// The user's key as the CR publishes it, and what a rotation left.
#[derive(Debug)]
pub struct Keys {
    pub key: AccessKey,
    /// The rotation token the key answers.
    pub rotation: Option<String>,
    /// While the replaced key still works: how long until it is due for
    /// deletion (look again then).
    pub previous_due_in: Option<std::time::Duration>,
}

impl Keys {
    /// A key this operator does not manage (the Cloud Credential
    /// Operator's, taken over from the Go operator): never rotated here.
    pub fn minted(key: AccessKey) -> Self {
        Keys {
            key,
            rotation: None,
            previous_due_in: None,
        }
    }

    /// The provider's report with these keys: the rotation they answer, and
    /// a look again when the replaced key is due for deletion.
    pub fn report(&self, mut report: Provisioned) -> Provisioned {
        report.rotated = self.rotation.clone();
        if let Some(wait) = self.previous_due_in {
            report.recheck_after = Some(report.recheck_after.map_or(wait, |r| r.min(wait)));
        }
        report
    }
}

/// How long from `now` until a replaced key that works `until` is due
/// for deletion (Unix seconds; a second past its end, so the look finds
/// it over).
fn due_in(until: i64, now: i64) -> std::time::Duration {
    std::time::Duration::from_secs(u64::try_from(until.saturating_sub(now)).unwrap_or(0) + 1)
}

/// The clock, in Unix seconds, as the Secret records a replaced key's
/// grace period.
pub fn unix_now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The Secret's data, and what it says of the user's keys.
pub struct Stored {
    data: BTreeMap<String, String>,
    key: Option<AccessKey>,
    /// The key a rotation replaced, and until when (Unix seconds) it works.
    previous: Option<(String, i64)>,
}

impl Stored {
    pub fn new(data: BTreeMap<String, String>) -> Self {
        let key = match (data.get("accessKeyID"), data.get("secretAccessKey")) {
            (Some(id), Some(secret)) => Some(AccessKey {
                id: id.clone(),
                secret: secret.clone(),
            }),
            _ => None,
        };
        let previous = (data.get(PREVIOUS_KEY).cloned())
            .zip(data.get(PREVIOUS_UNTIL).and_then(|u| u.parse::<i64>().ok()));
        Stored {
            data,
            key,
            previous,
        }
    }

    /// The replaced key while its grace period lasts.
    fn previous_working(&self, now: i64) -> Option<&str> {
        (self.previous.as_ref())
            .filter(|(_, until)| now < *until)
            .map(|(id, _)| id.as_str())
    }
}

/// The user's access key as stored: a new key is created (and stored at
/// once, before anything else can fail) when the stored one is missing or
/// no longer exists, or a rotation asks for one; the key a rotation
/// replaced keeps working for the grace period. Keys not stored are
/// removed, so no credential leaks. On a first look after a restart, a
/// stored key of a user that was there is trusted until the next recheck
/// (IAM lists keys one user at a time).
pub async fn ensure_access_key(
    store: &dyn CredentialsStore,
    iam: &Client,
    req: &ResourceRequest,
    (user, secret_name): (&str, &str),
    (mut stored, user_existed): (Stored, bool),
    now: i64,
) -> Result<Keys, ProviderError> {
    let rotate = (req.options.rotate_credentials.as_ref())
        .filter(|token| stored.data.get(ROTATION) != Some(*token));
    let previous_over = stored.previous.as_ref().is_some_and(|(_, u)| now >= *u);
    let previous = stored.previous_working(now);
    let stored_id = stored.key.as_ref().map(|k| k.id.as_str());
    let first_look = req.options.defer_unbatched;
    let act = rotate.is_some() || previous_over;
    let live = match trusted_keys(stored_id, previous, first_look && user_existed && !act) {
        Some(trusted) => trusted,
        None => {
            let listed = iam.list_access_keys().user_name(user).send().await;
            key_ids(&listed.named("iam:ListAccessKeys", user)?)
        }
    };
    let plan = decide_key(stored_id, previous, rotate.is_some(), &live);
    // A rotation keeps the stored key through its grace period.
    let keep: Vec<String> = match plan {
        KeyPlan::Rotate { .. } => stored_id.map(str::to_string).into_iter().collect(),
        _ => Vec::new(),
    };
    delete_access_keys(iam, user, plan.delete()).await?;
    let data = &mut stored.data;
    let key = match (&plan, stored.key) {
        (KeyPlan::Keep { .. }, Some(key)) => {
            // The replaced key's grace period is over (it was deleted
            // above if it still existed): forget it.
            if previous_over {
                data.remove(PREVIOUS_KEY);
                data.remove(PREVIOUS_UNTIL);
                store.write(req, secret_name, data).await?;
            }
            key
        }
        (plan, old) => {
            let key = create_access_key_looking(iam, user, &keep).await?;
            let rotation = rotate
                .zip(old)
                .filter(|_| matches!(plan, KeyPlan::Rotate { .. }));
            record_new_key(data, &key, rotation, now, req.options.rotation_grace);
            store.write(req, secret_name, data).await?;
            key
        }
    };
    Ok(Keys {
        key,
        rotation: data.get(ROTATION).cloned(),
        previous_due_in: (data.get(PREVIOUS_UNTIL))
            .and_then(|u| u.parse().ok())
            .map(|until| due_in(until, now)),
    })
}

/// The user's keys as the Secret records them, when they may be trusted
/// without listing them (pure): `trust` (a first look after a start at a
/// user that was there, with no rotation or expired key to act on) and a
/// key stored. `None`: list them.
fn trusted_keys(stored: Option<&str>, previous: Option<&str>, trust: bool) -> Option<Vec<String>> {
    let stored = stored.filter(|_| trust)?;
    Some(
        [Some(stored), previous]
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect(),
    )
}

/// The Secret's data for a new key; after a rotation (its token and the
/// key it replaced), the replaced key and how long it keeps working.
fn record_new_key(
    data: &mut BTreeMap<String, String>,
    key: &AccessKey,
    rotation: Option<(&String, AccessKey)>,
    now: i64,
    grace: std::time::Duration,
) {
    data.insert("accessKeyID".into(), key.id.clone());
    data.insert("secretAccessKey".into(), key.secret.clone());
    match rotation {
        Some((token, old)) => {
            let grace = i64::try_from(grace.as_secs()).unwrap_or(i64::MAX);
            data.insert(ROTATION.into(), token.clone());
            data.insert(PREVIOUS_KEY.into(), old.id);
            data.insert(PREVIOUS_UNTIL.into(), now.saturating_add(grace).to_string());
        }
        None => {
            data.remove(PREVIOUS_KEY);
            data.remove(PREVIOUS_UNTIL);
        }
    }
}

/// What to do about a user's access keys.
#[derive(Debug, PartialEq)]
pub enum KeyPlan {
    /// The stored key is live: keep it (and the replaced key still in its
    /// grace period), delete the others.
    Keep { delete: Vec<String> },
    /// A rotation: a second key, the stored one kept for the grace period;
    /// any other goes first (IAM allows two keys per user).
    Rotate { delete: Vec<String> },
    /// No usable key (none stored, or the stored one is gone): delete every
    /// live key first (their secrets were never stored, and IAM allows only
    /// two per user), then create one and store it at once.
    Replace { delete: Vec<String> },
}

impl KeyPlan {
    fn delete(&self) -> &[String] {
        match self {
            KeyPlan::Keep { delete } | KeyPlan::Rotate { delete } | KeyPlan::Replace { delete } => {
                delete
            }
        }
    }
}

/// The plan for a user's keys (pure): `stored` is the published key,
/// `previous` the one a rotation replaced while its grace period lasts.
pub fn decide_key(
    stored: Option<&str>,
    previous: Option<&str>,
    rotate: bool,
    live: &[String],
) -> KeyPlan {
    let others = |keep: &[Option<&str>]| {
        live.iter()
            .filter(|k| !keep.contains(&Some(k.as_str())))
            .cloned()
            .collect()
    };
    match stored {
        Some(id) if live.iter().any(|k| k == id) => match rotate {
            true => KeyPlan::Rotate {
                delete: others(&[Some(id)]),
            },
            false => KeyPlan::Keep {
                delete: others(&[Some(id), previous]),
            },
        },
        _ => KeyPlan::Replace {
            delete: live.to_vec(),
        },
    }
}

/// Deletes `keys`; a key already gone is fine.
async fn delete_access_keys(
    iam: &Client,
    user: &str,
    keys: &[String],
) -> Result<(), ProviderError> {
    for key in keys {
        let call = iam.delete_access_key().user_name(user).access_key_id(key);
        call.send()
            .await
            .unless_missing(gone, "iam:DeleteAccessKey", user)?;
    }
    Ok(())
}

fn key_ids(listed: &ListAccessKeysOutput) -> Vec<String> {
    (listed.access_key_metadata().iter())
        .filter_map(|k| k.access_key_id().map(str::to_string))
        .collect()
}

/// A new access key of `user`. Sent once, never retried by the SDK: a
/// retry after a lost answer would make a second key (keys have no name
/// to meet), and IAM allows two. The next reconcile lists the user's keys
/// and deletes any that no Secret holds.
pub async fn create_access_key(iam: &Client, user: &str) -> Result<AccessKey, ProviderError> {
    let once = aws_sdk_iam::config::Builder::default()
        .retry_config(aws_sdk_iam::config::retry::RetryConfig::disabled());
    let call = iam.create_access_key().user_name(user).customize();
    let out = call.config_override(once).send().await;
    let out = out.named("iam:CreateAccessKey", user)?;
    let key = out.access_key().ok_or_else(|| {
        ProviderError::transient(format!("iam:CreateAccessKey {user}: no key returned"))
    })?;
    Ok(AccessKey {
        id: key.access_key_id().to_string(),
        secret: key.secret_access_key().to_string(),
    })
}

/// Lost answers of CreateAccessKey looked after within one reconcile: at
/// most this many tries.
const KEY_TRIES: usize = 3;

/// A new access key of `user`. After an attempt whose answer was lost, the
/// user's keys are listed and any the lost call may have made (every key
/// but `keep`: none of them is in a Secret) deleted before trying again,
/// so no key is orphaned and IAM's two-key limit is never met; the CR need
/// not wait out a reconcile backoff for each lost answer.
async fn create_access_key_looking(
    iam: &Client,
    user: &str,
    keep: &[String],
) -> Result<AccessKey, ProviderError> {
    let mut tries = 1;
    loop {
        match create_access_key(iam, user).await {
            Err(e) if e.kind() == cro_provider_api::ErrorKind::Transient && tries < KEY_TRIES => {
                tries += 1;
                let listed = iam.list_access_keys().user_name(user).send().await;
                let live = key_ids(&listed.named("iam:ListAccessKeys", user)?);
                let made: Vec<String> = live.into_iter().filter(|k| !keep.contains(k)).collect();
                delete_access_keys(iam, user, &made).await?;
            }
            answered => return answered,
        }
    }
}

/// The tags of user `user`, if it exists.
pub async fn user_tags(
    iam: &Client,
    user: &str,
) -> Result<Option<BTreeMap<String, String>>, ProviderError> {
    let tags = iam.list_user_tags().user_name(user).send().await;
    let tags = tags.unless_missing(gone, "iam:ListUserTags", user)?;
    Ok(tags.map(|out| crate::tags::of_iam(out.tags())))
}

/// Deletes keys, inline policies and the user; anything already gone is fine.
pub async fn delete_user(iam: &Client, user: &str) -> Result<(), ProviderError> {
    let listed = iam.list_access_keys().user_name(user).send().await;
    let Some(listed) = listed.unless_missing(gone, "iam:ListAccessKeys", user)? else {
        return Ok(());
    };
    delete_access_keys(iam, user, &key_ids(&listed)).await?;
    // A managed policy attached by hand would make DeleteUser fail.
    let attached = iam
        .list_attached_user_policies()
        .user_name(user)
        .send()
        .await;
    let attached = attached.named("iam:ListAttachedUserPolicies", user)?;
    for arn in attached
        .attached_policies()
        .iter()
        .filter_map(|a| a.policy_arn())
    {
        let call = iam.detach_user_policy().user_name(user).policy_arn(arn);
        call.send()
            .await
            .unless_missing(gone, "iam:DetachUserPolicy", user)?;
    }
    let inline = iam.list_user_policies().user_name(user).send().await;
    for policy in inline.named("iam:ListUserPolicies", user)?.policy_names() {
        let call = iam.delete_user_policy().user_name(user).policy_name(policy);
        call.send()
            .await
            .unless_missing(gone, "iam:DeleteUserPolicy", user)?;
    }
    let deleted = iam.delete_user().user_name(user).send().await;
    deleted.unless_missing(gone, "iam:DeleteUser", user)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotation_keeps_the_replaced_key_for_its_grace_and_looks_again_after_it() {
        let (now, grace) = (1_800_000_000, std::time::Duration::from_secs(3600));
        let mut data = BTreeMap::new();
        let old = AccessKey {
            id: "OLD".into(),
            secret: "s0".into(),
        };
        let new = AccessKey {
            id: "NEW".into(),
            secret: "s1".into(),
        };
        let token = "t1".to_string();
        record_new_key(&mut data, &new, Some((&token, old)), now, grace);
        let stored = Stored::new(data.clone());
        assert_eq!(stored.previous_working(now + 3599), Some("OLD"));
        assert_eq!(stored.previous_working(now + 3600), None, "over at its end");
        assert_eq!(
            due_in(now + 3600, now),
            std::time::Duration::from_secs(3601)
        );
        assert_eq!(
            due_in(now, now + 10),
            std::time::Duration::from_secs(1),
            "overdue: at once"
        );
        // A later key without a rotation forgets the replaced one.
        record_new_key(&mut data, &new, None, now + 4000, grace);
        assert!(!data.contains_key(PREVIOUS_KEY) && !data.contains_key(PREVIOUS_UNTIL));
    }

    #[test]
    fn stored_keys_are_trusted_only_on_a_quiet_first_look() {
        let ids = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        // Row: (stored key, previous key in its grace period, trust, trusted keys)
        let rows = [
            (Some("A"), None, true, ids(&["A"])),
            (Some("A"), Some("P"), true, ids(&["A", "P"])),
            (Some("A"), None, false, None),
            (None, None, true, None),
            (None, Some("P"), true, None),
        ];
        for (stored, previous, trust, want) in rows {
            assert_eq!(
                trusted_keys(stored, previous, trust),
                want,
                "{stored:?} {previous:?} {trust}"
            );
        }
    }

    #[test]
    fn keys_are_kept_rotated_replaced_or_cleaned_up() {
        let live = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let keep = |ids: &[&str]| KeyPlan::Keep { delete: live(ids) };
        let rotate = |ids: &[&str]| KeyPlan::Rotate { delete: live(ids) };
        let replace = |ids: &[&str]| KeyPlan::Replace { delete: live(ids) };
        // Row: (stored key, previous key in its grace period, rotate, live keys, plan)
        let rows = [
            (Some("A"), None, false, live(&["A"]), keep(&[])),
            (Some("A"), None, false, live(&["A", "B"]), keep(&["B"])),
            (Some("A"), None, false, live(&["B"]), replace(&["B"])),
            (Some("A"), None, false, live(&[]), replace(&[])),
            (None, None, false, live(&["B", "C"]), replace(&["B", "C"])),
            (None, None, false, live(&[]), replace(&[])),
            // A rotation keeps the stored key for the grace period and
            // makes room for the new one.
            (Some("A"), None, true, live(&["A"]), rotate(&[])),
            (
                Some("A"),
                Some("P"),
                true,
                live(&["A", "P"]),
                rotate(&["P"]),
            ),
            // During the grace period both keys stay; after it (no
            // previous any more) the replaced key goes.
            (Some("N"), Some("A"), false, live(&["N", "A"]), keep(&[])),
            (Some("N"), None, false, live(&["N", "A"]), keep(&["A"])),
            // A key created by an interrupted rotation and never stored goes.
            (
                Some("N"),
                Some("A"),
                false,
                live(&["N", "A", "X"]),
                keep(&["X"]),
            ),
            // Rotating without a usable key is a replacement.
            (Some("A"), None, true, live(&["B"]), replace(&["B"])),
        ];
        for (stored, previous, rotating, live, plan) in rows {
            assert_eq!(
                decide_key(stored, previous, rotating, &live),
                plan,
                "{stored:?} {previous:?} {rotating} {live:?}"
            );
        }
    }

    #[test]
    fn a_user_is_made_converged_or_refused_by_its_tags() {
        let mut req =
            ResourceRequest::offline(cro_provider_api::ResourceKind::BlobStorage, json!({}));
        req.owner_tag = ("clusterID".into(), "c1".into());
        req.tags = BTreeMap::from([
            ("clusterID".to_string(), "c1".to_string()),
            ("k".to_string(), "v".to_string()),
        ]);
        let policy = bucket_policy("b1");
        let decide = |live: Option<&User>| decide_user(live, &req, "b1", ("p", &policy));
        assert_eq!(decide(None), UserPlan::Create);
        let stranger = User::default();
        assert!(
            matches!(decide(Some(&stranger)), UserPlan::Refuse(m) if m.contains("not made by this cluster"))
        );
        let ours = User {
            tags: BTreeMap::from([("clusterID".to_string(), "c1".to_string())]),
            policies: BTreeMap::from([("p".to_string(), policy.to_string())]),
        };
        let converge = |tags: &[(&str, &str)], put_policy| UserPlan::Converge {
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            put_policy,
        };
        assert_eq!(decide(Some(&ours)), converge(&[("k", "v")], false));
        let widened = User {
            policies: BTreeMap::from([("p".to_string(), bucket_policy("*").to_string())]),
            ..ours.clone()
        };
        assert_eq!(
            decide(Some(&widened)),
            converge(&[("k", "v")], true),
            "a changed policy is put back"
        );
        // `plan` shows the same decisions.
        let fields = |live: Option<&User>| {
            (shown_user(&decide(live), live, "p").into_iter())
                .map(|c| (c.field, c.current, c.desired))
                .collect::<Vec<_>>()
        };
        let change = |f: &str, c: &str, d: &str| (f.to_string(), c.to_string(), d.to_string());
        assert_eq!(fields(None), [change("IAMUser", "absent", "created")]);
        assert_eq!(fields(Some(&ours)), [change("tag k", "absent", "v")]);
        assert_eq!(
            fields(Some(&widened)),
            [
                change("tag k", "absent", "v"),
                change("inline policy p", "other or absent", "the operator's")
            ]
        );
        assert!(matches!(&fields(Some(&stranger))[..], [(_, _, d)] if d == "reported"));
    }

    #[test]
    fn policy_is_scoped_to_one_bucket() {
        let p = bucket_policy("b1").to_string();
        assert!(p.contains("arn:aws:s3:::b1\"") && p.contains("arn:aws:s3:::b1/*"));
        assert!(!p.contains("s3:*") && !p.contains("\"*\""));
    }

    #[test]
    fn ses_sending_is_scoped_to_the_tiers_identity_and_its_from_addresses() {
        let statement = |identity: Option<&str>, region: &str| {
            ses_send_policy(identity, region)["Statement"][0].clone()
        };
        let address = statement(Some("noreply@example.com"), "eu-west-1");
        assert_eq!(
            address["Resource"],
            "arn:aws:ses:eu-west-1:*:identity/noreply@example.com"
        );
        assert_eq!(
            address["Condition"]["StringLike"]["ses:FromAddress"],
            "noreply@example.com"
        );
        let domain = statement(Some("example.com"), "cn-north-1");
        assert_eq!(
            domain["Resource"],
            "arn:aws-cn:ses:cn-north-1:*:identity/example.com"
        );
        assert_eq!(
            domain["Condition"]["StringLike"]["ses:FromAddress"],
            "*@example.com"
        );
        // No identity in the tier: any of the account's, as before.
        assert_eq!(statement(None, "eu-west-1")["Resource"], "*");
        for s in [address, domain] {
            assert_eq!(s["Action"], json!(["ses:SendRawEmail", "ses:SendEmail"]));
        }
    }

    #[test]
    fn url_encoded_documents_compare_equal() {
        let want = bucket_policy("b1");
        let encoded: String = want
            .to_string()
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        assert!(same_policy(&encoded, &want));
        assert!(same_policy(&want.to_string(), &want));
        assert!(!same_policy(&bucket_policy("b2").to_string(), &want));
    }
}
