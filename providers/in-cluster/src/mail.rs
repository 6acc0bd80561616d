//! An in-cluster SMTPCredentialSet: a mail server of its own (Mailpit, a
//! Deployment with a Service and a PVC, as a Postgres has) that asks for
//! the Secret's password and keeps what it is sent for a person to read,
//! relaying it to a smarthost when the tier says (see `relay`).

use cro_provider_api::{ConnectionDetails, Outcome, ProviderError, Provisioned, ResourceRequest};
use k8s_openapi::api::core::v1::Secret;

use crate::{
    InClusterProvider, Layout, credentials, provisioned, relay,
    strategy::{Overrides, Serving},
    workload,
};

const PROVIDER: &str = "openshift-smtp-template";

impl InClusterProvider {
    pub(crate) async fn smtp(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let overrides = crate::strategy::parse(&req.strategy)?;
        if overrides.mail == Serving::Placeholder || self.keeps_placeholder(req).await? {
            return Ok(placeholder());
        }
        self.layout_to_make(req).await?;
        let login = self.relay_login(&overrides).await?;
        let secrets = self.api::<Secret>(req);
        let data = &overrides.secret_data;
        let password = credentials::mail_server(&secrets, req, data, login.as_ref()).await?;
        let isolation = self.isolation(req).await?;
        let user = self.pod_user(req).await?;
        let image = &self.images.mail_server;
        let desired =
            workload::mail_server(req, &overrides, image, isolation, &user, login.as_ref())?;
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(req, &desired, Layout::Ours).await?;
        let port = workload::MAIL_SERVER_PORT.to_string();
        let outcome = match outcome {
            Outcome::Ready(()) => Outcome::Ready(ConnectionDetails::of(&[
                ("host", &self.host(req)),
                ("port", &port),
                ("username", workload::MAIL_USER),
                ("password", &password),
                // Plain SMTP inside the cluster: the server has no
                // certificate a client would trust.
                ("tls", "false"),
            ])),
            Outcome::InProgress(r) => Outcome::InProgress(r),
            Outcome::Failed(r) => Outcome::Failed(r),
        };
        Ok(Provisioned {
            pending,
            // The operator does not watch the operator namespace's Secrets:
            // a rotated smarthost login is read again at this pace.
            recheck_after: login.map(|_| relay::LOGIN_RECHECK),
            ..provisioned(PROVIDER, outcome, version)
        })
    }
}

impl InClusterProvider {
    /// The smarthost's login the tier's relay names, if it names one.
    pub(crate) async fn relay_login(
        &self,
        overrides: &Overrides,
    ) -> Result<Option<relay::Login>, ProviderError> {
        let relay = overrides.relay.as_ref();
        let Some(name) = relay.and_then(|r| r.credentials_secret.as_deref()) else {
            return Ok(None);
        };
        let operator_namespace = self.isolation.operator_namespace.as_deref();
        Ok(Some(
            relay::login(&self.client, operator_namespace, name).await?,
        ))
    }
}

/// The Go operator's Secret of an in-cluster SMTPCredentialSet: its keys,
/// for a person to fill in.
fn placeholder() -> Provisioned {
    let outcome = Outcome::Ready(ConnectionDetails::of(&[
        ("username", ""),
        ("password", ""),
        ("host", ""),
        ("port", "587"),
        ("tls", "true"),
    ]));
    provisioned(PROVIDER, outcome, None)
}
