//! A Pulsar table's options decoded once, at validation, into [`PulsarTableConfig`] (errors name the
//! option and what is allowed; secrets never appear in them). The catalog keeps the result
//! ([`crate::connector_api::CatalogTable::config`]); sources and sinks are built from it, so token, OAuth2 key
//! and trust files are read once per table and a table both read and written shares one OAuth2 client.
//!
//! `scan.startup.mode` in three hops: declared in [`super::options`] (`STARTUP_MODE`), decoded here into
//! [`SourceConfig::startup`] ([`startup`]), used by the source's fresh start (`source::fresh_start`).

mod inlong;
mod startup;
mod stop;
mod upsert;

use std::time::Duration;

use arrow::datatypes::SchemaRef;

use anyhow::{Context as _, Result, anyhow, bail};

use super::client_config::{authentication, tls_options};
use super::layout::Layout;
use super::options as opt;
use crate::connector_api::CatalogTable;
use crate::connector_api::changelog::ChangelogMode;
use crate::options::{OptionError, ResolvedOptions};
use crate::plugins::catalog::PluginCatalog;
use crate::plugins::error::PluginError;
use crate::plugins::{Kind, Manifest, Plugin};
use crate::pulsar::client::ClientConfig;
use crate::pulsar::reader::{DataLossPolicy, StopCursor, SubscriptionKind};
use crate::pulsar::topics::{TopicName, TopicSelection, parse_topic_list};
use crate::pulsar::writer::WriterConfig;
use crate::sql::{ColumnKind, FlinkType};
use magnetar::proto::types::CompressionKind;
pub use startup::{OffsetStart, SpecificOffset, Startup, parse_specific_offsets};
use startup::{startup, subscription_kind};

/// A format plugin and its options (format prefix stripped, checked against the manifest).
#[derive(Debug, Clone)]
pub struct FormatSpec {
    pub plugin: String,
    /// The format's options as the table sets them (without the prefix). The plugin layer fills in the
    /// manifest's defaults, so a new version of the plugin brings its own (hot reload, ADR 0024).
    pub options: Vec<(String, String)>,
    /// Per-message decode errors skip the message (counted) instead of failing the job: the format's own
    /// `ignore-parse-errors` option (a convention of the built-in formats).
    pub skip_errors: bool,
    /// How the table spells this format's options (`raw.`, `key.json.`).
    pub prefix: String,
    /// The table's option that names the format (`format`, `key.format`).
    pub role: String,
    /// The row kinds the format reads and writes (its manifest's `changelog-mode`, ADR 0016).
    pub changelog_mode: ChangelogMode,
    /// The format's readable metadata: key and type (its manifest's `[[metadata]]`).
    pub metadata: Vec<(String, FlinkType)>,
}

impl FormatSpec {
    /// A factory error of the format plugin with the option named as the user wrote it (`'raw.charset'`,
    /// not the plugin's `charset`), or the table's format option when the plugin named none.
    pub fn factory_error(&self, table: &str, e: &PluginError) -> anyhow::Error {
        match e.option() {
            Some(o) => anyhow!("table '{table}', option '{}{o}': {e}", self.prefix),
            None => anyhow!("table '{table}', option '{}': {e}", self.role),
        }
    }
}

/// `sink.semantic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantic {
    AtLeastOnce,
    None,
    ExactlyOnce,
}

/// What a source of the table needs, decoded once.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// `topic` / `topic-pattern` (also under `properties.`).
    pub selection: TopicSelection,
    /// `topic` as written (a sink's error quotes it).
    pub topic_text: Option<String>,
    /// `scan.startup.*`: where a fresh start begins.
    pub startup: Startup,
    /// `source.stop.*`: where reading ends (`Never`: unbounded).
    pub stop: StopCursor,
    /// `pulsar.reader.subscription-role-prefix`.
    pub subscription_prefix: String,
    /// `partition.discovery.interval-millis` (at least 100 ms); `None`: no discovery.
    pub discovery: Option<Duration>,
    /// `commit-max-retries`.
    pub commit_retries: u32,
    /// `enable-key-hash-range` with `scan.parallelism`: readers per split; `None`: one for every key.
    pub key_ranges: Option<u16>,
    /// `scan.parallelism`: source subtasks (`None`: the job's `parallelism.default` or the default).
    pub parallelism: Option<usize>,
    /// `pulsar.reader.fail-on-data-loss`.
    pub data_loss: DataLossPolicy,
    /// `subscription-type`.
    pub subscription_kind: SubscriptionKind,
    /// `pulsar.reader.receiver-queue-size`: messages prefetched per split (`None`:
    /// [`crate::pulsar::reader::default_receiver_queue`]).
    pub receiver_queue: Option<u32>,
}

