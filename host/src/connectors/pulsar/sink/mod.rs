//! The Pulsar sink: Arrow batches → format plugins (value, key) → router plugin → one producer per
//! partition, with at-least-once flushes at checkpoints and failed sends never silently lost.
//!
//! Files: [`write`] (rows → encoded messages: encoders, router, metadata columns), [`txn`] (exactly-once:
//! transactions per checkpoint, recovery, the linked source's acknowledgements), [`journal`] (without a
//! linked source: the transactions that may be open, in the state directory), [`first_write`] (a
//! topic's first transactional write, ADR 0026).

pub mod first_write;
mod journal;
mod txn;
mod write;

use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use base64::Engine as _;
use magnetar::{PulsarClient, Transaction};
use tracing::{error, info, warn};

use super::config::PulsarTableConfig;
pub use super::config::Semantic;
use super::txn_acks::TxnAcks;
use crate::connector_api::telemetry::SINK_DROPPED;
use crate::connector_api::{PipelineContext, Sink};
use crate::plugins::PulsarSchema;
use crate::plugins::catalog::PluginCatalog;
use crate::pulsar::topics::TopicName;
use crate::pulsar::transactions::TxnRef;
use crate::pulsar::writer::{MessageFlags, TopicWriter, WriterConfig};

/// What the sink needs to connect.
#[derive(Clone)]
pub struct SinkSpec {
    /// The table's configuration, decoded once at validation (`cfg.sink`: what a sink writes with).
    pub cfg: Arc<PulsarTableConfig>,
    /// The schema type to register on the topic (from the value format's manifest).
    pub topic_schema: Option<PulsarSchema>,
    pub topic: TopicName,
    pub schema: SchemaRef,
    pub router: Option<(String, Vec<(String, String)>)>,
    pub plugins: Arc<PluginCatalog>,
}

struct Running {
    #[allow(dead_code)]
    client: PulsarClient,
    writer: TopicWriter,
    dead_letter: Option<TopicWriter>,
    codecs: Option<Codecs>,
}

pub use txn::TxnState;
pub(crate) use write::make_codecs;
use write::{Codecs, now_ms, prepare};

pub struct PulsarSink {
    spec: SinkSpec,
    running: Option<Running>,
    dropped: u64,
    /// `pulsar_connect_sink_dropped_total{table}` (set with the pipeline context).
    dropped_metric: Option<prometheus::IntCounter>,
    written: u64,
    /// Exactly-once: the open transaction of the current checkpoint period.
    txn: Option<Transaction>,
    /// Exactly-once: pre-committed transactions by checkpoint id.
    pending: std::collections::VecDeque<(u64, Transaction)>,
    /// Exactly-once: what a restored checkpoint says to commit and abort (done on connect), for every
    /// sink subtask of the last run this subtask settles.
    recover: Vec<TxnState>,
    /// Which of the INSERT's sink subtasks this is.
    subtask: crate::connector_api::Subtask,
    /// Exactly-once with a linked Pulsar source: its acknowledgements go into the transactions.
    txn_acks: Option<Arc<TxnAcks>>,
    /// Exactly-once without a linked source, checkpoints persisted: the transactions that may be open.
    journal: Option<Arc<journal::TxnJournal>>,
    /// Which earlier runs' journals this subtask settles at start.
    settle: journal::Settle,
}

impl PulsarSink {
    pub fn new(spec: SinkSpec) -> Self {
        PulsarSink {
            spec,
            running: None,
            dropped: 0,
            dropped_metric: None,
            written: 0,
            txn: None,
            pending: std::collections::VecDeque::new(),
            recover: Vec::new(),
            subtask: crate::connector_api::Subtask::SOLE,
            txn_acks: None,
            journal: None,
            settle: journal::Settle::Fresh,
        }
    }

