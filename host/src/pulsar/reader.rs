//! Reading splits (topic-partitions) from exact positions, with the positions a checkpoint needs.
//!
//! Each split is read through a durable, Exclusive subscription whose name the job chooses (deterministic per
//! job, so a restarted job reuses it and nothing leaks). On open the subscription is moved to the split's
//! start position with a seek; on checkpoint completion the position is committed to it with a cumulative
//! ack, so Pulsar's tools show the job's backlog and retention holds what the job has not read.
//!
//! A position is "after message X" (resume after a checkpoint: X and everything before it, including the
//! earlier members of X's batch, are skipped here, because the broker replays the whole entry), "at message
//! X" (inclusive start), earliest, latest (resolved to a concrete "after X" when the job starts, so a restart
//! before the first message does not jump to a newer latest), or a publish timestamp.

use std::cmp::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use magnetar::proto::event::IncomingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::runtime_tokio::Consumer;
use magnetar::{MessageId, PulsarClient};
use serde::{Deserialize, Serialize};

use super::message_id::{format_message_id, parse_message_id};
use super::topics::Split;

/// Where reading a split starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StartPosition {
    Earliest,
    /// Only messages published after the reader starts (resolved by [`resolve_latest`]).
    Latest,
    /// This message and everything after it (`ledger:entry:partition[:batch]`).
    At {
        id: String,
    },
    /// Everything after this message (`ledger:entry:partition[:batch]`).
    After {
        id: String,
    },
    /// Messages published at or after this time (ms since the epoch).
    Timestamp {
        millis: u64,
    },
    /// Wherever the (external) subscription's cursor is; a subscription that does not exist yet is created
    /// at the earliest message when `from_earliest`, else at the latest (`scan.startup.sub-start-offset`).
    SubscriptionCursor {
        from_earliest: bool,
    },
}

impl StartPosition {
    pub fn at(id: &MessageId) -> Self {
        StartPosition::At {
            id: format_message_id(id),
        }
    }

    pub fn after(id: &MessageId) -> Self {
        StartPosition::After {
            id: format_message_id(id),
        }
    }
}

/// `latest` as a concrete position: after the split's last message now (earliest when it is empty).
pub async fn resolve_latest(
    client: &PulsarClient,
    split: &Split,
    subscription: &str,
) -> Result<StartPosition> {
    // A non-durable probe: the job's own subscription is created (or moved) by the reader.
    let consumer = client
        .consumer(split.topic.as_str())
        .subscription(format!("{subscription}-latest-probe"))
        .subscription_type(SubType::Exclusive)
        .durable(false)
        .subscribe()
        .await
        .with_context(|| format!("probing the last message of {}", split.topic))?;
    let last = consumer
        .last_message_id()
        .await
        .with_context(|| format!("getting the last message id of {}", split.topic))?;
    consumer.close().await.ok();
    Ok(if is_empty_marker(&last) {
        StartPosition::Earliest
    } else {
        StartPosition::after(&last)
    })
}

/// Pulsar answers `-1:-1` (or `ledger:-1`) for a topic without messages.
fn is_empty_marker(id: &MessageId) -> bool {
    id.entry_id == u64::MAX || id.ledger_id == u64::MAX
}

/// Total order of message positions within one split: ledger, entry, then batch index (`-1` = whole entry).
pub fn compare_positions(a: &MessageId, b: &MessageId) -> Ordering {
    (a.ledger_id, a.entry_id, a.batch_index).cmp(&(b.ledger_id, b.entry_id, b.batch_index))
}

/// A share of the key hash space `[0, 65535]` (Pulsar's Key_Shared sticky ranges, both ends inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyRange {
    pub start: u16,
    pub end: u16,
}

/// `readers` even shares of the key hash space; the first `65536 % readers` get one slot more (as the
/// reference's `distributeRange`).
pub fn key_ranges(readers: u16) -> Vec<KeyRange> {
    let n = u32::from(readers.max(1));
    let (size, extra) = (65_536 / n, 65_536 % n);
    let mut start = 0u32;
    (0..n)
        .map(|i| {
            let len = size + u32::from(i < extra);
            let r = KeyRange {
                start: start as u16,
                end: (start + len - 1) as u16,
            };
            start += len;
            r
        })
        .collect()
}

