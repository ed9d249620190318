//! The Pulsar sink: Arrow batches → format plugins (value, key) → router plugin → one producer per
//! partition, with at-least-once flushes at checkpoints and failed sends never silently lost.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow, bail};
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use async_trait::async_trait;
use base64::Engine as _;
use magnetar::{OutgoingMessage, PulsarClient, Transaction};
use serde::{Deserialize, Serialize};
use tracing::{error, info, warn};

pub use super::config::Semantic;
use super::config::{FormatSpec, PulsarTableConfig};
use super::layout::ColumnSource;
use super::txn_acks::TxnAcks;
use crate::connectors::{PipelineContext, Sink};
use crate::plugins::catalog::PluginCatalog;
use crate::plugins::messages::PropertyBatchBuilder;
use crate::plugins::{Encoded, Encoder, KeyBatchBuilder, Kind, PulsarSchema, Router};
use crate::pulsar::topics::TopicName;
use crate::pulsar::transactions::{EndOutcome, TxnCoordinator, TxnRef};
use crate::pulsar::writer::{TopicWriter, WriterConfig};

/// What the sink needs to connect.
#[derive(Clone)]
pub struct SinkSpec {
    /// The table's configuration, decoded once at validation (`cfg.sink`: what a sink writes with).
    pub cfg: Arc<PulsarTableConfig>,
    /// Producer settings (batching, compression, name, timeouts).
    pub writer: WriterConfig,
    /// The schema type to register on the topic (from the value format's manifest).
    pub topic_schema: Option<PulsarSchema>,
    pub topic: TopicName,
    pub schema: SchemaRef,
    pub semantic: Semantic,
    pub router: Option<(String, Vec<(String, String)>)>,
    pub dead_letter: Option<TopicName>,
    pub plugins: Arc<PluginCatalog>,
}

pub(super) struct Codecs {
    value: Encoder,
    key: Option<Encoder>,
    router: Option<Router>,
}

struct Running {
    #[allow(dead_code)]
    client: PulsarClient,
    writer: TopicWriter,
    dead_letter: Option<TopicWriter>,
    codecs: Option<Codecs>,
}

