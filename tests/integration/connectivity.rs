//! The `Connectable` check against real servers: the test environment's
//! PostgreSQL (TLS, SCRAM and MD5 logins) and Redis (with and without a
//! password), from the system's packages. First the check itself, then
//! the operator's condition and gauges for RDS and ElastiCache resources
//! that moto answers at those servers.

use std::time::{Duration, Instant};

use cloud_resource_operator::{
    api::{Phase, Postgres, Redis},
    connectivity::{self, Target, Trust, Verdict},
};
use kube::Api;
use serde_json::json;

use crate::support::{
    DEFAULT_TIMEOUT, TestEnv, connectable, create_json, wait_for, wait_phase,
    with_operator_launched,
};

const TIMEOUT: Duration = Duration::from_secs(5);

/// The check as the tests' operators run it: trusting the system's CAs and
/// the test environment's, which signed its servers.
async fn check(target: &Target, timeout: Duration) -> Verdict {
    let ca = TestEnv::load().ca.display().to_string();
    let trust = Trust::system_and_pem_file(&ca).unwrap_or_else(|e| panic!("{e}"));
    connectivity::check(target, timeout, &trust, None).await
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} unset: source target/testenv/env.sh"))
}

fn address(var: &str) -> (String, u16) {
    let value = env(var);
    let (host, port) = value
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("{var}={value}"));
    (
        host.to_string(),
        port.parse().unwrap_or_else(|e| panic!("{var}: {e}")),
    )
}

fn postgres(user: &str, password: &str, database: &str) -> Target {
    let (host, port) = address("CRO_TESTENV_POSTGRES");
    Target::Postgres {
        host,
        port,
        user: user.into(),
        password: password.into(),
        database: database.into(),
        require_tls: false,
    }
}

fn redis(var: &str, password: Option<&str>) -> Target {
    let (host, port) = address(var);
    Target::Redis {
        host,
        port,
        password: password.map(str::to_string),
        tls: var == "CRO_TESTENV_REDIS_TLS",
    }
}

#[tokio::test]
async fn postgres_logins_over_tls_with_scram_and_md5() {
    crate::support::bounded("postgres_logins_over_tls_with_scram_and_md5", async move {
    let password = env("CRO_TESTENV_DB_PASSWORD");
    for user in ["cro_admin", "cro_md5"] {
        let verdict = check(&postgres(user, &password, "postgres"), TIMEOUT).await;
        assert_eq!(verdict, Verdict::Connected(String::new()), "{user}");
    }
    for user in ["cro_admin", "cro_md5"] {
        let verdict = check(&postgres(user, "not-the-password", "postgres"), TIMEOUT).await;
        assert!(
            matches!(&verdict, Verdict::AuthenticationFailed(m) if m.contains("password authentication failed")),
            "{user}: {verdict:?}"
        );
        let c = verdict.condition(&postgres(user, "x", "postgres"), TIMEOUT);
        assert_eq!(
            (c.status, c.reason.as_str()),
            (false, "AuthenticationFailed")
        );
        assert!(!c.message.contains("not-the-password"), "{}", c.message);
    }
    let verdict = check(&postgres("cro_admin", &password, "no_such_db"), TIMEOUT).await;
    assert!(
        matches!(&verdict, Verdict::Refused(m) if m.contains("database does not exist")),
        "{verdict:?}"
    );
    // As for an RDS instance: TLS and SCRAM with channel binding, or
    // nothing derived from the password is sent (MD5 is not checked).
    let rds = |user: &str, password: &str| with_tls_required(postgres(user, password, "postgres"));
    assert_eq!(
        check(&rds("cro_admin", &password), TIMEOUT).await,
        Verdict::Connected(String::new())
    );
    let wrong = check(&rds("cro_admin", "not-the-password"), TIMEOUT).await;
    assert!(
        matches!(wrong, Verdict::AuthenticationFailed(_)),
        "{wrong:?}"
    );
    for password in [password.as_str(), "not-the-password"] {
        let md5 = check(&rds("cro_md5", password), TIMEOUT).await;
        assert!(
            matches!(&md5, Verdict::Connected(m) if m.contains("channel binding") && m.contains("not checked")),
            "{md5:?}"
        );
    }
    }).await;
}

