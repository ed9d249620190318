//! The `token` profile's TLS material: a throwaway CA and a server certificate it signed, generated on
//! first start and kept next to the broker's data.
//!
//! The server certificate names `localhost` only (no IP address), so a client connecting to
//! `pulsar+ssl://127.0.0.1` with hostname verification on must fail, and one connecting to `localhost`
//! (or with hostname verification off) must succeed: the tests show both.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The PEM files of the broker's TLS listener.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA certificate: what clients trust (`tlsTrustCertsFilePath`).
    pub ca_cert: PathBuf,
    /// The broker's certificate (SAN `localhost`), signed by the CA.
    pub server_cert: PathBuf,
    /// The broker's private key, PKCS#8 (what the broker's `tlsKeyFilePath` requires).
    pub server_key: PathBuf,
}

/// The host name the server certificate is valid for.
pub const SERVER_NAME: &str = "localhost";

/// Generates the CA and the server certificate under `dir/tls` unless all three files are there.
pub fn ensure_tls_material(dir: &Path) -> Result<TlsFiles> {
    let tls_dir = dir.join("tls");
    let files = TlsFiles {
        ca_cert: tls_dir.join("ca.cert.pem"),
        server_cert: tls_dir.join("broker.cert.pem"),
        server_key: tls_dir.join("broker.key-pk8.pem"),
    };
    if files.ca_cert.is_file() && files.server_cert.is_file() && files.server_key.is_file() {
        return Ok(files);
    }
    fs::create_dir_all(&tls_dir).with_context(|| format!("creating {}", tls_dir.display()))?;
    let (ca_pem, cert_pem, key_pem) = generate().context("generating the broker's TLS material")?;
    fs::write(&files.ca_cert, ca_pem)?;
    fs::write(&files.server_cert, cert_pem)?;
    fs::write(&files.server_key, key_pem)?;
    Ok(files)
}

/// (CA certificate, server certificate, server key), PEM. The CA's key is not kept.
fn generate() -> Result<(String, String, String)> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "pulsar-connect test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(vec![SERVER_NAME.to_owned()])?;
    server
        .distinguished_name
        .push(DnType::CommonName, SERVER_NAME);
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &issuer)?;
    Ok((ca_cert.pem(), server_cert.pem(), server_key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_is_generated_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("xtask-tls-{}", std::process::id()));
        let files = ensure_tls_material(&dir).unwrap();
        let ca = fs::read_to_string(&files.ca_cert).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(
            fs::read_to_string(&files.server_key)
                .unwrap()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        let again = ensure_tls_material(&dir).unwrap();
        assert_eq!(fs::read_to_string(&again.ca_cert).unwrap(), ca);
        fs::remove_dir_all(&dir).unwrap();
    }
}
