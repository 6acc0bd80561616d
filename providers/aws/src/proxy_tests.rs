//! The AWS client through the environment's proxy
//! ([`cro_provider_api::proxy`]): tunnelled, asked by absolute URI, or
//! reached directly, as the variables say.

use crate::fenced_https::FencedHttps;
use aws_smithy_runtime_api::client::{http::HttpConnector, orchestrator::HttpRequest};
use aws_smithy_types::body::SdkBody;
use cro_provider_api::Fence;
use cro_provider_api::proxy::Proxies;
use hyper_util::client::proxy::matcher::Matcher;
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
    let (proxy, served) = one_exchange("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n").await;
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
