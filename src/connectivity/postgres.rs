//! A PostgreSQL client that goes as far as authentication: TLS when the
//! server offers it (RDS for PostgreSQL 15+ refuses anything else), the
//! startup message, then MD5 or SCRAM-SHA-256 password authentication, up
//! to `ReadyForQuery`. Protocol 3.0 as documented in "Frontend/Backend
//! Protocol, Message Flow" of the PostgreSQL manual.

use data_encoding::BASE64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{Stream, Verdict};

/// Who to log in as.
pub struct Login<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub database: &'a str,
}

const SSL_REQUEST: i32 = 80_877_103;
const PROTOCOL_3_0: i32 = 196_608;

/// Logs in over `stream` (a fresh TCP connection).
pub async fn check(stream: tokio::net::TcpStream, host: &str, login: &Login<'_>) -> Verdict {
    match session(stream, host, login).await {
        Ok(v) => v,
        Err(e) => Verdict::Protocol(format!("PostgreSQL connection broke off: {e}")),
    }
}

async fn session(
    mut tcp: tokio::net::TcpStream,
    host: &str,
    login: &Login<'_>,
) -> std::io::Result<Verdict> {
    tcp.write_all(&message(None, |b| b.extend(SSL_REQUEST.to_be_bytes())))
        .await?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await?;
    let mut stream: Stream = match answer[0] {
        b'S' => Box::new(super::tls::connect(tcp, host).await?),
        b'N' => Box::new(tcp),
        other => {
            return Ok(Verdict::Protocol(format!(
                "not a PostgreSQL server: answered the SSL request with byte {other:#04x}"
            )));
        }
    };
    let startup = message(None, |b| {
        b.extend(PROTOCOL_3_0.to_be_bytes());
        for (k, v) in [
            ("user", login.user),
            ("database", login.database),
            ("application_name", "cloud-resource-operator-check"),
        ] {
            cstr(b, k);
            cstr(b, v);
        }
        b.push(0);
    });
    stream.write_all(&startup).await?;
    let verdict = authenticate(&mut stream, login).await?;
    // Terminate, best effort: the verdict is known.
    let _ = stream.write_all(&message(Some(b'X'), |_| {})).await;
    let _ = stream.shutdown().await;
    Ok(verdict)
}

async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    login: &Login<'_>,
) -> std::io::Result<Verdict> {
    let mut scram: Option<Scram> = None;
    loop {
        let (kind, body) = read_message(stream).await?;
        match kind {
            b'R' => {
                let code = be_i32(&body, 0);
                match code {
                    0 => {} // AuthenticationOk; wait for ReadyForQuery.
                    3 => {
                        // Sent only where it cannot be overheard in clear.
                        return Ok(Verdict::Connected(
                            "the server asks for the password in clear text, which the check does not send; authentication not checked".into(),
                        ));
                    }
                    5 => {
                        let salt = body.get(4..8).unwrap_or_default();
                        let hashed = md5_password(login.user, login.password, salt);
                        let reply = message(Some(b'p'), |b| cstr(b, &hashed));
                        stream.write_all(&reply).await?;
                    }
                    10 => {
                        let offered = String::from_utf8_lossy(&body[4..]).into_owned();
                        if !offered.split('\0').any(|m| m == "SCRAM-SHA-256") {
                            return Ok(Verdict::Protocol(format!(
                                "the server offers SASL mechanisms the check does not speak: {}",
                                offered.trim_matches('\0').replace('\0', ", ")
                            )));
                        }
                        let s = Scram::new();
                        let first = s.client_first();
                        let reply = message(Some(b'p'), |b| {
                            cstr(b, "SCRAM-SHA-256");
                            b.extend((first.len() as i32).to_be_bytes());
                            b.extend(first.as_bytes());
                        });
                        stream.write_all(&reply).await?;
                        scram = Some(s);
                    }
                    11 => {
                        let Some(s) = scram.as_mut() else {
                            return Ok(Verdict::Protocol("SASL continue before SASL start".into()));
                        };
                        let server_first = String::from_utf8_lossy(&body[4..]).into_owned();
                        let Some(last) = s.client_final(&server_first, login.password) else {
                            return Ok(Verdict::Protocol(
                                "the server's SCRAM challenge is malformed".into(),
                            ));
                        };
                        stream
                            .write_all(&message(Some(b'p'), |b| b.extend(last.as_bytes())))
                            .await?;
                    }
                    12 => {
                        let server_final = String::from_utf8_lossy(&body[4..]).into_owned();
                        if !scram.as_ref().is_some_and(|s| s.verifies(&server_final)) {
                            return Ok(Verdict::Protocol(
                                "the server's SCRAM signature does not verify: this is not the server the Secret names".into(),
                            ));
                        }
                    }
                    other => {
                        return Ok(Verdict::Protocol(format!(
                            "the server asks for an authentication method the check does not speak (code {other})"
                        )));
                    }
                }
            }
            b'E' => return Ok(server_error(&body)),
            b'Z' => return Ok(Verdict::Connected(String::new())),
            // ParameterStatus, BackendKeyData, NoticeResponse.
            _ => {}
        }
    }
}

