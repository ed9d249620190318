//! The first transactional write to each partition of an exactly-once sink's topic, made alone.
//!
//! A topic's transaction buffer takes its first snapshot when the first transactional message reaches
//! it. Apache Pulsar brokers before apache/pulsar#24945 (4.0.7 among them) race when two such messages
//! arrive together (two sink subtasks, or several processes, starting on a topic that never held a
//! transactional message: every topic of a freshly started broker): the loser's publish fails with
//! "Transaction Buffer take first snapshot failed, the current state is: Ready", and from then on every
//! transactional publish to that topic fails the same way until the topic is unloaded. The broker
//! closes the producers on each failure, the client re-attaches them and re-sends, and the sink's sends
//! time out: a job that never commits (issue 47).
//!
//! So before its first transactional send, a sink writes one message alone to each partition of its
//! topic, in a transaction of its own that it aborts (aborted messages are never delivered to any
//! consumer), once per process and partition, one sink at a time, before the sink opens its own
//! producers. A write the broker refuses that way means the buffer is stuck (another process lost the
//! race against this one): with an admin URL the partition is unloaded, which reloads its buffer from
//! the snapshot the winner wrote, and the write is tried again. A write that is only slow (a buffer
//! recovering after a broker restart) is tried again as it is, and unloaded only after
//! [`SLOW_BEFORE_UNLOAD`] in a row (a stuck buffer whose producers the broker keeps closing answers
//! nothing at all).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use magnetar::{OutgoingMessage, PulsarClient};
use tracing::{info, warn};

use crate::pulsar::ClientConfig;
use crate::pulsar::admin;
use crate::pulsar::topics::TopicName;

/// How long each step of the lone first write may take before the write counts as slow.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The lone write's transaction times out after this at the broker, should its abort not get through.
const PROBE_TXN_TIMEOUT: Duration = Duration::from_secs(15);
/// Writes before the sink gives up (its restart strategy takes over).
const ATTEMPTS: u32 = 8;
/// Slow or failed writes in a row before the partition is unloaded anyway (a buffer the broker keeps
/// closing the producers of answers nothing at all).
const SLOW_BEFORE_UNLOAD: u32 = 3;

/// Whether a broker's refusal says the topic's transaction buffer is in the stuck state.
pub fn is_stuck_buffer(error: &str) -> bool {
    error.contains("Transaction Buffer") || error.contains("ServiceUnitNotReady")
}

/// The partitions this process has written a transactional message to.
fn done() -> &'static Mutex<BTreeSet<String>> {
    static DONE: std::sync::OnceLock<Mutex<BTreeSet<String>>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| Mutex::new(BTreeSet::new()))
}

/// One sink at a time in this process.
fn gate() -> &'static tokio::sync::Mutex<()> {
    static GATE: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    GATE.get_or_init(|| tokio::sync::Mutex::new(()))
}

/// Where to unload a stuck partition.
pub struct Admin<'a> {
    pub url: &'a str,
    pub config: &'a ClientConfig,
}