async fn subscribe_at(
    client: &PulsarClient,
    split: &Split,
    subscription: &str,
    initial: InitialPosition,
    range: Option<KeyRange>,
    kind: SubscriptionKind,
    receiver_queue: u32,
) -> Result<Consumer> {
    let mut b = client
        .consumer(split.topic.as_str())
        .subscription(subscription)
        .name(consumer_name())
        .initial_position(initial)
        .receiver_queue_size(receiver_queue.max(1) as usize);
    b = match range {
        None => b.subscription_type(kind.sub_type()),
        // A key range is read like the reference's range readers: a non-durable Key_Shared subscription
        // of its own whose sticky range is the share (the broker dispatches only the keys hashing into it).
        Some(r) => b
            .subscription_type(SubType::KeyShared)
            .durable(false)
            .key_shared_policy(magnetar::proto::KeySharedConfig {
                mode: magnetar::proto::pb::KeySharedMode::Sticky,
                sticky_hash_ranges: vec![(i32::from(r.start), i32::from(r.end))],
                allow_out_of_order_delivery: false,
            }),
    };
    b.subscribe()
        .await
        .with_context(|| format!("subscribing '{subscription}' to {}", split.topic))
}

/// The type of a split's subscription (`subscription-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubscriptionKind {
    /// One consumer; a second one is refused by the broker.
    #[default]
    Exclusive,
    /// Several consumers, the broker makes one of them active; the others wait to take over.
    Failover,
    /// Several consumers, each message dispatched to one of them; acknowledged message by message.
    Shared,
    /// As `Shared`, every key to one consumer at a time (in order per key).
    KeyShared,
}

impl SubscriptionKind {
    /// As Pulsar's `SubscriptionType` spells it.
    pub fn name(self) -> &'static str {
        match self {
            SubscriptionKind::Exclusive => "Exclusive",
            SubscriptionKind::Failover => "Failover",
            SubscriptionKind::Shared => "Shared",
            SubscriptionKind::KeyShared => "Key_Shared",
        }
    }

    /// Whether messages are dispatched one by one to several consumers (so acknowledged individually:
    /// the broker refuses cumulative acknowledgements there, and a message may come again after the
    /// consumer that had it went away, behind later ones).
    pub fn dispatches_messages(self) -> bool {
        matches!(self, SubscriptionKind::Shared | SubscriptionKind::KeyShared)
    }

    fn sub_type(self) -> SubType {
        match self {
            SubscriptionKind::Exclusive => SubType::Exclusive,
            SubscriptionKind::Failover => SubType::Failover,
            SubscriptionKind::Shared => SubType::Shared,
            SubscriptionKind::KeyShared => SubType::KeyShared,
        }
    }
}

/// The consumer name of this process's consumers: the broker orders a Failover subscription's consumers by
/// name to pick the active one per partition, so every process needs its own.
pub fn consumer_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!(
            "pulsar-connect-{}{}{:x}-{:08x}",
            host,
            if host.is_empty() { "" } else { "-" },
            std::process::id(),
            nanos
        )
    })
}

/// Messages a split's consumer prefetches by default when the source reads one split (see
/// [`default_receiver_queue`]).
pub const DEFAULT_RECEIVER_QUEUE: u32 = 5_000;

/// The messages a source subtask's splits share by default, and the least each split gets.
const RECEIVER_QUEUE_BUDGET: u32 = 10_000;
const RECEIVER_QUEUE_FLOOR: u32 = 2_000;

