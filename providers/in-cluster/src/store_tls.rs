//! The certificates that lock a BlobStorage store's gRPC ports. SeaweedFS
//! serves its IAM cache on a gRPC port beside S3 on every address, and
//! without mutual TLS anyone who reaches the pod could add an identity or
//! delete objects there. Every component gets one certificate signed by a
//! CA made for this store alone, whose key is dropped at once: nothing
//! outside the pod can ever hold a client certificate it accepts.

use std::collections::BTreeMap;

use cro_provider_api::ProviderError;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

/// The credentials Secret's keys, mounted as these files.
pub const FILES: [(&str, &str); 3] = [
    ("grpcCA", "ca.crt"),
    ("grpcCert", "tls.crt"),
    ("grpcKey", "tls.key"),
];

/// Where the files are mounted in the store's pod.
pub const MOUNT_PATH: &str = "/etc/seaweedfs/tls";

/// The CA, certificate and key, by their keys in [`FILES`].
pub fn generate() -> Result<BTreeMap<String, String>, ProviderError> {
    let fail = |e: rcgen::Error| {
        ProviderError::transient(format!("making the object store's certificates: {e}"))
    };
    let ca_key = KeyPair::generate().map_err(fail)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(
        DnType::CommonName,
        "cloud-resource-operator object store CA",
    );
    let ca_cert = ca.self_signed(&ca_key).map_err(fail)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().map_err(fail)?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .map_err(fail)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "seaweedfs");
    leaf.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = leaf.signed_by(&key, &issuer).map_err(fail)?;
    Ok(BTreeMap::from([
        (FILES[0].0.to_string(), ca_cert.pem()),
        (FILES[1].0.to_string(), cert.pem()),
        (FILES[2].0.to_string(), key.serialize_pem()),
    ]))
}

/// The environment that makes every SeaweedFS component serve and dial
/// gRPC with the certificate (its `security.toml` keys as variables).
pub fn env() -> Vec<serde_json::Value> {
    let file = |name: &str| format!("{MOUNT_PATH}/{name}");
    let mut env = vec![serde_json::json!({"name": "WEED_GRPC_CA", "value": file(FILES[0].1)})];
    for component in ["MASTER", "VOLUME", "FILER", "S3", "CLIENT"] {
        env.push(serde_json::json!({"name": format!("WEED_GRPC_{component}_CERT"), "value": file(FILES[1].1)}));
        env.push(serde_json::json!({"name": format!("WEED_GRPC_{component}_KEY"), "value": file(FILES[2].1)}));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_the_cas_and_serves_and_dials() {
        let made = generate().expect("certificates");
        assert!(made["grpcCA"].starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(made["grpcCert"].starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(made["grpcKey"].contains("PRIVATE KEY"));
        assert_ne!(made["grpcCA"], made["grpcCert"]);
        // Two stores never share a CA.
        assert_ne!(generate().expect("certificates")["grpcCA"], made["grpcCA"]);
    }
}
