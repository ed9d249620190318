//! Prometheus metrics of a job (served by the `status` module's endpoint, `--metrics-addr`).

use std::sync::Arc;

use anyhow::{Context, Result};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    CounterVec, Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use super::families::Families;
use super::series::{InlongCollector, PartitionCollector, TableCounters, add_labels};
use super::status::{Numbers, Status, StatusBoard};
use crate::connector_api::TableTelemetry;
use crate::connector_api::telemetry::OWNED_SPLITS;
use crate::plugins::PluginCounters;
use crate::plugins::catalog::PluginCatalog;

/// All metrics of a job. Names are prefixed `pulsar_connect_`.
pub struct Metrics {
    pub registry: Registry,
    pub rows_in: IntCounterVec,
    pub bytes_in: IntCounterVec,
    pub rows_out: IntCounterVec,
    pub bytes_out: IntCounterVec,
    pub errors: IntCounterVec,
    pub skipped: IntCounterVec,
    pub checkpoints: IntCounter,
    pub checkpoint_failures: IntCounter,
    pub checkpoint_duration: Histogram,
    pub last_checkpoint_id: IntGauge,
    /// What the runtime publishes about the job (served as `/api/status`); its job name labels every
    /// series.
    pub status: Arc<StatusBoard>,
    /// The series connectors register through their tables' telemetry handles.
    families: Arc<Families>,
    /// The per-table counters the status and the InLong series are made from.
    tables: TableCounters,
    /// Restarts of the job by its restart strategy (carried across the `exec` of each restart).
    pub restarts: IntCounter,
}

impl Metrics {
    pub fn new() -> Result<Arc<Self>> {
        let registry = Registry::new_custom(Some("pulsar_connect".into()), None)?;
        let vec = |name: &str, help: &str| -> Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(name, help), &["table"])?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let rows_in = vec("rows_in_total", "Rows read from a source table")?;
        let bytes_in = vec(
            "bytes_in_total",
            "Arrow in-memory bytes of the batches read from a source table",
        )?;
        let rows_out = vec("rows_out_total", "Rows written to a sink table")?;
        let bytes_out = vec(
            "bytes_out_total",
            "Arrow in-memory bytes of the batches written to a sink table",
        )?;
        let errors = vec(
            "errors_total",
            "Errors per table (a source or sink failure, a failed row conversion)",
        )?;
        let skipped = vec(
            "skipped_rows_total",
            "Rows dropped per sink table (NOT NULL enforcer in DROP mode)",
        )?;
        let checkpoints = IntCounter::new("checkpoints_total", "Completed checkpoints")?;
        let checkpoint_failures = IntCounter::new(
            "checkpoint_failures_total",
            "Failed or timed-out checkpoints",
        )?;
        let checkpoint_duration = Histogram::with_opts(
            HistogramOpts::new(
                "checkpoint_duration_seconds",
                "Time from trigger to durable checkpoint",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0,
            ]),
        )?;
        let last_checkpoint_id =
            IntGauge::new("last_checkpoint_id", "Id of the last completed checkpoint")?;
        registry.register(Box::new(checkpoints.clone()))?;
        registry.register(Box::new(checkpoint_failures.clone()))?;
        registry.register(Box::new(checkpoint_duration.clone()))?;
        registry.register(Box::new(last_checkpoint_id.clone()))?;
        let status = Arc::new(StatusBoard::default());
        let families = Arc::new(Families::new(registry.clone()));
        let tables = TableCounters {
            rows_in: rows_in.clone(),
            bytes_in: bytes_in.clone(),
            rows_out: rows_out.clone(),
            bytes_out: bytes_out.clone(),
            errors: errors.clone(),
            skipped: skipped.clone(),
            families: families.clone(),
        };
        registry.register(Box::new(PartitionCollector::new(status.clone())?))?;
        registry.register(Box::new(InlongCollector::new(
            status.clone(),
            tables.clone(),
        )?))?;
        let restarts = IntCounter::new(
            "restarts_total",
            "Restarts of the job by its restart strategy (restart-strategy.*; a rewind when none is set), since the command was started",
        )?;
        registry.register(Box::new(restarts.clone()))?;
        Ok(Arc::new(Metrics {
            registry,
            rows_in,
            bytes_in,
            rows_out,
            bytes_out,
            errors,
            skipped,
            checkpoints,
            checkpoint_failures,
            checkpoint_duration,
            last_checkpoint_id,
            status,
            families,
            tables,
            restarts,
        }))
    }

    /// The telemetry handle of table `table`: the series its connector registers are served with these.
    pub fn telemetry(&self, table: &str) -> TableTelemetry {
        TableTelemetry::new(table, self.families.clone())
    }

    /// The splits the job's sources read in this process (`pulsar_connect_source_owned_splits`, summed).
    pub fn owned_splits(&self) -> i64 {
        self.families.gauge_total(OWNED_SPLITS.name)
    }

    /// The status now (`/api/status`): the board given the numbers of its tables.
    pub fn status_now(&self) -> Status {
        let mut numbers = Numbers {
            checkpoints_completed: self.checkpoints.get(),
            checkpoints_failed: self.checkpoint_failures.get(),
            ..Numbers::default()
        };
        for i in self.status.inserts() {
            for table in [i.source_table, i.sink_table] {
                let n = self.tables.numbers(&table);
                numbers.tables.insert(table, n);
            }
        }
        self.status.snapshot(&numbers)
    }

    /// Exports the counters of every plugin `catalog` has loaded, labelled `plugin`, read at each
    /// scrape: `pulsar_connect_plugin_{calls,rows,row_errors,traps,instantiations}_total`,
    /// `pulsar_connect_plugin_bytes_{in,out}_total` and `pulsar_connect_plugin_call_seconds_total`.
    pub fn export_plugins(&self, catalog: Arc<PluginCatalog>) -> Result<()> {
        self.status.set_plugins(catalog.clone());
        self.registry
            .register(Box::new(PluginCollector::new(catalog)?))
            .context("registering the plugin counters")
    }

    /// The text exposition format: every series labelled with the job (once a run started) and a table's
    /// series with its `inlong.metric.labels`.
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        add_labels(
            &mut families,
            &self.status.job(),
            &self.status.table_labels(),
        );
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&families, &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }

    pub fn total(c: &IntCounterVec) -> u64 {
        c.collect()
            .iter()
            .flat_map(|mf| {
                mf.get_metric()
                    .iter()
                    .map(|m| m.get_counter().get_value() as u64)
            })
            .sum()
    }
}

