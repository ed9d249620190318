//! The `pulsar` connector (also `pulsar-inlong`): source and sink over Apache Pulsar, formats and routers
//! as plugins.
//!
//! - [`options`]: every option, declared once (both spellings of the two reference generations).
//! - [`config`]: options → typed configuration (client, auth, startup, formats), validated once.
//! - [`layout`]: key / value / metadata columns (`key.fields`, `value.fields-include`).
//! - [`source`], [`sink`]: the runtime sides.

pub mod config;
pub mod layout;
pub mod options;
pub mod schema;
pub mod sink;
pub mod source;
pub mod tls_auth;
pub mod txn_acks;

use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};

use crate::catalog::CatalogTable;
use crate::connectors::{ConnectorFactory, MetadataDecl, Sink, Source};
use crate::options::OptionSet;
use crate::plugins::Kind;
use crate::plugins::catalog::PluginCatalog;
use crate::pulsar::topics::{TopicName, parse_topic_list};
use crate::sql::Pos;

use config::TableConfig;
use sink::{PulsarSink, Semantic, SinkSpec};
use source::{PulsarSource, SourceSpec};

/// The router used when `sink.message-router` is not set: Pulsar's default routing.
pub const DEFAULT_ROUTER: &str = "round-robin";

static METADATA: &[MetadataDecl] = &[
    MetadataDecl {
        key: "topic",
        flink_type: "STRING NOT NULL",
        readable: true,
        writable: false,
        doc: "The topic (partition) the message was read from.",
    },
    MetadataDecl {
        key: "messageId",
        flink_type: "BYTES NOT NULL",
        readable: true,
        writable: false,
        doc: "Pulsar's serialized message id (`MessageId.toByteArray()` of the Java client).",
    },
    MetadataDecl {
        key: "sequenceId",
        flink_type: "BIGINT NOT NULL",
        readable: true,
        writable: false,
        doc: "The producer's sequence id.",
    },
    MetadataDecl {
        key: "publishTime",
        flink_type: "TIMESTAMP_LTZ(3) NOT NULL",
        readable: true,
        writable: false,
        doc: "Publish time.",
    },
    MetadataDecl {
        key: "eventTime",
        flink_type: "TIMESTAMP_LTZ(3)",
        readable: true,
        writable: true,
        doc: "Event time; NULL when the producer set none (the reference shows 1970-01-01). Written when not NULL and not negative.",
    },
    MetadataDecl {
        key: "properties",
        flink_type: "MAP<STRING, STRING>",
        readable: true,
        writable: true,
        doc: "Message properties. On write, entries with a NULL key or value are skipped.",
    },
];

/// The Pulsar connector under one of its names.
pub struct PulsarFactory {
    name: &'static str,
    plugins: Arc<PluginCatalog>,
}

impl PulsarFactory {
    /// `pulsar` or `pulsar-inlong`, reading format and router plugins from `plugins`.
    pub fn new(name: &'static str, plugins: Arc<PluginCatalog>) -> Self {
        PulsarFactory { name, plugins }
    }

    fn plugins(&self) -> Arc<PluginCatalog> {
        self.plugins.clone()
    }

    fn config(&self, table: &CatalogTable, for_source: bool) -> Result<TableConfig> {
        TableConfig::of(table, &self.plugins(), for_source)
    }

    fn router(&self, table: &CatalogTable) -> Result<(String, Vec<(String, String)>)> {
        let name = table
            .options
            .get("sink.message-router")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(DEFAULT_ROUTER)
            .to_owned();
        let options: Vec<(String, String)> = table
            .options
            .prefixed("sink.message-router.")
            .into_iter()
            .collect();
        let manifest = self
            .plugins()
            .manifest(&name, Kind::Router)
            .map_err(|e| anyhow!("option 'sink.message-router': {e:#}"))?;
        manifest
            .resolve_options(&options)
            .map_err(|e| anyhow!("option 'sink.message-router': router '{name}': {e:#}"))?;
        Ok((name, options))
    }

    fn sink_topic(&self, table: &CatalogTable, cfg: &TableConfig) -> Result<TopicName> {
        if table.options.contains("topic-pattern") || cfg.settings.topic_pattern.is_some() {
            bail!("option 'topic-pattern': a sink writes to one topic; set 'topic'");
        }
        let text = table
            .options
            .get("topic")
            .map(str::to_owned)
            .or_else(|| cfg.settings.topic.clone())
            .ok_or_else(|| anyhow!("option 'topic': required by a sink"))?;
        let mut topics = parse_topic_list(&text).map_err(|e| anyhow!("option 'topic': {e:#}"))?;
        if topics.len() != 1 {
            bail!(
                "option 'topic': a sink writes to exactly one topic, got {} ('{text}')",
                topics.len()
            );
        }
        Ok(topics.remove(0))
    }
}

