//! Shared helpers of the runner tests: a test connector (declared like the Pulsar connector will be: required
//! options, mutual exclusion, metadata columns, secrets) and a collecting sink.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use pulsar_connect::connector_api::changelog::{self, ChangelogMode, RowKind};
use pulsar_connect::connector_api::{
    CatalogTable, ConnectorFactory, MetadataDecl, Registry, Sink, SinkFactory, Source,
    SourceFactory, SourcePoll,
};
use pulsar_connect::options::{OptionDecl, OptionSet, Rule};

static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'fake-pulsar'",
        "test connector",
        vec![
            OptionDecl::string("service-url", "broker URL").required(),
            OptionDecl::string("topic", "topic"),
            OptionDecl::string("topic-pattern", "pattern"),
            OptionDecl::enumeration(
                "scan.startup.mode",
                &[
                    "earliest",
                    "latest",
                    "external-subscription",
                    "specific-offsets",
                ],
                "start",
            )
            .default("latest"),
            OptionDecl::string("scan.startup.sub-name", "subscription"),
            OptionDecl::int(
                "partition.discovery.interval-millis",
                -1,
                i64::MAX,
                "discovery",
            )
            .aliases(&["discovery topic interval"]),
            OptionDecl::string("auth-params", "credentials").secret(),
            OptionDecl::string("properties.*", "client settings"),
        ],
        vec![
            Rule::MutuallyExclusive("topic", "topic-pattern"),
            Rule::RequiredWhen {
                option: "scan.startup.mode",
                equals: "external-subscription",
                requires: "scan.startup.sub-name",
            },
        ],
    )
});

static METADATA: &[MetadataDecl] = &[
    MetadataDecl {
        key: "topic",
        flink_type: "STRING NOT NULL",
        readable: true,
        writable: false,
        doc: "topic",
    },
    MetadataDecl {
        key: "eventTime",
        flink_type: "TIMESTAMP_LTZ(3)",
        readable: true,
        writable: true,
        doc: "event time",
    },
];

/// Rows written to `collect` tables, formatted as Flink rows, per table.
pub type Collected = Arc<Mutex<Vec<(String, String)>>>;

/// `fake-pulsar` (validation only) and `collect` (a sink that keeps rows in memory).
pub struct FakePulsar;

impl ConnectorFactory for FakePulsar {
    fn name(&self) -> &'static str {
        "fake-pulsar"
    }
    fn options(&self) -> &OptionSet {
        &OPTIONS
    }
    fn metadata(&self) -> &[MetadataDecl] {
        METADATA
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        Some(self)
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        Some(self)
    }
}

impl SourceFactory for FakePulsar {
    // Built by validation too (it builds every source and sink): only running them fails.
    fn create_source(&self, _t: &CatalogTable) -> Result<Box<dyn Source>> {
        Ok(Box::new(ValidationOnly))
    }
}

impl SinkFactory for FakePulsar {
    fn create_sink(&self, _t: &CatalogTable) -> Result<Box<dyn Sink>> {
        Ok(Box::new(ValidationOnly))
    }
}

/// The source and sink of `fake-pulsar`: they exist, they do not run.
struct ValidationOnly;

#[async_trait]
impl Source for ValidationOnly {
    fn restore(&mut self, _state: serde_json::Value) -> Result<()> {
        Ok(())
    }
    async fn poll_batch(
        &mut self,
        _max_rows: usize,
    ) -> Result<pulsar_connect::connector_api::SourcePoll> {
        anyhow::bail!("fake-pulsar is for validation only")
    }
    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
}

