//! The runtime: one pipeline of tokio tasks per INSERT, and the checkpoint coordinator.
//!
//! ```text
//!  source task ──(bounded channel)──► transform task ──(bounded channel)──► sink task
//!      ▲  poll, batch (size + linger),        DataFusion exprs,                 write, flush on barrier
//!      │  snapshot on trigger → barrier        cast to sink schema                │ ack (source + sink state)
//!      └──────────── coordinator: trigger / complete / finish ◄───────────────────┘
//! ```
//!
//! A checkpoint: the coordinator sends `Trigger(id)` to every source task; each forwards its pending rows, takes a
//! snapshot (the position after the last row it emitted) and sends `Barrier(id, snapshot)` down its channel
//! behind those rows. When the barrier reaches the sink task every earlier row has been written; the sink
//! flushes (or pre-commits) and acknowledges with both states. With every pipeline's acknowledgement the
//! coordinator writes the checkpoint atomically, then sends `Complete(id)` to sources (commit offsets) and sinks
//! (commit transactions). On stop (signal, or all sources exhausted) a final checkpoint is taken the same way,
//! then sources are told to finish and the pipelines drain.

pub mod checkpoint;
pub mod coordinator;
pub mod metrics;
mod progress;
mod stages;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::connector_api::JobSettings;
use crate::connector_api::{PipelineContext, PipelineLink, Source};
use crate::connectors::values::ValuesSource;
use crate::planner::{PipelinePlan, SourceSpec};
use checkpoint::{CheckpointData, CheckpointStore};
use coordinator::{Acknowledged, Coordinator, Ended, Next, Trigger};
pub use metrics::Metrics;
use stages::{Event, SinkCmd, SourceCmd, SourceStage};

/// Channel capacity between stages, in batches: bounded, so a slow sink slows the source (backpressure).
const CHANNEL_BATCHES: usize = 4;

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
}

