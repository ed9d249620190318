//! A table as the catalog resolved it: its definition, its checked options, its connector and the
//! connector's typed configuration.

use std::sync::Arc;

use anyhow::{Result, anyhow};
use arrow::datatypes::{Schema, SchemaRef};

use super::changelog::ChangelogMode;
use super::{ConnectorFactory, Parallelism, Sink, Source, TableConfigSlot};
use crate::options::ResolvedOptions;
use crate::sql::{ColumnDef, ColumnKind, CreateTable};

/// A table of the job, resolved against its connector.
pub struct CatalogTable {
    pub def: CreateTable,
    pub connector: String,
    pub options: ResolvedOptions,
    pub factory: Arc<dyn ConnectorFactory>,
    /// The connector's typed configuration of the table, decoded once by
    /// [`ConnectorFactory::validate_table`] (`None` for connectors that keep none).
    pub config: Option<TableConfigSlot>,
}

impl std::fmt::Debug for CatalogTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogTable")
            .field("name", &self.def.name)
            .field("connector", &self.connector)
            .finish()
    }
}

impl CatalogTable {
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// Whether the table's connector can be read (has a source factory).
    pub fn readable(&self) -> bool {
        self.factory.source().is_some()
    }

    /// Whether the table's connector can be written (has a sink factory).
    pub fn writable(&self) -> bool {
        self.factory.sink().is_some()
    }

    /// A source for one INSERT that reads the table.
    pub fn create_source(&self) -> Result<Box<dyn Source>> {
        match self.factory.source() {
            Some(f) => f.create_source(self),
            None => Err(anyhow!(
                "table '{}': connector '{}' can only be written to (it is a sink)",
                self.name(),
                self.connector
            )),
        }
    }

    /// A sink for one INSERT into the table.
    pub fn create_sink(&self) -> Result<Box<dyn Sink>> {
        match self.factory.sink() {
            Some(f) => f.create_sink(self),
            None => Err(anyhow!(
                "table '{}': connector '{}' can only be read from (it is a source)",
                self.name(),
                self.connector
            )),
        }
    }

    /// How many subtasks may read the table (see [`SourceFactory::parallelism`]).
    pub fn read_parallelism(&self) -> Parallelism {
        self.factory
            .source()
            .map_or(Parallelism::Single, |f| f.parallelism(self))
    }

    /// How many subtasks may write the table (see [`SinkFactory::parallelism`]).
    pub fn write_parallelism(&self) -> Parallelism {
        self.factory
            .sink()
            .map_or(Parallelism::Single, |f| f.parallelism(self))
    }

    /// The row kinds reading the table produces (see [`SourceFactory::changelog_mode`]).
    pub fn changelog_mode(&self) -> ChangelogMode {
        self.factory
            .source()
            .map_or(ChangelogMode::INSERT_ONLY, |f| f.changelog_mode(self))
    }

    /// The row kinds writing the table accepts (see [`SinkFactory::accepted_changelog_mode`]).
    pub fn accepted_changelog_mode(&self) -> ChangelogMode {
        self.factory.sink().map_or(ChangelogMode::INSERT_ONLY, |f| {
            f.accepted_changelog_mode(self)
        })
    }

    /// The labels the table adds to its metric series (see [`ConnectorFactory::metric_labels`]).
    pub fn metric_labels(&self) -> super::MetricLabels {
        self.factory.metric_labels(self)
    }

    /// The connector's typed configuration, if it is a `T`.
    pub fn config_as<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.config.clone()?.downcast::<T>().ok()
    }

    /// Physical and metadata columns (what a source produces), in declaration order.
    pub fn source_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.def
            .columns
            .iter()
            .filter(|c| !matches!(c.kind, ColumnKind::Computed { .. }))
    }

    /// Physical and non-virtual metadata columns (what an INSERT writes), in declaration order.
    pub fn sink_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.def.columns.iter().filter(|c| match &c.kind {
            ColumnKind::Physical(_) => true,
            ColumnKind::Metadata { is_virtual, .. } => !is_virtual,
            ColumnKind::Computed { .. } => false,
        })
    }

    /// Physical and metadata columns as read (see [`SourceFactory::deletes_carry_only_the_key`]).
    pub fn source_schema(&self) -> SchemaRef {
        let key_only_deletes = self
            .factory
            .source()
            .is_some_and(|f| f.deletes_carry_only_the_key(self));
        let key = self.def.primary_key.as_deref().unwrap_or_default();
        Arc::new(Schema::new(
            self.source_columns()
                .map(|c| {
                    let f = column_field(c);
                    if key_only_deletes && !key.contains(&c.name) {
                        f.with_nullable(true)
                    } else {
                        f
                    }
                })
                .collect::<Vec<_>>(),
        ))
    }

    pub fn sink_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.sink_columns().map(column_field).collect::<Vec<_>>(),
        ))
    }

    /// The metadata key of a metadata column (`FROM 'key'`, else the column name).
    pub fn metadata_key<'a>(&self, column: &'a ColumnDef) -> Option<&'a str> {
        match &column.kind {
            ColumnKind::Metadata { key, .. } => Some(key.as_deref().unwrap_or(&column.name)),
            _ => None,
        }
    }

    pub fn has_metadata_columns(&self) -> bool {
        self.def
            .columns
            .iter()
            .any(|c| matches!(c.kind, ColumnKind::Metadata { .. }))
    }
}

/// The Arrow field of a physical or metadata column.
pub fn column_field(c: &ColumnDef) -> arrow::datatypes::Field {
    match &c.kind {
        ColumnKind::Physical(ty) | ColumnKind::Metadata { ty, .. } => ty.to_field(&c.name),
        ColumnKind::Computed { .. } => {
            arrow::datatypes::Field::new(&c.name, arrow::datatypes::DataType::Null, true)
        }
    }
}
