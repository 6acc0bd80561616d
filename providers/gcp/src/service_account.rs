//! Access tokens from a service account's key, as Google's "Using OAuth 2.0
//! for Server to Server Applications" describes the exchange: a JWT signed
//! with the key (RS256) naming the account (`iss`), the scope and the token
//! endpoint (`aud`), valid for an hour at most, sent to the key's
//! `token_uri` as a `jwt-bearer` grant (RFC 7523). The key is the JSON file
//! Google issues (`type: service_account`), the one the Cloud Credential
//! Operator writes into its Secret's `service_account.json`.
//!
//! A token is kept until five minutes before it expires, and one exchange
//! runs at a time, so a thousand reconciles cost one exchange an hour.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_lc_rs::{
    rand::SystemRandom,
    signature::{RSA_PKCS1_SHA256, RsaKeyPair},
};
use bytes::Bytes;
use cro_provider_api::{
    Fence,
    https::{FencedClient, fenced_client},
    proxy::Proxies,
};
use data_encoding::{BASE64, BASE64URL_NOPAD};
use http::{Method, Request, header};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::{
    errors::GoogleError,
    rest::{CONNECT_TIMEOUT, Token, send},
};

/// The scope every GCP API the operator calls accepts.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's token endpoint, where a key names none.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// How long an assertion is valid: Google accepts at most an hour.
const ASSERTION_LIFETIME: Duration = Duration::from_secs(3600);
/// A token this close to its expiry is replaced.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The fields of a service account key file the exchange uses.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    type_: String,
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: String,
    token_uri: Option<String>,
}

/// A service account's key, read and checked.
pub struct ServiceAccountKey {
    email: String,
    key_id: String,
    token_uri: String,
    pair: RsaKeyPair,
}

impl std::fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the key {} of {}", self.key_id, self.email)
    }
}

