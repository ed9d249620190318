//! OAuth2 client credentials, as the Java client's `AuthenticationOAuth2` does it (docs/adr/0009-auth-tls.md).
//!
//! The token endpoint is found by OpenID discovery (`<issuer>/.well-known/openid-configuration`), the
//! first access token is fetched before the first connection, and a background task refreshes it before
//! it expires, so reconnects and the broker's authentication challenges always get a valid token. One
//! [`OAuth2`] is shared by every connection of a table (the client, the transaction coordinator, the
//! admin client). Messages name the issuer, never the client secret or a token.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use magnetar_auth_oauth2::{ClientCredentialsFlow, Credentials, OAuth2Error};
use url::Url;

use super::client::TlsOptions;

/// How often the refresher looks at the token's deadline (a refresh happens 30 s before it).
const REFRESH_CHECK: Duration = Duration::from_secs(5);
/// Deadline of one discovery or token request.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// What `auth-params` gives: the issuer, the credentials from the key file, audience and scope.
#[derive(Clone)]
pub struct OAuth2Config {
    pub issuer_url: Url,
    pub client_id: String,
    pub client_secret: String,
    pub audience: Option<String>,
    pub scope: Option<String>,
}

impl fmt::Debug for OAuth2Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Config")
            .field("issuer_url", &self.issuer_url.as_str())
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("audience", &self.audience)
            .field("scope", &self.scope)
            .finish()
    }
}

/// The client-credentials flow of one table, created (discovery and first token) on first use.
pub struct OAuth2 {
    config: OAuth2Config,
    flow: tokio::sync::OnceCell<Arc<ClientCredentialsFlow>>,
}

impl fmt::Debug for OAuth2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2")
            .field("config", &self.config)
            .field("token", &self.flow.get().map(|_| "<redacted>"))
            .finish()
    }
}

impl OAuth2 {
    pub fn new(config: OAuth2Config) -> OAuth2 {
        OAuth2 {
            config,
            flow: tokio::sync::OnceCell::new(),
        }
    }

    pub fn issuer(&self) -> &Url {
        &self.config.issuer_url
    }

    /// What must never appear in a message: the client secret and the current access token.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = vec![self.config.client_secret.clone()];
        if let Some(token) = self.flow.get().and_then(|f| f.cached_access_token()) {
            out.push(String::from_utf8_lossy(&token).into_owned());
        }
        out
    }

    /// The flow with a fresh token: on first use discovers the token endpoint, fetches the first token
    /// and starts the refresher. Errors name the issuer.
    pub async fn flow(&self, tls: &TlsOptions) -> Result<Arc<ClientCredentialsFlow>, String> {
        let flow = self
            .flow
            .get_or_try_init(|| async {
                let flow = Arc::new(self.start(tls).await?);
                spawn_refresher(
                    Arc::downgrade(&flow),
                    self.config.issuer_url.to_string(),
                    self.config.client_secret.clone(),
                );
                Ok::<_, String>(flow)
            })
            .await
            .map_err(|e: String| self.redact(&e))?;
        // A flow created long ago whose refresher failed meanwhile: try once more now.
        flow.ensure_fresh()
            .await
            .map_err(|e| self.redact(&self.failure(&e)))?;
        // The caller builds a client with this token now: its reconnects must send the current one.
        remember_initial_token(flow);
        Ok(flow.clone())
    }

    async fn start(&self, tls: &TlsOptions) -> Result<ClientCredentialsFlow, String> {
        let issuer = &self.config.issuer_url;
        let http = http_client(tls).map_err(|e| {
            format!("OAuth2 authentication with issuer {issuer}: creating the HTTP client: {e}")
        })?;
        let token_endpoint = discover(&http, issuer)
            .await
            .map_err(|e| format!("OAuth2 authentication with issuer {issuer}: {e}"))?;
        let mut builder = ClientCredentialsFlow::builder()
            .issuer_url(issuer.clone())
            .token_endpoint(token_endpoint)
            .credentials(Credentials::KeyFile {
                client_id: self.config.client_id.clone(),
                client_secret: self.config.client_secret.clone(),
            })
            .http_client(http);
        if let Some(a) = &self.config.audience {
            builder = builder.audience(a.clone());
        }
        if let Some(s) = &self.config.scope {
            builder = builder.scope(s.clone());
        }
        let flow = builder
            .build()
            .map_err(|e| format!("OAuth2 authentication with issuer {issuer}: {e}"))?;
        flow.fetch_token().await.map_err(|e| self.failure(&e))?;
        Ok(flow)
    }

    fn failure(&self, e: &OAuth2Error) -> String {
        format!(
            "OAuth2 authentication with issuer {} failed: {}",
            self.config.issuer_url,
            describe(e)
        )
    }

    fn redact(&self, message: &str) -> String {
        let mut out = message.to_owned();
        for s in self.secrets() {
            if !s.is_empty() {
                out = out.replace(&s, "<redacted>");
            }
        }
        out
    }
}

/// A token-endpoint error without its body (which may echo the request), but with the OAuth2 error
/// code (`invalid_client`, ...) when the body has one.
fn describe(e: &OAuth2Error) -> String {
    match e {
        OAuth2Error::Idp { status, body } => {
            let code = serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error")?.as_str().map(str::to_owned))
                .filter(|c| {
                    c.len() <= 64 && c.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            match code {
                Some(code) => format!(
                    "the token endpoint answered HTTP {status} ({code}): check the client id and secret in the key file"
                ),
                None => format!("the token endpoint answered HTTP {status}"),
            }
        }
        OAuth2Error::Transport(e) => format!("requesting a token: {e}"),
        other => other.to_string(),
    }
}

/// The HTTP client for the issuer: the system's trust store plus the table's trust certificates.
fn http_client(tls: &TlsOptions) -> Result<reqwest::Client, String> {
    magnetar::runtime_tokio::tls_crypto::install_default_provider();
    let mut b = reqwest::Client::builder().timeout(HTTP_TIMEOUT);
    if let Some(pem) = &tls.trust_certs_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())? {
            b = b.add_root_certificate(cert);
        }
    }
    if tls.allow_insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    b.build().map_err(|e| e.to_string())
}

