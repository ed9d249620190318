//! Where reading a split ends (`source.stop.*`): the table's stop cursor, resolved per split when its
//! reader opens into a [`SplitEnd`] that checkpoints keep (a restart does not move it), and the check of
//! each message against it; and [`SplitReader::check_end`](super::SplitReader::check_end), which ends a
//! split whose end no message of its own shows (a subscription shared with other consumers,
//! `shared_end`; a Failover one acknowledged up to the end already, `failover_end`).
//!
//! Message ids are compared as the Java client compares them: ledger, entry, partition, then batch index
//! (`-1`, a message outside a batch or an id written without one, before every member of a batch).
//!
//! Beyond the Apache connector, every split also ends at the last entry it held when its reader opened
//! when the cursor lies beyond it (`latest`; a message id or a publish time the split has not reached
//! yet): a backfill reads what is there and ends, instead of waiting for a message that may never come.
//! An empty split ends at once.

use std::cmp::Ordering;

use magnetar::proto::event::IncomingMessage;
use magnetar::{MessageId, PulsarClient};
use serde::{Deserialize, Serialize};

use crate::pulsar::message_id::{MessageIdParseError, format_message_id, parse_message_id};

/// The table's stop cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum StopCursor {
    /// Unbounded.
    Never,
    /// The last message of each split when its reader opens, included.
    Latest,
    /// Messages before this id (`source.stop.at-message-id`, exclusive).
    AtMessage(MessageId),
    /// Messages up to this id (`source.stop.after-message-id`, inclusive).
    AfterMessage(MessageId),
    /// Messages published before this time, ms since the epoch (`source.stop.at-publish-time`,
    /// exclusive).
    AtPublishTime(u64),
}

impl StopCursor {
    pub fn is_bounded(&self) -> bool {
        *self != StopCursor::Never
    }

    /// The cursor as an end records it (`latest`, `at <id>`, `after <id>`, `published before <ms>`): a
    /// restart whose table names another cursor resolves the end afresh.
    pub fn describe(&self) -> String {
        match self {
            StopCursor::Never => "never".into(),
            StopCursor::Latest => "latest".into(),
            StopCursor::AtMessage(id) => format!("at {}", format_message_id(id)),
            StopCursor::AfterMessage(id) => format!("after {}", format_message_id(id)),
            StopCursor::AtPublishTime(t) => format!("published before {t}"),
        }
    }
}

/// One split's end, resolved when its reader first opened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitEnd {
    /// The split held nothing to read when it opened: it ends at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
    /// The last entry of the split when it opened (`ledger:entry:partition`): nothing after it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_entry: Option<String>,
    /// The cursor's message id (`ledger:entry:partition[:batch]`) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// ... and whether that message itself is read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inclusive: bool,
    /// The table's cursor this end was resolved for ([`StopCursor::describe`]; absent in checkpoints
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl SplitEnd {
    /// Whether this recorded end was resolved for `cursor` (an end recorded without its cursor is
    /// taken as it is).
    pub fn is_for(&self, cursor: &StopCursor) -> bool {
        self.cursor.as_ref().is_none_or(|c| *c == cursor.describe())
    }
}

/// The Java client's order of message ids: ledger, entry, partition, batch index.
pub fn java_compare(a: &MessageId, b: &MessageId) -> Ordering {
    (a.ledger_id, a.entry_id, a.partition, a.batch_index).cmp(&(
        b.ledger_id,
        b.entry_id,
        b.partition,
        b.batch_index,
    ))
}

