//! The admin REST client (optional: `admin-url`), for what the binary protocol does not offer.

use anyhow::{Context, Result};
use magnetar::admin::AdminClient;

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

/// `GET {admin_url}{path}` as JSON, with the token when there is one (for the calls `AdminClient` lacks).
/// Errors name the URL and the broker's answer, never the token.
pub async fn get_json(
    admin_url: &str,
    token: Option<&str>,
    path: &str,
) -> Result<serde_json::Value> {
    let url = format!("{}{path}", admin_url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().get(&url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.with_context(|| format!("GET {url}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        anyhow::bail!("GET {url} answered {status}: {}", body.trim());
    }
    resp.json()
        .await
        .with_context(|| format!("GET {url}: the answer is not JSON"))
}

/// `DELETE {admin_url}{path}`, with the token when there is one. Errors name the URL and the broker's
/// answer, never the token.
pub async fn delete(admin_url: &str, token: Option<&str>, path: &str) -> Result<()> {
    let url = format!("{}{path}", admin_url.trim_end_matches('/'));
    let mut req = reqwest::Client::new().delete(&url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.with_context(|| format!("DELETE {url}"))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        anyhow::bail!("DELETE {url} answered {status}: {}", body.trim());
    }
    Ok(())
}
