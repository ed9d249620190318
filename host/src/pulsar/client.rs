//! Connecting to a Pulsar cluster.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use magnetar::proto::auth::{TlsAuth, TokenAuth};
use magnetar::runtime_tokio::{self as runtime, Client as RuntimeClient};
use magnetar::{AuthProvider, PulsarClient, SupervisorConfig};

use super::client_cert::ClientCert;
use super::oauth2::OAuth2;

/// How the client authenticates. `Debug` never prints a secret.
#[derive(Clone, Default)]
pub enum Authentication {
    #[default]
    None,
    /// A JWT, as `auth-params = 'token:<jwt>'` gives it.
    Token(String),
    /// OAuth2 client credentials (`AuthenticationOAuth2`): the access token is fetched from the issuer
    /// and refreshed; every connection of the table shares it.
    OAuth2(Arc<OAuth2>),
    /// TLS client certificate (`AuthenticationTls`): the broker takes the role from the certificate
    /// of the TLS handshake ([`TlsOptions::client_cert`]); `CONNECT` names the method `tls`.
    Tls,
}

impl fmt::Debug for Authentication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authentication::None => f.write_str("None"),
            Authentication::Token(_) => f.write_str("Token(<redacted>)"),
            Authentication::OAuth2(o) => f.debug_tuple("OAuth2").field(o).finish(),
            Authentication::Tls => f.write_str("Tls"),
        }
    }
}

impl Authentication {
    /// What must never appear in a message (tokens, client secrets).
    pub fn secrets(&self) -> Vec<String> {
        match self {
            Authentication::None | Authentication::Tls => Vec::new(),
            Authentication::Token(t) => vec![t.clone()],
            Authentication::OAuth2(o) => o.secrets(),
        }
    }

    /// The provider a connection authenticates with (OAuth2: with a fresh token). Errors never
    /// carry a secret.
    pub async fn provider(
        &self,
        tls: &TlsOptions,
    ) -> Result<Option<Arc<dyn AuthProvider>>, String> {
        let provider: Arc<dyn AuthProvider> = match self {
            Authentication::None => return Ok(None),
            Authentication::Token(token) => Arc::new(TokenAuth::from_string(token.clone())),
            Authentication::OAuth2(o) => o.flow(tls).await?,
            // The certificate travels in the handshake; the command carries no data.
            Authentication::Tls => Arc::new(TlsAuth::from_pem_bytes(
                bytes::Bytes::new(),
                bytes::Bytes::new(),
            )),
        };
        Ok(Some(provider))
    }
}

/// TLS settings of `pulsar+ssl://` service URLs and `https://` admin URLs.
#[derive(Clone)]
pub struct TlsOptions {
    /// `tls-trust-certs-file-path`, for messages.
    pub trust_certs_file: Option<String>,
    /// Its PEM content, read when the table is configured: the only trust anchors of the broker
    /// connection (the admin client and the OAuth2 issuer add them to the system's).
    pub trust_certs_pem: Option<Arc<Vec<u8>>>,
    /// `tls-allow-insecure-connection`: accept any certificate.
    pub allow_insecure: bool,
    /// `tls-hostname-verification-enable` (default true).
    pub hostname_verification: bool,
    /// The certificate presented to brokers that ask for one (`AuthenticationTls`'s `tlsCertFile` /
    /// `tlsKeyFile`, or `tls-certificate-file-path` / `tls-key-file-path`), read when the table is
    /// configured.
    pub client_cert: Option<ClientCert>,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            trust_certs_file: None,
            trust_certs_pem: None,
            allow_insecure: false,
            hostname_verification: true,
            client_cert: None,
        }
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("trust_certs_file", &self.trust_certs_file)
            .field("allow_insecure", &self.allow_insecure)
            .field("hostname_verification", &self.hostname_verification)
            .field("client_cert", &self.client_cert)
            .finish()
    }
}

/// What [`connect`] needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `pulsar://host:port` or `pulsar+ssl://host:port`.
    pub service_url: String,
    pub auth: Authentication,
    pub tls: TlsOptions,
    /// Deadline of one client operation (lookup, subscribe, create producer, ...).
    pub operation_timeout: Duration,
}

impl ClientConfig {
    pub fn new(service_url: impl Into<String>) -> Self {
        ClientConfig {
            service_url: service_url.into(),
            auth: Authentication::None,
            tls: TlsOptions::default(),
            operation_timeout: Duration::from_secs(30),
        }
    }

    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth = Authentication::Token(token.into());
        self
    }

    pub fn with_tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }

    /// Whether the service URL is `pulsar+ssl://`.
    pub fn is_tls(&self) -> bool {
        self.service_url.starts_with("pulsar+ssl://")
    }
}

/// Errors of [`connect`], naming the service URL (never the credentials).
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to Pulsar at {service_url}: {reason}")]
pub struct ConnectError {
    pub service_url: String,
    pub reason: String,
}

