//! What a source or sink learns about the pipeline it serves.

use std::sync::Arc;

use super::telemetry::TableTelemetry;

/// Which job and INSERT a source or sink serves: connectors derive durable names (subscriptions,
/// producer names, transaction owners) from it, so a restarted job finds what the last run left.
#[derive(Debug, Clone)]
pub struct PipelineContext {
    pub job_id: String,
    /// The INSERT's id within the job.
    pub pipeline_id: String,
    /// The telemetry handle of the INSERT's source table (the series a source reports, see
    /// [`super::telemetry`]).
    pub source_telemetry: TableTelemetry,
    /// The telemetry handle of the INSERT's sink table.
    pub sink_telemetry: TableTelemetry,
    /// The partitions this source subtask reads, their ownership and lag (written by the source, read by
    /// the runtime's metrics and status; see [`super::PartitionBoard`]).
    pub partitions: Arc<super::PartitionBoard>,
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
    /// job's, the telemetry is registered nowhere, the link is fresh.
    pub fn detached(job_id: &str, pipeline_id: &str) -> Self {
        PipelineContext {
            job_id: job_id.to_string(),
            pipeline_id: pipeline_id.to_string(),
            source_telemetry: TableTelemetry::detached(""),
            sink_telemetry: TableTelemetry::detached(""),
            partitions: Arc::default(),
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