    async fn running(&mut self) -> Result<&mut Running> {
        if self.running.is_none() {
            let spec = self.spec.clone();
            let cfg = &spec.cfg;
            let client = crate::pulsar::connect(&cfg.client).await?;
            let mut wc = spec.cfg.sink.writer.clone();
            if self.subtask.count > 1 {
                // One producer name per subtask (the broker refuses a second producer of one name).
                wc.producer_name = wc
                    .producer_name
                    .map(|n| format!("{n}-{}", self.subtask.index));
            }
            if let Some(kind) = spec.topic_schema {
                wc.schema = Some(
                    crate::connectors::pulsar::schema::pulsar_schema(
                        kind,
                        &cfg.layout.value_schema,
                    )
                    .with_context(|| format!("table '{}'", cfg.table))?,
                );
            }
            let mut writer = TopicWriter::open(&client, spec.topic.clone(), &wc)
                .await
                .with_context(|| format!("table '{}': opening the producers", cfg.table))?;
            // Failed rows of any table go to the dead-letter topic as bytes, under a broker-chosen name.
            let dead_letter_config = WriterConfig {
                producer_name: None,
                schema: None,
                ..spec.cfg.sink.writer.clone()
            };
            let dead_letter = match &spec.cfg.sink.dead_letter {
                Some(t) => Some(
                    TopicWriter::open(&client, t.clone(), &dead_letter_config)
                        .await
                        .with_context(|| {
                            format!("table '{}': opening the dead-letter topic {t}", cfg.table)
                        })?,
                ),
                None => None,
            };
            if !cfg.sink.fail_on_write {
                writer.keep_failed_messages(true);
            }
            let codecs = {
                let spec = spec.clone();
                tokio::task::spawn_blocking(move || make_codecs(&spec))
                    .await
                    .map_err(|e| anyhow!("loading the plugins: {e}"))??
            };
            info!(table = %cfg.table, topic = %spec.topic, partitions = writer.partitions(), "writing");
            self.running = Some(Running {
                client,
                writer,
                dead_letter,
                codecs: Some(codecs),
            });
        }
        Ok(self.running.as_mut().expect("set above"))
    }

    /// Exactly-once: the first transactional write to each partition, alone ([`first_write`]).
    async fn first_writes(&mut self) -> Result<()> {
        let spec = self.spec.clone();
        // The table's own admin URL, else the linked source's (with that table's client settings).
        let admin_of = match &spec.cfg.admin_url {
            Some(url) => Some((url.clone(), spec.cfg.clone())),
            None => self
                .txn_acks
                .as_ref()
                .and_then(|a| a.owner())
                .map(|o| (o.admin_url.clone(), o.cfg.clone())),
        };
        let table = &spec.cfg.table;
        let client = crate::pulsar::connect(&spec.cfg.client).await?;
        let written = async {
            let partitions = crate::pulsar::writer::partition_targets(&client, &spec.topic)
                .await
                .with_context(|| format!("table '{table}'"))?;
            let admin = admin_of.as_ref().map(|(url, cfg)| first_write::Admin {
                url,
                config: &cfg.client,
            });
            first_write::ensure(table, &client, &partitions, admin).await
        }
        .await;
        client.close().await;
        written
    }

    /// Routes failed sends (fail-on-write = false): logged, counted, and written to the dead-letter topic
    /// when there is one. With fail-on-write = true they stay in the writer and fail the next flush.
    async fn handle_failures(&mut self) -> Result<()> {
        if self.spec.cfg.sink.fail_on_write {
            return Ok(());
        }
        let table = self.spec.cfg.table.clone();
        let Some(run) = self.running.as_mut() else {
            return Ok(());
        };
        let failures = run.writer.take_failures();
        if failures.is_empty() {
            return Ok(());
        }
        self.dropped += failures.len() as u64;
        if let Some(m) = &self.dropped_metric {
            m.inc_by(failures.len() as u64);
        }
        for f in failures {
            error!(table = %table, topic = %f.topic, "send failed, row not written to the table's topic (fail-on-write = false): {}", f.reason);
            if let (Some(dlq), Some(mut m)) = (run.dead_letter.as_mut(), f.message) {
                m.properties
                    .push(("pulsar-connect.error".to_owned(), f.reason.clone()));
                m.properties
                    .push(("pulsar-connect.topic".to_owned(), f.topic.clone()));
                dlq.send_keyed(0, m, f.flags).await?;
            }
        }
        if let Some(dlq) = run.dead_letter.as_mut() {
            dlq.flush()
                .await
                .with_context(|| format!("table '{table}': writing to the dead-letter topic"))?;
        }
        warn!(table = %table, dropped_total = self.dropped, "rows whose send failed so far");
        Ok(())
    }
}

