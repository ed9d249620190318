//! Writing to a topic with explicit partitions, a bounded number of sends in flight, and a flush that
//! returns only when every send was acknowledged by the broker (what an at-least-once checkpoint needs).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures::task::AtomicWaker;
use magnetar::proto::TxnId;
use magnetar::proto::types::CompressionKind;
use magnetar::proto::{ProducerError, ProtocolError};
use magnetar::runtime_tokio::{ClientError, Producer, SendFut};
use magnetar::{MessageId, OutgoingMessage, PulsarClient};

use super::errors::{self, Failure};
use super::topics::TopicName;

/// Producer settings.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    /// `None` disables batching; otherwise (max messages, max bytes, max delay) per batch.
    pub batching: Option<(usize, usize, Duration)>,
    pub compression: CompressionKind,
    /// Deadline for the broker's receipt of one send.
    pub send_timeout: Duration,
    /// Sends in flight per topic before `send` waits for receipts (backpressure).
    pub max_in_flight: usize,
    /// Producer name, the same on every partition (as the Java client names a partitioned producer's
    /// children); `None` lets the broker choose.
    pub producer_name: Option<String>,
    /// The schema announced with every producer (the broker registers it or checks compatibility).
    pub schema: Option<magnetar::proto::pb::Schema>,
    /// A message above the broker's `max_message_size` goes in chunks (else its send fails).
    pub chunking: bool,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            batching: Some((1_000, 128 * 1024, Duration::from_millis(5))),
            compression: CompressionKind::None,
            send_timeout: Duration::from_secs(30),
            max_in_flight: 2_000,
            producer_name: None,
            schema: None,
            chunking: false,
        }
    }
}

impl WriterConfig {
    pub fn validate(&self) -> Result<()> {
        if self.max_in_flight == 0 {
            bail!("max_in_flight must be at least 1");
        }
        Ok(())
    }
}

/// Registers the runtime's codecs with the protocol crate, which compresses batches as a whole and
/// messages sent alone (once per process).
fn register_compressor() {
    fn compress(kind: i32, data: &[u8]) -> std::result::Result<bytes::Bytes, String> {
        use magnetar::proto::pb::CompressionType;
        use magnetar::runtime_tokio::compress;
        let pb = CompressionType::try_from(kind)
            .map_err(|_| format!("unknown compression type {kind}"))?;
        compress::compress(compress::kind_from_pb(pb), data).map_err(|e| e.to_string())
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        magnetar::proto::batch_payload::set_batch_compressor(compress);
    });
}

/// How a message's key and value are to be read (set in its metadata when it is sent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MessageFlags {
    /// The key is the base64 text of binary key bytes (Pulsar's `partition_key_b64_encoded`, what Java's
    /// `keyBytes(...)` writes), so readers get the bytes back.
    pub key_b64: bool,
    /// The message has no value (Pulsar's `null_value`, Java's `value(null)`): a tombstone.
    pub null_value: bool,
}

impl MessageFlags {
    /// A key given as bytes.
    pub fn keyed(key_b64: bool) -> MessageFlags {
        MessageFlags {
            key_b64,
            null_value: false,
        }
    }
}

/// A send the broker did not acknowledge.
#[derive(Debug, thiserror::Error)]
#[error("send to {topic} failed: {reason}")]
pub struct SendFailure {
    pub topic: String,
    pub reason: String,
    /// The message, when the writer keeps failed messages (for a dead-letter topic).
    pub message: Option<OutgoingMessage>,
    /// How its key and value are read (see [`TopicWriter::send_keyed`]).
    pub flags: MessageFlags,
}

/// One send waiting for its receipt, with what its failure reports.
struct Queued {
    fut: SendFut,
    /// Boxed: most sends keep nothing, and thousands of these wait at once.
    kept: Option<Box<OutgoingMessage>>,
    flags: MessageFlags,
}

/// Set when the receipt of a producer's oldest send may be in: the one waker every polled send holds.
#[derive(Default)]
struct ReceiptSignal {
    ready: AtomicBool,
    /// The task waiting in [`TopicWriter::reap`], if one is.
    task: AtomicWaker,
}

impl Wake for ReceiptSignal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// Writes to one topic: one producer per partition (or one for a non-partitioned topic).
///
/// The broker acknowledges a producer's sends in the order they were sent, so each producer's sends
/// wait in a queue and only the oldest is polled: its waker is the writer's [`ReceiptSignal`], and when
/// it fires the queue is drained up to the first send still unacknowledged. A batch's receipt thus
/// costs one wake, not one per message (a future per send in a `FuturesUnordered` cost a box, a waker
/// registration and a wake per message: about a fifth of a sink's CPU). A send is handed to the connection
/// when `Producer::send` is called, not when it is polled, as long as the client has no memory budget
/// (`memory_limit_bytes` 0, which pulsar-connect never sets): with one, a send waiting for the budget
/// would be handed on only once it became the oldest.
pub struct TopicWriter {
    topic: TopicName,
    producers: Vec<(TopicName, Producer)>,
    /// The codec every message asks the protocol crate for (`pb::CompressionType`), if any.
    compression: Option<i32>,
    partitioned: bool,
    /// Per producer, its sends waiting for receipts, oldest first.
    queues: Vec<VecDeque<Queued>>,
    in_flight: usize,
    signal: Arc<ReceiptSignal>,
    max_in_flight: usize,
    keep_failed: bool,
    failures: Vec<SendFailure>,
    acknowledged: u64,
}

