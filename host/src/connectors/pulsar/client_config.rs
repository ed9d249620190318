//! The client side of a Pulsar table's options: authentication (`auth-plugin-classname`,
//! `auth-params`: token, OAuth2, TLS), the `tls-*` trust settings and the files they name, read once
//! when the table is decoded ([`super::config::PulsarTableConfig::decode`]).

use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};

use super::options as opt;
use crate::options::ResolvedOptions;
use crate::pulsar::client::{Authentication, TlsOptions};
use crate::pulsar::oauth2::{OAuth2, OAuth2Config};

const TOKEN_PLUGINS: &[&str] = &[
    "org.apache.pulsar.client.impl.auth.AuthenticationToken",
    "token",
    "AuthenticationToken",
];
const OAUTH2_PLUGINS: &[&str] = &[
    "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2",
    "oauth2",
    "AuthenticationOAuth2",
];

/// `auth-plugin-classname` + `auth-params` as client authentication. Errors name the option, never
/// print the parameters.
pub fn authentication(settings: &ResolvedOptions) -> Result<Authentication> {
    let plugin = settings.get(opt::AUTH_PLUGIN).map(str::trim).unwrap_or("");
    let params = settings.get(opt::AUTH_PARAMS).map(str::trim).unwrap_or("");
    if plugin.is_empty() && params.is_empty() {
        return Ok(Authentication::None);
    }
    if OAUTH2_PLUGINS.contains(&plugin) {
        return oauth2(params).map(|c| Authentication::OAuth2(Arc::new(OAuth2::new(c))));
    }
    if super::tls_auth::TLS_PLUGINS.contains(&plugin) {
        // The certificate and key files of the parameters are read with the TLS settings.
        return Ok(Authentication::Tls);
    }
    if !plugin.is_empty() && !TOKEN_PLUGINS.contains(&plugin) {
        bail!(
            "option '{}': authentication plugin '{plugin}' is not supported; allowed: org.apache.pulsar.client.impl.auth.AuthenticationToken (token), org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2 (oauth2), org.apache.pulsar.client.impl.auth.AuthenticationTls (tls)",
            opt::AUTH_PLUGIN
        );
    }
    if params.is_empty() {
        bail!(
            "option '{}': the token plugin needs 'auth-params' = 'token:<jwt>' or 'file:///path/to/token'",
            opt::AUTH_PARAMS
        );
    }
    let token = if let Some(t) = params.strip_prefix("token:") {
        t.trim().to_owned()
    } else if let Some(path) = params.strip_prefix("file://") {
        read_text_file(path, "the token file")
            .map_err(|e| anyhow!("option '{}': {e:#}", opt::AUTH_PARAMS))?
    } else if params.starts_with('{') {
        // `{"token":"..."}` as the Java plugin also accepts.
        serde_json::from_str::<serde_json::Value>(params)
            .ok()
            .and_then(|v| v.get("token").and_then(|t| t.as_str()).map(str::to_owned))
            .ok_or_else(|| {
                anyhow!(
                    "option '{}': JSON parameters need a \"token\" field",
                    opt::AUTH_PARAMS
                )
            })?
    } else {
        params.to_owned()
    };
    if token.is_empty() {
        bail!("option '{}': the token is empty", opt::AUTH_PARAMS);
    }
    Ok(Authentication::Token(token))
}

