//! A Redis check that goes as far as `AUTH` (when the Secret has a
//! password) and `PING`, with the `redis` crate, over TLS when the Secret
//! says so (ElastiCache in-transit encryption).

use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisError, aio::MultiplexedConnection};

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

/// The `redis` crate speaks RESP; the connection is opened without a
/// password so `AUTH` can be sent and judged here: a Secret's password for
/// a server that has none is not a failure (the crate's own handshake
/// would fail it).
async fn session(stream: Stream, password: Option<&str>) -> Result<Verdict, RedisError> {
    // The caller's deadline bounds the whole check, not the crate's 500 ms.
    let config = AsyncConnectionConfig::new().set_response_timeout(None);
    let (mut connection, driver) =
        MultiplexedConnection::new_with_config(&RedisConnectionInfo::default(), stream, config)
            .await?;
    let driver = AbortOnDrop(tokio::spawn(driver));
    if let Some(password) = password {
        match redis::cmd("AUTH")
            .arg(password)
            .exec_async(&mut connection)
            .await
        {
            Ok(()) => {}
            Err(e) if no_password_configured(&e) => {}
            // WRONGPASS, or another refusal the server names.
            Err(e) if e.code().is_some() => {
                return Ok(Verdict::AuthenticationFailed(e.to_string()));
            }
            Err(e) => return Err(e),
        }
    }
    let ping = redis::cmd("PING")
        .query_async::<String>(&mut connection)
        .await;
    let failed_write = match ping {
        Ok(ref pong) if pong == "PONG" => persistence(&mut connection).await,
        _ => None,
    };
    drop(driver);
    Ok(match ping {
        Ok(pong) if pong == "PONG" => match failed_write {
            Some(failed) => Verdict::StorageFull(failed),
            None => Verdict::Connected(String::new()),
        },
        Ok(other) => Verdict::Protocol(format!(
            "unexpected answer to PING: {:?}",
            truncated(&other)
        )),
        Err(e) => match e.code() {
            Some("NOAUTH") => Verdict::AuthenticationFailed(
                "the server requires a password and the Secret has none".into(),
            ),
            // A master that failed to write its append-only file or
            // snapshot refuses PING as it does every write.
            Some("MISCONF") => Verdict::StorageFull(e.to_string()),
            Some("LOADING" | "BUSY") => {
                Verdict::Connected(format!("the server answers but is not serving yet: {e}"))
            }
            Some(_) => Verdict::Protocol(format!("unexpected answer to PING: {e}")),
            None => return Err(e),
        },
    })
}

/// What `INFO persistence` says of a write to disk that failed: Redis
/// then refuses every write (`MISCONF`) until the file can be written, a
/// full disk most often (the errno is in its log, not in `INFO`); a master
/// refuses `PING` too, a replica answers it. `None`
/// when both its last append-only file write and its last snapshot
/// succeeded, or when `INFO` is not allowed (ElastiCache allows it).
async fn persistence(connection: &mut MultiplexedConnection) -> Option<String> {
    let info = redis::cmd("INFO")
        .arg("persistence")
        .query_async::<String>(connection)
        .await
        .ok()?;
    failed_persistence(&info)
}

fn failed_persistence(info: &str) -> Option<String> {
    let failed: Vec<&str> = (info.lines().map(str::trim))
        .filter(|l| {
            matches!(
                *l,
                "aof_last_write_status:err" | "rdb_last_bgsave_status:err"
            )
        })
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "Redis reports {}: it refuses every write until it can write to its disk",
            failed.join(" and ")
        )
    })
}

/// Redis's answer to `AUTH` when it has no password (`ERR AUTH <password>
/// called without any password configured for the default user`).
fn no_password_configured(e: &RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.contains("without any password configured"))
}

/// The connection's driver task, stopped when the check is over.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn truncated(s: &str) -> &str {
    s.get(..80).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_to_disk_is_read_from_info_persistence() {
        let ok = "# Persistence\r\nloading:0\r\nrdb_last_bgsave_status:ok\r\naof_enabled:1\r\naof_last_write_status:ok\r\n";
        assert_eq!(failed_persistence(ok), None);
        let full = ok.replace("aof_last_write_status:ok", "aof_last_write_status:err");
        let said = failed_persistence(&full).unwrap_or_default();
        assert!(
            said.contains("aof_last_write_status:err") && !said.contains("rdb_"),
            "{said}"
        );
        let both = full.replace("rdb_last_bgsave_status:ok", "rdb_last_bgsave_status:err");
        let said = failed_persistence(&both).unwrap_or_default();
        assert!(
            said.contains("rdb_last_bgsave_status:err and aof_last_write_status:err"),
            "{said}"
        );
    }
}
