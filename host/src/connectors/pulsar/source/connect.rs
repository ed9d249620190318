//! Connecting: the client and admin client, the topics to read, one reader per split (and key range) at its
//! start, the format plugins; discovery rounds that open the readers of new splits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use tracing::{info, warn};

use super::assign;
use super::decode::make_decoders;
use super::startup::{abort_stale_transactions, start_position};
use super::{Running, SourceSpec, SourceState};
use crate::connector_api::Subtask;
use crate::connectors::pulsar::config::PulsarTableConfig;
use crate::connectors::pulsar::txn_acks::TxnAcks;
use crate::pulsar::admin;
use crate::pulsar::reader::{
    DataLossPolicy, KeyRange, SplitReader, SplitSet, StartPosition, Subscribing, SubscriptionKind,
    default_receiver_queue, key_ranges, state_key,
};
use crate::pulsar::topics::{Discovery, Split};
use magnetar::PulsarClient;
use magnetar::admin::AdminClient;

/// The readers of each split: one for every key (the default), or one per share of the key hash space
/// with `enable-key-hash-range` (`scan.parallelism` shares).
pub(super) fn reader_ranges(cfg: &PulsarTableConfig) -> Vec<Option<KeyRange>> {
    match cfg.source.key_ranges {
        None => vec![None],
        Some(n) => key_ranges(n).into_iter().map(Some).collect(),
    }
}

pub(super) fn discovery_interval(cfg: &PulsarTableConfig) -> Option<Duration> {
    cfg.source.discovery
}

/// The client, the admin client (with an `admin-url`) and every split the table reads now.
pub(super) async fn list_splits(
    cfg: &PulsarTableConfig,
) -> Result<(PulsarClient, Option<AdminClient>, Vec<Split>)> {
    let client = crate::pulsar::connect(&cfg.client).await?;
    let admin = match &cfg.admin_url {
        Some(url) => Some(admin::admin_client_for(url, &cfg.client).await?),
        None => None,
    };
    let splits = cfg
        .source
        .selection
        .splits(&client, admin.as_ref())
        .await
        .with_context(|| format!("table '{}': listing the topics to read", cfg.table))?;
    Ok((client, admin, splits))
}

