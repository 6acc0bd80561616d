//! Kubernetes writes behind the fence (see [`cro_provider_api::fence`]):
//! a tower layer on the operator's client refuses every write (any method
//! but GET, HEAD and OPTIONS) the fence no longer allows, right before it
//! would be sent. Lease requests pass: they are how leadership is won,
//! renewed and given up, and the API server orders them by
//! resourceVersion.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use cro_provider_api::{Fence, fence::FENCED};
use http::{Method, Request, Response};
use tower::{BoxError, Layer, Service};

/// The layer; put it outermost, so it is the last to decide.
#[derive(Clone)]
pub struct FenceLayer(pub Fence);

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
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

impl<S, B, R> Service<Request<B>> for Fenced<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if guarded(&request) && !self.fence.allows() {
            tracing::warn!(method = %request.method(), path = request.uri().path(), "{FENCED}");
            return Box::pin(async { Err(FENCED.into()) });
        }
        let sent = self.inner.call(request);
        Box::pin(async move { sent.await.map_err(Into::into) })
    }
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
