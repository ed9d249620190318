//! Connectors: how a table reads and writes rows.
//!
//! A connector is one [`ConnectorFactory`] registered in the [`Registry`] under the `'connector'` value. It
//! declares its options once ([`OptionSet`]) and its metadata keys ([`MetadataDecl`]), and creates a
//! [`Source`] and/or a [`Sink`] for a table. The Pulsar connector (issues 6/7) is one more registration.
//!
//! Sources produce Arrow batches in the table's *source schema* (physical and metadata columns in declaration
//! order, computed columns excluded — the planner computes those). Sinks receive batches in the table's *sink
//! schema* (physical and non-virtual metadata columns, in declaration order).

pub mod blackhole;
pub mod datagen;
pub mod print;
pub mod pulsar;
pub mod values;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;

use crate::catalog::CatalogTable;
use crate::options::OptionSet;

/// What a source returned from one poll.
#[derive(Debug)]
pub enum SourcePoll {
    /// Rows (possibly fewer than asked for).
    Batch(RecordBatch),
    /// A bounded source has no more rows.
    End,
}

/// A table read side. One instance per INSERT that reads the table.
///
/// Checkpoint protocol (see `docs/adr/0005-job-runner.md`): the runtime calls [`Source::snapshot`] between polls,
/// right after it forwarded every batch the source returned so far, so the snapshot is the position *after the
/// last emitted row*. [`Source::restore`] is called once before the first poll with the state of the latest
/// complete checkpoint. [`Source::notify_checkpoint_complete`] tells the source that a checkpoint (and every
/// snapshot before it) is durable: the place to commit offsets to the broker.
#[async_trait]
pub trait Source: Send {
    /// Restores the position from a checkpoint (before the first poll).
    fn restore(&mut self, state: serde_json::Value) -> Result<()>;

    /// Waits for and returns up to `max_rows` rows. Must be cancel safe: the runtime may drop the future at an
    /// `.await` point (to inject a checkpoint barrier or stop), and no row may be lost or emitted twice then.
    async fn poll_batch(&mut self, max_rows: usize) -> Result<SourcePoll>;

    /// The position after the last row returned by [`Source::poll_batch`], serialisable as JSON.
    fn snapshot(&mut self) -> Result<serde_json::Value>;

    /// [`Source::snapshot`] for checkpoint `id` (a source that commits offsets on completion keeps it).
    fn snapshot_for(&mut self, _id: u64) -> Result<serde_json::Value> {
        self.snapshot()
    }

    /// Which job and INSERT this source serves (called once, before `restore`).
    fn set_context(&mut self, _ctx: &PipelineContext) {}

    /// Checkpoint `id` is durable.
    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// The job is stopping.
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }

    /// What this source keeps on the broker for the job between runs (e.g. durable subscriptions), one
    /// line each; removed when `drop` is set (`pulsar-connect subscriptions --drop`). Called after
    /// `set_context`, on a source that is not running.
    async fn durable_state(&mut self, _drop: bool) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// A table write side. One instance per INSERT into the table.
///
/// At-least-once: [`Sink::flush`] must make every row written so far durable (or pre-commit it, for an
/// exactly-once sink, returning what is needed to commit it in the state); the checkpoint is only written after
/// every sink's flush returned. [`Sink::notify_checkpoint_complete`] commits pre-committed work.
#[async_trait]
pub trait Sink: Send {
    /// Restores sink state (e.g. pending transactions to commit or abort) from a checkpoint.
    fn restore(&mut self, _state: serde_json::Value) -> Result<()> {
        Ok(())
    }

    /// Which job and INSERT this sink serves (called once, before `restore`).
    fn set_context(&mut self, _ctx: &PipelineContext) {}

    /// Called once after `restore` and before the first row: connect and check what can be checked, so
    /// a misconfigured sink fails the job at start.
    async fn open(&mut self) -> Result<()> {
        Ok(())
    }

    async fn write(&mut self, batch: RecordBatch) -> Result<()>;

    /// Flush or pre-commit for checkpoint `id`; returns the sink's state for the checkpoint.
    async fn flush(&mut self, id: u64) -> Result<serde_json::Value>;

    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// The sink failed: release what no checkpoint covers (e.g. abort an open transaction, whose messages
    /// would otherwise hold back the topic's readers until it times out). Must not fail; log instead.
    async fn abort(&mut self) {}

    /// End of input: flush and release resources.
    async fn close(&mut self) -> Result<()>;
}

/// Which job and INSERT a source or sink serves: connectors derive durable names (subscriptions,
/// producer names, transaction owners) from it, so a restarted job finds what the last run left.
#[derive(Debug, Clone)]
pub struct PipelineContext {
    pub job_id: String,
    /// The INSERT's id within the job.
    pub pipeline_id: String,
    /// `pulsar_connect_sink_dropped_total` of the INSERT's sink table: rows the sink could not write and
    /// did not fail the job for (`fail-on-write` = false).
    pub sink_dropped: prometheus::IntCounter,
    /// Where the INSERT's source and sink meet (see [`PipelineLink`]).
    pub link: Arc<PipelineLink>,
}

