//! What a source or sink learns about the pipeline it serves.

use std::sync::Arc;

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
    /// `pulsar_connect_source_owned_splits` of the INSERT's source table: the splits this process reads.
    pub owned_splits: prometheus::IntGauge,
    /// `pulsar_connect_source_takeover_*` of the INSERT's source table: transactions of gone processes
    /// this one ended (ADR 0023).
    pub takeover: TakeoverMetrics,
    /// The partitions this source subtask reads, their ownership and lag (written by the source, read by
    /// the runtime's metrics and status; see [`super::PartitionBoard`]).
    pub partitions: Arc<super::PartitionBoard>,
    /// `pulsar_connect_source_skipped_messages_total` of the INSERT's source table: messages the source
    /// skipped because its format could not decode them (`ignore-parse-errors`).
    pub source_skipped: prometheus::IntCounter,
    /// Where the INSERT's source and sink meet (see [`PipelineLink`]): one per sink subtask, shared by
    /// the source subtasks that feed it.
    pub link: Arc<PipelineLink>,
    /// Which of the INSERT's source (or sink) subtasks this instance is.
    pub subtask: Subtask,
    /// The job's state directory (where its checkpoints are), when they are persisted: where a connector
    /// keeps what a crash before the next checkpoint must not lose (the Pulsar sink's transaction
    /// journal, ADR 0026).
    pub state_dir: Option<std::path::PathBuf>,
}

/// A source's take-over metrics (ADR 0023).
#[derive(Debug, Clone)]
pub struct TakeoverMetrics {
    /// Open transactions of processes gone from the subscription that this process aborted.
    pub aborted: prometheus::IntCounter,
    /// Seconds from seeing a process gone to the end of the last transaction it left open.
    pub seconds: prometheus::Gauge,
}

impl TakeoverMetrics {
    /// Registered nowhere.
    pub fn detached() -> Self {
        TakeoverMetrics {
            aborted: prometheus::IntCounter::new("detached", "not registered")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
            seconds: prometheus::Gauge::new("detached", "not registered")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
        }
    }
}

/// Subtask `index` of `count` (`0` of `1` without parallelism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subtask {
    pub index: usize,
    pub count: usize,
}

impl Subtask {
    pub const SOLE: Subtask = Subtask { index: 0, count: 1 };
}

impl PipelineContext {
    /// A context outside a running job (validation, the `subscriptions` command): the names are the
    /// job's, the sink's dropped-rows counter is registered nowhere, the link is fresh.
    pub fn detached(job_id: &str, pipeline_id: &str) -> Self {
        PipelineContext {
            job_id: job_id.to_string(),
            pipeline_id: pipeline_id.to_string(),
            sink_dropped: prometheus::IntCounter::new("detached", "not registered")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
            owned_splits: prometheus::IntGauge::new("detached", "not registered")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
            takeover: TakeoverMetrics::detached(),
            partitions: Arc::default(),
            source_skipped: prometheus::IntCounter::new("detached", "not registered")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
            link: Arc::new(PipelineLink::default()),
            subtask: Subtask::SOLE,
            state_dir: None,
        }
    }
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

    /// What a source subtask feeding the same sink subtask offered already, if it is a `T`; otherwise
    /// `make()`, offered.
    pub fn offer_shared<T: Send + Sync + 'static>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let mut offered = self.offered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = offered.clone().and_then(|v| v.downcast::<T>().ok()) {
            return v;
        }
        let v = Arc::new(make());
        *offered = Some(v.clone());
        v
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