impl TopicWriter {
    /// Opens producers for every partition of `topic`.
    pub async fn open(
        client: &PulsarClient,
        topic: TopicName,
        config: &WriterConfig,
    ) -> Result<TopicWriter> {
        config.validate()?;
        let compression = (config.compression != CompressionKind::None).then(|| {
            register_compressor();
            config.compression.to_pb() as i32
        });
        let targets = partition_targets(client, &topic).await?;
        let partitioned = targets.first().map(TopicName::as_str) != Some(topic.as_str());
        let mut producers = Vec::with_capacity(targets.len());
        for t in targets {
            // Compression is the protocol crate's (per message, below): the runtime's own codec
            // compresses each message before batching, a batch no client can read (patch 7 in
            // third_party/README.md). The protocol crate compresses a batch as a whole, as Java does.
            let mut b = client
                .producer(t.as_str())
                .compression(CompressionKind::None)
                .send_timeout(config.send_timeout)
                .chunking(config.chunking);
            if let Some((msgs, bytes, delay)) = config.batching {
                b = b.batching(msgs, bytes).batching_max_publish_delay(delay);
            }
            if let Some(name) = &config.producer_name {
                b = b.name(name.clone());
            }
            if let Some(schema) = &config.schema {
                b = b.schema(schema.clone());
            }
            let p = b.create().await.map_err(|e| match errors::classify(&e) {
                Failure::IncompatibleSchema => anyhow::anyhow!(
                    "{t} has a schema incompatible with the table's (see `pulsar-admin schemas get {t}`; the broker says: {e})"
                ),
                _ => anyhow::Error::new(e).context(format!("creating a producer on {t}")),
            })?;
            producers.push((t, p));
        }
        Ok(TopicWriter {
            topic,
            queues: producers.iter().map(|_| VecDeque::new()).collect(),
            producers,
            compression,
            partitioned,
            in_flight: 0,
            signal: Arc::default(),
            max_in_flight: config.max_in_flight,
            keep_failed: false,
            failures: Vec::new(),
            acknowledged: 0,
        })
    }

    /// Keep failed messages in [`SendFailure::message`] (to re-route them to a dead-letter topic).
    pub fn keep_failed_messages(&mut self, on: bool) {
        self.keep_failed = on;
    }

    pub fn topic(&self) -> &TopicName {
        &self.topic
    }

    /// The number of partitions, 0 for a non-partitioned topic.
    pub fn partitions(&self) -> u32 {
        if self.partitioned {
            self.producers.len() as u32
        } else {
            0
        }
    }

