//! SMTPCredentialSet as SES SMTP credentials: an IAM user that may only
//! send mail through SES, its access key (kept in
//! `<name>-aws-ses-credentials`), and the SMTP password derived from it for
//! the region. Delete removes key, policy and user.

use std::collections::BTreeMap;

use cro_provider_api::{
    ConnectionDetails, Deletion, Outcome, ProviderError, Provisioned, ResourceRequest,
};

use crate::{AwsProvider, RECHECK, credentials, iam_user, smtp_password::smtp_password};

pub const PROVIDER: &str = "aws-ses";
const POLICY_NAME: &str = "cro-ses-send";

pub fn credentials_secret(name: &str) -> String {
    format!("{name}-aws-ses-credentials")
}

pub fn smtp_host(region: &str) -> String {
    format!("email-smtp.{region}.amazonaws.com")
}

pub async fn reconcile(
    p: &AwsProvider,
    iam: &aws_sdk_iam::Client,
    req: &ResourceRequest,
    region: &str,
) -> Result<Provisioned, ProviderError> {
    let user = req.identifier.as_str();
    iam_user::ensure_user(
        p,
        iam,
        user,
        &req.tags,
        POLICY_NAME,
        &iam_user::ses_send_policy(),
    )
    .await?;
    let key =
        iam_user::ensure_access_key(p, iam, req, user, &credentials_secret(&req.name)).await?;
    Ok(Provisioned {
        outcome: Outcome::Ready(ConnectionDetails(BTreeMap::from([
            ("username".into(), key.id.clone()),
            ("password".into(), smtp_password(&key.secret, region)),
            ("host".into(), smtp_host(region)),
            ("port".into(), "587".into()),
            ("tls".into(), "true".into()),
        ]))),
        provider: PROVIDER.into(),
        version: None,
        identifier: Some(user.to_string()),
        recheck_after: Some(RECHECK),
    })
}

pub async fn delete(
    p: &AwsProvider,
    iam: &aws_sdk_iam::Client,
    req: &ResourceRequest,
) -> Result<Deletion, ProviderError> {
    iam_user::delete_user(p, iam, &req.identifier).await?;
    credentials::delete(&p.kube, req, &credentials_secret(&req.name)).await?;
    Ok(Deletion::Done)
}