/// The receiver queue of each of a source subtask's `readers` split readers when the table does not set
/// `pulsar.reader.receiver-queue-size`: 10 000 messages shared, 2 000 to 5 000 per split. With 1 000-message
/// entries a queue of 2 000 leaves the broker two entries in flight and a fast read of one split waits on
/// every flow grant (BENCHMARKS.md, "Sixth round": 5 000 cost 6–15 % less CPU per message and ~5 MB more
/// peak RSS); several splits keep enough in flight between them.
pub fn default_receiver_queue(readers: usize) -> u32 {
    let readers = u32::try_from(readers.max(1)).unwrap_or(u32::MAX);
    (RECEIVER_QUEUE_BUDGET / readers).clamp(RECEIVER_QUEUE_FLOOR, DEFAULT_RECEIVER_QUEUE)
}

/// How a split's subscription is opened, besides where it starts.
#[derive(Debug, Clone, Copy)]
pub struct Subscribing {
    pub on_data_loss: DataLossPolicy,
    /// Only the keys hashing into this range (see [`SplitReader::open_range`]).
    pub range: Option<KeyRange>,
    pub kind: SubscriptionKind,
    /// Messages the consumer prefetches (`pulsar.reader.receiver-queue-size`).
    pub receiver_queue: u32,
}

impl Subscribing {
    /// The whole split through an Exclusive subscription with the default prefetch.
    pub fn exclusive(on_data_loss: DataLossPolicy) -> Self {
        Subscribing {
            on_data_loss,
            range: None,
            kind: SubscriptionKind::Exclusive,
            receiver_queue: DEFAULT_RECEIVER_QUEUE,
        }
    }
}

/// What happens when the position to resume from no longer exists in the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataLossPolicy {
    /// Fail with an error naming the split and the position (`fail-on-data-loss`, the default).
    Fail,
    /// Resume from the earliest available message and log how far the position was
    /// (`use-earliest-when-data-loss`).
    UseEarliest,
}

/// A split's position for a checkpoint: where to resume, and what may be committed to the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCheckpoint {
    pub resume: StartPosition,
    /// The last message of the last *complete* entry emitted (`ledger:entry:partition`): a cumulative ack
    /// through it never covers an unemitted member of a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_through: Option<String>,
}

/// Reads one split.
///
/// Messages come out in position order, each once: anything at or before the highest position already
/// handed out (or before the start) is dropped. That covers the broker replaying a whole entry after a seek
/// into a batch, redelivery of unacknowledged messages after a reconnect, and messages dispatched around a
/// seek.
pub struct SplitReader {
    split: Split,
    consumer: Consumer,
    /// Messages at or before this position are dropped.
    skip_through: Option<MessageId>,
    /// The last message handed out.
    last_emitted: Option<MessageId>,
    /// The last message of the last complete entry handed out.
    last_complete_entry: Option<MessageId>,
    /// Where this reader started (what a checkpoint records before anything was emitted).
    start: StartPosition,
    /// The share of the key hash space this reader reads (`enable-key-hash-range`); `None`: every key.
    range: Option<KeyRange>,
    /// Hand out whole entries only (see [`Self::whole_entries`]).
    whole_entries: bool,
    /// The subscription's type: with one dispatching messages to several consumers nothing received is
    /// dropped as replayed (a message comes again after another consumer released it).
    kind: SubscriptionKind,
    /// The received members of an entry not yet complete (held back when `whole_entries`).
    carry: Vec<IncomingMessage>,
    /// A Failover subscription whose messages are acknowledged one by one inside transactions (linked to
    /// an exactly-once sink): the entries handed out and not yet [`Self::forget`]-ten. The broker
    /// dispatches again, behind later messages, whatever is not acknowledged when asked to
    /// ([`Self::rewind`]) — a crashed process's timed-out transaction releases its messages that way —
    /// so instead of a position floor, an entry handed out once is dropped when it comes again.
    seen: Option<std::collections::HashSet<(u64, u64)>>,
}

impl SplitReader {
    /// Subscribes and positions the subscription at `start`.
    pub async fn open(
        client: &PulsarClient,
        split: Split,
        subscription: &str,
        start: StartPosition,
        on_data_loss: DataLossPolicy,
    ) -> Result<SplitReader> {
        Self::open_range(
            client,
            split,
            subscription,
            start,
            Subscribing::exclusive(on_data_loss),
        )
        .await
    }

