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
pub mod metrics;
mod progress;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use arrow::record_batch::RecordBatch;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use crate::catalog::JobSettings;
use crate::connectors::values::ValuesSource;
use crate::connectors::{Sink, Source, SourcePoll};
use crate::planner::{PipelinePlan, SourceSpec, Transform};
use checkpoint::{CheckpointData, CheckpointStore, PipelineState};
pub use metrics::Metrics;

/// Channel capacity between stages, in batches: bounded, so a slow sink slows the source (backpressure).
const CHANNEL_BATCHES: usize = 4;

enum Msg {
    Batch(RecordBatch),
    Barrier(u64, serde_json::Value),
    End,
}

enum SourceCmd {
    /// Take checkpoint `id`; when the flag is set it is the final one: stop reading after the snapshot.
    Trigger(u64, bool),
    Complete(u64),
    Finish,
}

enum SinkCmd {
    Complete(u64),
}

enum Event {
    Ack {
        pipeline: usize,
        id: u64,
        state: PipelineState,
    },
    Exhausted(usize),
    Finished(usize),
    Failed(String),
}

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
    mut stop: watch::Receiver<bool>,
) -> Result<RunSummary> {
    let state_dir = opts
        .state_dir
        .clone()
        .or_else(|| settings.checkpoint_dir.clone());
    let store = match &state_dir {
        Some(d) => Some(Arc::new(CheckpointStore::open(
            d,
            &opts.job_id,
            settings.num_retained,
        )?)),
        None => {
            info!(
                "no state directory (--state-dir or SET 'state.checkpoints.dir'): checkpoints flush sinks but are not persisted"
            );
            None
        }
    };
    let mut restored: Option<CheckpointData> = None;
    let mut next_id = 1;
    if let Some(store) = &store {
        let ids = store.ids()?;
        next_id = ids.last().map(|i| i + 1).unwrap_or(1);
        if opts.fresh {
            if !ids.is_empty() {
                info!(location = %store.location, "--fresh: ignoring {} existing checkpoint(s)", ids.len());
            }
        } else {
            let (latest, warnings) = store.latest()?;
            for w in warnings {
                warn!("{w}");
            }
            if let Some(d) = &latest {
                info!(checkpoint = d.checkpoint_id, location = %store.location, "restoring from checkpoint");
            }
            restored = latest;
        }
    }
    let mut summary = RunSummary {
        restored_from: restored.as_ref().map(|d| d.checkpoint_id),
        ..Default::default()
    };

    let (ev_tx, mut ev_rx) = mpsc::channel::<Event>(64);
    let mut source_cmds = Vec::new();
    let mut sink_cmds = Vec::new();
    let mut handles = Vec::new();
    let n = plans.len();
    let pipeline_ids: BTreeMap<usize, String> =
        plans.iter().map(|p| (p.index, p.id.clone())).collect();
    for plan in plans {
        let (mut source, source_table): (Box<dyn Source>, String) = match &plan.source {
            SourceSpec::Table(t) => (t.factory.create_source(t)?, t.name().to_string()),
            SourceSpec::Values(b) => (Box::new(ValuesSource::new(b.clone())), "VALUES".to_string()),
        };
        let mut sink = plan.sink.factory.create_sink(&plan.sink)?;
        let ctx = crate::connectors::PipelineContext {
            job_id: opts.job_id.clone(),
            pipeline_id: plan.id.clone(),
            sink_dropped: metrics.sink_dropped.with_label_values(&[plan.sink.name()]),
            link: Arc::new(crate::connectors::PipelineLink::default()),
        };
        source.set_context(&ctx);
        sink.set_context(&ctx);
        if let Some(d) = &restored {
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
        source_cmds.push(sc_tx);
        sink_cmds.push(kc_tx);
        let idx = plan.index;
        let sink_table = plan.sink.name().to_string();
        let m = metrics.clone();
        let ev = ev_tx.clone();
        let (batch_size, linger) = (settings.batch_size, settings.batch_linger);
        handles.push(tokio::spawn(report(
            ev.clone(),
            format!("source '{source_table}' (INSERT #{idx})"),
            {
                let ev = ev.clone();
                async move {
                    source_task(
                        idx,
                        source,
                        c1_tx,
                        sc_rx,
                        ev,
                        batch_size,
                        linger,
                        m,
                        source_table,
                    )
                    .await
                }
            },
        )));
        let m = metrics.clone();
        let transform = plan.transform.clone();
        let st = sink_table.clone();
        handles.push(tokio::spawn(report(
            ev.clone(),
            format!("transform of INSERT #{idx} into '{sink_table}'"),
            async move { transform_task(c1_rx, c2_tx, transform, m, st).await },
        )));
        let m = metrics.clone();
        handles.push(tokio::spawn(report(
            ev.clone(),
            format!("sink '{sink_table}' (INSERT #{idx})"),
            {
                let ev = ev.clone();
                async move { sink_task(idx, sink, c2_rx, kc_rx, ev, m, sink_table).await }
            },
        )));
    }
    drop(ev_tx);

    let progress = if opts.progress {
        progress::spawn(metrics.clone())
    } else {
        None
    };

    // The coordinator.
    struct Inflight {
        id: u64,
        started: Instant,
        acks: BTreeMap<usize, PipelineState>,
        is_final: bool,
    }
    let mut inflight: Option<Inflight> = None;
    let mut exhausted = BTreeSet::new();
    let mut finished = BTreeSet::new();
    let mut stopping = false;
    let mut finishing = false;
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + settings.checkpoint_interval,
        settings.checkpoint_interval,
    );
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let trigger = |id: u64, is_final: bool| {
        for c in &source_cmds {
            let _ = c.try_send(SourceCmd::Trigger(id, is_final));
        }
    };
    if n == 0 {
        return Ok(summary);
    }
    let result: Result<()> = async {
        loop {
            let deadline = inflight.as_ref().map(|f| tokio::time::Instant::from_std(f.started + settings.checkpoint_timeout));
            tokio::select! {
                changed = stop.changed(), if !stopping => {
                    if changed.is_err() || *stop.borrow() {
                        stopping = true;
                        info!("stopping: taking a final checkpoint, then draining");
                        if inflight.is_none() {
                            trigger(next_id, true);
                            inflight = Some(Inflight { id: next_id, started: Instant::now(), acks: BTreeMap::new(), is_final: true });
                            next_id += 1;
                        }
                    }
                }
                _ = ticker.tick(), if inflight.is_none() && !stopping => {
                    trigger(next_id, false);
                    inflight = Some(Inflight { id: next_id, started: Instant::now(), acks: BTreeMap::new(), is_final: false });
                    next_id += 1;
                }
                _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                    let f = inflight.take().expect("deadline only with a checkpoint in flight");
                    metrics.checkpoint_failures.inc();
                    if f.is_final {
                        return Err(anyhow!("the final checkpoint {} did not complete within {:?}", f.id, settings.checkpoint_timeout));
                    }
                    warn!(checkpoint = f.id, "checkpoint timed out after {:?}", settings.checkpoint_timeout);
                    if stopping {
                        // A stop arrived while this one was in flight: the final checkpoint is still owed.
                        trigger(next_id, true);
                        inflight = Some(Inflight { id: next_id, started: Instant::now(), acks: BTreeMap::new(), is_final: true });
                        next_id += 1;
                    }
                }
                ev = ev_rx.recv() => {
                    let Some(ev) = ev else { return Err(anyhow!("all pipeline tasks ended unexpectedly")) };
                    match ev {
                        Event::Failed(msg) => return Err(anyhow!(msg)),
                        Event::Exhausted(i) => {
                            exhausted.insert(i);
                            if exhausted.len() == n && !stopping {
                                stopping = true;
                                info!("all sources are exhausted: taking a final checkpoint");
                                if inflight.is_none() {
                                    trigger(next_id, true);
                                    inflight = Some(Inflight { id: next_id, started: Instant::now(), acks: BTreeMap::new(), is_final: true });
                                    next_id += 1;
                                }
                            }
                        }
                        Event::Ack { pipeline, id, state } => {
                            let Some(f) = inflight.as_mut().filter(|f| f.id == id) else { continue };
                            f.acks.insert(pipeline, state);
                            if f.acks.len() < n {
                                continue;
                            }
                            let f = inflight.take().expect("checked above");
                            let data = CheckpointData {
                                format: checkpoint::FORMAT_VERSION,
                                job_id: opts.job_id.clone(),
                                checkpoint_id: f.id,
                                created_at_ms: chrono::Utc::now().timestamp_millis(),
                                pipelines: f.acks.into_iter().map(|(i, s)| (pipeline_ids[&i].clone(), s)).collect(),
                            };
                            if let Some(store) = &store {
                                let store = store.clone();
                                let written = tokio::task::spawn_blocking(move || store.write(&data)).await.map_err(|e| anyhow!("checkpoint writer: {e}"))?;
                                if let Err(e) = written {
                                    metrics.checkpoint_failures.inc();
                                    if f.is_final {
                                        return Err(e.context(format!("writing the final checkpoint {}", f.id)));
                                    }
                                    warn!(checkpoint = f.id, "checkpoint failed: {e:#}");
                                    continue;
                                }
                            }
                            metrics.checkpoints.inc();
                            metrics.last_checkpoint_id.set(f.id as i64);
                            metrics.checkpoint_duration.observe(f.started.elapsed().as_secs_f64());
                            summary.checkpoints += 1;
                            tracing::debug!(checkpoint = f.id, "checkpoint complete");
                            for c in &source_cmds {
                                let _ = c.send(SourceCmd::Complete(f.id)).await;
                            }
                            for c in &sink_cmds {
                                let _ = c.send(SinkCmd::Complete(f.id)).await;
                            }
                            if f.is_final {
                                info!(checkpoint = f.id, "final checkpoint complete");
                                finishing = true;
                                for c in &source_cmds {
                                    let _ = c.send(SourceCmd::Finish).await;
                                }
                            } else if stopping {
                                trigger(next_id, true);
                                inflight = Some(Inflight { id: next_id, started: Instant::now(), acks: BTreeMap::new(), is_final: true });
                                next_id += 1;
                            }
                        }
                        Event::Finished(i) => {
                            finished.insert(i);
                            if finished.len() == n {
                                if !finishing {
                                    // A failing task closes its channels, so the stages after it can report
                                    // Finished before its Failed arrives: prefer the real cause.
                                    let wait = tokio::time::sleep(Duration::from_secs(5));
                                    tokio::pin!(wait);
                                    loop {
                                        tokio::select! {
                                            e = ev_rx.recv() => match e {
                                                Some(Event::Failed(msg)) => return Err(anyhow!(msg)),
                                                Some(_) => continue,
                                                None => break,
                                            },
                                            _ = &mut wait => break,
                                        }
                                    }
                                    return Err(anyhow!("pipelines ended before the final checkpoint"));
                                }
                                return Ok(());
                            }
                        }
                    }
                }
            }
        }
    }
    .await;
    if let Some(p) = progress {
        p.abort();
        progress::clear();
    }
    if let Err(e) = result {
        for h in &handles {
            h.abort();
        }
        return Err(e);
    }
    for h in handles {
        let _ = h.await;
    }
    summary.rows_in = Metrics::total(&metrics.rows_in);
    summary.rows_out = Metrics::total(&metrics.rows_out);
    Ok(summary)
}