fn with_tls_required(mut target: Target) -> Target {
    if let Target::Postgres { require_tls, .. } = &mut target {
        *require_tls = true;
    }
    target
}

/// A relay on loopback to the test environment's PostgreSQL: what stands
/// between the operator and a database when a name or route is not the
/// database's. It answers the TLS request itself, in plain text (`None`)
/// or with TLS under another certificate than the server's.
async fn relay(tls: Option<tokio_rustls::TlsAcceptor>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let (host, server_port) = address("CRO_TESTENV_POSTGRES");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (host, tls) = (host.clone(), tls.clone());
            tokio::spawn(async move {
                let _: std::io::Result<()> = async {
                    let mut ssl_request = [0u8; 8];
                    client.read_exact(&mut ssl_request).await?;
                    let mut server =
                        tokio::net::TcpStream::connect((host.as_str(), server_port)).await?;
                    let Some(acceptor) = tls else {
                        client.write_all(b"N").await?;
                        return tokio::io::copy_bidirectional(&mut client, &mut server)
                            .await
                            .map(drop);
                    };
                    client.write_all(b"S").await?;
                    let mut client = acceptor.accept(client).await?;
                    server.write_all(&ssl_request).await?;
                    let mut answer = [0u8; 1];
                    server.read_exact(&mut answer).await?;
                    let ca = TestEnv::load().ca.display().to_string();
                    let trust = Trust::system_and_pem_file(&ca).map_err(std::io::Error::other)?;
                    let mut server = trust.connect(server, "localhost").await?;
                    tokio::io::copy_bidirectional(&mut client, &mut server)
                        .await
                        .map(drop)
                }
                .await;
            });
        }
    });
    port
}

/// TLS under the test environment's API server certificate: signed by the
/// same CA as the database's, but not the database's.
fn other_certificate() -> tokio_rustls::TlsAcceptor {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let pki = TestEnv::load().ca;
    let certs = CertificateDer::pem_file_iter(pki.with_file_name("apiserver.crt"))
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .unwrap_or_else(|e| panic!("{e}"));
    let key = PrivateKeyDer::from_pem_file(pki.with_file_name("apiserver.key"))
        .unwrap_or_else(|e| panic!("{e}"));
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .unwrap_or_else(|e| panic!("{e}"));
    tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config))
}

#[tokio::test]
async fn a_relay_between_the_operator_and_postgres_gets_no_login() {
    crate::support::bounded(
        "a_relay_between_the_operator_and_postgres_gets_no_login",
        async move {
            let password = env("CRO_TESTENV_DB_PASSWORD");
            let through = |port: u16, require_tls: bool| {
                let mut target = postgres("cro_admin", &password, "postgres");
                if let Target::Postgres {
                    host,
                    port: to,
                    require_tls: tls,
                    ..
                } = &mut target
                {
                    (*host, *to, *tls) = ("127.0.0.1".into(), port, require_tls);
                }
                target
            };
            // Plain text where an RDS instance always offers TLS: refused before
            // the startup message.
            let plain = relay(None).await;
            let verdict = check(&through(plain, true), TIMEOUT).await;
            assert!(
                matches!(&verdict, Verdict::Protocol(m) if m.contains("plain text")),
                "{verdict:?}"
            );
            // TLS ended at the relay under another certificate: the channel
            // binding of SCRAM-SHA-256-PLUS fails at the real server, for a cloud
            // database and an in-cluster one alike, although the relay passes
            // every byte on.
            let tls = relay(Some(other_certificate())).await;
            for require_tls in [true, false] {
                let verdict = check(&through(tls, require_tls), TIMEOUT).await;
                assert!(
                    matches!(&verdict, Verdict::Protocol(m) if m.contains("another certificate")),
                    "require_tls {require_tls}: {verdict:?}"
                );
            }
            // The same relays, and the same login, reach the server: what fails
            // above is the relay, not the login.
            let direct = check(
                &with_tls_required(postgres("cro_admin", &password, "postgres")),
                TIMEOUT,
            )
            .await;
            assert_eq!(direct, Verdict::Connected(String::new()));
            let in_cluster = check(&through(plain, false), TIMEOUT).await;
            assert_eq!(in_cluster, Verdict::Connected(String::new()));
        },
    )
    .await;
}

