//! The `pulsar` connector (also `pulsar-inlong`): source and sink over Apache Pulsar, formats and routers
//! as plugins.
//!
//! - [`options`]: every option, declared once (both spellings of the two reference generations).
//! - [`config`]: validated options → [`config::PulsarTableConfig`] (client, startup, sink settings,
//!   formats), decoded once when the catalog validates the table and kept by the catalog
//!   ([`CatalogTable::config`]); [`client_config`]: authentication and TLS files, read then.
//! - [`layout`]: key / value / metadata columns (`key.fields`, `value.fields-include`).
//! - [`metadata`]: the metadata keys — one table of key, type, doc, reader and writer.
//! - [`source`], [`sink`]: the runtime sides.

pub mod client_config;
pub mod config;
pub mod layout;
pub mod metadata;
pub mod options;
pub mod schema;
pub mod sink;
pub mod source;
pub mod tls_auth;
pub mod txn_acks;

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};

use crate::connector_api::changelog::{ChangelogMode, RowKind};
use crate::connector_api::{
    CatalogTable, ConnectorFactory, JobSettings, MetadataDecl, Parallelism, Sink, SinkFactory,
    Source, SourceFactory, TableConfigSlot,
};
use crate::options::OptionSet;
use crate::plugins::Kind;
use crate::plugins::catalog::PluginCatalog;
use crate::sql::Pos;

use config::PulsarTableConfig;
use sink::{PulsarSink, SinkSpec};
use source::{PulsarSource, SourceSpec};

/// The router used when `sink.message-router` is not set: Pulsar's default routing.
pub const DEFAULT_ROUTER: &str = "round-robin";

/// The names the Pulsar connector is registered under: the append-only log and the upsert table (ADR 0016),
/// each also under InLong's name.
pub const NAMES: [&str; 4] = [
    "pulsar",
    "pulsar-inlong",
    "upsert-pulsar",
    "upsert-pulsar-inlong",
];

/// The Pulsar connector under one of its names.
pub struct PulsarFactory {
    name: &'static str,
    /// `upsert-pulsar`: a table keyed by its primary key (tombstones are deletes).
    upsert: bool,
    plugins: Arc<PluginCatalog>,
}

impl PulsarFactory {
    /// One of [`NAMES`], reading format and router plugins from `plugins`.
    pub fn new(name: &'static str, plugins: Arc<PluginCatalog>) -> Self {
        PulsarFactory {
            name,
            upsert: name.starts_with("upsert-"),
            plugins,
        }
    }

    fn plugins(&self) -> Arc<PluginCatalog> {
        self.plugins.clone()
    }

    /// The table's configuration, decoded once by [`ConnectorFactory::validate_table`].
    fn config(&self, table: &CatalogTable) -> Result<Arc<PulsarTableConfig>> {
        table.config_as::<PulsarTableConfig>().ok_or_else(|| {
            anyhow!(
                "table '{}' was not validated by connector '{}' (its configuration is decoded when the catalog is built)",
                table.name(),
                self.name
            )
        })
    }

    /// The router plugin and its options, checked against the router's manifest.
    fn router(&self, cfg: &PulsarTableConfig) -> Result<(String, Vec<(String, String)>)> {
        let name = cfg
            .sink
            .router
            .clone()
            .unwrap_or_else(|| DEFAULT_ROUTER.to_owned());
        let options = cfg.sink.router_options.clone();
        let manifest = self
            .plugins()
            .manifest(&name, Kind::Router)
            .map_err(|e| anyhow!("option '{}': {e:#}", options::ROUTER))?;
        manifest
            .resolve_options(&options)
            .map_err(|e| anyhow!("option '{}': router '{name}': {e:#}", options::ROUTER))?;
        Ok((name, options))
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
        &metadata::DECLS
    }

    /// `value.<key>`: the value format's readable metadata (its manifest's `[[metadata]]`), checked in
    /// `validate_table` (ADR 0016).
    fn owns_metadata_key(&self, key: &str) -> bool {
        key.starts_with(layout::FORMAT_METADATA_PREFIX)
    }

    fn plugin_option_prefixes(&self, raw: &[(String, String, Pos)]) -> Vec<String> {
        config::format_prefixes(|k| {
            raw.iter()
                .find(|(key, _, _)| key == k)
                .map(|(_, v, _)| v.as_str())
        })
    }

