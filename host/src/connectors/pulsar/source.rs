//! The Pulsar source: split readers → format plugins → Arrow batches with metadata columns.
//!
//! - Connecting (client, topic listing, one [`SplitReader`] per split, the format plugins) runs as its own
//!   task whose handle the source keeps, so a poll cancelled by a checkpoint barrier loses nothing and a
//!   half-opened subscription is never abandoned.
//! - Decoding runs on a blocking thread (plugin calls must not run on a runtime worker); the handle is kept
//!   the same way, and the position of a batch only counts as emitted when its rows are returned.
//! - The checkpoint holds, per split, the position after the last emitted message (batch index included);
//!   splits that emitted nothing keep their resolved start. On completion the position is committed to the
//!   job's durable subscription (cumulative ack), so Pulsar's tools show the backlog.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use magnetar::PulsarClient;
use magnetar::admin::AdminClient;
use magnetar::proto::event::IncomingMessage;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::config::{FormatSpec, OffsetStart, PulsarTableConfig, Startup};
use super::layout::{ColumnSource, Layout};
use super::txn_acks::{SplitAck, TxnAcks, stale_transactions};
use crate::connectors::{PipelineContext, Source, SourcePoll};
use crate::plugins::catalog::PluginCatalog;
use crate::plugins::{Decoder, Kind, MessageBatchBuilder, MessageRef};
use crate::pulsar::message_id::{format_message_id, parse_message_id};
use crate::pulsar::reader::{
    DataLossPolicy, KeyRange, SplitCheckpoint, SplitReader, SplitSet, StartPosition, key_ranges,
    resolve_latest, state_key,
};
use crate::pulsar::topics::{Discovery, Split};
use crate::pulsar::transactions::{TxnCoordinator, TxnRef};
use crate::pulsar::{admin, message, metadata};

/// How long one receive waits before the poll returns (so discovery and barriers get their turn).
const RECEIVE_WAIT: Duration = Duration::from_millis(200);

/// The checkpointed state.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SourceState {
    pub subscription: String,
    /// Per split (the topic name the broker serves): where to resume.
    pub splits: BTreeMap<String, SplitCheckpoint>,
}

/// What the source needs to connect.
#[derive(Clone)]
pub struct SourceSpec {
    /// The table's configuration, decoded once at validation (`cfg.source`: what a source reads).
    pub cfg: Arc<PulsarTableConfig>,
    pub schema: SchemaRef,
    pub plugins: Arc<PluginCatalog>,
}

pub(super) struct Decoders {
    value: Decoder,
    value_spec: FormatSpec,
    key: Option<(Decoder, FormatSpec)>,
}

/// A discovery round in flight: the discovery state comes back with the readers of the new splits.
type Discovering = JoinHandle<Result<(Discovery, Vec<SplitReader>)>>;

struct Running {
    client: Arc<PulsarClient>,
    admin: Option<AdminClient>,
    splits: SplitSet,
    discovery: Option<Discovery>,
    next_discovery: Instant,
    discovering: Option<Discovering>,
    decoders: Option<Decoders>,
    decoding: Option<JoinHandle<(Decoders, Result<Decoded>)>>,
}

enum Stage {
    Idle,
    Connecting(JoinHandle<Result<Running>>),
    Running(Box<Running>),
}

/// One decoded batch and the split position after it.
struct Decoded {
    batch: RecordBatch,
    split: String,
    position: SplitCheckpoint,
    skipped: u64,
}

pub struct PulsarSource {
    spec: SourceSpec,
    subscription: String,
    restored: Option<SourceState>,
    stage: Stage,
    /// Per split: the position after the last row returned (or the split's start).
    emitted: BTreeMap<String, SplitCheckpoint>,
    snapshots: VecDeque<(u64, BTreeMap<String, SplitCheckpoint>)>,
    skipped: u64,
    /// Offered to the pipeline's sink (with an `admin-url` only); claimed by an exactly-once Pulsar sink,
    /// the acknowledgements go into its transactions ([`super::txn_acks`]).
    txn_acks: Option<Arc<TxnAcks>>,
    /// Linked to the sink's transactions: per split, the last position handed to it.
    published: BTreeMap<String, magnetar::MessageId>,
}

