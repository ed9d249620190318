//! Connecting to a Pulsar cluster.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use magnetar::proto::auth::TokenAuth;
use magnetar::{PulsarClient, SupervisorConfig};

/// How the client authenticates. `Debug` never prints the secret.
#[derive(Clone, Default)]
pub enum Authentication {
    #[default]
    None,
    /// A JWT, as `auth-params = 'token:<jwt>'` gives it.
    Token(String),
}

impl fmt::Debug for Authentication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Authentication::None => f.write_str("None"),
            Authentication::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

/// What [`connect`] needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `pulsar://host:port` or `pulsar+ssl://host:port`.
    pub service_url: String,
    pub auth: Authentication,
    /// Deadline of one client operation (lookup, subscribe, create producer, ...).
    pub operation_timeout: Duration,
}

impl ClientConfig {
    pub fn new(service_url: impl Into<String>) -> Self {
        ClientConfig {
            service_url: service_url.into(),
            auth: Authentication::None,
            operation_timeout: Duration::from_secs(30),
        }
    }

    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth = Authentication::Token(token.into());
        self
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
    if let Authentication::Token(token) = &config.auth {
        builder = builder.auth(Arc::new(TokenAuth::from_string(token.clone())));
    }
    builder.build().await.map_err(|e| ConnectError {
        service_url: config.service_url.clone(),
        reason: redact(&e.to_string(), &config.auth),
    })
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
    });
}

/// Removes the secret from a message in case a lower layer echoed it.
fn redact(message: &str, auth: &Authentication) -> String {
    match auth {
        Authentication::Token(token) if !token.is_empty() => {
            message.replace(token.as_str(), "<redacted>")
        }
        _ => message.to_owned(),
    }
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