/// Exactly-once state in a checkpoint: the transaction holding the rows of the checkpoint (committed when
/// it completes) and the one opened for the rows after it (aborted if the job restarts from it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TxnState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<String>,
}

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
    /// Exactly-once: what a restored checkpoint says to commit and abort (done on connect).
    recover: Option<TxnState>,
    /// Exactly-once with a linked Pulsar source: its acknowledgements go into the transactions.
    txn_acks: Option<Arc<TxnAcks>>,
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
            recover: None,
            txn_acks: None,
        }
    }

    /// Linked: commits every pre-committed transaction still open (their checkpoints timed out; the
    /// subscription's cursor moves with them, so committing early keeps output and input together), then
    /// acknowledges the source's positions of checkpoint `id` in the current transaction.
    async fn ack_source_in_txn(&mut self, acks: &TxnAcks, id: u64) -> Result<()> {
        let table = self.spec.cfg.table.clone();
        while let Some((cid, txn)) = self.pending.pop_front() {
            let run = self.running().await?;
            run.client.commit_transaction(txn).await.map_err(|e| {
                anyhow!(
                    "table '{table}': committing the transaction {} of checkpoint {cid}: {e}",
                    TxnRef(txn.id())
                )
            })?;
        }
        let positions = acks.take(id);
        if positions.is_empty() {
            return Ok(());
        }
        let txn = match self.txn {
            Some(t) => t,
            None => {
                let t = self.open_txn().await?;
                self.txn = Some(t);
                t
            }
        };
        let run = self.running().await?;
        for p in positions {
            run.client
                .register_subscription_to_transaction(txn, p.topic.clone(), p.subscription.clone())
                .await
                .map_err(|e| {
                    anyhow!(
                        "table '{table}': adding subscription '{}' of {} to the transaction: {e}",
                        p.subscription,
                        p.topic
                    )
                })?;
            p.consumer
                .ack_cumulative_with_txn(p.through, txn.id())
                .await
                .map_err(|e| {
                    anyhow!(
                        "table '{table}': acknowledging {} of {} in transaction {}: {e}",
                        crate::pulsar::message_id::format_message_id(&p.through),
                        p.topic,
                        TxnRef(txn.id())
                    )
                })?;
        }
        Ok(())
    }

    fn txn_timeout(&self) -> Duration {
        self.spec.cfg.sink.txn_timeout
    }

    /// Opens a transaction and registers every partition of the topic with it.
    async fn open_txn(&mut self) -> Result<Transaction> {
        let timeout = self.txn_timeout();
        let table = self.spec.cfg.table.clone();
        let run = self.running().await?;
        let txn = run.client.new_transaction(timeout).await.map_err(|e| {
            anyhow!("table '{table}': opening a transaction (is transactionCoordinatorEnabled=true on the broker?): {e}")
        })?;
        let topics: Vec<String> = run
            .writer
            .partition_topics()
            .map(|t| t.to_string())
            .collect();
        for t in topics {
            run.client
                .register_partition_to_transaction(txn, t.clone())
                .await
                .map_err(|e| anyhow!("table '{table}': registering {t} with transaction: {e}"))?;
        }
        Ok(txn)
    }

    /// Commits / aborts what a restored checkpoint recorded, through a fresh coordinator connection.
    async fn recover(&mut self) -> Result<()> {
        let Some(state) = self.recover.take() else {
            return Ok(());
        };
        let table = self.spec.cfg.table.clone();
        let tc = TxnCoordinator::connect(&self.spec.cfg.client).await?;
        if let Some(t) = &state.commit {
            let txn: TxnRef = t.parse()?;
            match tc.commit(txn).await? {
                EndOutcome::Done => {
                    info!(table = %table, txn = %txn, "committed the transaction of the restored checkpoint")
                }
                EndOutcome::Unknown(why) => {
                    warn!(table = %table, txn = %txn, "the restored checkpoint's transaction is already ended (committed before the restart, or expired: with 'transaction-timeout' above the checkpoint interval it was committed): {why}")
                }
            }
        }
        if let Some(t) = &state.abort {
            let txn: TxnRef = t.parse()?;
            match tc.abort(txn).await? {
                EndOutcome::Done => {
                    info!(table = %table, txn = %txn, "aborted the transaction opened after the restored checkpoint")
                }
                EndOutcome::Unknown(why) => {
                    info!(table = %table, txn = %txn, "the transaction opened after the restored checkpoint is already ended: {why}")
                }
            }
        }
        tc.close().await;
        Ok(())
    }

    async fn running(&mut self) -> Result<&mut Running> {
        if self.running.is_none() {
            let spec = self.spec.clone();
            let cfg = &spec.cfg;
            let client = crate::pulsar::connect(&cfg.client).await?;
            let mut wc = spec.writer.clone();
            if let Some(kind) = spec.topic_schema {
                wc.schema = Some(
                    super::schema::pulsar_schema(kind, &cfg.layout.value_schema)
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
                ..spec.writer.clone()
            };
            let dead_letter = match &spec.dead_letter {
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
                dlq.send_keyed(0, m, f.key_b64).await?;
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

/// The table's encoders and router: plugins loaded (verified, compiled through the cache) and their
/// factories run with the table's row types and options.
pub(super) fn make_codecs(spec: &SinkSpec) -> Result<Codecs> {
    let cfg = &spec.cfg;
    let value_spec: &FormatSpec = cfg
        .value_format
        .as_ref()
        .ok_or_else(|| anyhow!("table '{}': no value format", cfg.table))?;
    let plugin = spec.plugins.load(&value_spec.plugin, Kind::Format)?;
    let value = Encoder::new(
        &plugin,
        &value_spec.options,
        cfg.layout.value_schema.clone(),
    )
    .map_err(|e| value_spec.factory_error(&cfg.table, &e))?;
    let key = match (&cfg.key_format, &cfg.layout.key_schema) {
        (Some(k), Some(schema)) => {
            let plugin = spec.plugins.load(&k.plugin, Kind::Format)?;
            Some(
                Encoder::new(&plugin, &k.options, schema.clone())
                    .map_err(|e| k.factory_error(&cfg.table, &e))?,
            )
        }
        _ => None,
    };
    let router =
        match &spec.router {
            Some((name, options)) => {
                let plugin = spec.plugins.load(name, Kind::Router)?;
                Some(Router::new(&plugin, options).map_err(|e| {
                    anyhow!("table '{}', option 'sink.message-router': {e}", cfg.table)
                })?)
            }
            None => None,
        };
    Ok(Codecs { value, key, router })
}

/// One encoded batch, ready to send.
struct Prepared {
    values: Encoded,
    keys: Option<Encoded>,
    partitions: Option<Vec<u32>>,
}

fn prepare(
    codecs: &mut Codecs,
    spec: &SinkSpec,
    batch: &RecordBatch,
    partitions: u32,
) -> Result<Prepared> {
    let cfg = &spec.cfg;
    let layout = &cfg.layout;
    let project = |cols: &[usize], schema: &SchemaRef| -> Result<RecordBatch> {
        let arrays: Vec<ArrayRef> = cols.iter().map(|&i| batch.column(i).clone()).collect();
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    };
    let value_batch = project(&layout.sink_value_columns, &layout.value_schema)?;
    let values = codecs
        .value
        .encode(&value_batch)
        .map_err(|e| anyhow!("table '{}': {e}", cfg.table))?;
    if let Some(e) = values.errors.first() {
        bail!(
            "table '{}': row {} cannot be written with format '{}': {}",
            cfg.table,
            e.index,
            cfg.value_format
                .as_ref()
                .map(|f| f.plugin.as_str())
                .unwrap_or("?"),
            e.reason
        );
    }
    let keys = match (&mut codecs.key, &layout.key_schema) {
        (Some(enc), Some(schema)) => {
            let kb = project(&layout.sink_key_columns, schema)?;
            let k = enc
                .encode(&kb)
                .map_err(|e| anyhow!("table '{}': {e}", cfg.table))?;
            if let Some(e) = k.errors.first() {
                bail!(
                    "table '{}': the key of row {} cannot be written: {}",
                    cfg.table,
                    e.index,
                    e.reason
                );
            }
            Some(k)
        }
        _ => None,
    };
    let partitions = if partitions == 0 {
        None
    } else {
        let mut kb = KeyBatchBuilder::default();
        for i in 0..batch.num_rows() {
            kb.push(keys.as_ref().map(|k| k.payload(i)));
        }
        let router = codecs
            .router
            .as_mut()
            .ok_or_else(|| anyhow!("internal: no router for a partitioned topic"))?;
        let props = if router.wants_properties() {
            let mut pb = PropertyBatchBuilder::default();
            let all = properties_of(batch, layout)?;
            for p in &all {
                let refs: Vec<(&str, &str)> =
                    p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                pb.push(&refs);
            }
            Some(pb.finish())
        } else {
            None
        };
        let routed = router
            .route(&kb.finish(), props.as_ref(), partitions)
            .map_err(|e| anyhow!("table '{}', option 'sink.message-router': {e}", cfg.table))?;
        Some(routed)
    };
    Ok(Prepared {
        values,
        keys,
        partitions,
    })
}

/// The `properties` metadata of each row (empty when the table has no such column).
fn properties_of(
    batch: &RecordBatch,
    layout: &super::layout::Layout,
) -> Result<Vec<Vec<(String, String)>>> {
    let n = batch.num_rows();
    let Some(i) = layout
        .sink
        .iter()
        .position(|c| *c == ColumnSource::Metadata("properties".into()))
    else {
        return Ok(vec![Vec::new(); n]);
    };
    let col = batch.column(i);
    let map = col
        .as_map_opt()
        .ok_or_else(|| anyhow!("column of metadata 'properties' must be MAP<STRING, STRING>"))?;
    let keys = map.keys().as_string_opt::<i32>();
    let values = map.values().as_string_opt::<i32>();
    let (Some(keys), Some(values)) = (keys, values) else {
        bail!("column of metadata 'properties' must be MAP<STRING, STRING>");
    };
    let offsets = map.value_offsets();
    Ok((0..n)
        .map(|r| {
            if map.is_null(r) {
                return Vec::new();
            }
            (offsets[r] as usize..offsets[r + 1] as usize)
                // Entries with a NULL key or value are skipped, as in the reference.
                .filter(|&j| keys.is_valid(j) && values.is_valid(j))
                .map(|j| (keys.value(j).to_owned(), values.value(j).to_owned()))
                .collect()
        })
        .collect())
}

/// The `eventTime` metadata of each row in ms (NULL or negative: unset).
fn event_times_of(batch: &RecordBatch, layout: &super::layout::Layout) -> Vec<Option<u64>> {
    let n = batch.num_rows();
    let Some(i) = layout
        .sink
        .iter()
        .position(|c| *c == ColumnSource::Metadata("eventTime".into()))
    else {
        return vec![None; n];
    };
    let col = batch.column(i);
    let divisor = match col.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => -1,
        DataType::Timestamp(TimeUnit::Millisecond, _) => 1,
        DataType::Timestamp(TimeUnit::Microsecond, _) => 1_000,
        DataType::Timestamp(TimeUnit::Nanosecond, _) => 1_000_000,
        _ => return vec![None; n],
    };
    let raw: Vec<Option<i64>> = match col.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => col
            .as_primitive::<arrow::datatypes::TimestampSecondType>()
            .iter()
            .collect(),
        DataType::Timestamp(TimeUnit::Millisecond, _) => col
            .as_primitive::<arrow::datatypes::TimestampMillisecondType>()
            .iter()
            .collect(),
        DataType::Timestamp(TimeUnit::Microsecond, _) => col
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
            .iter()
            .collect(),
        _ => col
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
            .iter()
            .collect(),
    };
    raw.into_iter()
        .map(|v| {
            v.map(|t| {
                if divisor < 0 {
                    t.saturating_mul(1000)
                } else {
                    t.div_euclid(divisor)
                }
            })
            .filter(|t| *t >= 0)
            .map(|t| t as u64)
        })
        .collect()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[async_trait]
impl Sink for PulsarSink {
    fn set_context(&mut self, ctx: &PipelineContext) {
        self.dropped_metric = Some(ctx.sink_dropped.clone());
        if self.spec.semantic == Semantic::ExactlyOnce
            && let Some(acks) = ctx.link.get::<TxnAcks>()
        {
            acks.claim();
            info!(table = %self.spec.cfg.table, "the Pulsar source's acknowledgements go into this sink's transactions");
            self.txn_acks = Some(acks);
        }
    }

    /// Connects at start, so a wrong URL, a missing topic or an incompatible topic schema fails the job
    /// before any row is read; exactly-once also settles the restored checkpoint's transactions here.
    async fn open(&mut self) -> Result<()> {
        let opened = async {
            self.running().await?;
            if self.spec.semantic == Semantic::ExactlyOnce {
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
        let exactly_once = self.spec.semantic == Semantic::ExactlyOnce;
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
        let (codecs, prepared, batch) = {
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || {
                let prepared = prepare(&mut codecs, &spec, &batch, partitions);
                (codecs, prepared, batch)
            })
            .await
            .map_err(|e| anyhow!("encoding task failed: {e}"))?
        };
        run.codecs = Some(codecs);
        let prepared = prepared?;
        let props = properties_of(&batch, &spec.cfg.layout)?;
        let times = event_times_of(&batch, &spec.cfg.layout);
        let now = if delay > 0 { now_ms() } else { 0 };
        for (i, (props, time)) in props.into_iter().zip(times).enumerate() {
            let mut m = OutgoingMessage::with_payload(prepared.values.payload(i).to_vec());
            m.properties = props;
            if let Some(t) = time {
                m = m.event_time_ms(t);
            }
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
            run.writer.send_keyed(p, m, prepared.keys.is_some()).await?;
        }
        self.written += batch.num_rows() as u64;
        self.handle_failures().await
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        if self.spec.semantic == Semantic::ExactlyOnce && !state.is_null() {
            self.recover = Some(
                serde_json::from_value(state)
                    .context("the checkpoint's Pulsar sink state is not readable")?,
            );
        }
        Ok(())
    }

    async fn flush(&mut self, id: u64) -> Result<serde_json::Value> {
        let semantic = self.spec.semantic;
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
            let next = self.open_txn().await?;
            self.txn = Some(next);
            if let Some(t) = current {
                self.pending.push_back((id, t));
            }
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
        let table = self.spec.cfg.table.clone();
        while self.pending.front().is_some_and(|(cid, _)| *cid <= id) {
            let Some((cid, txn)) = self.pending.pop_front() else {
                break;
            };
            let Some(run) = self.running.as_ref() else {
                break;
            };
            run.client.commit_transaction(txn).await.map_err(|e| {
                anyhow!(
                    "table '{table}': committing the transaction {} of checkpoint {cid}: {e} (a restart from the checkpoint commits it)",
                    TxnRef(txn.id())
                )
            })?;
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
        let semantic = self.spec.semantic;
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
