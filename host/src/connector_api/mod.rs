//! The connector API: what the catalog, the planner and the runtime know of a connector, and what every
//! connector implements. A leaf below both the catalog and the connectors (neither imports the other).
//!
//! - [`ConnectorFactory`]: one per `'connector'` value — its options ([`OptionSet`]), its metadata keys
//!   ([`MetadataDecl`]), the table checks and the typed configuration decoded once ([`TableConfigSlot`]),
//!   and its [`SourceFactory`] and/or [`SinkFactory`].
//! - [`CatalogTable`]: a table as the catalog resolved it (definition, options, the connector's config).
//! - [`Source`] / [`Sink`]: the read and write sides, driven by the runtime's checkpoint protocol;
//!   [`PipelineContext`]: which job and INSERT they serve.
//! - [`Registry`]: the connectors of this process by name (the built-in ones: `connectors::builtin`).
//! - [`JobSettings`]: the job's `SET` settings, as connectors check them; [`restart`]: what its
//!   `restart-strategy.*` decide after a failure (the runtime's supervisor acts on it).
//!
//! Sources produce Arrow batches in the table's *source schema* (physical and metadata columns in
//! declaration order, computed columns excluded — the planner computes those). Sinks receive batches in the
//! table's *sink schema* (physical and non-virtual metadata columns, in declaration order). A batch with
//! updates or deletes has one more, last column: its row kinds ([`changelog`], ADR 0016).

pub mod changelog;
mod context;
mod labels;
pub mod partitions;
pub mod restart;
pub mod row_text;
pub mod settings;
mod sink;
mod source;
mod table;
pub mod telemetry;

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;

use crate::options::OptionSet;

pub use context::{PipelineContext, PipelineLink, Subtask};
pub use labels::MetricLabels;
pub use partitions::{PartitionBoard, PartitionStatus};
pub use settings::JobSettings;
pub use sink::Sink;
pub use source::{Source, SourcePoll};
pub use table::{CatalogTable, column_field};
pub use telemetry::{TableTelemetry, TelemetrySink};

/// A failure after which the job must read again from its sources' durable positions rather than go on
/// (a source or sink returns it inside its error). The runner restarts the job from its last checkpoint
/// instead of ending it: e.g. an exactly-once sink whose acknowledgement of the input conflicted with
/// another process's, after the broker moved a partition between them (ADR 0014).
#[derive(Debug, thiserror::Error)]
#[error("{0} (the job restarts from its last checkpoint)")]
pub struct Rewind(pub String);

/// Whether `e` (or an error it wraps) asks for a [`Rewind`].
pub fn needs_rewind(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Rewind>())
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

/// Builds the read side of a table.
pub trait SourceFactory: Send + Sync {
    /// One source per INSERT (and source subtask) that reads `table`, built from the configuration the
    /// catalog kept.
    fn create_source(&self, table: &CatalogTable) -> Result<Box<dyn Source>>;
    /// Whether several subtasks may read `table` (each owning some of its splits), and how many the
    /// table asks for (`scan.parallelism`).
    fn parallelism(&self, _table: &CatalogTable) -> Parallelism {
        Parallelism::Single
    }
    /// The row kinds reading `table` produces (ADR 0016): e.g. its value format's. Inserts by default.
    fn changelog_mode(&self, _table: &CatalogTable) -> changelog::ChangelogMode {
        changelog::ChangelogMode::INSERT_ONLY
    }
    /// Whether rows read from `table` may hold NULL in a `NOT NULL` column outside its primary key: an
    /// upsert table's deletes carry only their key (as Flink's, whose deletes are not checked against
    /// the declared nullability). The table's source schema then makes those columns nullable.
    fn deletes_carry_only_the_key(&self, _table: &CatalogTable) -> bool {
        false
    }
}

/// Builds the write side of a table.
pub trait SinkFactory: Send + Sync {
    /// One sink per INSERT (and sink subtask) into `table`, built from the configuration the catalog kept.
    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>>;
    /// Whether several subtasks may write `table`, and how many the table asks for (`sink.parallelism`).
    fn parallelism(&self, _table: &CatalogTable) -> Parallelism {
        Parallelism::Single
    }
    /// The row kinds writing `table` accepts (ADR 0016); a batch holding others never reaches its sink
    /// (the planner refuses the INSERT). Inserts by default.
    fn accepted_changelog_mode(&self, _table: &CatalogTable) -> changelog::ChangelogMode {
        changelog::ChangelogMode::INSERT_ONLY
    }
}

/// How many subtasks may serve one side of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// One subtask only (`parallelism.default` does not apply).
    Single,
    /// Any number; `Some` when the table sets it, otherwise the job's `parallelism.default` or the
    /// runtime's default.
    Parallel(Option<usize>),
}

/// A connector: options, metadata, table checks, and its source and/or sink factory.
pub trait ConnectorFactory: Send + Sync {
    /// The `'connector'` value.
    fn name(&self) -> &'static str;
    fn options(&self) -> &OptionSet;
    fn metadata(&self) -> &[MetadataDecl] {
        &[]
    }
    /// Metadata keys beyond [`ConnectorFactory::metadata`] that the connector resolves itself in
    /// [`ConnectorFactory::validate_table`], such as a format's readable metadata (`value.source.table`,
    /// ADR 0016). They are read-only. None by default.
    fn owns_metadata_key(&self, _key: &str) -> bool {
        false
    }
    /// Checks that need the whole table (column types, option combinations), and decodes the table's
    /// options into the connector's typed configuration, which the catalog keeps for the source and sink
    /// factories (`None`: nothing to keep).
    fn validate_table(&self, _table: &CatalogTable) -> Result<Option<TableConfigSlot>> {
        Ok(None)
    }
    /// Prefixes of option keys that belong to plugins the table uses (format options such as `json.`),
    /// given the raw `WITH` options; the catalog leaves them to [`ConnectorFactory::validate_table`].
    fn plugin_option_prefixes(&self, _raw: &[(String, String, crate::sql::Pos)]) -> Vec<String> {
        Vec::new()
    }
    /// Checks that need the job's settings too (e.g. a transaction timeout against the checkpoint interval).
    fn validate_settings(&self, _table: &CatalogTable, _settings: &JobSettings) -> Result<()> {
        Ok(())
    }
    /// Labels the table adds to its metric series, decoded at validation (none by default).
    fn metric_labels(&self, _table: &CatalogTable) -> MetricLabels {
        MetricLabels::default()
    }
    /// The read side (`None`: the connector can only be written to).
    fn source(&self) -> Option<&dyn SourceFactory>;
    /// The write side (`None`: the connector can only be read from).
    fn sink(&self) -> Option<&dyn SinkFactory>;
}

/// Connectors that are part of the product but not in this build yet (the upsert variants).
pub const PLANNED: &[&str] = &["upsert-pulsar", "upsert-pulsar-inlong"];

/// The connectors of this process, by `'connector'` value.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Arc<dyn ConnectorFactory>>,
}

impl Registry {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewind_is_found_under_the_contexts_the_tasks_add() {
        let e = anyhow::Error::from(Rewind("acknowledging 1:2 conflicted".into()))
            .context("sink 'dst'")
            .context("pipeline 0");
        assert!(needs_rewind(&e));
        assert!(format!("{e:#}").contains("the job restarts from its last checkpoint"));
        assert!(!needs_rewind(&anyhow::anyhow!("sink 'dst': broken")));
    }
}
