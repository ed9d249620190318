//! The Pulsar source: split readers → format plugins → Arrow batches with metadata columns.
//!
//! - Connecting (client, topic listing, one [`SplitReader`] per split, the format plugins) runs as its own
//!   task whose handle the source keeps, so a poll cancelled by a checkpoint barrier loses nothing and a
//!   half-opened subscription is never abandoned.
//! - Decoding runs on a blocking thread (plugin calls must not run on a runtime worker); the handle is kept
//!   the same way, and the position of a batch only counts as emitted when its rows are returned.
//! - The checkpoint holds, per split, the position after the last emitted message (batch index included);
//!   splits that emitted nothing keep their resolved start. On completion the position is committed to the
//!   job's durable subscription (cumulative ack), so Pulsar's tools show the backlog. With
//!   `subscription-type` = `Failover` several processes share the subscriptions and the committed cursor,
//!   not the checkpoint, is where every start resumes (ADR 0014).
//!
//! - With several source subtasks (`scan.parallelism`, `parallelism.default`) each instance reads the
//!   splits [`assign`] gives it and keeps only their positions (ADR 0015).
//!
//! Files: [`assign`] (which subtask reads which split), [`connect`] (client, topics, readers, discovery), [`startup`] (where each split starts),
//! [`decode`] (format plugins → columns), [`commit`] (positions and acknowledgements at checkpoints),
//! [`subscriptions`] (what the job keeps on the broker, for the `subscriptions` command).

mod assign;
mod commit;
mod connect;
mod decode;
mod lag;
mod startup;
mod subscriptions;
pub mod takeover;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use magnetar::PulsarClient;
use magnetar::admin::AdminClient;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::config::{PulsarTableConfig, Startup};
use super::txn_acks::TxnAcks;
use crate::connector_api::telemetry::{OWNED_SPLITS, SOURCE_SKIPPED};
use crate::connector_api::{PipelineContext, Source, SourcePoll, Subtask, TableTelemetry};
use crate::plugins::catalog::PluginCatalog;
use crate::pulsar::reader::{SplitCheckpoint, SplitReader, SplitSet, SubscriptionKind};
use crate::pulsar::topics::Discovery;
use connect::{SplitOpening, connect, discovery_interval, spawn_discovery};
pub(super) use decode::make_decoders;
use decode::{DecodeJob, Decoded, Decoders};

/// How long one receive waits before the poll returns (so discovery and barriers get their turn).
const RECEIVE_WAIT: Duration = Duration::from_millis(200);

/// Failover: how long after a split became this process's its reader asks the broker to dispatch again
/// what no one acknowledged (past the broker's own failover delay, `activeConsumerFailoverDelayTimeMillis`,
/// 1 s by default, after which it rewinds the cursor itself when all goes well).
const ACTIVATION_REWIND: Duration = Duration::from_secs(3);

/// Failover: how long an active reader receives nothing before it asks the broker, once, to dispatch
/// again what no one acknowledged ([`SplitReader::rewind_if_idle`]).
const IDLE_REWIND: Duration = Duration::from_secs(5);

/// A bounded Failover source ends once the splits it reads are done and this has held this long (the
/// broker's choice of active readers settles).
const FAILOVER_SETTLE: Duration = Duration::from_secs(2);

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
    /// A checkpoint completed since the decoders last ran: a newer plugin version may take over.
    checkpoint_completed: bool,
    /// Linked through a subscription several processes share: ends what gone processes left open.
    takeover: Option<takeover::Takeover>,
    /// A bounded Failover source: since when every split it is the active reader of is done.
    owned_done_since: Option<Instant>,
}

