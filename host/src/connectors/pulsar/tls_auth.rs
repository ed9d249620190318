//! A table's TLS client certificate: Java's `AuthenticationTls` (`auth-params` =
//! `tlsCertFile:<cert>,tlsKeyFile:<key>` or `{"tlsCertFile":..,"tlsKeyFile":..}`), or the client settings
//! `tls-certificate-file-path` / `tls-key-file-path` (`tlsCertificateFilePath`, `tlsKeyFilePath`, Flink's
//! `pulsar.client.` names, under `properties.` too), which present a certificate whatever the
//! authentication. The plugin's files win over the settings, as in the Java client.
//!
//! Both files are read once, here, and checked to belong together. Errors name the option; the key
//! file's path and content are never printed (`tls-key-file-path` is a secret option, like
//! `auth-params`).

use anyhow::{Result, anyhow, bail};

use super::client_config::read_file;
use super::options as opt;
use crate::options::ResolvedOptions;
use crate::pulsar::client::Authentication;
use crate::pulsar::client_cert::{ClientCert, Part};

/// `auth-plugin-classname` spellings of the Java client's TLS plugin.
pub const TLS_PLUGINS: &[&str] = &[
    "org.apache.pulsar.client.impl.auth.AuthenticationTls",
    "tls",
    "AuthenticationTls",
];

const EXAMPLE: &str = "tlsCertFile:/path/client.cert.pem,tlsKeyFile:/path/client.key-pk8.pem";

/// Where the certificate and key paths come from, for messages.
struct Source {
    cert_option: &'static str,
    key_option: &'static str,
    /// How the option names each file (`tlsCertFile` inside `auth-params`).
    cert_name: &'static str,
    key_name: &'static str,
}