/// A meeting point for the source and the sink of one INSERT, for connectors whose two sides cooperate
/// (the Pulsar source's acknowledgements inside the Pulsar sink's transaction): the source offers a value
/// in `set_context`, the sink (whose `set_context` comes after) looks it up by type.
#[derive(Default)]
pub struct PipelineLink {
    offered: std::sync::Mutex<Option<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl PipelineLink {
    pub fn offer<T: Send + Sync + 'static>(&self, value: Arc<T>) {
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
    }

    /// What the source offered, if it is a `T`.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let offered = self
            .offered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()?;
        offered.downcast::<T>().ok()
    }
}

impl std::fmt::Debug for PipelineLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PipelineLink")
    }
}

/// A metadata key a connector exposes (`col TYPE METADATA FROM 'key'`).
#[derive(Debug, Clone)]
pub struct MetadataDecl {
    pub key: &'static str,
    /// The Flink type, for documentation and error messages.
    pub flink_type: &'static str,
    pub readable: bool,
    pub writable: bool,
    pub doc: &'static str,
}

/// A connector's typed configuration of one table, decoded once when the catalog validates the table
/// and kept by it ([`CatalogTable::config`]); opaque to the catalog, downcast by the connector that made it
/// ([`CatalogTable::config_as`]).
pub type TableConfigSlot = Arc<dyn std::any::Any + Send + Sync>;

/// A connector: options, metadata and how to build sources and sinks.
pub trait ConnectorFactory: Send + Sync {
    /// The `'connector'` value.
    fn name(&self) -> &'static str;
    fn options(&self) -> &OptionSet;
    fn metadata(&self) -> &[MetadataDecl] {
        &[]
    }
    /// Checks that need the whole table (column types, option combinations), and decodes the table's
    /// options into the connector's typed configuration, which the catalog keeps for
    /// [`ConnectorFactory::create_source`] / [`ConnectorFactory::create_sink`] (`None`: nothing to keep).
    fn validate_table(&self, _table: &CatalogTable) -> Result<Option<TableConfigSlot>> {
        Ok(None)
    }
    /// Prefixes of option keys that belong to plugins the table uses (format options such as `json.`),
    /// given the raw `WITH` options; the catalog leaves them to [`ConnectorFactory::validate_table`].
    fn plugin_option_prefixes(&self, _raw: &[(String, String, crate::sql::Pos)]) -> Vec<String> {
        Vec::new()
    }
    /// Checks that need the job's settings too (e.g. a transaction timeout against the checkpoint interval).
    fn validate_settings(
        &self,
        _table: &CatalogTable,
        _settings: &crate::catalog::JobSettings,
    ) -> Result<()> {
        Ok(())
    }
    fn supports_source(&self) -> bool;
    fn supports_sink(&self) -> bool;
    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>>;
    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>>;
}

/// Connectors that are part of the product but not in this build yet (the upsert variants).
pub const PLANNED: &[&str] = &["upsert-pulsar", "upsert-pulsar-inlong"];

/// The connectors of this process, by `'connector'` value.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn ConnectorFactory>>,
}

impl Registry {
    /// The built-in connectors with the plugin directory of the environment
    /// ([`resolve_plugin_dir`](crate::plugins::catalog::resolve_plugin_dir) without a flag); `main`
    /// uses [`Registry::with_plugins`] with the catalog of `--plugin-dir`.
    pub fn builtin() -> Self {
        use crate::plugins::catalog::{PluginCatalog, resolve_plugin_dir};
        Self::with_plugins(Arc::new(PluginCatalog::new(resolve_plugin_dir(None))))
    }

    /// The built-in connectors: `print`, `datagen`, `blackhole`, `pulsar` (and `pulsar-inlong`), the
    /// Pulsar connector reading plugins from `plugins`.
    pub fn with_plugins(plugins: Arc<crate::plugins::catalog::PluginCatalog>) -> Self {
        let mut r = Registry::default();
        r.register(Arc::new(print::PrintFactory::new()));
        r.register(Arc::new(datagen::DatagenFactory::new()));
        r.register(Arc::new(blackhole::BlackholeFactory::new()));
        r.register(Arc::new(pulsar::PulsarFactory::new(
            "pulsar",
            plugins.clone(),
        )));
        r.register(Arc::new(pulsar::PulsarFactory::new(
            "pulsar-inlong",
            plugins,
        )));
        r
    }

    pub fn register(&mut self, factory: Arc<dyn ConnectorFactory>) {
        self.factories.insert(factory.name().to_string(), factory);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn ConnectorFactory>> {
        self.factories.get(name).cloned()
    }

    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }

    pub fn factories(&self) -> impl Iterator<Item = &Arc<dyn ConnectorFactory>> {
        self.factories.values()
    }

    /// The error for a `'connector'` value that is not registered.
    pub fn unknown_message(&self, name: &str) -> String {
        if PLANNED.contains(&name) {
            format!(
                "connector '{name}' is not available yet in this build of pulsar-connect (the upsert variants are being built); available connectors: {}",
                self.names().join(", ")
            )
        } else {
            let mut m = format!("unknown connector '{name}'");
            let mut candidates: Vec<&str> = self.names();
            candidates.extend(PLANNED);
            if let Some(best) = crate::options::suggest(name, candidates.iter().copied()) {
                m.push_str(&format!("; did you mean '{best}'?"));
            }
            m.push_str(&format!(
                "; available connectors: {}",
                self.names().join(", ")
            ));
            m
        }
    }
}