/// Runs pipelines until their sources are exhausted or `stop` turns true; a final checkpoint is taken either way.
pub async fn run(
    plans: Vec<PipelinePlan>,
    settings: &JobSettings,
    opts: RunOptions,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
) -> Result<RunSummary> {
    let store = open_store(settings, &opts)?;
    let (restored, next_id) = restore_point(store.as_deref(), opts.fresh)?;
    let mut summary = RunSummary {
        restored_from: restored.as_ref().map(|d| d.checkpoint_id),
        ..Default::default()
    };

    let (ev_tx, ev_rx) = mpsc::channel::<Event>(64);
    let mut pipelines = Pipelines::default();
    for plan in plans {
        pipelines.spawn(
            plan,
            restored.as_ref(),
            settings,
            &opts.job_id,
            &metrics,
            &ev_tx,
        )?;
    }
    drop(ev_tx);
    let n = pipelines.ids.len();
    if n == 0 {
        return Ok(summary);
    }

    let progress = if opts.progress {
        progress::spawn(metrics.clone())
    } else {
        None
    };
    let mut driver = Driver {
        coordinator: Coordinator::new(n, next_id, settings.checkpoint_timeout),
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

/// The running pipelines: their ids, the coordinator's command channels, their tasks.
#[derive(Default)]
struct Pipelines {
    ids: BTreeMap<usize, String>,
    source_cmds: Vec<mpsc::Sender<SourceCmd>>,
    sink_cmds: Vec<mpsc::Sender<SinkCmd>>,
    handles: Vec<JoinHandle<()>>,
}

impl Pipelines {
    /// Creates the plan's source and sink, restores them from `restored`, and spawns its three stages.
    fn spawn(
        &mut self,
        plan: PipelinePlan,
        restored: Option<&CheckpointData>,
        settings: &JobSettings,
        job_id: &str,
        metrics: &Arc<Metrics>,
        ev: &mpsc::Sender<Event>,
    ) -> Result<()> {
        let (mut source, source_table): (Box<dyn Source>, String) = match &plan.source {
            SourceSpec::Table(t) => (t.create_source()?, t.name().to_string()),
            SourceSpec::Values(b) => (Box::new(ValuesSource::new(b.clone())), "VALUES".to_string()),
        };
        let mut sink = plan.sink.create_sink()?;
        let ctx = PipelineContext {
            job_id: job_id.to_string(),
            pipeline_id: plan.id.clone(),
            sink_dropped: metrics.sink_dropped.with_label_values(&[plan.sink.name()]),
            owned_splits: metrics.owned_splits.with_label_values(&[&source_table]),
            link: Arc::new(PipelineLink::default()),
        };
        source.set_context(&ctx);
        sink.set_context(&ctx);
        sink.check_pipeline()?;
        if let Some(d) = restored {
            match d.pipelines.get(&plan.id) {
                Some(st) => {
                    source
                        .restore(st.source.clone())
                        .with_context(|| format!("restoring the source of INSERT {}", plan.id))?;
                    sink.restore(st.sink.clone())
                        .with_context(|| format!("restoring the sink of INSERT {}", plan.id))?;
                }
                None => {
                    warn!(pipeline = %plan.id, "the checkpoint has no state for this INSERT; it starts fresh")
                }
            }
        }
        let (c1_tx, c1_rx) = mpsc::channel(CHANNEL_BATCHES);
        let (c2_tx, c2_rx) = mpsc::channel(CHANNEL_BATCHES);
        let (sc_tx, sc_rx) = mpsc::channel(8);
        let (kc_tx, kc_rx) = mpsc::channel(8);
        self.source_cmds.push(sc_tx);
        self.sink_cmds.push(kc_tx);
        self.ids.insert(plan.index, plan.id.clone());
        let idx = plan.index;
        let sink_table = plan.sink.name().to_string();
        let stage = SourceStage {
            idx,
            batch_size: settings.batch_size,
            linger: settings.batch_linger,
            metrics: metrics.clone(),
            table: source_table.clone(),
        };
        self.handles.push(tokio::spawn(stages::report(
            ev.clone(),
            format!("source '{source_table}' (INSERT #{idx})"),
            stages::source_task(stage, source, c1_tx, sc_rx, ev.clone()),
        )));
        self.handles.push(tokio::spawn(stages::report(
            ev.clone(),
            format!("transform of INSERT #{idx} into '{sink_table}'"),
            stages::transform_task(
                c1_rx,
                c2_tx,
                plan.transform.clone(),
                metrics.clone(),
                sink_table.clone(),
            ),
        )));
        self.handles.push(tokio::spawn(stages::report(
            ev.clone(),
            format!("sink '{sink_table}' (INSERT #{idx})"),
            stages::sink_task(
                idx,
                sink,
                c2_rx,
                kc_rx,
                ev.clone(),
                metrics.clone(),
                sink_table,
            ),
        )));
        Ok(())
    }

    /// Sends the coordinator's trigger, if any, to every source.
    fn trigger(&self, trigger: Option<Trigger>) {
        let Some(t) = trigger else { return };
        for c in &self.source_cmds {
            let _ = c.try_send(SourceCmd::Trigger(t.id, t.is_final));
        }
    }

    /// Checkpoint `id` is durable: sources commit offsets, sinks commit transactions.
    async fn complete(&self, id: u64) {
        for c in &self.source_cmds {
            let _ = c.send(SourceCmd::Complete(id)).await;
        }
        for c in &self.sink_cmds {
            let _ = c.send(SinkCmd::Complete(id)).await;
        }
    }

    /// After the final checkpoint: sources stop and the pipelines drain.
    async fn finish(&self) {
        for c in &self.source_cmds {
            let _ = c.send(SourceCmd::Finish).await;
        }
    }
}

/// The event loop around the [`Coordinator`]: timers, task events, checkpoint writes.
struct Driver<'a> {
    coordinator: Coordinator,
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
                    let (id, next) = self.coordinator.timed_out(Instant::now())?;
                    warn!(checkpoint = id, "checkpoint timed out after {:?}", self.timeout);
                    self.pipelines.trigger(next);
                }
                ev = events.recv() => {
                    let Some(ev) = ev else { return Err(anyhow!("all pipeline tasks ended unexpectedly")) };
                    match ev {
                        Event::Failed(msg) => return Err(anyhow!(msg)),
                        Event::Exhausted(i) => {
                            let was_stopping = self.coordinator.is_stopping();
                            let next = self.coordinator.exhausted(i, Instant::now());
                            if !was_stopping && self.coordinator.is_stopping() {
                                info!("all sources are exhausted: taking a final checkpoint");
                            }
                            self.pipelines.trigger(next);
                        }
                        Event::Ack { pipeline, id, state } => {
                            if let Some(done) = self.coordinator.ack(pipeline, id, state) {
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
    async fn complete(&mut self, done: Acknowledged) -> Result<()> {
        let (id, is_final, started) = (done.id, done.is_final, done.started);
        let data = CheckpointData {
            format: checkpoint::FORMAT_VERSION,
            job_id: self.job_id.to_string(),
            checkpoint_id: id,
            created_at_ms: chrono::Utc::now().timestamp_millis(),
            pipelines: done
                .states
                .into_iter()
                .map(|(i, s)| (self.pipelines.ids[&i].clone(), s))
                .collect(),
        };
        if let Some(store) = &self.store {
            let store = store.clone();
            let written = tokio::task::spawn_blocking(move || store.write(&data))
                .await
                .map_err(|e| anyhow!("checkpoint writer: {e}"))?;
            if let Err(e) = written {
                self.metrics.checkpoint_failures.inc();
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

/// Every pipeline ended before the final checkpoint. A failing task closes its channels, so the stages after
/// it can report Finished before its Failed arrives: prefer the real cause.
async fn early_end(events: &mut mpsc::Receiver<Event>) -> anyhow::Error {
    let wait = tokio::time::sleep(Duration::from_secs(5));
    tokio::pin!(wait);
    loop {
        tokio::select! {
            e = events.recv() => match e {
                Some(Event::Failed(msg)) => return anyhow!(msg),
                Some(_) => continue,
                None => break,
            },
            _ = &mut wait => break,
        }
    }
    anyhow!("pipelines ended before the final checkpoint")
}
