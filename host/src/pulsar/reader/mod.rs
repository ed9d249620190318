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

mod failover_end;
mod position;
mod shared_end;
mod split_set;
mod stop;
mod subscribe;

use std::cmp::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use magnetar::MessageId;
use magnetar::PulsarClient;
use magnetar::proto::event::IncomingMessage;
use magnetar::proto::pb::command_subscribe::InitialPosition;
use magnetar::runtime_tokio::Consumer;

use failover_end::FailoverEnd;
pub use position::{SplitCheckpoint, StartPosition, compare_positions, resolve_latest, state_key};
use position::{is_empty_marker, position_id};
use shared_end::SharedEnd;
pub use split_set::SplitSet;
use stop::EndCheck;
pub use stop::{SplitEnd, StopCursor, java_compare, resolve_end};
use subscribe::subscribe_at;
pub use subscribe::{
    DEFAULT_RECEIVER_QUEUE, DataLossPolicy, KeyRange, Subscribing, SubscriptionKind, consumer_name,
    default_receiver_queue, key_ranges,
};

use super::message_id::format_message_id;
use super::topics::Split;

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
    /// When the consumer last received anything (handed out or dropped).
    last_received: std::time::Instant,
    /// Whether [`Self::rewind_if_idle`] asked for redelivery since then.
    idle_rewound: bool,
    /// A bounded table: the split's end, as recorded and as checked.
    end: Option<SplitEnd>,
    end_check: Option<EndCheck>,
    /// Everything up to the end was handed out (with several consumers on the subscription: by them
    /// together, and acknowledged).
    finished: bool,
    /// A bounded split read through a subscription that dispatches to several consumers.
    shared_end: Option<SharedEnd>,
    /// A bounded split read through a Failover subscription.
    failover_end: Option<FailoverEnd>,
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
            last_received: std::time::Instant::now(),
            idle_rewound: false,
            end: None,
            end_check: None,
            finished: false,
            shared_end: None,
            failover_end: None,
        })
    }

    /// Bounds the split by the table's stop cursor: the end `recorded` in the checkpoint this reader
    /// resumes from, else `cursor` resolved against the split's last message now. A split with nothing
    /// left to read up to its end is finished at once.
    pub async fn bound(&mut self, cursor: &StopCursor, recorded: Option<SplitEnd>) -> Result<()> {
        if !cursor.is_bounded() {
            return Ok(());
        }
        let recorded = recorded.filter(|end| {
            let same = end.is_for(cursor);
            if !same {
                tracing::info!(split = %self.split.topic, was = end.cursor.as_deref().unwrap_or(""), now = %cursor.describe(), "the table's stop cursor changed since the checkpoint: the split's end is resolved again");
            }
            same
        });
        let end = match recorded {
            Some(end) => Some(end),
            None => {
                let last = self.consumer.last_message_id().await.with_context(|| {
                    format!("getting the last message id of {}", self.split.topic)
                })?;
                let last = (!is_empty_marker(&last)).then_some(last);
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64);
                resolve_end(cursor, last.as_ref(), now)
            }
        };
        let publish_time = match cursor {
            StopCursor::AtPublishTime(t) => Some(*t),
            _ => None,
        };
        self.end_check = EndCheck::new(end.as_ref(), publish_time).with_context(|| {
            format!(
                "the end of {} recorded in the checkpoint cannot be read",
                self.split.topic
            )
        })?;
        self.end = end;
        if self.end_check.is_some() && self.kind.dispatches_messages() && self.range.is_none() {
            self.shared_end = Some(SharedEnd::new(&self.consumer.subscription()));
        }
        if self.end_check.is_some() && self.kind == SubscriptionKind::Failover {
            self.failover_end = Some(FailoverEnd::new());
        }
        if let Some(check) = &self.end_check {
            self.finished = check.is_empty()
                || match &self.start {
                    StartPosition::After { id } if self.shared_end.is_none() => {
                        position_id(id, &self.split).is_ok_and(|id| check.done_after(&id))
                    }
                    _ => false,
                };
        }
        if self.finished {
            tracing::info!(split = %self.split.topic, "nothing to read before the stop cursor: the split ends at once");
        }
        Ok(())
    }

    /// A bounded split whose messages up to its end were all handed out.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether [`SplitSet::next_batch`] pulls from this split: not when it is finished, nor while it
    /// holds entries beyond the end that it gives back at the next [`Self::check_end`].
    pub fn takes_messages(&self) -> bool {
        !self.finished && !self.shared_end.as_ref().is_some_and(SharedEnd::is_parked)
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

    /// The active consumer of a Failover subscription that received nothing for `idle`: asks the broker
    /// once (until something arrives) to dispatch again whatever is not acknowledged. Messages another
    /// consumer had when the partition moved, or that a cut connection lost in flight, are dispatched
    /// again only when the cursor rewinds; a partition with such holes and nothing newer would wait for
    /// them for ever. At the end of a drained partition the request finds nothing to send. Returns whether
    /// it asked.
    pub fn rewind_if_idle(&mut self, idle: Duration) -> bool {
        // Called at every poll: the cheap checks before the consumer's lock.
        if self.idle_rewound
            || self.last_received.elapsed() < idle
            || self.is_active() != Some(true)
        {
            return false;
        }
        self.idle_rewound = true;
        self.rewind();
        true
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
        if !batch.is_empty() {
            self.last_received = std::time::Instant::now();
            self.idle_rewound = false;
        }
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
        if self.whole_entries && !self.carry.is_empty() {
            let mut joined = std::mem::take(&mut self.carry);
            joined.append(&mut batch);
            batch = joined;
        }
        if let (Some(shared), Some(check)) = (&mut self.shared_end, &self.end_check) {
            // Dispatched to several consumers: no order to cut at; entries beyond the end are held.
            if let Some(first) = incomplete_last_entry(&batch) {
                self.carry = batch.split_off(first);
            }
            shared.sift(&mut batch, check);
        } else if let Some(check) = &self.end_check
            && let Some(cut) = batch.iter().position(|m| check.beyond(m))
        {
            batch.truncate(cut);
            self.finished = true;
            if self.whole_entries
                && let Some(first) = incomplete_last_entry(&batch)
            {
                // The end cuts an entry whose acknowledgement covers it whole: it is not read.
                batch.truncate(first);
            }
            tracing::info!(split = %self.split.topic, "reached the stop cursor: the split ends");
        }
        if self.whole_entries && !self.finished {
            // The members of the last entry, when it is not complete yet, wait for the rest.
            if let Some(first) = incomplete_last_entry(&batch) {
                self.carry = batch.split_off(first);
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
            if !self.finished
                && self.shared_end.is_none()
                && let Some(check) = &self.end_check
                && check.done_after(&last.message_id)
            {
                self.finished = true;
                tracing::info!(split = %self.split.topic, "read up to the stop cursor: the split ends");
            }
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
            end: self.end.clone(),
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

/// Where the members of `batch`'s last entry begin, when that entry is a batch not received whole.
fn incomplete_last_entry(batch: &[IncomingMessage]) -> Option<usize> {
    let last = batch.last()?.message_id;
    if last.batch_index < 0 || last.batch_index + 1 >= last.batch_size {
        return None;
    }
    Some(
        batch
            .iter()
            .rposition(|m| {
                (m.message_id.ledger_id, m.message_id.entry_id) != (last.ledger_id, last.entry_id)
            })
            .map_or(0, |i| i + 1),
    )
}