impl PulsarSource {
    pub fn new(spec: SourceSpec) -> Self {
        let subscription = match &spec.cfg.source.startup {
            Startup::ExternalSubscription { name, .. } => name.clone(),
            _ => format!("{}-{}", spec.cfg.source.subscription_prefix, spec.cfg.table),
        };
        PulsarSource {
            spec,
            subscription,
            restored: None,
            stage: Stage::Idle,
            emitted: BTreeMap::new(),
            snapshots: VecDeque::new(),
            skipped: 0,
            txn_acks: None,
            published: BTreeMap::new(),
        }
    }

    /// The acknowledgements go into the sink's transactions.
    fn linked(&self) -> Option<Arc<TxnAcks>> {
        self.txn_acks.clone().filter(|a| a.is_claimed())
    }

    async fn running(&mut self) -> Result<&mut Running> {
        loop {
            match &mut self.stage {
                Stage::Idle => {
                    let spec = self.spec.clone();
                    let sub = self.subscription.clone();
                    let restored = self.restored.clone();
                    let linked = self.linked();
                    self.stage =
                        Stage::Connecting(tokio::spawn(connect(spec, sub, restored, linked)));
                }
                Stage::Connecting(handle) => {
                    let joined = handle.await;
                    self.stage = Stage::Idle;
                    let running = joined.map_err(|e| anyhow!("connecting task failed: {e}"))??;
                    for r in running.splits.readers() {
                        self.emitted.entry(r.key()).or_insert_with(|| r.position());
                    }
                    self.stage = Stage::Running(Box::new(running));
                }
                Stage::Running(_) => break,
            }
        }
        match &mut self.stage {
            Stage::Running(r) => Ok(r),
            _ => unreachable!("the loop only ends when running"),
        }
    }
}

#[async_trait]
impl Source for PulsarSource {
    fn set_context(&mut self, ctx: &PipelineContext) {
        if !matches!(
            self.spec.cfg.source.startup,
            Startup::ExternalSubscription { .. }
        ) {
            self.subscription = format!(
                "{}-{}-{}-{}",
                self.spec.cfg.source.subscription_prefix,
                ctx.job_id,
                ctx.pipeline_id,
                self.spec.cfg.table
            );
        }
        // Acknowledging inside a sink's transaction needs the admin API at start (finding the
        // transactions of crashed runs, the subscriptions that exist) and durable subscriptions (key
        // ranges are read through non-durable ones).
        if self.spec.cfg.admin_url.is_some() && self.spec.cfg.source.key_ranges.is_none() {
            let acks = Arc::new(TxnAcks::default());
            ctx.link.offer(acks.clone());
            self.txn_acks = Some(acks);
        }
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        if state.is_null() {
            return Ok(());
        }
        let state: SourceState = serde_json::from_value(state)
            .context("the checkpoint's Pulsar source state is not readable")?;
        self.emitted = state.splits.clone();
        self.restored = Some(state);
        Ok(())
    }