/// Reads one counter of a plugin's snapshot.
type ReadCounter = fn(&PluginCounters) -> u64;

/// The plugin series: counters kept by the plugins themselves, copied into fresh series at each scrape.
struct PluginCollector {
    catalog: Arc<PluginCatalog>,
    ints: Vec<(Opts, ReadCounter)>,
    seconds: Opts,
    memory: Opts,
    version: Opts,
    descs: Vec<Desc>,
}

impl PluginCollector {
    fn new(catalog: Arc<PluginCatalog>) -> Result<Self> {
        let ints: Vec<(Opts, ReadCounter)> = vec![
            (
                Opts::new(
                    "plugin_calls_total",
                    "Calls into a plugin (factories and batch calls)",
                ),
                |c| c.calls,
            ),
            (
                Opts::new(
                    "plugin_rows_total",
                    "Rows a plugin decoded, encoded or routed",
                ),
                |c| c.rows,
            ),
            (
                Opts::new(
                    "plugin_bytes_in_total",
                    "Payload and key bytes passed into a plugin",
                ),
                |c| c.bytes_in,
            ),
            (
                Opts::new("plugin_bytes_out_total", "Payload bytes a plugin returned"),
                |c| c.bytes_out,
            ),
            (
                Opts::new(
                    "plugin_row_errors_total",
                    "Messages or rows a plugin reported as errors (skips included)",
                ),
                |c| c.row_errors,
            ),
            (
                Opts::new(
                    "plugin_traps_total",
                    "Traps, deadlines and memory-limit hits of a plugin (each replaced the instance)",
                ),
                |c| c.traps,
            ),
            (
                Opts::new(
                    "plugin_instantiations_total",
                    "Instances of a plugin created (the first ones and the replacements)",
                ),
                |c| c.instantiations,
            ),
            (
                Opts::new(
                    "plugin_reinstantiations_total",
                    "Instances of a plugin built again after a trap, a deadline or a memory-limit hit poisoned the one before",
                ),
                |c| c.reinstantiations,
            ),
            (
                Opts::new(
                    "plugin_deadline_hits_total",
                    "Calls into a plugin interrupted at their deadline (limits.timeout-ms)",
                ),
                |c| c.deadlines,
            ),
            (
                Opts::new(
                    "plugin_memory_limit_hits_total",
                    "Calls into a plugin that failed asking for more memory than its limit",
                ),
                |c| c.memory_limit_hits,
            ),
            (
                Opts::new(
                    "plugin_versions_switched_total",
                    "New versions of a plugin that passed their first batches and took over (hot reload)",
                ),
                |c| c.versions_switched,
            ),
            (
                Opts::new(
                    "plugin_versions_refused_total",
                    "New versions of a plugin refused before they ran a batch (load, compilation or factory failed)",
                ),
                |c| c.versions_refused,
            ),
            (
                Opts::new(
                    "plugin_versions_rolled_back_total",
                    "New versions of a plugin that failed in their first batches; the version before redid the batch",
                ),
                |c| c.versions_rolled_back,
            ),
        ];
        let version = Opts::new(
            "plugin_version_info",
            "1 for the version of a plugin in use (manifest version and wasm sha256)",
        );
        let memory = Opts::new(
            "plugin_memory_peak_bytes",
            "The largest linear memory one instance of the plugin has had (the high-water of its instances), in bytes",
        );
        let seconds = Opts::new(
            "plugin_call_seconds_total",
            "Wall time spent inside a plugin's calls",
        );
        let mut descs = Vec::new();
        for (opts, _) in &ints {
            descs.extend(
                IntCounterVec::new(opts.clone(), &["plugin"])?
                    .desc()
                    .into_iter()
                    .cloned(),
            );
        }
        descs.extend(
            CounterVec::new(seconds.clone(), &["plugin"])?
                .desc()
                .into_iter()
                .cloned(),
        );
        descs.extend(
            IntGaugeVec::new(memory.clone(), &["plugin"])?
                .desc()
                .into_iter()
                .cloned(),
        );
        descs.extend(
            IntGaugeVec::new(version.clone(), &VERSION_LABELS)?
                .desc()
                .into_iter()
                .cloned(),
        );
        Ok(PluginCollector {
            catalog,
            ints,
            seconds,
            memory,
            version,
            descs,
        })
    }
}