/// Runs a task and reports its error as an event.
async fn report(
    ev: mpsc::Sender<Event>,
    what: String,
    fut: impl std::future::Future<Output = Result<()>>,
) {
    if let Err(e) = fut.await {
        let _ = ev.send(Event::Failed(format!("{what}: {e:#}"))).await;
    }
}

fn concat(pending: &mut Vec<RecordBatch>) -> Result<Option<RecordBatch>> {
    match pending.len() {
        0 => Ok(None),
        1 => Ok(pending.pop()),
        _ => {
            let b = arrow::compute::concat_batches(&pending[0].schema(), pending.iter())?;
            pending.clear();
            Ok(Some(b))
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn source_task(
    idx: usize,
    mut source: Box<dyn Source>,
    out: mpsc::Sender<Msg>,
    mut cmds: mpsc::Receiver<SourceCmd>,
    ev: mpsc::Sender<Event>,
    batch_size: usize,
    linger: Duration,
    metrics: Arc<Metrics>,
    table: String,
) -> Result<()> {
    let rows_in = metrics.rows_in.with_label_values(&[&table]);
    let bytes_in = metrics.bytes_in.with_label_values(&[&table]);
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    let mut deadline: Option<tokio::time::Instant> = None;
    let mut exhausted = false;
    let send = |b: RecordBatch| {
        let out = out.clone();
        async move {
            out.send(Msg::Batch(b))
                .await
                .map_err(|_| anyhow!("the pipeline stopped"))
        }
    };
    loop {
        tokio::select! {
            biased;
            cmd = cmds.recv() => match cmd {
                Some(SourceCmd::Trigger(id, is_final)) => {
                    if let Some(b) = concat(&mut pending)? { send(b).await?; }
                    pending_rows = 0;
                    deadline = None;
                    // After the final snapshot nothing more is read, so the final checkpoint covers every row.
                    exhausted |= is_final;
                    let state = source.snapshot_for(id)?;
                    out.send(Msg::Barrier(id, state)).await.map_err(|_| anyhow!("the pipeline stopped"))?;
                }
                Some(SourceCmd::Complete(id)) => source.notify_checkpoint_complete(id).await?,
                Some(SourceCmd::Finish) | None => {
                    if let Some(b) = concat(&mut pending)? { send(b).await?; }
                    source.close().await?;
                    let _ = out.send(Msg::End).await;
                    return Ok(());
                }
            },
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                if let Some(b) = concat(&mut pending)? { send(b).await?; }
                pending_rows = 0;
                deadline = None;
            }
            poll = source.poll_batch(batch_size.saturating_sub(pending_rows).max(1)), if !exhausted => match poll? {
                SourcePoll::Batch(b) => {
                    if b.num_rows() == 0 { continue; }
                    rows_in.inc_by(b.num_rows() as u64);
                    bytes_in.inc_by(b.get_array_memory_size() as u64);
                    pending_rows += b.num_rows();
                    pending.push(b);
                    if pending_rows >= batch_size || linger.is_zero() {
                        if let Some(b) = concat(&mut pending)? { send(b).await?; }
                        pending_rows = 0;
                        deadline = None;
                    } else if deadline.is_none() {
                        deadline = Some(tokio::time::Instant::now() + linger);
                    }
                }
                SourcePoll::End => {
                    if let Some(b) = concat(&mut pending)? { send(b).await?; }
                    pending_rows = 0;
                    deadline = None;
                    exhausted = true;
                    let _ = ev.send(Event::Exhausted(idx)).await;
                }
            },
        }
    }
}

async fn transform_task(
    mut input: mpsc::Receiver<Msg>,
    out: mpsc::Sender<Msg>,
    transform: Arc<Transform>,
    metrics: Arc<Metrics>,
    sink_table: String,
) -> Result<()> {
    let skipped = metrics.skipped.with_label_values(&[&sink_table]);
    while let Some(msg) = input.recv().await {
        let msg = match msg {
            Msg::Batch(b) => {
                let (b, dropped) = transform
                    .apply(b)
                    .inspect_err(|_| metrics.errors.with_label_values(&[&sink_table]).inc())?;
                skipped.inc_by(dropped as u64);
                if b.num_rows() == 0 {
                    continue;
                }
                Msg::Batch(b)
            }
            other => other,
        };
        let end = matches!(msg, Msg::End);
        out.send(msg)
            .await
            .map_err(|_| anyhow!("the pipeline stopped"))?;
        if end {
            break;
        }
    }
    Ok(())
}

async fn sink_task(
    idx: usize,
    mut sink: Box<dyn Sink>,
    mut input: mpsc::Receiver<Msg>,
    mut cmds: mpsc::Receiver<SinkCmd>,
    ev: mpsc::Sender<Event>,
    metrics: Arc<Metrics>,
    table: String,
) -> Result<()> {
    let driven = drive_sink(
        idx,
        sink.as_mut(),
        &mut input,
        &mut cmds,
        &ev,
        &metrics,
        &table,
    )
    .await;
    if driven.is_err() {
        // Release what no checkpoint covers (an open transaction would hold back the topic's readers).
        sink.abort().await;
    }
    driven
}

/// The sink's loop: rows, barriers and checkpoint completions until the end of the input or an error.
async fn drive_sink(
    idx: usize,
    sink: &mut dyn Sink,
    input: &mut mpsc::Receiver<Msg>,
    cmds: &mut mpsc::Receiver<SinkCmd>,
    ev: &mpsc::Sender<Event>,
    metrics: &Metrics,
    table: &str,
) -> Result<()> {
    let rows_out = metrics.rows_out.with_label_values(&[table]);
    let bytes_out = metrics.bytes_out.with_label_values(&[table]);
    let errors = metrics.errors.with_label_values(&[table]);
    sink.open().await.inspect_err(|_| errors.inc())?;
    loop {
        tokio::select! {
            biased;
            Some(SinkCmd::Complete(id)) = cmds.recv() => sink.notify_checkpoint_complete(id).await.inspect_err(|_| errors.inc())?,
            msg = input.recv() => match msg {
                Some(Msg::Batch(b)) => {
                    let (rows, bytes) = (b.num_rows() as u64, b.get_array_memory_size() as u64);
                    sink.write(b).await.inspect_err(|_| errors.inc())?;
                    rows_out.inc_by(rows);
                    bytes_out.inc_by(bytes);
                }
                Some(Msg::Barrier(id, source)) => {
                    let sink_state = sink.flush(id).await.inspect_err(|_| errors.inc())?;
                    let _ = ev.send(Event::Ack { pipeline: idx, id, state: PipelineState { source, sink: sink_state } }).await;
                }
                Some(Msg::End) | None => {
                    sink.close().await.inspect_err(|_| errors.inc())?;
                    let _ = ev.send(Event::Finished(idx)).await;
                    return Ok(());
                }
            },
        }
    }
}