    fn validate_table(&self, table: &CatalogTable) -> Result<Option<TableConfigSlot>> {
        if !self.upsert
            && let Some(pk) = &table.def.primary_key
        {
            bail!(
                "PRIMARY KEY ({}) is not supported by connector '{}' (an append-only log of messages, where a key is not unique); use connector 'upsert-{}' for a table keyed by its primary key",
                pk.join(", "),
                self.name,
                self.name
            );
        }
        let cfg =
            PulsarTableConfig::decode(table, &self.plugins(), self.upsert.then_some(self.name))?;
        // Routers are only needed by sinks; a missing router plugin is reported when the table is written.
        if cfg.sink.router.is_some() {
            self.router(&cfg)?;
        }
        if !cfg.passed_through.is_empty() {
            tracing::warn!(table = %table.name(), keys = %cfg.passed_through.join(", "), "Pulsar client settings accepted but not applied");
        }
        if !cfg.tls_ignored.is_empty() {
            tracing::warn!(table = %table.name(), keys = %cfg.tls_ignored.join(", "), "TLS settings ignored: neither 'service-url' (pulsar://) nor 'admin-url' uses TLS");
        }
        Ok(Some(Arc::new(cfg)))
    }

    fn metric_labels(&self, table: &CatalogTable) -> crate::connector_api::MetricLabels {
        self.config(table)
            .map(|c| c.metric_labels.clone())
            .unwrap_or_default()
    }

    fn validate_settings(&self, table: &CatalogTable, settings: &JobSettings) -> Result<()> {
        let cfg = self.config(table)?;
        if cfg.sink.semantic != sink::Semantic::ExactlyOnce {
            return Ok(());
        }
        let timeout = cfg.sink.txn_timeout;
        let commit = cfg.sink.max_block_time;
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

    fn source(&self) -> Option<&dyn SourceFactory> {
        Some(self)
    }

    fn sink(&self) -> Option<&dyn SinkFactory> {
        Some(self)
    }
}

impl SourceFactory for PulsarFactory {
    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>> {
        let spec = SourceSpec {
            cfg: self.config(table)?,
            schema: table.source_schema(),
            plugins: self.plugins(),
        };
        // The decoders the source makes when it starts, made once now so that `validate` (which builds
        // every source) runs the format plugins' own checks too.
        source::make_decoders(&spec)?;
        Ok(Box::new(PulsarSource::new(spec)))
    }

    fn parallelism(&self, table: &CatalogTable) -> Parallelism {
        match self.config(table) {
            Ok(cfg) => Parallelism::Parallel(cfg.source.parallelism),
            Err(_) => Parallelism::Single,
        }
    }

    /// An upsert table's tombstones become deletes holding only the key.
    fn deletes_carry_only_the_key(&self, _table: &CatalogTable) -> bool {
        self.upsert
    }

    /// The value format's row kinds (`debezium-json`: all four; `json`: inserts).
    fn changelog_mode(&self, table: &CatalogTable) -> ChangelogMode {
        if self.upsert {
            // A message with a value upserts its key (`+U`), a tombstone deletes it (`-D`).
            return ChangelogMode::of([RowKind::UpdateAfter, RowKind::Delete]);
        }
        self.config(table)
            .ok()
            .and_then(|cfg| cfg.value_format.as_ref().map(|f| f.changelog_mode))
            .unwrap_or(ChangelogMode::INSERT_ONLY)
    }
}

impl SinkFactory for PulsarFactory {
    fn parallelism(&self, table: &CatalogTable) -> Parallelism {
        match self.config(table) {
            Ok(cfg) => Parallelism::Parallel(cfg.sink.parallelism),
            Err(_) => Parallelism::Single,
        }
    }

    /// The value format's row kinds: an append-only log takes updates and deletes only through a
    /// changelog format that writes them (`debezium-json`), as Flink's Pulsar sink.
    fn accepted_changelog_mode(&self, table: &CatalogTable) -> ChangelogMode {
        if self.upsert {
            // `+I`/`+U` write the key's value, `-D` a tombstone; `-U` is dropped (its `+U` follows).
            return ChangelogMode::ALL;
        }
        self.config(table)
            .ok()
            .and_then(|cfg| cfg.value_format.as_ref().map(|f| f.changelog_mode))
            .unwrap_or(ChangelogMode::INSERT_ONLY)
    }

    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>> {
        let cfg = self.config(table)?;
        let topic = cfg.sink_topic()?;
        for c in table.sink_columns() {
            if let Some(key) = table.metadata_key(c)
                && !metadata::writable(key)
            {
                bail!(
                    "table '{}': column '{}': metadata '{key}' is read-only; declare it VIRTUAL to write to the table",
                    table.name(),
                    c.name
                );
            }
        }
        let router = self.router(&cfg)?;
        let topic_schema = match &cfg.value_format {
            Some(f) => {
                self.plugins()
                    .manifest(&f.plugin, Kind::Format)?
                    .pulsar_schema
            }
            None => None,
        };
        let spec = SinkSpec {
            topic_schema,
            topic,
            schema: table.sink_schema(),
            router: Some(router),
            plugins: self.plugins(),
            cfg,
        };
        // As for sources: the plugins' own checks run whenever a sink is built, `validate` included.
        sink::make_codecs(&spec)?;
        Ok(Box::new(PulsarSink::new(spec)))
    }
}
