//! A Pulsar table's options turned into typed configuration, validated once (errors name the option and
//! what is allowed; secrets never appear in them).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use super::layout::Layout;
use super::options::{self as opt, Settings};
use crate::catalog::CatalogTable;
use crate::plugins::catalog::PluginCatalog;
use crate::plugins::{Kind, Manifest};
use crate::pulsar::client::{Authentication, ClientConfig, TlsOptions};
use crate::pulsar::message_id::parse_message_id;
use crate::pulsar::oauth2::{OAuth2, OAuth2Config};
use crate::pulsar::reader::DataLossPolicy;
use crate::pulsar::topics::{TopicName, TopicSelection, parse_topic_list};
use crate::pulsar::writer::WriterConfig;
use crate::sql::ColumnKind;
use magnetar::proto::types::CompressionKind;

/// A format plugin and its options (format prefix stripped, checked against the manifest).
#[derive(Debug, Clone)]
pub struct FormatSpec {
    pub plugin: String,
    pub options: Vec<(String, String)>,
    /// Per-message decode errors skip the message (counted) instead of failing the job: the format's own
    /// `ignore-parse-errors` option (a convention of the built-in formats).
    pub skip_errors: bool,
    /// How the table spells this format's options (`raw.`, `key.json.`).
    pub prefix: String,
    /// The table's option that names the format (`format`, `key.format`).
    pub role: String,
}

impl FormatSpec {
    /// A factory error of the format plugin with the option named as the user wrote it (`'raw.charset'`,
    /// not the plugin's `charset`), or the table's format option when the plugin named none.
    pub fn factory_error(&self, table: &str, e: &dyn std::fmt::Display) -> anyhow::Error {
        let text = e.to_string();
        let named = text
            .split_once("option `")
            .and_then(|(_, rest)| rest.split_once('`'))
            .map(|(o, _)| o)
            .filter(|o| self.options.iter().any(|(k, _)| k == o) || !o.contains(' '));
        match named {
            Some(o) => anyhow!("table '{table}', option '{}{o}': {text}", self.prefix),
            None => anyhow!("table '{table}', option '{}': {text}", self.role),
        }
    }
}

/// Where a fresh source starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Startup {
    Earliest,
    Latest,
    /// Inclusive positions per partition index, optionally for one topic only.
    SpecificOffsets(Vec<SpecificOffset>),
    ExternalSubscription {
        name: String,
        from_earliest: bool,
    },
    Timestamp(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpecificOffset {
    /// `None`: applies to this partition index of every topic.
    pub topic: Option<TopicName>,
    /// Where the partition starts.
    pub start: OffsetStart,
    /// The partition index (`-1`: a non-partitioned topic, or every partition for [`OffsetStart::Earliest`]
    /// and [`OffsetStart::Latest`], whose ids name no partition).
    pub partition: i32,
}

/// The start of one `specific-offsets` entry.
#[derive(Debug, Clone, PartialEq)]
pub enum OffsetStart {
    /// `-1:-1:-1`, the text of the Java client's `MessageId.earliest`.
    Earliest,
    /// `9223372036854775807:9223372036854775807:-1`, the text of `MessageId.latest`.
    Latest,
    /// `ledger:entry:partition[:batch]` (inclusive).
    At(String),
}

/// Everything both sides need.
#[derive(Debug, Clone)]
pub struct TableConfig {
    pub table: String,
    pub client: ClientConfig,
    pub admin_url: Option<String>,
    pub settings: Settings,
    pub value_format: Option<FormatSpec>,
    pub key_format: Option<FormatSpec>,
    pub layout: Layout,
    /// TLS settings given although no URL of the table uses TLS (warned about at start).
    pub tls_ignored: Vec<&'static str>,
}

/// Prefixes of the format plugins' options given the raw `WITH` options: `<value format>.`,
/// `value.<value format>.` and `key.<key format>.`.
pub fn format_prefixes<'a>(mut get: impl FnMut(&str) -> Option<&'a str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(v) = get("format").or_else(|| get("value.format")) {
        out.push(format!("{v}."));
        out.push(format!("value.{v}."));
    }
    if let Some(k) = get("key.format") {
        out.push(format!("key.{k}."));
    }
    out
}