    /// Sends acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged
    }

    /// Enqueues one message for `partition` (ignored for a non-partitioned topic). Waits for receipts when
    /// too many sends are in flight. A failed send is not an error here: it is reported by [`Self::flush`]
    /// (and [`Self::take_failures`]).
    pub async fn send(&mut self, partition: u32, message: OutgoingMessage) -> Result<()> {
        self.send_keyed(partition, message, MessageFlags::default())
            .await
    }

    /// [`Self::send`] with [`MessageFlags`]: a key given as bytes, a tombstone.
    pub async fn send_keyed(
        &mut self,
        partition: u32,
        message: OutgoingMessage,
        flags: MessageFlags,
    ) -> Result<()> {
        let idx = if self.partitioned {
            partition as usize
        } else {
            0
        };
        if idx >= self.producers.len() {
            bail!(
                "partition {partition} does not exist: {} has {} partitions",
                self.topic,
                self.producers.len()
            );
        }
        while self.in_flight >= self.max_in_flight {
            self.reap().await;
        }
        let producer = &self.producers[idx].1;
        let kept = self.keep_failed.then(|| Box::new(message.clone()));
        let mut proto: magnetar::proto::producer::OutgoingMessage = message.into();
        if flags.key_b64 && proto.metadata.partition_key.is_some() {
            proto.metadata.partition_key_b64_encoded = Some(true);
        }
        if flags.null_value {
            proto.metadata.null_value = Some(true);
        }
        proto.metadata.compression = self.compression;
        let fut = producer.send(proto);
        let queue = &mut self.queues[idx];
        queue.push_back(Queued { fut, kept, flags });
        self.in_flight += 1;
        if queue.len() == 1 {
            // A new oldest send: polled once so that its receipt wakes the signal.
            self.drain(idx);
        }
        // Collect receipts that are already in, without waiting.
        self.collect();
        Ok(())
    }

    /// Takes the receipts in from every queue when the signal says one may be in.
    fn collect(&mut self) {
        // Called per send: a plain load first, the read-modify-write only when the signal fired.
        if self.signal.ready.load(Ordering::Acquire)
            && self.signal.ready.swap(false, Ordering::AcqRel)
        {
            for idx in 0..self.queues.len() {
                self.drain(idx);
            }
        }
    }

    /// Records the receipts of producer `idx`'s oldest sends until one is still unacknowledged (which then
    /// holds the signal's waker). Returns how many were recorded.
    fn drain(&mut self, idx: usize) -> usize {
        let waker = Waker::from(self.signal.clone());
        let mut cx = TaskContext::from_waker(&waker);
        let mut done = 0;
        while let Some(front) = self.queues[idx].front_mut() {
            let Poll::Ready(outcome) = Pin::new(&mut front.fut).poll(&mut cx) else {
                break;
            };
            let q = self.queues[idx].pop_front().expect("polled above");
            self.in_flight -= 1;
            done += 1;
            self.record(idx, outcome, q);
        }
        done
    }

    /// Waits until at least one receipt is in (or nothing is in flight).
    async fn reap(&mut self) {
        std::future::poll_fn(|cx| {
            if self.in_flight == 0 {
                return Poll::Ready(());
            }
            self.signal.task.register(cx.waker());
            self.signal.ready.store(false, Ordering::Release);
            let done: usize = (0..self.queues.len()).map(|idx| self.drain(idx)).sum();
            if done > 0 {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    fn record(
        &mut self,
        idx: usize,
        outcome: std::result::Result<MessageId, ClientError>,
        q: Queued,
    ) {
        match outcome {
            Ok(_) => self.acknowledged += 1,
            Err(e) => self.failures.push(SendFailure {
                topic: self.producers[idx].0.to_string(),
                reason: match &e {
                    ClientError::Protocol(ProtocolError::Producer(
                        ProducerError::MessageTooLarge { .. },
                    )) => format!(
                        "{e} (the broker's maxMessageSize; with 'pulsar.producer.chunkingEnabled' = 'true' it goes in chunks)"
                    ),
                    _ => e.to_string(),
                },
                message: q.kept.map(|m| *m),
                flags: q.flags,
            }),
        }
    }

    /// Flushes every producer's pending batch and waits for every receipt. Fails when any send since the
    /// last flush failed (the failures stay available through [`Self::take_failures`]).
    pub async fn flush(&mut self) -> Result<()> {
        for (t, p) in &self.producers {
            p.flush()
                .await
                .with_context(|| format!("flushing the producer of {t}"))?;
        }
        while self.in_flight > 0 {
            self.reap().await;
        }
        if let Some(first) = self.failures.first() {
            bail!(
                "{} send(s) to {} failed; first: {first}",
                self.failures.len(),
                self.topic
            );
        }
        Ok(())
    }

    /// Sends still waiting for the broker's receipt.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether a send failed since the failures were last taken.
    pub fn has_failures(&self) -> bool {
        !self.failures.is_empty()
    }

    /// Hands every producer's open batch to the connection now, without waiting for receipts (the
    /// input ran dry: a batch need not wait for its publish delay). Collects receipts already in.
    pub fn send_open_batches(&mut self) {
        for (_, p) in &self.producers {
            p.send_open_batch();
        }
        self.collect();
    }

    /// Pushes every producer's pending batch out and waits until each producer has nothing pending;
    /// unlike [`Self::flush`], a failed send is not an error here (it stays in the failures).
    pub async fn flush_producers(&mut self) -> Result<()> {
        for (t, p) in &self.producers {
            p.flush()
                .await
                .with_context(|| format!("flushing the producer of {t}"))?;
        }
        self.collect();
        Ok(())
    }

    /// The failures recorded so far, clearing them.
    pub fn take_failures(&mut self) -> Vec<SendFailure> {
        std::mem::take(&mut self.failures)
    }

    /// Flushes and closes the producers.
    pub async fn close(mut self) -> Result<()> {
        let flushed = self.flush().await;
        for (_, p) in self.producers {
            p.close().await.ok();
        }
        flushed
    }

    /// Sends `message` inside transaction `txn` (the caller registered the partition with the transaction).
    pub async fn send_in_transaction(
        &mut self,
        partition: u32,
        message: OutgoingMessage,
        txn: TxnId,
    ) -> Result<()> {
        self.send(partition, message.txn(txn)).await
    }

    /// The topic each partition index is written to.
    pub fn partition_topics(&self) -> impl Iterator<Item = &TopicName> {
        self.producers.iter().map(|(t, _)| t)
    }
}

/// What a writer of `topic` produces to: each partition of a partitioned topic, else the topic itself.
pub async fn partition_targets(client: &PulsarClient, topic: &TopicName) -> Result<Vec<TopicName>> {
    let partitions = client
        .partitions_for_topic(topic.as_str())
        .await
        .with_context(|| format!("looking up the partitions of {topic}"))?;
    Ok(if partitions == 0 {
        vec![topic.clone()]
    } else {
        (0..partitions).map(|i| topic.partition(i)).collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_waiting_send_is_small() {
        // Thousands wait at once (`max_in_flight`): a kept message inline made each 300+ bytes.
        let size = std::mem::size_of::<super::Queued>();
        assert!(size <= 128, "Queued is {size} bytes");
    }
}
