//! The lag of a source subtask's partitions, from the broker: every [`LAG_POLL`] a task asks the admin
//! API about the backlog of the job's subscription on each split the subtask has (what follows the
//! subscription's mark-delete position, which the source moves when a checkpoint completes) and writes
//! it to the subtask's [`PartitionBoard`]. The topic stats give the backlog in entries (a batch is one);
//! when it is not empty the broker counts its messages (`analyzeBacklog`). Off the read path: the source
//! only spawns the task and drops it.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::super::config::PulsarTableConfig;
use crate::connector_api::PartitionBoard;
use crate::pulsar::admin;
use crate::pulsar::topics::TopicName;

/// How often the broker is asked.
pub(super) const LAG_POLL: Duration = Duration::from_secs(3);

/// The polling task; dropping it stops it.
pub(super) struct LagPoller(JoinHandle<()>);

impl Drop for LagPoller {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts polling the lag of the splits on `board`, or notes on it why there is none: without an
/// `admin-url` (only the admin API reports a subscription's backlog), or for key-range readers (their
/// non-durable subscriptions commit nothing, so their backlog never falls).
pub(super) fn spawn(
    cfg: &Arc<PulsarTableConfig>,
    subscription: &str,
    board: Arc<PartitionBoard>,
) -> Option<LagPoller> {
    let Some(admin_url) = cfg.admin_url.clone() else {
        board.set_lag_unavailable(
            "no 'admin-url': the lag is the subscription's backlog, which the broker reports through its admin API",
        );
        return None;
    };
    if cfg.source.key_ranges.is_some() {
        board.set_lag_unavailable(
            "key ranges are read through non-durable subscriptions, which have no committed position",
        );
        return None;
    }
    let cfg = cfg.clone();
    let subscription = subscription.to_owned();
    Some(LagPoller(tokio::spawn(async move {
        let mut failing = false;
        let mut counting = true;
        let mut tick = tokio::time::interval(LAG_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            for key in board.keys() {
                let Ok(topic) = TopicName::parse(&key) else {
                    continue;
                };
                let entries =
                    admin::subscription_backlog(&admin_url, &cfg.client, &topic, &subscription)
                        .await;
                let entries = match entries {
                    Ok(Some(n)) => {
                        failing = false;
                        n
                    }
                    Ok(None) => continue,
                    Err(e) if !failing => {
                        failing = true;
                        warn!(table = %cfg.table, split = %key, "cannot read the lag from the broker (retried every {} s): {e:#}", LAG_POLL.as_secs());
                        continue;
                    }
                    Err(e) => {
                        debug!(table = %cfg.table, split = %key, "lag: {e:#}");
                        continue;
                    }
                };
                if entries == 0 {
                    board.set_lag(&key, 0, false);
                    continue;
                }
                match admin::analyze_backlog(&admin_url, &cfg.client, &topic, &subscription).await {
                    Ok(Some(count)) => board.set_lag(&key, count.messages, count.aborted),
                    // Every entry holds a message at least.
                    other => {
                        if counting {
                            counting = false;
                            let why = match other {
                                Err(e) => format!("{e:#}"),
                                Ok(_) => "no counts in the answer".to_owned(),
                            };
                            warn!(table = %cfg.table, split = %key, "the broker does not count the messages of a backlog (analyzeBacklog, Pulsar 3.2+); the lag shown is its entries, a lower bound: {why}");
                        }
                        board.set_lag(&key, entries, true);
                    }
                }
            }
        }
    })))
}
