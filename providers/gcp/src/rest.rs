//! Calls to Google's REST APIs over the providers' fenced HTTPS client
//! ([`cro_provider_api::https`]): JSON in and out, the access token as a
//! bearer, and every failure as a [`GoogleError`] — a lost connection or an
//! answer that never came too (HTTP status 0), which the caller answers by
//! looking, as it does "already exists" and "not found".

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use cro_provider_api::{
    Fence,
    https::{FencedClient, fenced_client},
    proxy::Proxies,
};
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use crate::errors::GoogleError;

/// How long a call may wait for a connection, and for its answer.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Where access tokens come from (a service account's key, Workload
/// Identity, or one given).
#[async_trait::async_trait]
pub trait Token: Send + Sync {
    /// An OAuth access token for the `cloud-platform` scope, or why there
    /// is none (which credentials, and what to fix).
    async fn bearer(&self) -> Result<String, GoogleError>;
}

/// A token given as it is (a test's, or `gcloud auth print-access-token`).
pub struct FixedToken(pub String);

#[async_trait::async_trait]
impl Token for FixedToken {
    async fn bearer(&self) -> Result<String, GoogleError> {
        Ok(self.0.clone())
    }
}

/// One API's endpoint (`https://sqladmin.googleapis.com/`, or a stand-in's).
#[derive(Clone)]
pub struct Rest {
    client: FencedClient<Full<Bytes>>,
    base: String,
    token: Arc<dyn Token>,
}

impl Rest {
    /// Calls to `base` (its root URL, ending in `/`) whose sockets write
    /// only while `fence` allows, through `proxies`.
    pub fn new(base: &str, token: Arc<dyn Token>, fence: Fence, proxies: Proxies) -> Self {
        let base = match base.ends_with('/') {
            true => base.to_string(),
            false => format!("{base}/"),
        };
        Rest {
            client: fenced_client(fence, CONNECT_TIMEOUT, proxies),
            base,
            token,
        }
    }

    /// `verb` on `path` (relative to the root URL, its segments already
    /// escaped with [`segment`]), with `body` as JSON.
    pub async fn call(
        &self,
        verb: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, GoogleError> {
        let token = self.token.bearer().await?;
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = Request::builder()
            .method(verb)
            .uri(format!("{}{path}", self.base))
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(bytes))
            .map_err(|e| lost(0, format!("building the request: {e}")))?;
        let (status, collected) = send(&self.client, request).await?;
        if !(200..300).contains(&status) {
            return Err(GoogleError::parse(status, &collected));
        }
        match collected.is_empty() {
            true => Ok(Value::Null),
            false => serde_json::from_slice(&collected)
                .map_err(|e| lost(status, format!("the answer is not JSON: {e}"))),
        }
    }
}

/// Sends `request`: the answer's status and body, or a failure with no
/// answer (status 0) — which may still have acted.
pub(crate) async fn send(
    client: &FencedClient<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<(u16, Bytes), GoogleError> {
    let answer = tokio::time::timeout(ANSWER_TIMEOUT, client.request(request))
        .await
        .map_err(|_| {
            lost(
                0,
                format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()),
            )
        })?
        .map_err(|e| lost(0, format!("the connection failed: {}", chain(&e))))?;
    let status = answer.status().as_u16();
    let collected = tokio::time::timeout(ANSWER_TIMEOUT, answer.into_body().collect())
        .await
        .map_err(|_| lost(0, "the answer's body did not arrive".into()))?
        .map_err(|e| lost(0, format!("reading the answer: {e}")))?
        .to_bytes();
    Ok((status, collected))
}

/// A failure with no answer from the API (status 0) or none it sent.
fn lost(code: u16, message: String) -> GoogleError {
    GoogleError {
        code,
        status: String::new(),
        reason: String::new(),
        message,
        retry_delay: None,
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A path segment escaped (RFC 3986 unreserved characters stay).
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn segments_are_escaped() {
        assert_eq!(super::segment("my-project"), "my-project");
        assert_eq!(super::segment("a/b c"), "a%2Fb%20c");
    }
}