impl ConnectorFactory for PulsarFactory {
    fn name(&self) -> &'static str {
        self.name
    }

    fn options(&self) -> &OptionSet {
        &options::OPTIONS
    }

    fn metadata(&self) -> &[MetadataDecl] {
        METADATA
    }

    fn plugin_option_prefixes(&self, raw: &[(String, String, Pos)]) -> Vec<String> {
        config::format_prefixes(|k| {
            raw.iter()
                .find(|(key, _, _)| key == k)
                .map(|(_, v, _)| v.as_str())
        })
    }

    fn validate_table(&self, table: &CatalogTable) -> Result<()> {
        let cfg = self.config(table, true)?;
        if let Some(pk) = &table.def.primary_key {
            bail!(
                "PRIMARY KEY ({}) is not supported by connector '{}' (an append-only log); the upsert variant is not available yet",
                pk.join(", "),
                self.name
            );
        }
        cfg.startup(table)?;
        cfg.selection(table)?;
        cfg.writer_config()?;
        // Routers are only needed by sinks; a missing router plugin is reported when the table is written.
        if table.options.contains("sink.message-router") {
            self.router(table)?;
        }
        if let Some(d) = table.options.get("sink.dead-letter-topic") {
            TopicName::parse(d).map_err(|e| anyhow!("option 'sink.dead-letter-topic': {e:#}"))?;
        }
        if !cfg.settings.ignored.is_empty() {
            tracing::warn!(table = %table.name(), keys = %cfg.settings.ignored.join(", "), "Pulsar client settings accepted but not applied");
        }
        if !cfg.tls_ignored.is_empty() {
            tracing::warn!(table = %table.name(), keys = %cfg.tls_ignored.join(", "), "TLS settings ignored: neither 'service-url' (pulsar://) nor 'admin-url' uses TLS");
        }
        Ok(())
    }

    fn validate_settings(
        &self,
        table: &CatalogTable,
        settings: &crate::catalog::JobSettings,
    ) -> Result<()> {
        if table.options.get("sink.semantic") != Some("exactly-once") {
            return Ok(());
        }
        let cfg = options::Settings::resolve(&table.options)
            .map_err(|(k, m)| anyhow!("option '{k}': {m}"))?;
        let timeout = cfg
            .duration(options::TXN_TIMEOUT)
            .unwrap_or(std::time::Duration::from_secs(3600));
        let commit =
            std::time::Duration::from_millis(cfg.i64(options::MAX_BLOCK_TIME).max(0) as u64);
        let needed = settings.checkpoint_interval + settings.checkpoint_timeout + commit;
        if timeout <= needed {
            bail!(
                "option '{}': {} is too short for exactly-once: a transaction stays open for a checkpoint interval ({}) plus the checkpoint timeout ({}) plus the commit wait '{}' ({}); set it above {}",
                options::TXN_TIMEOUT,
                crate::options::duration::format(timeout),
                crate::options::duration::format(settings.checkpoint_interval),
                crate::options::duration::format(settings.checkpoint_timeout),
                options::MAX_BLOCK_TIME,
                crate::options::duration::format(commit),
                crate::options::duration::format(needed)
            );
        }
        Ok(())
    }

    fn supports_source(&self) -> bool {
        true
    }

    fn supports_sink(&self) -> bool {
        true
    }

    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>> {
        let cfg = self.config(table, true)?;
        let selection = cfg.selection(table)?;
        let startup = cfg.startup(table)?;
        let spec = SourceSpec {
            cfg: Arc::new(cfg),
            selection,
            startup,
            schema: table.source_schema(),
            plugins: self.plugins(),
        };
        // The decoders the source makes when it starts, made once now so that `validate` (which builds
        // every source) runs the format plugins' own checks too.
        source::make_decoders(&spec)?;
        Ok(Box::new(PulsarSource::new(spec)))
    }

    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>> {
        let cfg = self.config(table, false)?;
        let topic = self.sink_topic(table, &cfg)?;
        for c in table.sink_columns() {
            if let Some(key) = table.metadata_key(c)
                && !METADATA.iter().any(|m| m.key == key && m.writable)
            {
                bail!(
                    "table '{}': column '{}': metadata '{key}' is read-only; declare it VIRTUAL to write to the table",
                    table.name(),
                    c.name
                );
            }
        }
        let semantic = match table
            .options
            .get("sink.semantic")
            .unwrap_or("at-least-once")
        {
            "none" => Semantic::None,
            "exactly-once" => Semantic::ExactlyOnce,
            _ => Semantic::AtLeastOnce,
        };
        let dead_letter = match table.options.get("sink.dead-letter-topic") {
            Some(t) => Some(
                TopicName::parse(t)
                    .map_err(|e| anyhow!("option 'sink.dead-letter-topic': {e:#}"))?,
            ),
            None => None,
        };
        let router = self.router(table)?;
        let writer = cfg
            .writer_config()
            .with_context(|| format!("table '{}'", table.name()))?;
        let topic_schema = match &cfg.value_format {
            Some(f) => {
                self.plugins()
                    .manifest(&f.plugin, Kind::Format)?
                    .pulsar_schema
            }
            None => None,
        };
        let spec = SinkSpec {
            cfg: Arc::new(cfg),
            writer,
            topic_schema,
            topic,
            schema: table.sink_schema(),
            semantic,
            router: Some(router),
            dead_letter,
            plugins: self.plugins(),
        };
        // As for sources: the plugins' own checks run whenever a sink is built, `validate` included.
        sink::make_codecs(&spec)?;
        Ok(Box::new(PulsarSink::new(spec)))
    }
}
