//! The job's status as the runtime publishes it: what runs (each INSERT, its tables and subtasks), the
//! partitions its sources report, the last checkpoints, restarts. [`StatusBoard::snapshot`] joins it with
//! the counters into one serializable [`Status`], which `/api/status` serves (the `status` module) — the
//! runtime never knows who reads it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::rates::Rates;
use crate::connector_api::{MetricLabels, PartitionBoard};
use crate::plugins::catalog::PluginCatalog;

/// How many checkpoints the status keeps.
const CHECKPOINT_HISTORY: usize = 10;
/// The window of the rates the status shows.
const RATE_WINDOW: Duration = Duration::from_secs(10);

/// One INSERT as the runtime spawned it.
#[derive(Debug, Clone)]
pub struct InsertInfo {
    pub id: String,
    pub index: usize,
    pub source_table: String,
    pub source_connector: String,
    pub sink_table: String,
    pub sink_connector: String,
    pub source_subtasks: usize,
    pub sink_subtasks: usize,
    /// One per source subtask.
    pub boards: Vec<Arc<PartitionBoard>>,
}

/// How a checkpoint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointState {
    Completed,
    Failed,
    TimedOut,
}

/// One checkpoint, as the status shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointRecord {
    pub id: u64,
    pub state: CheckpointState,
    pub is_final: bool,
    /// When it was triggered (ms since the epoch).
    pub triggered_at_ms: i64,
    pub duration_ms: f64,
    /// The checkpoint file's size (none without a state directory, or when it failed).
    pub size_bytes: Option<u64>,
}

#[derive(Default)]
struct Board {
    job: String,
    started: Option<(Instant, SystemTime)>,
    restarts: u64,
    last_restart_cause: Option<String>,
    inserts: Vec<InsertInfo>,
    checkpoints: VecDeque<CheckpointRecord>,
    table_labels: BTreeMap<String, MetricLabels>,
    plugins: Option<Arc<PluginCatalog>>,
    finished: bool,
    parallelism: Parallelism,
}

/// What the runtime publishes about the running job.
#[derive(Default)]
pub struct StatusBoard {
    board: Mutex<Board>,
    rates: Rates,
}