    async fn poll_batch(&mut self, max_rows: usize) -> Result<SourcePoll> {
        let table = self.spec.cfg.table.clone();
        let schema = self.spec.schema.clone();
        let layout = self.spec.cfg.layout.clone();
        let interval = discovery_interval(&self.spec.cfg);
        let sub = self.subscription.clone();
        let policy = self.spec.cfg.source.data_loss;
        let whole_entries = self.linked().is_some();
        let ranges = reader_ranges(&self.spec.cfg);
        let run = self.running().await?;

        // Splits found by discovery join the set.
        if run.discovering.as_ref().is_some_and(|h| h.is_finished())
            && let Some(h) = run.discovering.take()
        {
            let (discovery, readers) = h.await.map_err(|e| anyhow!("discovery task: {e}"))??;
            for r in readers {
                info!(table = %table, split = %r.split().topic, "new split discovered; reading it from the earliest message");
                run.splits.push(r);
            }
            run.discovery = Some(discovery);
            run.next_discovery = Instant::now() + interval.unwrap_or(Duration::MAX / 4);
        }
        if run.discovering.is_none()
            && Instant::now() >= run.next_discovery
            && let Some(discovery) = run.discovery.take()
        {
            let client = run.client.clone();
            let admin = run.admin.clone();
            let sub = sub.clone();
            run.discovering = Some(tokio::spawn(async move {
                let mut discovery = discovery;
                let new = discovery.new_splits(&client, admin.as_ref()).await?;
                let mut readers = Vec::new();
                for split in new {
                    for range in &ranges {
                        let mut r = SplitReader::open_range(
                            &client,
                            split.clone(),
                            &sub,
                            StartPosition::Earliest,
                            policy,
                            *range,
                        )
                        .await?;
                        if whole_entries {
                            r.whole_entries();
                        }
                        readers.push(r);
                    }
                }
                Ok((discovery, readers))
            }));
        }

        if run.decoding.is_none() {
            let Some((i, msgs)) = run.splits.next_batch(max_rows.max(1), RECEIVE_WAIT).await?
            else {
                return Ok(SourcePoll::Batch(RecordBatch::new_empty(schema)));
            };
            let reader = &run.splits.readers()[i];
            let split = reader.split().clone();
            let key = reader.key();
            let position = reader.position();
            let decoders = run
                .decoders
                .take()
                .ok_or_else(|| anyhow!("internal: decoders missing"))?;
            let job = DecodeJob {
                table: table.clone(),
                schema,
                layout,
                split,
                key,
                position,
                msgs,
            };
            run.decoding = Some(tokio::task::spawn_blocking(move || job.run(decoders)));
        }
        let handle = run
            .decoding
            .as_mut()
            .ok_or_else(|| anyhow!("internal: no decode in flight"))?;
        let joined = handle.await;
        run.decoding = None;
        let (decoders, decoded) = joined.map_err(|e| anyhow!("decoding task failed: {e}"))?;
        run.decoders = Some(decoders);
        let decoded = decoded?;
        if decoded.skipped > 0 {
            self.skipped += decoded.skipped;
            warn!(table = %table, skipped = decoded.skipped, total_skipped = self.skipped, "skipped messages the format could not decode (ignore-parse-errors)");
        }
        self.emitted.insert(decoded.split, decoded.position);
        Ok(SourcePoll::Batch(decoded.batch))
    }

    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(SourceState {
            subscription: self.subscription.clone(),
            splits: self.emitted.clone(),
        })?)
    }

    fn snapshot_for(&mut self, id: u64) -> Result<serde_json::Value> {
        if let (Some(acks), Stage::Running(run)) = (self.linked(), &self.stage) {
            // Everything emitted so far reaches the sink before this checkpoint's barrier: the sink
            // acknowledges it in the transaction it pre-commits for this checkpoint.
            let mut batch = Vec::new();
            for r in run.splits.readers() {
                let topic = r.key();
                let Some(through) = r.last_whole_entry() else {
                    continue;
                };
                let newer = self.published.get(&topic).is_none_or(|p| {
                    crate::pulsar::reader::compare_positions(&through, p)
                        == std::cmp::Ordering::Greater
                });
                if newer {
                    self.published.insert(topic.clone(), through);
                    batch.push(SplitAck {
                        topic,
                        subscription: self.subscription.clone(),
                        consumer: r.consumer().clone(),
                        through,
                    });
                }
            }
            acks.publish(id, batch);
        }
        self.snapshots.push_back((id, self.emitted.clone()));
        while self.snapshots.len() > 64 {
            self.snapshots.pop_front();
        }
        self.snapshot()
    }

    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        let mut done = None;
        while let Some((sid, _)) = self.snapshots.front() {
            if *sid > id {
                break;
            }
            done = self.snapshots.pop_front();
        }
        let Some((_, positions)) = done else {
            return Ok(());
        };
        if self.linked().is_some() {
            // The sink's transaction carried the acknowledgements.
            return Ok(());
        }
        let Stage::Running(run) = &self.stage else {
            return Ok(());
        };
        let retries = self.spec.cfg.source.commit_retries;
        for reader in run.splits.readers() {
            let Some(cp) = positions.get(&reader.key()) else {
                continue;
            };
            let mut attempt = 0;
            loop {
                match reader.commit(cp).await {
                    Ok(()) => break,
                    Err(e) if attempt < retries => {
                        attempt += 1;
                        warn!(split = %reader.split().topic, attempt, "commit failed, retrying: {e:#}");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    Err(e) => {
                        warn!(split = %reader.split().topic, "committing the position of checkpoint {id} failed (the checkpoint still holds it; only the subscription's backlog is stale): {e:#}");
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    async fn durable_state(&mut self, drop: bool) -> Result<Vec<String>> {
        let cfg = self.spec.cfg.clone();
        if matches!(
            self.spec.cfg.source.startup,
            Startup::ExternalSubscription { .. }
        ) {
            return Ok(vec![format!(
                "table '{}': reads the external subscription '{}' (not the job's; left alone)",
                cfg.table, self.subscription
            )]);
        }
        let Some(url) = cfg.admin_url.clone() else {
            bail!(
                "table '{}': listing or dropping the job's subscriptions needs 'admin-url'",
                cfg.table
            );
        };
        let client = crate::pulsar::connect(&cfg.client).await?;
        let admin = admin::admin_client_for(&url, &cfg.client).await?;
        let splits = cfg
            .source
            .selection
            .splits(&client, Some(&admin))
            .await
            .with_context(|| format!("table '{}': listing the topics", cfg.table))?;
        client.close().await;
        let mut out = Vec::new();
        for split in &splits {
            if !subscription_exists(&url, &cfg.client, split, &self.subscription).await? {
                continue;
            }
            let what = format!("{} subscription '{}'", split.topic, self.subscription);
            if drop {
                admin::delete_subscription(&url, &cfg.client, &split.topic, &self.subscription)
                    .await
                    .with_context(|| {
                        format!(
                            "table '{}': dropping {what} (is the job still running?)",
                            cfg.table
                        )
                    })?;
                out.push(format!("dropped {what}"));
            } else {
                out.push(what);
            }
        }
        Ok(out)
    }

    async fn close(&mut self) -> Result<()> {
        match std::mem::replace(&mut self.stage, Stage::Idle) {
            Stage::Running(run) => {
                let run = *run;
                if let Some(h) = run.decoding {
                    let _ = h.await;
                }
                if let Some(h) = run.discovering
                    && let Ok(Ok((_, readers))) = h.await
                {
                    for r in readers {
                        let _ = r.close().await;
                    }
                }
                run.splits.close().await.ok();
            }
            Stage::Connecting(h) => {
                if let Ok(Ok(run)) = h.await {
                    run.splits.close().await.ok();
                }
            }
            Stage::Idle => {}
        }
        Ok(())
    }
}

/// The readers of each split: one for every key (the default), or one per share of the key hash space
/// with `enable-key-hash-range` (`scan.parallelism` shares).
fn reader_ranges(cfg: &PulsarTableConfig) -> Vec<Option<KeyRange>> {
    match cfg.source.key_ranges {
        None => vec![None],
        Some(n) => key_ranges(n).into_iter().map(Some).collect(),
    }
}

fn discovery_interval(cfg: &PulsarTableConfig) -> Option<Duration> {
    cfg.source.discovery
}

/// Connects and opens every split at its start (restored, or the configured startup mode).
async fn connect(
    spec: SourceSpec,
    subscription: String,
    restored: Option<SourceState>,
    linked: Option<Arc<TxnAcks>>,
) -> Result<Running> {
    let cfg = &spec.cfg;
    let client = crate::pulsar::connect(&cfg.client).await?;
    let admin = match &cfg.admin_url {
        Some(url) => Some(admin::admin_client_for(url, &cfg.client).await?),
        None => None,
    };
    let splits = cfg
        .source
        .selection
        .splits(&client, admin.as_ref())
        .await
        .with_context(|| format!("table '{}': listing the topics to read", cfg.table))?;
    if splits.is_empty() {
        warn!(table = %cfg.table, "no topic matches yet; waiting for discovery");
    }
    let policy = cfg.source.data_loss;
    // Linked to the sink's transactions: the subscription's cursor is where to resume.
    let mut at_cursor = std::collections::BTreeSet::new();
    if let (Some(acks), Some(url)) = (&linked, &cfg.admin_url) {
        acks.wait_recovered()
            .await
            .with_context(|| format!("table '{}': before reading", cfg.table))?;
        abort_stale_transactions(cfg, url, &splits, &subscription).await?;
        for split in &splits {
            if subscription_exists(url, &cfg.client, split, &subscription).await? {
                at_cursor.insert(split.topic.to_string());
            }
        }
    }
    let mut readers = Vec::new();
    let ranges = reader_ranges(cfg);
    for split in &splits {
        for range in &ranges {
            let key = state_key(split, *range);
            let start = match restored.as_ref().and_then(|s| s.splits.get(&key)) {
                // Linked to the sink's transactions: the cursor moved with every committed output.
                _ if at_cursor.contains(split.topic.as_str()) => {
                    StartPosition::SubscriptionCursor {
                        from_earliest: true,
                    }
                }
                Some(cp) => match (&cp.resume, &cfg.admin_url) {
                    (StartPosition::After { id }, Some(url)) => {
                        match deleted_since(url, &cfg.client, split, id, &subscription).await {
                            Ok(None) => cp.resume.clone(),
                            Ok(Some(what)) => match policy {
                                DataLossPolicy::Fail => bail!(
                                    "table '{}': data loss: {what} (set 'properties.pulsar.reader.fail-on-data-loss' = 'false' to continue from the earliest available message)",
                                    cfg.table
                                ),
                                DataLossPolicy::UseEarliest => {
                                    warn!(table = %cfg.table, split = %split.topic, "data loss: {what}; resuming from the earliest available message");
                                    StartPosition::Earliest
                                }
                            },
                            Err(e) => {
                                warn!(table = %cfg.table, split = %split.topic, "could not check the resume position against the topic's ledgers: {e:#}");
                                cp.resume.clone()
                            }
                        }
                    }
                    _ => cp.resume.clone(),
                },
                // A split the checkpoint does not know appeared since: from its beginning.
                None if restored.is_some() => StartPosition::Earliest,
                None => fresh_start(&client, split, &subscription, &cfg.source.startup).await?,
            };
            let mut reader = SplitReader::open_range(
                &client,
                split.clone(),
                &subscription,
                start,
                policy,
                *range,
            )
            .await
            .with_context(|| format!("table '{}': opening {}", cfg.table, split.topic))?;
            if linked.is_some() {
                reader.whole_entries();
            }
            readers.push(reader);
        }
    }
    info!(table = %cfg.table, splits = readers.len(), subscription = %subscription, "reading");
    let interval = discovery_interval(cfg);
    let discovery = interval.map(|_| Discovery::new(cfg.source.selection.clone(), splits.clone()));
    let decoders = {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || make_decoders(&spec))
            .await
            .map_err(|e| anyhow!("loading the format plugins: {e}"))??
    };
    Ok(Running {
        client: Arc::new(client),
        admin,
        splits: SplitSet::new(readers),
        discovery,
        next_discovery: Instant::now() + interval.unwrap_or(Duration::ZERO),
        discovering: None,
        decoders: Some(decoders),
        decoding: None,
    })
}

/// Aborts the open transactions that acknowledged on the job's subscription: a run that crashed after its
/// sink acknowledged inside a transaction and before the commit left them, and their pending
/// acknowledgements would make every later one fail until the broker times them out. The subscription is
/// Exclusive, so no live run owns them; their output is aborted with them (and read again).
async fn abort_stale_transactions(
    cfg: &PulsarTableConfig,
    admin_url: &str,
    splits: &[Split],
    subscription: &str,
) -> Result<()> {
    // The coordinator connection opens (and aborts) a probe transaction, which makes the broker load a
    // transaction coordinator: on a fresh broker none is loaded and the listing below answers 500.
    let tc = TxnCoordinator::connect(&cfg.client).await?;
    let open = match admin::slow_transactions(admin_url, &cfg.client).await {
        Ok(admin::SlowTransactions::Listed(open)) => open,
        Ok(admin::SlowTransactions::CoordinatorNotLoaded(e)) => {
            // A coordinator not loaded yet holds no transaction it could end; one it recovers later
            // times its transactions out as usual (an acknowledgement conflicting with one fails the
            // job, and the restart finds it here).
            warn!(table = %cfg.table, "not every transaction coordinator is loaded yet: {e}");
            Vec::new()
        }
        Err(e) => {
            tc.close().await;
            return Err(e.context(format!(
                "table '{}': listing open transactions (the source's acknowledgements go into the sink's transactions)",
                cfg.table
            )));
        }
    };
    let topics: Vec<String> = splits.iter().map(|s| s.topic.to_string()).collect();
    let stale = stale_transactions(&open, &topics, subscription);
    for (most, least) in stale {
        let txn = TxnRef(magnetar::proto::TxnId::new(most, least));
        let outcome = tc.abort(txn).await;
        info!(table = %cfg.table, txn = %txn, subscription, "aborted a transaction of an earlier run that held acknowledgements on the job's subscription: {outcome:?}");
        outcome?;
    }
    tc.close().await;
    Ok(())
}

/// Whether the job's subscription exists on `split` (a linked source resumes at its cursor).
async fn subscription_exists(
    admin_url: &str,
    client: &crate::pulsar::ClientConfig,
    split: &Split,
    subscription: &str,
) -> Result<bool> {
    Ok(admin::subscriptions(admin_url, client, &split.topic)
        .await?
        .iter()
        .any(|s| s == subscription))
}

/// Whether messages after `id` (the position to resume after) may have been deleted: its ledger is older
/// than the topic's first ledger (retention trimmed it, or the topic was deleted and recreated) and the
/// job's own subscription does not hold a position at or before it (which would have kept everything after
/// it). `None` when nothing can be missing.
async fn deleted_since(
    admin_url: &str,
    client: &crate::pulsar::ClientConfig,
    split: &Split,
    id: &str,
    subscription: &str,
) -> Result<Option<String>> {
    if !split.topic.as_str().starts_with("persistent://") {
        return Ok(None);
    }
    let resume = parse_message_id(id)?;
    let Some(stats) = admin::ledger_stats(admin_url, client, &split.topic).await? else {
        return Ok(None);
    };
    let Some(first_ledger) = stats.first_ledger else {
        return Ok(None);
    };
    if resume.ledger_id >= first_ledger {
        return Ok(None);
    }
    let held = stats
        .cursors
        .get(subscription)
        .is_some_and(|&(l, e)| (l, e) <= (resume.ledger_id, resume.entry_id as i64));
    if held {
        return Ok(None);
    }
    Ok(Some(format!(
        "the position to resume {} from ({id}) lies in ledger {} but the topic's oldest ledger is {first_ledger} and subscription '{subscription}' did not hold it: the messages after it were deleted (retention) or the topic was deleted and recreated",
        split.topic, resume.ledger_id
    )))
}

async fn fresh_start(
    client: &PulsarClient,
    split: &Split,
    subscription: &str,
    startup: &Startup,
) -> Result<StartPosition> {
    Ok(match startup {
        Startup::Earliest => StartPosition::Earliest,
        Startup::Latest => resolve_latest(client, split, subscription).await?,
        Startup::Timestamp(ms) => StartPosition::Timestamp { millis: *ms },
        Startup::ExternalSubscription { from_earliest, .. } => StartPosition::SubscriptionCursor {
            from_earliest: *from_earliest,
        },
        Startup::SpecificOffsets(offsets) => {
            let parent = split
                .topic
                .partition_of()
                .map(|(p, _)| p)
                .unwrap_or_else(|| split.topic.clone());
            let wanted = |o: &&super::config::SpecificOffset| {
                let topic_ok = o
                    .topic
                    .as_ref()
                    .is_none_or(|t| *t == parent || *t == split.topic);
                let partition_ok = o.partition == split.partition
                    || (split.partition == -1 && o.partition == 0)
                    // Earliest/latest name no partition: `-1:-1:-1` applies to every partition.
                    || (o.partition == -1 && !matches!(o.start, OffsetStart::At(_)));
                topic_ok && partition_ok
            };
            // A topic-qualified entry beats a partition-only one, an exact partition a wildcard.
            let entry = offsets
                .iter()
                .filter(wanted)
                .max_by_key(|o| (o.topic.is_some(), o.partition == split.partition));
            match entry.map(|o| &o.start) {
                Some(OffsetStart::Earliest) => StartPosition::Earliest,
                Some(OffsetStart::Latest) => StartPosition::Latest,
                Some(OffsetStart::At(text)) => {
                    let mut id = parse_message_id(text)?;
                    id.partition = split.partition;
                    StartPosition::At {
                        id: format_message_id(&id),
                    }
                }
                // Partitions without an entry start at the beginning (the reference starts them at latest,
                // silently skipping their backlog).
                None => StartPosition::Earliest,
            }
        }
    })
}

/// The table's key and value decoders: plugins loaded (verified, compiled through the cache) and their
/// `create-decoder` factories run with the table's row types and options.
pub(super) fn make_decoders(spec: &SourceSpec) -> Result<Decoders> {
    let cfg = &spec.cfg;
    let value_spec = cfg
        .value_format
        .clone()
        .ok_or_else(|| anyhow!("table '{}': no value format", cfg.table))?;
    let plugin = spec.plugins.load(&value_spec.plugin, Kind::Format)?;
    let value = Decoder::new(
        &plugin,
        &value_spec.options,
        cfg.layout.value_schema.clone(),
    )
    .map_err(|e| value_spec.factory_error(&cfg.table, &e))?;
    let key = match (&cfg.key_format, &cfg.layout.key_schema) {
        (Some(k), Some(schema)) => {
            let plugin = spec.plugins.load(&k.plugin, Kind::Format)?;
            let d = Decoder::new(&plugin, &k.options, schema.clone())
                .map_err(|e| k.factory_error(&cfg.table, &e))?;
            Some((d, k.clone()))
        }
        _ => None,
    };
    Ok(Decoders {
        value,
        value_spec,
        key,
    })
}

struct DecodeJob {
    table: String,
    schema: SchemaRef,
    layout: Layout,
    split: Split,
    /// The reader's checkpoint key.
    key: String,
    position: SplitCheckpoint,
    msgs: Vec<IncomingMessage>,
}

impl DecodeJob {
    fn run(self, mut decoders: Decoders) -> (Decoders, Result<Decoded>) {
        let out = self.decode(&mut decoders);
        (decoders, out)
    }

    fn failure(&self, i: usize, format: &str, reason: &str) -> anyhow::Error {
        let m = &self.msgs[i];
        anyhow!(
            "table '{}': cannot decode message {} of {} (partition {}) with format '{format}': {reason} (set '{format}.ignore-parse-errors' = 'true' to skip such messages)",
            self.table,
            format_message_id(&m.message_id),
            self.split.topic,
            self.split.partition
        )
    }

    fn decode(&self, decoders: &mut Decoders) -> Result<Decoded> {
        let n = self.msgs.len();
        // Values.
        let mut values = MessageBatchBuilder::new();
        for m in &self.msgs {
            let payload: &[u8] = if message::is_null_value(m) {
                &[]
            } else {
                &m.payload
            };
            values.push(MessageRef {
                payload,
                key: None,
                properties: &[],
                event_time: message::event_time_ms(m).map(|t| t as i64),
            });
        }
        let value_decoded = decoders
            .value
            .decode(values.finish(false))
            .map_err(|e| anyhow!("table '{}': {e}", self.table))?;
        let mut bad = vec![false; n];
        let mut skipped = 0u64;
        for e in &value_decoded.errors {
            let i = e.index as usize;
            // A skip: the format drops the message itself (Flink returns no row, e.g. an empty JSON
            // payload); anything else is an error unless the user asked to skip those too.
            if !e.skip && !decoders.value_spec.skip_errors {
                return Err(self.failure(i, &decoders.value_spec.plugin, &e.reason));
            }
            bad[i] = true;
        }
        // Value row of each message (None: it failed).
        let mut value_row = vec![None; n];
        {
            let mut r = 0u32;
            // `bad`: every message the format listed in `errors` (each produced no row).
            for (slot, failed) in value_row.iter_mut().zip(&bad) {
                if !*failed {
                    *slot = Some(r);
                    r += 1;
                }
            }
        }
        // Keys: only messages that have one are decoded; the others get NULL key columns.
        let mut key_row: Vec<Option<u32>> = vec![None; n];
        let mut key_batch = None;
        if let Some((decoder, spec)) = &mut decoders.key {
            let mut keys = MessageBatchBuilder::new();
            let mut keyed = Vec::new();
            for (i, m) in self.msgs.iter().enumerate() {
                if let Some(k) = message::key_bytes(m) {
                    keys.push(MessageRef {
                        payload: &k,
                        key: None,
                        properties: &[],
                        event_time: None,
                    });
                    keyed.push(i);
                }
            }
            let decoded = decoder
                .decode(keys.finish(false))
                .map_err(|e| anyhow!("table '{}': {e}", self.table))?;
            let mut failed = vec![false; keyed.len()];
            for e in &decoded.errors {
                let i = keyed[e.index as usize];
                if !e.skip && !spec.skip_errors {
                    return Err(self.failure(i, &format!("key {}", spec.plugin), &e.reason));
                }
                failed[e.index as usize] = true;
                bad[i] = true;
            }
            let mut r = 0u32;
            for (j, &i) in keyed.iter().enumerate() {
                if !failed[j] {
                    key_row[i] = Some(r);
                    r += 1;
                }
            }
            key_batch = Some(decoded.batch);
        }
        let good: Vec<usize> = (0..n).filter(|&i| !bad[i]).collect();
        skipped += (n - good.len()) as u64;
        let value_idx = UInt32Array::from(
            good.iter()
                .map(|&i| value_row[i])
                .collect::<Vec<Option<u32>>>(),
        );
        let key_idx = UInt32Array::from(
            good.iter()
                .map(|&i| key_row[i])
                .collect::<Vec<Option<u32>>>(),
        );
        let topic = self.split.topic.as_str();
        let rows: Vec<metadata::Received<'_>> =
            good.iter().map(|&i| (topic, &self.msgs[i])).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        for (c, field) in self.layout.source.iter().zip(self.schema.fields()) {
            let col = match c {
                ColumnSource::Value(v) => take(value_decoded.batch.column(*v), &value_idx, None)?,
                ColumnSource::Key(k) => match &key_batch {
                    Some(b) => take(b.column(*k), &key_idx, None)?,
                    None => bail!("internal: key column without a key format"),
                },
                ColumnSource::Metadata(key) => {
                    metadata::metadata_column(key, field.data_type(), &rows)?
                }
            };
            columns.push(col);
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| {
            anyhow!(
                "table '{}': rows read from {} do not fit the table's columns: {e} (a NOT NULL column got a NULL, e.g. a key column of a message without a key?)",
                self.table,
                self.split.topic
            )
        })?;
        Ok(Decoded {
            batch,
            split: self.key.clone(),
            position: self.position.clone(),
            skipped,
        })
    }
}
