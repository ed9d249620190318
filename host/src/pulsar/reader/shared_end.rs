//! Where a bounded read ends over a subscription that dispatches messages to several consumers
//! (`Shared`, `Key_Shared`), where several processes (or source subtasks) each receive some of every
//! split's messages: no reader sees a split's messages in order, so none can tell from what it received
//! that the split is read up to its end.
//!
//! The subscription can: its mark-delete position is the last entry up to which everything is
//! acknowledged, by whichever consumer. A reader finishes a split when the first entry after it lies
//! beyond the split's end — every entry before the end was then handed out by someone and acknowledged
//! at a completed checkpoint (or committed with a transaction). The mark-delete position comes with the
//! last message id (`CommandGetLastMessageId`); the entry after it is read through a short-lived
//! non-durable probe subscription.
//!
//! Entries beyond the end that reach a reader are not handed out: they are held (the split is not
//! pulled from until the next check) and then given back to the broker, which dispatches them to
//! another consumer whose end may be later (each process resolves `latest` when its reader opens),
//! or leaves them in the backlog.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use magnetar::MessageId;
use magnetar::PulsarClient;
use magnetar::proto::event::IncomingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::runtime_tokio::Consumer;

use super::stop::EndCheck;
use super::subscribe::consumer_name;
use crate::pulsar::topics::Split;

