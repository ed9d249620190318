//! `blackhole`: discards every row (rows are still counted in the sink metrics). For benchmarks and tests.

use std::sync::LazyLock;

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;

use crate::connector_api::changelog::ChangelogMode;
use crate::connector_api::{
    CatalogTable, ConnectorFactory, Parallelism, Sink, SinkFactory, SourceFactory,
};
use crate::options::{OptionDecl, OptionSet};

static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'blackhole'",
        "Sink only. Discards rows; `pulsar_connect_rows_out_total` still counts them.",
        vec![OptionDecl::int(
            "sink.parallelism",
            1,
            crate::connector_api::settings::MAX_PARALLELISM,
            "Subtasks discarding rows (unset: the job's `parallelism.default`, else as many as the source has).",
        )],
        vec![],
    )
});

pub struct BlackholeFactory;

impl BlackholeFactory {
    pub fn new() -> Self {
        BlackholeFactory
    }
}

impl Default for BlackholeFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectorFactory for BlackholeFactory {
    fn name(&self) -> &'static str {
        "blackhole"
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

impl SinkFactory for BlackholeFactory {
    fn parallelism(&self, table: &CatalogTable) -> Parallelism {
        Parallelism::Parallel(
            table
                .options
                .get_i64("sink.parallelism")
                .map(|n| n.max(1) as usize),
        )
    }

    fn create_sink(&self, _table: &CatalogTable) -> Result<Box<dyn Sink>> {
        Ok(Box::new(BlackholeSink { rows: 0 }))
    }
    /// Every row kind: Flink's print sink prints `-U[..]`/`+U[..]`/`-D[..]` and blackhole drops them all.
    fn accepted_changelog_mode(&self, _table: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

/// Counts rows and drops them.
pub struct BlackholeSink {
    pub rows: u64,
}

#[async_trait]
impl Sink for BlackholeSink {
    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        Ok(())
    }
    async fn flush(&mut self, _id: u64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_and_discards() {
        use std::sync::Arc;
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("a", arrow::datatypes::DataType::Int32, false),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![Arc::new(arrow::array::Int32Array::from(vec![1, 2, 3]))],
        )
        .unwrap();
        let mut s = BlackholeSink { rows: 0 };
        s.write(b.clone()).await.unwrap();
        s.write(b).await.unwrap();
        assert_eq!(s.rows, 6);
        assert_eq!(s.flush(1).await.unwrap(), serde_json::Value::Null);
    }
}
