//! The stages of one pipeline subtask as tokio tasks: the source task (polls, batches by size and linger,
//! injects barriers), the transform task (DataFusion expressions, cast to the sink schema) and the sink task
//! (writes, flushes once the barriers of all its inputs arrived, and acknowledges). They talk to the
//! coordinator loop in `mod.rs` through the messages below.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use tokio::sync::{mpsc, watch};

pub(super) use super::align::Msg;
use super::align::{Delivery, Inputs};
use super::telemetry::Metrics;
use crate::connector_api::{Sink, Source, SourcePoll, changelog};
use crate::planner::Transform;

/// Down a pipeline's channels: rows, a checkpoint barrier with the source's snapshot, the end.
/// A stage could not hand its output on because the stage after it ended: a consequence, never the cause
/// (the stage that ended reports its own failure, which the runtime prefers).
#[derive(Debug, thiserror::Error)]
#[error("the pipeline stopped")]
pub(super) struct PipelineStopped;

/// Coordinator → source task.
pub(super) enum SourceCmd {
    /// Take checkpoint `id`; when the flag is set it is the final one: stop reading after the snapshot.
    Trigger(u64, bool),
    Complete(u64),
    Finish,
}

/// Coordinator → sink task.
pub(super) enum SinkCmd {
    Complete(u64),
    /// The checkpoint timed out: stop aligning its barriers.
    Abandon(u64),
}

/// What a sink subtask acknowledges a checkpoint with: the states of the source subtasks feeding it (by
/// their index within the pipeline) and its own.
#[derive(Debug)]
pub(super) struct SinkAck {
    pub sources: Vec<(usize, serde_json::Value)>,
    pub sink: serde_json::Value,
}

/// Tasks → coordinator. Sources and sinks are numbered over all pipelines (global subtask indices).
pub(super) enum Event {
    Ack {
        sink: usize,
        id: u64,
        state: SinkAck,
    },
    Exhausted(usize),
    Finished(usize),
    /// A task's error, with its cause chain (a [`crate::connector_api::Rewind`] in it restarts the job).
    Failed(anyhow::Error),
}

/// How many of a pipeline's sink subtasks have opened: its source subtasks read only once all did (an
/// exactly-once sink settles the last run's transactions in `open`, before any source reads).
pub(super) type SinksOpened = watch::Receiver<usize>;

/// Runs a task and reports its error as an event.
pub(super) async fn report(
    ev: mpsc::Sender<Event>,
    what: String,
    fut: impl std::future::Future<Output = Result<()>>,
) {
    if let Err(e) = fut.await {
        let _ = ev.send(Event::Failed(e.context(what))).await;
    }
}

fn concat(pending: &mut Vec<RecordBatch>) -> Result<Option<RecordBatch>> {
    match pending.len() {
        0 => Ok(None),
        1 => Ok(pending.pop()),
        _ => {
            let b = changelog::concat(pending)?;
            pending.clear();
            Ok(Some(b))
        }
    }
}

/// Adaptive hand-off: the longest rows wait while the source keeps reporting more buffered rows
/// without the batch filling (a bound, not a linger: a source with buffered rows returns them at once).
const ADAPTIVE_CEILING: Duration = Duration::from_millis(20);

/// A source task's settings: which subtask, how rows are batched, where they are counted.
pub(super) struct SourceStage {
    /// Global source subtask index.
    pub idx: usize,
    pub batch_size: usize,
    /// `None`: adaptive (hand on as soon as the source has nothing more buffered).
    pub linger: Option<Duration>,
    pub metrics: Arc<Metrics>,
    pub table: String,
    /// Reading starts when this reaches `sinks`.
    pub sinks_opened: SinksOpened,
    pub sinks: usize,
}