/// The OAuth2 plugin's JSON parameters, as the Java `AuthenticationOAuth2` takes them; the key file
/// (`privateKey`) is read now. Errors never quote a value that may hold a secret.
fn oauth2(params: &str) -> Result<OAuth2Config> {
    let err = |m: String| anyhow!("option '{}': {m}", opt::AUTH_PARAMS);
    const EXAMPLE: &str = r#"{"type":"client_credentials","issuerUrl":"https://idp.example/","privateKey":"file:///path/to/key.json","audience":"..."}"#;
    if params.is_empty() {
        return Err(err(format!(
            "the OAuth2 plugin needs JSON parameters, e.g. {EXAMPLE}"
        )));
    }
    let v: serde_json::Value = serde_json::from_str(params).map_err(|e| {
        err(format!(
            "the OAuth2 parameters are not JSON (line {} column {}), e.g. {EXAMPLE}",
            e.line(),
            e.column()
        ))
    })?;
    let field = |name: &str| {
        v.get(name)
            .and_then(|f| f.as_str())
            .map(str::trim)
            .filter(|f| !f.is_empty())
    };
    if let Some(t) = field("type")
        && t != "client_credentials"
    {
        return Err(err(format!(
            "OAuth2 flow type '{t}' is not supported; allowed: client_credentials"
        )));
    }
    let key_url = field("privateKey").ok_or_else(|| {
        err(format!(
            "the OAuth2 parameters need \"privateKey\", e.g. {EXAMPLE}"
        ))
    })?;
    let key_text = if let Some(path) = key_url.strip_prefix("file://") {
        read_text_file(path, "the OAuth2 key file").map_err(|e| err(format!("{e:#}")))?
    } else if let Some(data) = key_url.strip_prefix("data:") {
        data_url(data).ok_or_else(|| {
            err("\"privateKey\": the data: URL is not application/json (plain or ;base64)".into())
        })?
    } else {
        return Err(err(
            "\"privateKey\" must be a file:///path or a data:application/json URL".into(),
        ));
    };
    let key: serde_json::Value = serde_json::from_str(&key_text).map_err(|e| {
        err(format!(
            "the OAuth2 key file is not JSON (line {} column {})",
            e.line(),
            e.column()
        ))
    })?;
    let key_field = |name: &str| {
        key.get(name)
            .and_then(|f| f.as_str())
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
    };
    let client_id = key_field("client_id")
        .ok_or_else(|| err("the OAuth2 key file has no \"client_id\"".into()))?;
    let client_secret = key_field("client_secret")
        .ok_or_else(|| err("the OAuth2 key file has no \"client_secret\"".into()))?;
    let issuer = field("issuerUrl")
        .map(str::to_owned)
        .or_else(|| key_field("issuer_url"))
        .ok_or_else(|| {
            err(format!(
                "the OAuth2 parameters need \"issuerUrl\", e.g. {EXAMPLE}"
            ))
        })?;
    let issuer_url = url::Url::parse(&issuer)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| err(format!("\"issuerUrl\" '{issuer}' is not an http(s) URL")))?;
    Ok(OAuth2Config {
        issuer_url,
        client_id,
        client_secret,
        audience: field("audience").map(str::to_owned),
        scope: field("scope").map(str::to_owned),
    })
}

/// The body of a `data:` URL (after `data:`) that is JSON, plain or base64.
fn data_url(data: &str) -> Option<String> {
    use base64::Engine as _;
    let (meta, body) = data.split_once(',')?;
    let mut parts = meta.split(';').map(str::trim);
    let mime = parts.next().unwrap_or_default();
    if !(mime.is_empty() || mime.eq_ignore_ascii_case("application/json")) {
        return None;
    }
    if parts.any(|p| p.eq_ignore_ascii_case("base64")) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body.trim())
            .ok()?;
        String::from_utf8(bytes).ok()
    } else {
        Some(percent_decode(body))
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `tls-*` settings. The trust file is read (through cap-std) only when a URL of the table uses
/// TLS; otherwise the settings are ignored and listed in `ignored` (warned about at start). Errors
/// name the option.
pub fn tls_options(
    settings: &ResolvedOptions,
    uses_tls: bool,
    ignored: &mut Vec<&'static str>,
) -> Result<TlsOptions> {
    let trust_file = settings
        .get(opt::TLS_TRUST_CERTS)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let allow_insecure = settings.bool(opt::TLS_ALLOW_INSECURE).unwrap_or_default();
    let hostname_verification = settings
        .bool(opt::TLS_HOSTNAME_VERIFICATION)
        .unwrap_or_default();
    if !uses_tls {
        if trust_file.is_some() {
            ignored.push(opt::TLS_TRUST_CERTS);
        }
        if allow_insecure {
            ignored.push(opt::TLS_ALLOW_INSECURE);
        }
        if !hostname_verification {
            ignored.push(opt::TLS_HOSTNAME_VERIFICATION);
        }
        return Ok(TlsOptions::default());
    }
    let mut tls = TlsOptions {
        allow_insecure,
        hostname_verification,
        ..TlsOptions::default()
    };
    if let Some(file) = trust_file {
        let path = file.strip_prefix("file://").unwrap_or(file);
        let pem = read_file(path, "the trust certificates file")
            .map_err(|e| anyhow!("option '{}': {e:#}", opt::TLS_TRUST_CERTS))?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            bail!(
                "option '{}': {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                opt::TLS_TRUST_CERTS
            );
        }
        tls.trust_certs_file = Some(path.to_owned());
        tls.trust_certs_pem = Some(Arc::new(pem));
    } else if !hostname_verification && !allow_insecure {
        bail!(
            "option '{}': 'false' needs '{}' (the certificate chain is then still checked, against that file; the system trust store cannot be used without host names)",
            opt::TLS_HOSTNAME_VERIFICATION,
            opt::TLS_TRUST_CERTS
        );
    }
    Ok(tls)
}

