//! An SMTP client that goes as far as `AUTH PLAIN` (RFC 5321 greeting and
//! EHLO, RFC 4616 PLAIN): whether the Secret's login is taken. Only plain
//! SMTP (the in-cluster mail server, `tls: "false"`): a login is never
//! sent to a server that would want STARTTLS first.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::Verdict;

/// Logs in as `user` with `password` over `tcp`, then says QUIT.
pub async fn check(tcp: tokio::net::TcpStream, user: &str, password: &str) -> Verdict {
    match session(tcp, user, password).await {
        Ok(v) => v,
        Err(e) => Verdict::Protocol(format!("the SMTP session broke off: {e}")),
    }
}

async fn session(
    tcp: tokio::net::TcpStream,
    user: &str,
    password: &str,
) -> std::io::Result<Verdict> {
    let (read, mut write) = tcp.into_split();
    let mut lines = BufReader::new(read).lines();
    let greeting = reply(&mut lines).await?;
    if !greeting.starts_with("220") {
        return Ok(Verdict::Protocol(format!(
            "the server's greeting is not SMTP's 220: {}",
            cut(&greeting)
        )));
    }
    write.write_all(b"EHLO cloud-resource-operator\r\n").await?;
    let hello = reply(&mut lines).await?;
    if !hello.starts_with("250") {
        return Ok(Verdict::Refused(format!("EHLO: {}", cut(&hello))));
    }
    let token = data_encoding::BASE64.encode(format!("\0{user}\0{password}").as_bytes());
    write
        .write_all(format!("AUTH PLAIN {token}\r\n").as_bytes())
        .await?;
    let auth = reply(&mut lines).await?;
    let _ = write.write_all(b"QUIT\r\n").await;
    Ok(match &auth[..auth.len().min(3)] {
        "235" => Verdict::Connected(String::new()),
        "535" => Verdict::AuthenticationFailed(cut(&auth)),
        _ => Verdict::Refused(format!("AUTH: {}", cut(&auth))),
    })
}

/// The last line of one reply (`250-...` lines continue it).
async fn reply(
    lines: &mut tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
) -> std::io::Result<String> {
    loop {
        match lines.next_line().await? {
            Some(line) if line.as_bytes().get(3) == Some(&b'-') => continue,
            Some(line) => return Ok(line),
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                ));
            }
        }
    }
}

/// A server's line, cut so a status never carries a long answer.
fn cut(line: &str) -> String {
    line.chars().take(200).collect()
}
