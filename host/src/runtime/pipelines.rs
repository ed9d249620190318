//! Spawning the job's pipelines: per INSERT, its source subtasks (each with its own transform task) and
//! sink subtasks, wired source `i` → sink `i mod sinks`, restored from the last checkpoint; and the
//! coordinator's commands to all of them.
//!
//! ```text
//!  source 0 ─► transform 0 ─┐
//!  source 2 ─► transform 2 ─┴─► sink 0  (aligns the barriers of its two inputs)
//!  source 1 ─► transform 1 ───► sink 1
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::checkpoint::{CheckpointData, PipelineState};
use super::parallelism::{self, Shape};
use super::stages::{self, Event, SinkAck, SinkCmd, SinkStage, SourceCmd, SourceStage};
use super::telemetry::Metrics;
use crate::connector_api::{
    JobSettings, Parallelism, PipelineContext, PipelineLink, Sink, Source, Subtask,
};
use crate::connectors::values::ValuesSource;
use crate::planner::{PipelinePlan, SourceSpec};

/// Channel capacity between stages, in batches: bounded, so a slow sink slows the source (backpressure).
const CHANNEL_BATCHES: usize = 4;

/// One INSERT as spawned.
struct Spawned {
    id: String,
    shape: Shape,
}

/// The running pipelines: their shapes, the coordinator's command channels (global subtask order), their
/// tasks.
#[derive(Default)]
pub(super) struct Pipelines {
    spawned: BTreeMap<usize, Spawned>,
    /// Global sink subtask index → (plan index, sink subtask index within it).
    sink_units: Vec<(usize, usize)>,
    source_cmds: Vec<mpsc::Sender<SourceCmd>>,
    sink_cmds: Vec<mpsc::Sender<SinkCmd>>,
    pub(super) handles: Vec<JoinHandle<()>>,
}

/// What one pipeline needs from the run.
pub(super) struct RunContext<'a> {
    pub restored: Option<&'a CheckpointData>,
    pub settings: &'a JobSettings,
    pub job_id: &'a str,
    pub metrics: &'a Arc<Metrics>,
    pub ev: &'a mpsc::Sender<Event>,
    /// The job's checkpoint directory, when checkpoints are persisted.
    pub state_dir: Option<std::path::PathBuf>,
}

fn make_source(plan: &PipelinePlan) -> Result<Box<dyn Source>> {
    match &plan.source {
        SourceSpec::Table(t) => t.create_source(),
        SourceSpec::Values(b) => Ok(Box::new(ValuesSource::new(b.clone()))),
    }
}

impl Pipelines {
    pub(super) fn source_count(&self) -> usize {
        self.source_cmds.len()
    }

    pub(super) fn sink_count(&self) -> usize {
        self.sink_cmds.len()
    }

    /// Per pipeline id: its source and sink subtasks.
    pub(super) fn shapes(&self) -> BTreeMap<String, (usize, usize)> {
        self.spawned
            .values()
            .map(|p| (p.id.clone(), (p.shape.sources, p.shape.sinks)))
            .collect()
    }

