//! Exactly-once: one transaction per checkpoint period (opened with every partition of the topic
//! registered), committed when the checkpoint completes; a restored checkpoint's transactions committed or
//! aborted on connect; a linked Pulsar source's acknowledgements inside the same transaction.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use magnetar::Transaction;
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::PulsarSink;
use super::journal::{Earlier, TxnJournal};
use crate::connector_api::Rewind;
use crate::connectors::pulsar::source::takeover::recorded_owners;
use crate::connectors::pulsar::txn_acks::{OwnerRecord, TxnAcks};
use crate::pulsar::admin;
use crate::pulsar::errors::{Failure, classify_client};
use crate::pulsar::reader::SubscriptionKind;
use crate::pulsar::topics::TopicName;
use crate::pulsar::transactions::{EndOutcome, TxnCoordinator, TxnRef};

/// Exactly-once state in a checkpoint: the transaction holding the rows of the checkpoint (committed when
/// it completes) and the one opened for the rows after it (aborted if the job restarts from it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TxnState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<String>,
}

/// How long a checkpoint's commit is retried in place, after a failure the coordinator did not answer
/// (the connection cut before or after it got the END_TXN, a timeout), before the run fails (a restart
/// from the checkpoint then commits it).
const COMMIT_RETRY: Duration = Duration::from_secs(30);