pub(super) async fn source_task(
    stage: SourceStage,
    mut source: Box<dyn Source>,
    out: mpsc::Sender<Msg>,
    mut cmds: mpsc::Receiver<SourceCmd>,
    ev: mpsc::Sender<Event>,
) -> Result<()> {
    let SourceStage {
        idx,
        batch_size,
        linger,
        metrics,
        table,
        mut sinks_opened,
        sinks,
    } = stage;
    let mut ready = false;
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
                .map_err(|_| anyhow::Error::new(PipelineStopped))
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
                    out.send(Msg::Barrier(id, state)).await.map_err(|_| anyhow::Error::new(PipelineStopped))?;
                }
                Some(SourceCmd::Complete(id)) => source.notify_checkpoint_complete(id).await?,
                Some(SourceCmd::Finish) | None => {
                    if let Some(b) = concat(&mut pending)? { send(b).await?; }
                    source.close().await?;
                    let _ = out.send(Msg::End).await;
                    return Ok(());
                }
            },
            // Err: every sink task ended (a failed one fails the job anyway).
            _ = async { sinks_opened.wait_for(|n| *n >= sinks).await.map(|_| ()) }, if !ready => ready = true,
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                if let Some(b) = concat(&mut pending)? { send(b).await?; }
                pending_rows = 0;
                deadline = None;
            }
            poll = source.poll_batch(batch_size.saturating_sub(pending_rows).max(1)), if ready && !exhausted => match poll? {
                SourcePoll::Batch(b) => {
                    if b.num_rows() == 0 { continue; }
                    rows_in.inc_by(b.num_rows() as u64);
                    bytes_in.inc_by(b.get_array_memory_size() as u64);
                    pending_rows += b.num_rows();
                    pending.push(b);
                    let hand_on = pending_rows >= batch_size
                        || match linger {
                            None => !source.has_buffered(),
                            Some(l) => l.is_zero(),
                        };
                    if hand_on {
                        if let Some(b) = concat(&mut pending)? { send(b).await?; }
                        pending_rows = 0;
                        deadline = None;
                    } else if deadline.is_none() {
                        deadline = Some(tokio::time::Instant::now() + linger.unwrap_or(ADAPTIVE_CEILING));
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

pub(super) async fn transform_task(
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
            .map_err(|_| anyhow::Error::new(PipelineStopped))?;
        if end {
            break;
        }
    }
    Ok(())
}

/// A sink task's settings: which subtask, its inputs, where it is counted.
pub(super) struct SinkStage {
    /// Global sink subtask index.
    pub idx: usize,
    /// (the source subtask's index within the pipeline, its transform's channel).
    pub inputs: Vec<(usize, mpsc::Receiver<Msg>)>,
    /// Counts this subtask in once it opened.
    pub opened: Arc<watch::Sender<usize>>,
    pub metrics: Arc<Metrics>,
    pub table: String,
}

pub(super) async fn sink_task(
    stage: SinkStage,
    mut sink: Box<dyn Sink>,
    mut cmds: mpsc::Receiver<SinkCmd>,
    ev: mpsc::Sender<Event>,
) -> Result<()> {
    let driven = drive_sink(stage, sink.as_mut(), &mut cmds, &ev).await;
    if driven.is_err() {
        // Release what no checkpoint covers (an open transaction would hold back the topic's readers).
        sink.abort().await;
    }
    driven
}

/// The sink's loop: rows, aligned barriers and checkpoint completions until the end of every input or an
/// error.
async fn drive_sink(
    stage: SinkStage,
    sink: &mut dyn Sink,
    cmds: &mut mpsc::Receiver<SinkCmd>,
    ev: &mpsc::Sender<Event>,
) -> Result<()> {
    let SinkStage {
        idx,
        inputs,
        opened,
        metrics,
        table,
    } = stage;
    let rows_out = metrics.rows_out.with_label_values(&[&table]);
    let bytes_out = metrics.bytes_out.with_label_values(&[&table]);
    let errors = metrics.errors.with_label_values(&[&table]);
    sink.open().await.inspect_err(|_| errors.inc())?;
    opened.send_modify(|n| *n += 1);
    let mut inputs = Inputs::new(inputs);
    loop {
        tokio::select! {
            biased;
            Some(cmd) = cmds.recv() => match cmd {
                SinkCmd::Complete(id) => sink.notify_checkpoint_complete(id).await.inspect_err(|_| errors.inc())?,
                SinkCmd::Abandon(id) => inputs.abandon(id),
            },
            delivery = inputs.next() => match delivery {
                Delivery::Batch(b) => {
                    let (rows, bytes) = (b.num_rows() as u64, b.get_array_memory_size() as u64);
                    sink.write(b).await.inspect_err(|_| errors.inc())?;
                    rows_out.inc_by(rows);
                    bytes_out.inc_by(bytes);
                    if inputs.is_empty() {
                        sink.input_idle().await.inspect_err(|_| errors.inc())?;
                    }
                }
                Delivery::Aligned { id, sources } => {
                    let sink_state = sink.flush(id).await.inspect_err(|_| errors.inc())?;
                    let state = SinkAck { sources, sink: sink_state };
                    let _ = ev.send(Event::Ack { sink: idx, id, state }).await;
                }
                Delivery::End => {
                    sink.close().await.inspect_err(|_| errors.inc())?;
                    let _ = ev.send(Event::Finished(idx)).await;
                    return Ok(());
                }
            },
        }
    }
}

#[cfg(test)]
#[path = "stages_tests.rs"]
mod tests;
