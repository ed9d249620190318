//! Running jobs in-process against the real broker: the built-in connectors (the Pulsar connector
//! reading the built plugins of `<repo>/plugins`) plus `collect`, a sink that keeps every row.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use pulsar_connect::connector_api::changelog::ChangelogMode;
use pulsar_connect::connector_api::{
    CatalogTable, ConnectorFactory, Registry, Sink, SinkFactory, SourceFactory,
};
use pulsar_connect::options::OptionSet;
use pulsar_connect::plugins::catalog::PluginCatalog;
use pulsar_connect::runtime::{self, Metrics, RunOptions, RunSummary};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Rows written to `collect` tables, formatted as Flink rows (`+I[...]`, `-D[...]`).
pub type Collected = Arc<Mutex<Vec<String>>>;

static COLLECT_OPTIONS: LazyLock<OptionSet> =
    LazyLock::new(|| OptionSet::new("connector 'collect'", "test sink", vec![], vec![]));

struct CollectFactory(Collected);

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
    fn create_sink(&self, _t: &CatalogTable) -> Result<Box<dyn Sink>> {
        Ok(Box::new(CollectSink(self.0.clone())))
    }
    /// Every row kind, printed as Flink's `print` does (`-U[...]`, ADR 0016).
    fn accepted_changelog_mode(&self, _t: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

struct CollectSink(Collected);

#[async_trait]
impl Sink for CollectSink {
    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let mut out = self.0.lock().unwrap();
        for r in 0..batch.num_rows() {
            out.push(pulsar_connect::connector_api::row_text::format_row(
                &batch, r,
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

/// The plugin directory the tests use: `<repo>/plugins` (built by `cargo xtask build-plugins`).
pub fn plugin_dir() -> PathBuf {
    let dir = crate::guests::repo_root().join("plugins");
    assert!(
        dir.join("json/plugin.toml").is_file(),
        "{} has no built formats: run `cargo xtask build-plugins` first (`cargo xtask test` does)",
        dir.display()
    );
    dir
}

/// The built-in connectors (Pulsar reading [`plugin_dir`]) plus `collect`.
pub fn registry() -> (Registry, Collected) {
    let collected: Collected = Arc::default();
    let mut r = Registry::with_plugins(Arc::new(PluginCatalog::new(plugin_dir())));
    r.register(Arc::new(CollectFactory(collected.clone())));
    (r, collected)
}

/// A job running in the background.
pub struct RunningJob {
    pub rows: Collected,
    /// The job's metrics (what `--metrics-addr` serves).
    pub metrics: std::sync::Arc<Metrics>,
    stop: watch::Sender<bool>,
    handle: JoinHandle<Result<RunSummary>>,
}

impl RunningJob {
    /// Loads and starts `sql`; checkpoints go to `state_dir` (none: the job's own setting).
    pub async fn start(sql: &str, state_dir: Option<&Path>) -> Result<RunningJob> {
        let (registry, rows) = registry();
        let job = pulsar_connect::job::load_text(sql, &registry)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (stop, rx) = watch::channel(false);
        let settings = job.catalog.settings.clone();
        let opts = RunOptions {
            job_id: job.job_id.clone(),
            state_dir: state_dir.map(Path::to_path_buf),
            ..Default::default()
        };
        let metrics = Metrics::new()?;
        let m = metrics.clone();
        let handle =
            tokio::spawn(async move { runtime::run(job.plans, &settings, opts, m, rx).await });
        Ok(RunningJob {
            rows,
            metrics,
            stop,
            handle,
        })
    }

    /// Rows collected so far.
    pub fn rows(&self) -> Vec<String> {
        self.rows.lock().unwrap().clone()
    }

    /// Waits until at least `n` rows were collected; fails on timeout or when the job ends first.
    pub async fn wait_rows(&self, n: usize, timeout: Duration) -> Result<Vec<String>> {
        let deadline = Instant::now() + timeout;
        loop {
            let rows = self.rows();
            if rows.len() >= n {
                return Ok(rows);
            }
            if self.handle.is_finished() {
                anyhow::bail!("the job ended after {} of {n} rows", rows.len());
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "only {} of {n} rows after {timeout:?}: {rows:#?}",
                    rows.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the job has ended (failed or finished).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the job gracefully (final checkpoint) and returns its summary.
    pub async fn stop(self) -> Result<(RunSummary, Vec<String>)> {
        let _ = self.stop.send(true);
        let summary = tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .map_err(|_| anyhow::anyhow!("the job did not stop within 60 s"))??;
        let rows = self.rows.lock().unwrap().clone();
        Ok((summary?, rows))
    }

    /// Waits at most `timeout` for the job to end by itself (every source bounded and done) and returns
    /// its summary and rows.
    pub async fn finish(self, timeout: Duration) -> Result<(RunSummary, Vec<String>)> {
        let rows = self.rows.clone();
        let summary = tokio::time::timeout(timeout, self.handle)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the job did not end by itself within {timeout:?} ({} rows collected)",
                    rows.lock().unwrap().len()
                )
            })??;
        let rows = rows.lock().unwrap().clone();
        Ok((summary?, rows))
    }

    /// The job's error, waiting at most `timeout` for it to fail.
    pub async fn failure(self, timeout: Duration) -> String {
        match tokio::time::timeout(timeout, self.handle).await {
            Ok(Ok(Err(e))) => format!("{e:#}"),
            Ok(Ok(Ok(_))) => panic!("the job finished instead of failing"),
            Ok(Err(e)) => panic!("the job panicked: {e}"),
            Err(_) => panic!("the job did not fail within {timeout:?}"),
        }
    }
}