/// What an ErrorResponse means for a person.
fn server_error(body: &[u8]) -> Verdict {
    let field = |tag: u8| {
        body.split(|b| *b == 0)
            .find(|f| f.first() == Some(&tag))
            .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
            .unwrap_or_default()
    };
    let (code, text) = (field(b'C'), field(b'M'));
    match code.as_str() {
        // invalid_password, invalid_authorization_specification
        "28P01" | "28000" => Verdict::AuthenticationFailed(text),
        // invalid_catalog_name
        "3D000" => Verdict::Refused(format!("the Secret's database does not exist: {text}")),
        // cannot_connect_now (starting or shutting down), too_many_connections
        "57P03" | "53300" => {
            Verdict::Connected(format!("the server answers but admits no one now: {text}"))
        }
        _ => Verdict::Refused(format!("the server refused the login ({code}): {text}")),
    }
}

/// A frontend message: optional type byte, then length-prefixed body.
fn message(kind: Option<u8>, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    body(&mut b);
    let mut out = Vec::with_capacity(b.len() + 5);
    out.extend(kind);
    out.extend(((b.len() + 4) as i32).to_be_bytes());
    out.extend(b);
    out
}

fn cstr(b: &mut Vec<u8>, s: &str) {
    b.extend(s.as_bytes());
    b.push(0);
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut four = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        four.copy_from_slice(s);
    }
    i32::from_be_bytes(four)
}

/// Backend messages are small before authentication; a larger one is not
/// PostgreSQL talking.
const MAX_MESSAGE: usize = 64 * 1024;

async fn read_message<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).await?;
    let len = be_i32(&head, 1);
    let len = usize::try_from(len - 4)
        .ok()
        .filter(|l| *l <= MAX_MESSAGE)
        .ok_or_else(|| std::io::Error::other(format!("message length {len} out of range")))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok((head[0], body))
}

