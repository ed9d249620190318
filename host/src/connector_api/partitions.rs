//! What a source reports about the partitions it reads: which it owns now and how far behind the end of
//! each it is. A source subtask writes its own [`PartitionBoard`]; the runtime reads every board when it
//! exports `pulsar_connect_source_lag_messages` and `pulsar_connect_source_owned_partitions` and when it
//! builds the status snapshot. Nothing above the connector learns how ownership or lag are found.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

/// One partition (split) as a source subtask sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStatus {
    /// The topic without the partition suffix (`persistent://public/default/orders`).
    pub topic: String,
    /// The partition index, `-1` for a non-partitioned topic.
    pub partition: i32,
    /// Whether this process reads it now (with a Failover subscription: the broker made this process's
    /// consumer the active one).
    pub owned: bool,
    /// Messages between the job's committed position and the end of the partition, as the broker counts
    /// them; `None` until the broker answered (or when the source cannot ask it).
    pub lag_messages: Option<u64>,
    /// The broker counted only part of the backlog (its scan limit, or a broker that counts entries
    /// only): the lag is at least `lag_messages`.
    pub lag_at_least: bool,
    /// When the broker last answered for this partition.
    pub lag_at: Option<SystemTime>,
}

/// The partitions of one source subtask, keyed by the source's own split key (a split, or a split's key
/// range).
#[derive(Debug, Default)]
pub struct PartitionBoard {
    splits: Mutex<BTreeMap<String, PartitionStatus>>,
    /// Why no lag is reported, when the source cannot ask the broker (e.g. no admin URL).
    lag_unavailable: Mutex<Option<String>>,
}

impl PartitionBoard {
    /// Records which splits the subtask has and which of them it owns; splits it no longer has are
    /// removed, the lag of the others is kept.
    pub fn set_owned(&self, splits: impl IntoIterator<Item = (String, String, i32, bool)>) {
        let mut map = self.splits.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = BTreeMap::new();
        for (key, topic, partition, owned) in splits {
            let old = map.remove(&key);
            next.insert(
                key,
                PartitionStatus {
                    topic,
                    partition,
                    owned,
                    lag_messages: old.as_ref().and_then(|o| o.lag_messages),
                    lag_at_least: old.as_ref().is_some_and(|o| o.lag_at_least),
                    lag_at: old.and_then(|o| o.lag_at),
                },
            );
        }
        *map = next;
    }

    /// Records the broker's answer for split `key` (ignored when the subtask no longer has it);
    /// `at_least`: the broker counted only part of the backlog.
    pub fn set_lag(&self, key: &str, lag: u64, at_least: bool) {
        let mut map = self.splits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = map.get_mut(key) {
            s.lag_messages = Some(lag);
            s.lag_at_least = at_least;
            s.lag_at = Some(SystemTime::now());
        }
    }

    /// The keys of the splits (the split's topic, `<topic>#keys=..` for a key range), for a poller to
    /// ask the broker about.
    pub fn keys(&self) -> Vec<String> {
        let map = self.splits.lock().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    pub fn set_lag_unavailable(&self, why: impl Into<String>) {
        *self
            .lag_unavailable
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(why.into());
    }

    pub fn lag_unavailable(&self) -> Option<String> {
        self.lag_unavailable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every split the subtask has now.
    pub fn snapshot(&self) -> Vec<PartitionStatus> {
        let map = self.splits.lock().unwrap_or_else(|e| e.into_inner());
        map.values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_changes_keep_the_lag_of_the_splits_that_stay() {
        let b = PartitionBoard::default();
        b.set_owned([
            ("t-partition-0".into(), "t".into(), 0, true),
            ("t-partition-1".into(), "t".into(), 1, false),
        ]);
        b.set_lag("t-partition-0", 7, false);
        b.set_lag("gone", 1, false);
        b.set_owned([("t-partition-0".into(), "t".into(), 0, false)]);
        let s = b.snapshot();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].lag_messages, Some(7));
        assert!(!s[0].owned);
    }
}