/// What a sink into the table needs, decoded once.
#[derive(Debug, Clone)]
pub struct SinkConfig {
    /// Producer settings (batching, compression, name, timeouts).
    pub writer: WriterConfig,
    /// `sink.semantic`.
    pub semantic: Semantic,
    /// `sink.dead-letter-topic`.
    pub dead_letter: Option<TopicName>,
    /// `sink.message-router` (trimmed; `None`: the default router) and its `sink.message-router.*` options.
    pub router: Option<String>,
    pub router_options: Vec<(String, String)>,
    /// `flush-on-checkpoint`.
    pub flush_on_checkpoint: bool,
    /// `sink.parallelism`: sink subtasks (`None`: the job's `parallelism.default` or the source's).
    pub parallelism: Option<usize>,
    /// `fail-on-write`.
    pub fail_on_write: bool,
    /// `send-delay-millisecond`.
    pub send_delay_ms: i64,
    /// `transaction-timeout`.
    pub txn_timeout: Duration,
    /// `max-block-time-ms`: how long a commit may wait for the coordinator.
    pub max_block_time: Duration,
}

/// A Pulsar table's typed configuration: everything both sides need.
#[derive(Debug, Clone)]
pub struct PulsarTableConfig {
    pub table: String,
    pub client: ClientConfig,
    pub admin_url: Option<String>,
    pub value_format: Option<FormatSpec>,
    pub key_format: Option<FormatSpec>,
    pub layout: Layout,
    /// `upsert-pulsar`: keyed by the primary key; tombstones are deletes (see [`upsert::check`]).
    pub upsert: bool,
    pub source: SourceConfig,
    pub sink: SinkConfig,
    /// `properties.` keys accepted but not applied (warned about at start).
    pub passed_through: Vec<String>,
    /// TLS settings given although no URL of the table uses TLS (warned about at start).
    pub tls_ignored: Vec<&'static str>,
    /// `inlong.metric.labels`, and whether the table is a `pulsar-inlong` one (InLong's metric names).
    pub metric_labels: crate::connector_api::MetricLabels,
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
        options: plain,
        skip_errors,
        prefix: prefixes.first().cloned().unwrap_or_default(),
        role: role.to_owned(),
        changelog_mode: manifest.changelog_mode(),
        metadata: manifest
            .metadata_types()
            .into_iter()
            .map(|(k, t)| (k.to_owned(), t))
            .collect(),
    })
}

/// An error naming an option of `table`, found while decoding.
fn option_error(table: &str, option: &str, message: impl Into<String>) -> anyhow::Error {
    OptionError::decoding(table, option, message).into()
}

/// A built decoder or encoder and the format it was built from.
pub type Codec<'a, T> = (T, &'a FormatSpec);

impl PulsarTableConfig {
    /// The table's value codec and, with a key format, its key codec: each format plugin loaded (verified,
    /// compiled through the cache) and `make` (a decoder's or an encoder's factory) run with the format's
    /// options and row type; a refusal names the table's format option.
    ///
    /// `reading`: the value codec also produces the format metadata the table reads (`make` gets the keys,
    /// and the value columns followed by the metadata columns as its schema).
    pub fn format_codecs<T>(
        &self,
        plugins: &PluginCatalog,
        reading: bool,
        make: impl Fn(&Plugin, &[(String, String)], SchemaRef, &[String]) -> Result<T, PluginError>,
    ) -> Result<(Codec<'_, T>, Option<Codec<'_, T>>)> {
        let value_spec = self
            .value_format
            .as_ref()
            .ok_or_else(|| anyhow!("table '{}': no value format", self.table))?;
        let build = |spec: &FormatSpec, schema: &SchemaRef, keys: &[String]| -> Result<T> {
            let plugin = plugins.load(&spec.plugin, Kind::Format)?;
            make(&plugin, &spec.options, schema.clone(), keys)
                .map_err(|e| spec.factory_error(&self.table, &e))
        };
        let value = if reading {
            build(
                value_spec,
                &self.layout.value_read_schema,
                &self.layout.value_metadata,
            )?
        } else {
            build(value_spec, &self.layout.value_schema, &[])?
        };
        let key = match (&self.key_format, &self.layout.key_schema) {
            (Some(k), Some(schema)) => Some((build(k, schema, &[])?, k)),
            _ => None,
        };
        Ok(((value, value_spec), key))
    }

