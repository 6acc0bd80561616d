//! The HTTP(S) client under every AWS request: the providers' fenced client
//! ([`cro_provider_api::https`]) as the SDK's connector, because the SDK's
//! builder takes no socket wrapper; through the environment's proxy (see
//! [`cro_provider_api::proxy`]).

use std::{io, time::Duration};

use aws_smithy_runtime_api::client::{
    http::{
        HttpConnector, HttpConnectorFuture, SharedHttpClient, SharedHttpConnector, http_client_fn,
    },
    orchestrator::{HttpRequest, HttpResponse},
    result::ConnectorError,
};
use aws_smithy_types::body::SdkBody;
use cro_provider_api::{
    Fence,
    https::{FencedClient, fenced_client},
    proxy::Proxies,
};

/// How long a call may wait for a connection to AWS (or its proxy).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends requests over fenced sockets; cheap to clone (one pool).
#[derive(Clone, Debug)]
pub struct FencedHttps {
    client: FencedClient<SdkBody>,
    proxies: Proxies,
    answer_timeout: Option<Duration>,
}

impl FencedHttps {
    /// A client whose sockets write only while `fence` allows, through
    /// `proxies`.
    pub fn new(fence: Fence, connect_timeout: Duration, proxies: Proxies) -> Self {
        FencedHttps {
            client: fenced_client(fence, connect_timeout, proxies.clone()),
            proxies,
            answer_timeout: None,
        }
    }

    /// The same pool, waiting at most `timeout` for an answer's head.
    pub fn answering_within(&self, timeout: Option<Duration>) -> Self {
        FencedHttps {
            answer_timeout: timeout,
            ..self.clone()
        }
    }
}

/// For fetching credentials from STS (a web identity, an assumed role):
/// through the proxy, never fenced, since it changes nothing in the
/// account. The instance and container credential endpoints keep the
/// SDK's own client, which reaches them directly.
pub fn credentials_client() -> SharedHttpClient {
    let https = FencedHttps::new(Fence::open(), CONNECT_TIMEOUT, Proxies::from_env());
    http_client_fn(move |settings, _| {
        SharedHttpConnector::new(https.answering_within(settings.read_timeout()))
    })
}

impl HttpConnector for FencedHttps {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let mut request = match request.try_into_http1x() {
            Ok(request) => request,
            Err(e) => return HttpConnectorFuture::ready(Err(ConnectorError::user(e.into()))),
        };
        if let Some(authorization) = self.proxies.authorization(request.uri()) {
            let headers = request.headers_mut();
            headers.insert(http::header::PROXY_AUTHORIZATION, authorization);
        }
        let (sent, timeout) = (self.client.request(request), self.answer_timeout);
        HttpConnectorFuture::new(async move {
            let answer = match timeout {
                Some(timeout) => match tokio::time::timeout(timeout, sent).await {
                    Ok(answer) => answer,
                    Err(elapsed) => return Err(ConnectorError::timeout(elapsed.into())),
                },
                None => sent.await,
            };
            match answer {
                Ok(response) => HttpResponse::try_from(response.map(SdkBody::from_body_1_x))
                    .map_err(|e| ConnectorError::other(e.into(), None)),
                Err(e) => Err(classify(e)),
            }
        })
    }
}

/// As the SDK's client classifies: a connection that failed, closed or
/// broke (a refused write among them) is an I/O error the SDK retries;
/// anything else is not.
fn classify(error: hyper_util::client::legacy::Error) -> ConnectorError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    let mut transport = error.is_connect();
    while let Some(e) = source {
        if e.is::<io::Error>() {
            transport = true;
        }
        if let Some(e) = e.downcast_ref::<hyper::Error>() {
            if e.is_timeout() {
                return ConnectorError::timeout(error.into());
            }
            transport |= e.is_closed() || e.is_canceled() || e.is_incomplete_message();
        }
        source = e.source();
    }
    match transport {
        true => ConnectorError::io(error.into()),
        false => ConnectorError::other(error.into(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::io::AsyncReadExt;

    /// What the server read on each connection, in order of arrival.
    async fn read_connections(listener: tokio::net::TcpListener, n: usize) -> Vec<String> {
        let mut read = Vec::new();
        for _ in 0..n {
            let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("{e}"));
            let mut buf = vec![0; 4096];
            // The first request's head, or the connection closed unwritten.
            let got = socket
                .read(&mut buf)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            read.push(String::from_utf8_lossy(&buf[..got]).into_owned());
            if got > 0 {
                use tokio::io::AsyncWriteExt;
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                socket
                    .write_all(answer)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                // Kept open and read on: a pooled second request is seen.
                let more = socket.read(&mut buf).await.unwrap_or(0);
                read.push(String::from_utf8_lossy(&buf[..more]).into_owned());
            }
        }
        read
    }

    fn head(url: &str) -> HttpRequest {
        let request = http::Request::head(url)
            .body(SdkBody::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        HttpRequest::try_from(request).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A request already past every earlier check (as in a process frozen
    /// there and woken after its Lease ran out) writes nothing, whether
    /// its connection is pooled or new; bodyless requests included.
    #[tokio::test]
    async fn nothing_is_written_once_the_fence_closes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "http://{}/bucket",
            listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
        );
        let server = tokio::spawn(read_connections(listener, 2));
        let fence = Fence::leased();
        fence.extend_to(Instant::now() + Duration::from_secs(60));
        let client = FencedHttps::new(
            fence.clone(),
            Duration::from_secs(5),
            cro_provider_api::proxy::Proxies::given(
                hyper_util::client::proxy::matcher::Matcher::builder().build(),
            ),
        )
        .answering_within(Some(Duration::from_secs(10)));

        let first = client
            .call(head(&url))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.status().as_u16(), 200);
        fence.close();
        // On the pooled connection, then on a new one (the pooled one is
        // broken by the refusal).
        for _ in 0..2 {
            let refused = client
                .call(head(&url))
                .await
                .expect_err("sent past a closed fence");
            assert!(
                refused.is_io(),
                "not retried as a transport error: {refused:?}"
            );
        }
        let read = server.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(read[0].starts_with("HEAD /bucket HTTP/1.1"), "{read:?}");
        assert_eq!(
            read[1..],
            ["", ""],
            "bytes written after the fence closed: {read:?}"
        );
    }
}
