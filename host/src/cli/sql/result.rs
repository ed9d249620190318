//! The sink of a transient `SELECT`: a table of exactly the query's columns whose sink hands every batch
//! to the shell, which prints it (the `print` connector's role, with the shell owning the screen).

use std::sync::{Arc, LazyLock};

use anyhow::{Result, anyhow};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::connector_api::changelog::ChangelogMode;
use crate::connector_api::{CatalogTable, ConnectorFactory, Sink, SinkFactory, SourceFactory};
use crate::options::{OptionSet, ResolvedOptions};
use crate::sql::{ColumnDef, ColumnKind, CreateTable, FlinkType, Pos, RowField, TypeKind};

/// The name of the result table inside the SELECT's pipeline.
pub const RESULT_TABLE: &str = "__sql_shell_result";

static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "the SQL shell's result",
        "The rows of a SELECT, shown by the shell.",
        vec![],
        vec![],
    )
});

/// The result connector: one per SELECT, holding where the rows go.
struct ResultFactory {
    rows: mpsc::Sender<RecordBatch>,
}

impl ConnectorFactory for ResultFactory {
    fn name(&self) -> &'static str {
        "sql-shell-result"
    }
    fn options(&self) -> &OptionSet {
        &OPTIONS
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        None
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        Some(self)
    }
}

impl SinkFactory for ResultFactory {
    fn create_sink(&self, _table: &CatalogTable) -> Result<Box<dyn Sink>> {
        Ok(Box::new(ResultSink {
            rows: self.rows.clone(),
        }))
    }
    /// Every row kind: the tableau shows each with its `op`.
    fn accepted_changelog_mode(&self, _table: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

struct ResultSink {
    rows: mpsc::Sender<RecordBatch>,
}

#[async_trait]
impl Sink for ResultSink {
    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        self.rows
            .send(batch)
            .await
            .map_err(|_| anyhow!("the shell stopped reading the result"))
    }
    async fn flush(&mut self, _id: u64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The result table for a query producing `schema`; its rows arrive on `rows`. Column names that repeat
/// get a number (`a`, `a0`), as Flink names them.
pub fn table(schema: &SchemaRef, rows: mpsc::Sender<RecordBatch>) -> Result<CatalogTable> {
    let mut names: Vec<String> = Vec::new();
    let mut columns = Vec::new();
    for f in schema.fields() {
        let ty = flink_type(f.data_type()).ok_or_else(|| {
            anyhow!(
                "SELECT: column '{}' has the type {} that the shell cannot show",
                f.name(),
                f.data_type()
            )
        })?;
        let mut name = f.name().clone();
        let mut n = 0;
        while names.contains(&name) {
            name = format!("{}{n}", f.name());
            n += 1;
        }
        names.push(name.clone());
        columns.push(ColumnDef {
            name,
            kind: ColumnKind::Physical(FlinkType {
                nullable: true,
                ..ty
            }),
            comment: None,
            pos: Pos::default(),
        });
    }
    let def = CreateTable {
        name: RESULT_TABLE.to_string(),
        temporary: true,
        if_not_exists: false,
        columns,
        primary_key: None,
        watermark: None,
        comment: None,
        options: Vec::new(),
        pos: Pos::default(),
    };
    let factory = Arc::new(ResultFactory { rows });
    Ok(CatalogTable {
        def,
        connector: factory.name().to_string(),
        options: ResolvedOptions::default(),
        factory,
        config: None,
    })
}

/// The Flink type whose Arrow type inside the host is `t` ([`FlinkType::to_arrow`] read backwards).
fn flink_type(t: &DataType) -> Option<FlinkType> {
    let kind = match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => {
            TypeKind::String
        }
        DataType::Boolean => TypeKind::Boolean,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => TypeKind::Bytes,
        DataType::FixedSizeBinary(n) => TypeKind::Binary(u32::try_from(*n).ok()?),
        DataType::Decimal128(p, s) => TypeKind::Decimal(*p, *s),
        DataType::Int8 => TypeKind::TinyInt,
        DataType::Int16 | DataType::UInt8 => TypeKind::SmallInt,
        DataType::Int32 | DataType::UInt16 => TypeKind::Int,
        DataType::Int64 | DataType::UInt32 => TypeKind::BigInt,
        DataType::Float32 => TypeKind::Float,
        DataType::Float64 => TypeKind::Double,
        DataType::Date32 => TypeKind::Date,
        DataType::Time32(TimeUnit::Second) => TypeKind::Time(0),
        DataType::Time32(_) => TypeKind::Time(3),
        DataType::Time64(TimeUnit::Microsecond) => TypeKind::Time(6),
        DataType::Time64(_) => TypeKind::Time(9),
        DataType::Timestamp(unit, tz) => {
            let p = match unit {
                TimeUnit::Second => 0,
                TimeUnit::Millisecond => 3,
                TimeUnit::Microsecond => 6,
                TimeUnit::Nanosecond => 9,
            };
            if tz.is_some() {
                TypeKind::TimestampLtz(p)
            } else {
                TypeKind::Timestamp(p)
            }
        }
        DataType::List(f) | DataType::LargeList(f) => TypeKind::Array(Box::new(nullable(
            flink_type(f.data_type())?,
            f.is_nullable(),
        ))),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => TypeKind::Map(
                Box::new(nullable(flink_type(kv[0].data_type())?, false)),
                Box::new(nullable(
                    flink_type(kv[1].data_type())?,
                    kv[1].is_nullable(),
                )),
            ),
            _ => return None,
        },
        DataType::Struct(fields) => TypeKind::Row(
            fields
                .iter()
                .map(|f| {
                    Some(RowField {
                        name: f.name().clone(),
                        ty: nullable(flink_type(f.data_type())?, f.is_nullable()),
                        description: None,
                    })
                })
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return None,
    };
    Some(FlinkType::new(kind))
}

fn nullable(t: FlinkType, nullable: bool) -> FlinkType {
    FlinkType { nullable, ..t }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every Flink type comes back from its Arrow type with the same Arrow type (what the planner
    /// compares the query's columns with).
    #[test]
    fn arrow_types_read_back() {
        for ddl in [
            "STRING",
            "BOOLEAN",
            "BYTES",
            "DECIMAL(10, 2)",
            "TINYINT",
            "SMALLINT",
            "INT",
            "BIGINT",
            "FLOAT",
            "DOUBLE",
            "DATE",
            "TIME(3)",
            "TIMESTAMP(3)",
            "TIMESTAMP_LTZ(6)",
            "ARRAY<INT>",
            "MAP<STRING, BIGINT>",
            "ROW<a INT, b STRING>",
        ] {
            let t = crate::sql::parse_type(ddl).unwrap();
            let back = flink_type(&t.to_arrow()).unwrap();
            assert_eq!(back.to_arrow(), t.to_arrow(), "{ddl}");
        }
    }
}