impl StatusBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run of job `job` starts (the runtime calls it; a second run in the same process starts over),
    /// with its parallelism.
    pub fn start(&self, job: &str, parallelism: Parallelism) {
        let mut b = self.lock();
        b.job = job.to_owned();
        b.parallelism = parallelism;
        b.started = Some((Instant::now(), SystemTime::now()));
        b.inserts.clear();
        b.checkpoints.clear();
        b.finished = false;
    }

    pub fn job(&self) -> String {
        self.lock().job.clone()
    }

    pub fn started(&self) -> Option<Instant> {
        self.lock().started.map(|(i, _)| i)
    }

    /// How often this process restarted the job (`exec` of itself after a failure the restart strategy
    /// restarts), and the last one's cause.
    pub fn set_restarts(&self, n: u64, last_cause: Option<String>) {
        let mut b = self.lock();
        b.restarts = n;
        b.last_restart_cause = last_cause;
    }

    pub fn finished(&self) {
        self.lock().finished = true;
    }

    pub fn add_insert(&self, info: InsertInfo) {
        self.lock().inserts.push(info);
    }

    pub fn set_plugins(&self, catalog: Arc<PluginCatalog>) {
        self.lock().plugins = Some(catalog);
    }

    /// The labels `table` adds to its series (see [`MetricLabels`]).
    pub fn set_table_labels(&self, table: &str, labels: MetricLabels) {
        if !labels.is_empty() {
            self.lock().table_labels.insert(table.to_owned(), labels);
        }
    }

    pub fn table_labels(&self) -> BTreeMap<String, MetricLabels> {
        self.lock().table_labels.clone()
    }

    pub fn inserts(&self) -> Vec<InsertInfo> {
        self.lock().inserts.clone()
    }

    pub fn checkpoint(&self, record: CheckpointRecord) {
        let mut b = self.lock();
        if b.checkpoints.len() == CHECKPOINT_HISTORY {
            b.checkpoints.pop_front();
        }
        b.checkpoints.push_back(record);
    }

    /// The lag of every partition this process owns, summed (`None` until the broker answered for one):
    /// for a progress line.
    pub fn total_lag(&self) -> Option<u64> {
        let b = self.lock();
        let lags: Vec<u64> = b
            .inserts
            .iter()
            .flat_map(|i| i.boards.iter())
            .flat_map(|board| board.snapshot())
            .filter(|p| p.owned)
            .filter_map(|p| p.lag_messages)
            .collect();
        (!lags.is_empty()).then(|| lags.iter().sum())
    }

    /// The status now: the board joined with `numbers` (given by the metrics).
    pub fn snapshot(&self, numbers: &Numbers) -> Status {
        let b = self.lock();
        let now = Instant::now();
        let uptime = b.started.map(|(i, _)| now.duration_since(i));
        let table = |t: &str| numbers.tables.get(t).copied().unwrap_or_default();
        let rate = |key: String, value: u64| {
            self.rates
                .rate(&key, value, now, RATE_WINDOW, b.started.map(|s| s.0))
        };
        let inserts = b
            .inserts
            .iter()
            .map(|i| {
                let (source, sink) = (table(&i.source_table), table(&i.sink_table));
                let (rows_in, rows_out) = (source.rows_in, sink.rows_out);
                let mut partitions: Vec<PartitionView> = i
                    .boards
                    .iter()
                    .enumerate()
                    .flat_map(|(subtask, board)| {
                        board.snapshot().into_iter().map(move |p| PartitionView {
                            topic: p.topic,
                            partition: p.partition,
                            subtask,
                            owned: p.owned,
                            lag_messages: p.lag_messages,
                            lag_at_least: p.lag_at_least,
                            lag_age_s: p
                                .lag_at
                                .and_then(|t| t.elapsed().ok())
                                .map(|d| d.as_secs_f64()),
                        })
                    })
                    .collect();
                partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                let known: Vec<u64> = partitions
                    .iter()
                    .filter(|p| p.owned)
                    .filter_map(|p| p.lag_messages)
                    .collect();
                let lag_note = i.boards.iter().find_map(|b| b.lag_unavailable());
                InsertStatus {
                    id: i.id.clone(),
                    index: i.index,
                    source: TableRef {
                        table: i.source_table.clone(),
                        connector: i.source_connector.clone(),
                    },
                    sink: TableRef {
                        table: i.sink_table.clone(),
                        connector: i.sink_connector.clone(),
                    },
                    source_subtasks: i.source_subtasks,
                    sink_subtasks: i.sink_subtasks,
                    rows_in,
                    rows_out,
                    bytes_in: source.bytes_in,
                    bytes_out: sink.bytes_out,
                    rows_in_per_s: rate(format!("in/{}", i.source_table), rows_in),
                    rows_out_per_s: rate(format!("out/{}", i.sink_table), rows_out),
                    errors: source.errors
                        + if i.sink_table != i.source_table {
                            sink.errors
                        } else {
                            0
                        },
                    skipped_rows: sink.skipped_rows,
                    skipped_messages: source.skipped_messages,
                    dropped_rows: sink.dropped_rows,
                    owned_partitions: partitions.iter().filter(|p| p.owned).count(),
                    lag_messages: (!known.is_empty()).then(|| known.iter().sum()),
                    lag_note,
                    partitions,
                }
            })
            .collect();
        let plugins = b
            .plugins
            .as_ref()
            .map(|catalog| {
                let versions: std::collections::BTreeMap<_, _> =
                    catalog.versions().into_iter().collect();
                catalog
                    .counters()
                    .into_iter()
                    .map(|(name, c)| {
                        let v = versions.get(&name);
                        PluginStatus {
                            version: v.map(|v| v.in_use.version.clone()),
                            sha256: v.map(|v| v.in_use.sha256.clone()),
                            next_version: v.and_then(|v| v.staged.as_ref()).map(|s| s.to_string()),
                            version_problem: v.and_then(|v| v.problem.clone()),
                            versions_switched: c.versions_switched,
                            versions_refused: c.versions_refused,
                            versions_rolled_back: c.versions_rolled_back,
                            plugin: name,
                            calls: c.calls,
                            rows: c.rows,
                            guest_seconds: c.time.as_secs_f64(),
                            row_errors: c.row_errors,
                            traps: c.traps,
                            instantiations: c.instantiations,
                            reinstantiations: c.reinstantiations,
                            deadline_hits: c.deadlines,
                            memory_limit_hits: c.memory_limit_hits,
                            memory_peak_bytes: c.memory_peak_bytes,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        Status {
            job: b.job.clone(),
            state: if b.finished { "finished" } else { "running" },
            started_at_ms: b.started.map(|(_, t)| epoch_ms(t)),
            uptime_s: uptime.map(|d| d.as_secs_f64()),
            restarts: b.restarts,
            last_restart_cause: b.last_restart_cause.clone(),
            parallelism: b.parallelism,
            inserts,
            checkpoints: Checkpoints {
                completed: numbers.checkpoints_completed,
                failed: numbers.checkpoints_failed,
                recent: b.checkpoints.iter().rev().cloned().collect(),
            },
            plugins,
        }
    }
}

pub fn epoch_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The numbers of one table the status shows: the runtime's counters and the well-known series its
/// connector registered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableNumbers {
    pub rows_in: u64,
    pub bytes_in: u64,
    pub rows_out: u64,
    pub bytes_out: u64,
    pub errors: u64,
    pub skipped_rows: u64,
    pub skipped_messages: u64,
    pub dropped_rows: u64,
}

/// What the board is given to show (by [`super::Metrics::status_now`]).
#[derive(Debug, Clone, Default)]
pub struct Numbers {
    pub tables: BTreeMap<String, TableNumbers>,
    pub checkpoints_completed: u64,
    pub checkpoints_failed: u64,
}

/// A job's parallelism: `parallelism.default` as set (`None`: unset, each INSERT as many subtasks as the
/// process has cores, capped by its splits) and those cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Parallelism {
    pub default: Option<usize>,
    pub cores: usize,
}

/// `/api/status`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub job: String,
    pub state: &'static str,
    pub started_at_ms: Option<i64>,
    pub uptime_s: Option<f64>,
    pub restarts: u64,
    /// Why the job last restarted (`None`: it has not).
    pub last_restart_cause: Option<String>,
    /// The job's parallelism (each INSERT's subtasks are in `inserts`).
    pub parallelism: Parallelism,
    pub inserts: Vec<InsertStatus>,
    pub checkpoints: Checkpoints,
    pub plugins: Vec<PluginStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRef {
    pub table: String,
    pub connector: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct InsertStatus {
    pub id: String,
    pub index: usize,
    pub source: TableRef,
    pub sink: TableRef,
    pub source_subtasks: usize,
    pub sink_subtasks: usize,
    pub rows_in: u64,
    pub rows_out: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub rows_in_per_s: f64,
    pub rows_out_per_s: f64,
    pub errors: u64,
    /// Rows the sink's NOT NULL enforcer dropped.
    pub skipped_rows: u64,
    /// Messages the source's format could not decode and skipped.
    pub skipped_messages: u64,
    /// Rows the sink could not write and did not fail for.
    pub dropped_rows: u64,
    pub owned_partitions: usize,
    /// The sum over the owned partitions whose lag the broker reported.
    pub lag_messages: Option<u64>,
    /// Why there is no lag, when the source cannot ask the broker.
    pub lag_note: Option<String>,
    pub partitions: Vec<PartitionView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartitionView {
    pub topic: String,
    pub partition: i32,
    /// The source subtask that has it.
    pub subtask: usize,
    pub owned: bool,
    pub lag_messages: Option<u64>,
    /// The broker counted only part of the backlog: the lag is at least `lag_messages`.
    pub lag_at_least: bool,
    /// Seconds since the broker answered.
    pub lag_age_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Checkpoints {
    pub completed: u64,
    pub failed: u64,
    /// The last ones, newest first.
    pub recent: Vec<CheckpointRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PluginStatus {
    pub plugin: String,
    pub calls: u64,
    pub rows: u64,
    pub guest_seconds: f64,
    pub row_errors: u64,
    pub traps: u64,
    pub instantiations: u64,
    pub reinstantiations: u64,
    pub deadline_hits: u64,
    pub memory_limit_hits: u64,
    pub memory_peak_bytes: u64,
    /// The version in use (manifest `version`) and its wasm's sha256.
    pub version: Option<String>,
    pub sha256: Option<String>,
    /// A new version compiled and being taken up (hot reload).
    pub next_version: Option<String>,
    /// Why the last new version was not used.
    pub version_problem: Option<String>,
    pub versions_switched: u64,
    pub versions_refused: u64,
    pub versions_rolled_back: u64,
}
