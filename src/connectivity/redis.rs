//! A Redis client that goes as far as `AUTH` (when the Secret has a
//! password) and `PING`, in RESP2 as documented in the Redis protocol
//! specification, over TLS when the Secret says so (ElastiCache in-transit
//! encryption).

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::{
    Stream, Verdict,
    tls::{Trust, untrusted},
};

/// `AUTH` with `password`, if any, then `PING`, over `tcp` to `host`
/// (in a TLS session when `tls`, with a server whose certificate `trust`
/// vouches for: the token goes to no other).
pub async fn check(
    tcp: tokio::net::TcpStream,
    host: &str,
    tls: bool,
    password: Option<&str>,
    trust: &Trust,
) -> Verdict {
    let stream: Stream = match tls {
        false => Box::new(tcp),
        true => match trust.connect(tcp, host).await {
            Ok(s) => Box::new(s),
            Err(e) if untrusted(&e) => {
                return Verdict::Protocol(format!(
                    "the server's TLS certificate is not trusted ({e}), so its AUTH token was not sent: ElastiCache's certificates chain to Amazon's public CAs, so check the host in the Secret; a server behind another CA needs that CA in the operator's SSL_CERT_FILE"
                ));
            }
            Err(e) => {
                return Verdict::Protocol(format!(
                    "no TLS session ({e}): the Secret's tls is \"true\" but the server does not speak TLS on this port; remove tls from the Secret if the group has no in-transit encryption"
                ));
            }
        },
    };
    match session(stream, password).await {
        Ok(v) => v,
        Err(e) => Verdict::Protocol(format!("Redis connection broke off: {e}")),
    }
}

async fn session(stream: Stream, password: Option<&str>) -> std::io::Result<Verdict> {
    let mut stream = BufReader::new(stream);
    if let Some(password) = password {
        stream.write_all(&command(&["AUTH", password])).await?;
        let reply = read_line(&mut stream).await?;
        if reply.contains("without any password configured") {
            // The server has no password; the Secret's is not needed.
        } else if let Some(error) = reply.strip_prefix('-') {
            return Ok(Verdict::AuthenticationFailed(error.to_string()));
        }
    }
    stream.write_all(&command(&["PING"])).await?;
    let reply = read_line(&mut stream).await?;
    let _ = stream.shutdown().await;
    Ok(match reply.as_str() {
        "+PONG" => Verdict::Connected(String::new()),
        r if r.starts_with("-NOAUTH") => Verdict::AuthenticationFailed(
            "the server requires a password and the Secret has none".into(),
        ),
        r if r.starts_with("-LOADING") || r.starts_with("-BUSY") => Verdict::Connected(format!(
            "the server answers but is not serving yet: {}",
            &r[1..]
        )),
        r => Verdict::Protocol(format!("unexpected answer to PING: {:?}", truncated(r))),
    })
}

/// A RESP array of bulk strings.
fn command(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).as_bytes());
        out.extend(a.as_bytes());
        out.extend(b"\r\n");
    }
    out
}

/// One reply line; a server that sends more than a line's worth before
/// CRLF is not Redis talking.
async fn read_line<S: tokio::io::AsyncBufRead + Unpin>(stream: &mut S) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut limited = (&mut *stream).take(4096);
    limited.read_until(b'\n', &mut line).await?;
    if line.is_empty() {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_string())
}

fn truncated(s: &str) -> &str {
    s.get(..80).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays_of_bulk_strings() {
        assert_eq!(
            command(&["AUTH", "pw"]),
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n".to_vec()
        );
    }
}
