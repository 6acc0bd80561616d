//! SMTPCredentialSet as SES SMTP credentials: an IAM user that may only
//! send mail through SES, its access key (kept in
//! `<name>-aws-ses-credentials`), and the SMTP password derived from it for
//! the region. Delete removes key, policy and user.

use std::collections::BTreeMap;

use aws_sdk_sesv2::operation::get_email_identity::GetEmailIdentityError;
use cro_provider_api::{
    Change, Condition, ConditionType, ConnectionDetails, Deletion, IdentifierRules, Outcome,
    ProviderError, Provisioned, ResourceRequest,
};

use crate::{
    RECHECK, cco,
    clients::Clients,
    errors::Answer,
    iam_user,
    keys::{self, KeySource},
    smtp_password::smtp_password,
    strategy::{Tier, TypedSection, parse_section},
};

/// createStrategy: the SES identity (address or domain) mail is sent
/// from, whose verification state is reported (not created: verifying a
/// domain needs DNS records a person adds).
#[derive(Clone, Debug, Default, serde::Deserialize, PartialEq)]
pub struct CreateStrategy {
    #[serde(rename = "EmailIdentity")]
    pub email_identity: Option<String>,
}

impl TypedSection for CreateStrategy {
    const NAME: &'static str = "createStrategy";
    const API: &'static str = "the SMTP credentials strategy";
}

async fn identity_condition(
    ses: &aws_sdk_sesv2::Client,
    identity: &str,
) -> Result<Condition, ProviderError> {
    let found = ses
        .get_email_identity()
        .email_identity(identity)
        .send()
        .await;
    let missing = |e: &GetEmailIdentityError| e.is_not_found_exception();
    let found = found.unless_missing(missing, "sesv2:GetEmailIdentity", identity)?;
    let (status, reason, message) = match found {
        Some(out) if out.verified_for_sending_status() => (
            true,
            "Verified",
            format!("SES identity {identity} is verified for sending"),
        ),
        Some(out) => (
            false,
            "NotVerified",
            format!(
                "SES identity {identity} is not verified for sending (status {}); complete its verification in SES",
                out.verification_status()
                    .map(|s| s.as_str())
                    .unwrap_or("unknown")
            ),
        ),
        None => (
            false,
            "NotFound",
            format!(
                "SES identity {identity} does not exist in this region; create and verify it in SES"
            ),
        ),
    };
    Ok(Condition {
        type_: ConditionType::SendingIdentityVerified,
        status,
        reason: reason.into(),
        message,
    })
}

pub const PROVIDER: &str = "aws-ses";
const POLICY_NAME: &str = "cro-ses-send";

pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-ses-credentials")
}

/// The IAM user of the SMTPCredentialSet with `identifier`. Not the
/// identifier itself: a BlobStorage's user is named after its bucket, the
/// same identifier, and two CRs of one name sharing a user would delete
/// each other's access keys at every reconcile.
pub fn user_name(identifier: &str) -> String {
    IdentifierRules::IamUser.conform(&format!("{identifier}-ses"))
}

pub fn smtp_host(region: &str) -> String {
    format!("email-smtp.{region}.amazonaws.com")
}

pub async fn reconcile(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Provisioned, ProviderError> {
    let strategy = parse_section::<CreateStrategy>(&tier.create)?;
    let region = c.region.as_str();
    let user = &user_name(&req.identifier);
    let mut conditions = Vec::new();
    let identity = strategy.email_identity;
    if let Some(identity) = &identity {
        conditions.push(identity_condition(&c.ses, identity).await?);
    }
    // Taken over from the Go operator: its CCO-minted key stays; the
    // password is derived from it with AWS's current (SigV4) algorithm.
    let policy = iam_user::ses_send_policy(identity.as_deref(), region);
    let keys = keys::user_keys(
        k,
        c,
        req,
        (user, POLICY_NAME, &policy),
        (
            &credentials_secret(&req.name),
            &cco::ses_request(&req.identifier),
        ),
    )
    .await?;
    let key = &keys.key;
    let details = ConnectionDetails(BTreeMap::from([
        ("username".into(), key.id.clone()),
        ("password".into(), smtp_password(&key.secret, region)),
        ("host".into(), smtp_host(region)),
        ("port".into(), "587".into()),
        ("tls".into(), "true".into()),
    ]));
    Ok(keys.report(Provisioned {
        identifier: Some(req.identifier.clone()),
        recheck_after: Some(RECHECK),
        conditions,
        ..Provisioned::new(PROVIDER, Outcome::Ready(details))
    }))
}

/// Every change `reconcile` would make, from read-only calls.
pub async fn plan(
    k: &KeySource<'_>,
    c: &Clients,
    req: &ResourceRequest,
    tier: &Tier,
) -> Result<Vec<Change>, ProviderError> {
    let strategy = parse_section::<CreateStrategy>(&tier.create)?;
    let policy = iam_user::ses_send_policy(strategy.email_identity.as_deref(), &c.region);
    let user = &user_name(&req.identifier);
    let credentials = (
        credentials_secret(&req.name),
        cco::ses_request(&req.identifier),
    );
    let secrets = (credentials.0.as_str(), credentials.1.as_str());
    keys::plan_user(k, c, req, (user, POLICY_NAME, &policy), secrets).await
}

pub async fn delete(
    k: &KeySource<'_>,
    iam: &aws_sdk_iam::Client,
    req: &ResourceRequest,
) -> Result<Deletion, ProviderError> {
    let credentials: (&str, &str) = (
        &credentials_secret(&req.name),
        &cco::ses_request(&req.identifier),
    );
    keys::delete_user_and_keys(k, iam, req, &user_name(&req.identifier), credentials).await?;
    Ok(Deletion::Done)
}