    /// Decodes `table`'s validated options (the option layer has applied defaults and rules) and reads
    /// the files they name. Called once per table, by the catalog's validation. `upsert`: the name of the
    /// upsert connector the table uses (`upsert-pulsar`), whose extra rules apply.
    pub fn decode(
        table: &CatalogTable,
        catalog: &PluginCatalog,
        upsert: Option<&str>,
    ) -> Result<Self> {
        let o = &table.options;
        let name = table.name();
        let service_url = o.get("service-url").unwrap_or_default().trim().to_owned();
        if !(service_url.starts_with("pulsar://") || service_url.starts_with("pulsar+ssl://")) {
            return Err(option_error(
                name,
                "service-url",
                format!(
                    "'{service_url}' is not a Pulsar service URL; expected pulsar://host:6650 or pulsar+ssl://host:6651"
                ),
            ));
        }
        let admin_url = o.get("admin-url").map(|s| s.trim().to_owned());
        if let Some(a) = &admin_url
            && !(a.starts_with("http://") || a.starts_with("https://"))
        {
            return Err(option_error(
                name,
                "admin-url",
                format!("'{a}' is not an HTTP URL; expected http://host:8080 or https://host:8443"),
            ));
        }
        let uses_tls = service_url.starts_with("pulsar+ssl://")
            || admin_url
                .as_deref()
                .is_some_and(|a| a.starts_with("https://"));
        let mut tls_ignored = Vec::new();
        let mut client = ClientConfig::new(service_url);
        client.tls = tls_options(o, uses_tls, &mut tls_ignored)?;
        client.auth = authentication(o)?;
        client.tls.client_cert = super::tls_auth::client_cert(
            o,
            &client.auth,
            client.is_tls(),
            uses_tls,
            &mut tls_ignored,
        )?;
        client.operation_timeout = millis(o, opt::OPERATION_TIMEOUT);
        if let Some(connector) = upsert {
            upsert::check_options(table, connector)?;
        }
        let layout = Layout::of(table, upsert.is_some())?;
        let prefixes = format_prefixes(|k| o.get(k));
        let value_format = match o.get("format") {
            Some(format) => Some(format_spec(
                table,
                catalog,
                format,
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
            return Err(option_error(
                name,
                "format",
                "one of 'format', 'value.format' must be set (the format of the message value: json, avro, csv, raw, ...)",
            ));
        }
        let key_format = match o.get("key.format") {
            Some(format) => Some(format_spec(
                table,
                catalog,
                format,
                &[format!("key.{format}.")],
                "key.format",
            )?),
            None => None,
        };
        check_metadata_types(table, value_format.as_ref())?;
        if let Some(connector) = upsert {
            upsert::check_formats(table, connector, value_format.as_ref(), key_format.as_ref())?;
        }
        let source = SourceConfig {
            selection: selection(name, o)?,
            topic_text: o.get(opt::TOPIC).map(str::to_owned),
            startup: startup(name, o)?,
            stop: stop::stop_cursor(name, o)?,
            subscription_prefix: o
                .text(opt::SUBSCRIPTION_PREFIX)
                .unwrap_or_default()
                .to_owned(),
            discovery: o
                .int(opt::DISCOVERY)
                .filter(|ms| *ms >= 0)
                .map(|ms| Duration::from_millis(ms.max(100) as u64)),
            commit_retries: o.int(opt::COMMIT_RETRIES).unwrap_or_default().max(0) as u32,
            key_ranges: o.bool(opt::KEY_HASH_RANGE).unwrap_or_default().then(|| {
                o.int(opt::SCAN_PARALLELISM)
                    .unwrap_or(1)
                    .clamp(1, opt::MAX_KEY_RANGES) as u16
            }),
            parallelism: o.int(opt::SCAN_PARALLELISM).map(|n| n.max(1) as usize),
            data_loss: if o.bool(opt::FAIL_ON_DATA_LOSS).unwrap_or_default() {
                DataLossPolicy::Fail
            } else {
                DataLossPolicy::UseEarliest
            },
            subscription_kind: SubscriptionKind::Exclusive,
            receiver_queue: o
                .int(opt::RECEIVER_QUEUE)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        };
        let source = SourceConfig {
            subscription_kind: subscription_kind(name, o, &source)?,
            // An upsert table is read from its first message: every key's latest value matters.
            startup: if upsert.is_some() {
                Startup::Earliest
            } else {
                source.startup
            },
            ..source
        };
        stop::check_bounded(name, o, &source)?;
        let sink = SinkConfig {
            writer: writer_config(name, o)?,
            semantic: match o.text(opt::SEMANTIC) {
                Some("none") => Semantic::None,
                Some("exactly-once") => Semantic::ExactlyOnce,
                _ => Semantic::AtLeastOnce,
            },
            dead_letter: match o.get(opt::DEAD_LETTER) {
                Some(t) => Some(
                    TopicName::parse(t)
                        .map_err(|e| option_error(name, opt::DEAD_LETTER, format!("{e:#}")))?,
                ),
                None => None,
            },
            router: match upsert {
                Some(_) => Some(upsert::ROUTER.to_owned()),
                None => o
                    .get(opt::ROUTER)
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            },
            router_options: o
                .prefixed(&format!("{}.", opt::ROUTER))
                .into_iter()
                .collect(),
            flush_on_checkpoint: o.bool(opt::FLUSH_ON_CHECKPOINT).unwrap_or_default(),
            parallelism: o.int(opt::SINK_PARALLELISM).map(|n| n.max(1) as usize),
            fail_on_write: o.bool(opt::FAIL_ON_WRITE).unwrap_or_default(),
            send_delay_ms: o.int(opt::SEND_DELAY).unwrap_or_default(),
            txn_timeout: o.duration(opt::TXN_TIMEOUT).unwrap_or_default(),
            max_block_time: millis(o, opt::MAX_BLOCK_TIME),
        };
        let metric_labels = inlong::metric_labels(
            name,
            o.get(inlong::OPTION),
            table.connector.ends_with("-inlong"),
        )?;
        let cfg = PulsarTableConfig {
            metric_labels,
            table: name.to_owned(),
            client,
            admin_url,
            value_format,
            key_format,
            layout,
            upsert: upsert.is_some(),
            source,
            sink,
            passed_through: o.passed_through().to_vec(),
            tls_ignored,
        };
        if upsert.is_some() {
            // Read and written as one topic.
            cfg.sink_topic()?;
        }
        Ok(cfg)
    }

    /// The one topic a sink writes to; errors name the option.
    pub fn sink_topic(&self) -> Result<TopicName> {
        let topics = match &self.source.selection {
            TopicSelection::Pattern(_) => {
                return Err(option_error(
                    &self.table,
                    opt::TOPIC_PATTERN,
                    "a sink writes to one topic; set 'topic'",
                ));
            }
            TopicSelection::Topics(t) => t,
        };
        if topics.len() != 1 {
            let text = self.source.topic_text.as_deref().unwrap_or_default();
            return Err(option_error(
                &self.table,
                opt::TOPIC,
                format!(
                    "a sink writes to exactly one topic, got {} ('{text}')",
                    topics.len()
                ),
            ));
        }
        Ok(topics[0].clone())
    }
}

/// A positive millisecond option as a duration.
fn millis(o: &ResolvedOptions, key: &str) -> Duration {
    Duration::from_millis(o.int(key).unwrap_or_default().max(1) as u64)
}

/// Metadata columns must have the type of their key; a `value.` key must be one the value format declares.
fn check_metadata_types(table: &CatalogTable, value_format: Option<&FormatSpec>) -> Result<()> {
    for c in &table.def.columns {
        let ColumnKind::Metadata { ty, .. } = &c.kind else {
            continue;
        };
        let key = table.metadata_key(c).unwrap_or(&c.name);
        let Some(format_key) = key.strip_prefix(super::layout::FORMAT_METADATA_PREFIX) else {
            super::metadata::check_type(key, ty, &ty.to_arrow())
                .map_err(|e| anyhow!("column '{}': {e}", c.name))?;
            continue;
        };
        let Some(spec) = value_format else {
            bail!("column '{}': metadata '{key}' needs a value format", c.name);
        };
        let Some((_, declared)) = spec.metadata.iter().find(|(k, _)| k == format_key) else {
            let keys: Vec<String> = spec
                .metadata
                .iter()
                .map(|(k, _)| format!("{}{k}", super::layout::FORMAT_METADATA_PREFIX))
                .collect();
            bail!(
                "column '{}': format '{}' has no readable metadata key '{format_key}' (metadata key '{key}'); {}",
                c.name,
                spec.plugin,
                if keys.is_empty() {
                    "it declares none".to_owned()
                } else {
                    format!("available keys: {}", keys.join(", "))
                }
            );
        };
        if declared.kind != ty.kind {
            bail!(
                "column '{}': metadata '{key}' of format '{}' is {declared}, not {ty} (declare the column as {declared} and CAST it in the query)",
                c.name,
                spec.plugin,
                declared = FlinkType {
                    kind: declared.kind.clone(),
                    nullable: true
                },
            );
        }
    }
    Ok(())
}

/// An exactly-once sink's batch (messages, bytes) when its table sets neither.
pub const EXACTLY_ONCE_BATCH: (usize, usize) = (5_000, 1024 * 1024);

/// The sink's producer settings; errors name the option.
fn writer_config(table: &str, o: &ResolvedOptions) -> Result<WriterConfig> {
    // The broker spends ~1.8 ms on each transactional entry, one after another: an exactly-once sink
    // whose table sets no batch size writes batches five times larger (BENCHMARKS.md, issue 52 §3).
    let larger = o.text(opt::SEMANTIC) == Some("exactly-once")
        && !o.is_written(opt::BATCH_MESSAGES)
        && !o.is_written(opt::BATCH_BYTES);
    let batching = o.bool(opt::BATCHING).unwrap_or_default().then(|| {
        let (messages, bytes) = if larger {
            EXACTLY_ONCE_BATCH
        } else {
            (
                o.int(opt::BATCH_MESSAGES).unwrap_or_default().max(1) as usize,
                o.int(opt::BATCH_BYTES).unwrap_or_default().max(1) as usize,
            )
        };
        (
            messages,
            bytes,
            Duration::from_micros(o.int(opt::BATCH_DELAY).unwrap_or_default().max(1) as u64),
        )
    });
    // With batching, a batch is compressed as a whole (what every Pulsar client reads).
    let compression = match o.text(opt::COMPRESSION).unwrap_or_default() {
        "LZ4" => CompressionKind::Lz4,
        "ZLIB" => CompressionKind::Zlib,
        "ZSTD" => CompressionKind::Zstd,
        "SNAPPY" => CompressionKind::Snappy,
        _ => CompressionKind::None,
    };
    let producer_name = match o.get(opt::PRODUCER_NAME).map(str::trim) {
        Some("") => {
            return Err(option_error(
                table,
                opt::PRODUCER_NAME,
                "must not be empty (leave it unset to let the broker choose)",
            ));
        }
        other => other.map(str::to_owned),
    };
    let wc = WriterConfig {
        batching,
        compression,
        send_timeout: millis(o, opt::SEND_TIMEOUT),
        max_in_flight: o.int(opt::MAX_PENDING).unwrap_or_default().max(1) as usize,
        producer_name,
        schema: None,
        chunking: o.bool(opt::CHUNKING).unwrap_or_default(),
    };
    wc.validate()?;
    Ok(wc)
}

/// The topics a source reads (list or pattern). The option layer has checked that exactly one of
/// `topic`, `topic-pattern` is set (under either spelling); errors name the option.
fn selection(table: &str, o: &ResolvedOptions) -> Result<TopicSelection> {
    match (o.get(opt::TOPIC), o.get(opt::TOPIC_PATTERN)) {
        (Some(_), Some(_)) => Err(option_error(
            table,
            opt::TOPIC_PATTERN,
            "'topic' and 'topic-pattern' are mutually exclusive: set only one",
        )),
        (None, None) => Err(option_error(
            table,
            opt::TOPIC,
            "one of 'topic', 'topic-pattern' must be set",
        )),
        (Some(t), None) => {
            let topics = parse_topic_list(t)
                .map_err(|e| option_error(table, opt::TOPIC, format!("{e:#}")))?;
            Ok(TopicSelection::Topics(topics))
        }
        (None, Some(p)) => {
            let full = crate::pulsar::topics::complete_pattern(p)
                .map_err(|e| option_error(table, opt::TOPIC_PATTERN, format!("{e:#}")))?;
            Ok(TopicSelection::Pattern(full))
        }
    }
}