#[tokio::test]
async fn redis_auth_and_ping() {
    crate::support::bounded("redis_auth_and_ping", async move {
    let password = env("CRO_TESTENV_DB_PASSWORD");
    let connected = Verdict::Connected(String::new());
    assert_eq!(
        check(&redis("CRO_TESTENV_REDIS", None), TIMEOUT).await,
        connected
    );
    // A Secret's password for a server that has none is not a failure.
    let needless = check(&redis("CRO_TESTENV_REDIS", Some(&password)), TIMEOUT).await;
    assert_eq!(needless, connected);
    let with = check(&redis("CRO_TESTENV_REDIS_AUTH", Some(&password)), TIMEOUT).await;
    assert_eq!(with, connected);
    let wrong = check(&redis("CRO_TESTENV_REDIS_AUTH", Some("wrong")), TIMEOUT).await;
    assert!(
        matches!(wrong, Verdict::AuthenticationFailed(_)),
        "{wrong:?}"
    );
    let none = check(&redis("CRO_TESTENV_REDIS_AUTH", None), TIMEOUT).await;
    assert!(
        matches!(&none, Verdict::AuthenticationFailed(m) if m.contains("Secret has none")),
        "{none:?}"
    );
    // In-transit encryption, as ElastiCache's: AUTH inside the TLS session;
    // plain text to a TLS port is not taken for a Redis that answers.
    let tls = check(&redis("CRO_TESTENV_REDIS_TLS", Some(&password)), TIMEOUT).await;
    assert_eq!(tls, connected);
    let wrong = check(&redis("CRO_TESTENV_REDIS_TLS", Some("wrong")), TIMEOUT).await;
    assert!(
        matches!(wrong, Verdict::AuthenticationFailed(_)),
        "{wrong:?}"
    );
    // A server whose certificate chains to no CA the operator trusts is
    // never sent the token: the system's CAs alone do not vouch for it.
    let target = redis("CRO_TESTENV_REDIS_TLS", Some(&password));
    let untrusted = connectivity::check(&target, TIMEOUT, &Trust::system(), None).await;
    assert!(
        matches!(&untrusted, Verdict::Protocol(m) if m.contains("certificate is not trusted") && m.contains("not sent")),
        "{untrusted:?}"
    );
    let mut plain = redis("CRO_TESTENV_REDIS_TLS", Some(&password));
    if let Target::Redis { tls, .. } = &mut plain {
        *tls = false;
    }
    let verdict = check(&plain, TIMEOUT).await;
    assert!(!verdict.connected(), "{verdict:?}");
}).await;
}

#[tokio::test]
async fn closed_ports_silent_servers_and_unknown_names_fail_within_the_timeout() {
    crate::support::bounded(
        "closed_ports_silent_servers_and_unknown_names_fail_within_the_timeout",
        async move {
            let closed = {
                let l =
                    std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
                l.local_addr().unwrap_or_else(|e| panic!("{e}")).port()
            };
            let target = |host: &str, port| Target::Redis {
                host: host.into(),
                port,
                password: None,
                tls: false,
            };
            assert_eq!(
                check(&target("127.0.0.1", closed), TIMEOUT).await,
                Verdict::ConnectionRefused
            );
            // A server that accepts and never answers (what a path that drops
            // packets looks like once connected): timed out, within the timeout.
            let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let silent_port = silent.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
            let hold = tokio::spawn(async move {
                let mut held = Vec::new();
                while let Ok((conn, _)) = silent.accept().await {
                    held.push(conn);
                }
            });
            for t in [target("127.0.0.1", silent_port), postgres("x", "y", "z")] {
                let t = match t {
                    Target::Postgres {
                        user,
                        password,
                        database,
                        require_tls,
                        ..
                    } => Target::Postgres {
                        host: "127.0.0.1".into(),
                        port: silent_port,
                        user,
                        password,
                        database,
                        require_tls,
                    },
                    other => other,
                };
                let started = Instant::now();
                assert_eq!(check(&t, TIMEOUT).await, Verdict::TimedOut);
                assert!(
                    started.elapsed() < TIMEOUT + Duration::from_secs(1),
                    "{:?}",
                    started.elapsed()
                );
            }
            hold.abort();
            // TEST-NET-1 (RFC 5737) is routed nowhere; this sandbox's network
            // refuses it at once, elsewhere the connect hangs: not connected,
            // within the timeout, either way.
            let started = Instant::now();
            let verdict = check(&target("192.0.2.1", 5432), TIMEOUT).await;
            assert!(!verdict.connected(), "{verdict:?}");
            assert!(started.elapsed() < TIMEOUT + Duration::from_secs(1));
            // `.invalid` never resolves (RFC 2606).
            let verdict = check(&target("db.example.invalid", 5432), TIMEOUT).await;
            assert!(
                matches!(verdict, Verdict::NameNotResolved(_)),
                "{verdict:?}"
            );
            let c = verdict.condition(&target("db.example.invalid", 5432), TIMEOUT);
            assert_eq!((c.status, c.reason.as_str()), (false, "NameNotResolved"));
        },
    )
    .await;
}

