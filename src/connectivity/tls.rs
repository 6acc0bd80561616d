//! TLS for the connection check.
//!
//! Postgres: the server's certificate is not checked against a CA. RDS
//! signs with its own CAs, in-cluster servers with none; SCRAM's channel
//! binding ties the login to the certificate seen instead (postgres.rs).
//!
//! Redis: `AUTH` sends the token itself, so the server must prove it is the
//! one the Secret names: its certificate must chain to a CA of the system
//! (`SSL_CERT_FILE`/`SSL_CERT_DIR` when set, as OpenSSL reads them) and
//! name the host. ElastiCache's certificates are signed by Amazon's public
//! CAs, which every system bundle holds.

use std::sync::{Arc, LazyLock};

use rustls::{
    DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    crypto::WebPkiSupportedAlgorithms,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
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

static ANY_SERVER: LazyLock<Result<Arc<rustls::ClientConfig>, rustls::Error>> =
    LazyLock::new(|| {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(algorithms)))
            .with_no_client_auth();
        Ok(Arc::new(config))
    });

/// A TLS client configuration that takes any server's certificate.
pub fn any_server() -> Result<Arc<rustls::ClientConfig>, rustls::Error> {
    ANY_SERVER.clone()
}

/// The CAs a server's certificate must chain to, as a ready connector.
#[derive(Clone)]
pub struct Trust(Arc<Result<TlsConnector, TrustError>>);

/// Why no server can be trusted, and what to set.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TrustError {
    #[error("no CA certificates found on this system ({found}): set SSL_CERT_FILE to a PEM bundle")]
    NoCertificates { found: String },
    #[error("{path} is not a PEM file of certificates: {reason}")]
    Pem { path: String, reason: String },
    #[error("no TLS client configuration: {0}")]
    Tls(rustls::Error),
}

impl Trust {
    /// The system's CA certificates (`SSL_CERT_FILE`/`SSL_CERT_DIR` when set).
    pub fn system() -> Trust {
        Trust::with(Vec::new())
    }

    /// The system's, and those of the PEM file at `path`.
    pub fn system_and_pem_file(path: &str) -> Result<Trust, TrustError> {
        let extra = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| TrustError::Pem {
                path: path.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Trust::with(extra))
    }

    fn with(extra: Vec<CertificateDer<'static>>) -> Trust {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(found.certs);
        roots.add_parsable_certificates(extra);
        if roots.is_empty() {
            let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Trust(Arc::new(Err(TrustError::NoCertificates {
                found: errors.join("; "),
            })));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|c| c.with_root_certificates(roots).with_no_client_auth());
        Trust(Arc::new(
            config
                .map(|c| TlsConnector::from(Arc::new(c)))
                .map_err(TrustError::Tls),
        ))
    }

    /// A TLS session over `tcp` to `host`, whose certificate must chain to
    /// these CAs and name `host`.
    pub async fn connect(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let connector = (self.0.as_ref().as_ref()).map_err(|e| std::io::Error::other(e.clone()))?;
        let name = ServerName::try_from(host.to_string()).map_err(std::io::Error::other)?;
        connector.connect(name, tcp).await
    }
}

/// Whether a TLS session failed on the server's certificate (rather than
/// on a server that does not speak TLS).
pub fn untrusted(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)))
}
