//! Positions at checkpoints: the acknowledgements a linked source hands to the sink's transaction for a
//! checkpoint, and the cumulative acknowledgement of a completed checkpoint's positions on the job's
//! subscription otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use tracing::warn;

use super::{PulsarSource, Stage};
use crate::connectors::pulsar::txn_acks::SplitAck;
use crate::pulsar::reader::compare_positions;

impl PulsarSource {
    /// Linked to the sink's transactions: everything returned so far reaches the sink before checkpoint
    /// `id`'s barrier, so the sink acknowledges it in the transaction it pre-commits for that checkpoint.
    /// Only what was returned: messages the reader handed out whose decode a barrier interrupted reach
    /// the sink after the barrier, in the next transaction (acknowledging them here lost them when the
    /// process died before that transaction committed).
    pub(super) fn publish_linked_acks(&mut self, id: u64) {
        let (Some(acks), Stage::Running(run)) = (self.linked(), &self.stage) else {
            return;
        };
        let mut batch = Vec::new();
        let mut listed = BTreeMap::new();
        for r in run.splits.readers() {
            let topic = r.key();
            if r.acks_individually() {
                // One by one: the entries returned since the last checkpoint.
                let Some(entries) = self.unacked.remove(&topic) else {
                    continue;
                };
                let Some(&through) = entries.last() else {
                    continue;
                };
                if r.remembers_entries() {
                    listed.insert(topic.clone(), entries.clone());
                }
                batch.push(SplitAck {
                    topic,
                    subscription: self.subscription.clone(),
                    consumer: r.consumer().clone(),
                    through,
                    entries,
                });
                continue;
            }
            let Some(&through) = self.emitted_entries.get(&topic) else {
                continue;
            };
            let newer = self
                .published
                .get(&topic)
                .is_none_or(|p| compare_positions(&through, p) == std::cmp::Ordering::Greater);
            if newer {
                self.published.insert(topic.clone(), through);
                batch.push(SplitAck {
                    topic,
                    subscription: self.subscription.clone(),
                    consumer: r.consumer().clone(),
                    through,
                    entries: Vec::new(),
                });
            }
        }
        acks.publish(id, batch);
        if !listed.is_empty() {
            // Remembered until a later checkpoint completes (the reader then forgets them).
            self.individual.push_back((id, listed));
        }
    }

    /// Checkpoint `id` (and every snapshot before it) is durable: commit its positions to the job's
    /// subscription, so Pulsar's tools show the backlog (the checkpoint, not the subscription, is where a
    /// restart resumes; a failed commit only leaves the backlog stale).
    pub(super) async fn commit_completed(&mut self, id: u64) -> Result<()> {
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
            self.forget_committed(id);
            return Ok(());
        }
        let kind = self.spec.cfg.source.subscription_kind;
        if kind.dispatches_messages() || kind == crate::pulsar::reader::SubscriptionKind::Failover {
            return self.ack_completed_entries(id).await;
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
                    Ok(()) => {
                        tracing::debug!(split = %reader.split().topic, checkpoint = id, through = ?cp.commit_through, active = ?reader.is_active(), "committed the checkpoint's position to the subscription");
                        break;
                    }
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

    /// Linked, acknowledging one by one: the entries of checkpoints before `id` are committed for good
    /// (one checkpoint of slack for a copy the broker dispatched just before their acknowledgement), so
    /// the readers need not remember them.
    fn forget_committed(&mut self, id: u64) {
        let Stage::Running(run) = &mut self.stage else {
            return;
        };
        while self.individual.front().is_some_and(|(sid, _)| *sid < id) {
            let Some((_, per_split)) = self.individual.pop_front() else {
                break;
            };
            for r in run.splits.readers_mut() {
                if let Some(entries) = per_split.get(&r.key()) {
                    r.forget(entries);
                }
            }
        }
    }

    /// A subscription dispatching to several consumers, or a Failover one (see
    /// `connect::hands_out_whole_entries`): acknowledges, one by one, the entries returned before
    /// checkpoint `id` (and before every earlier one not completed); the readers that remember what they
    /// handed out forget them. A failed acknowledgement only means the broker sends those messages again
    /// (to this process or another).
    async fn ack_completed_entries(&mut self, id: u64) -> Result<()> {
        let mut due: BTreeMap<String, Vec<magnetar::MessageId>> =
            std::mem::take(&mut self.ack_retry);
        while self.individual.front().is_some_and(|(sid, _)| *sid <= id) {
            if let Some((_, per_split)) = self.individual.pop_front() {
                for (key, entries) in per_split {
                    due.entry(key).or_default().extend(entries);
                }
            }
        }
        let Stage::Running(run) = &mut self.stage else {
            return Ok(());
        };
        for reader in run.splits.readers_mut() {
            let Some(entries) = due.remove(&reader.key()) else {
                continue;
            };
            let n = entries.len();
            match reader.consumer().ack_batch(entries.clone()).await {
                // Acknowledged for good: the broker does not send them again.
                Ok(_) => reader.forget(&entries),
                Err(e) => {
                    warn!(split = %reader.split().topic, "acknowledging the {n} entries of checkpoint {id} failed (sent again with the next checkpoint's): {e}");
                    self.ack_retry
                        .entry(reader.key())
                        .or_default()
                        .extend(entries);
                }
            }
        }
        Ok(())
    }
}