    /// [`Self::open`] through a subscription of type `how.kind`, or for the keys hashing into `how.range`
    /// only (through a non-durable Key_Shared subscription named after the range, so nothing is left behind
    /// and nothing is committed; `kind` does not apply).
    pub async fn open_range(
        client: &PulsarClient,
        split: Split,
        subscription: &str,
        start: StartPosition,
        how: Subscribing,
    ) -> Result<SplitReader> {
        let Subscribing {
            on_data_loss,
            range,
            kind,
            receiver_queue,
        } = how;
        let owned;
        let subscription = match range {
            Some(r) => {
                owned = format!("{subscription}-keys-{}-{}", r.start, r.end);
                owned.as_str()
            }
            None => subscription,
        };
        let initial = match start {
            StartPosition::SubscriptionCursor {
                from_earliest: false,
            } => InitialPosition::Latest,
            _ => InitialPosition::Earliest,
        };
        let consumer = subscribe_at(
            client,
            &split,
            subscription,
            initial,
            range,
            kind,
            receiver_queue,
        )
        .await?;
        let mut start = start;
        let mut skip_through = None;
        match &start {
            // The subscription's own cursor is the position: nothing to move.
            StartPosition::SubscriptionCursor { .. } => {}
            // A key range's non-durable subscription is new: it already starts at the earliest message
            // (a seek would make the broker dispatch the first messages twice).
            StartPosition::Earliest if range.is_some() => {}
            StartPosition::Earliest => consumer.seek_to_earliest().await?,
            StartPosition::Latest => consumer.seek_to_latest().await?,
            StartPosition::Timestamp { millis } => consumer.seek_to_timestamp(*millis).await?,
            StartPosition::At { id } => {
                let id = position_id(id, &split)?;
                consumer
                    .seek_to_message(MessageId {
                        batch_index: -1,
                        batch_size: -1,
                        ..id
                    })
                    .await?;
                // The broker replays the whole entry: drop the members before the start (batch index -2
                // sorts before every member of the entry, -1 included).
                skip_through = Some(MessageId {
                    batch_index: id.batch_index.max(-1) - 1,
                    ..id
                });
            }
            StartPosition::After { id } => {
                let id = position_id(id, &split)?;
                let last = consumer.last_message_id().await?;
                if is_empty_marker(&last)
                    || compare_positions(
                        &MessageId {
                            batch_index: -1,
                            ..id
                        },
                        &last,
                    ) == Ordering::Greater
                {
                    let what = format!(
                        "the position to resume {} from ({}) is beyond the end of the topic (last message: {}): \
                         the topic was truncated, deleted or recreated, so messages may be lost",
                        split.topic,
                        format_message_id(&id),
                        if is_empty_marker(&last) {
                            "none".to_owned()
                        } else {
                            format_message_id(&last)
                        }
                    );
                    match on_data_loss {
                        DataLossPolicy::Fail => bail!(
                            "data loss: {what} (set 'properties.pulsar.reader.fail-on-data-loss' = 'false' to continue from the earliest message)"
                        ),
                        DataLossPolicy::UseEarliest => {
                            tracing::warn!(split = %split.topic, "data loss: {what}; resuming from the earliest message");
                            consumer.seek_to_earliest().await?;
                            start = StartPosition::Earliest;
                        }
                    }
                } else {
                    consumer
                        .seek_to_message(MessageId {
                            batch_index: -1,
                            batch_size: -1,
                            ..id
                        })
                        .await?;
                    skip_through = Some(id);
                }
            }
        }
        Ok(SplitReader {
            split,
            consumer,
            skip_through,
            last_emitted: None,
            last_complete_entry: None,
            start,
            range,
            whole_entries: kind.dispatches_messages(),
            carry: Vec::new(),
            kind,
            seen: None,
        })
    }

    /// Hands out whole entries only: the members of a batch that has not been received completely are held
    /// back until it has, so every position handed out is the end of an entry and a cumulative ack
    /// through it covers exactly what was handed out (the source's acknowledgements inside a transaction).
    ///
    /// With a Failover subscription the entries are acknowledged one by one, and an entry handed out
    /// once is not handed out again (see [`Self::rewind`]).
    pub fn whole_entries(&mut self) {
        self.whole_entries = true;
        if self.kind == SubscriptionKind::Failover {
            self.seen = Some(std::collections::HashSet::new());
        }
    }