/// `cursor` resolved for a split whose last message is `last` (`None`: the split is empty) at `now_ms`;
/// `None` when the cursor does not bound the split's ids (never, or a publish time still to come: then
/// only the publish time of each message ends it).
pub fn resolve_end(cursor: &StopCursor, last: Option<&MessageId>, now_ms: u64) -> Option<SplitEnd> {
    let snapshot = || match last {
        None => SplitEnd {
            empty: true,
            cursor: Some(cursor.describe()),
            ..SplitEnd::default()
        },
        Some(l) => SplitEnd {
            last_entry: Some(format_message_id(&whole_entry(l))),
            cursor: Some(cursor.describe()),
            ..SplitEnd::default()
        },
    };
    match cursor {
        StopCursor::Never => None,
        StopCursor::Latest => Some(snapshot()),
        StopCursor::AtPublishTime(t) if *t <= now_ms => Some(snapshot()),
        StopCursor::AtPublishTime(_) => None,
        StopCursor::AtMessage(id) | StopCursor::AfterMessage(id) => {
            let end = snapshot();
            if end.empty {
                return Some(end);
            }
            Some(SplitEnd {
                message: Some(format_message_id(id)),
                inclusive: matches!(cursor, StopCursor::AfterMessage(_)),
                ..end
            })
        }
    }
}

fn whole_entry(id: &MessageId) -> MessageId {
    MessageId {
        batch_index: -1,
        batch_size: -1,
        ..*id
    }
}

/// A split's end as its reader checks it.
#[derive(Debug, Clone)]
pub(super) struct EndCheck {
    empty: bool,
    last_entry: Option<(u64, u64)>,
    message: Option<(MessageId, bool)>,
    publish_time: Option<u64>,
}

impl EndCheck {
    /// `None`: the split is unbounded. An end whose ids do not parse (a damaged checkpoint) is an error
    /// naming the id, never an unbounded read.
    pub(super) fn new(
        end: Option<&SplitEnd>,
        publish_time: Option<u64>,
    ) -> Result<Option<EndCheck>, MessageIdParseError> {
        if end.is_none() && publish_time.is_none() {
            return Ok(None);
        }
        let end = end.cloned().unwrap_or_default();
        let last_entry = match end.last_entry.as_deref() {
            Some(text) => {
                let id = parse_message_id(text)?;
                Some((id.ledger_id, id.entry_id))
            }
            None => None,
        };
        let message = match end.message.as_deref() {
            Some(text) => Some((parse_message_id(text)?, end.inclusive)),
            None => None,
        };
        Ok(Some(EndCheck {
            empty: end.empty,
            last_entry,
            message,
            publish_time,
        }))
    }

    /// Whether the split has nothing to read at all.
    pub(super) fn is_empty(&self) -> bool {
        self.empty
    }

    /// Whether a reader that resumes after `id` has nothing left to read.
    pub(super) fn done_after(&self, id: &MessageId) -> bool {
        self.empty
            || self
                .last_entry
                .is_some_and(|e| (id.ledger_id, id.entry_id) >= e && ends_entry(id))
            || self
                .last_entry
                .is_some_and(|e| (id.ledger_id, id.entry_id) > e)
            || self.message.is_some_and(|(m, inclusive)| {
                let c = java_compare(id, &m);
                c == Ordering::Greater || (c == Ordering::Equal && inclusive)
            })
    }

    /// Whether `m` lies beyond the end (it and everything after it are not read).
    pub(super) fn beyond(&self, m: &IncomingMessage) -> bool {
        let id = &m.message_id;
        self.empty
            || self
                .last_entry
                .is_some_and(|e| (id.ledger_id, id.entry_id) > e)
            || self.message.is_some_and(|(end, inclusive)| {
                let c = java_compare(id, &end);
                c == Ordering::Greater || (c == Ordering::Equal && !inclusive)
            })
            || self
                .publish_time
                .is_some_and(|t| m.metadata.publish_time >= t)
    }
}

/// Whether `id` is the last message of its entry (outside a batch, or a batch's last member).
fn ends_entry(id: &MessageId) -> bool {
    id.batch_index < 0 || id.batch_index + 1 >= id.batch_size
}