    /// Decides the plan's subtasks, creates and restores its sources and sinks, and spawns their tasks.
    pub(super) async fn spawn(&mut self, plan: PipelinePlan, run: &RunContext<'_>) -> Result<()> {
        let source_table = plan.source_name();
        let sink_table = plan.sink.name().to_string();
        let read = match &plan.source {
            SourceSpec::Table(t) => t.read_parallelism(),
            SourceSpec::Values(_) => Parallelism::Single,
        };
        let write = plan.sink.write_parallelism();
        let default = run.settings.parallelism;
        let splits = if parallelism::needs_split_count(read, default) {
            make_source(&plan)?
                .split_count()
                .await
                .with_context(|| format!("source '{source_table}' of INSERT {}", plan.id))?
        } else {
            None
        };
        let shape = parallelism::decide(read, write, default, parallelism::cores(), splits);
        let (n, m) = (shape.sources, shape.sinks);
        if n > 1 || m > 1 {
            info!(pipeline = %plan.id, "INSERT #{} reads '{source_table}' with {n} subtask(s) and writes '{sink_table}' with {m}", plan.index);
        }
        if shape.sinks_capped {
            info!(pipeline = %plan.id, "'{sink_table}' writes with {m} subtask(s), the number of source subtasks (a source subtask feeds one sink subtask, so each partition's rows stay in order)");
        }

        // Contexts: the source subtasks feeding sink subtask j share its link.
        let links: Vec<Arc<PipelineLink>> = (0..m).map(|_| Arc::default()).collect();
        let ctx = |subtask: Subtask, link: &Arc<PipelineLink>| PipelineContext {
            job_id: run.job_id.to_string(),
            pipeline_id: plan.id.clone(),
            source_telemetry: run.metrics.telemetry(&source_table),
            sink_telemetry: run.metrics.telemetry(&sink_table),
            partitions: Arc::default(),
            link: link.clone(),
            subtask,
            state_dir: run.state_dir.clone(),
        };
        let mut sources = Vec::with_capacity(n);
        let mut boards = Vec::with_capacity(n);
        for i in 0..n {
            let mut s = make_source(&plan)?;
            let c = ctx(Subtask { index: i, count: n }, &links[i % m]);
            boards.push(c.partitions.clone());
            s.set_context(&c);
            sources.push(s);
        }
        let mut sinks: Vec<Box<dyn Sink>> = Vec::with_capacity(m);
        for (j, link) in links.iter().enumerate() {
            let mut k = plan.sink.create_sink()?;
            k.set_context(&ctx(Subtask { index: j, count: m }, link));
            k.check_pipeline()?;
            sinks.push(k);
        }
        if let Some(d) = run.restored {
            match d.pipelines.get(&plan.id) {
                Some(st) => restore(&plan.id, st, &mut sources, &mut sinks)?,
                None => {
                    warn!(pipeline = %plan.id, "the checkpoint has no state for this INSERT; it starts fresh")
                }
            }
        }
        publish(&plan, shape, boards, run);
        self.start(&plan, shape, sources, sinks, run);
        self.spawned.insert(
            plan.index,
            Spawned {
                id: plan.id.clone(),
                shape,
            },
        );
        Ok(())
    }

    /// Spawns the tasks: source `i` → transform `i` → sink `i mod m`.
    fn start(
        &mut self,
        plan: &PipelinePlan,
        shape: Shape,
        sources: Vec<Box<dyn Source>>,
        sinks: Vec<Box<dyn Sink>>,
        run: &RunContext<'_>,
    ) {
        let (n, m) = (shape.sources, shape.sinks);
        let idx = plan.index;
        let source_table = plan.source_name();
        let sink_table = plan.sink.name().to_string();
        let of = |i: usize, count: usize| {
            if count > 1 {
                format!(", subtask {} of {count}", i + 1)
            } else {
                String::new()
            }
        };
        let (opened_tx, opened_rx) = watch::channel(0usize);
        let opened_tx = Arc::new(opened_tx);
        let mut sink_inputs: Vec<Vec<(usize, mpsc::Receiver<stages::Msg>)>> =
            (0..m).map(|_| Vec::new()).collect();
        for (i, source) in sources.into_iter().enumerate() {
            let (c1_tx, c1_rx) = mpsc::channel(CHANNEL_BATCHES);
            let (c2_tx, c2_rx) = mpsc::channel(CHANNEL_BATCHES);
            sink_inputs[i % m].push((i, c2_rx));
            let (sc_tx, sc_rx) = mpsc::channel(8);
            let stage = SourceStage {
                idx: self.source_cmds.len(),
                batch_size: run.settings.batch_size,
                linger: run.settings.batch_linger,
                metrics: run.metrics.clone(),
                table: source_table.clone(),
                sinks_opened: opened_rx.clone(),
                sinks: m,
            };
            self.source_cmds.push(sc_tx);
            self.handles.push(tokio::spawn(stages::report(
                run.ev.clone(),
                format!("source '{source_table}' (INSERT #{idx}{})", of(i, n)),
                stages::source_task(stage, source, c1_tx, sc_rx, run.ev.clone()),
            )));
            self.handles.push(tokio::spawn(stages::report(
                run.ev.clone(),
                format!("transform of INSERT #{idx} into '{sink_table}'{}", of(i, n)),
                stages::transform_task(
                    c1_rx,
                    c2_tx,
                    plan.transform.clone(),
                    run.metrics.clone(),
                    sink_table.clone(),
                ),
            )));
        }
        for (j, (sink, inputs)) in sinks.into_iter().zip(sink_inputs).enumerate() {
            let (kc_tx, kc_rx) = mpsc::channel(8);
            let stage = SinkStage {
                idx: self.sink_cmds.len(),
                inputs,
                opened: opened_tx.clone(),
                metrics: run.metrics.clone(),
                table: sink_table.clone(),
            };
            self.sink_cmds.push(kc_tx);
            self.sink_units.push((idx, j));
            self.handles.push(tokio::spawn(stages::report(
                run.ev.clone(),
                format!("sink '{sink_table}' (INSERT #{idx}{})", of(j, m)),
                stages::sink_task(stage, sink, kc_rx, run.ev.clone()),
            )));
        }
    }

