//! The stages of one pipeline as tokio tasks: the source task (polls, batches by size and linger, injects
//! barriers), the transform task (DataFusion expressions, cast to the sink schema) and the sink task (writes,
//! flushes on a barrier and acknowledges). They talk to the coordinator loop in `mod.rs` through the messages
//! below.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, anyhow};
use arrow::record_batch::RecordBatch;
use tokio::sync::mpsc;

use super::checkpoint::PipelineState;
use super::metrics::Metrics;
use crate::connector_api::{Sink, Source, SourcePoll};
use crate::planner::Transform;

/// Down a pipeline's channels: rows, a checkpoint barrier with the source's snapshot, the end.
pub(super) enum Msg {
    Batch(RecordBatch),
    Barrier(u64, serde_json::Value),
    End,
}

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
}

/// Tasks → coordinator.
pub(super) enum Event {
    Ack {
        pipeline: usize,
        id: u64,
        state: PipelineState,
    },
    Exhausted(usize),
    Finished(usize),
    Failed(String),
}

/// Runs a task and reports its error as an event.
pub(super) async fn report(
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

/// Adaptive hand-off: the longest rows wait while the source keeps reporting more buffered rows
/// without the batch filling (a bound, not a linger: a source with buffered rows returns them at once).
const ADAPTIVE_CEILING: Duration = Duration::from_millis(20);

/// A source task's settings: which pipeline, how rows are batched, where they are counted.
pub(super) struct SourceStage {
    pub idx: usize,
    pub batch_size: usize,
    /// `None`: adaptive (hand on as soon as the source has nothing more buffered).
    pub linger: Option<Duration>,
    pub metrics: Arc<Metrics>,
    pub table: String,
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
    } = stage;
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
            .map_err(|_| anyhow!("the pipeline stopped"))?;
        if end {
            break;
        }
    }
    Ok(())
}

pub(super) async fn sink_task(
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
                    if input.is_empty() {
                        sink.input_idle().await.inspect_err(|_| errors.inc())?;
                    }
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

#[cfg(test)]
#[path = "stages_tests.rs"]
mod tests;
