//! Positions in a split: where reading starts, how positions order, what a checkpoint records, and the
//! checkpoint key of a split.

use std::cmp::Ordering;

use anyhow::{Context, Result, bail};
use magnetar::proto::pb::command_subscribe::SubType;
use magnetar::{MessageId, PulsarClient};
use serde::{Deserialize, Serialize};

use super::KeyRange;
use crate::pulsar::message_id::{format_message_id, parse_message_id};
use crate::pulsar::topics::Split;

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
pub(super) fn is_empty_marker(id: &MessageId) -> bool {
    id.entry_id == u64::MAX || id.ledger_id == u64::MAX
}

/// Total order of message positions within one split: ledger, entry, then batch index (`-1` = whole entry).
pub fn compare_positions(a: &MessageId, b: &MessageId) -> Ordering {
    (a.ledger_id, a.entry_id, a.batch_index).cmp(&(b.ledger_id, b.entry_id, b.batch_index))
}

/// A split's position for a checkpoint: where to resume, and what may be committed to the subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCheckpoint {
    pub resume: StartPosition,
    /// The last message of the last *complete* entry emitted (`ledger:entry:partition`): a cumulative ack
    /// through it never covers an unemitted member of a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_through: Option<String>,
    /// A bounded table (`source.stop.*`): where the split ends, as resolved when it first opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<super::SplitEnd>,
}

/// The checkpoint key of a split read whole (its topic) or by key range.
pub fn state_key(split: &Split, range: Option<KeyRange>) -> String {
    match range {
        None => split.topic.to_string(),
        Some(r) => format!("{}#keys={}-{}", split.topic, r.start, r.end),
    }
}

/// Parses a recorded position and checks it belongs to the split.
pub(super) fn position_id(text: &str, split: &Split) -> Result<MessageId> {
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
