//! Opening a split's subscription: its type, key range, consumer name and prefetch.

use anyhow::{Context, Result};
use magnetar::PulsarClient;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::runtime_tokio::Consumer;

use crate::pulsar::topics::Split;

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

pub(super) async fn subscribe_at(
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
/// every flow grant (docs/benchmarks-history.md, "Sixth round": 5 000 cost 6–15 % less CPU per message and ~5 MB more
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