/// Commits `txn`, the transaction checkpoint `cid` pre-committed, for table `table`. A failure that is not
/// the coordinator's answer is retried through a new connection to the coordinator (the client's own may be
/// the one that broke) for up to [`COMMIT_RETRY`]: the transaction may still be open (the END_TXN never
/// arrived) or committed already (its answer was lost). A retry that finds it ended takes it as committed
/// by the attempt that was cut, as a restart from the checkpoint would (a transaction is aborted only past
/// its timeout, which the configuration keeps above the checkpoint interval).
pub(super) async fn commit_checkpoint_txn(
    table: &str,
    cfg: &crate::pulsar::client::ClientConfig,
    client: &magnetar::PulsarClient,
    txn: Transaction,
    cid: u64,
) -> Result<()> {
    let id = TxnRef(txn.id());
    let broker = &cfg.service_url;
    let first = match client.commit_transaction(txn).await {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if crate::pulsar::errors::classify(&first) != Failure::Other {
        return Err(anyhow!(
            "table '{table}': committing the transaction {id} of checkpoint {cid} at {broker}: {first}"
        ));
    }
    warn!(table = %table, txn = %id, checkpoint = cid, broker = %broker, "committing the checkpoint's transaction failed: {first}; retrying through a new connection to the coordinator");
    let deadline = tokio::time::Instant::now() + COMMIT_RETRY;
    let mut pause = Duration::from_millis(200);
    loop {
        let attempt = async {
            let tc = TxnCoordinator::connect(cfg).await?;
            let outcome = tc.commit(id).await;
            tc.close().await;
            outcome
        };
        let last = match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(EndOutcome::Done)) => {
                info!(table = %table, txn = %id, checkpoint = cid, "committed the checkpoint's transaction on a retry");
                return Ok(());
            }
            Ok(Ok(EndOutcome::Unknown(why))) => {
                info!(table = %table, txn = %id, checkpoint = cid, "the checkpoint's transaction is already ended: the cut attempt committed it ({why})");
                return Ok(());
            }
            Ok(Err(e)) => format!("{e:#}"),
            Err(_) => format!("no answer within {} s", COMMIT_RETRY.as_secs()),
        };
        if tokio::time::Instant::now() + pause >= deadline {
            return Err(anyhow!(
                "table '{table}': committing the transaction {id} of checkpoint {cid} at {broker}: {first}; retried for {} s: {last} (a restart from the checkpoint commits it)",
                COMMIT_RETRY.as_secs()
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(3));
    }
}

impl PulsarSink {
    /// Linked: commits every pre-committed transaction still open (their checkpoints timed out; the
    /// subscription's cursor moves with them, so committing early keeps output and input together), then
    /// acknowledges the source's positions of checkpoint `id` in the current transaction.
    pub(super) async fn ack_source_in_txn(&mut self, acks: &TxnAcks, id: u64) -> Result<()> {
        let table = self.spec.cfg.table.clone();
        let cfg = self.spec.cfg.clone();
        while let Some((cid, txn)) = self.pending.pop_front() {
            let run = self.running().await?;
            commit_checkpoint_txn(&table, &cfg.client, &run.client, txn, cid).await?;
        }
        let positions = acks.take(id);
        if positions.is_empty() {
            return Ok(());
        }
        let txn = match self.txn {
            Some(t) => t,
            None => {
                let t = self.open_txn().await?;
                self.txn = Some(t);
                t
            }
        };
        let run = self.running().await?;
        for p in positions {
            run.client
                .register_subscription_to_transaction(txn, p.topic.clone(), p.subscription.clone())
                .await
                .map_err(|e| {
                    anyhow!(
                        "table '{table}': adding subscription '{}' of {} to the transaction: {e}",
                        p.subscription,
                        p.topic
                    )
                })?;
            // Individually with a subscription dispatching to several consumers (or moving partitions
            // between processes), else cumulatively.
            let acked = if p.entries.is_empty() {
                p.consumer
                    .ack_cumulative_with_txn(p.through, txn.id())
                    .await
            } else {
                p.consumer
                    .ack_batch_with_txn(p.entries.clone(), txn.id())
                    .await
            };
            if let Err(e) = acked {
                let what = format!(
                    "table '{table}': acknowledging {} of {} in transaction {}: {e}",
                    crate::pulsar::message_id::format_message_id(&p.through),
                    p.topic,
                    TxnRef(txn.id())
                );
                // Another process's transaction holds (or committed) some of these messages: the broker
                // moved the partition while both had them. This transaction must not commit (the sink
                // task aborts it); reading again from the cursor gives every message to one process.
                if classify_client(&e) == Failure::TransactionConflict {
                    return Err(Rewind(format!(
                        "{what}: another consumer of the subscription holds them (the partition moved)"
                    ))
                    .into());
                }
                return Err(anyhow!(what));
            }
        }
        Ok(())
    }

    pub(super) fn txn_timeout(&self) -> Duration {
        self.spec.cfg.sink.txn_timeout
    }

    /// Opens a transaction and registers every partition of the topic with it.
    pub(super) async fn open_txn(&mut self) -> Result<Transaction> {
        let timeout = self.txn_timeout();
        let table = self.spec.cfg.table.clone();
        let owner = self.txn_acks.as_ref().and_then(|a| a.owner()).cloned();
        let journal = self.journal.clone();
        let subtask = self.subtask.index;
        let record_topic = self.spec.topic.clone();
        // With this one, the transactions of this sink subtask that may still be open.
        let mut open: Vec<TxnRef> = self.pending.iter().map(|(_, t)| TxnRef(t.id())).collect();
        open.extend(self.txn.map(|t| TxnRef(t.id())));
        let run = self.running().await?;
        let txn = run.client.new_transaction(timeout).await.map_err(|e| {
            anyhow!("table '{table}': opening a transaction (is transactionCoordinatorEnabled=true on the broker?): {e}")
        })?;
        let topics: Vec<String> = run
            .writer
            .partition_topics()
            .map(|t| t.to_string())
            .collect();
        // Recorded before anything is registered, written or acknowledged in it (ADR 0023, 0026):
        // linked, this process as the transaction's owner on the topic; else in the state directory.
        open.push(TxnRef(txn.id()));
        let record = async {
            match &owner {
                Some(o) => crate::connectors::pulsar::source::takeover::record_owned(
                    o,
                    &record_topic,
                    subtask,
                    &open,
                )
                .await
                .map_err(|e| {
                    anyhow!(
                        "table '{table}': recording this process as the owner of transaction {}: {e:#}",
                        TxnRef(txn.id())
                    )
                }),
                None => match &journal {
                    Some(j) => j.record(&open).await.map_err(|e| {
                        anyhow!(
                            "table '{table}': journaling transaction {} in the state directory: {e:#}",
                            TxnRef(txn.id())
                        )
                    }),
                    None => Ok(()),
                },
            }
        };
        let register = async {
            for t in topics {
                run.client
                    .register_partition_to_transaction(txn, t.clone())
                    .await
                    .map_err(|e| {
                        anyhow!("table '{table}': registering {t} with transaction: {e}")
                    })?;
            }
            anyhow::Ok(())
        };
        // Recorded first: a run killed between the two leaves a recorded transaction holding nothing,
        // never a registered one that nobody recorded (ADR 0026).
        record.await?;
        register.await?;
        Ok(txn)
    }

    /// Commits / aborts what a restored checkpoint recorded, through a fresh coordinator connection; then,
    /// linked through an Exclusive subscription, aborts what earlier runs recorded as possibly open
    /// ([`Self::end_earlier_runs`]).
    pub(super) async fn recover(&mut self) -> Result<()> {
        let states = std::mem::take(&mut self.recover);
        let exclusive_owner = self
            .txn_acks
            .as_ref()
            .and_then(|a| a.owner())
            .filter(|o| o.cfg.source.subscription_kind == SubscriptionKind::Exclusive)
            .cloned();
        let journaled = match &self.journal {
            Some(j) => j.earlier(self.settle).await.with_context(|| {
                format!(
                    "table '{}': reading the transactions earlier runs journaled",
                    self.spec.cfg.table
                )
            })?,
            None => Vec::new(),
        };
        if states.is_empty() && exclusive_owner.is_none() && journaled.is_empty() {
            return Ok(());
        }
        let table = self.spec.cfg.table.clone();
        let tc = TxnCoordinator::connect(&self.spec.cfg.client).await?;
        let linked = self.txn_acks.is_some();
        for state in &states {
            if let Some(t) = &state.commit {
                let txn: TxnRef = t.parse()?;
                match tc.commit(txn).await? {
                    EndOutcome::Done => {
                        info!(table = %table, txn = %txn, "committed the transaction of the restored checkpoint")
                    }
                    // Linked: the subscription's cursor moved with the transaction if (and only if) it
                    // committed, and the source resumes from the cursor, so either way nothing is lost.
                    EndOutcome::Unknown(why) if linked => {
                        info!(table = %table, txn = %txn, "the restored checkpoint's transaction is already ended (committed before the restart, or aborted; the source resumes from the subscription's cursor, which moved only if it committed): {why}")
                    }
                    EndOutcome::Unknown(why) => {
                        warn!(table = %table, txn = %txn, "the restored checkpoint's transaction is already ended (committed before the restart, or expired: with 'transaction-timeout' above the checkpoint interval it was committed): {why}")
                    }
                }
            }
            if let Some(t) = &state.abort {
                let txn: TxnRef = t.parse()?;
                match tc.abort(txn).await? {
                    EndOutcome::Done => {
                        info!(table = %table, txn = %txn, "aborted the transaction opened after the restored checkpoint")
                    }
                    EndOutcome::Unknown(why) => {
                        info!(table = %table, txn = %txn, "the transaction opened after the restored checkpoint is already ended: {why}")
                    }
                }
            }
        }
        let ended = match (&exclusive_owner, &self.journal) {
            (Some(owner), _) => end_earlier_runs(&table, &self.spec.topic, owner, &tc).await,
            (None, Some(journal)) => {
                let committed = states
                    .iter()
                    .filter_map(|s| s.commit.as_deref()?.parse().ok())
                    .collect();
                end_journaled(&table, journal, journaled, &committed, &tc).await
            }
            (None, None) => Ok(()),
        };
        tc.close().await;
        ended
    }
}

/// Linked through an Exclusive subscription, every run records the transactions it may have open
/// before it uses them (ADR 0026); no other process can be running the
/// job, so every transaction recorded by another process (an earlier run, killed or failed) is aborted
/// here, before this run reads: its acknowledgements return to the subscription and its rows are
/// dropped (the cursor is where this run resumes). A transaction that committed meanwhile stays
/// committed (the coordinator ends a transaction once).
async fn end_earlier_runs(
    table: &str,
    topic: &TopicName,
    owner: &OwnerRecord,
    tc: &TxnCoordinator,
) -> Result<()> {
    let properties = admin::topic_properties(&owner.admin_url, &owner.cfg.client, topic)
        .await
        .with_context(|| {
            format!("table '{table}': reading the transactions earlier runs recorded on {topic}")
        })?;
    let me = crate::pulsar::reader::consumer_name();
    for (run, records) in recorded_owners(&properties, &owner.key_prefix) {
        if run == me {
            continue;
        }
        for (key, txns) in records {
            for txn in txns {
                match tc.abort(txn).await {
                    Ok(EndOutcome::Done) => {
                        info!(table = %table, txn = %txn, run = %run, "aborted a transaction an earlier run left open (its acknowledgements return to the subscription, its rows are dropped)")
                    }
                    Ok(EndOutcome::Unknown(why)) => {
                        debug!(table = %table, txn = %txn, "a transaction an earlier run recorded is already ended: {why}")
                    }
                    Err(e) => {
                        return Err(e.context(format!(
                            "table '{table}': aborting transaction {txn}, which an earlier run left open"
                        )));
                    }
                }
            }
            if let Err(e) =
                admin::remove_topic_property(&owner.admin_url, &owner.cfg.client, topic, &key).await
            {
                debug!(table = %table, key = %key, "removing an earlier run's record: {e:#}");
            }
        }
    }
    Ok(())
}

/// Without a linked source: aborts every transaction an earlier run journaled (ADR 0026), except the
/// restored checkpoint's, which was just committed. The source resumes from the restored checkpoint, so
/// whatever else they hold is written again.
async fn end_journaled(
    table: &str,
    journal: &TxnJournal,
    journaled: Vec<Earlier>,
    committed: &std::collections::HashSet<TxnRef>,
    tc: &TxnCoordinator,
) -> Result<()> {
    for earlier in journaled {
        for txn in earlier
            .transactions
            .iter()
            .filter(|t| !committed.contains(t))
        {
            match tc.abort(*txn).await {
                Ok(EndOutcome::Done) => {
                    info!(table = %table, txn = %txn, run = %earlier.run, subtask = earlier.subtask, "aborted a transaction an earlier run left open (its rows come again from the restored checkpoint)")
                }
                Ok(EndOutcome::Unknown(why)) => {
                    debug!(table = %table, txn = %txn, "a transaction an earlier run journaled is already ended: {why}")
                }
                Err(e) => {
                    return Err(e.context(format!(
                        "table '{table}': aborting transaction {txn}, which an earlier run left open"
                    )));
                }
            }
        }
        journal.remove(&earlier).await?;
    }
    Ok(())
}