    /// Whether the entries handed out are acknowledged one by one (messages dispatched to several
    /// consumers, or a linked Failover subscription).
    pub fn acks_individually(&self) -> bool {
        self.kind.dispatches_messages() || self.remembers_entries()
    }

    /// Whether this reader remembers the entries it handed out until [`Self::forget`] (a linked Failover
    /// subscription): only then are the acknowledged entries worth handing back.
    pub fn remembers_entries(&self) -> bool {
        self.seen.is_some()
    }

    /// Asks the broker to dispatch again, from the subscription's cursor, every message that is neither
    /// acknowledged nor held by an open transaction (messages a timed-out transaction released are not
    /// sent again on their own to the active consumer of a Failover subscription, which has read past
    /// them). Entries handed out before are dropped when they come again.
    pub fn rewind(&self) {
        self.consumer.redeliver_unacked();
    }

    /// `entries` are acknowledged for good (their transaction committed a checkpoint ago): the broker
    /// will not send them again, so they need not be remembered.
    pub fn forget(&mut self, entries: &[MessageId]) {
        if let Some(seen) = &mut self.seen {
            for id in entries {
                seen.remove(&(id.ledger_id, id.entry_id));
            }
        }
    }

    /// Whether the broker made this consumer the active one of its Failover subscription; `None` before
    /// the broker said (and always for the other subscription types).
    pub fn is_active(&self) -> Option<bool> {
        self.consumer.is_active()
    }

    /// A handle to the subscription's consumer (acknowledgements from elsewhere, e.g. a sink's
    /// transaction).
    pub fn consumer(&self) -> &Consumer {
        &self.consumer
    }

    /// The last message handed out, when it ends an entry (always, with [`Self::whole_entries`]).
    pub fn last_whole_entry(&self) -> Option<MessageId> {
        self.last_complete_entry
    }

    pub fn split(&self) -> &Split {
        &self.split
    }

    /// What a checkpoint keys this reader's position by: the split's topic, with the key range when
    /// there is one (`<topic>#keys=<start>-<end>`).
    pub fn key(&self) -> String {
        state_key(&self.split, self.range)
    }

    pub fn range(&self) -> Option<KeyRange> {
        self.range
    }

    /// Up to `max` messages, waiting at most `wait` for the first one. Cancel safe.
    pub async fn next_batch(&mut self, max: usize, wait: Duration) -> Result<Vec<IncomingMessage>> {
        let mut batch = self
            .consumer
            .receive_batch(max, wait)
            .await
            .with_context(|| format!("receiving from {}", self.split.topic))?;
        let mut floor = [
            self.last_emitted,
            self.skip_through,
            self.carry.last().map(|m| m.message_id),
        ]
        .into_iter()
        .flatten()
        .max_by(compare_positions);
        let before = batch.len();
        let dispatched = self.kind.dispatches_messages();
        let member = |id: &MessageId| (id.ledger_id, id.entry_id, id.batch_index);
        // Members received and not handed out: the entry held back, then this batch.
        let mut fresh: std::collections::HashSet<(u64, u64, i32)> = match &self.seen {
            Some(_) => self.carry.iter().map(|m| member(&m.message_id)).collect(),
            None => Default::default(),
        };
        let seen = &self.seen;
        batch.retain(|m| {
            if let Some(seen) = seen {
                // An entry handed out already, or a second copy of a member not handed out yet.
                let id = &m.message_id;
                return !seen.contains(&(id.ledger_id, id.entry_id)) && fresh.insert(member(id));
            }
            if dispatched {
                return true;
            }
            let newer =
                floor.is_none_or(|f| compare_positions(&m.message_id, &f) == Ordering::Greater);
            if newer {
                floor = Some(m.message_id);
            }
            newer
        });
        if batch.len() < before {
            tracing::debug!(split = %self.split.topic, dropped = before - batch.len(), "dropped replayed messages");
        }
        if self.whole_entries {
            if !self.carry.is_empty() {
                let mut joined = std::mem::take(&mut self.carry);
                joined.append(&mut batch);
                batch = joined;
            }
            // The members of the last entry, when it is not complete yet, wait for the rest.
            if let Some(last) = batch.last().map(|m| m.message_id)
                && last.batch_index >= 0
                && last.batch_index + 1 < last.batch_size
            {
                let first_of_entry = batch
                    .iter()
                    .rposition(|m| {
                        (m.message_id.ledger_id, m.message_id.entry_id)
                            != (last.ledger_id, last.entry_id)
                    })
                    .map_or(0, |i| i + 1);
                self.carry = batch.split_off(first_of_entry);
            }
        }
        if let Some(seen) = &mut self.seen {
            // Once per entry, not per member of a batch.
            let mut last = None;
            for m in &batch {
                let entry = (m.message_id.ledger_id, m.message_id.entry_id);
                if last != Some(entry) {
                    seen.insert(entry);
                    last = Some(entry);
                }
            }
        }
        for m in &batch {
            let id = m.message_id;
            if id.batch_index < 0 || id.batch_index + 1 >= id.batch_size {
                self.last_complete_entry = Some(MessageId {
                    batch_index: -1,
                    batch_size: -1,
                    ..id
                });
            }
        }
        if let Some(last) = batch.last() {
            self.last_emitted = Some(last.message_id);
        }
        Ok(batch)
    }

