//! TLS for the connection check. The server's certificate is not checked
//! against a CA: RDS signs with its own CAs, in-cluster servers with none,
//! and the check asks "does this Secret let a client in", not "is this the
//! right server". The password is never sent where this matters: MD5 and
//! SCRAM never reveal it, and a clear-text request is not answered.

use std::sync::{Arc, LazyLock};

use rustls::{
    DigitallySignedStruct, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::WebPkiSupportedAlgorithms,
    pki_types::{CertificateDer, ServerName, UnixTime},
};
use tokio::net::TcpStream;
use tokio_rustls::{TlsConnector, client::TlsStream};

#[derive(Debug)]
struct AnyServer(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

static CONNECTOR: LazyLock<Result<TlsConnector, rustls::Error>> = LazyLock::new(|| {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(algorithms)))
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
});

/// A TLS session over `tcp` to `host`.
pub async fn connect(tcp: TcpStream, host: &str) -> std::io::Result<TlsStream<TcpStream>> {
    let connector = CONNECTOR
        .as_ref()
        .map_err(|e| std::io::Error::other(e.clone()))?;
    let name = ServerName::try_from(host.to_string()).map_err(std::io::Error::other)?;
    connector.connect(name, tcp).await
}