/// Connects and opens every split at its start (restored, or the configured startup mode).
pub(super) async fn connect(
    spec: SourceSpec,
    subscription: String,
    restored: Option<SourceState>,
    linked: Option<Arc<TxnAcks>>,
    subtask: Subtask,
) -> Result<Running> {
    let cfg = &spec.cfg;
    let (client, admin, all) = list_splits(cfg).await?;
    if all.is_empty() {
        warn!(table = %cfg.table, "no topic matches yet; waiting for discovery");
    }
    let ranges = reader_ranges(cfg);
    // This subtask's share: the splits it reads at least one key range of.
    let splits: Vec<Split> = all
        .iter()
        .filter(|s| (0..ranges.len()).any(|r| assign::owns(s, r, ranges.len(), subtask)))
        .cloned()
        .collect();
    let policy = cfg.source.data_loss;
    // Linked to the sink's transactions: the subscription's cursor is where to resume.
    let mut at_cursor = std::collections::BTreeSet::new();
    if let Some(acks) = &linked {
        acks.wait_recovered()
            .await
            .with_context(|| format!("table '{}': before reading", cfg.table))?;
    }
    // (Failover / Shared / Key_Shared: other live processes own open transactions on the subscription; a
    // crashed run's transactions time out and release their messages. Every start is at the cursor anyway.)
    if let (Some(_), Some(url), SubscriptionKind::Exclusive) =
        (&linked, &cfg.admin_url, cfg.source.subscription_kind)
    {
        abort_stale_transactions(cfg, url, &splits, &subscription).await?;
        for split in &splits {
            if subscription_exists(url, &cfg.client, split, &subscription).await? {
                at_cursor.insert(split.topic.to_string());
            }
        }
    }
    // The (split, key range) readers this subtask opens; their number sizes the default receiver queue.
    let ranges = &ranges;
    let owned: Vec<(&Split, Option<KeyRange>)> = splits
        .iter()
        .flat_map(|split| {
            ranges
                .iter()
                .enumerate()
                .filter(move |&(i, _)| assign::owns(split, i, ranges.len(), subtask))
                .map(move |(_, range)| (split, *range))
        })
        .collect();
    let receiver_queue = cfg
        .source
        .receiver_queue
        .unwrap_or_else(|| default_receiver_queue(owned.len()));
    let mut readers = Vec::new();
    for (split, range) in owned {
        let key = state_key(split, range);
        let start = start_position(
            &client,
            cfg,
            split,
            &key,
            restored.as_ref(),
            at_cursor.contains(split.topic.as_str()),
            &subscription,
        )
        .await?;
        let mut reader = SplitReader::open_range(
            &client,
            split.clone(),
            &subscription,
            start,
            Subscribing {
                on_data_loss: policy,
                range,
                kind: cfg.source.subscription_kind,
                receiver_queue,
            },
        )
        .await
        .with_context(|| format!("table '{}': opening {}", cfg.table, split.topic))?;
        let recorded_end = restored
            .as_ref()
            .and_then(|s| s.splits.get(&key))
            .and_then(|c| c.end.clone());
        reader
            .bound(&cfg.source.stop, recorded_end)
            .await
            .with_context(|| format!("table '{}': bounding {}", cfg.table, split.topic))?;
        if hands_out_whole_entries(linked.is_some(), cfg.source.subscription_kind) {
            reader.whole_entries();
        }
        readers.push(reader);
    }
    if subtask.count > 1 {
        info!(table = %cfg.table, splits = readers.len(), of = all.len() * ranges.len(), subtask = subtask.index, subtasks = subtask.count, subscription = %subscription, consumer = %crate::pulsar::reader::consumer_name(), "reading");
    } else {
        info!(table = %cfg.table, splits = readers.len(), subscription = %subscription, consumer = %crate::pulsar::reader::consumer_name(), "reading");
    }
    let interval = discovery_interval(cfg);
    // Discovery knows every split, so it reports only new ones (which `SplitOpening` filters).
    let discovery = interval.map(|_| Discovery::new(cfg.source.selection.clone(), all));
    let decoders = {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || make_decoders(&spec))
            .await
            .map_err(|e| anyhow!("loading the format plugins: {e}"))??
    };
    Ok(Running {
        client: Arc::new(client),
        admin,
        splits: SplitSet::new(readers),
        discovery,
        next_discovery: Instant::now() + interval.unwrap_or(Duration::ZERO),
        discovering: None,
        decoders: Some(decoders),
        decoding: None,
        checkpoint_completed: false,
        takeover: None,
        owned_done_since: None,
    })
}

/// Whether the job's subscription exists on `split` (a linked source resumes at its cursor).
pub(super) async fn subscription_exists(
    admin_url: &str,
    client: &crate::pulsar::ClientConfig,
    split: &Split,
    subscription: &str,
) -> Result<bool> {
    Ok(admin::subscriptions(admin_url, client, &split.topic)
        .await?
        .iter()
        .any(|s| s == subscription))
}

/// Whether a source's readers hand out whole entries only and acknowledge them one by one: linked to the
/// sink's transactions, or through a Failover subscription. With Failover the broker may dispatch a
/// partition to its new active consumer ahead of messages the previous one had and never acknowledged
/// (they come again only when the cursor rewinds): a cumulative acknowledgement through what the new
/// consumer wrote would cover them, and they would be lost (issue 49, a Failover round under network
/// faults lost 90 to 700 rows of a partition that way). One by one, they stay in the backlog until read.
pub(super) fn hands_out_whole_entries(linked: bool, kind: SubscriptionKind) -> bool {
    linked || kind == SubscriptionKind::Failover
}