fn format_spec(
    table: &CatalogTable,
    catalog: &PluginCatalog,
    name: &str,
    prefixes: &[String],
    role: &str,
) -> Result<FormatSpec> {
    let manifest: Manifest = catalog
        .manifest(name, Kind::Format)
        .with_context(|| format!("option '{role}'"))?;
    let mut options = Vec::new();
    for (k, v) in table.options.iter() {
        if let Some(p) = prefixes.iter().find(|p| k.starts_with(p.as_str())) {
            options.push((k[p.len()..].to_owned(), v.to_owned(), k.to_owned()));
        }
    }
    let plain: Vec<(String, String)> = options
        .iter()
        .map(|(k, v, _)| (k.clone(), v.clone()))
        .collect();
    let resolved = manifest.resolve_options(&plain).map_err(|e| {
        // Name the option as the user wrote it.
        let text = format!("{e:#}");
        let named = options
            .iter()
            .find(|(k, _, _)| text.contains(&format!("`{k}`")))
            .map(|(_, _, full)| full.as_str());
        match named {
            Some(full) => anyhow!("option '{full}': {text}"),
            None => anyhow!("format '{name}' ({role}): {text}"),
        }
    })?;
    let skip_errors = resolved
        .iter()
        .any(|(k, v)| k == "ignore-parse-errors" && v.trim().eq_ignore_ascii_case("true"));
    Ok(FormatSpec {
        plugin: name.to_owned(),
        options: resolved,
        skip_errors,
        prefix: prefixes.first().cloned().unwrap_or_default(),
        role: role.to_owned(),
    })
}

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
pub fn authentication(settings: &Settings) -> Result<Authentication> {
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
    settings: &Settings,
    uses_tls: bool,
    ignored: &mut Vec<&'static str>,
) -> Result<TlsOptions> {
    let trust_file = settings
        .get(opt::TLS_TRUST_CERTS)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let allow_insecure = settings.bool(opt::TLS_ALLOW_INSECURE);
    let hostname_verification = settings.bool(opt::TLS_HOSTNAME_VERIFICATION);
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

impl TableConfig {
    pub fn of(table: &CatalogTable, catalog: &PluginCatalog, for_source: bool) -> Result<Self> {
        let o = &table.options;
        let settings = Settings::resolve(o).map_err(|(k, m)| anyhow!("option '{k}': {m}"))?;
        let service_url = o.get("service-url").unwrap_or_default().trim().to_owned();
        if !(service_url.starts_with("pulsar://") || service_url.starts_with("pulsar+ssl://")) {
            bail!(
                "option 'service-url': '{service_url}' is not a Pulsar service URL; expected pulsar://host:6650 or pulsar+ssl://host:6651"
            );
        }
        let admin_url = o.get("admin-url").map(|s| s.trim().to_owned());
        if let Some(a) = &admin_url
            && !(a.starts_with("http://") || a.starts_with("https://"))
        {
            bail!(
                "option 'admin-url': '{a}' is not an HTTP URL; expected http://host:8080 or https://host:8443"
            );
        }
        let uses_tls = service_url.starts_with("pulsar+ssl://")
            || admin_url
                .as_deref()
                .is_some_and(|a| a.starts_with("https://"));
        let mut tls_ignored = Vec::new();
        let mut client = ClientConfig::new(service_url);
        client.tls = tls_options(&settings, uses_tls, &mut tls_ignored)?;
        client.auth = authentication(&settings)?;
        client.tls.client_cert = super::tls_auth::client_cert(
            &settings,
            &client.auth,
            client.is_tls(),
            uses_tls,
            &mut tls_ignored,
        )?;
        client.operation_timeout =
            Duration::from_millis(settings.i64(opt::OPERATION_TIMEOUT).max(1) as u64);
        let layout = Layout::of(table)?;
        let prefixes = format_prefixes(|k| o.get(k));
        let value_format = match o.get("format") {
            Some(name) => Some(format_spec(
                table,
                catalog,
                name,
                &prefixes
                    .iter()
                    .filter(|p| !p.starts_with("key."))
                    .cloned()
                    .collect::<Vec<_>>(),
                "format",
            )?),
            None => None,
        };
        if value_format.is_none() {
            bail!(
                "option 'format': one of 'format', 'value.format' must be set (the format of the message value: json, avro, csv, raw, ...)"
            );
        }
        let key_format = match o.get("key.format") {
            Some(name) => Some(format_spec(
                table,
                catalog,
                name,
                &[format!("key.{name}.")],
                "key.format",
            )?),
            None => None,
        };
        if for_source {
            for c in &table.def.columns {
                if let ColumnKind::Metadata { ty, .. } = &c.kind {
                    let key = table.metadata_key(c).unwrap_or(&c.name);
                    crate::pulsar::metadata::metadata_column(key, &ty.to_arrow(), &[]).map_err(
                        |_| {
                            anyhow!(
                                "column '{}': metadata '{key}' is {}, not {ty}",
                                c.name,
                                crate::pulsar::metadata::expected_type(key)
                            )
                        },
                    )?;
                }
            }
        }
        Ok(TableConfig {
            table: table.name().to_owned(),
            client,
            admin_url,
            settings,
            value_format,
            key_format,
            layout,
            tls_ignored,
        })
    }

    /// The sink's producer settings; errors name the option.
    pub fn writer_config(&self) -> Result<WriterConfig> {
        let s = &self.settings;
        let batching = s.bool(opt::BATCHING).then(|| {
            (
                s.i64(opt::BATCH_MESSAGES).max(1) as usize,
                s.i64(opt::BATCH_BYTES).max(1) as usize,
                Duration::from_micros(s.i64(opt::BATCH_DELAY).max(1) as u64),
            )
        });
        // With batching, a batch is compressed as a whole (what every Pulsar client reads).
        let compression = match s
            .get(opt::COMPRESSION)
            .unwrap_or("NONE")
            .to_ascii_uppercase()
            .as_str()
        {
            "LZ4" => CompressionKind::Lz4,
            "ZLIB" => CompressionKind::Zlib,
            "ZSTD" => CompressionKind::Zstd,
            "SNAPPY" => CompressionKind::Snappy,
            _ => CompressionKind::None,
        };
        let producer_name = match s.get(opt::PRODUCER_NAME).map(str::trim) {
            Some("") => bail!(
                "option '{}': must not be empty (leave it unset to let the broker choose)",
                opt::PRODUCER_NAME
            ),
            other => other.map(str::to_owned),
        };
        let wc = WriterConfig {
            batching,
            compression,
            send_timeout: Duration::from_millis(s.i64(opt::SEND_TIMEOUT).max(1) as u64),
            max_in_flight: s.i64(opt::MAX_PENDING).max(1) as usize,
            producer_name,
            schema: None,
        };
        wc.validate()?;
        Ok(wc)
    }

    /// The topics a source reads (list or pattern); errors name the option.
    pub fn selection(&self, table: &CatalogTable) -> Result<TopicSelection> {
        let o = &table.options;
        let topic = o
            .get("topic")
            .map(str::to_owned)
            .or_else(|| self.settings.topic.clone());
        let pattern = o
            .get("topic-pattern")
            .map(str::to_owned)
            .or_else(|| self.settings.topic_pattern.clone());
        match (topic, pattern) {
            (Some(_), Some(_)) => {
                bail!("options 'topic' and 'topic-pattern' are mutually exclusive: set only one")
            }
            (None, None) => bail!("option 'topic': one of 'topic', 'topic-pattern' must be set"),
            (Some(t), None) => {
                let topics = parse_topic_list(&t).map_err(|e| anyhow!("option 'topic': {e:#}"))?;
                Ok(TopicSelection::Topics(topics))
            }
            (None, Some(p)) => {
                let full = crate::pulsar::topics::complete_pattern(&p)
                    .map_err(|e| anyhow!("option 'topic-pattern': {e:#}"))?;
                Ok(TopicSelection::Pattern(full))
            }
        }
    }

    /// The source's start on a fresh start.
    pub fn startup(&self, table: &CatalogTable) -> Result<Startup> {
        let o = &table.options;
        Ok(match o.get("scan.startup.mode").unwrap_or("latest") {
            "earliest" => Startup::Earliest,
            "latest" => Startup::Latest,
            "timestamp" => Startup::Timestamp(
                o.get_i64("scan.startup.timestamp-millis")
                    .ok_or_else(|| {
                        anyhow!(
                            "option 'scan.startup.timestamp-millis': required when 'scan.startup.mode' = 'timestamp' (ms since the epoch)"
                        )
                    })?
                    .max(0) as u64,
            ),
            "external-subscription" => Startup::ExternalSubscription {
                name: o
                    .get("scan.startup.sub-name")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        anyhow!(
                            "option 'scan.startup.sub-name': required when 'scan.startup.mode' = 'external-subscription'"
                        )
                    })?
                    .to_owned(),
                from_earliest: o.get("scan.startup.sub-start-offset") == Some("earliest"),
            },
            "specific-offsets" => {
                let text = o.get("scan.startup.specific-offsets").ok_or_else(|| {
                    anyhow!(
                        "option 'scan.startup.specific-offsets': required when 'scan.startup.mode' = 'specific-offsets' (e.g. '42:1012:0;44:1011:1')"
                    )
                })?;
                Startup::SpecificOffsets(parse_specific_offsets(text)?)
            }
            other => bail!(
                "option 'scan.startup.mode': '{other}' is not allowed; allowed values: {}",
                opt::STARTUP_MODES.join(", ")
            ),
        })
    }

    pub fn data_loss(&self) -> DataLossPolicy {
        if self.settings.bool(opt::FAIL_ON_DATA_LOSS) {
            DataLossPolicy::Fail
        } else {
            DataLossPolicy::UseEarliest
        }
    }
}