impl super::SplitReader {
    /// A bounded split read through a subscription that dispatches to several consumers: at most once
    /// a second, whether its messages up to the end were handed out by the consumers together and
    /// acknowledged (then it is finished); gives back the entries beyond the end that reached this
    /// reader. Through a Failover subscription: whether it is acknowledged up to the end already
    /// ([`super::failover_end`]). Nothing to do for the other readers. A check that fails is tried again.
    pub async fn check_end(&mut self, client: &PulsarClient) {
        if self.finished {
            return;
        }
        let Some(check) = &self.end_check else {
            return;
        };
        let (done, why) = if let Some(failover) = &mut self.failover_end {
            if self.consumer.is_active() != Some(true) {
                return;
            }
            let idle = self.last_received.elapsed();
            (
                failover
                    .check(&self.consumer, &self.split, check, idle)
                    .await,
                "the subscription is acknowledged up to the stop cursor already",
            )
        } else if let Some(shared) = &mut self.shared_end {
            (
                shared
                    .check(client, &self.split, &self.consumer, check)
                    .await,
                "every message up to the stop cursor was read and acknowledged by the subscription's consumers",
            )
        } else {
            return;
        };
        match done {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                // Asked again a second later; the consumer's own errors surface where it receives.
                tracing::warn!(split = %self.split.topic, "could not tell whether the split is read up to its end: {e:#}");
                return;
            }
        }
        if let Some(shared) = &mut self.shared_end {
            shared.release(&self.consumer, &self.split);
        }
        self.finished = true;
        tracing::info!(split = %self.split.topic, "{why}: the split ends");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(l: u64, e: u64, p: i32, b: i32) -> MessageId {
        MessageId {
            ledger_id: l,
            entry_id: e,
            partition: p,
            batch_index: b,
            batch_size: if b >= 0 { 3 } else { -1 },
        }
    }

    fn message(id: MessageId, publish_time: u64) -> IncomingMessage {
        IncomingMessage {
            message_id: id,
            metadata: std::sync::Arc::new(magnetar::proto::pb::MessageMetadata {
                publish_time,
                ..Default::default()
            }),
            single_metadata: None,
            payload: Default::default(),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: std::time::Instant::now(),
        }
    }

    fn check(cursor: StopCursor, last: Option<MessageId>, now: u64) -> EndCheck {
        let publish = match cursor {
            StopCursor::AtPublishTime(t) => Some(t),
            _ => None,
        };
        let end = resolve_end(&cursor, last.as_ref(), now);
        EndCheck::new(end.as_ref(), publish)
            .expect("ids parse")
            .expect("bounded")
    }

    #[test]
    fn ids_order_as_javas() {
        assert_eq!(
            java_compare(&id(1, 2, 0, -1), &id(1, 2, 0, 0)),
            Ordering::Less
        );
        assert_eq!(
            java_compare(&id(1, 2, 0, 5), &id(1, 3, 0, -1)),
            Ordering::Less
        );
        assert_eq!(
            java_compare(&id(2, 0, 0, -1), &id(1, 9, 0, 9)),
            Ordering::Greater
        );
        assert_eq!(
            java_compare(&id(1, 2, 1, -1), &id(1, 2, 0, 7)),
            Ordering::Greater
        );
    }

    #[test]
    fn never_and_future_publish_times_do_not_bound_ids() {
        assert_eq!(
            resolve_end(&StopCursor::Never, Some(&id(1, 1, 0, -1)), 10),
            None
        );
        assert_eq!(resolve_end(&StopCursor::AtPublishTime(11), None, 10), None);
        assert!(EndCheck::new(None, None).unwrap().is_none());
    }

    #[test]
    fn an_empty_split_ends_at_once() {
        for cursor in [
            StopCursor::Latest,
            StopCursor::AtMessage(id(5, 5, 0, -1)),
            StopCursor::AfterMessage(id(5, 5, 0, -1)),
            StopCursor::AtPublishTime(10),
        ] {
            let c = check(cursor.clone(), None, 10);
            assert!(c.is_empty(), "{cursor:?}");
        }
    }

    #[test]
    fn latest_reads_through_the_last_entry_at_open() {
        let c = check(StopCursor::Latest, Some(id(3, 7, 0, 2)), 0);
        assert!(!c.is_empty());
        let msg = |l, e, b| message(id(l, e, 0, b), 0);
        assert!(!c.beyond(&msg(3, 7, 0)));
        assert!(!c.beyond(&msg(3, 7, 2)));
        assert!(c.beyond(&msg(3, 8, -1)));
        assert!(c.beyond(&msg(4, 0, -1)));
        assert!(
            !c.done_after(&id(3, 7, 0, 1)),
            "a member of the last entry is still to come"
        );
        assert!(
            c.done_after(&id(3, 7, 0, 2)),
            "the last member of the last entry"
        );
        assert!(!c.done_after(&id(3, 6, 0, -1)));
    }

