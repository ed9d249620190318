//! Take-over after a process dies (ADR 0023): the survivors end what the dead owner left open.
//!
//! A source linked to an exactly-once sink through a subscription that several processes share
//! (`Failover`, `Shared`, `Key_Shared`) acknowledges inside the sink's transactions. A process that dies
//! leaves its open transaction holding those acknowledgements (the broker dispatches the messages to no
//! one) and its uncommitted output (which holds back every read-committed reader of the output topic):
//! both wait until the coordinator times the transaction out. Instead:
//!
//! - **Owners are recorded beside the output.** Before a linked sink writes or acknowledges anything in
//!   a new transaction, it sets a property of its own topic named [`owner_key`] (the source's
//!   subscription, `.owner.`, the sink subtask, this process's consumer name) to the transactions it may
//!   still have open (the pre-committed ones and the new one), through the source table's admin API.
//!   One property per sink subtask and process, rewritten at every checkpoint; the survivor that ends a
//!   gone owner's transactions removes its property.
//! - **A process is alive while its consumers are connected.** Every process subscribes to every split
//!   under its consumer name, so the subscription's consumers (the topic's stats) are the live owners. A
//!   process stopped by SIGSTOP or cut off keeps its connection (and so its transactions) until the broker
//!   closes it for missed keep-alives; only then does it lose its partitions and count as gone.
//! - **The watcher** ([`spawn`]) polls the subscription's consumers every [`POLL`]. At start and whenever
//!   a consumer left, it reads the records; the transactions of an owner missing for [`GRACE`] (two
//!   polls, so a reconnect is not a death) are aborted through the coordinator. Its acknowledgements
//!   come back to the subscription and its output is dropped; the rows are copied again by the partition's
//!   new owner. With `Failover` the active readers then ask the broker to dispatch again what no
//!   transaction holds (the single-active-consumer dispatcher does not resend released messages).
//!
//! Aborting is always safe for the data: the coordinator ends a transaction once, so an owner that did
//! commit first keeps its commit, and one that tries to commit after the abort fails that checkpoint and
//! reads again from the cursor.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::connector_api::TableTelemetry;
use crate::connector_api::telemetry::Series;
use crate::connectors::pulsar::config::PulsarTableConfig;
use crate::connectors::pulsar::txn_acks::{OwnerRecord, TxnAcks};
use crate::pulsar::admin;
use crate::pulsar::topics::TopicName;
use crate::pulsar::transactions::{EndOutcome, TxnCoordinator, TxnRef};

/// How often the watcher looks at the subscription's consumers.
pub const POLL: Duration = Duration::from_secs(1);
/// How long an owner must be missing from the subscription before its transactions are aborted.
pub const GRACE: Duration = Duration::from_millis(1500);
/// Listings of open transactions after a consumer left (or at start): enough for [`GRACE`] to pass.
const SWEEPS: u32 = 4;

const OWNER: &str = ".owner.";

/// The first part of the property names recording the owners of `subscription`'s transactions.
pub fn owner_key_prefix(subscription: &str) -> String {
    format!("{subscription}{OWNER}")
}

/// The property recording the open transactions of sink subtask `subtask` in process `consumer`.
pub fn owner_key(prefix: &str, subtask: usize, consumer: &str) -> String {
    format!("{prefix}{subtask}.{consumer}")
}

/// The owner (consumer name) a property under `prefix` records.
pub fn key_owner<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
    let (subtask, consumer) = key.strip_prefix(prefix)?.split_once('.')?;
    subtask.parse::<usize>().ok()?;
    Some(consumer).filter(|c| !c.is_empty())
}

/// What the records say: per owner, its properties and the transactions they list.
pub fn recorded_owners(
    properties: &BTreeMap<String, String>,
    prefix: &str,
) -> BTreeMap<String, Vec<(String, Vec<TxnRef>)>> {
    let mut out: BTreeMap<String, Vec<(String, Vec<TxnRef>)>> = BTreeMap::new();
    for (key, value) in properties {
        let Some(owner) = key_owner(key, prefix) else {
            continue;
        };
        let txns = value
            .split(',')
            .filter_map(|t| t.trim().parse::<TxnRef>().ok())
            .collect();
        out.entry(owner.to_owned())
            .or_default()
            .push((key.clone(), txns));
    }
    out
}