    /// The position after everything handed out so far.
    pub fn position(&self) -> SplitCheckpoint {
        SplitCheckpoint {
            resume: match &self.last_emitted {
                Some(id) => StartPosition::after(id),
                None => self.start.clone(),
            },
            commit_through: self.last_complete_entry.as_ref().map(format_message_id),
        }
    }

    /// Commits `checkpoint` (a value of [`Self::position`] taken at a completed checkpoint) to the durable
    /// subscription: a cumulative ack through its last complete entry.
    pub async fn commit(&self, checkpoint: &SplitCheckpoint) -> Result<()> {
        if self.range.is_some() {
            // A non-durable range subscription: nothing to commit (the checkpoint holds the position).
            return Ok(());
        }
        if let Some(id) = &checkpoint.commit_through {
            let id = position_id(id, &self.split)?;
            self.consumer.ack_cumulative(id).await.with_context(|| {
                format!(
                    "committing {} on {}",
                    format_message_id(&id),
                    self.split.topic
                )
            })?;
        }
        Ok(())
    }

    pub async fn close(self) -> Result<()> {
        self.consumer.close().await?;
        Ok(())
    }
}

/// Several splits read as one stream of batches, each batch from one split.
pub struct SplitSet {
    readers: Vec<SplitReader>,
    next: usize,
}

impl SplitSet {
    pub fn new(readers: Vec<SplitReader>) -> Self {
        SplitSet { readers, next: 0 }
    }

    pub fn readers(&self) -> &[SplitReader] {
        &self.readers
    }

    pub fn readers_mut(&mut self) -> &mut [SplitReader] {
        &mut self.readers
    }

    /// Whether some split has received messages that [`Self::next_batch`] would return without waiting.
    pub fn has_queued(&self) -> bool {
        self.readers
            .iter()
            .any(|r| r.consumer.available_in_queue() > 0)
    }

    pub fn push(&mut self, reader: SplitReader) {
        self.readers.push(reader);
    }