fn read_text_file(path: &str, what: &str) -> Result<String> {
    let bytes = read_file(path, what)?;
    Ok(String::from_utf8_lossy(&bytes).trim().to_owned())
}

/// Reads a file named by an option through cap-std (its directory opened with ambient authority).
pub(super) fn read_file(path: &str, what: &str) -> Result<Vec<u8>> {
    let path = std::path::Path::new(path);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("'{}' is not a file path", path.display());
    };
    let dir = cap_std::fs::Dir::open_ambient_dir(parent, cap_std::ambient_authority())
        .with_context(|| {
            format!(
                "reading {what} {}: opening {}",
                path.display(),
                parent.display()
            )
        })?;
    dir.read(name)
        .with_context(|| format!("reading {what} {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth2_parameters_as_the_java_client_takes_them() {
        use base64::Engine as _;
        let key = base64::engine::general_purpose::STANDARD.encode(
            r#"{"client_id":"id1","client_secret":"s3cr3t!","issuer_url":"http://other/"}"#,
        );
        let c = oauth2(&format!(
            r#"{{"type":"client_credentials","issuerUrl":"https://idp.example/realms/x","privateKey":"data:application/json;base64,{key}","audience":"aud","scope":"a b"}}"#
        ))
        .unwrap();
        assert_eq!(c.issuer_url.as_str(), "https://idp.example/realms/x");
        assert_eq!(
            (c.client_id.as_str(), c.client_secret.as_str()),
            ("id1", "s3cr3t!")
        );
        assert_eq!(c.audience.as_deref(), Some("aud"));
        assert_eq!(c.scope.as_deref(), Some("a b"));
        assert!(!format!("{c:?}").contains("s3cr3t"));
        // The key file's issuer when the parameters have none; a plain (percent-encoded) data: URL.
        let c = oauth2(
            r#"{"privateKey":"data:application/json,%7B%22client_id%22:%22i%22,%22client_secret%22:%22s%22,%22issuer_url%22:%22http://idp/%22%7D"}"#,
        )
        .unwrap();
        assert_eq!(c.issuer_url.as_str(), "http://idp/");
        // Errors name the option and never quote the secret.
        let secret_key = r#"data:application/json,{"client_id":"i","client_secret":"TOPSECRET"}"#;
        let no_issuer = format!(r#"{{"privateKey":"{}"}}"#, secret_key.replace('"', "\\\""));
        for (params, expect) in [
            ("issuerUrl=x", "not JSON"),
            (
                r#"{"type":"password","privateKey":"x"}"#,
                "'password' is not supported",
            ),
            (r#"{"issuerUrl":"http://idp/"}"#, "need \"privateKey\""),
            (no_issuer.as_str(), "need \"issuerUrl\""),
            (
                r#"{"issuerUrl":"http://idp/","privateKey":"file:///nonexistent/key.json"}"#,
                "/nonexistent/key.json",
            ),
            (
                r#"{"issuerUrl":"http://idp/","privateKey":"data:application/json,{\"client_id\":\"i\"}"}"#,
                "no \"client_secret\"",
            ),
        ] {
            let e = format!("{:#}", oauth2(params).unwrap_err());
            assert!(
                e.contains("auth-params") && e.contains(expect),
                "{params}: {e}"
            );
            assert!(!e.contains("TOPSECRET"), "{e}");
        }
    }
}
