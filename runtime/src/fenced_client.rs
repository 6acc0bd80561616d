//! Kubernetes writes behind the fence (see [`cro_provider_api::fence`]):
//! a tower layer on the operator's client sends every write (any method
//! but GET, HEAD and OPTIONS) through a second client of its own, whose
//! sockets ask the fence before every write, and refuses it up front when
//! the fence is already closed. Reads go through the first client, which
//! keeps working while the process stops. Lease requests pass: they are
//! how leadership is won, renewed and given up, and the API server orders
//! them by resourceVersion.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use cro_provider_api::{Fence, fence::FENCED, fenced_socket::FencedTcp};
use http::{Method, Request, Response};
use kube::client::{Body, ConfigExt, DynBody};
use tower::{BoxError, Layer, Service, ServiceBuilder};

/// The layer; put it outermost, so it is the last to decide.
#[derive(Clone)]
pub struct FenceLayer {
    fence: Fence,
    writes: kube::Client,
}

impl FenceLayer {
    /// Writes go through a client of `config`'s own, behind `fence`.
    /// Made after kube's `ClientBuilder::try_from`, which installs the
    /// TLS crypto provider both use.
    pub fn new(config: &kube::Config, fence: Fence) -> kube::Result<Self> {
        Ok(FenceLayer {
            writes: fenced(config, fence.clone())?,
            fence,
        })
    }
}

/// The stack kube's `ClientBuilder` makes from `config` (with the
/// features built here: no gzip, no proxy), over fenced sockets.
fn fenced(config: &kube::Config, fence: Fence) -> kube::Result<kube::Client> {
    let mut tcp = hyper_util::client::legacy::connect::HttpConnector::new();
    tcp.enforce_http(false);
    let tls = config.rustls_https_connector_with_connector(FencedTcp::new(tcp, fence))?;
    let mut timed = hyper_timeout::TimeoutConnector::new(tls);
    timed.set_connect_timeout(config.connect_timeout);
    timed.set_read_timeout(config.read_timeout);
    timed.set_write_timeout(config.write_timeout);
    timed.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(hyper_util::rt::TokioExecutor::new()).build(timed);
    // Its retry of 429, 503 and 504 answers included (an API server's
    // priority and fairness turning a write away); its debug trace not.
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.fence.clone(),
            writes: self.writes.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
    writes: kube::Client,
}

/// Whether a request changes something the fence guards.
fn guarded<B>(request: &Request<B>) -> bool {
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    !reads.contains(request.method())
        && !request
            .uri()
            .path()
            .starts_with("/apis/coordination.k8s.io/")
}

impl<S> Service<Request<Body>> for Fenced<S>
where
    S: Service<Request<Body>, Response = Response<Box<DynBody>>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if !guarded(&request) {
            let sent = self.inner.call(request);
            return Box::pin(async move { sent.await.map_err(Into::into) });
        }
        if !self.fence.allows() {
            tracing::warn!(method = %request.method(), path = request.uri().path(), "{FENCED}");
            return Box::pin(async { Err(FENCED.into()) });
        }
        let writes = self.writes.clone();
        Box::pin(async move {
            let response = writes.send(request).await?;
            Ok(response.map(|body| Box::new(body_with_box_error(body)) as Box<DynBody>))
        })
    }
}

fn body_with_box_error(
    body: Body,
) -> impl http_body::Body<Data = bytes::Bytes, Error = BoxError> + Send + Unpin {
    http_body_util::BodyExt::map_err(body, BoxError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, path: &str) -> Request<()> {
        let mut r = Request::new(());
        *r.method_mut() = method;
        *r.uri_mut() = path.parse().unwrap_or_default();
        r
    }

    #[test]
    fn writes_but_not_reads_or_leases_are_guarded() {
        let pod_status = "/apis/integreatly.org/v1alpha1/namespaces/a/postgres/db/status";
        assert!(guarded(&request(Method::PATCH, pod_status)));
        assert!(guarded(&request(
            Method::POST,
            "/api/v1/namespaces/a/secrets"
        )));
        assert!(guarded(&request(
            Method::DELETE,
            "/api/v1/namespaces/a/secrets/s"
        )));
        assert!(!guarded(&request(Method::GET, pod_status)));
        let lease = "/apis/coordination.k8s.io/v1/namespaces/a/leases/cro";
        assert!(!guarded(&request(Method::PUT, lease)));
    }
}