    /// The next non-empty batch (at most `max` messages) and the index of its reader, waiting at most
    /// `wait`; `None` when nothing arrived. Splits are served round robin. Cancel safe.
    pub async fn next_batch(
        &mut self,
        max: usize,
        wait: Duration,
    ) -> Result<Option<(usize, Vec<IncomingMessage>)>> {
        let n = self.readers.len();
        if n == 0 {
            tokio::time::sleep(wait).await;
            return Ok(None);
        }
        // What is already buffered, without waiting, starting after the split served last.
        for k in 0..n {
            let i = (self.next + k) % n;
            let batch = self.readers[i].next_batch(max, Duration::ZERO).await?;
            if !batch.is_empty() {
                self.next = (i + 1) % n;
                return Ok(Some((i, batch)));
            }
        }
        // Nothing buffered: wait for the first split that receives something.
        let waits = self
            .readers
            .iter_mut()
            .map(|r| Box::pin(r.next_batch(max, wait)));
        let (result, i, _) = futures::future::select_all(waits).await;
        let batch = result?;
        if batch.is_empty() {
            return Ok(None);
        }
        self.next = (i + 1) % n;
        Ok(Some((i, batch)))
    }

    pub async fn close(self) -> Result<()> {
        for r in self.readers {
            r.close().await?;
        }
        Ok(())
    }
}

/// The checkpoint key of a split read whole (its topic) or by key range.
pub fn state_key(split: &Split, range: Option<KeyRange>) -> String {
    match range {
        None => split.topic.to_string(),
        Some(r) => format!("{}#keys={}-{}", split.topic, r.start, r.end),
    }
}

/// Parses a recorded position and checks it belongs to the split.
fn position_id(text: &str, split: &Split) -> Result<MessageId> {
    let mut id = parse_message_id(text)?;
    if id.partition != split.partition {
        if id.partition == -1 {
            id.partition = split.partition;
        } else {
            bail!(
                "message id {text} names partition {} but is used for {} (partition {})",
                id.partition,
                split.topic,
                split.partition
            );
        }
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_order_by_ledger_entry_and_batch_index() {
        let id = |l, e, b| MessageId {
            ledger_id: l,
            entry_id: e,
            batch_index: b,
            ..MessageId::EARLIEST
        };
        assert_eq!(
            compare_positions(&id(1, 2, 3), &id(1, 2, 4)),
            Ordering::Less
        );
        assert_eq!(
            compare_positions(&id(1, 3, -1), &id(1, 2, 9)),
            Ordering::Greater
        );
        assert_eq!(
            compare_positions(&id(2, 0, -1), &id(1, 99, 0)),
            Ordering::Greater
        );
        assert_eq!(
            compare_positions(&id(1, 2, -1), &id(1, 2, 0)),
            Ordering::Less
        );
    }

    #[test]
    fn the_default_receiver_queue_is_shared_by_the_splits_within_bounds() {
        assert_eq!(default_receiver_queue(0), 5_000);
        assert_eq!(default_receiver_queue(1), 5_000);
        assert_eq!(default_receiver_queue(2), 5_000);
        assert_eq!(default_receiver_queue(3), 3_333);
        assert_eq!(default_receiver_queue(4), 2_500);
        assert_eq!(default_receiver_queue(5), 2_000);
        assert_eq!(default_receiver_queue(400), 2_000);
    }

    #[test]
    fn key_ranges_cover_the_hash_space_evenly() {
        assert_eq!(
            key_ranges(1),
            vec![KeyRange {
                start: 0,
                end: 65535
            }]
        );
        let three = key_ranges(3);
        assert_eq!(
            three,
            vec![
                KeyRange {
                    start: 0,
                    end: 21845
                },
                KeyRange {
                    start: 21846,
                    end: 43690
                },
                KeyRange {
                    start: 43691,
                    end: 65535
                },
            ]
        );
        for n in [2u16, 5, 7, 1000] {
            let r = key_ranges(n);
            assert_eq!(r.len(), n as usize);
            assert_eq!(r[0].start, 0);
            assert_eq!(r.last().unwrap().end, 65535);
            for w in r.windows(2) {
                assert_eq!(w[0].end as u32 + 1, w[1].start as u32);
            }
        }
    }

    #[test]
    fn positions_serialise_readably() {
        let p = StartPosition::After {
            id: "1:2:-1:3".into(),
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"kind":"after","id":"1:2:-1:3"}"#
        );
        let back: StartPosition =
            serde_json::from_str(r#"{"kind":"timestamp","millis":5}"#).unwrap();
        assert_eq!(back, StartPosition::Timestamp { millis: 5 });
    }
}