/// Records, before `open`'s last transaction is used, that this process owns `open` (sink subtask
/// `subtask`), as a property of `topic`.
pub async fn record_owned(
    owner: &OwnerRecord,
    topic: &TopicName,
    subtask: usize,
    open: &[TxnRef],
) -> anyhow::Result<()> {
    let key = owner_key(
        &owner.key_prefix,
        subtask,
        crate::pulsar::reader::consumer_name(),
    );
    let value = open
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    admin::set_topic_properties(
        &owner.admin_url,
        &owner.cfg.client,
        topic,
        &BTreeMap::from([(key, value)]),
    )
    .await
}

/// When each owner of an open transaction was first seen missing from the subscription.
#[derive(Debug, Default)]
pub struct Absence {
    since: BTreeMap<String, Instant>,
}

impl Absence {
    /// `owners`: the owners of the open transactions now; `connected`: the subscription's consumers now.
    /// Returns the owners missing for at least `grace` (gone); forgets owners that are back or own
    /// nothing any more.
    pub fn gone<'a>(
        &mut self,
        owners: impl IntoIterator<Item = &'a str>,
        connected: &BTreeSet<String>,
        now: Instant,
        grace: Duration,
    ) -> BTreeSet<String> {
        let missing: BTreeSet<&str> = owners
            .into_iter()
            .filter(|o| !connected.contains(*o))
            .collect();
        self.since.retain(|o, _| missing.contains(o.as_str()));
        missing
            .into_iter()
            .filter(|o| {
                let since = *self.since.entry((*o).to_owned()).or_insert(now);
                now.duration_since(since) >= grace
            })
            .map(str::to_owned)
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }
}

/// What the watcher tells the source.
#[derive(Debug, Default)]
pub struct Signal {
    /// Failover: ask the broker to dispatch again to the active readers (transactions were ended).
    rewind: AtomicBool,
}

impl Signal {
    /// Whether the active readers should ask for released messages now (once per request).
    pub fn take_rewind(&self) -> bool {
        self.rewind.swap(false, Ordering::AcqRel)
    }
}

/// The running watcher; stopped when dropped.
pub struct Takeover {
    handle: JoinHandle<()>,
    pub signal: Arc<Signal>,
}

