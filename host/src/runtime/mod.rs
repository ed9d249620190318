//! The runtime: per INSERT, source subtasks (each with its transform) feeding sink subtasks as tokio tasks
//! ([`pipelines`]), and the checkpoint coordinator.
//!
//! ```text
//!  source task ──(bounded channel)──► transform task ──(bounded channel)──► sink task (1..n inputs)
//!      ▲  poll, batch (size + linger),        DataFusion exprs,                 write, flush on aligned barriers
//!      │  snapshot on trigger → barrier        cast to sink schema                │ ack (sources' + sink state)
//!      └──────────── coordinator: trigger / complete / finish ◄───────────────────┘
//! ```
//!
//! A checkpoint: the coordinator sends `Trigger(id)` to every source task; each forwards its pending rows, takes a
//! snapshot (the position after the last row it emitted) and sends `Barrier(id, snapshot)` down its channel
//! behind those rows. When the barriers of all its inputs reached a sink task ([`align`]) every earlier row has
//! been written; the sink flushes (or pre-commits) and acknowledges with its inputs' states and its own. With
//! every sink subtask's acknowledgement the coordinator writes the checkpoint atomically, then sends
//! `Complete(id)` to sources (commit offsets) and sinks (commit transactions). On stop (signal, or all sources
//! exhausted) a final checkpoint is taken the same way, then sources are told to finish and the pipelines drain.

mod align;
pub mod checkpoint;
pub mod coordinator;
mod parallelism;
mod pipelines;
mod progress;
mod stages;
pub mod supervisor;
pub mod telemetry;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::connector_api::JobSettings;
use crate::planner::PipelinePlan;
use checkpoint::{CheckpointData, CheckpointStore};
use coordinator::{Acknowledged, Coordinator, Ended, Next};
use pipelines::{Pipelines, RunContext};
use stages::{Event, SinkAck};
pub use telemetry::{Metrics, status};

/// How to run a job.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub job_id: String,
    /// Overrides `state.checkpoints.dir`.
    pub state_dir: Option<PathBuf>,
    /// Ignore existing checkpoints (new ones are numbered after them, so they become the latest).
    pub fresh: bool,
    /// Show a one-line progress on stderr (only when it is a terminal).
    pub progress: bool,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub checkpoints: u64,
    pub restored_from: Option<u64>,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Per INSERT (pipeline id): its source and sink subtasks.
    pub subtasks: std::collections::BTreeMap<String, (usize, usize)>,
}

/// Runs pipelines until their sources are exhausted or `stop` turns true; a final checkpoint is taken either way.
pub async fn run(
    plans: Vec<PipelinePlan>,
    settings: &JobSettings,
    opts: RunOptions,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
) -> Result<RunSummary> {
    metrics.status.start(
        &opts.job_id,
        status::Parallelism {
            default: settings.parallelism,
            cores: parallelism::cores(),
        },
    );
    let store = open_store(settings, &opts)?;
    let (restored, next_id) = restore_point(store.as_deref(), opts.fresh)?;
    let mut summary = RunSummary {
        restored_from: restored.as_ref().map(|d| d.checkpoint_id),
        ..Default::default()
    };

    let (ev_tx, ev_rx) = mpsc::channel::<Event>(64);
    let mut pipelines = Pipelines::default();
    {
        let run = RunContext {
            restored: restored.as_ref(),
            settings,
            job_id: &opts.job_id,
            metrics: &metrics,
            ev: &ev_tx,
            state_dir: store
                .as_ref()
                .map(|s| std::path::PathBuf::from(&s.location)),
        };
        for plan in plans {
            if let Err(e) = pipelines.spawn(plan, &run).await {
                for h in &pipelines.handles {
                    h.abort();
                }
                return Err(e);
            }
        }
    }
    drop(ev_tx);
    summary.subtasks = pipelines.shapes();
    if pipelines.sink_count() == 0 {
        return Ok(summary);
    }

    let progress = if opts.progress {
        progress::spawn(metrics.clone())
    } else {
        None
    };
    let mut driver = Driver {
        coordinator: Coordinator::with_subtasks(
            pipelines.source_count(),
            pipelines.sink_count(),
            next_id,
            settings.checkpoint_timeout,
        ),
        pipelines: &pipelines,
        store,
        metrics: &metrics,
        job_id: &opts.job_id,
        timeout: settings.checkpoint_timeout,
        checkpoints: 0,
    };
    let result = driver
        .coordinate(ev_rx, stop, settings.checkpoint_interval)
        .await;
    summary.checkpoints = driver.checkpoints;
    if let Some(p) = progress {
        p.abort();
        progress::clear();
    }
    if let Err(e) = result {
        for h in &pipelines.handles {
            h.abort();
        }
        return Err(e);
    }
    for h in pipelines.handles {
        let _ = h.await;
    }
    metrics.status.finished();
    summary.rows_in = Metrics::total(&metrics.rows_in);
    summary.rows_out = Metrics::total(&metrics.rows_out);
    Ok(summary)
}

