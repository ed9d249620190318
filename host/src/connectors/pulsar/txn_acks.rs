//! The Pulsar source's acknowledgements inside the Pulsar sink's transaction (ADR 0008, "source acks").
//!
//! A Pulsar → Pulsar INSERT whose sink is exactly-once and whose source has an `admin-url` links the two
//! through one [`TxnAcks`] per pipeline:
//!
//! 1. The source offers it when it learns its pipeline ([`crate::connector_api::PipelineLink`]); an
//!    exactly-once sink claims it. Unclaimed, the source works as before (positions in the checkpoint,
//!    committed to the subscription on completion).
//! 2. Claimed, the source waits until the sink has settled the restored checkpoint's transactions
//!    ([`TxnAcks::wait_recovered`]), aborts transactions of crashed runs that still hold acknowledgements
//!    on its subscription, and then reads from the **subscription's cursor**: the cursor only ever moves
//!    together with committed output, so it is the truth, with or without a state directory.
//! 3. At each checkpoint the source publishes, per split, the last message it emitted (always a whole
//!    entry in this mode) with a handle to its consumer ([`TxnAcks::publish`]). The barrier follows; when
//!    it reaches the sink every row up to those positions has been sent in the current transaction, and
//!    the sink acknowledges the positions cumulatively *in that transaction* before it pre-commits.
//!    Committing the transaction then publishes the rows and moves the cursor at once.
//! 4. With a `Shared`, `Key_Shared` or `Failover` subscription (several processes) the source publishes
//!    the entries it emitted instead ([`SplitAck::entries`]) and the sink acknowledges them individually
//!    in the transaction; nothing of crashed runs is aborted at start (another live process may own it):
//!    their transactions time out and release the messages. With `Failover`, a partition that moved
//!    while two processes had its messages makes the second acknowledgement conflict: that process reads
//!    again from the cursor ([`crate::connector_api::Rewind`]), and an active reader asks the broker to
//!    dispatch again, every `transaction-timeout`, what timed-out transactions released (ADR 0014).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, Result, bail};
use magnetar::MessageId;
use magnetar::runtime_tokio::Consumer;
use tokio::sync::watch;

use crate::pulsar::admin::OpenTransaction;

/// One split's acknowledgement for a checkpoint.
#[derive(Debug, Clone)]
pub struct SplitAck {
    /// The topic the broker serves (a partition's own name).
    pub topic: String,
    pub subscription: String,
    pub consumer: Consumer,
    /// Everything up to and including this message (a whole entry) was emitted.
    pub through: MessageId,
    /// A subscription dispatching messages to several consumers: the entries emitted since the last
    /// checkpoint, acknowledged one by one (`through` is the last of them); empty: cumulative.
    pub entries: Vec<MessageId>,
}

/// The hand-off between one pipeline's Pulsar source and its exactly-once Pulsar sink.
#[derive(Debug)]
pub struct TxnAcks {
    claimed: AtomicBool,
    /// The claiming sink's `transaction-timeout`: when a crashed process's transactions release their
    /// messages at the latest.
    txn_timeout: Mutex<Option<std::time::Duration>>,
    recovered: watch::Sender<Option<Result<(), String>>>,
    /// Per checkpoint id: what the source had emitted when it took that checkpoint.
    positions: Mutex<BTreeMap<u64, Vec<SplitAck>>>,
    /// Where the sink records the transactions this process owns, so that its survivors can end them
    /// (ADR 0023); none unless the source shares its subscription with other processes.
    owner: Option<OwnerRecord>,
    /// The topic whose properties hold the records: the claiming sink's.
    record_topic: Mutex<Option<crate::pulsar::topics::TopicName>>,
}

/// How the sink records the transactions this process owns: a property of its topic, named after the
/// source's subscription and this process ([`super::source::takeover::owner_key`]), written through the
/// source table's admin API.
#[derive(Debug, Clone)]
pub struct OwnerRecord {
    /// The property's name.
    pub key_prefix: String,
    pub cfg: std::sync::Arc<super::config::PulsarTableConfig>,
    pub admin_url: String,
}

impl Default for TxnAcks {
    fn default() -> Self {
        TxnAcks {
            claimed: AtomicBool::new(false),
            txn_timeout: Mutex::new(None),
            recovered: watch::channel(None).0,
            positions: Mutex::new(BTreeMap::new()),
            owner: None,
            record_topic: Mutex::new(None),
        }
    }
}

impl TxnAcks {
    /// The hand-off of a source whose process records the transactions it owns with `owner`.
    pub fn owned_by(owner: OwnerRecord) -> Self {
        TxnAcks {
            owner: Some(owner),
            ..TxnAcks::default()
        }
    }

    /// Where the sink records the transactions it opens (ADR 0023), if anywhere.
    pub fn owner(&self) -> Option<&OwnerRecord> {
        self.owner.as_ref()
    }