/// The token endpoint from the issuer's OpenID configuration (as the Java client finds it).
async fn discover(http: &reqwest::Client, issuer: &Url) -> Result<Url, String> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.as_str().trim_end_matches('/')
    );
    let resp = http
        .get(&url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| format!("fetching {url}: {e}"))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("fetching {url}: HTTP {status}"));
    }
    let doc: serde_json::Value = resp
        .json()
        .await
        .map_err(|e| format!("reading {url}: {e}"))?;
    let endpoint = doc
        .get("token_endpoint")
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("{url} has no \"token_endpoint\""))?;
    Url::parse(endpoint).map_err(|e| format!("{url}: invalid token_endpoint '{endpoint}': {e}"))
}

/// The token each client was built with, and the flow that refreshes it: a `CommandConnect` carries the
/// credentials of the client's creation (magnetar), so the reconnect hook (third_party/README.md, 6)
/// swaps them for the flow's current token.
static BUILT_WITH: Mutex<Vec<(Bytes, Weak<ClientCredentialsFlow>)>> = Mutex::new(Vec::new());

fn remember_initial_token(flow: &Arc<ClientCredentialsFlow>) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        magnetar::proto::auth::set_connect_auth_refresher(current_token);
    });
    let Some(token) = flow.cached_access_token() else {
        return;
    };
    let mut built = BUILT_WITH.lock().unwrap_or_else(|e| e.into_inner());
    built.retain(|(_, f)| f.strong_count() > 0);
    if !built.iter().any(|(t, _)| *t == token) {
        built.push((token, Arc::downgrade(flow)));
    }
}

/// The reconnect hook: the current token of the flow whose token a client was built with.
fn current_token(_method: &str, configured: &Bytes) -> Option<Bytes> {
    let flow = BUILT_WITH
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(t, _)| t == configured)
        .and_then(|(_, f)| f.upgrade())?;
    flow.cached_access_token()
}

/// Refreshes the token before it expires for as long as the flow is in use.
fn spawn_refresher(flow: Weak<ClientCredentialsFlow>, issuer: String, secret: String) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REFRESH_CHECK).await;
            let Some(flow) = flow.upgrade() else {
                return;
            };
            if !flow.needs_refresh() {
                continue;
            }
            match flow.ensure_fresh().await {
                Ok(()) => tracing::debug!(%issuer, "OAuth2 access token refreshed"),
                Err(e) => {
                    let text = describe(&e);
                    let text = if secret.is_empty() {
                        text
                    } else {
                        text.replace(&secret, "<redacted>")
                    };
                    tracing::warn!(%issuer, "refreshing the OAuth2 access token failed (retrying): {text}");
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let o = OAuth2::new(OAuth2Config {
            issuer_url: Url::parse("http://idp.example/").unwrap(),
            client_id: "client".into(),
            client_secret: "sup3r-s3cret".into(),
            audience: None,
            scope: None,
        });
        let text = format!("{o:?}");
        assert!(!text.contains("sup3r-s3cret"), "{text}");
        assert!(text.contains("client"));
        assert_eq!(o.redact("bad secret sup3r-s3cret"), "bad secret <redacted>");
    }

    /// A token endpoint answering `tok-1`, `tok-2`, ... (one connection per request).
    async fn counting_token_endpoint() -> Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Url::parse(&format!(
            "http://127.0.0.1:{}/token",
            listener.local_addr().unwrap().port()
        ))
        .unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut n = 0;
            while let Ok((mut sock, _)) = listener.accept().await {
                n += 1;
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let body = format!(r#"{{"access_token":"tok-{n}","expires_in":3600}}"#);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            }
        });
        url
    }

    #[tokio::test]
    async fn a_reconnect_sends_the_current_token_not_the_first() {
        let endpoint = counting_token_endpoint().await;
        let flow = Arc::new(
            ClientCredentialsFlow::builder()
                .issuer_url(endpoint.clone())
                .token_endpoint(endpoint)
                .credentials(Credentials::KeyFile {
                    client_id: "c".into(),
                    client_secret: "s".into(),
                })
                .build()
                .unwrap(),
        );
        flow.fetch_token().await.unwrap();
        remember_initial_token(&flow);
        let first = Bytes::from_static(b"tok-1");
        assert_eq!(current_token("token", &first), Some(first.clone()));
        flow.fetch_token().await.unwrap();
        assert_eq!(
            current_token("token", &first),
            Some(Bytes::from_static(b"tok-2"))
        );
        assert_eq!(current_token("token", &Bytes::from_static(b"other")), None);
        drop(flow);
        assert_eq!(current_token("token", &first), None);
    }

    #[test]
    fn idp_errors_keep_the_code_not_the_body() {
        let e = OAuth2Error::Idp {
            status: 401,
            body: r#"{"error":"invalid_client","echo":"client_secret=sup3r-s3cret"}"#.into(),
        };
        let text = describe(&e);
        assert!(
            text.contains("401") && text.contains("invalid_client"),
            "{text}"
        );
        assert!(!text.contains("sup3r"), "{text}");
    }
}