/// The job's checkpoint directory (`--state-dir` over `state.checkpoints.dir`), or none.
fn open_store(settings: &JobSettings, opts: &RunOptions) -> Result<Option<Arc<CheckpointStore>>> {
    let state_dir = opts
        .state_dir
        .clone()
        .or_else(|| settings.checkpoint_dir.clone());
    match &state_dir {
        Some(d) => Ok(Some(Arc::new(CheckpointStore::open(
            d,
            &opts.job_id,
            settings.num_retained,
        )?))),
        None => {
            info!(
                "no state directory (--state-dir or SET 'state.checkpoints.dir'): checkpoints flush sinks but are not persisted"
            );
            Ok(None)
        }
    }
}

/// The checkpoint to restore (none with `--fresh`) and the id of this run's first checkpoint.
fn restore_point(
    store: Option<&CheckpointStore>,
    fresh: bool,
) -> Result<(Option<CheckpointData>, u64)> {
    let Some(store) = store else {
        return Ok((None, 1));
    };
    let ids = store.ids()?;
    let next_id = ids.last().map(|i| i + 1).unwrap_or(1);
    if fresh {
        if !ids.is_empty() {
            info!(location = %store.location, "--fresh: ignoring {} existing checkpoint(s)", ids.len());
        }
        return Ok((None, next_id));
    }
    let (latest, warnings) = store.latest()?;
    for w in warnings {
        warn!("{w}");
    }
    if let Some(d) = &latest {
        info!(checkpoint = d.checkpoint_id, location = %store.location, "restoring from checkpoint");
    }
    Ok((latest, next_id))
}

/// The event loop around the [`Coordinator`]: timers, task events, checkpoint writes.
struct Driver<'a> {
    coordinator: Coordinator<SinkAck>,
    pipelines: &'a Pipelines,
    store: Option<Arc<CheckpointStore>>,
    metrics: &'a Metrics,
    job_id: &'a str,
    timeout: Duration,
    /// Checkpoints completed in this run.
    checkpoints: u64,
}

