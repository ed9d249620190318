//! Where a split starts: a fresh start from `scan.startup.mode`, a restored position checked against the
//! topic's ledgers (data loss), and the clean-up of transactions a crashed linked run left open.

use anyhow::{Result, bail};
use magnetar::PulsarClient;
use tracing::{info, warn};

use super::SourceState;
use crate::connectors::pulsar::config::{OffsetStart, PulsarTableConfig, Startup};
use crate::connectors::pulsar::txn_acks::stale_transactions;
use crate::pulsar::admin;
use crate::pulsar::message_id::{format_message_id, parse_message_id};
use crate::pulsar::reader::{DataLossPolicy, StartPosition, SubscriptionKind, resolve_latest};
use crate::pulsar::topics::Split;
use crate::pulsar::transactions::{TxnCoordinator, TxnRef};

/// Aborts the open transactions that acknowledged on the job's subscription: a run that crashed after its
/// sink acknowledged inside a transaction and before the commit left them, and their pending
/// acknowledgements would make every later one fail until the broker times them out. The subscription is
/// Exclusive, so no live run owns them; their output is aborted with them (and read again).
pub(super) async fn abort_stale_transactions(
    cfg: &PulsarTableConfig,
    admin_url: &str,
    splits: &[Split],
    subscription: &str,
) -> Result<()> {
    // The coordinator connection opens (and aborts) a probe transaction, which makes the broker load a
    // transaction coordinator: on a fresh broker none is loaded and the listing below answers 500.
    let tc = TxnCoordinator::connect(&cfg.client).await?;
    let open = match admin::slow_transactions(admin_url, &cfg.client).await {
        Ok(admin::SlowTransactions::Listed(open)) => open,
        Ok(admin::SlowTransactions::CoordinatorNotLoaded(e)) => {
            // A coordinator not loaded yet holds no transaction it could end; one it recovers later
            // times its transactions out as usual (an acknowledgement conflicting with one fails the
            // job, and the restart finds it here).
            warn!(table = %cfg.table, "not every transaction coordinator is loaded yet: {e}");
            Vec::new()
        }
        Err(e) => {
            tc.close().await;
            return Err(e.context(format!(
                "table '{}': listing open transactions (the source's acknowledgements go into the sink's transactions)",
                cfg.table
            )));
        }
    };
    let topics: Vec<String> = splits.iter().map(|s| s.topic.to_string()).collect();
    let stale = stale_transactions(&open, &topics, subscription);
    for (most, least) in stale {
        let txn = TxnRef(magnetar::proto::TxnId::new(most, least));
        let outcome = tc.abort(txn).await;
        info!(table = %cfg.table, txn = %txn, subscription, "aborted a transaction of an earlier run that held acknowledgements on the job's subscription: {outcome:?}");
        outcome?;
    }
    tc.close().await;
    Ok(())
}

/// Whether messages after `id` (the position to resume after) may have been deleted: its ledger is older
/// than the topic's first ledger (retention trimmed it, or the topic was deleted and recreated) and the
/// job's own subscription does not hold a position at or before it (which would have kept everything after
/// it). `None` when nothing can be missing.
async fn deleted_since(
    admin_url: &str,
    client: &crate::pulsar::ClientConfig,
    split: &Split,
    id: &str,
    subscription: &str,
) -> Result<Option<String>> {
    if !split.topic.as_str().starts_with("persistent://") {
        return Ok(None);
    }
    let resume = parse_message_id(id)?;
    let Some(stats) = admin::ledger_stats(admin_url, client, &split.topic).await? else {
        return Ok(None);
    };
    let Some(first_ledger) = stats.first_ledger else {
        return Ok(None);
    };
    if resume.ledger_id >= first_ledger {
        return Ok(None);
    }
    let held = stats
        .cursors
        .get(subscription)
        .is_some_and(|&(l, e)| (l, e) <= (resume.ledger_id, resume.entry_id as i64));
    if held {
        return Ok(None);
    }
    Ok(Some(format!(
        "the position to resume {} from ({id}) lies in ledger {} but the topic's oldest ledger is {first_ledger} and subscription '{subscription}' did not hold it: the messages after it were deleted (retention) or the topic was deleted and recreated",
        split.topic, resume.ledger_id
    )))
}

