//! Logging in to PostgreSQL with `tokio-postgres`, as far as
//! `ReadyForQuery`, over TLS with `tokio-postgres-rustls`.
//!
//! The server's certificate is not checked against a CA (RDS signs with
//! its own CAs, in-cluster servers have none). What keeps the password
//! from a server that is not the Secret's is SCRAM-SHA-256-PLUS: its
//! channel binding (`tls-server-end-point`) ties the login to the
//! certificate the operator saw, so a relay that ends TLS itself fails it
//! at the real server, and a server without the password cannot complete
//! it. Where TLS is required (RDS always offers it), a server that refuses
//! TLS or will not do channel binding gets nothing derived from the
//! password.

use tokio_postgres::{
    Config,
    config::{ChannelBinding, SslMode},
    error::SqlState,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::Verdict;

/// Who to log in as, and whether the server must speak TLS.
pub struct Login<'a> {
    pub user: &'a str,
    pub password: &'a str,
    pub database: &'a str,
    /// The server is one that always offers TLS (RDS): a plain-text
    /// answer is not the server's, and only a channel-bound login is sent.
    pub require_tls: bool,
}

/// Logs in over `tcp` (a fresh TCP connection).
pub async fn check(tcp: tokio::net::TcpStream, host: &str, login: &Login<'_>) -> Verdict {
    let config = match super::tls::any_server() {
        Ok(config) => config,
        Err(e) => return Verdict::Protocol(format!("no TLS client configuration: {e}")),
    };
    let tls = tokio_postgres::tls::MakeTlsConnect::<tokio::net::TcpStream>::make_tls_connect(
        &mut MakeRustlsConnect::new((*config).clone()),
        host,
    );
    let tls = match tls {
        Ok(tls) => tls,
        Err(e) => return Verdict::Protocol(format!("{host} is not a TLS server name: {e}")),
    };
    let (ssl_mode, channel_binding) = match login.require_tls {
        true => (SslMode::Require, ChannelBinding::Require),
        false => (SslMode::Prefer, ChannelBinding::Prefer),
    };
    let mut config = Config::new();
    config
        .user(login.user)
        .password(login.password)
        .dbname(login.database)
        .application_name("cloud-resource-operator-check")
        .ssl_mode(ssl_mode)
        .channel_binding(channel_binding);
    match config.connect_raw(tcp, tls).await {
        Ok((client, connection)) => {
            // Dropping the client makes the connection say goodbye
            // (Terminate) and end.
            let probe = async move {
                let verdict = writes(&client).await;
                drop(client);
                verdict
            };
            let (verdict, _) = tokio::join!(probe, connection);
            verdict
        }
        Err(e) => verdict(&e, login.require_tls),
    }
}

/// Sorting more rows than `work_mem` holds writes a temporary file to the
/// server's data directory (`base/pgsql_tmp`), as any user may and as every
/// application's write does: a server whose disk is full fails it with
/// `disk_full` (53100) while it still admits logins and reads.
const WRITE_PROBE: &str = "SET work_mem = '64kB'; \
    SELECT count(*) FROM (SELECT g FROM generate_series(1, 20000) g ORDER BY g DESC) AS s";

/// Whether the server can write to its disk; a login it admitted either way.
async fn writes(client: &tokio_postgres::Client) -> Verdict {
    match client.batch_execute(WRITE_PROBE).await {
        Err(e) if e.code() == Some(&SqlState::DISK_FULL) => {
            let said = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |db| db.message().to_string());
            Verdict::StorageFull(said)
        }
        // Anything else (a temp_file_limit, a read-only replica) says
        // nothing about the disk.
        _ => Verdict::Connected(String::new()),
    }
}

/// What a failed login means for a person.
fn verdict(e: &tokio_postgres::Error, require_tls: bool) -> Verdict {
    if let Some(db) = e.as_db_error() {
        return server_error(db.code(), db.message());
    }
    // tokio-postgres names these only in its messages (and their sources').
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    if text.contains("server does not support TLS") {
        return Verdict::Protocol(
            "the server answered the TLS request in plain text, which an RDS instance never does: something between the operator and the database answers for it (nothing of the password was sent)".into(),
        );
    }
    if require_tls && text.contains("did not use channel binding") {
        return Verdict::Connected(
            "the server does not log in with SCRAM-SHA-256-PLUS (channel binding), which the check requires before it sends anything derived from the password; login not checked (set password_encryption = scram-sha-256 and reset the password to have it checked)".into(),
        );
    }
    if text.contains("invalid server signature") {
        return Verdict::Protocol(
            "the server's SCRAM signature does not verify: this is not the server the Secret names"
                .into(),
        );
    }
    if text.contains("unsupported authentication method") {
        return Verdict::Protocol(
            "the server asks for an authentication method the check does not speak (Kerberos, GSS or SSPI)".into(),
        );
    }
    Verdict::Protocol(format!("PostgreSQL login broke off: {text}"))
}

/// What an ErrorResponse means for a person.
fn server_error(code: &SqlState, text: &str) -> Verdict {
    match code {
        // "SCRAM channel binding check failed" (28000): the certificate
        // the operator saw is not the server's.
        c if *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            && text.contains("channel binding") =>
        {
            Verdict::Protocol(format!(
                "{text}: something between the operator and the database ends TLS with another certificate (nothing of the password was revealed)"
            ))
        }
        c if *c == SqlState::INVALID_PASSWORD
            || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
        {
            Verdict::AuthenticationFailed(text.to_string())
        }
        c if *c == SqlState::UNDEFINED_DATABASE => {
            Verdict::Refused(format!("the Secret's database does not exist: {text}"))
        }
        // Starting or shutting down, or full.
        c if *c == SqlState::CANNOT_CONNECT_NOW || *c == SqlState::TOO_MANY_CONNECTIONS => {
            Verdict::Connected(format!("the server answers but admits no one now: {text}"))
        }
        c => Verdict::Refused(format!(
            "the server refused the login ({}): {text}",
            c.code()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_name_the_cause() {
        assert!(matches!(
            server_error(&SqlState::INVALID_PASSWORD, "no"),
            Verdict::AuthenticationFailed(_)
        ));
        assert!(
            matches!(server_error(&SqlState::UNDEFINED_DATABASE, "no"), Verdict::Refused(m) if m.contains("database does not exist"))
        );
        assert!(matches!(
            server_error(&SqlState::CANNOT_CONNECT_NOW, "no"),
            Verdict::Connected(_)
        ));
        assert!(
            matches!(server_error(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION, "SCRAM channel binding check failed"), Verdict::Protocol(m) if m.contains("another certificate"))
        );
        assert!(
            matches!(server_error(&SqlState::PROTOCOL_VIOLATION, "x"), Verdict::Refused(m) if m.contains("08P01"))
        );
    }
}