/// The Java client's `MessageId.earliest` (`-1:-1:-1`) and `MessageId.latest`
/// (`9223372036854775807:9223372036854775807:-1`) as users copy them from `toString()`, with the partition
/// they name.
fn sentinel(id: &str) -> Option<(OffsetStart, i32)> {
    let parts: Vec<&str> = id.split(':').map(str::trim).collect();
    if !(3..=4).contains(&parts.len()) {
        return None;
    }
    let partition: i32 = parts[2].parse().ok().filter(|p| *p >= -1)?;
    match (parts[0], parts[1]) {
        ("-1", "-1") => Some((OffsetStart::Earliest, partition)),
        ("9223372036854775807", "9223372036854775807") => Some((OffsetStart::Latest, partition)),
        _ => None,
    }
}

/// `ledger:entry:partition[:batch]` entries separated by `;` (a trailing `;` is fine), each optionally
/// `<topic>@` qualified.
pub fn parse_specific_offsets(text: &str) -> Result<Vec<SpecificOffset>> {
    let mut out: Vec<SpecificOffset> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (topic, id) = match entry.rsplit_once('@') {
            Some((t, id)) => (
                Some(TopicName::parse(t.trim()).map_err(|e| {
                    anyhow!("option 'scan.startup.specific-offsets': entry '{entry}': {e:#}")
                })?),
                id.trim(),
            ),
            None => (None, entry),
        };
        let (start, partition) = match sentinel(id) {
            Some((start, partition)) => (start, partition),
            None => {
                let parsed = parse_message_id(id).map_err(|e| {
                    anyhow!(
                        "option 'scan.startup.specific-offsets': entry '{entry}' should be 'ledger:entry:partition[:batch]' (e.g. '42:1012:0;44:1011:1', or '-1:-1:-1' for earliest): {e}"
                    )
                })?;
                (OffsetStart::At(id.to_owned()), parsed.partition)
            }
        };
        // A later entry for the same partition wins, as in the reference.
        out.retain(|o| !(o.topic == topic && o.partition == partition));
        out.push(SpecificOffset {
            topic,
            start,
            partition,
        });
    }
    if out.is_empty() {
        bail!("option 'scan.startup.specific-offsets': no entry (e.g. '42:1012:0;44:1011:1')");
    }
    Ok(out)
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

    #[test]
    fn specific_offsets_syntax() {
        let v = parse_specific_offsets("42:1012:0;44:1011:1;").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].partition, 1);
        let v = parse_specific_offsets("persistent://public/default/t@1:2:-1:3").unwrap();
        assert_eq!(v[0].partition, -1);
        assert!(v[0].topic.is_some());
        let e = parse_specific_offsets("42,1012,0").unwrap_err().to_string();
        assert!(e.contains("scan.startup.specific-offsets"), "{e}");
        let v = parse_specific_offsets("1:2:0;3:4:0").unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].start, OffsetStart::At("3:4:0".into()));
        // The Java client's MessageId.earliest / MessageId.latest texts.
        let v = parse_specific_offsets("-1:-1:-1").unwrap();
        assert_eq!(
            (v[0].start.clone(), v[0].partition),
            (OffsetStart::Earliest, -1)
        );
        let v =
            parse_specific_offsets("9223372036854775807:9223372036854775807:-1;-1:-1:2").unwrap();
        assert_eq!(v[0].start, OffsetStart::Latest);
        assert_eq!(
            (v[1].start.clone(), v[1].partition),
            (OffsetStart::Earliest, 2)
        );
        assert!(parse_specific_offsets("-1:5:0").is_err());
    }
}
