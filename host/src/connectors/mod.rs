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

    /// Checkpoint `id` is durable.
    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// The job is stopping.
    async fn close(&mut self) -> Result<()> {
        Ok(())
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

    async fn write(&mut self, batch: RecordBatch) -> Result<()>;

    /// Flush or pre-commit for checkpoint `id`; returns the sink's state for the checkpoint.
    async fn flush(&mut self, id: u64) -> Result<serde_json::Value>;

    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// End of input: flush and release resources.
    async fn close(&mut self) -> Result<()>;
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

/// A connector: options, metadata and how to build sources and sinks.
pub trait ConnectorFactory: Send + Sync {
    /// The `'connector'` value.
    fn name(&self) -> &'static str;
    fn options(&self) -> &OptionSet;
    fn metadata(&self) -> &[MetadataDecl] {
        &[]
    }
    /// Checks that need the whole table (column types, option combinations).
    fn validate_table(&self, _table: &CatalogTable) -> Result<()> {
        Ok(())
    }
    fn supports_source(&self) -> bool;
    fn supports_sink(&self) -> bool;
    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>>;
    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>>;
}

/// Connectors that are part of the product but not in this build yet (the Pulsar connector, issues 6/7).
pub const PLANNED: &[&str] = &[
    "pulsar",
    "upsert-pulsar",
    "pulsar-inlong",
    "upsert-pulsar-inlong",
];

/// The connectors of this process, by `'connector'` value.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn ConnectorFactory>>,
}

impl Registry {
    /// The built-in connectors: `print`, `datagen`, `blackhole`.
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        r.register(Arc::new(print::PrintFactory::new()));
        r.register(Arc::new(datagen::DatagenFactory::new()));
        r.register(Arc::new(blackhole::BlackholeFactory::new()));
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
                "connector '{name}' is not available yet in this build of pulsar-connect (the Pulsar source and sink are being built); available connectors: {}",
                self.names().join(", ")
            )
        } else {
            let mut m = format!("unknown connector '{name}'");
            let mut candidates: Vec<&str> = self.names();
            candidates.extend(PLANNED);
            if let Some(best) = candidates
                .iter()
                .min_by_key(|c| strsim::levenshtein(c, name))
                && strsim::levenshtein(best, name) <= 3
            {
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