/// The gauge's line for `resource` in the operator's /metrics.
fn gauge(metrics: &str, family: &str, ns: &str, resource: &str) -> Option<String> {
    let labels = format!("resourceID=\"{resource}\",namespace=\"{ns}\"");
    metrics
        .lines()
        .find(|l| l.starts_with(family) && l.contains(&labels))
        .map(str::to_string)
}

/// A Postgres and a Redis on AWS whose endpoints moto answers at the real
/// servers (the productName label marks them): Connectable True and the
/// Go gauges at 1; a password changed behind the operator's back turns
/// the Postgres to AuthenticationFailed and its gauge to 0. With the
/// default check interval everywhere but that last step.
#[tokio::test]
async fn rds_and_elasticache_report_connectable_and_the_go_gauges() {
    let adjust = |l: &mut crate::support::Launch| {
        l.extra_args.push("--connection-check-interval=2".into());
    };
    with_operator_launched("conn", adjust, |client, ns, op| async move {
        let meta = |name: &str| json!({"name": name, "labels": {"productName": "cro-test-real-backend"}});
        let spec = |name: &str| json!({"type": "managed", "tier": "development", "secretRef": {"name": format!("{name}-sec")}});
        let _: Postgres = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Postgres", "metadata": meta("db"), "spec": spec("db")})).await;
        let _: Redis = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": meta("cache"), "spec": spec("cache")})).await;
        let pgs = Api::<Postgres>::namespaced(client.clone(), &ns);
        let caches = Api::<Redis>::namespaced(client.clone(), &ns);
        wait_phase(&pgs, "db", Phase::Complete).await;
        wait_phase(&caches, "cache", Phase::Complete).await;
        let want = Some(("True".to_string(), "Connected".to_string()));
        wait_for(&pgs, "db", "Connectable True", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == want
        })
        .await;
        wait_for(&caches, "cache", "Connectable True", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == want
        })
        .await;
        let metrics = op.http_get("/metrics").await;
        let pg = gauge(&metrics, "cro_postgres_connection", &ns, "db").unwrap_or_else(|| panic!("no Postgres gauge:\n{metrics}"));
        assert!(pg.contains("clusterID=\"testcluster\"") && pg.contains("productName=\"cro-test-real-backend\"") && pg.contains("strategy=\"aws-rds\"") && pg.ends_with(" 1"), "{pg}");
        let redis = gauge(&metrics, "cro_redis_connection", &ns, "cache").unwrap_or_else(|| panic!("no Redis gauge:\n{metrics}"));
        assert!(redis.contains("strategy=\"aws-elasticache\"") && redis.ends_with(" 1"), "{redis}");
        // The Go operator's database gauges, from what the operator read
        // of RDS and ElastiCache (exposePostgresMetrics, exposeRedisMetrics).
        for (family, ends) in [("cro_postgres_available", " 1"), ("cro_redis_available", " 1"), ("cro_postgres_current_allocated_storage", " 21474836480")] {
            let name = if family.starts_with("cro_redis") { "cache" } else { "db" };
            let line = gauge(&metrics, family, &ns, name).unwrap_or_else(|| panic!("no {family}:\n{metrics}"));
            assert!(line.contains("clusterID=\"testcluster\"") && line.ends_with(ends), "{line}");
        }
        for (family, name) in [("cro_postgres_info", "db"), ("cro_redis_info", "cache")] {
            let line = gauge(&metrics, family, &ns, name).unwrap_or_else(|| panic!("no {family}:\n{metrics}"));
            let at: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_default();
            assert!(line.contains("status=\"available\"") && at > 1.7e9, "{line}");
        }
        // The group is encrypted in transit: the check spoke TLS and AUTH.
        let secret = secret_data(&client, &ns, "cache-sec").await;
        assert_eq!((secret.get("tls").map(String::as_str), secret.contains_key("password")), (Some("true"), true));

        // Someone changes the master password behind the operator's back.
        let (host, port) = address("CRO_TESTENV_POSTGRES");
        let changed = std::process::Command::new("psql")
            .args(["-q", "-h", &host, "-p", &port.to_string(), "-U", "cro_admin", "-d", "postgres", "-c", "ALTER ROLE postgres PASSWORD 'changed-elsewhere'"])
            .env("PGPASSWORD", env("CRO_TESTENV_DB_PASSWORD"))
            .status()
            .unwrap_or_else(|e| panic!("psql: {e}"));
        assert!(changed.success());
        let failed = Some(("False".to_string(), "AuthenticationFailed".to_string()));
        let pg = wait_for(&pgs, "db", "Connectable False (authentication)", DEFAULT_TIMEOUT, |o: Option<&Postgres>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == failed
        })
        .await;
        assert_eq!(pg.status.as_ref().and_then(|s| s.phase), Some(Phase::Complete), "the check never changes the phase");
        let metrics = op.http_get("/metrics").await;
        let line = gauge(&metrics, "cro_postgres_connection", &ns, "db").unwrap_or_default();
        assert!(line.ends_with(" 0"), "{line}");
    })
    .await;
}

