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
