//! The TLS material of the `token` and `mtls` profiles: a throwaway CA and a server certificate it
//! signed (and, for `mtls`, a client certificate it signed), generated on first start and kept next to
//! the broker's data.
//!
//! The server certificate names `localhost` only (no IP address), so a client connecting to
//! `pulsar+ssl://127.0.0.1` with hostname verification on must fail, and one connecting to `localhost`
//! (or with hostname verification off) must succeed: the tests show both. The client certificate's
//! common name is [`CLIENT_ROLE`], the role `AuthenticationProviderTls` gives its connections.

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
    /// The client's certificate (CN [`CLIENT_ROLE`]) and PKCS#8 key, signed by the same CA
    /// (`mtls` profile only).
    pub client: Option<(PathBuf, PathBuf)>,
}

/// The host name the server certificate is valid for.
pub const SERVER_NAME: &str = "localhost";

/// The client certificate's common name: the role its connections get (a superuser of the `mtls`
/// profile).
pub const CLIENT_ROLE: &str = "mtls-client";

/// Generates the CA and the server certificate (and with `client`, a client certificate) under
/// `dir/tls` unless all the files are there.
pub fn ensure_tls_material(dir: &Path, client: bool) -> Result<TlsFiles> {
    let tls_dir = dir.join("tls");
    let files = TlsFiles {
        ca_cert: tls_dir.join("ca.cert.pem"),
        server_cert: tls_dir.join("broker.cert.pem"),
        server_key: tls_dir.join("broker.key-pk8.pem"),
        client: client.then(|| {
            (
                tls_dir.join("client.cert.pem"),
                tls_dir.join("client.key-pk8.pem"),
            )
        }),
    };
    let mut all = vec![&files.ca_cert, &files.server_cert, &files.server_key];
    if let Some((cert, key)) = &files.client {
        all.extend([cert, key]);
    }
    if all.iter().all(|f| f.is_file()) {
        return Ok(files);
    }
    fs::create_dir_all(&tls_dir).with_context(|| format!("creating {}", tls_dir.display()))?;
    let material = generate(client).context("generating the broker's TLS material")?;
    fs::write(&files.ca_cert, material.ca_cert)?;
    fs::write(&files.server_cert, material.server_cert)?;
    fs::write(&files.server_key, material.server_key)?;
    if let (Some((cert, key)), Some((cert_pem, key_pem))) = (&files.client, material.client) {
        fs::write(cert, cert_pem)?;
        fs::write(key, key_pem)?;
    }
    Ok(files)
}

/// Generated PEM texts. The CA's key is not kept.
struct Material {
    ca_cert: String,
    server_cert: String,
    server_key: String,
    client: Option<(String, String)>,
}

fn generate(client: bool) -> Result<Material> {
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

    let client = if client {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, CLIENT_ROLE);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer)?;
        Some((cert.pem(), key.serialize_pem()))
    } else {
        None
    };
    Ok(Material {
        ca_cert: ca_cert.pem(),
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
        client,
    })
}

/// A fresh PKCS#8 key (PEM) that matches no certificate: for tests of a key that does not belong to
/// the client certificate.
pub fn unrelated_key_pem() -> Result<String> {
    Ok(KeyPair::generate()?.serialize_pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_is_generated_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("xtask-tls-{}", std::process::id()));
        let files = ensure_tls_material(&dir, false).unwrap();
        assert!(files.client.is_none());
        let ca = fs::read_to_string(&files.ca_cert).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(
            fs::read_to_string(&files.server_key)
                .unwrap()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        let again = ensure_tls_material(&dir, false).unwrap();
        assert_eq!(fs::read_to_string(&again.ca_cert).unwrap(), ca);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_mtls_material_has_a_client_certificate_from_the_same_ca() {
        let dir = std::env::temp_dir().join(format!("xtask-mtls-{}", std::process::id()));
        let files = ensure_tls_material(&dir, true).unwrap();
        let (cert, key) = files.client.clone().unwrap();
        assert!(
            fs::read_to_string(&cert)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(
            fs::read_to_string(&key)
                .unwrap()
                .starts_with("-----BEGIN PRIVATE KEY-----")
        );
        let ca = fs::read_to_string(&files.ca_cert).unwrap();
        let again = ensure_tls_material(&dir, true).unwrap();
        assert_eq!(fs::read_to_string(&again.ca_cert).unwrap(), ca);
        assert_ne!(
            unrelated_key_pem().unwrap(),
            fs::read_to_string(&key).unwrap()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