/// Connects, with supervised reconnect (producers and consumers are re-attached after a broker restart).
pub async fn connect(config: &ClientConfig) -> Result<PulsarClient, ConnectError> {
    register_batch_decompressor();
    let mut builder = PulsarClient::builder()
        .service_url(config.service_url.clone())
        .operation_timeout(config.operation_timeout)
        // A consumer that holds permits over a backlog and receives nothing for this long is re-attached
        // (magnetar's stall watchdog); redelivered messages are dropped by the split readers.
        .consumer_stall_timeout(Duration::from_secs(10))
        .consumer_stall_auto_recovery(5)
        .enable_reconnect(SupervisorConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            ..SupervisorConfig::default()
        });
    let fail = |reason: String| ConnectError {
        service_url: config.service_url.clone(),
        reason: redact(&reason, &config.auth),
    };
    if let Some(provider) = config.auth.provider(&config.tls).await.map_err(fail)? {
        builder = builder.auth(provider);
    }
    if config.tls.client_cert.is_some() && config.is_tls() {
        builder = builder.tls_config(rustls_config(&config.tls).map_err(fail)?);
    } else {
        if let Some(pem) = &config.tls.trust_certs_pem {
            builder = builder.tls_trust_certs_pem(pem.as_slice().to_vec());
        }
        builder = builder
            .tls_allow_insecure_connection(config.tls.allow_insecure)
            .tls_hostname_verification_enable(config.tls.hostname_verification);
    }
    builder
        .build()
        .await
        .map_err(|e| fail(with_tls_hint(e.to_string(), config)))
}

/// The `rustls` configuration of `pulsar+ssl://` connections: trust anchors (the trust file only, or
/// the system's), the verifier (`tls-allow-insecure-connection`, `tls-hostname-verification-enable`)
/// and the client certificate. Errors name no secret.
pub fn rustls_config(tls: &TlsOptions) -> Result<Arc<rustls::ClientConfig>, String> {
    let base = if tls.allow_insecure {
        runtime::insecure_tls_config()
    } else if let Some(pem) = &tls.trust_certs_pem {
        if tls.hostname_verification {
            RuntimeClient::tls_config_from_pem(pem)
        } else {
            runtime::tls_config_no_hostname(pem)
        }
        .map_err(|e| format!("option 'tls-trust-certs-file-path': {e}"))?
    } else {
        runtime::default_tls_config().map_err(|e| e.to_string())?
    };
    Ok(match &tls.client_cert {
        Some(cert) => cert.add_to(&base),
        None => base,
    })
}

/// A TLS failure with what to change (the rustls reason alone names no option).
pub fn with_tls_hint(reason: String, config: &ClientConfig) -> String {
    let lower = reason.to_ascii_lowercase();
    // A broker that wants a client certificate refuses it after its side of the TLS 1.3 handshake:
    // the client sees an alert, or (magnetar) only "handshake failed" without a broker reason.
    let refused_client = [
        "certificaterequired",
        "certificate required",
        "badcertificate",
        "bad certificate",
        "certificateunknown",
        "unknownca",
    ]
    .iter()
    .any(|alert| lower.contains(alert))
        || (lower.trim_end().ends_with("handshake failed"));
    if refused_client && config.is_tls() {
        return match &config.tls.client_cert {
            None => format!(
                "{reason} (TLS: the broker closed the connection after the TLS handshake; a broker that requires a client certificate does so: set 'auth-plugin-classname' = 'tls' with 'auth-params' = 'tlsCertFile:<cert.pem>,tlsKeyFile:<key.pem>', or 'tls-certificate-file-path' and 'tls-key-file-path')"
            ),
            Some(cert) => format!(
                "{reason} (TLS: the broker closed the connection after the TLS handshake; did it refuse the client certificate {}? It must be signed by a CA the broker trusts (the broker's 'tlsTrustCertsFilePath'))",
                cert.cert_file
            ),
        };
    }
    if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        format!(
            "{reason} (TLS: the broker's certificate is not valid for this host name: connect with a host name the certificate names, or set 'tls-hostname-verification-enable' = 'false')"
        )
    } else if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
        let trust = match &config.tls.trust_certs_file {
            Some(f) => format!("the certificates of 'tls-trust-certs-file-path' ({f})"),
            None => "the system's trust store ('tls-trust-certs-file-path' is not set)".to_owned(),
        };
        format!(
            "{reason} (TLS: the broker's certificate is not signed by a CA of {trust}; set 'tls-trust-certs-file-path' to the CA certificate that signed it)"
        )
    } else {
        reason
    }
}

/// Compressed batches are decompressed before they are split (third_party/README.md): the protocol
/// crate has no codecs, so the runtime's bounded decompressor is registered once per process.
fn register_batch_decompressor() {
    fn decompress(kind: i32, data: &[u8], size: usize) -> Result<bytes::Bytes, String> {
        use magnetar::proto::pb::CompressionType;
        use magnetar::runtime_tokio::compress;
        let pb = CompressionType::try_from(kind)
            .map_err(|_| format!("unknown compression type {kind}"))?;
        compress::decompress(compress::kind_from_pb(pb), data, size).map_err(|e| e.to_string())
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        magnetar::proto::batch_payload::set_batch_decompressor(decompress);
        // Nothing here reads the per-message observational events: building them cloned every
        // delivered message (third_party/README.md, magnetar-proto patch 10).
        magnetar::proto::set_observational_events(false);
        // Grants sized in entries, so a consumer of batched topics holds about a receiver queue of
        // messages (third_party/README.md, magnetar-proto patch 11).
        magnetar::proto::set_entry_sized_flow(true);
    });
}

/// Removes the secrets (token, client secret, access token) from a message in case a lower layer
/// echoed them.
pub fn redact(message: &str, auth: &Authentication) -> String {
    let mut out = message.to_owned();
    for secret in auth.secrets() {
        if !secret.is_empty() {
            out = out.replace(secret.as_str(), "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_errors_never_show_the_token() {
        let cfg = ClientConfig::new("pulsar://127.0.0.1:1").with_token("s3cr3t.jwt.value");
        assert!(!format!("{cfg:?}").contains("s3cr3t"));
        assert_eq!(
            redact("bad token s3cr3t.jwt.value", &cfg.auth),
            "bad token <redacted>"
        );
    }
}
