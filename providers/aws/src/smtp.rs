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
    At, RECHECK, cco,
    clients::Clients,
    errors::Answer,
    iam_user, keys,
    service::{Sections, Service, Tags},
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

/// What an SMTPCredentialSet's reconcile sees: the region, the sending
/// identity's verification (when the tier names one), and the key.
pub struct Observed {
    region: String,
    identity: Option<Condition>,
    keys: keys::Observed,
}

/// The CR's IAM user and where its key is kept.
struct Names {
    user: String,
    secret: String,
    cco_request: String,
}

impl Names {
    fn of(req: &ResourceRequest) -> Self {
        Names {
            user: user_name(&req.identifier),
            secret: credentials_secret(&req.name),
            cco_request: cco::ses_request(&req.identifier),
        }
    }

    fn secrets(&self) -> keys::UserSecrets<'_> {
        keys::UserSecrets {
            user: &self.user,
            policy_name: POLICY_NAME,
            secret_name: &self.secret,
            cco_request: &self.cco_request,
            // The Go operator has had no SES provider since v1.x: a new
            // set's user is this operator's own, or refused.
            mint: None,
        }
    }
}

/// SMTPCredentialSet as the provider's [`Service`]: an IAM user that may
/// only send through SES, and its key as SMTP credentials.
pub struct Ses;

#[async_trait::async_trait]
impl Service for Ses {
    type Create = CreateStrategy;
    /// The Go operator's SMTP strategy has no deleteStrategy.
    type Delete = ();
    type Live = Observed;
    type Plan = keys::KeyPlan;
    const RULES: IdentifierRules = IdentifierRules::IamUser;

    fn sections(&self, tier: &Tier) -> Result<Sections<CreateStrategy, ()>, ProviderError> {
        let (create, ignored) = parse_section(&tier.create)?;
        Ok(Sections {
            create,
            delete: (),
            ignored,
        })
    }

    fn pinned(&self, _: &Sections<CreateStrategy, ()>, _: bool) -> Option<String> {
        None
    }

    async fn tags_of(&self, c: &Clients, id: &str) -> Result<Option<Tags>, ProviderError> {
        iam_user::user_tags(&c.iam, &user_name(id)).await
    }

    async fn cloud_state(&self, c: &Clients, id: &str) -> Result<String, ProviderError> {
        let user = user_name(id);
        Ok(match iam_user::user_exists(&c.iam, &user).await? {
            true => format!("IAM user {user} (SES, {}) exists", c.region),
            false => format!("IAM user {user} does not exist"),
        })
    }

    async fn observe(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        s: &Sections<CreateStrategy, ()>,
    ) -> Result<Observed, ProviderError> {
        let identity = match &s.create.email_identity {
            Some(identity) => Some(identity_condition(&at.c.ses, identity).await?),
            None => None,
        };
        let names = Names::of(req);
        Ok(Observed {
            region: at.c.region.clone(),
            identity,
            keys: keys::observe(&at.keys, at.c, req, &names.secrets()).await?,
        })
    }

    fn decide(
        &self,
        req: &ResourceRequest,
        s: &Sections<CreateStrategy, ()>,
        live: &Observed,
    ) -> keys::KeyPlan {
        let policy = iam_user::ses_send_policy(s.create.email_identity.as_deref(), &live.region);
        keys::decide(req, &Names::of(req).secrets(), &policy, &live.keys)
    }

    async fn shown(
        &self,
        _: &At<'_>,
        req: &ResourceRequest,
        (_, plan): (&Observed, &keys::KeyPlan),
    ) -> Result<Vec<Change>, ProviderError> {
        Ok(keys::shown(&Names::of(req).secrets(), plan))
    }

    /// Taken over from the Go operator: its CCO-minted key stays; the
    /// password is derived from it with AWS's current (SigV4) algorithm.
    async fn act(
        &self,
        at: &At<'_>,
        (req, _): (&ResourceRequest, &Tier),
        s: &Sections<CreateStrategy, ()>,
        (live, plan): (Observed, keys::KeyPlan),
    ) -> Result<Provisioned, ProviderError> {
        let region = live.region.as_str();
        let policy = iam_user::ses_send_policy(s.create.email_identity.as_deref(), region);
        let names = Names::of(req);
        let u = (&names.secrets(), &policy);
        let keys = keys::act(&at.keys, at.c, req, u, plan).await?;
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
            conditions: live.identity.into_iter().collect(),
            ..Provisioned::new(PROVIDER, Outcome::Ready(details))
        }))
    }

    async fn remove(
        &self,
        at: &At<'_>,
        req: &ResourceRequest,
        _: &Sections<CreateStrategy, ()>,
    ) -> Result<Deletion, ProviderError> {
        let names = Names::of(req);
        let credentials = (names.secret.as_str(), names.cco_request.as_str());
        keys::delete_user_and_keys(&at.keys, &at.c.iam, req, &names.user, credentials).await?;
        Ok(Deletion::Done)
    }
}