impl Collector for PluginCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let plugins = self.catalog.counters();
        let mut families = Vec::new();
        for (opts, value) in &self.ints {
            let Ok(vec) = IntCounterVec::new(opts.clone(), &["plugin"]) else {
                continue;
            };
            for (name, counters) in &plugins {
                vec.with_label_values(&[name.as_str()])
                    .inc_by(value(counters));
            }
            families.extend(vec.collect());
        }
        if let Ok(vec) = CounterVec::new(self.seconds.clone(), &["plugin"]) {
            for (name, counters) in &plugins {
                vec.with_label_values(&[name.as_str()])
                    .inc_by(counters.time.as_secs_f64());
            }
            families.extend(vec.collect());
        }
        if let Ok(vec) = IntGaugeVec::new(self.memory.clone(), &["plugin"]) {
            for (name, counters) in &plugins {
                vec.with_label_values(&[name.as_str()])
                    .set(i64::try_from(counters.memory_peak_bytes).unwrap_or(i64::MAX));
            }
            families.extend(vec.collect());
        }
        if let Ok(vec) = IntGaugeVec::new(self.version.clone(), &VERSION_LABELS) {
            for (name, report) in self.catalog.versions() {
                vec.with_label_values(&[
                    name.as_str(),
                    report.in_use.version.as_str(),
                    report.in_use.sha256.as_str(),
                ])
                .set(1);
            }
            families.extend(vec.collect());
        }
        families
    }
}

const VERSION_LABELS: [&str; 3] = ["plugin", "version", "sha256"];