    #[test]
    fn at_message_is_exclusive_and_after_message_inclusive() {
        let msg = |l, e, b| message(id(l, e, 0, b), 0);
        let at = check(
            StopCursor::AtMessage(id(3, 5, 0, -1)),
            Some(id(9, 0, 0, -1)),
            0,
        );
        assert!(!at.beyond(&msg(3, 4, -1)));
        assert!(at.beyond(&msg(3, 5, -1)));
        // A batch at the cursor's entry sorts after an id written without a batch index, as in Java.
        assert!(at.beyond(&msg(3, 5, 0)));
        assert!(!at.done_after(&id(3, 4, 0, -1)));
        let after = check(
            StopCursor::AfterMessage(id(3, 5, 0, -1)),
            Some(id(9, 0, 0, -1)),
            0,
        );
        assert!(!after.beyond(&msg(3, 5, -1)));
        assert!(after.beyond(&msg(3, 5, 0)));
        assert!(after.done_after(&id(3, 5, 0, -1)));
        // With a batch index the cursor cuts inside the batch.
        let after = check(
            StopCursor::AfterMessage(id(3, 5, 0, 1)),
            Some(id(9, 0, 0, -1)),
            0,
        );
        assert!(!after.beyond(&msg(3, 5, 1)));
        assert!(after.beyond(&msg(3, 5, 2)));
    }

    #[test]
    fn a_cursor_beyond_the_last_entry_ends_there() {
        let c = check(
            StopCursor::AtMessage(id(50, 0, 0, -1)),
            Some(id(3, 7, 0, -1)),
            0,
        );
        assert!(c.done_after(&id(3, 7, 0, -1)));
        assert!(
            c.beyond(&message(id(3, 8, 0, -1), 0)),
            "a message published after the reader opened"
        );
    }

    #[test]
    fn publish_time_is_exclusive() {
        let c = check(StopCursor::AtPublishTime(100), Some(id(9, 9, 0, -1)), 200);
        assert!(!c.beyond(&message(id(1, 1, 0, -1), 99)));
        assert!(c.beyond(&message(id(1, 1, 0, -1), 100)));
    }

    #[test]
    fn a_damaged_recorded_end_is_an_error_not_an_unbounded_read() {
        let end = SplitEnd {
            message: Some("12:x:0".into()),
            ..SplitEnd::default()
        };
        let e = EndCheck::new(Some(&end), None).expect_err("refused");
        assert!(e.to_string().contains("12:x:0"), "{e}");
    }

    #[test]
    fn ends_serialise_readably() {
        let end = resolve_end(
            &StopCursor::AfterMessage(id(3, 5, 0, -1)),
            Some(&id(9, 1, 0, 4)),
            0,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&end).unwrap(),
            r#"{"last_entry":"9:1:0","message":"3:5:0","inclusive":true,"cursor":"after 3:5:0"}"#
        );
        let empty = resolve_end(&StopCursor::Latest, None, 0).unwrap();
        assert_eq!(
            serde_json::to_string(&empty).unwrap(),
            r#"{"empty":true,"cursor":"latest"}"#
        );
    }

    #[test]
    fn an_end_is_kept_only_for_the_cursor_it_was_resolved_for() {
        let end = resolve_end(&StopCursor::Latest, Some(&id(9, 1, 0, -1)), 0).unwrap();
        assert!(end.is_for(&StopCursor::Latest));
        assert!(!end.is_for(&StopCursor::AtPublishTime(5)));
        assert!(!end.is_for(&StopCursor::AtMessage(id(9, 1, 0, -1))));
        // Written before the cursor was recorded: kept.
        let old: SplitEnd = serde_json::from_str(r#"{"last_entry":"9:1:0"}"#).unwrap();
        assert!(old.is_for(&StopCursor::AtPublishTime(5)));
    }
}