/// How often a reader that is not finished asks the broker how far the subscription is acknowledged.
pub(super) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How long the probe waits for the entry after the mark-delete position (it exists: the broker's last
/// message is beyond it).
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// A shared reader's state of its split's end.
#[derive(Debug)]
pub(super) struct SharedEnd {
    /// Entries beyond the end received since the last check (ledger, entry), given back then.
    held: Vec<(u64, u64)>,
    /// Something up to the end arrived since the last check (the split is certainly not done).
    fresh: bool,
    next_check: Instant,
    /// The probe subscriptions' name (one per reader) and how many were opened (each gets a name of
    /// its own: one dropped by a cancelled poll may not have closed yet).
    probe: String,
    probes: u64,
}

impl SharedEnd {
    pub(super) fn new(subscription: &str) -> SharedEnd {
        SharedEnd {
            held: Vec::new(),
            fresh: false,
            next_check: Instant::now(),
            probe: format!("{subscription}-end-probe-{}", consumer_name()),
            probes: 0,
        }
    }

    /// Whether entries beyond the end arrived since the last check: the split is not pulled from
    /// until then (what follows them in dispatch order is beyond the end too, except entries the
    /// broker dispatches again).
    pub(super) fn is_parked(&self) -> bool {
        !self.held.is_empty()
    }

    /// Removes from `batch` (whole entries) every entry with a member beyond the end and holds it.
    pub(super) fn sift(&mut self, batch: &mut Vec<IncomingMessage>, check: &EndCheck) {
        let entry = |m: &IncomingMessage| (m.message_id.ledger_id, m.message_id.entry_id);
        let mut beyond: Vec<(u64, u64)> = batch
            .iter()
            .filter(|m| check.beyond(m))
            .map(entry)
            .collect();
        beyond.dedup();
        if !beyond.is_empty() {
            let set: std::collections::HashSet<(u64, u64)> = beyond.iter().copied().collect();
            batch.retain(|m| !set.contains(&entry(m)));
            self.held.extend(beyond);
        }
        if !batch.is_empty() {
            self.fresh = true;
        }
    }

    /// Every [`CHECK_EVERY`]: whether the split is read up to its end by the subscription's consumers
    /// together. Gives back the entries held since the last check either way.
    pub(super) async fn check(
        &mut self,
        client: &PulsarClient,
        split: &Split,
        consumer: &Consumer,
        end: &EndCheck,
    ) -> Result<bool> {
        let now = Instant::now();
        if now < self.next_check {
            return Ok(false);
        }
        self.next_check = now + CHECK_EVERY;
        self.release(consumer, split);
        if std::mem::take(&mut self.fresh) {
            return Ok(false);
        }
        let (last, mark) = acknowledged_through(consumer, split).await?;
        let Some(mark) = mark else {
            return Ok(false);
        };
        if end.done_after(&mark) {
            return Ok(true);
        }
        let ordered = |id: &MessageId| (id.ledger_id as i64, id.entry_id as i64);
        if ordered(&last) <= ordered(&mark) {
            // Nothing after the mark-delete position: everything there is, is acknowledged (an end
            // beyond the last message is the last message when the reader opened, covered above).
            return Ok(false);
        }
        self.probes += 1;
        let probe = format!("{}-{}", self.probe, self.probes);
        match entry_after(client, split, &probe, &mark).await? {
            Some(m) => Ok(end.beyond(&m)),
            None => Ok(false),
        }
    }

    /// Gives the held entries back to the broker (dispatched again, to any consumer).
    pub(super) fn release(&mut self, consumer: &Consumer, split: &Split) {
        if self.held.is_empty() {
            return;
        }
        tracing::debug!(split = %split.topic, entries = self.held.len(), "giving back entries beyond the stop cursor");
        let ids = std::mem::take(&mut self.held)
            .into_iter()
            .map(|(ledger_id, entry_id)| MessageId {
                ledger_id,
                entry_id,
                partition: split.partition,
                batch_index: -1,
                batch_size: -1,
            })
            .collect();
        consumer.negative_ack_many(ids);
    }
}

/// The split's last message id and its subscription's mark-delete position (the entry up to which
/// everything is acknowledged, as the position of a whole entry of the split); `None` while nothing is
/// acknowledged (an entry id of -1, which comes as `u64::MAX`).
pub(super) async fn acknowledged_through(
    consumer: &Consumer,
    split: &Split,
) -> Result<(MessageId, Option<MessageId>)> {
    let (last, mark) = consumer.last_and_mark_delete().await.with_context(|| {
        format!(
            "asking how far the subscription of {} is acknowledged",
            split.topic
        )
    })?;
    let mark = mark
        .filter(|m| (m.entry_id as i64) >= 0)
        .map(|m| MessageId {
            partition: split.partition,
            batch_index: -1,
            batch_size: -1,
            ..m
        });
    Ok((last, mark))
}

/// The last member of the first entry after `mark` (its last member: a batch is beyond the end when any
/// member is), read through the non-durable subscription `name`.
async fn entry_after(
    client: &PulsarClient,
    split: &Split,
    name: &str,
    mark: &MessageId,
) -> Result<Option<IncomingMessage>> {
    let probe = client
        .consumer(split.topic.as_str())
        .subscription(name)
        .name(consumer_name())
        .subscription_type(SubType::Exclusive)
        .durable(false)
        .initial_position(InitialPosition::Earliest)
        .start_message_id(MessageId {
            batch_index: -1,
            batch_size: -1,
            ..*mark
        })
        .receiver_queue_size(64)
        .subscribe()
        .await
        .with_context(|| format!("opening the end probe of {}", split.topic))?;
    let after = |m: &IncomingMessage| {
        (m.message_id.ledger_id as i64, m.message_id.entry_id as i64)
            > (mark.ledger_id as i64, mark.entry_id as i64)
    };
    let deadline = Instant::now() + PROBE_WAIT;
    let mut found: Option<IncomingMessage> = None;
    while Instant::now() < deadline {
        let batch = probe
            .receive_batch(64, deadline.saturating_duration_since(Instant::now()))
            .await?;
        if batch.is_empty() {
            break;
        }
        let mut done = false;
        for m in batch.into_iter().filter(after) {
            let id = m.message_id;
            match &found {
                Some(f)
                    if (f.message_id.ledger_id, f.message_id.entry_id)
                        != (id.ledger_id, id.entry_id) =>
                {
                    done = true;
                    break;
                }
                _ => {}
            }
            let last_member = id.batch_index < 0 || id.batch_index + 1 >= id.batch_size;
            found = Some(m);
            if last_member {
                done = true;
                break;
            }
        }
        if done {
            break;
        }
    }
    probe.close().await.ok();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pulsar::reader::stop::{StopCursor, resolve_end};

    fn message(ledger: u64, entry: u64, batch_index: i32, batch_size: i32) -> IncomingMessage {
        IncomingMessage {
            message_id: MessageId {
                ledger_id: ledger,
                entry_id: entry,
                partition: 0,
                batch_index,
                batch_size,
            },
            metadata: std::sync::Arc::new(magnetar::proto::pb::MessageMetadata::default()),
            single_metadata: None,
            payload: Default::default(),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: Instant::now(),
        }
    }

    #[test]
    fn entries_beyond_the_end_are_held_whole_and_the_rest_handed_out() {
        // Exclusive at 5:10:0: entry 5:10 and later are beyond; a batch the cursor cuts is beyond whole.
        let cursor = StopCursor::AtMessage(MessageId {
            ledger_id: 5,
            entry_id: 10,
            partition: 0,
            batch_index: 1,
            batch_size: -1,
        });
        let last = message(9, 0, -1, -1).message_id;
        let end = resolve_end(&cursor, Some(&last), 0);
        let check = EndCheck::new(end.as_ref(), None).unwrap().unwrap();
        let mut shared = SharedEnd::new("sub");
        // Redelivered out of order: 5:12 before 5:3; the batch 5:10 (3 members) straddles the cursor.
        let mut batch = vec![
            message(5, 12, -1, -1),
            message(5, 3, -1, -1),
            message(5, 10, 0, 3),
            message(5, 10, 1, 3),
            message(5, 10, 2, 3),
            message(5, 9, -1, -1),
        ];
        shared.sift(&mut batch, &check);
        let kept: Vec<_> = batch
            .iter()
            .map(|m| (m.message_id.entry_id, m.message_id.batch_index))
            .collect();
        assert_eq!(kept, vec![(3, -1), (9, -1)]);
        let held: Vec<_> = shared.held.iter().map(|(_, entry)| *entry).collect();
        assert_eq!(held, vec![12, 10], "one id per entry held");
        assert!(shared.is_parked() && shared.fresh);
        // Nothing beyond: handed out as it came, nothing held.
        let mut shared = SharedEnd::new("sub");
        let mut batch = vec![message(5, 1, -1, -1), message(5, 2, -1, -1)];
        shared.sift(&mut batch, &check);
        assert_eq!(batch.len(), 2);
        assert!(!shared.is_parked());
    }
}
