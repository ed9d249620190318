//! TLS client certificates: what Java's `AuthenticationTls` (`tlsCertFile`, `tlsKeyFile`) and the client
//! settings `tlsCertificateFilePath` / `tlsKeyFilePath` present to a broker that asks for one.
//!
//! The certificate chain and the key are parsed once, when the table is configured, and checked to
//! belong together; the same material then serves the broker connections (a `rustls` client
//! configuration), the transaction coordinator and the admin REST clients (a `reqwest` identity).
//! Neither the key nor its file name is ever printed.

use std::fmt;
use std::sync::Arc;

use magnetar::runtime_tokio::tls_crypto;
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, SignatureScheme};

/// A client certificate chain with its private key, checked to match.
#[derive(Clone)]
pub struct ClientCert {
    /// The certificate file, for messages (the key file is never named).
    pub cert_file: String,
    key: Arc<CertifiedKey>,
    /// The certificate chain and the key as one PEM text, what `reqwest::Identity` reads.
    identity_pem: Arc<Vec<u8>>,
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCert")
            .field("cert_file", &self.cert_file)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// Which of the two inputs an error is about, so the caller can name its option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Cert,
    Key,
}

/// Why the material was refused. The message never quotes the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertError {
    pub part: Part,
    pub message: String,
}

impl ClientCert {
    /// Parses the PEM chain (`cert_file` names it in messages) and the PEM key (PKCS#8, PKCS#1 or
    /// SEC1), and checks that the key is the one the first certificate certifies.
    pub fn from_pem(
        cert_file: &str,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<ClientCert, CertError> {
        let cert_err = |message: String| CertError {
            part: Part::Cert,
            message,
        };
        let key_err = |message: &str| CertError {
            part: Part::Key,
            message: message.to_owned(),
        };
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_err(format!("{cert_file} is not a PEM certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(cert_err(format!(
                "{cert_file} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            )));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| {
            key_err("the key file holds no PEM private key (PKCS#8 '-----BEGIN PRIVATE KEY-----', PKCS#1 RSA or SEC1 EC)")
        })?;
        let provider = tls_crypto::active_provider();
        let key = CertifiedKey::from_der(chain, key, &provider).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => CertError {
                part: Part::Key,
                message: format!(
                    "the private key does not belong to the certificate of {cert_file} (its public key differs)"
                ),
            },
            _ => key_err("the private key cannot be used (unsupported key type or malformed key)"),
        })?;
        let mut identity_pem = cert_pem.to_vec();
        if !identity_pem.ends_with(b"\n") {
            identity_pem.push(b'\n');
        }
        identity_pem.extend_from_slice(key_pem);
        Ok(ClientCert {
            cert_file: cert_file.to_owned(),
            key: Arc::new(key),
            identity_pem: Arc::new(identity_pem),
        })
    }

    /// `base` with this certificate presented whenever a server asks for one.
    pub fn add_to(&self, base: &ClientConfig) -> Arc<ClientConfig> {
        let mut config = base.clone();
        config.client_auth_cert_resolver = Arc::new(Resolver(self.key.clone()));
        Arc::new(config)
    }

    /// The same material for `reqwest` (admin REST calls over `https://`).
    pub fn identity(&self) -> Result<reqwest::Identity, String> {
        reqwest::Identity::from_pem(&self.identity_pem).map_err(|_| {
            format!(
                "the client certificate {} and its key cannot be used for HTTPS",
                self.cert_file
            )
        })
    }
}

/// Always offers the one certificate.
struct Resolver(Arc<CertifiedKey>);

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCertResolver(<redacted>)")
    }
}

impl ResolvesClientCert for Resolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}