#[async_trait]
impl Sink for PulsarSink {
    fn set_context(&mut self, ctx: &PipelineContext) {
        self.dropped_metric = Some(ctx.sink_telemetry.counter(SINK_DROPPED));
        self.subtask = ctx.subtask;
        if self.spec.cfg.sink.semantic == Semantic::ExactlyOnce
            && let Some(acks) = ctx.link.get::<TxnAcks>()
        {
            acks.claim(self.spec.cfg.sink.txn_timeout);
            acks.set_record_topic(self.spec.topic.clone());
            info!(table = %self.spec.cfg.table, "the Pulsar source's acknowledgements go into this sink's transactions");
            self.txn_acks = Some(acks);
        }
        if self.spec.cfg.sink.semantic == Semantic::ExactlyOnce && self.txn_acks.is_none() {
            self.journal = match &ctx.state_dir {
                Some(dir) => Some(Arc::new(journal::TxnJournal::new(
                    dir,
                    &ctx.pipeline_id,
                    &self.spec.cfg.table,
                    ctx.subtask,
                    crate::pulsar::reader::consumer_name(),
                ))),
                None => None,
            };
        }
    }

    /// Connects at start, so a wrong URL, a missing topic or an incompatible topic schema fails the job
    /// before any row is read; exactly-once also settles the restored checkpoint's transactions here.
    async fn open(&mut self) -> Result<()> {
        let opened = async {
            if self.spec.cfg.sink.semantic == Semantic::ExactlyOnce {
                if self.txn_acks.is_none() && self.journal.is_none() {
                    warn!(table = %self.spec.cfg.table, "exactly-once without a state directory: a transaction open when the process dies is found by nobody and holds the topic's readers back until 'transaction-timeout' ends it");
                }
                // Before the sink's producers exist: a stuck partition is unloaded, which makes every
                // producer of it re-attach.
                self.first_writes().await?;
            }
            self.running().await?;
            if self.spec.cfg.sink.semantic == Semantic::ExactlyOnce {
                self.recover().await?;
            }
            Ok(())
        }
        .await;
        if let Some(acks) = &self.txn_acks {
            acks.set_recovered(opened.as_ref().map(|_| ()).map_err(|e| format!("{e:#}")));
        }
        opened
    }

    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let exactly_once = self.spec.cfg.sink.semantic == Semantic::ExactlyOnce;
        if exactly_once {
            // `open` connected and settled the restored checkpoint's transactions.
            if self.txn.is_none() {
                self.txn = Some(self.open_txn().await?);
            }
        }
        let txn = self.txn.map(|t| t.id());
        let spec = self.spec.clone();
        let delay = spec.cfg.sink.send_delay_ms;
        let run = self.running().await?;
        if spec.cfg.sink.fail_on_write && run.writer.has_failures() {
            // Fail fast: the first failure is reported by the flush.
            run.writer.flush().await?;
        }
        let partitions = run.writer.partitions();
        let mut codecs = run
            .codecs
            .take()
            .ok_or_else(|| anyhow!("internal: codecs missing"))?;
        let (codecs, prepared) = {
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || {
                let prepared = prepare(&mut codecs, &spec, &batch, partitions);
                (codecs, prepared)
            })
            .await
            .map_err(|e| anyhow!("encoding task failed: {e}"))?
        };
        run.codecs = Some(codecs);
        let mut prepared = prepared?;
        let now = if delay > 0 { now_ms() } else { 0 };
        let messages = std::mem::take(&mut prepared.messages);
        let written = messages.len() as u64;
        for (i, mut m) in messages.into_iter().enumerate() {
            if delay > 0 {
                m = m.deliver_after_ms(now, delay);
            }
            if let Some(t) = txn {
                m = m.txn(t);
            }
            // The key format's bytes go as Java's `keyBytes` sends them, for every key format (what
            // the Flink connector does): base64 text flagged `partition_key_b64_encoded`, which
            // readers that honour the flag (Java's `getKeyBytes`, our source) turn back into the bytes.
            if let Some(keys) = &prepared.keys {
                m = m.key(base64::engine::general_purpose::STANDARD.encode(keys.payload(i)));
            }
            let p = prepared.partitions.as_ref().map_or(0, |p| p[i]);
            let flags = MessageFlags {
                key_b64: prepared.keys.is_some(),
                null_value: prepared.is_tombstone(i),
            };
            run.writer.send_keyed(p, m, flags).await?;
        }
        self.written += written;
        self.handle_failures().await
    }

    async fn input_idle(&mut self) -> Result<()> {
        if let Some(run) = &mut self.running {
            run.writer.send_open_batches();
        }
        Ok(())
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        self.restore_subtasks(vec![state])
    }

    /// The transactions every sink subtask of the last run recorded (the runtime hands them all to one
    /// subtask when the number of sink subtasks changed).
    fn restore_subtasks(&mut self, states: Vec<serde_json::Value>) -> Result<()> {
        if self.spec.cfg.sink.semantic != Semantic::ExactlyOnce {
            return Ok(());
        }
        self.settle = journal::Settle::Restored(states.len());
        for state in states.into_iter().filter(|s| !s.is_null()) {
            self.recover.push(
                serde_json::from_value(state)
                    .context("the checkpoint's Pulsar sink state is not readable")?,
            );
        }
        Ok(())
    }

    async fn flush(&mut self, id: u64) -> Result<serde_json::Value> {
        let semantic = self.spec.cfg.sink.semantic;
        if semantic == Semantic::ExactlyOnce {
            let table = self.spec.cfg.table.clone();
            if let Some(run) = self.running.as_mut() {
                // Pre-commit: every send of the period acknowledged (inside its transaction).
                run.writer.flush().await.map_err(|e| {
                    e.context(format!(
                        "table '{table}': the checkpoint's transaction could not be written"
                    ))
                })?;
            }
            if let Some(acks) = self.txn_acks.clone() {
                self.ack_source_in_txn(&acks, id).await?;
            }
            let current = self.txn.take();
            // Pending before the next one opens: the owner record lists both (ADR 0023).
            if let Some(t) = current {
                self.pending.push_back((id, t));
            }
            let next = self.open_txn().await?;
            self.txn = Some(next);
            return Ok(serde_json::to_value(TxnState {
                commit: current.map(|t| TxnRef(t.id()).to_string()),
                abort: Some(TxnRef(next.id()).to_string()),
            })?);
        }
        let flush_all = self.spec.cfg.sink.flush_on_checkpoint;
        let table = self.spec.cfg.table.clone();
        if let Some(run) = self.running.as_mut() {
            match semantic {
                Semantic::None => run.writer.flush_producers().await?,
                _ if !flush_all => run.writer.flush_producers().await?,
                _ => {
                    let r = run.writer.flush().await;
                    if let Err(e) = r
                        && self.spec.cfg.sink.fail_on_write
                    {
                        return Err(e.context(format!(
                            "table '{table}': the checkpoint fails because sends failed (fail-on-write = true)"
                        )));
                    }
                }
            }
        }
        self.handle_failures().await?;
        Ok(serde_json::Value::Null)
    }

    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        if let Some(codecs) = self.running.as_mut().and_then(|r| r.codecs.as_mut()) {
            codecs.checkpoint_completed();
        }
        let table = self.spec.cfg.table.clone();
        while self.pending.front().is_some_and(|(cid, _)| *cid <= id) {
            let Some((cid, txn)) = self.pending.pop_front() else {
                break;
            };
            let Some(run) = self.running.as_ref() else {
                break;
            };
            txn::commit_checkpoint_txn(&table, &self.spec.cfg.client, &run.client, txn, cid)
                .await?;
        }
        Ok(())
    }

    async fn abort(&mut self) {
        let table = self.spec.cfg.table.clone();
        if let (Some(txn), Some(run)) = (self.txn.take(), self.running.as_ref()) {
            // Opened after the last checkpoint. Pre-committed transactions stay: their checkpoint may
            // complete, and a restart from it commits them.
            match run.client.abort_transaction(txn).await {
                Ok(_) => {
                    info!(table = %table, txn = %TxnRef(txn.id()), "aborted the open transaction of the failed sink")
                }
                Err(e) => {
                    warn!(table = %table, txn = %TxnRef(txn.id()), "aborting the open transaction of the failed sink: {e} (the broker aborts it at its timeout)")
                }
            }
        }
    }

    async fn close(&mut self) -> Result<()> {
        let table = self.spec.cfg.table.clone();
        if let (Some(txn), Some(run)) = (self.txn.take(), self.running.as_ref()) {
            // Opened after the last checkpoint: nothing in it is covered by a checkpoint.
            run.client.abort_transaction(txn).await.ok();
        }
        let semantic = self.spec.cfg.sink.semantic;
        if let Some(run) = self.running.as_mut() {
            let flushed = if semantic == Semantic::None {
                run.writer.flush_producers().await
            } else {
                run.writer.flush().await
            };
            if let Err(e) = flushed
                && self.spec.cfg.sink.fail_on_write
            {
                return Err(e.context(format!("table '{table}': closing the sink")));
            }
        }
        self.handle_failures().await?;
        if let Some(run) = self.running.take() {
            run.writer.close().await.ok();
            if let Some(d) = run.dead_letter {
                d.close().await.ok();
            }
        }
        info!(table = %table, rows = self.written, dropped = self.dropped, "sink closed");
        Ok(())
    }
}