async fn fresh_start(
    client: &PulsarClient,
    split: &Split,
    subscription: &str,
    startup: &Startup,
) -> Result<StartPosition> {
    Ok(match startup {
        Startup::Earliest => StartPosition::Earliest,
        Startup::Latest => resolve_latest(client, split, subscription).await?,
        Startup::Timestamp(ms) => StartPosition::Timestamp { millis: *ms },
        Startup::ExternalSubscription { from_earliest, .. } => StartPosition::SubscriptionCursor {
            from_earliest: *from_earliest,
        },
        Startup::SpecificOffsets(offsets) => {
            let parent = split
                .topic
                .partition_of()
                .map(|(p, _)| p)
                .unwrap_or_else(|| split.topic.clone());
            let wanted = |o: &&crate::connectors::pulsar::config::SpecificOffset| {
                let topic_ok = o
                    .topic
                    .as_ref()
                    .is_none_or(|t| *t == parent || *t == split.topic);
                let partition_ok = o.partition == split.partition
                    || (split.partition == -1 && o.partition == 0)
                    // Earliest/latest name no partition: `-1:-1:-1` applies to every partition.
                    || (o.partition == -1 && !matches!(o.start, OffsetStart::At(_)));
                topic_ok && partition_ok
            };
            // A topic-qualified entry beats a partition-only one, an exact partition a wildcard.
            let entry = offsets
                .iter()
                .filter(wanted)
                .max_by_key(|o| (o.topic.is_some(), o.partition == split.partition));
            match entry.map(|o| &o.start) {
                Some(OffsetStart::Earliest) => StartPosition::Earliest,
                Some(OffsetStart::Latest) => StartPosition::Latest,
                Some(OffsetStart::At(text)) => {
                    let mut id = parse_message_id(text)?;
                    id.partition = split.partition;
                    StartPosition::At {
                        id: format_message_id(&id),
                    }
                }
                // Partitions without an entry start at the beginning (the reference starts them at latest,
                // silently skipping their backlog).
                None => StartPosition::Earliest,
            }
        }
    })
}

/// Where the reader of `split` (checkpoint key `key`) starts: at the subscription's cursor when other
/// processes share the subscription (`subscription-type` `Failover`) or when linked to the sink's
/// transactions and the subscription exists (`at_cursor`), else at the restored position
/// (checked against the topic's ledgers for data loss), else — a split the checkpoint does not know —
/// at its earliest message, or, on a fresh start, where `scan.startup.mode` says.
pub(super) async fn start_position(
    client: &PulsarClient,
    cfg: &PulsarTableConfig,
    split: &Split,
    key: &str,
    restored: Option<&SourceState>,
    at_cursor: bool,
    subscription: &str,
) -> Result<StartPosition> {
    if cfg.source.subscription_kind != SubscriptionKind::Exclusive {
        // Several processes share the subscription: its cursor, committed at every completed checkpoint
        // by whichever process read the split, is where every start resumes; a local checkpoint never
        // rewinds a split that another process moved on.
        let from_earliest = !matches!(
            cfg.source.startup,
            Startup::Latest
                | Startup::ExternalSubscription {
                    from_earliest: false,
                    ..
                }
        );
        return Ok(StartPosition::SubscriptionCursor { from_earliest });
    }
    Ok(match restored.and_then(|s| s.splits.get(key)) {
        // Linked to the sink's transactions: the cursor moved with every committed output.
        _ if at_cursor => StartPosition::SubscriptionCursor {
            from_earliest: true,
        },
        Some(cp) => match (&cp.resume, &cfg.admin_url) {
            (StartPosition::After { id }, Some(url)) => {
                match deleted_since(url, &cfg.client, split, id, subscription).await {
                    Ok(None) => cp.resume.clone(),
                    Ok(Some(what)) => match cfg.source.data_loss {
                        DataLossPolicy::Fail => bail!(
                            "table '{}': data loss: {what} (set 'properties.pulsar.reader.fail-on-data-loss' = 'false' to continue from the earliest available message)",
                            cfg.table
                        ),
                        DataLossPolicy::UseEarliest => {
                            warn!(table = %cfg.table, split = %split.topic, "data loss: {what}; resuming from the earliest available message");
                            StartPosition::Earliest
                        }
                    },
                    Err(e) => {
                        warn!(table = %cfg.table, split = %split.topic, "could not check the resume position against the topic's ledgers: {e:#}");
                        cp.resume.clone()
                    }
                }
            }
            _ => cp.resume.clone(),
        },
        // A split the checkpoint does not know appeared since: from its beginning.
        None if restored.is_some() => StartPosition::Earliest,
        None => fresh_start(client, split, subscription, &cfg.source.startup).await?,
    })
}