/// How the readers of discovered splits are opened (the same for every round).
#[derive(Clone)]
pub(super) struct SplitOpening {
    pub subscription: String,
    pub ranges: Vec<Option<KeyRange>>,
    pub policy: DataLossPolicy,
    /// Readers hand out whole entries ([`hands_out_whole_entries`]).
    pub whole_entries: bool,
    pub kind: SubscriptionKind,
    /// `pulsar.reader.receiver-queue-size`; unset, the per-split floor of the shared default (the
    /// splits read already hold theirs).
    pub receiver_queue: u32,
    /// Readers are opened for this subtask's key ranges of a split only.
    pub subtask: Subtask,
}

impl SplitOpening {
    /// `linked`: the source's acknowledgements go into the sink's transactions.
    pub(super) fn of(
        cfg: &PulsarTableConfig,
        subscription: &str,
        linked: bool,
        subtask: Subtask,
    ) -> Self {
        SplitOpening {
            subscription: subscription.to_string(),
            ranges: reader_ranges(cfg),
            policy: cfg.source.data_loss,
            whole_entries: hands_out_whole_entries(linked, cfg.source.subscription_kind),
            kind: cfg.source.subscription_kind,
            receiver_queue: cfg
                .source
                .receiver_queue
                .unwrap_or_else(|| default_receiver_queue(usize::MAX)),
            subtask,
        }
    }

    /// Where a split that appeared after the start begins: its earliest message — or, on a subscription
    /// that other processes share, its cursor (another process may have read the split already).
    fn start(&self) -> StartPosition {
        match self.kind {
            SubscriptionKind::Exclusive => StartPosition::Earliest,
            _ => StartPosition::SubscriptionCursor {
                from_earliest: true,
            },
        }
    }
}

/// A discovery round as its own task: the readers of the splits that appeared since the last round, each
/// read from its earliest message.
pub(super) fn spawn_discovery(
    client: Arc<PulsarClient>,
    admin: Option<AdminClient>,
    mut discovery: Discovery,
    opening: SplitOpening,
) -> super::Discovering {
    tokio::spawn(async move {
        let new = match discovery.new_splits(&client, admin.as_ref()).await {
            Ok(new) => new,
            Err(e) => {
                warn!(
                    "partition discovery: listing the topics failed; retrying at the next round: {e:#}"
                );
                discovery.round_done(Some(e))?;
                return Ok((discovery, Vec::new()));
            }
        };
        let mut readers = Vec::new();
        let mut failure = None;
        for split in new {
            match open_split(&client, &split, &opening).await {
                Ok(opened) => readers.extend(opened),
                Err(e) => {
                    warn!(split = %split.topic, "partition discovery: opening a new split failed; retrying at the next round: {e:#}");
                    discovery.forget(&split);
                    failure = Some(e);
                }
            }
        }
        discovery.round_done(failure)?;
        Ok((discovery, readers))
    })
}

/// The readers of a discovered split (one per key range), from its earliest message; none when one of
/// them cannot be opened (those already open are closed, so a retry opens them all again).
async fn open_split(
    client: &PulsarClient,
    split: &Split,
    opening: &SplitOpening,
) -> Result<Vec<SplitReader>> {
    let mut readers = Vec::new();
    let n = opening.ranges.len();
    for (i, range) in opening.ranges.iter().enumerate() {
        if !assign::owns(split, i, n, opening.subtask) {
            continue;
        }
        match SplitReader::open_range(
            client,
            split.clone(),
            &opening.subscription,
            opening.start(),
            Subscribing {
                on_data_loss: opening.policy,
                range: *range,
                kind: opening.kind,
                receiver_queue: opening.receiver_queue,
            },
        )
        .await
        {
            Ok(mut r) => {
                if opening.whole_entries {
                    r.whole_entries();
                }
                readers.push(r);
            }
            Err(e) => {
                for r in readers {
                    let _ = r.close().await;
                }
                return Err(e);
            }
        }
    }
    Ok(readers)
}
