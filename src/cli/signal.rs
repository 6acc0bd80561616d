//! When to stop: SIGTERM (Kubernetes stopping the pod) or SIGINT.

use tracing::{info, warn};

/// Resolves on SIGTERM (Kubernetes stopping the pod) or SIGINT.
pub(super) async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; stopping on SIGINT only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    info!("shutting down: finishing running reconciles");
}