    /// Per pipeline id, the states the sink subtasks acknowledged a checkpoint with.
    pub(super) fn states(&self, acks: BTreeMap<usize, SinkAck>) -> BTreeMap<String, PipelineState> {
        let mut out = BTreeMap::new();
        for (unit, ack) in acks {
            let (plan, j) = self.sink_units[unit];
            let p = &self.spawned[&plan];
            let st = out.entry(p.id.clone()).or_insert_with(|| PipelineState {
                sources: vec![serde_json::Value::Null; p.shape.sources],
                sinks: vec![serde_json::Value::Null; p.shape.sinks],
            });
            st.sinks[j] = ack.sink;
            for (i, v) in ack.sources {
                st.sources[i] = v;
            }
        }
        out
    }

    /// Sends the coordinator's trigger, if any, to every source.
    pub(super) fn trigger(&self, trigger: Option<super::coordinator::Trigger>) {
        let Some(t) = trigger else { return };
        for c in &self.source_cmds {
            let _ = c.try_send(SourceCmd::Trigger(t.id, t.is_final));
        }
    }

    /// Checkpoint `id` timed out: sinks stop aligning its barriers.
    pub(super) fn abandon(&self, id: u64) {
        for c in &self.sink_cmds {
            let _ = c.try_send(SinkCmd::Abandon(id));
        }
    }

    /// Checkpoint `id` is durable: sources commit offsets, sinks commit transactions.
    pub(super) async fn complete(&self, id: u64) {
        for c in &self.source_cmds {
            let _ = c.send(SourceCmd::Complete(id)).await;
        }
        for c in &self.sink_cmds {
            let _ = c.send(SinkCmd::Complete(id)).await;
        }
    }

    /// After the final checkpoint: sources stop and the pipelines drain.
    pub(super) async fn finish(&self) {
        for c in &self.source_cmds {
            let _ = c.send(SourceCmd::Finish).await;
        }
    }
}

/// Tells the status what the INSERT runs: its tables (and the labels they add to their series), its
/// subtasks and their partition boards.
fn publish(
    plan: &PipelinePlan,
    shape: Shape,
    boards: Vec<Arc<crate::connector_api::PartitionBoard>>,
    run: &RunContext<'_>,
) {
    let status = &run.metrics.status;
    let source_connector = match &plan.source {
        SourceSpec::Table(t) => {
            status.set_table_labels(t.name(), t.metric_labels());
            t.connector.clone()
        }
        SourceSpec::Values(_) => "values".to_owned(),
    };
    status.set_table_labels(plan.sink.name(), plan.sink.metric_labels());
    status.add_insert(super::status::InsertInfo {
        id: plan.id.clone(),
        index: plan.index,
        source_table: plan.source_name(),
        source_connector,
        sink_table: plan.sink.name().to_owned(),
        sink_connector: plan.sink.connector.clone(),
        source_subtasks: shape.sources,
        sink_subtasks: shape.sinks,
        boards,
    });
}

/// Hands the checkpoint's states to this run's subtasks: every source subtask sees all the last run's
/// source states (each keeps the splits it owns now); sink subtask `j` gets the last run's sink `j` when the
/// number of sink subtasks is unchanged, otherwise sink subtask 0 gets them all (to settle what they left).
fn restore(
    pipeline: &str,
    st: &PipelineState,
    sources: &mut [Box<dyn Source>],
    sinks: &mut [Box<dyn Sink>],
) -> Result<()> {
    for s in sources.iter_mut() {
        s.restore_subtasks(st.sources.clone())
            .with_context(|| format!("restoring the source of INSERT {pipeline}"))?;
    }
    let same = st.sinks.len() == sinks.len();
    for (j, k) in sinks.iter_mut().enumerate() {
        let mine = match (same, j) {
            (true, _) => vec![st.sinks[j].clone()],
            (false, 0) => st.sinks.clone(),
            (false, _) => Vec::new(),
        };
        k.restore_subtasks(mine)
            .with_context(|| format!("restoring the sink of INSERT {pipeline}"))?;
    }
    Ok(())
}