impl Driver<'_> {
    async fn coordinate(
        &mut self,
        mut events: mpsc::Receiver<Event>,
        mut stop: watch::Receiver<bool>,
        interval: Duration,
    ) -> Result<()> {
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let deadline = self
                .coordinator
                .deadline()
                .map(tokio::time::Instant::from_std);
            tokio::select! {
                changed = stop.changed(), if !self.coordinator.is_stopping() => {
                    if changed.is_err() || *stop.borrow() {
                        info!("stopping: taking a final checkpoint, then draining");
                        self.pipelines.trigger(self.coordinator.stop(Instant::now()));
                    }
                }
                _ = ticker.tick(), if self.coordinator.wants_tick() => {
                    self.pipelines.trigger(self.coordinator.tick(Instant::now()));
                }
                _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                    self.metrics.checkpoint_failures.inc();
                    let started = self.coordinator.deadline().and_then(|d| d.checked_sub(self.timeout));
                    let (id, next) = self.coordinator.timed_out(Instant::now())?;
                    self.record(id, status::CheckpointState::TimedOut, false, started, None);
                    warn!(checkpoint = id, "checkpoint timed out after {:?}", self.timeout);
                    self.pipelines.abandon(id);
                    self.pipelines.trigger(next);
                }
                ev = events.recv() => {
                    let Some(ev) = ev else { return Err(anyhow!("all pipeline tasks ended unexpectedly")) };
                    match ev {
                        Event::Failed(e) => return Err(cause_of(e, &mut events).await),
                        Event::Exhausted(i) => {
                            let was_stopping = self.coordinator.is_stopping();
                            let next = self.coordinator.exhausted(i, Instant::now());
                            if !was_stopping && self.coordinator.is_stopping() {
                                info!("all sources are exhausted: taking a final checkpoint");
                            }
                            self.pipelines.trigger(next);
                        }
                        Event::Ack { sink, id, state } => {
                            if let Some(done) = self.coordinator.ack(sink, id, state) {
                                self.complete(done).await?;
                            }
                        }
                        Event::Finished(i) => match self.coordinator.finished(i) {
                            None => {}
                            Some(Ended::Clean) => return Ok(()),
                            Some(Ended::Early) => return Err(early_end(&mut events).await),
                        },
                    }
                }
            }
        }
    }

    /// Persists a checkpoint every pipeline acknowledged and tells sources and sinks it is durable.
    async fn complete(&mut self, done: Acknowledged<SinkAck>) -> Result<()> {
        let (id, is_final, started) = (done.id, done.is_final, done.started);
        let data = CheckpointData {
            format: checkpoint::FORMAT_VERSION,
            job_id: self.job_id.to_string(),
            checkpoint_id: id,
            created_at_ms: chrono::Utc::now().timestamp_millis(),
            pipelines: self.pipelines.states(done.states),
        };
        let mut size = None;
        if let Some(store) = &self.store {
            let store = store.clone();
            let written = tokio::task::spawn_blocking(move || store.write(&data))
                .await
                .map_err(|e| anyhow!("checkpoint writer: {e}"))?;
            if let Ok(bytes) = &written {
                size = Some(*bytes);
            }
            if let Err(e) = written {
                self.metrics.checkpoint_failures.inc();
                self.record(
                    id,
                    status::CheckpointState::Failed,
                    is_final,
                    Some(started),
                    None,
                );
                if is_final {
                    return Err(e.context(format!("writing the final checkpoint {id}")));
                }
                warn!(checkpoint = id, "checkpoint failed: {e:#}");
                self.pipelines
                    .trigger(self.coordinator.failed(Instant::now()));
                return Ok(());
            }
        }
        self.metrics.checkpoints.inc();
        self.metrics.last_checkpoint_id.set(id as i64);
        self.metrics
            .checkpoint_duration
            .observe(started.elapsed().as_secs_f64());
        self.record(
            id,
            status::CheckpointState::Completed,
            is_final,
            Some(started),
            size,
        );
        self.checkpoints += 1;
        tracing::debug!(checkpoint = id, "checkpoint complete");
        self.pipelines.complete(id).await;
        match self.coordinator.persisted(is_final, Instant::now()) {
            Next::Finish => {
                info!(checkpoint = id, "final checkpoint complete");
                self.pipelines.finish().await;
            }
            Next::Trigger(t) => self.pipelines.trigger(Some(t)),
            Next::Continue => {}
        }
        Ok(())
    }
}

impl Driver<'_> {
    /// Adds a checkpoint that ended to the status (`started`: when it was triggered, if known).
    fn record(
        &self,
        id: u64,
        state: status::CheckpointState,
        is_final: bool,
        started: Option<Instant>,
        size_bytes: Option<u64>,
    ) {
        let elapsed = started.map(|s| s.elapsed()).unwrap_or_default();
        let triggered = std::time::SystemTime::now()
            .checked_sub(elapsed)
            .unwrap_or_else(std::time::SystemTime::now);
        self.metrics.status.checkpoint(status::CheckpointRecord {
            id,
            state,
            is_final,
            triggered_at_ms: status::epoch_ms(triggered),
            duration_ms: elapsed.as_secs_f64() * 1000.0,
            size_bytes,
        });
    }
}

/// Every pipeline ended before the final checkpoint. A failing task closes its channels, so the stages after
/// it can report Finished before its Failed arrives: prefer the real cause.
/// A stage that failed only because the stage after it ended ([`stages::PipelineStopped`]) is a
/// consequence: the failure of the stage that ended, if it comes within 5 s, is the one reported.
async fn cause_of(e: anyhow::Error, events: &mut mpsc::Receiver<Event>) -> anyhow::Error {
    if e.downcast_ref::<stages::PipelineStopped>().is_none() {
        return e;
    }
    let wait = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(wait);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(Event::Failed(cause)) if cause.downcast_ref::<stages::PipelineStopped>().is_none() => return cause,
                Some(_) => continue,
                None => return e,
            },
            _ = &mut wait => return e,
        }
    }
}

async fn early_end(events: &mut mpsc::Receiver<Event>) -> anyhow::Error {
    let wait = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(wait);
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(Event::Failed(e)) => return e,
                Some(_) => continue,
                None => break,
            },
            _ = &mut wait => break,
        }
    }
    anyhow!("pipelines ended before the final checkpoint")
}
