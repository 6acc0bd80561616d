//! The HTTP(S) client under every cloud API call, fenced where bytes leave
//! the process (see [`crate::fence`]): each write to a socket (the TLS
//! handshake, a request's head, its body) asks the fence first. A check
//! before sending is not enough: a process frozen after it and woken later
//! still holds the request, and one without a body (a HEAD, GET or
//! DELETE) has nothing else that would be asked.
//!
//! hyper-util's pooled client, rustls with aws-lc-rs and the system's
//! roots, HTTP/1.1, over the fenced socket, through the environment's
//! proxy (see [`crate::proxy`]).

use std::{sync::Arc, time::Duration};

use hyper_rustls::HttpsConnector;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector as TcpConnector},
    rt::{TokioExecutor, TokioTimer},
};

use crate::{
    Fence,
    fenced_socket::FencedTcp,
    proxy::{Proxies, ViaProxy},
};

/// A pooled client sending bodies of type `B`.
pub type FencedClient<B> = Client<HttpsConnector<ViaProxy>, B>;

/// A client whose sockets write only while `fence` allows, connecting
/// within `connect_timeout`, through `proxies`.
pub fn fenced_client<B>(
    fence: Fence,
    connect_timeout: Duration,
    proxies: Proxies,
) -> FencedClient<B>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
{
    let mut tcp = TcpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config())
        .https_or_http()
        .enable_http1()
        .wrap_connector(ViaProxy::new(FencedTcp::new(tcp, fence), proxies));
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build(https)
}

/// TLS as the AWS SDK's default client has it: rustls on aws-lc-rs,
/// trusting the system's roots (none found is logged, and every HTTPS call
/// then fails naming the certificate).
pub fn tls_config() -> rustls::ClientConfig {
    let found = rustls_native_certs::load_native_certs();
    if !found.errors.is_empty() {
        tracing::warn!(errors = ?found.errors, "reading the system's root certificates");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!(
            "no root certificates found on this system: HTTPS calls to the cloud will fail"
        );
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap_or_else(|e| unreachable!("aws-lc-rs supports the default TLS versions: {e}"))
        .with_root_certificates(roots)
        .with_no_client_auth()
}