/// Makes the first transactional write to each of `partitions` alone (see the module's docs).
/// `client` must not carry the sink's own producers: an unload makes every producer of the topic
/// re-attach, and this runs before they exist.
pub async fn ensure(
    table: &str,
    client: &PulsarClient,
    partitions: &[TopicName],
    admin: Option<Admin<'_>>,
) -> Result<()> {
    let _alone = gate().lock().await;
    for topic in partitions {
        let key = topic.to_string();
        if done()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
        {
            continue;
        }
        let mut attempt = 0;
        let mut slow = 0;
        loop {
            attempt += 1;
            // `write_aborted` bounds each of its steps and aborts its transaction whatever happened:
            // no timeout around it, which would drop it before the abort.
            let why = match write_aborted(client, topic).await {
                Ok(()) => break,
                // The broker refused it: the buffer is stuck now.
                Err(e) if is_stuck_buffer(&format!("{e:#}")) => format!("{e:#}"),
                // Slow (a buffer recovering after a broker restart) or failing otherwise: tried again
                // as it is, and unloaded only when it stays so.
                Err(e) => {
                    slow += 1;
                    let why = format!("{e:#}");
                    if slow < SLOW_BEFORE_UNLOAD {
                        warn!(table = %table, topic = %topic, attempt, "the first transactional write to the partition failed ({why}); trying again");
                        continue;
                    }
                    why
                }
            };
            slow = 0;
            let Some(admin) = &admin else {
                bail!(
                    "table '{table}': the first transactional write to {topic} failed ({why}); \
                     the broker's transaction buffer of the topic may be stuck (apache/pulsar#24945: \
                     fixed in later brokers; unloading the topic clears it, which this sink does \
                     itself when the table has an 'admin-url')"
                );
            };
            if attempt >= ATTEMPTS {
                bail!(
                    "table '{table}': the first transactional write to {topic} failed {attempt} \
                     times, also after unloading the topic: {why}"
                );
            }
            warn!(table = %table, topic = %topic, attempt, "the first transactional write to the partition failed ({why}): unloading it so that the broker reloads its transaction buffer (apache/pulsar#24945)");
            admin::unload_topic(admin.url, admin.config, topic)
                .await
                .with_context(|| format!("table '{table}': unloading {topic}"))?;
            tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
        }
        if attempt > 1 {
            info!(table = %table, topic = %topic, attempts = attempt, "the partition's transaction buffer takes transactional writes again");
        }
        done().lock().unwrap_or_else(|e| e.into_inner()).insert(key);
    }
    Ok(())
}

/// One message in a transaction of its own, acknowledged by the broker within [`PROBE_TIMEOUT`], then
/// the transaction aborted — also when the write failed or took too long (a stuck write must not leave
/// its transaction registered on the partition; the broker also ends it after [`PROBE_TXN_TIMEOUT`]).
async fn write_aborted(client: &PulsarClient, topic: &TopicName) -> Result<()> {
    let within =
        |what: &'static str| move |_| anyhow!("{what}: no answer within {PROBE_TIMEOUT:?}");
    let producer = tokio::time::timeout(PROBE_TIMEOUT, client.producer(topic.as_str()).create())
        .await
        .map_err(within("opening a producer"))?
        .map_err(|e| anyhow!("opening a producer: {e}"))?;
    let txn = match tokio::time::timeout(PROBE_TIMEOUT, client.new_transaction(PROBE_TXN_TIMEOUT))
        .await
        .map_err(within("opening a transaction"))
        .and_then(|r| r.map_err(|e| anyhow!("opening a transaction: {e}")))
    {
        Ok(txn) => txn,
        Err(e) => {
            let _ = tokio::time::timeout(Duration::from_secs(2), producer.close()).await;
            return Err(e);
        }
    };
    let written = tokio::time::timeout(PROBE_TIMEOUT, async {
        client
            .register_partition_to_transaction(txn, topic.to_string())
            .await
            .map_err(|e| anyhow!("registering the partition: {e}"))?;
        producer
            .send(
                OutgoingMessage::with_payload(Vec::new())
                    .txn(txn.id())
                    .into(),
            )
            .await
            .map_err(|e| anyhow!("sending: {e}"))
    })
    .await
    .map_err(within("writing"))
    .and_then(|r| r);
    let aborted = tokio::time::timeout(PROBE_TIMEOUT, client.abort_transaction(txn))
        .await
        .map_err(within("aborting"))
        .and_then(|r| r.map_err(|e| anyhow!("aborting: {e}")));
    // A producer the broker keeps closing (the stuck buffer) may not answer its close either.
    let _ = tokio::time::timeout(Duration::from_secs(2), producer.close()).await;
    written?;
    aborted.map(|_| ())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stuck_buffer_is_told_by_the_brokers_refusal() {
        assert!(super::is_stuck_buffer(
            "sending: send rejected: code=2 message=org.apache.bookkeeper.mledger.ManagedLedgerException: \
             org.apache.pulsar.broker.service.BrokerServiceException$ServiceUnitNotReadyException: \
             Transaction Buffer take first snapshot failed, the current state is: Ready"
        ));
        assert!(!super::is_stuck_buffer("sending: send timeout"));
        assert!(!super::is_stuck_buffer(
            "opening a transaction: new_txn: coordinator not found"
        ));
    }
}