/// The table's client certificate, if any. `uses_tls`: a URL of the table uses TLS; without one the
/// settings are ignored (listed in `ignored`). The plugin needs a `pulsar+ssl://` service URL
/// (`service_tls`): over plaintext it cannot authenticate.
pub fn client_cert(
    settings: &ResolvedOptions,
    auth: &Authentication,
    service_tls: bool,
    uses_tls: bool,
    ignored: &mut Vec<&'static str>,
) -> Result<Option<ClientCert>> {
    let setting = |key| {
        settings
            .get(key)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let (paths, source) = if matches!(auth, Authentication::Tls) {
        if !service_tls {
            bail!(
                "option '{}': AuthenticationTls authenticates with the certificate of a TLS connection and needs a pulsar+ssl:// 'service-url'",
                opt::AUTH_PLUGIN
            );
        }
        let params = settings.get(opt::AUTH_PARAMS).unwrap_or("");
        (
            plugin_params(params)?,
            Source {
                cert_option: opt::AUTH_PARAMS,
                key_option: opt::AUTH_PARAMS,
                cert_name: "tlsCertFile",
                key_name: "tlsKeyFile",
            },
        )
    } else {
        let (cert, key) = (setting(opt::TLS_CERT_FILE), setting(opt::TLS_KEY_FILE));
        if cert.is_none() && key.is_none() {
            return Ok(None);
        }
        if !uses_tls {
            ignored.extend(
                [
                    cert.as_ref().map(|_| opt::TLS_CERT_FILE),
                    key.as_ref().map(|_| opt::TLS_KEY_FILE),
                ]
                .into_iter()
                .flatten(),
            );
            return Ok(None);
        }
        let (Some(cert), Some(key)) = (cert, key) else {
            bail!(
                "options '{}' and '{}' go together (the client certificate and its private key)",
                opt::TLS_CERT_FILE,
                opt::TLS_KEY_FILE
            );
        };
        (
            (cert, key),
            Source {
                cert_option: opt::TLS_CERT_FILE,
                key_option: opt::TLS_KEY_FILE,
                cert_name: "the certificate file",
                key_name: "the key file",
            },
        )
    };
    load(&paths.0, &paths.1, &source).map(Some)
}

/// `tlsCertFile` and `tlsKeyFile` from the plugin's parameters: JSON, or `key:value` pairs separated by
/// commas (the value is everything after the first colon), as `AuthenticationTls.configure` reads them.
fn plugin_params(params: &str) -> Result<(String, String)> {
    let err = |m: String| anyhow!("option '{}': {m}", opt::AUTH_PARAMS);
    let params = params.trim();
    let pairs: Vec<(String, String)> = if params.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(params).map_err(|e| {
            err(format!(
                "the AuthenticationTls parameters are not JSON (line {} column {}); expected {{\"tlsCertFile\":\"...\",\"tlsKeyFile\":\"...\"}} or {EXAMPLE}",
                e.line(),
                e.column()
            ))
        })?;
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect()
    } else {
        params
            .split(',')
            .filter_map(|p| p.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect()
    };
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    match (get("tlsCertFile"), get("tlsKeyFile")) {
        (Some(cert), Some(key)) => Ok((cert, key)),
        (cert, _) => Err(err(format!(
            "AuthenticationTls needs {} in 'auth-params', e.g. '{EXAMPLE}'",
            if cert.is_none() {
                "'tlsCertFile'"
            } else {
                "'tlsKeyFile'"
            }
        ))),
    }
}

/// Reads and checks the pair. The key file is named by its option only.
fn load(cert_path: &str, key_path: &str, source: &Source) -> Result<ClientCert> {
    let cert_path = cert_path.strip_prefix("file://").unwrap_or(cert_path);
    let key_path = key_path.strip_prefix("file://").unwrap_or(key_path);
    let cert_pem = read_file(cert_path, "the client certificate")
        .map_err(|e| anyhow!("option '{}': {e:#}", source.cert_option))?;
    let key_pem = read_file(key_path, "the client key").map_err(|e| {
        // The path stays out of the message: only what went wrong.
        let cause = e
            .chain()
            .last()
            .map(ToString::to_string)
            .filter(|c| !c.contains(key_path))
            .unwrap_or_else(|| "not a readable file".to_owned());
        anyhow!(
            "option '{}': {} cannot be read: {cause}",
            source.key_option,
            source.key_name
        )
    })?;
    ClientCert::from_pem(cert_path, &cert_pem, &key_pem).map_err(|e| match e.part {
        Part::Cert => anyhow!(
            "option '{}': {} {}",
            source.cert_option,
            source.cert_name,
            e.message
        ),
        Part::Key => anyhow!(
            "option '{}': {}: {}",
            source.key_option,
            source.key_name,
            e.message
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_parameters_as_the_java_plugin_reads_them() {
        assert_eq!(
            plugin_params("tlsCertFile:/a/c.pem,tlsKeyFile:/a/k.pem").unwrap(),
            ("/a/c.pem".to_owned(), "/a/k.pem".to_owned())
        );
        assert_eq!(
            plugin_params(r#"{"tlsCertFile":"/a/c.pem","tlsKeyFile":"file:///a/k.pem"}"#).unwrap(),
            ("/a/c.pem".to_owned(), "file:///a/k.pem".to_owned())
        );
        for (params, missing) in [
            ("tlsCertFile:/a/c.pem", "'tlsKeyFile'"),
            ("tlsKeyFile:/a/k.pem", "'tlsCertFile'"),
            ("", "'tlsCertFile'"),
        ] {
            let e = format!("{:#}", plugin_params(params).unwrap_err());
            assert!(e.contains("auth-params") && e.contains(missing), "{e}");
        }
        let e = format!("{:#}", plugin_params("{nope").unwrap_err());
        assert!(e.contains("not JSON"), "{e}");
    }

    #[test]
    fn a_missing_key_file_is_named_by_its_option_not_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let key = dir.path().join("secret-name.key");
        let source = Source {
            cert_option: opt::AUTH_PARAMS,
            key_option: opt::AUTH_PARAMS,
            cert_name: "tlsCertFile",
            key_name: "tlsKeyFile",
        };
        let e = format!(
            "{:#}",
            load(cert.to_str().unwrap(), key.to_str().unwrap(), &source).unwrap_err()
        );
        assert!(e.contains("auth-params") && e.contains("tlsKeyFile"), "{e}");
        assert!(!e.contains("secret-name"), "{e}");
        // A certificate file that is not PEM names the file.
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        std::fs::write(&cert, "not a certificate").unwrap();
        let e = format!(
            "{:#}",
            load(cert.to_str().unwrap(), key.to_str().unwrap(), &source).unwrap_err()
        );
        assert!(e.contains("tlsCertFile") && e.contains("c.pem"), "{e}");
        assert!(!e.contains("secret-name"), "{e}");
    }
}