#[async_trait]
impl Sink for ValidationOnly {
    async fn write(&mut self, _batch: RecordBatch) -> Result<()> {
        anyhow::bail!("fake-pulsar is for validation only")
    }
    async fn flush(&mut self, _id: u64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

static COLLECT_OPTIONS: LazyLock<OptionSet> =
    LazyLock::new(|| OptionSet::new("connector 'collect'", "test sink", vec![], vec![]));

pub struct CollectFactory(pub Collected);

impl ConnectorFactory for CollectFactory {
    fn name(&self) -> &'static str {
        "collect"
    }
    fn options(&self) -> &OptionSet {
        &COLLECT_OPTIONS
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        None
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        Some(self)
    }
}

impl SinkFactory for CollectFactory {
    fn create_sink(&self, t: &CatalogTable) -> Result<Box<dyn Sink>> {
        Ok(Box::new(CollectSink {
            table: t.name().to_string(),
            out: self.0.clone(),
        }))
    }
    fn accepted_changelog_mode(&self, _t: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

static CHANGES_OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'changes'",
        "test source of changelog rows",
        vec![],
        vec![],
    )
});

/// `changes`: a bounded source of the changelog rows [`CHANGES`] over `(id INT, name STRING)`, in one batch.
pub struct ChangesFactory;

/// The rows `changes` emits: kind, id, name.
pub const CHANGES: &[(RowKind, i32, &str)] = &[
    (RowKind::Insert, 1, "a"),
    (RowKind::Insert, 2, "b"),
    (RowKind::UpdateBefore, 1, "a"),
    (RowKind::UpdateAfter, 1, "a2"),
    (RowKind::Delete, 2, "b"),
    (RowKind::Insert, 3, "c"),
];

impl ConnectorFactory for ChangesFactory {
    fn name(&self) -> &'static str {
        "changes"
    }
    fn options(&self) -> &OptionSet {
        &CHANGES_OPTIONS
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        Some(self)
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        None
    }
}

impl SourceFactory for ChangesFactory {
    fn create_source(&self, t: &CatalogTable) -> Result<Box<dyn Source>> {
        Ok(Box::new(ChangesSource {
            schema: t.source_schema(),
            done: false,
        }))
    }
    fn changelog_mode(&self, _t: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

struct ChangesSource {
    schema: arrow::datatypes::SchemaRef,
    done: bool,
}

#[async_trait]
impl Source for ChangesSource {
    fn restore(&mut self, _state: serde_json::Value) -> Result<()> {
        Ok(())
    }
    async fn poll_batch(&mut self, _max_rows: usize) -> Result<SourcePoll> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(SourcePoll::End);
        }
        let ids = arrow::array::Int32Array::from_iter_values(CHANGES.iter().map(|c| c.1));
        let names = arrow::array::StringArray::from_iter_values(CHANGES.iter().map(|c| c.2));
        let batch = RecordBatch::try_new(
            self.schema.clone(),
            vec![Arc::new(ids) as arrow::array::ArrayRef, Arc::new(names)],
        )?;
        let kinds: Vec<RowKind> = CHANGES.iter().map(|c| c.0).collect();
        Ok(SourcePoll::Batch(changelog::attach(
            batch,
            changelog::kinds_array(&kinds),
        )?))
    }
    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Bool(self.done))
    }
}

struct CollectSink {
    table: String,
    out: Collected,
}

#[async_trait]
impl Sink for CollectSink {
    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let mut out = self.out.lock().unwrap();
        for r in 0..batch.num_rows() {
            out.push((
                self.table.clone(),
                pulsar_connect::connector_api::row_text::format_row(&batch, r),
            ));
        }
        Ok(())
    }
    async fn flush(&mut self, _id: u64) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The built-in registry plus the test connectors.
pub fn registry() -> (Registry, Collected) {
    let collected: Collected = Arc::default();
    let plugins = Arc::new(pulsar_connect::plugins::catalog::PluginCatalog::new(
        workspace().join("plugins"),
    ));
    let mut r = Registry::with_plugins(plugins);
    r.register(Arc::new(FakePulsar));
    r.register(Arc::new(CollectFactory(collected.clone())));
    r.register(Arc::new(ChangesFactory));
    (r, collected)
}

/// Errors of a job that must not load.
pub async fn errors(sql: &str) -> Vec<String> {
    let (r, _) = registry();
    match pulsar_connect::job::load_text(sql, &r).await {
        Ok(_) => panic!("the job was accepted:\n{sql}"),
        Err(e) => e.0,
    }
}

pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The release binary ([`pulsar_connect_tests::binary`]).
pub fn binary() -> PathBuf {
    pulsar_connect_tests::binary()
}
