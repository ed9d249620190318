//! Which source subtask reads which split (docs/adr/0015): a topic's partitions, and each partition's key
//! ranges, go round-robin over the subtasks, starting at a subtask derived from the topic's name (as
//! Flink's Kafka enumerator spreads partitions). The owner depends only on the split and the number of
//! subtasks: a partition discovery adds never moves an existing one, and every run with the same number of
//! subtasks assigns the same way. A checkpoint keeps each split's position under its key, so a run with
//! another number of subtasks finds every position whichever subtask now owns the split.

use crate::connector_api::Subtask;
use crate::pulsar::reader::KeyRange;
use crate::pulsar::topics::{Split, TopicName};

/// The subtask of `subtasks` that reads range `range` (of `ranges`) of `split`.
pub(super) fn owner(split: &Split, range: usize, ranges: usize, subtasks: usize) -> usize {
    if subtasks <= 1 {
        return 0;
    }
    let parent = split
        .topic
        .partition_of()
        .map(|(p, _)| p)
        .unwrap_or_else(|| split.topic.clone());
    let start = fnv1a(parent.as_str()) as usize % subtasks;
    let partition = split.partition.max(0) as usize;
    (start + partition * ranges.max(1) + range) % subtasks
}

/// Whether `subtask` reads range `range` of `split`.
pub(super) fn owns(split: &Split, range: usize, ranges: usize, subtask: Subtask) -> bool {
    owner(split, range, ranges, subtask.count) == subtask.index
}

/// Whether `subtask` reads the split a checkpoint keys as `key` (`<topic>` or `<topic>#keys=<s>-<e>`); a
/// key whose range is not one of `ranges` (the table's key ranges changed) counts as range 0.
pub(super) fn owns_key(key: &str, ranges: &[Option<KeyRange>], subtask: Subtask) -> bool {
    if subtask.count <= 1 {
        return true;
    }
    let (topic, range) = match key.split_once("#keys=") {
        Some((t, r)) => (t, Some(r)),
        None => (key, None),
    };
    let Ok(topic) = TopicName::parse(topic) else {
        return subtask.index == 0;
    };
    let partition = topic.partition_of().map_or(-1, |(_, i)| i as i32);
    let index = range
        .and_then(|r| {
            ranges
                .iter()
                .position(|k| k.is_some_and(|k| format!("{}-{}", k.start, k.end) == r))
        })
        .unwrap_or(0);
    owns(&Split { topic, partition }, index, ranges.len(), subtask)
}

/// FNV-1a, 32 bits: a hash of the topic name that is the same in every build.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pulsar::reader::key_ranges;

    fn partition(topic: &str, i: i32) -> Split {
        Split {
            topic: TopicName::parse(&format!("{topic}-partition-{i}")).unwrap(),
            partition: i,
        }
    }

    #[test]
    fn partitions_of_a_topic_spread_evenly_and_stay_put() {
        for subtasks in 1..=5 {
            let mut per = vec![0; subtasks];
            for i in 0..10 {
                per[owner(
                    &partition("persistent://public/default/t", i),
                    0,
                    1,
                    subtasks,
                )] += 1;
            }
            let (min, max) = (per.iter().min().unwrap(), per.iter().max().unwrap());
            assert!(max - min <= 1, "{subtasks} subtasks: {per:?}");
        }
        // Another topic starts elsewhere, so single-partition topics do not all land on subtask 0.
        let starts: std::collections::BTreeSet<usize> = (0..8)
            .map(|t| {
                owner(
                    &partition(&format!("persistent://public/default/t{t}"), 0),
                    0,
                    1,
                    4,
                )
            })
            .collect();
        assert!(starts.len() > 1, "{starts:?}");
    }

    #[test]
    fn key_ranges_of_one_partition_spread_too() {
        let split = Split {
            topic: TopicName::parse("persistent://public/default/one").unwrap(),
            partition: -1,
        };
        let owners: Vec<usize> = (0..4).map(|r| owner(&split, r, 4, 4)).collect();
        let mut sorted = owners.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3], "{owners:?}");
    }

    #[test]
    fn checkpoint_keys_are_owned_like_their_splits() {
        let ranges: Vec<Option<KeyRange>> = key_ranges(3).into_iter().map(Some).collect();
        let split = partition("persistent://public/default/k", 2);
        for (i, r) in ranges.iter().enumerate() {
            let key = crate::pulsar::reader::state_key(&split, *r);
            for index in 0..2 {
                let subtask = Subtask { index, count: 2 };
                assert_eq!(
                    owns_key(&key, &ranges, subtask),
                    owns(&split, i, 3, subtask),
                    "{key}"
                );
            }
        }
        let plain = [None];
        let key = crate::pulsar::reader::state_key(&split, None);
        let owners: Vec<bool> = (0..3)
            .map(|index| owns_key(&key, &plain, Subtask { index, count: 3 }))
            .collect();
        assert_eq!(owners.iter().filter(|o| **o).count(), 1, "{owners:?}");
        assert!(owns_key(&key, &plain, Subtask::SOLE));
    }
}
