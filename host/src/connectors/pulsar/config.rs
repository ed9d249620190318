//! A Pulsar table's options turned into typed configuration, validated once (errors name the option and
//! what is allowed; secrets never appear in them).

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use super::layout::Layout;
use super::options::{self as opt, Settings};
use crate::catalog::CatalogTable;
use crate::plugins::catalog::PluginCatalog;
use crate::plugins::{Kind, Manifest};
use crate::pulsar::client::{Authentication, ClientConfig};
use crate::pulsar::message_id::parse_message_id;
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
    /// `ledger:entry:partition[:batch]`.
    pub id: String,
    pub partition: i32,
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
    })
}

/// `auth-plugin-classname` + `auth-params` as client authentication.
pub fn authentication(settings: &Settings) -> Result<Authentication> {
    let plugin = settings.get(opt::AUTH_PLUGIN).map(str::trim).unwrap_or("");
    let params = settings.get(opt::AUTH_PARAMS).map(str::trim).unwrap_or("");
    let token_plugin = matches!(
        plugin,
        "org.apache.pulsar.client.impl.auth.AuthenticationToken" | "token" | "AuthenticationToken"
    );
    if plugin.is_empty() && params.is_empty() {
        return Ok(Authentication::None);
    }
    if !plugin.is_empty() && !token_plugin {
        bail!(
            "option '{}': authentication plugin '{plugin}' is not supported; allowed: org.apache.pulsar.client.impl.auth.AuthenticationToken (token)",
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
        read_token_file(path).map_err(|e| anyhow!("option '{}': {e:#}", opt::AUTH_PARAMS))?
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

fn read_token_file(path: &str) -> Result<String> {
    let path = std::path::Path::new(path);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("'{}' is not a file path", path.display());
    };
    let dir = cap_std::fs::Dir::open_ambient_dir(parent, cap_std::ambient_authority())
        .with_context(|| format!("opening {}", parent.display()))?;
    let text = dir
        .read_to_string(name)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    Ok(text.trim().to_owned())
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
            bail!("option 'admin-url': '{a}' is not an HTTP URL; expected http://host:8080");
        }
        let mut client = ClientConfig::new(service_url);
        client.auth = authentication(&settings)?;
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
        let compression = match s.get(opt::COMPRESSION).unwrap_or("NONE") {
            "LZ4" => CompressionKind::Lz4,
            "ZLIB" => CompressionKind::Zlib,
            "ZSTD" => CompressionKind::Zstd,
            "SNAPPY" => CompressionKind::Snappy,
            _ => CompressionKind::None,
        };
        if batching.is_some() && compression != CompressionKind::None {
            bail!(
                "option '{}': '{}' needs '{}' = 'false': compressed batches are not supported yet (the Pulsar client compresses messages one by one, which other clients cannot read inside a batch); allowed with batching: NONE",
                opt::COMPRESSION,
                s.get(opt::COMPRESSION).unwrap_or_default(),
                opt::BATCHING
            );
        }
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
                regex::Regex::new(&p).map_err(|e| {
                    anyhow!("option 'topic-pattern': '{p}' is not a regular expression: {e}")
                })?;
                Ok(TopicSelection::Pattern(p))
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
        let parsed = parse_message_id(id).map_err(|e| {
            anyhow!(
                "option 'scan.startup.specific-offsets': entry '{entry}' should be 'ledger:entry:partition[:batch]' (e.g. '42:1012:0;44:1011:1'): {e}"
            )
        })?;
        let partition = parsed.partition;
        // A later entry for the same partition wins, as in the reference.
        out.retain(|o| !(o.topic == topic && o.partition == partition));
        out.push(SpecificOffset {
            topic,
            id: id.to_owned(),
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
        assert_eq!(v[0].id, "3:4:0");
    }
}