    /// The claiming sink records its transactions in `topic`'s properties.
    pub fn set_record_topic(&self, topic: crate::pulsar::topics::TopicName) {
        *self.record_topic.lock().unwrap_or_else(|e| e.into_inner()) = Some(topic);
    }

    /// The topic whose properties hold the records (once the sink claimed the hand-off).
    pub fn record_topic(&self) -> Option<crate::pulsar::topics::TopicName> {
        self.record_topic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The sink takes over the source's acknowledgements; its transactions time out after `txn_timeout`.
    pub fn claim(&self, txn_timeout: std::time::Duration) {
        *self.txn_timeout.lock().unwrap_or_else(|e| e.into_inner()) = Some(txn_timeout);
        self.claimed.store(true, Ordering::SeqCst);
    }

    /// The claiming sink's transaction timeout.
    pub fn txn_timeout(&self) -> Option<std::time::Duration> {
        *self.txn_timeout.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::SeqCst)
    }

    /// The sink settled (or failed to settle) the restored checkpoint's transactions.
    pub fn set_recovered(&self, outcome: Result<(), String>) {
        self.recovered.send_replace(Some(outcome));
    }

    /// Waits until the sink settled the restored checkpoint's transactions: reading before that could
    /// start below a position a recovery commit is about to acknowledge.
    pub async fn wait_recovered(&self) -> Result<()> {
        let mut rx = self.recovered.subscribe();
        let outcome = rx
            .wait_for(Option::is_some)
            .await
            .context("the sink ended before it settled its transactions")?
            .clone();
        match outcome {
            Some(Err(e)) => bail!("the sink could not settle its transactions: {e}"),
            _ => Ok(()),
        }
    }

    /// The source's positions at checkpoint `id` (splits that emitted nothing are left out).
    pub fn publish(&self, id: u64, acks: Vec<SplitAck>) {
        let mut p = self.positions.lock().unwrap_or_else(|e| e.into_inner());
        // Several source subtasks may feed the sink subtask: each adds its splits.
        p.entry(id).or_default().extend(acks);
        // Checkpoints that timed out are never taken: keep the map small.
        while p.len() > 64 {
            p.pop_first();
        }
    }

    /// What to acknowledge for checkpoint `id`, with the individual acknowledgements of older
    /// checkpoints that were never taken (their barriers never reached the sink, so their rows are in
    /// this transaction); older cumulative positions are dropped (a later one covers them).
    pub fn take(&self, id: u64) -> Vec<SplitAck> {
        let mut p = self.positions.lock().unwrap_or_else(|e| e.into_inner());
        let later = p.split_off(&(id + 1));
        let mut upto = std::mem::replace(&mut *p, later);
        let current = upto.remove(&id).unwrap_or_default();
        let mut out: Vec<SplitAck> = upto
            .into_values()
            .flatten()
            .filter(|a| !a.entries.is_empty())
            .collect();
        out.extend(current);
        out
    }
}

/// Open transactions (from [`crate::pulsar::admin::slow_transactions`]) that acknowledged on `subscription` of any of
/// `topics`: left by a run that crashed between its acknowledgement and its commit.
pub fn stale_transactions(
    open: &[OpenTransaction],
    topics: &[String],
    subscription: &str,
) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = open
        .iter()
        .filter(|t| {
            topics.iter().any(|topic| {
                t.acked
                    .get(topic)
                    .is_some_and(|subs| subs.contains(subscription))
            })
        })
        .map(|t| t.id)
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pulsar::admin;

    #[test]
    fn only_transactions_acking_our_subscription_are_stale() {
        let slow = serde_json::json!({
            "(0,3)": {"txnId": "(0,3)", "status": "OPEN",
                      "ackedPartitions": {"persistent://public/default/in": {"job-sub": {}}}},
            "(0,4)": {"txnId": "(0,4)", "status": "OPEN",
                      "ackedPartitions": {"persistent://public/default/in": {"other": {}}}},
            "(1,5)": {"txnId": "(1,5)", "status": "OPEN", "ackedPartitions": {},
                      "producedPartitions": {"persistent://public/default/in": {}}}
        });
        let open = admin::open_transactions(&slow);
        let topics = vec!["persistent://public/default/in".to_owned()];
        assert_eq!(stale_transactions(&open, &topics, "job-sub"), vec![(0, 3)]);
        assert!(stale_transactions(&[], &topics, "job-sub").is_empty());
    }

    #[tokio::test]
    async fn recovery_is_awaited_and_failures_are_passed_on() {
        let acks = std::sync::Arc::new(TxnAcks::default());
        let waiter = {
            let acks = acks.clone();
            tokio::spawn(async move { acks.wait_recovered().await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        acks.set_recovered(Ok(()));
        waiter.await.unwrap().unwrap();
        let failed = TxnAcks::default();
        failed.set_recovered(Err("boom".into()));
        assert!(failed.wait_recovered().await.is_err());
    }
}