impl ServiceAccountKey {
    /// Reads a key file; `source` says where it came from (a Secret's key),
    /// for the error, which never quotes the key.
    pub fn parse(json: &[u8], source: &str) -> Result<Self, GoogleError> {
        let refused = |what: String| refusal(format!("{source}: {what}"));
        let file: KeyFile = serde_json::from_slice(json).map_err(|e| {
            refused(format!(
                "not a service account key file ({:?} error at line {} column {}; it needs type, client_email and private_key as Google issues them)",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        if file.type_ != "service_account" {
            return Err(refused(format!(
                "the key's type is {:?}; this operator reads keys of type \"service_account\"",
                file.type_
            )));
        }
        let der = pem_body(&file.private_key)
            .ok_or_else(|| refused("private_key is not a PEM \"PRIVATE KEY\"".into()))?;
        let pair = RsaKeyPair::from_pkcs8(&der).map_err(|e| {
            refused(format!(
                "private_key is not an RSA key in PKCS#8 ({e}): use the key file as Google issued it"
            ))
        })?;
        Ok(ServiceAccountKey {
            email: file.client_email,
            key_id: file.private_key_id,
            token_uri: file.token_uri.unwrap_or_else(|| GOOGLE_TOKEN_URI.into()),
            pair,
        })
    }

    /// The signed assertion asking for `scope`, issued at `now` (seconds
    /// since the epoch).
    pub fn assertion(&self, scope: &str, now: u64) -> Result<String, GoogleError> {
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": self.key_id});
        let claims = json!({
            "iss": self.email,
            "scope": scope,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME.as_secs(),
        });
        let encode = |v: &Value| BASE64URL_NOPAD.encode(v.to_string().as_bytes());
        let signed = format!("{}.{}", encode(&header), encode(&claims));
        let mut signature = vec![0; self.pair.public_modulus_len()];
        (self.pair)
            .sign(
                &RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                signed.as_bytes(),
                &mut signature,
            )
            .map_err(|_| refusal(format!("signing with {self:?} failed")))?;
        Ok(format!("{signed}.{}", BASE64URL_NOPAD.encode(&signature)))
    }
}

/// The DER inside a PEM `PRIVATE KEY` block.
fn pem_body(pem: &str) -> Option<Vec<u8>> {
    let body = pem
        .split("-----BEGIN PRIVATE KEY-----")
        .nth(1)?
        .split("-----END PRIVATE KEY-----")
        .next()?;
    let text: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    BASE64.decode(text.as_bytes()).ok()
}

/// Credentials that cannot be used: needs a person (status 400: not
/// retried soon), and no answer of GCP's (see `into_provider_error`).
fn refusal(message: String) -> GoogleError {
    GoogleError {
        code: 400,
        status: "INVALID_ARGUMENT".into(),
        reason: crate::errors::CREDENTIALS_UNUSABLE.into(),
        message,
        retry_delay: None,
    }
}

/// Tokens of one service account, exchanged at its `token_uri`.
pub struct ServiceAccountToken {
    key: ServiceAccountKey,
    client: FencedClient<Full<Bytes>>,
    /// The token and when it expires; held during an exchange.
    current: Mutex<Option<(String, Instant)>>,
}

impl ServiceAccountToken {
    pub fn new(key: ServiceAccountKey, fence: Fence, proxies: Proxies) -> Self {
        ServiceAccountToken {
            key,
            client: fenced_client(fence, CONNECT_TIMEOUT, proxies),
            current: Mutex::new(None),
        }
    }

    async fn exchange(&self) -> Result<(String, Duration), GoogleError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let form = format!(
            "grant_type={}&assertion={}",
            crate::rest::segment(JWT_BEARER),
            self.key.assertion(CLOUD_PLATFORM, now)?
        );
        let request = Request::builder()
            .method(Method::POST)
            .uri(&self.key.token_uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(form)))
            .map_err(|e| refusal(format!("the key's token_uri: {e}")))?;
        let (status, body) = send(&self.client, request).await?;
        if !(200..300).contains(&status) {
            return Err(oauth_error(status, &body, &self.key));
        }
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let token = answer["access_token"].as_str().unwrap_or_default();
        if token.is_empty() {
            return Err(GoogleError {
                code: 0,
                status: String::new(),
                reason: String::new(),
                message: "the token endpoint answered without an access_token".into(),
                retry_delay: None,
            });
        }
        let lasts = Duration::from_secs(answer["expires_in"].as_u64().unwrap_or(0));
        Ok((token.to_string(), lasts))
    }
}

#[async_trait::async_trait]
impl Token for ServiceAccountToken {
    async fn bearer(&self) -> Result<String, GoogleError> {
        let mut current = self.current.lock().await;
        if let Some((token, expires)) = current.as_ref()
            && expires.saturating_duration_since(Instant::now()) > REFRESH_BEFORE
        {
            return Ok(token.clone());
        }
        let (token, lasts) = self.exchange().await?;
        *current = Some((token.clone(), Instant::now() + lasts));
        Ok(token)
    }
}

/// The token endpoint's refusal (RFC 6749 section 5.2: `error`,
/// `error_description`), with what a person does about it.
fn oauth_error(status: u16, body: &[u8], key: &ServiceAccountKey) -> GoogleError {
    let answer: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let code = answer["error"].as_str().unwrap_or_default().to_string();
    let said = answer["error_description"].as_str().unwrap_or_default();
    if code.is_empty() {
        // Not OAuth's answer (a proxy's page, a 5xx): as any other call's.
        return GoogleError::parse(status, body);
    }
    let advice = match code.as_str() {
        "invalid_grant" | "invalid_client" | "unauthorized_client" => format!(
            ": {key:?} is not accepted (deleted, disabled, or of another account): give the operator a current key (with the Cloud Credential Operator, delete its Secret and it writes a new one)"
        ),
        _ => String::new(),
    };
    GoogleError {
        code: if status == 401 { 400 } else { status },
        status: String::new(),
        reason: code,
        message: format!("the token endpoint refused the key: {said}{advice}"),
        retry_delay: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::{
        encoding::AsDer,
        rsa::KeySize,
        signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey},
    };

    /// A key file of a freshly made key, laid out as Google issues one.
    fn key_file(token_uri: &str) -> (Vec<u8>, RsaKeyPair) {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap_or_else(|e| panic!("{e}"));
        let der = pair.as_der().unwrap_or_else(|e| panic!("{e}"));
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            BASE64.encode(der.as_ref())
        );
        let file = json!({"type": "service_account", "project_id": "p1",
            "private_key_id": "0123abcd", "private_key": pem,
            "client_email": "cro@p1.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": token_uri});
        (file.to_string().into_bytes(), pair)
    }

    #[test]
    fn the_assertion_is_a_jwt_google_accepts_signed_with_the_key() {
        let (file, pair) = key_file("https://oauth2.googleapis.com/token");
        let key = ServiceAccountKey::parse(&file, "test").unwrap_or_else(|e| panic!("{e:?}"));
        let jwt = key
            .assertion(CLOUD_PLATFORM, 1_700_000_000)
            .unwrap_or_default();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3, "{jwt}");
        let decoded = |p: &str| -> Value {
            serde_json::from_slice(&BASE64URL_NOPAD.decode(p.as_bytes()).unwrap_or_default())
                .unwrap_or(Value::Null)
        };
        assert_eq!(
            decoded(parts[0]),
            json!({"alg": "RS256", "typ": "JWT", "kid": "0123abcd"})
        );
        assert_eq!(
            decoded(parts[1]),
            json!({"iss": "cro@p1.iam.gserviceaccount.com", "scope": CLOUD_PLATFORM,
                "aud": "https://oauth2.googleapis.com/token",
                "iat": 1_700_000_000u64, "exp": 1_700_003_600u64})
        );
        let signature = BASE64URL_NOPAD
            .decode(parts[2].as_bytes())
            .unwrap_or_default();
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, pair.public_key());
        let signed = format!("{}.{}", parts[0], parts[1]);
        assert!(public.verify(signed.as_bytes(), &signature).is_ok());
    }

    #[test]
    fn a_file_that_is_no_service_account_key_is_refused_naming_its_source_not_its_key() {
        let (file, _) = key_file("https://oauth2.googleapis.com/token");
        let mut external: Value = serde_json::from_slice(&file).unwrap_or_default();
        external["type"] = json!("external_account");
        let mut broken: Value = serde_json::from_slice(&file).unwrap_or_default();
        broken["private_key"] =
            json!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        for (bytes, says) in [
            (b"{\"type\": 1}".to_vec(), "not a service account key file"),
            (external.to_string().into_bytes(), "\"external_account\""),
            (broken.to_string().into_bytes(), "not an RSA key"),
        ] {
            let e = ServiceAccountKey::parse(&bytes, "Secret ns/creds key service_account.json")
                .expect_err("refused");
            assert!(
                e.message
                    .starts_with("Secret ns/creds key service_account.json: ")
                    && e.message.contains(says),
                "{}",
                e.message
            );
            assert!(!e.message.contains("AAAA"), "{}", e.message);
            assert_eq!(
                e.meaning(),
                crate::errors::Meaning::Failed(cro_provider_api::ErrorKind::Permanent)
            );
            // Refused here: never reported as GCP's answer.
            let reported = e.into_provider_error("reading an instance").to_string();
            assert!(
                reported.starts_with("reading an instance: Secret ns/creds")
                    && !reported.contains("GCP answered"),
                "{reported}"
            );
        }
    }

    #[test]
    fn a_refused_grant_names_the_key_and_waits_for_a_person() {
        let (file, _) = key_file("https://oauth2.googleapis.com/token");
        let key = ServiceAccountKey::parse(&file, "test").unwrap_or_else(|e| panic!("{e:?}"));
        let body = br#"{"error": "invalid_grant", "error_description": "Invalid JWT Signature."}"#;
        let e = oauth_error(400, body, &key);
        assert!(
            e.message.contains("Invalid JWT Signature.")
                && e.message
                    .contains("0123abcd of cro@p1.iam.gserviceaccount.com"),
            "{}",
            e.message
        );
        assert_eq!(
            e.meaning(),
            crate::errors::Meaning::Failed(cro_provider_api::ErrorKind::Permanent)
        );
        let unavailable = oauth_error(503, b"<html>busy</html>", &key);
        assert_eq!(
            unavailable.meaning(),
            crate::errors::Meaning::Failed(cro_provider_api::ErrorKind::Transient)
        );
    }
}
