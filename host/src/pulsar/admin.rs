//! The admin REST client (optional: `admin-url`), for what the binary protocol does not offer.

use anyhow::{Context, Result, anyhow};
use magnetar::admin::AdminClient;

use super::client::{Authentication, ClientConfig, redact};

/// Builds an admin client for `admin_url`, with the token when there is one. Errors name the URL, never
/// the token.
pub fn admin_client(admin_url: &str, token: Option<&str>) -> Result<AdminClient> {
    let url =
        url::Url::parse(admin_url).with_context(|| format!("invalid admin-url '{admin_url}'"))?;
    let mut b = AdminClient::builder().service_url(url);
    if let Some(token) = token {
        b = b.token(token.to_owned());
    }
    b.build()
        .with_context(|| format!("creating the admin client for {admin_url}"))
}

/// Builds an admin client for `admin_url` with the table's authentication (token, or the OAuth2 flow
/// its client uses: the access token is refreshed on demand) and TLS settings (`https://`: the trust
/// certificates are added to the system's; `tls-allow-insecure-connection` accepts any certificate; the
/// host name is always verified otherwise; the client certificate is presented to a broker that asks
/// for one). Errors name the URL, never a secret.
pub async fn admin_client_for(admin_url: &str, config: &ClientConfig) -> Result<AdminClient> {
    let url =
        url::Url::parse(admin_url).with_context(|| format!("invalid admin-url '{admin_url}'"))?;
    let mut b = AdminClient::builder().service_url(url);
    match &config.auth {
        Authentication::None | Authentication::Tls => {}
        Authentication::Token(token) => b = b.token(token.clone()),
        Authentication::OAuth2(o) => {
            let flow = o
                .flow(&config.tls)
                .await
                .map_err(|e| anyhow!("creating the admin client for {admin_url}: {e}"))?;
            b = b.oauth2(flow);
        }
    }
    if admin_url.starts_with("https://") {
        if let Some(pem) = &config.tls.trust_certs_pem {
            b = b.tls_trust_cert_pem(pem.as_slice().to_vec());
        }
        b = b.tls_allow_insecure(config.tls.allow_insecure);
        if let Some(cert) = &config.tls.client_cert {
            let identity = cert
                .identity()
                .map_err(|e| anyhow!("creating the admin client for {admin_url}: {e}"))?;
            b = b.tls_identity(identity);
        }
    }
    b.build().map_err(|e| {
        anyhow!(
            "creating the admin client for {admin_url}: {}",
            redact(&e.to_string(), &config.auth)
        )
    })
}

/// A plain HTTP client for admin calls the admin client lacks, with the table's TLS settings, and the
/// bearer token to send (OAuth2: the current access token).
pub async fn rest_client(config: &ClientConfig) -> Result<(reqwest::Client, Option<String>)> {
    let token = match &config.auth {
        Authentication::None | Authentication::Tls => None,
        Authentication::Token(t) => Some(t.clone()),
        Authentication::OAuth2(o) => {
            let flow = o.flow(&config.tls).await.map_err(|e| anyhow!("{e}"))?;
            flow.cached_access_token()
                .map(|t| String::from_utf8_lossy(&t).into_owned())
        }
    };
    magnetar::runtime_tokio::tls_crypto::install_default_provider();
    let mut b = reqwest::Client::builder();
    if let Some(pem) = &config.tls.trust_certs_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| anyhow!("option 'tls-trust-certs-file-path': {e}"))?
        {
            b = b.add_root_certificate(cert);
        }
    }
    if config.tls.allow_insecure {
        b = b.danger_accept_invalid_certs(true);
    }
    if let Some(cert) = &config.tls.client_cert {
        b = b.identity(cert.identity().map_err(|e| anyhow!("{e}"))?);
    }
    Ok((b.build().context("creating an HTTP client")?, token))
}

/// `GET {admin_url}{path}` as JSON, with the table's authentication and TLS settings (for the calls
/// `AdminClient` lacks). Errors name the URL and the broker's answer, never a secret.
pub async fn get_json(
    admin_url: &str,
    config: &ClientConfig,
    path: &str,
) -> Result<serde_json::Value> {
    let (url, resp) = request(reqwest::Method::GET, admin_url, config, path).await?;
    resp.json()
        .await
        .with_context(|| format!("GET {url}: the answer is not JSON"))
}

/// `DELETE {admin_url}{path}`, with the table's authentication and TLS settings. Errors name the URL
/// and the broker's answer, never a secret.
pub async fn delete(admin_url: &str, config: &ClientConfig, path: &str) -> Result<()> {
    request(reqwest::Method::DELETE, admin_url, config, path).await?;
    Ok(())
}

/// Sends one admin REST request; a non-success answer is an error with the (redacted) body.
async fn request(
    method: reqwest::Method,
    admin_url: &str,
    config: &ClientConfig,
    path: &str,
) -> Result<(String, reqwest::Response)> {
    let url = format!("{}{path}", admin_url.trim_end_matches('/'));
    let (http, token) = rest_client(config).await?;
    let mut req = http.request(method.clone(), &url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("{method} {url}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        anyhow::bail!(
            "{method} {url} answered {status}: {}",
            redact(body.trim(), &config.auth)
        );
    }
    Ok((url, resp))
}
