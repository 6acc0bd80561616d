//! An SMTP check that goes as far as `AUTH PLAIN`, with `lettre`: whether
//! the Secret's login is taken. Only plain SMTP (the in-cluster mail
//! server, `tls: "false"`): a login is never sent to a server that would
//! want STARTTLS first.

use lettre::transport::smtp::{
    authentication::{Credentials, Mechanism},
    client::AsyncSmtpConnection,
    extension::ClientId,
};

use super::Verdict;

/// Logs in as `user` with `password` over `tcp`, then says QUIT.
pub async fn check(tcp: tokio::net::TcpStream, user: &str, password: &str) -> Verdict {
    let hello = ClientId::Domain("cloud-resource-operator".into());
    let mut connection =
        match AsyncSmtpConnection::connect_with_transport(Box::new(tcp), &hello).await {
            Ok(c) => c,
            Err(e) if e.status().is_some() => {
                return Verdict::Refused(format!("greeting or EHLO: {}", cut(&e)));
            }
            Err(e) => return Verdict::Protocol(format!("the SMTP session broke off: {}", cut(&e))),
        };
    let login = Credentials::new(user.to_string(), password.to_string());
    let verdict = match connection.auth(&[Mechanism::Plain], &login).await {
        Ok(_) => Verdict::Connected(String::new()),
        Err(e) => match e.status().map(|code| code.to_string()) {
            Some(code) if code == "535" => Verdict::AuthenticationFailed(cut(&e)),
            Some(_) => Verdict::Refused(format!("AUTH: {}", cut(&e))),
            // No AUTH PLAIN offered, or the session broke off.
            None => Verdict::Protocol(format!("AUTH PLAIN: {}", cut(&e))),
        },
    };
    let _ = connection.quit().await;
    verdict
}

/// A server's answer, cut so a status never carries a long one.
fn cut(e: &lettre::transport::smtp::Error) -> String {
    e.to_string().chars().take(200).collect()
}