impl Drop for Takeover {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// What the watcher watches.
pub struct Watched {
    pub cfg: Arc<PulsarTableConfig>,
    pub admin_url: String,
    pub subscription: String,
    /// The topics whose consumers are the subscription's (a partitioned topic's parent with `true`).
    pub topics: Vec<(TopicName, bool)>,
    /// This process's consumer name (never gone while the watcher runs).
    pub me: String,
    /// Where the sink records its transactions.
    pub acks: Arc<TxnAcks>,
    pub metrics: TakeoverMetrics,
}

/// Open transactions of processes gone from a source table's subscription that this process aborted.
const TAKEOVER_ABORTED: Series = Series {
    name: "source_takeover_aborted_transactions_total",
    help: "Open transactions of processes gone from a source table's subscription that this process aborted (take-over, ADR 0023)",
};

/// Seconds from seeing a process gone to the end of the last transaction it left open.
const TAKEOVER_SECONDS: Series = Series {
    name: "source_takeover_seconds",
    help: "Seconds from seeing a process gone from a source table's subscription to the end of the last transaction it left open (the last take-over)",
};

/// A source's take-over series (ADR 0023), registered through its table's telemetry handle.
#[derive(Debug, Clone)]
pub struct TakeoverMetrics {
    aborted: prometheus::IntCounter,
    seconds: prometheus::Gauge,
}

impl TakeoverMetrics {
    pub fn new(telemetry: &TableTelemetry) -> Self {
        TakeoverMetrics {
            aborted: telemetry.counter(TAKEOVER_ABORTED),
            seconds: telemetry.float_gauge(TAKEOVER_SECONDS),
        }
    }
}

pub fn spawn(watched: Watched) -> Takeover {
    let signal = Arc::new(Signal::default());
    let handle = tokio::spawn(watch(watched, signal.clone()));
    Takeover { handle, signal }
}

async fn watch(w: Watched, signal: Arc<Signal>) {
    let table = w.cfg.table.clone();
    let mut previous: Option<BTreeSet<String>> = None;
    let mut sweeps = SWEEPS;
    let mut absence = Absence::default();
    let mut lost_at: Option<Instant> = None;
    let mut ended_at: Option<Instant> = None;
    let mut tc: Option<TxnCoordinator> = None;
    let mut failing = false;
    loop {
        match connected(&w).await {
            // Stats that miss this process's own consumers are not complete (a reconnect, a partition
            // moving between brokers): nobody is declared gone on them.
            Ok(now_connected) if now_connected.contains(&w.me) => {
                failing = false;
                let now = Instant::now();
                if let Some(prev) = &previous {
                    let left: Vec<&String> = prev.difference(&now_connected).collect();
                    if !left.is_empty() {
                        info!(table = %table, subscription = %w.subscription, consumers = ?left, "consumers left the subscription; ending what they left open once they stay away");
                        sweeps = SWEEPS;
                        lost_at.get_or_insert(now);
                    }
                }
                previous = Some(now_connected.clone());
                if sweeps > 0 || !absence.is_empty() {
                    sweeps = sweeps.saturating_sub(1);
                    match sweep(&w, &now_connected, &mut absence, &mut tc).await {
                        Ok(ended) => {
                            if ended > 0 {
                                ended_at = Some(Instant::now());
                            }
                            // Failover: released messages are dispatched to the active consumer only on
                            // request, whoever aborted the transaction.
                            if ended > 0 || lost_at.is_some() {
                                signal.rewind.store(true, Ordering::Release);
                            }
                        }
                        Err(e) => warn!(table = %table, "take-over: {e:#}"),
                    }
                }
                // The episode is over: report how long the gone owners' transactions held things up.
                if sweeps == 0 && absence.is_empty() {
                    if let Some(end) = ended_at.take() {
                        let since = lost_at.unwrap_or(end);
                        let secs = end.saturating_duration_since(since).as_secs_f64();
                        w.metrics.seconds.set(secs);
                        info!(table = %table, subscription = %w.subscription, seconds = format!("{secs:.1}"), "take-over done: the transactions gone processes left open are ended, {secs:.1} s after they were seen gone");
                    }
                    lost_at = None;
                }
            }
            Ok(_) => {
                debug!(table = %table, "the subscription's stats do not list this process yet")
            }
            Err(e) => {
                if !failing {
                    warn!(table = %table, subscription = %w.subscription, "take-over: reading the subscription's consumers: {e:#}");
                }
                failing = true;
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The subscription's consumers on every topic.
async fn connected(w: &Watched) -> anyhow::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for (topic, partitioned) in &w.topics {
        names.extend(
            admin::subscription_consumers(
                &w.admin_url,
                &w.cfg.client,
                topic,
                *partitioned,
                &w.subscription,
            )
            .await?,
        );
    }
    Ok(names)
}

/// Reads the records and aborts the transactions of owners gone for [`GRACE`]; returns how many of
/// their transactions ended (here or by another survivor).
async fn sweep(
    w: &Watched,
    connected: &BTreeSet<String>,
    absence: &mut Absence,
    tc: &mut Option<TxnCoordinator>,
) -> anyhow::Result<usize> {
    let (Some(topic), Some(owner)) = (w.acks.record_topic(), w.acks.owner()) else {
        return Ok(0);
    };
    let properties = admin::topic_properties(&w.admin_url, &w.cfg.client, &topic).await?;
    let owners = recorded_owners(&properties, &owner.key_prefix);
    let gone = absence.gone(
        owners.keys().map(String::as_str),
        connected,
        Instant::now(),
        GRACE,
    );
    let mut ended = 0;
    for name in &gone {
        let Some(records) = owners.get(name) else {
            continue;
        };
        for (key, txns) in records {
            for txn in txns {
                let coordinator = match tc {
                    Some(c) => c,
                    None => tc.insert(TxnCoordinator::connect(&w.cfg.client).await?),
                };
                match coordinator.abort(*txn).await {
                    Ok(EndOutcome::Done) => {
                        w.metrics.aborted.inc();
                        info!(table = %w.cfg.table, txn = %txn, owner = %name, subscription = %w.subscription, "took over from a process that is gone: aborted its open transaction (its acknowledgements return to the subscription, its output is dropped)");
                    }
                    Ok(EndOutcome::Unknown(why)) => {
                        debug!(table = %w.cfg.table, txn = %txn, "the gone owner's transaction already ended: {why}")
                    }
                    // Committing or aborting already (its owner, or another survivor, got there first).
                    Err(e) => {
                        debug!(table = %w.cfg.table, txn = %txn, "aborting the gone owner's transaction: {e:#}")
                    }
                }
                ended += 1;
            }
            // Nothing of it is open any more: the record goes (another survivor may have removed it).
            if let Err(e) =
                admin::remove_topic_property(&w.admin_url, &w.cfg.client, &topic, key).await
            {
                debug!(table = %w.cfg.table, key = %key, "removing a gone owner's record: {e:#}");
            }
        }
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_subscription_subtask_and_owner() {
        let prefix = owner_key_prefix("pulsar-connect-job-0-src");
        let key = owner_key(&prefix, 1, "pulsar-connect-host.example-1f-0a");
        assert_eq!(
            key,
            "pulsar-connect-job-0-src.owner.1.pulsar-connect-host.example-1f-0a"
        );
        assert_eq!(
            key_owner(&key, &prefix),
            Some("pulsar-connect-host.example-1f-0a")
        );
        assert_eq!(
            key_owner(&key, &owner_key_prefix("pulsar-connect-job-0-sr")),
            None
        );
        assert_eq!(
            key_owner("pulsar-connect-job-0-src.owner.x.y", &prefix),
            None
        );
        assert_eq!(
            key_owner("pulsar-connect-job-0-src.owner.2.", &prefix),
            None
        );
    }

    #[test]
    fn records_of_the_subscription_are_read_by_owner() {
        let prefix = owner_key_prefix("sub");
        let props = BTreeMap::from([
            ("sub.owner.0.p1".to_owned(), "0:3,0:4".to_owned()),
            ("sub.owner.1.p1".to_owned(), "1:9".to_owned()),
            ("sub.owner.0.p2".to_owned(), "0:5, junk".to_owned()),
            ("other.owner.0.p1".to_owned(), "0:7".to_owned()),
            ("unrelated".to_owned(), "x".to_owned()),
        ]);
        let owners = recorded_owners(&props, &prefix);
        assert_eq!(owners.keys().collect::<Vec<_>>(), ["p1", "p2"]);
        let txns = |o: &str| -> Vec<String> {
            owners[o]
                .iter()
                .flat_map(|(_, t)| t.iter().map(ToString::to_string))
                .collect()
        };
        assert_eq!(txns("p1"), ["0:3", "0:4", "1:9"]);
        assert_eq!(txns("p2"), ["0:5"]);
    }

    #[test]
    fn an_owner_is_gone_only_after_missing_for_the_grace() {
        let mut a = Absence::default();
        let t0 = Instant::now();
        let grace = Duration::from_secs(2);
        let connected = BTreeSet::from(["alive".to_owned()]);
        let owners = ["alive", "dead", "dead"];
        assert!(a.gone(owners, &connected, t0, grace).is_empty());
        assert!(!a.is_empty());
        assert!(
            a.gone(owners, &connected, t0 + Duration::from_secs(1), grace)
                .is_empty()
        );
        assert_eq!(
            a.gone(owners, &connected, t0 + Duration::from_secs(2), grace),
            BTreeSet::from(["dead".to_owned()])
        );
        // Back before the grace ran out: its clock starts again when it next goes missing.
        let both = BTreeSet::from(["alive".to_owned(), "dead".to_owned()]);
        assert!(
            a.gone(owners, &both, t0 + Duration::from_secs(3), grace)
                .is_empty()
        );
        assert!(a.is_empty());
        assert!(
            a.gone(owners, &connected, t0 + Duration::from_secs(4), grace)
                .is_empty()
        );
        // Nothing owned any more: forgotten.
        assert!(
            a.gone([], &connected, t0 + Duration::from_secs(9), grace)
                .is_empty()
        );
        assert!(a.is_empty());
    }
}