/// `md5` + md5(md5(password + user) + salt), in hex.
fn md5_password(user: &str, password: &str, salt: &[u8]) -> String {
    use md5::Digest as _;
    let inner = hex(&md5::Md5::digest(format!("{password}{user}").as_bytes()));
    let mut outer = md5::Md5::new();
    outer.update(inner.as_bytes());
    outer.update(salt);
    format!("md5{}", hex(&outer.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(bytes)
}

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC takes keys of any length.
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// SCRAM-SHA-256 (RFC 5802, RFC 7677) without channel binding, as
/// PostgreSQL runs it: the user name is taken from the startup message.
struct Scram {
    nonce: String,
    auth_message: String,
    server_key: [u8; 32],
}

impl Scram {
    fn new() -> Self {
        let raw: [u8; 18] = rand::random();
        Scram {
            nonce: BASE64.encode(&raw),
            auth_message: String::new(),
            server_key: [0; 32],
        }
    }

    fn client_first_bare(&self) -> String {
        format!("n=,r={}", self.nonce)
    }

    fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare())
    }

    /// The client-final message for `server_first`, or `None` when it is
    /// malformed or does not extend our nonce.
    fn client_final(&mut self, server_first: &str, password: &str) -> Option<String> {
        let attr = |k: &str| {
            server_first
                .split(',')
                .find_map(|a| a.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        };
        let nonce = attr("r").filter(|r| r.starts_with(&self.nonce))?;
        let salt = BASE64.decode(attr("s")?.as_bytes()).ok()?;
        let iterations: u32 = attr("i")?.parse().ok().filter(|i| *i > 0)?;
        let salted = hi(password.as_bytes(), &salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let without_proof = format!("c=biws,r={nonce}");
        self.auth_message = format!(
            "{},{server_first},{without_proof}",
            self.client_first_bare()
        );
        let signature = hmac(&stored_key, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(k, s)| k ^ s)
            .collect();
        self.server_key = hmac(&salted, b"Server Key");
        Some(format!("{without_proof},p={}", BASE64.encode(&proof)))
    }

    /// Whether the server proved it knows the password too.
    fn verifies(&self, server_final: &str) -> bool {
        let expected = hmac(&self.server_key, self.auth_message.as_bytes());
        server_final
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v.trim_end_matches('\0').as_bytes()).ok())
            .is_some_and(|v| v == expected)
    }
}

/// PBKDF2-HMAC-SHA-256 with one output block (RFC 5802 `Hi`).
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut block = salt.to_vec();
    block.extend(1u32.to_be_bytes());
    let mut u = hmac(password, &block);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &u);
        out.iter_mut().zip(u).for_each(|(o, x)| *o ^= x);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_password_matches_postgres() {
        // Python's hashlib: "md5" + md5(md5("secretalice").hex() + salt).
        assert_eq!(
            md5_password("alice", "secret", &[1, 2, 3, 4]),
            "md598a0412b9c31436fc53776e863350083"
        );
    }

    #[test]
    fn scram_matches_rfc_7677_example() {
        // RFC 7677 section 3: user "user", password "pencil".
        let mut s = Scram {
            nonce: "rOprNGfwEbeRWgbNEkqO".into(),
            auth_message: String::new(),
            server_key: [0; 32],
        };
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        // PostgreSQL leaves the user out of client-first (n=); the RFC's
        // example has n=user, so its auth message is rebuilt the RFC's way.
        let last = s.client_final(server_first, "pencil").unwrap_or_default();
        assert!(last.starts_with("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p="));
        s.auth_message = format!(
            "n=user,r=rOprNGfwEbeRWgbNEkqO,{server_first},c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        );
        let salted = hi(
            b"pencil",
            &BASE64
                .decode(b"W22ZaJ0SNY7soEsUEjb6gQ==")
                .unwrap_or_default(),
            4096,
        );
        let client_key = hmac(&salted, b"Client Key");
        let stored: [u8; 32] = Sha256::digest(client_key).into();
        let signature = hmac(&stored, s.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(k, x)| k ^ x)
            .collect();
        assert_eq!(
            BASE64.encode(&proof),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert!(s.verifies("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="));
        assert!(!s.verifies("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="));
    }

    #[test]
    fn a_challenge_that_drops_our_nonce_is_refused() {
        let mut s = Scram::new();
        assert_eq!(s.client_final("r=other,s=AAAA,i=4096", "pw"), None);
        let ours = format!("r={}x,s=AAAA,i=0", s.nonce);
        assert_eq!(s.client_final(&ours, "pw"), None, "zero iterations");
    }

    #[test]
    fn server_errors_name_the_cause() {
        let body = |code: &str| format!("SFATAL\0C{code}\0Mno\0\0").into_bytes();
        assert!(matches!(
            server_error(&body("28P01")),
            Verdict::AuthenticationFailed(_)
        ));
        assert!(
            matches!(server_error(&body("3D000")), Verdict::Refused(m) if m.contains("database does not exist"))
        );
        assert!(matches!(
            server_error(&body("57P03")),
            Verdict::Connected(_)
        ));
    }
}
