//! AWS calls through the forward proxy the environment names, as the AWS
//! CLI and the Go operator's SDK do: `HTTPS_PROXY`, `HTTP_PROXY` or
//! `ALL_PROXY` (or their lower-case forms) for each endpoint, unless
//! `NO_PROXY` exempts its host. An OpenShift cluster-wide proxy sets these
//! in the operator's pod. HTTPS goes through an HTTP CONNECT tunnel (TLS
//! stays end to end with AWS); plain HTTP (a custom endpoint) is sent to
//! the proxy with an absolute URI. The proxy itself is reached over plain
//! HTTP, as `http://[user:password@]host:port`.

use std::{
    sync::Arc,
    task::{Context, Poll},
};

use cro_provider_api::fenced_socket::{BoxError, FencedIo, FencedTcp, Opening};
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

    #[cfg(test)]
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
                Err(format!("the proxy for AWS calls (HTTPS_PROXY, HTTP_PROXY or ALL_PROXY) must be an http:// URI, not {scheme}://; set it to http://host:port, or exempt the endpoint's host in NO_PROXY").into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fenced_https::FencedHttps;
    use aws_smithy_runtime_api::client::{http::HttpConnector, orchestrator::HttpRequest};
    use aws_smithy_types::body::SdkBody;
    use cro_provider_api::Fence;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server that reads one request head and answers `answer`.
    async fn one_exchange(answer: &'static str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string();
        let served = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
            let mut head = Vec::new();
            let mut buf = [0; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = socket
                    .read(&mut buf)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    n > 0,
                    "closed before the head ended: {}",
                    String::from_utf8_lossy(&head)
                );
                head.extend_from_slice(&buf[..n]);
            }
            socket
                .write_all(answer.as_bytes())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            String::from_utf8_lossy(&head).to_lowercase()
        });
        (address, served)
    }

    /// What the server read, waited for with a deadline (a request sent
    /// elsewhere never arrives).
    async fn read(served: tokio::task::JoinHandle<String>) -> String {
        let joined = tokio::time::timeout(Duration::from_secs(10), served).await;
        let joined = joined.unwrap_or_else(|_| panic!("nothing reached the local server"));
        joined.unwrap_or_else(|e| panic!("{e}"))
    }

    fn client(matcher: Matcher) -> FencedHttps {
        FencedHttps::new(
            Fence::open(),
            Duration::from_secs(5),
            Proxies::given(matcher),
        )
        .answering_within(Some(Duration::from_secs(10)))
    }

    fn head(url: &str) -> HttpRequest {
        let request = http::Request::head(url)
            .body(SdkBody::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        HttpRequest::try_from(request).unwrap_or_else(|e| panic!("{e}"))
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
    /// `user:secret`, as a proxy URI's userinfo becomes Basic credentials.
    const BASIC: &str = "proxy-authorization: basic dxnlcjpzzwnyzxq=";

    #[tokio::test]
    async fn https_endpoints_are_tunnelled_with_the_proxys_credentials() {
        let (proxy, served) =
            one_exchange("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n").await;
        let matcher = Matcher::builder()
            .https(format!("http://user:secret@{proxy}"))
            .build();
        // The name is never resolved here: only the proxy is reached.
        let refused = client(matcher)
            .call(head("https://s3.eu-west-1.amazonaws.com/bucket"))
            .await;
        assert!(refused.is_err(), "{refused:?}");
        let connect = read(served).await;
        assert!(
            connect.starts_with("connect s3.eu-west-1.amazonaws.com:443 http/1.1\r\n"),
            "{connect}"
        );
        assert!(connect.contains(BASIC), "{connect}");
    }

    #[tokio::test]
    async fn http_endpoints_are_asked_of_the_proxy_by_absolute_uri() {
        let (proxy, served) = one_exchange(OK).await;
        let matcher = Matcher::builder()
            .all(format!("http://user:secret@{proxy}"))
            .build();
        let answer = client(matcher)
            .call(head("http://moto.test:5000/bucket"))
            .await;
        assert_eq!(answer.map(|a| a.status().as_u16()).ok(), Some(200));
        let request = read(served).await;
        assert!(
            request.starts_with("head http://moto.test:5000/bucket http/1.1\r\n"),
            "{request}"
        );
        assert!(request.contains(BASIC), "{request}");
    }

    #[tokio::test]
    async fn no_proxy_hosts_are_reached_directly() {
        let (endpoint, served) = one_exchange(OK).await;
        let matcher = Matcher::builder()
            .all("http://127.0.0.2:9")
            .no("127.0.0.1")
            .build();
        let answer = client(matcher)
            .call(head(&format!("http://{endpoint}/bucket")))
            .await;
        assert_eq!(answer.map(|a| a.status().as_u16()).ok(), Some(200));
        let request = read(served).await;
        assert!(
            request.starts_with("head /bucket http/1.1\r\n"),
            "{request}"
        );
        assert!(!request.contains("proxy-authorization"), "{request}");
    }

    #[tokio::test]
    async fn an_https_proxy_is_refused_naming_the_variables() {
        let matcher = Matcher::builder().https("https://127.0.0.2:9").build();
        let refused = client(matcher)
            .call(head("https://s3.eu-west-1.amazonaws.com/bucket"))
            .await;
        let error = format!("{:?}", refused.expect_err("an https:// proxy was used"));
        assert!(
            error.contains("HTTPS_PROXY") && error.contains("must be an http:// URI"),
            "{error}"
        );
    }
}
