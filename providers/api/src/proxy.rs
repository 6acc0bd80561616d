//! Cloud API calls through the forward proxy the environment names, as the
//! AWS CLI, gcloud and the Go operator's SDKs do: `HTTPS_PROXY`, `HTTP_PROXY` or
//! `ALL_PROXY` (or their lower-case forms) for each endpoint, unless
//! `NO_PROXY` exempts its host. An OpenShift cluster-wide proxy sets these
//! in the operator's pod. HTTPS goes through an HTTP CONNECT tunnel (TLS
//! stays end to end with the cloud); plain HTTP (a custom endpoint) is sent to
//! the proxy with an absolute URI. The proxy itself is reached over plain
//! HTTP, as `http://[user:password@]host:port`.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use crate::fenced_socket::{BoxError, FencedIo, FencedTcp, Opening};
use http::{HeaderValue, Uri, uri::Scheme};
use hyper_util::client::{legacy::connect::proxy::Tunnel, proxy::matcher::Matcher};

/// Which endpoints go through which proxy.
#[derive(Clone)]
pub struct Proxies(Arc<Matcher>);

impl Proxies {
    /// As the environment says (read once, at start).
    pub fn from_env() -> Self {
        Proxies(Arc::new(Matcher::from_env()))
    }

    /// These proxies, not the environment's (tests).
    pub fn given(matcher: Matcher) -> Self {
        Proxies(Arc::new(matcher))
    }

    /// The `Proxy-Authorization` a plain-HTTP request to `uri` carries.
    pub fn authorization(&self, uri: &Uri) -> Option<HeaderValue> {
        if uri.scheme() != Some(&Scheme::HTTP) {
            return None;
        }
        self.0.intercept(uri)?.basic_auth().cloned()
    }
}

impl std::fmt::Debug for Proxies {
    // The proxy's URI may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proxies")
    }
}

/// Opens a connection to an endpoint, through its proxy if it has one.
#[derive(Clone, Debug)]
pub struct ViaProxy {
    direct: FencedTcp,
    proxies: Proxies,
}

impl ViaProxy {
    pub fn new(direct: FencedTcp, proxies: Proxies) -> Self {
        ViaProxy { direct, proxies }
    }
}

impl tower_service::Service<Uri> for ViaProxy {
    type Response = FencedIo;
    type Error = BoxError;
    type Future = Opening;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx)
    }

    fn call(&mut self, endpoint: Uri) -> Opening {
        let Some(proxy) = self.proxies.0.intercept(&endpoint) else {
            return self.direct.call(endpoint);
        };
        if proxy.uri().scheme() != Some(&Scheme::HTTP) {
            let scheme = proxy.uri().scheme_str().unwrap_or("none").to_string();
            return Box::pin(async move {
                Err(format!("the proxy for cloud API calls (HTTPS_PROXY, HTTP_PROXY or ALL_PROXY) must be an http:// URI, not {scheme}://; set it to http://host:port, or exempt the endpoint's host in NO_PROXY").into())
            });
        }
        if endpoint.scheme() == Some(&Scheme::HTTP) {
            let opening = self.direct.call(proxy.uri().clone());
            return Box::pin(async move { Ok(opening.await?.to_proxy()) });
        }
        let mut tunnel = Tunnel::new(proxy.uri().clone(), self.direct.clone());
        if let Some(authorization) = proxy.basic_auth() {
            tunnel = tunnel.with_auth(authorization.clone());
        }
        let opening = tunnel.call(endpoint);
        Box::pin(async move { opening.await.map_err(Into::into) })
    }
}
