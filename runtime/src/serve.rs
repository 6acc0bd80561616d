//! The HTTP endpoints a controller's pod is probed and scraped on.

use std::sync::Arc;

use axum::{Router, http::header, response::IntoResponse, routing::get};

/// `/metrics` as `render` writes it (OpenMetrics text), `/healthz`, and
/// `/readyz` answering as `ready` says, until the process ends.
pub async fn metrics_and_probes(
    listener: tokio::net::TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    ready: bool,
) -> std::io::Result<()> {
    let readiness = if ready {
        axum::http::StatusCode::OK
    } else {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    };
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let render = render.clone();
                async move {
                    (
                        [(
                            header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        render(),
                    )
                        .into_response()
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || async move { (readiness, if ready { "ok" } else { "not ready" }) }),
        );
    axum::serve(listener, app).await
}