enum Stage {
    Idle,
    Connecting(JoinHandle<Result<Running>>),
    Running(Box<Running>),
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
    /// Per split: the last whole entry whose rows this run returned (a linked source acknowledges
    /// through it; a batch still decoding when a barrier cancels the poll is not in it).
    emitted_entries: BTreeMap<String, magnetar::MessageId>,
    /// A subscription dispatching to several consumers (`Shared`, `Key_Shared`): per split, the entries
    /// returned since the last checkpoint (acknowledged one by one), and per checkpoint not yet completed
    /// (unlinked: acknowledged when it completes).
    unacked: BTreeMap<String, Vec<magnetar::MessageId>>,
    individual: VecDeque<(u64, BTreeMap<String, Vec<magnetar::MessageId>>)>,
    /// Entries of completed checkpoints whose acknowledgement failed, per split: sent again with the next
    /// completed checkpoint's (a reader that remembers them drops them when they come again, so without
    /// a second acknowledgement they would stay in the backlog).
    ack_retry: BTreeMap<String, Vec<magnetar::MessageId>>,
    /// Linked to the sink's transactions: per split, the last position handed to it.
    published: BTreeMap<String, magnetar::MessageId>,
    /// Per reader (in the split set's order), whether this process read it at the last look; and the
    /// metric that shows how many it reads.
    owned: Option<Vec<bool>>,
    owned_gauge: Option<prometheus::IntGauge>,
    /// Which splits this subtask has and owns, and their lag ([`lag`] polls it), for the runtime.
    partitions: Arc<crate::connector_api::PartitionBoard>,
    lag: Option<lag::LagPoller>,
    /// `pulsar_connect_source_skipped_messages_total` of the table.
    skipped_counter: Option<prometheus::IntCounter>,
    /// Which of the INSERT's source subtasks this is (it reads the splits [`assign`] gives it).
    subtask: Subtask,
    /// Linked through a Failover subscription: when the active readers next ask the broker to dispatch
    /// again what timed-out transactions released ([`SplitReader::rewind`]).
    next_rewind: Option<Instant>,
    /// Failover: when the active readers ask the broker to dispatch again what no one acknowledged, after
    /// a split became this process's (see [`ACTIVATION_REWIND`]).
    activation_rewind: Option<Instant>,
    takeover_metrics: takeover::TakeoverMetrics,
    /// Failover: splits this process became the active reader of since the last take-over began, with
    /// when (their first rows are logged).
    taken_over: BTreeMap<String, Instant>,
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
            emitted_entries: BTreeMap::new(),
            unacked: BTreeMap::new(),
            individual: VecDeque::new(),
            ack_retry: BTreeMap::new(),
            published: BTreeMap::new(),
            owned: None,
            owned_gauge: None,
            partitions: Arc::default(),
            lag: None,
            skipped_counter: None,
            subtask: Subtask::SOLE,
            next_rewind: None,
            activation_rewind: None,
            takeover_metrics: takeover::TakeoverMetrics::new(&TableTelemetry::detached("")),
            taken_over: BTreeMap::new(),
        }
    }

    /// Logs (and counts in `pulsar_connect_source_owned_splits`) which splits this process reads when
    /// that changed: every split with an Exclusive, Shared or Key_Shared subscription (logged for the
    /// shared ones only); with Failover those the broker made this process's consumer active for (the
    /// others wait to take over when the active process goes).
    fn track_ownership(&mut self) {
        let Stage::Running(run) = &self.stage else {
            return;
        };
        let failover = self.spec.cfg.source.subscription_kind == SubscriptionKind::Failover;
        let readers = run.splits.readers();
        let owns = |r: &SplitReader| !failover || r.is_active() == Some(true);
        // Called at every poll: compare without allocating; build the names only on a change.
        if self.owned.as_ref().is_some_and(|o| {
            o.len() == readers.len() && o.iter().zip(readers).all(|(was, r)| *was == owns(r))
        }) {
            return;
        }
        let now: Vec<bool> = readers.iter().map(owns).collect();
        self.partitions
            .set_owned(readers.iter().zip(&now).map(|(r, owned)| {
                let split = r.split();
                let topic = split
                    .topic
                    .partition_of()
                    .map_or_else(|| split.topic.to_string(), |(t, _)| t.to_string());
                (r.key(), topic, split.partition, *owned)
            }));
        let names: Vec<String> = readers
            .iter()
            .filter(|r| owns(r))
            .map(|r| r.split().topic.to_string())
            .collect();
        // The gauge is the table's: every source subtask adds what it reads.
        let before = self
            .owned
            .as_ref()
            .map_or(0, |o| o.iter().filter(|b| **b).count());
        if let Some(g) = &self.owned_gauge {
            g.add(names.len() as i64 - before as i64);
        }
        let total = readers.len();
        // Failover: a split that became this process's may have been dispatched here ahead of messages
        // the previous active consumer had and did not acknowledge (the broker sends those again only
        // when the cursor rewinds): ask for them once the broker's own failover delay has passed.
        if failover
            && (0..readers.len())
                .any(|i| now[i] && self.owned.as_ref().is_none_or(|o| o.get(i) != Some(&true)))
        {
            self.activation_rewind = Some(Instant::now() + ACTIVATION_REWIND);
        }
        // Failover, linked: splits that moved here (not the first look) have their first rows logged.
        if failover
            && run.takeover.is_some()
            && let Some(was) = &self.owned
        {
            let at = Instant::now();
            for (i, r) in readers.iter().enumerate() {
                if now[i] && !was.get(i).copied().unwrap_or(false) {
                    self.taken_over.insert(r.key(), at);
                }
            }
        }
        if self.spec.cfg.source.subscription_kind != SubscriptionKind::Exclusive {
            info!(table = %self.spec.cfg.table, owned = names.len(), of = total, splits = ?names, subscription = %self.subscription, "this process now reads {} of the {total} splits", names.len());
        }
        self.owned = Some(now);
    }

    /// Linked to an exactly-once sink through a subscription other processes share: the watcher that
    /// ends what gone processes left open (ADR 0023). Needs the admin API.
    fn watch_takeovers(&self, run: &Running) -> Option<takeover::Takeover> {
        let cfg = &self.spec.cfg;
        let acks = self.linked()?;
        if cfg.source.subscription_kind == SubscriptionKind::Exclusive {
            return None;
        }
        let Some(admin_url) = cfg.admin_url.clone() else {
            warn!(table = %cfg.table, "without an 'admin-url' a process that dies leaves its open transaction holding its partitions until 'transaction-timeout' passes (with one, the survivors end it within seconds)");
            return None;
        };
        let mut topics: Vec<(crate::pulsar::topics::TopicName, bool)> = run
            .splits
            .readers()
            .iter()
            .map(|r| match r.split().topic.partition_of() {
                Some((parent, _)) => (parent, true),
                None => (r.split().topic.clone(), false),
            })
            .collect();
        topics.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        topics.dedup_by(|a, b| a.0.as_str() == b.0.as_str());
        Some(takeover::spawn(takeover::Watched {
            cfg: cfg.clone(),
            admin_url,
            subscription: self.subscription.clone(),
            topics,
            me: crate::pulsar::reader::consumer_name().to_owned(),
            acks,
            metrics: self.takeover_metrics.clone(),
        }))
    }

    /// The acknowledgements go into the sink's transactions.
    fn linked(&self) -> Option<Arc<TxnAcks>> {
        self.txn_acks.clone().filter(|a| a.is_claimed())
    }

    /// Linked through a Failover subscription: a process that crashed (or a run that failed) left open
    /// transactions holding acknowledgements of messages; when they time out the broker releases those
    /// messages but does not send them to the partition's active consumer, which has read past them. So
    /// every `transaction-timeout` the active readers ask for everything not acknowledged again (those
    /// handed out already are dropped by the reader).
    ///
    /// Linked or not, a split that became this process's gets one such request [`ACTIVATION_REWIND`]
    /// later (see `track_ownership`).
    fn rewind_when_due(&mut self) {
        if self.spec.cfg.source.subscription_kind != SubscriptionKind::Failover {
            return;
        }
        let Stage::Running(run) = &self.stage else {
            return;
        };
        let now = Instant::now();
        let mut requested = self.activation_rewind.is_some_and(|at| now >= at);
        if let Some(acks) = self.linked() {
            let period = acks.txn_timeout().unwrap_or(Duration::from_secs(60));
            let due = *self.next_rewind.get_or_insert(now + period);
            // The take-over watcher ended transactions of gone processes: what they held is released now.
            let signalled = run
                .takeover
                .as_ref()
                .is_some_and(|t| t.signal.take_rewind());
            if now >= due || signalled {
                requested = true;
                self.next_rewind = Some(now + period);
            }
        }
        if !requested {
            // A partition left with holes and nothing newer: ask once it has been quiet a while.
            if let Stage::Running(run) = &mut self.stage {
                for r in run.splits.readers_mut() {
                    if r.rewind_if_idle(IDLE_REWIND) {
                        tracing::debug!(split = %r.split().topic, "quiet for {} s: asking the broker to dispatch again what no one acknowledged", IDLE_REWIND.as_secs());
                    }
                }
            }
            return;
        }
        self.activation_rewind = None;
        let active: Vec<&SplitReader> = run
            .splits
            .readers()
            .iter()
            .filter(|r| r.is_active() == Some(true))
            .collect();
        tracing::debug!(table = %self.spec.cfg.table, splits = active.len(), "asking the broker to dispatch again what no transaction acknowledged");
        for r in active {
            r.rewind();
        }
    }

    async fn running(&mut self) -> Result<&mut Running> {
        loop {
            match &mut self.stage {
                Stage::Idle => {
                    let spec = self.spec.clone();
                    let sub = self.subscription.clone();
                    let restored = self.restored.clone();
                    let linked = self.linked();
                    let subtask = self.subtask;
                    self.stage = Stage::Connecting(tokio::spawn(connect(
                        spec, sub, restored, linked, subtask,
                    )));
                }
                Stage::Connecting(handle) => {
                    let joined = handle.await;
                    self.stage = Stage::Idle;
                    let mut running =
                        joined.map_err(|e| anyhow!("connecting task failed: {e}"))??;
                    for r in running.splits.readers() {
                        self.emitted.entry(r.key()).or_insert_with(|| r.position());
                    }
                    running.takeover = self.watch_takeovers(&running);
                    self.stage = Stage::Running(Box::new(running));
                    if self.lag.is_none() {
                        self.lag =
                            lag::spawn(&self.spec.cfg, &self.subscription, self.partitions.clone());
                    }
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
        let telemetry = &ctx.source_telemetry;
        self.owned_gauge = Some(telemetry.gauge(OWNED_SPLITS));
        self.partitions = ctx.partitions.clone();
        self.skipped_counter = Some(telemetry.counter(SOURCE_SKIPPED));
        self.takeover_metrics = takeover::TakeoverMetrics::new(telemetry);
        self.subtask = ctx.subtask;
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
        // With several processes on the subscription (Failover, Shared, Key_Shared) the cursor is the only
        // position, so an exactly-once sink must always move it in its transactions.
        let kind = self.spec.cfg.source.subscription_kind;
        if kind != SubscriptionKind::Exclusive
            || (self.spec.cfg.admin_url.is_some() && self.spec.cfg.source.key_ranges.is_none())
        {
            // Shared with the other source subtasks that feed the same sink subtask. The sink records
            // this process as the owner of its transactions before it uses them, so that the survivors
            // (several processes on the subscription, ADR 0023) or the next run (Exclusive, ADR 0026)
            // can end them if it dies.
            let owner = self
                .spec
                .cfg
                .admin_url
                .as_ref()
                .map(|url| super::txn_acks::OwnerRecord {
                    key_prefix: takeover::owner_key_prefix(&self.subscription),
                    cfg: self.spec.cfg.clone(),
                    admin_url: url.clone(),
                });
            self.txn_acks = Some(ctx.link.offer_shared(|| match owner {
                Some(o) => TxnAcks::owned_by(o),
                None => TxnAcks::default(),
            }));
        }
    }

    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        self.restore_subtasks(vec![state])
    }

    /// Every subtask of the last run recorded the splits it read; this one keeps those it owns now.
    fn restore_subtasks(&mut self, states: Vec<serde_json::Value>) -> Result<()> {
        let ranges = connect::reader_ranges(&self.spec.cfg);
        let mut merged: Option<SourceState> = None;
        for state in states.into_iter().filter(|s| !s.is_null()) {
            let state: SourceState = serde_json::from_value(state)
                .context("the checkpoint's Pulsar source state is not readable")?;
            let m = merged.get_or_insert_with(|| SourceState {
                subscription: state.subscription.clone(),
                splits: BTreeMap::new(),
            });
            m.splits.extend(
                state
                    .splits
                    .into_iter()
                    .filter(|(key, _)| assign::owns_key(key, &ranges, self.subtask)),
            );
        }
        if let Some(state) = merged {
            self.emitted = state.splits.clone();
            self.restored = Some(state);
        }
        Ok(())
    }

    async fn split_count(&mut self) -> Result<Option<usize>> {
        let cfg = &self.spec.cfg;
        let (client, _, splits) = connect::list_splits(cfg).await?;
        client.close().await;
        Ok(Some(splits.len() * connect::reader_ranges(cfg).len()))
    }

    async fn poll_batch(&mut self, max_rows: usize) -> Result<SourcePoll> {
        let table = self.spec.cfg.table.clone();
        let schema = self.spec.schema.clone();
        let layout = self.spec.cfg.layout.clone();
        let upsert = self.spec.cfg.upsert;
        let interval = discovery_interval(&self.spec.cfg);
        let bounded = self.spec.cfg.source.stop.is_bounded();
        let failover = self.spec.cfg.source.subscription_kind == SubscriptionKind::Failover;
        let opening = SplitOpening::of(
            &self.spec.cfg,
            &self.subscription,
            self.linked().is_some(),
            self.subtask,
        );
        self.track_ownership();
        self.rewind_when_due();
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
            run.discovering = Some(spawn_discovery(
                run.client.clone(),
                run.admin.clone(),
                discovery,
                opening,
            ));
        }

        // A bounded table whose splits were all read to their end (or that has none to read). With
        // Failover, the splits this process is the active reader of: the others are read by the
        // processes the broker chose, and when this one ends, its splits move to them; with Shared and
        // Key_Shared, when every message up to a split's end is acknowledged by the consumers together
        // (ADR 0028).
        if bounded && run.decoding.is_none() {
            // Shared / Key_Shared: whether the consumers together read each split up to its end.
            run.splits.check_ends(&run.client).await;
            let done = if failover {
                let now = Instant::now();
                if run.splits.all_owned_finished() {
                    let since = *run.owned_done_since.get_or_insert(now);
                    now.duration_since(since) >= FAILOVER_SETTLE
                } else {
                    run.owned_done_since = None;
                    false
                }
            } else {
                run.splits.all_finished()
            };
            if done {
                info!(table = %table, "every split of this source was read up to the stop cursor: the source ends");
                return Ok(SourcePoll::End);
            }
        }
        if run.decoding.is_none() {
            let Some((i, msgs)) = run.splits.next_batch(max_rows.max(1), RECEIVE_WAIT).await?
            else {
                return Ok(SourcePoll::Batch(RecordBatch::new_empty(schema)));
            };
            let reader = &run.splits.readers()[i];
            let list_entries = reader.acks_individually();
            let split = reader.split().clone();
            let key = reader.key();
            let position = reader.position();
            let through = reader.last_whole_entry();
            let mut decoders = run
                .decoders
                .take()
                .ok_or_else(|| anyhow!("internal: decoders missing"))?;
            if std::mem::take(&mut run.checkpoint_completed) {
                decoders.checkpoint_completed();
            }
            let job = DecodeJob {
                table: table.clone(),
                schema,
                layout,
                split,
                key,
                position,
                through,
                list_entries,
                upsert,
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
            if let Some(c) = &self.skipped_counter {
                c.inc_by(decoded.skipped);
            }
            warn!(table = %table, skipped = decoded.skipped, total_skipped = self.skipped, "skipped messages the format could not decode (ignore-parse-errors)");
        }
        if let Some(through) = decoded.through {
            self.emitted_entries.insert(decoded.split.clone(), through);
        }
        if !decoded.entries.is_empty() {
            self.unacked
                .entry(decoded.split.clone())
                .or_default()
                .extend(decoded.entries);
        }
        if !self.taken_over.is_empty()
            && decoded.batch.num_rows() > 0
            && let Some(at) = self.taken_over.remove(&decoded.split)
        {
            let secs = at.elapsed().as_secs_f64();
            info!(table = %table, split = %decoded.split, seconds = format!("{secs:.1}"), "first rows of a split this process took over, {secs:.1} s after it moved here");
        }
        self.emitted.insert(decoded.split, decoded.position);
        Ok(SourcePoll::Batch(decoded.batch))
    }

    fn has_buffered(&self) -> bool {
        match &self.stage {
            Stage::Running(run) => run.decoding.is_some() || run.splits.has_queued(),
            _ => false,
        }
    }

    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(serde_json::to_value(SourceState {
            subscription: self.subscription.clone(),
            splits: self.emitted.clone(),
        })?)
    }

    fn snapshot_for(&mut self, id: u64) -> Result<serde_json::Value> {
        self.publish_linked_acks(id);
        if self.linked().is_none() && !self.unacked.is_empty() {
            self.individual
                .push_back((id, std::mem::take(&mut self.unacked)));
        }
        self.snapshots.push_back((id, self.emitted.clone()));
        while self.snapshots.len() > 64 {
            self.snapshots.pop_front();
        }
        self.snapshot()
    }

    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        if let Stage::Running(run) = &mut self.stage {
            run.checkpoint_completed = true;
        }
        self.commit_completed(id).await
    }

    async fn durable_state(&mut self, drop: bool) -> Result<Vec<String>> {
        self.durable_subscriptions(drop).await
    }

    async fn close(&mut self) -> Result<()> {
        self.lag = None;
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
