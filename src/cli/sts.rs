//! The Go operator's STS mode: Secret `sts-credentials` names the role the
//! operator assumes with its projected ServiceAccount token.

use std::{path::Path, sync::Arc, time::Duration};

use anyhow::{Context as _, bail};
use tracing::{error, info};

use crate::metrics;

/// The Go operator's STS mode (NewCredentialManager,
/// pkg/providers/aws/credentials.go): on when Secret `sts-credentials` of
/// the operator's namespace exists, its role in key `role_arn`.
pub(super) async fn sts_mode(
    client: &kube::Client,
    namespace: &str,
    token_file: &Path,
) -> anyhow::Result<Option<cro_provider_aws::Sts>> {
    const SECRET: &str = "sts-credentials";
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let Some(secret) = secrets
        .get_opt(SECRET)
        .await
        .with_context(|| format!("reading Secret {namespace}/{SECRET} (STS mode)"))?
    else {
        return Ok(None);
    };
    let role_arn = (secret.data.as_ref())
        .and_then(|d| d.get("role_arn"))
        .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
        .filter(|r| !r.is_empty());
    let Some(role_arn) = role_arn else {
        bail!(
            "Secret {namespace}/{SECRET} turns STS mode on but has no role_arn: set its key role_arn to the role the operator runs as, or delete the Secret"
        );
    };
    // Without it every AWS call would fail and be retried for ever, with
    // every CR frozen in its phase: said here, once, instead.
    if let Err(e) = std::fs::metadata(token_file) {
        bail!(
            "Secret {namespace}/{SECRET} turns STS mode on (role {role_arn}), but the pod has no ServiceAccount token at {} ({e}): project one there with audience openshift (chart: sts.enabled=true; the Go operator's CSV mounted it at /var/run/secrets/openshift/serviceaccount/token), point --sts-token-file (STS_TOKEN_FILE) at it, or delete the Secret to leave STS mode",
            token_file.display()
        );
    }
    Ok(Some(cro_provider_aws::Sts {
        role_arn,
        token_file: token_file.to_path_buf(),
    }))
}

/// How often an unusable Secret `sts-credentials` is read again.
const STS_RETRY: Duration = Duration::from_secs(15);

/// STS mode once Secret `sts-credentials` can be used: until then, the
/// reason is logged and served on `address` as the Go operator's
/// `cro_sts_credentials_secret` gauge, with `/readyz` not ready, and the
/// Secret read again every few seconds. A Secret someone fixes (its
/// `role_arn`, the operator's permission to read it) is taken up without a
/// restart.
pub(super) async fn wait_for_sts(
    client: &kube::Client,
    namespace: &str,
    token_file: &Path,
    address: std::net::SocketAddr,
) -> anyhow::Result<Option<cro_provider_aws::Sts>> {
    let mut serving: Option<tokio::task::JoinHandle<std::io::Result<()>>> = None;
    let shown = Arc::new(std::sync::Mutex::new(String::new()));
    loop {
        match sts_mode(client, namespace, token_file).await {
            Ok(sts) => {
                if let Some(server) = serving {
                    server.abort();
                    let _ = server.await;
                }
                return Ok(sts);
            }
            Err(e) => {
                let reason = format!("{e:#}");
                error!(error = %reason, "STS mode: Secret sts-credentials cannot be used; reading it again in {}s", STS_RETRY.as_secs());
                *shown.lock().unwrap_or_else(|e| e.into_inner()) =
                    metrics::sts_credentials_secret(namespace, &reason);
                if serving.is_none() {
                    let listener = tokio::net::TcpListener::bind(address)
                        .await
                        .with_context(|| format!("listening on --metrics-address {address}"))?;
                    info!(address = %listener.local_addr()?, "serving /metrics, /healthz, /readyz (not ready: waiting for Secret sts-credentials)");
                    let shown = shown.clone();
                    let render =
                        Arc::new(move || shown.lock().unwrap_or_else(|e| e.into_inner()).clone());
                    serving = Some(tokio::spawn(cro_runtime::serve::metrics_and_probes(
                        listener, render, false,
                    )));
                }
                tokio::select! {
                    () = tokio::time::sleep(STS_RETRY) => {}
                    () = super::signal::terminated() => bail!("stopped while waiting for Secret {namespace}/sts-credentials"),
                }
            }
        }
    }
}
