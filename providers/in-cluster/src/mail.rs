//! An in-cluster SMTPCredentialSet: a mail server of its own (Mailpit, a
//! Deployment with a Service and a PVC, as a Postgres has) that asks for
//! the Secret's password and keeps what it is sent for a person to read.

use cro_provider_api::{Outcome, ProviderError, Provisioned, ResourceRequest};
use k8s_openapi::api::core::v1::Secret;

use crate::{InClusterProvider, Layout, credentials, provisioned, strategy::Serving, workload};

const PROVIDER: &str = "openshift-smtp-template";

impl InClusterProvider {
    pub(crate) async fn smtp(&self, req: &ResourceRequest) -> Result<Provisioned, ProviderError> {
        let overrides = crate::strategy::parse(&req.strategy)?;
        if overrides.mail == Serving::Placeholder || self.keeps_placeholder(req).await? {
            return Ok(placeholder());
        }
        self.layout_to_make(req).await?;
        let secrets = self.api::<Secret>(req);
        let password =
            credentials::password(&secrets, req, "mailpit", &overrides.secret_data).await?;
        let isolation = self.isolation(req).await?;
        let user = self.pod_user(req).await?;
        let image = &self.images.mail_server;
        let desired = workload::mail_server(req, &overrides, image, isolation, &user)?;
        let version = workload::image_tag(&desired.deployment);
        let (outcome, pending) = self.workload(req, &desired, Layout::Ours).await?;
        let port = workload::MAIL_SERVER_PORT.to_string();
        let outcome = match outcome {
            Outcome::Ready(()) => Outcome::Ready(crate::details(&[
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
            ..provisioned(PROVIDER, outcome, version)
        })
    }
}

/// The Go operator's Secret of an in-cluster SMTPCredentialSet: its keys,
/// for a person to fill in.
fn placeholder() -> Provisioned {
    let outcome = Outcome::Ready(crate::details(&[
        ("username", ""),
        ("password", ""),
        ("host", ""),
        ("port", "587"),
        ("tls", "true"),
    ]));
    provisioned(PROVIDER, outcome, None)
}