/// A tier whose clients cannot speak TLS (the Go operator's default, for
/// 3scale) turns in-transit encryption off: the group has no AUTH token,
/// the Secret neither `tls` nor `password`, and a plain client connects.
#[tokio::test]
async fn a_tier_without_transit_encryption_gets_a_plain_group_that_connects() {
    with_operator_launched("plainredis", |_| {}, |client, ns, _op| async move {
        let tiers = json!({"development": {"createStrategy": {"TransitEncryptionEnabled": false}}});
        crate::aws::aws_strategies_for(&client, &ns, "redis", tiers).await;
        let meta = json!({"name": "cache", "labels": {"productName": "cro-test-real-backend"}});
        let spec = json!({"type": "managed", "tier": "development", "secretRef": {"name": "cache-sec"}});
        let _: Redis = create_json(&client, &ns, json!({"apiVersion": "integreatly.org/v1alpha1", "kind": "Redis", "metadata": meta, "spec": spec})).await;
        let caches = Api::<Redis>::namespaced(client.clone(), &ns);
        wait_phase(&caches, "cache", Phase::Complete).await;
        let secret = secret_data(&client, &ns, "cache-sec").await;
        assert_eq!(secret.keys().cloned().collect::<Vec<_>>(), ["port", "uri"]);
        let want = Some(("True".to_string(), "Connected".to_string()));
        wait_for(&caches, "cache", "Connectable True", DEFAULT_TIMEOUT, |o: Option<&Redis>| {
            o.and_then(|o| o.status.as_ref()).and_then(|s| connectable(&s.conditions)) == want
        })
        .await;
        let created = crate::support::aws_requests().into_iter().find(|r| r["action"] == "CreateReplicationGroup" && r["params"].to_string().contains(&format!("{ns}/cache")));
        let params = created.map(|r| r["params"].clone()).unwrap_or_default();
        assert_eq!(params["TransitEncryptionEnabled"][0], "false", "{params}");
        assert!(params.get("AuthToken").is_none(), "an AUTH token was sent: {params}");
    })
    .await;
}

async fn secret_data(
    client: &kube::Client,
    ns: &str,
    name: &str,
) -> std::collections::BTreeMap<String, String> {
    let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}
