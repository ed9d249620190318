// SPDX-License-Identifier: Apache-2.0

//! Compacted-topic key/value view. Mirrors `org.apache.pulsar.client.api.TableView`.
//!
//! A [`TableView`] subscribes to a topic (compacted, earliest position) and projects each
//! delivered message into a `HashMap<key, value>` where `key` is the message's `partition_key`
//! and `value` is its raw payload. Late-bound listeners can react to mutations. The view
//! lives as long as the [`TableView`] handle; dropping it tears down the background drain
//! task.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use magnetar_proto::conn::CryptoFailureAction;
use parking_lot::RwLock;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::auto_update_task::{AutoUpdateTask, spawn_auto_update_task};
use crate::client::PulsarError;
use crate::{Engine, PulsarClient, TokioEngine};

/// Callback fired for every mutation applied to the table view.
///
/// `key` is the message's `partition_key` (empty messages without a key are skipped).
/// `value` is the message's raw payload (`None` when the producer sent a tombstone — a
/// keyed message with empty payload, the Pulsar compaction convention for deletes).
pub type TableViewListener = Arc<dyn Fn(&str, Option<&Bytes>) + Send + Sync>;

/// Compacted-topic key/value view.
///
/// Generic over `C: ConsumerApi + Clone` per ADR-0026 §D1. The default
/// (`C = magnetar_runtime_tokio::Consumer`) keeps existing callers —
/// `magnetar::TableView` without a type argument — pointing at the
/// tokio specialisation. Moonpool callers name
/// `TableView<magnetar_runtime_moonpool::Consumer<P>>` directly. The
/// drain task uses `tokio::spawn` regardless of engine, which matches
/// ADR-0025's note that both engines ultimately schedule on tokio
/// (determinism comes from substituting the providers, not from
/// replacing the executor).
#[derive(Clone)]
pub struct TableView<C: crate::ConsumerApi + Clone = magnetar_runtime_tokio::Consumer> {
    state: Arc<RwLock<HashMap<String, Bytes>>>,
    listeners: Arc<RwLock<Vec<TableViewListener>>>,
    drain: Arc<DrainTask>,
    /// Optional background partition-watcher task. `Some` when the builder configured
    /// [`TableViewBuilder::auto_update_partitions_interval`], `None` otherwise
    /// (default). The task is a pure timer that signals
    /// [`Self::partitions_changed_notify`] every interval; the actual
    /// `partitions_for_topic` call is driven by [`Self::refresh_partitions`].
    /// Dropping every clone of the [`TableView`] aborts the task.
    auto_update: Option<Arc<AutoUpdateTask>>,
    /// Clone of the underlying consumer kept for read-only introspection (stats,
    /// connection state, last message id). The drain task owns its own clone; both share
    /// the same `Arc<ConnectionShared>` so closes propagate.
    consumer: C,
}

impl<C: crate::ConsumerApi + Clone> std::fmt::Debug for TableView<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableView")
            .field("size", &self.state.read().len())
            .finish_non_exhaustive()
    }
}

struct DrainTask {
    handle: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Drop for DrainTask {
    fn drop(&mut self) {
        if let Ok(mut g) = self.handle.try_lock() {
            if let Some(h) = g.take() {
                h.abort();
            }
        }
    }
}

impl<C: crate::ConsumerApi + Clone> TableView<C> {
    /// Number of distinct keys currently materialised.
    #[must_use]
    pub fn len(&self) -> usize {
        self.state.read().len()
    }

    /// `true` if no key has been observed yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.state.read().is_empty()
    }

    /// Lookup the most recent value for the given key, if any.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Bytes> {
        self.state.read().get(key).cloned()
    }

    /// `true` if the key has at least one materialised value.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.state.read().contains_key(key)
    }

    /// Snapshot every currently-known (key, value) pair. Allocates — use [`Self::for_each`]
    /// for hot paths.
    #[must_use]
    pub fn snapshot(&self) -> HashMap<String, Bytes> {
        self.state.read().clone()
    }

    /// Snapshot every currently-known key. Mirrors Java `TableView#keySet`.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        self.state.read().keys().cloned().collect()
    }

    /// Snapshot every currently-known value. Mirrors Java `TableView#values`.
    #[must_use]
    pub fn values(&self) -> Vec<Bytes> {
        self.state.read().values().cloned().collect()
    }

    /// Returns `true` if any key maps to a value equal to `value`. Mirrors Java
    /// `TableView#containsValue`.
    #[must_use]
    pub fn contains_value(&self, value: &[u8]) -> bool {
        self.state.read().values().any(|v| v.as_ref() == value)
    }

    /// Iterate every currently-known (key, value) pair under a shared read lock. The
    /// callback must not call back into the [`TableView`] or it will deadlock.
    pub fn for_each<F: FnMut(&str, &Bytes)>(&self, mut f: F) {
        for (k, v) in self.state.read().iter() {
            f(k, v);
        }
    }

    /// Tear down the background drain task. The view's snapshot remains queryable.
    pub async fn close(self) {
        let mut g = self.drain.handle.lock().await;
        if let Some(h) = g.take() {
            h.abort();
            let _ = h.await;
        }
        drop(g);
        if let Some(auto) = &self.auto_update {
            auto.shutdown.notify_waiters();
            let mut ag = auto.handle.lock().await;
            if let Some(h) = ag.take() {
                h.abort();
                let _ = h.await;
            }
        }
    }

    /// Most recent partition count observed by the background partition watcher.
    /// `None` when [`TableViewBuilder::auto_update_partitions_interval`] was not set
    /// (no watcher spawned). Mirrors the read side of Java's
    /// `TableViewBuilder#autoUpdatePartitionsInterval` behaviour — Java rebuilds
    /// internally; we expose the observation so callers can observe and react.
    #[must_use]
    pub fn observed_partitions(&self) -> Option<u32> {
        self.auto_update
            .as_ref()
            .map(|t| t.observed_partitions.load(Ordering::Relaxed))
    }

    /// Monotonic count of partition-change events observed by the background watcher.
    /// Returns `None` when no watcher was configured. The counter starts at `0` and
    /// is bumped every time a poll detects a different partition count than the previous
    /// one. Useful for tests and "did the topology change since X?" probes.
    #[must_use]
    pub fn partition_change_count(&self) -> Option<u64> {
        self.auto_update
            .as_ref()
            .map(|t| t.change_count.load(Ordering::Relaxed))
    }

    /// Returns `true` if a background partition-watcher was spawned for this view
    /// (i.e. [`TableViewBuilder::auto_update_partitions_interval`] was set on the
    /// builder). Defaults to `false` — current Java-parity behaviour when the user
    /// did not opt in.
    #[must_use]
    pub fn has_auto_update_partitions(&self) -> bool {
        self.auto_update.is_some()
    }

    /// `Arc<Notify>` signalled by the background partition-watcher on every timer
    /// tick (i.e. every `auto_update_partitions_interval`) and on every observed
    /// partition-count change driven by [`Self::refresh_partitions`]. Returns `None`
    /// when no watcher was configured. Callers may `await` `notified()` on the
    /// returned handle to react to ticks without polling
    /// [`Self::partition_change_count`].
    #[must_use]
    pub fn partitions_changed_notify(&self) -> Option<Arc<Notify>> {
        self.auto_update.as_ref().map(|t| t.changed.clone())
    }

    /// Query the broker for the current partition count of the topic this view was
    /// opened against, and update [`Self::observed_partitions`] /
    /// [`Self::partition_change_count`] in place if the count differs from the last
    /// observation.
    ///
    /// This is the user-driven half of the
    /// [`TableViewBuilder::auto_update_partitions_interval`] machinery: the timer
    /// task signals [`Self::partitions_changed_notify`]; the user calls this method
    /// in response (or independently) to actually refresh the count. Returns the
    /// freshly-observed count on success, or `Ok(None)` if no watcher was configured
    /// (no topic recorded). Errors are surfaced via [`PulsarError`].
    ///
    /// # Errors
    ///
    /// Surfaces [`PulsarError::Client`] when the broker metadata lookup fails.
    pub async fn refresh_partitions(
        &self,
        client: &PulsarClient,
    ) -> Result<Option<u32>, PulsarError> {
        let Some(task) = self.auto_update.as_ref() else {
            return Ok(None);
        };
        let count = client.partitions_for_topic(&task.topic).await?;
        // Atomic swap-then-compare. See multi_topics.rs for the rationale.
        let prev = task.observed_partitions.swap(count, Ordering::Relaxed);
        if prev != count {
            task.change_count.fetch_add(1, Ordering::Relaxed);
            task.changed.notify_waiters();
        }
        Ok(Some(count))
    }

    /// Register an additional listener fired for every subsequent mutation. Mirrors Java
    /// `TableView#listen`. The callback runs inside the drain task — keep it fast and
    /// non-blocking. Listeners installed via this method fire after the one optionally
    /// configured at build time, in the order they were registered.
    pub fn listen(&self, listener: TableViewListener) {
        self.listeners.write().push(listener);
    }

    /// Number of listeners currently registered (includes the build-time listener, if any).
    /// Mostly useful for tests and instrumentation.
    #[must_use]
    pub fn listener_count(&self) -> usize {
        self.listeners.read().len()
    }

    /// Cumulative consumer counters for the underlying subscription. Mirrors Java
    /// `TableView#getStats` (the Java table view exposes its consumer's stats directly).
    #[must_use]
    pub fn stats(&self) -> magnetar_proto::ConsumerStats {
        crate::ConsumerApi::stats(&self.consumer)
    }

    /// `true` while the broker connection backing the table view is up. Mirrors Java
    /// `TableView#isConnected`.
    #[must_use]
    pub fn is_connected(&self) -> bool {
        crate::ConsumerApi::is_connected(&self.consumer)
    }

    /// Ask the broker for the underlying topic's last-published message id. Mirrors Java
    /// `TableView#getLastMessageId` — useful for "is the view caught up?" checks. The
    /// table view itself does not track its own cursor; pair this with the timestamps on
    /// the messages your listener observed.
    ///
    /// # Errors
    /// - [`PulsarError::Other`] on broker rejection or wire failure (stringified from the runtime's
    ///   `ConsumerApi::Error`).
    pub async fn last_message_id(&self) -> Result<magnetar_proto::MessageId, PulsarError> {
        crate::ConsumerApi::last_message_id(&self.consumer)
            .await
            .map_err(|err| PulsarError::Other(format!("last_message_id: {err}")))
    }
}

/// Builder for a [`TableView`]. Mirrors `org.apache.pulsar.client.api.TableViewBuilder`.
///
/// Engine-generic: the type parameter `E: Engine` (defaults to
/// [`crate::TokioEngine`]) selects the per-engine consumer type via the
/// engine-side [`crate::SubscribeApi`] extension trait. The decryptor
/// slot is engine-typed via [`crate::MessageDecryptorApi`].
pub struct TableViewBuilder<'a, E: Engine = TokioEngine> {
    client: &'a PulsarClient<E>,
    topic: String,
    subscription: Option<String>,
    receiver_queue_size: usize,
    listener: Option<TableViewListener>,
    properties: Vec<(String, String)>,
    subscription_properties: Vec<(String, String)>,
    start_message_id: Option<magnetar_proto::MessageId>,
    crypto_failure_action: CryptoFailureAction,
    auto_update_partitions_interval: Option<Duration>,
    decryptor: Option<<E as crate::MessageDecryptorApi>::Decryptor>,
}

impl<E: Engine> std::fmt::Debug for TableViewBuilder<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableViewBuilder")
            .field("topic", &self.topic)
            .field("subscription", &self.subscription)
            .field("receiver_queue_size", &self.receiver_queue_size)
            .field("has_listener", &self.listener.is_some())
            .field("properties", &self.properties.len())
            .field(
                "subscription_properties",
                &self.subscription_properties.len(),
            )
            .field("start_message_id", &self.start_message_id)
            .field("crypto_failure_action", &self.crypto_failure_action)
            .field(
                "auto_update_partitions_interval",
                &self.auto_update_partitions_interval,
            )
            .field("has_decryptor", &self.decryptor.is_some())
            .finish()
    }
}

impl<'a, E: Engine> TableViewBuilder<'a, E> {
    pub(crate) fn new(client: &'a PulsarClient<E>, topic: String) -> Self {
        Self {
            client,
            topic,
            subscription: None,
            receiver_queue_size: 1000,
            listener: None,
            properties: Vec::new(),
            subscription_properties: Vec::new(),
            start_message_id: None,
            crypto_failure_action: CryptoFailureAction::Fail,
            auto_update_partitions_interval: None,
            decryptor: None,
        }
    }

    /// Override the subscription name used by the underlying reader. Defaults to a unique
    /// per-instance `table-view-<uuid>` so two views over the same topic do not share
    /// dispatch state.
    #[must_use]
    pub fn subscription_name(mut self, name: impl Into<String>) -> Self {
        self.subscription = Some(name.into());
        self
    }

    /// Override the receiver-queue size used by the underlying consumer.
    #[must_use]
    pub fn receiver_queue_size(mut self, size: usize) -> Self {
        self.receiver_queue_size = size;
        self
    }

    /// Append a `(key, value)` consumer-metadata entry advertised on the underlying
    /// `CommandSubscribe.metadata`. Mirrors Java `TableViewBuilder#consumerProperty`.
    #[must_use]
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// Append a `(key, value)` to the underlying subscription's `subscription_properties`.
    /// Mirrors Java `TableViewBuilder#subscriptionProperty`.
    #[must_use]
    pub fn subscription_property(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.subscription_properties
            .push((key.into(), value.into()));
        self
    }

    /// Override the initial message id the underlying subscription starts from. Useful for
    /// resuming a table view at a specific cursor (e.g. recovery from snapshot). Has no
    /// effect on an already-persisted subscription. Mirrors Java
    /// `TableViewBuilder#startMessageId`.
    #[must_use]
    pub fn start_message_id(mut self, id: magnetar_proto::MessageId) -> Self {
        self.start_message_id = Some(id);
        self
    }

    /// PIP-4 decryption failure handling, forwarded to the underlying consumer.
    /// Default `Fail` (propagate the error). `Discard` silently drops the message;
    /// `Consume` delivers the ciphertext to the listener as-is. Mirrors Java
    /// `TableViewBuilder#cryptoFailureAction` (which itself delegates to
    /// `ConsumerBuilder#cryptoFailureAction`).
    ///
    /// **Note**: the underlying `magnetar_runtime_tokio::Consumer` receive path
    /// currently honours only `Fail` end-to-end. `Discard` / `Consume` plumb through
    /// the protocol layer but are applied opportunistically — see the matching
    /// `ConsumerBuilder::crypto_failure_action` doc for the follow-up.
    #[must_use]
    pub fn crypto_failure_action(mut self, action: CryptoFailureAction) -> Self {
        self.crypto_failure_action = action;
        self
    }

    /// Enable a background timer that signals every `interval`, intended to drive
    /// re-checks of the topic's partition count. Mirrors Java
    /// `TableViewBuilder#autoUpdatePartitionsInterval`.
    ///
    /// The internal timer task signals [`TableView::partitions_changed_notify`] on
    /// every tick. Callers run [`TableView::refresh_partitions`] in response to the
    /// signal (or on their own cadence) to actually call
    /// [`PulsarClient::partitions_for_topic`] — the timer itself is decoupled from
    /// the client so the watcher stays compatible with the crate-wide
    /// `#![forbid(unsafe_code)]` invariant. A future revision will wire the watcher
    /// to the client directly once `PulsarClient` is `Arc`-cloneable.
    ///
    /// Default `None` — no timer is spawned and a [`TableView`] over a partitioned
    /// topic will not notice partitions added after construction. Pass a non-zero
    /// `Duration` to opt in. The timer is aborted when the [`TableView`] is dropped
    /// or [`TableView::close`]d.
    ///
    /// Setting a zero `interval` is treated as "disable" — same as the default.
    #[must_use]
    pub fn auto_update_partitions_interval(mut self, interval: Duration) -> Self {
        self.auto_update_partitions_interval = if interval.is_zero() {
            None
        } else {
            Some(interval)
        };
        self
    }

    /// Install a listener invoked for every materialised update. The callback runs inside
    /// the drain task; keep it fast and non-blocking.
    #[must_use]
    pub fn on_update(mut self, listener: TableViewListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Subscribe, drain backlog, and return the view. The future resolves once the
    /// background drain task is running — the initial snapshot continues to populate in
    /// the background as compacted messages arrive.
    ///
    /// Dispatches through the engine-generic [`crate::SubscribeApi`]
    /// extension trait — works against any engine whose `ClientState`
    /// implements it.
    ///
    /// **PIP-4 decryption guardrail (BREAKING since the decryptor-storage lift).**
    /// If [`Self::encryption`] was called on the per-engine specialisation,
    /// `.create()` returns [`PulsarError::Other`] instead of silently opening
    /// a plaintext consumer. The engine-generic dispatch cannot thread an
    /// engine-typed decryptor through `subscribe`, so the previous "silently
    /// drop the decryptor" behaviour was a footgun. Use
    /// [`Self::create_with_decryption`] on the tokio specialisation instead.
    ///
    /// # Errors
    /// - [`PulsarError::Other`] if a decryptor was configured via [`Self::encryption`] — call
    ///   `create_with_decryption()` instead.
    /// - [`PulsarError::Other`] on broker rejection or wire failure (stringified).
    pub async fn create(
        self,
    ) -> Result<TableView<<E::ClientState as crate::SubscribeApi>::Consumer>, PulsarError>
    where
        E::ClientState: crate::SubscribeApi,
        <E::ClientState as crate::SubscribeApi>::Consumer: Clone,
    {
        if self.decryptor.is_some() {
            return Err(PulsarError::Other(
                "TableViewBuilder::create() refuses a configured decryptor — \
                 use create_with_decryption() on the engine-specific builder \
                 (PIP-4 decryptors are engine-typed and cannot dispatch \
                 through the engine-generic SubscribeApi)"
                    .to_owned(),
            ));
        }
        let subscription = self
            .subscription
            .unwrap_or_else(|| format!("table-view-{}", E::random_subscription_suffix()));
        let topic = self.topic.clone();
        let mut builder = self
            .client
            .consumer(self.topic)
            .subscription(subscription)
            .subscription_type(magnetar_proto::pb::command_subscribe::SubType::Exclusive)
            .durable(false)
            .initial_position(magnetar_proto::pb::command_subscribe::InitialPosition::Earliest)
            .read_compacted(true)
            .receiver_queue_size(self.receiver_queue_size)
            .crypto_failure_action(self.crypto_failure_action);
        for (k, v) in self.properties {
            builder = builder.property(k, v);
        }
        for (k, v) in self.subscription_properties {
            builder = builder.subscription_property(k, v);
        }
        if let Some(id) = self.start_message_id {
            builder = builder.start_message_id(id);
        }
        let consumer = builder.subscribe().await?;
        let consumer_view = consumer.clone();
        let auto_update = self
            .auto_update_partitions_interval
            .map(|interval| spawn_auto_update_task(topic, interval, 0));
        Ok(spawn_drain::<
            <E::ClientState as crate::SubscribeApi>::Consumer,
        >(
            consumer, consumer_view, self.listener, auto_update
        ))
    }
}

/// Tokio-engine-specific `TableViewBuilder` methods that need the
/// tokio `MessageDecryptor` extension (PIP-4 not yet wired on moonpool).
impl TableViewBuilder<'_, TokioEngine> {
    /// Configure PIP-4 end-to-end decryption on the underlying consumer. The
    /// decryptor is consulted on every received message whose
    /// `MessageMetadata.encryption_keys` is non-empty. Mirrors Java
    /// `TableViewBuilder#cryptoKeyReader` (which delegates to
    /// `ConsumerBuilder#cryptoKeyReader`).
    #[must_use]
    pub fn encryption(
        mut self,
        decryptor: Arc<dyn magnetar_runtime_tokio::MessageDecryptor>,
    ) -> Self {
        self.decryptor = Some(decryptor);
        self
    }

    /// Subscribe with the configured decryptor (PIP-4). Tokio-engine-only.
    /// Use [`Self::create`] for the engine-generic path that ignores the
    /// decryptor.
    ///
    /// # Errors
    /// - [`PulsarError::Client`] on broker rejection or wire failure.
    pub async fn create_with_decryption(self) -> Result<TableView, PulsarError> {
        let subscription = self.subscription.unwrap_or_else(|| {
            format!(
                "table-view-{}",
                <TokioEngine as Engine>::random_subscription_suffix(),
            )
        });
        let topic = self.topic.clone();
        let mut builder = self
            .client
            .consumer(self.topic)
            .subscription(subscription)
            .subscription_type(magnetar_proto::pb::command_subscribe::SubType::Exclusive)
            .durable(false)
            .initial_position(magnetar_proto::pb::command_subscribe::InitialPosition::Earliest)
            .read_compacted(true)
            .receiver_queue_size(self.receiver_queue_size)
            .crypto_failure_action(self.crypto_failure_action);
        for (k, v) in self.properties {
            builder = builder.property(k, v);
        }
        for (k, v) in self.subscription_properties {
            builder = builder.subscription_property(k, v);
        }
        if let Some(id) = self.start_message_id {
            builder = builder.start_message_id(id);
        }
        if let Some(decryptor) = self.decryptor {
            builder = builder.encryption(decryptor);
        }
        // Use the tokio-specialised `subscribe_with_decryption` path to
        // honor the decryptor configured above.
        let consumer = builder.subscribe_with_decryption().await?;
        let consumer_view = consumer.clone();
        let auto_update = self
            .auto_update_partitions_interval
            .map(|interval| spawn_auto_update_task(topic, interval, 0));
        Ok(spawn_drain::<magnetar_runtime_tokio::Consumer>(
            consumer,
            consumer_view,
            self.listener,
            auto_update,
        ))
    }
}

/// Helper: spawn the per-consumer drain task and assemble the
/// [`TableView`]. Pulled out of [`TableViewBuilder::create`] /
/// [`TableViewBuilder::create_with_decryption`] so both code paths
/// share the drain loop's lock-discipline + dead-letter handling.
fn spawn_drain<C: crate::ConsumerApi + Clone>(
    consumer: C,
    consumer_view: C,
    listener: Option<TableViewListener>,
    auto_update: Option<Arc<AutoUpdateTask>>,
) -> TableView<C> {
    let state: Arc<RwLock<HashMap<String, Bytes>>> = Arc::new(RwLock::new(HashMap::new()));
    let state_drain = state.clone();
    let listeners: Arc<RwLock<Vec<TableViewListener>>> =
        Arc::new(RwLock::new(listener.into_iter().collect()));
    let listeners_drain = listeners.clone();
    let join = tokio::spawn(async move {
        loop {
            let Ok(msg) = crate::ConsumerApi::receive(&consumer).await else {
                break;
            };
            let key = msg
                .single_metadata
                .as_ref()
                .and_then(|sm| sm.partition_key.clone())
                .or_else(|| msg.metadata.partition_key.clone());
            let Some(key) = key else {
                let _ = crate::ConsumerApi::ack(&consumer, msg.message_id).await;
                continue;
            };
            let payload = msg.payload.clone();
            let is_tombstone = payload.is_empty();
            {
                let mut s = state_drain.write();
                if is_tombstone {
                    s.remove(&key);
                } else {
                    s.insert(key.clone(), payload.clone());
                }
            }
            let snapshot: Vec<TableViewListener> = listeners_drain.read().clone();
            for l in &snapshot {
                if is_tombstone {
                    l(&key, None);
                } else {
                    l(&key, Some(&payload));
                }
            }
            let _ = crate::ConsumerApi::ack(&consumer, msg.message_id).await;
        }
    });
    TableView {
        state,
        listeners,
        drain: Arc::new(DrainTask {
            handle: tokio::sync::Mutex::new(Some(join)),
        }),
        auto_update,
        consumer: consumer_view,
    }
}

/// Schema-aware [`TableView`]. Wraps a raw `TableView` plus an `Arc<S>` and exposes
/// typed accessors that decode the payload on demand. Mirrors Java's
/// `pulsar.tableView(Schema)` shape.
///
/// Engine-generic. Defaults `C = magnetar_runtime_tokio::Consumer` so
/// existing call sites (`TypedTableView<MySchema>` without a second
/// type argument) keep resolving to the tokio specialisation.
pub struct TypedTableView<
    S: magnetar_proto::schema::Schema,
    C: crate::ConsumerApi + Clone = magnetar_runtime_tokio::Consumer,
> {
    inner: TableView<C>,
    schema: Arc<S>,
}

impl<S: magnetar_proto::schema::Schema, C: crate::ConsumerApi + Clone> std::fmt::Debug
    for TypedTableView<S, C>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedTableView")
            .field("inner", &self.inner)
            .field("schema_type", &self.schema.schema_type())
            .finish()
    }
}

impl<S: magnetar_proto::schema::Schema, C: crate::ConsumerApi + Clone> Clone
    for TypedTableView<S, C>
{
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            schema: self.schema.clone(),
        }
    }
}

impl<S: magnetar_proto::schema::Schema + 'static, C: crate::ConsumerApi + Clone>
    TypedTableView<S, C>
{
    /// Borrow the underlying raw [`TableView`]. Useful for the unchanged getters
    /// (`len`, `is_empty`, `keys`, listener registration, etc.).
    #[must_use]
    pub fn inner(&self) -> &TableView<C> {
        &self.inner
    }

    /// Decode the value for `key`. Returns `Ok(None)` when the key is absent, `Err` when
    /// decoding the stored bytes against the schema fails.
    pub fn get(&self, key: &str) -> Result<Option<S::Owned>, PulsarError> {
        match self.inner.get(key) {
            Some(bytes) => {
                let value = self.schema.decode(&bytes).map_err(PulsarError::Schema)?;
                Ok(Some(value))
            }
            None => Ok(None),
        }
    }

    /// Decode every currently-known value. Allocates; use [`Self::for_each`] to avoid the
    /// `HashMap` allocation when streaming. Errors stop at the first decode failure.
    pub fn snapshot(&self) -> Result<HashMap<String, S::Owned>, PulsarError> {
        let raw = self.inner.snapshot();
        let mut out = HashMap::with_capacity(raw.len());
        for (k, v) in raw {
            let value = self.schema.decode(&v).map_err(PulsarError::Schema)?;
            out.insert(k, value);
        }
        Ok(out)
    }

    /// Iterate every currently-known (key, decoded value) pair. The callback receives
    /// `Result<S::Owned, SchemaError>` so per-key decode failures don't abort the iteration.
    pub fn for_each<F>(&self, mut f: F)
    where
        F: FnMut(&str, Result<S::Owned, magnetar_proto::schema::SchemaError>),
    {
        self.inner.for_each(|k, v| {
            f(k, self.schema.decode(v));
        });
    }

    /// Register a typed listener fired for every mutation. The callback receives the
    /// pre-decoded value (or `None` for a tombstone). Decode failures replace the value
    /// with `None` so the listener is never poisoned by a single bad payload. The
    /// callback runs inside the drain task — keep it fast and non-blocking.
    pub fn listen<F>(&self, callback: F)
    where
        F: Fn(&str, Option<&S::Owned>) + Send + Sync + 'static,
    {
        let schema = self.schema.clone();
        let raw: TableViewListener =
            Arc::new(move |key: &str, value: Option<&Bytes>| match value {
                Some(bytes) => match schema.decode(bytes) {
                    Ok(decoded) => callback(key, Some(&decoded)),
                    Err(_) => callback(key, None),
                },
                None => callback(key, None),
            });
        self.inner.listen(raw);
    }
}

/// Builder for a [`TypedTableView`]. Mirrors Java's schema-aware
/// `pulsar.tableViewBuilder(Schema)` shape.
///
/// Engine-generic. Same shape as [`TableViewBuilder<E>`]; the `S`
/// schema parameter is decoder-only.
pub struct TypedTableViewBuilder<'a, S: magnetar_proto::schema::Schema, E: Engine = TokioEngine> {
    client: &'a PulsarClient<E>,
    topic: String,
    schema: Arc<S>,
    subscription: Option<String>,
    receiver_queue_size: usize,
    crypto_failure_action: CryptoFailureAction,
    auto_update_partitions_interval: Option<Duration>,
    decryptor: Option<<E as crate::MessageDecryptorApi>::Decryptor>,
}

impl<S: magnetar_proto::schema::Schema, E: Engine> std::fmt::Debug
    for TypedTableViewBuilder<'_, S, E>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedTableViewBuilder")
            .field("topic", &self.topic)
            .field("schema_type", &self.schema.schema_type())
            .field("subscription", &self.subscription)
            .field("receiver_queue_size", &self.receiver_queue_size)
            .field("crypto_failure_action", &self.crypto_failure_action)
            .field(
                "auto_update_partitions_interval",
                &self.auto_update_partitions_interval,
            )
            .field("has_decryptor", &self.decryptor.is_some())
            .finish()
    }
}

impl<'a, S: magnetar_proto::schema::Schema, E: Engine> TypedTableViewBuilder<'a, S, E> {
    pub(crate) fn new(client: &'a PulsarClient<E>, topic: String, schema: Arc<S>) -> Self {
        Self {
            client,
            topic,
            schema,
            subscription: None,
            receiver_queue_size: 1000,
            crypto_failure_action: CryptoFailureAction::Fail,
            auto_update_partitions_interval: None,
            decryptor: None,
        }
    }

    /// Override the auto-generated subscription name.
    #[must_use]
    pub fn subscription_name(mut self, name: impl Into<String>) -> Self {
        self.subscription = Some(name.into());
        self
    }

    /// Override the receiver-queue size.
    #[must_use]
    pub fn receiver_queue_size(mut self, size: usize) -> Self {
        self.receiver_queue_size = size;
        self
    }

    /// PIP-4 decryption failure handling, forwarded to the underlying consumer.
    /// Mirrors Java `TableViewBuilder#cryptoFailureAction` (typed view variant). See
    /// [`TableViewBuilder::crypto_failure_action`] for semantics.
    #[must_use]
    pub fn crypto_failure_action(mut self, action: CryptoFailureAction) -> Self {
        self.crypto_failure_action = action;
        self
    }

    /// Periodically re-check the topic's partition count. Mirrors Java
    /// `TableViewBuilder#autoUpdatePartitionsInterval` (typed view variant). See
    /// [`TableViewBuilder::auto_update_partitions_interval`] for semantics (zero
    /// interval disables; default `None`).
    #[must_use]
    pub fn auto_update_partitions_interval(mut self, interval: Duration) -> Self {
        self.auto_update_partitions_interval = if interval.is_zero() {
            None
        } else {
            Some(interval)
        };
        self
    }

    /// Subscribe and return the schema-aware view via the engine-generic
    /// [`TableViewBuilder::create`] path.
    ///
    /// **PIP-4 decryption guardrail (BREAKING since the decryptor-storage lift).**
    /// If [`Self::encryption`] was called on the per-engine specialisation,
    /// `.create()` returns [`PulsarError::Other`] instead of silently opening
    /// a plaintext consumer. The engine-generic dispatch cannot thread an
    /// engine-typed decryptor through `subscribe`, so the previous "silently
    /// drop the decryptor" behaviour was a footgun. Use
    /// [`Self::create_with_decryption`] on the tokio specialisation instead.
    ///
    /// # Errors
    /// - [`PulsarError::Other`] if a decryptor was configured via [`Self::encryption`] — call
    ///   `create_with_decryption()` instead.
    /// - [`PulsarError::Other`] on broker rejection or wire failure (stringified).
    pub async fn create(
        self,
    ) -> Result<TypedTableView<S, <E::ClientState as crate::SubscribeApi>::Consumer>, PulsarError>
    where
        E::ClientState: crate::SubscribeApi,
        <E::ClientState as crate::SubscribeApi>::Consumer: Clone,
    {
        if self.decryptor.is_some() {
            return Err(PulsarError::Other(
                "TypedTableViewBuilder::create() refuses a configured decryptor — \
                 use create_with_decryption() on the engine-specific builder \
                 (PIP-4 decryptors are engine-typed and cannot dispatch \
                 through the engine-generic SubscribeApi)"
                    .to_owned(),
            ));
        }
        let mut builder = self
            .client
            .table_view(self.topic)
            .receiver_queue_size(self.receiver_queue_size)
            .crypto_failure_action(self.crypto_failure_action);
        if let Some(name) = self.subscription {
            builder = builder.subscription_name(name);
        }
        if let Some(interval) = self.auto_update_partitions_interval {
            builder = builder.auto_update_partitions_interval(interval);
        }
        let inner = builder.create().await?;
        Ok(TypedTableView {
            inner,
            schema: self.schema,
        })
    }
}

/// Tokio-engine-specific `TypedTableViewBuilder` methods.
impl<S: magnetar_proto::schema::Schema> TypedTableViewBuilder<'_, S, TokioEngine> {
    /// Configure PIP-4 end-to-end decryption on the underlying consumer.
    /// Mirrors Java `TableViewBuilder#cryptoKeyReader` (typed view variant). See
    /// [`TableViewBuilder::encryption`] for semantics. Tokio-engine-only;
    /// pair with [`Self::create_with_decryption`] to honor the decryptor.
    #[must_use]
    pub fn encryption(
        mut self,
        decryptor: Arc<dyn magnetar_runtime_tokio::MessageDecryptor>,
    ) -> Self {
        self.decryptor = Some(decryptor);
        self
    }

    /// Subscribe and return the schema-aware view, honoring the
    /// configured PIP-4 decryptor. Tokio-engine-only. Use [`Self::create`]
    /// for the engine-generic path that ignores the decryptor.
    ///
    /// # Errors
    /// - [`PulsarError::Client`] on broker rejection or wire failure.
    pub async fn create_with_decryption(self) -> Result<TypedTableView<S>, PulsarError> {
        let mut builder = self
            .client
            .table_view(self.topic)
            .receiver_queue_size(self.receiver_queue_size)
            .crypto_failure_action(self.crypto_failure_action);
        if let Some(name) = self.subscription {
            builder = builder.subscription_name(name);
        }
        if let Some(interval) = self.auto_update_partitions_interval {
            builder = builder.auto_update_partitions_interval(interval);
        }
        if let Some(decryptor) = self.decryptor {
            builder = builder.encryption(decryptor);
        }
        let inner = builder.create_with_decryption().await?;
        Ok(TypedTableView {
            inner,
            schema: self.schema,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, AtomicU64};

    use super::*;

    #[test]
    fn empty_view_snapshot_returns_empty_map() {
        // We can't trivially construct a TableView without a broker, but we can verify the
        // map operations on the inner state.
        let state: Arc<RwLock<HashMap<String, Bytes>>> = Arc::new(RwLock::new(HashMap::new()));
        assert!(state.read().is_empty());
        state
            .write()
            .insert("a".to_owned(), Bytes::from_static(b"1"));
        state
            .write()
            .insert("b".to_owned(), Bytes::from_static(b"2"));
        // Tombstone "a" — remove
        state.write().remove("a");
        assert_eq!(state.read().len(), 1);
        assert!(state.read().contains_key("b"));
        assert_eq!(state.read().get("b").unwrap().as_ref(), b"2");
    }

    #[test]
    fn listen_appends_and_fires_callbacks() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listeners: Arc<RwLock<Vec<TableViewListener>>> = Arc::new(RwLock::new(Vec::new()));
        let counter = Arc::new(AtomicUsize::new(0));
        let c1 = counter.clone();
        let c2 = counter.clone();
        listeners.write().push(Arc::new(move |_k, _v| {
            c1.fetch_add(1, Ordering::SeqCst);
        }));
        listeners.write().push(Arc::new(move |_k, _v| {
            c2.fetch_add(10, Ordering::SeqCst);
        }));
        // Simulate the drain's "snapshot then fire" pattern.
        let snapshot: Vec<TableViewListener> = listeners.read().clone();
        let payload = Bytes::from_static(b"v");
        for l in &snapshot {
            l("k", Some(&payload));
        }
        assert_eq!(counter.load(Ordering::SeqCst), 11);
        assert_eq!(snapshot.len(), 2);
    }

    /// Smoke-test the [`TableViewBuilder`] field round-trip for the two new knobs
    /// (`crypto_failure_action` + `auto_update_partitions_interval`). We cannot
    /// drive a real `create()` without a broker, but the setter methods are pure
    /// data — they each write one field — so a field-level round-trip is the right
    /// unit-level check. Boundary behaviour (zero interval → disabled) is covered
    /// by the companion test [`auto_update_zero_interval_disables_watcher`].
    #[test]
    fn table_view_builder_setters_round_trip() {
        // Synthesise the builder state structurally: `TableViewBuilder::new`
        // requires a `&PulsarClient` we cannot manufacture without a broker, and
        // `#![forbid(unsafe_code)]` forbids the usual "dangling pointer" hack.
        // Drive the same field-level invariants the setters do.
        let mut cfa: CryptoFailureAction = CryptoFailureAction::Fail;
        let mut int: Option<Duration> = None;

        // Default state mirrors `TableViewBuilder::new`.
        assert_eq!(
            cfa,
            CryptoFailureAction::Fail,
            "crypto_failure_action defaults to Fail"
        );
        assert!(
            int.is_none(),
            "auto_update_partitions_interval defaults to None"
        );

        // Round-trip every documented `CryptoFailureAction` variant.
        for variant in [
            CryptoFailureAction::Fail,
            CryptoFailureAction::Discard,
            CryptoFailureAction::Consume,
        ] {
            cfa = variant;
            assert_eq!(cfa, variant);
        }

        // Round-trip a non-zero interval.
        int = Some(Duration::from_secs(30));
        assert_eq!(int, Some(Duration::from_secs(30)));

        // Zero collapses to `None` per the documented behaviour of
        // `auto_update_partitions_interval`.
        int = if Duration::ZERO.is_zero() {
            None
        } else {
            Some(Duration::ZERO)
        };
        assert!(int.is_none());
    }

    /// Confirm the auto-update task plumbing is gated on a non-zero interval — the
    /// default `TableView` (built without calling `auto_update_partitions_interval`)
    /// has no watcher, `has_auto_update_partitions()` is `false`, and the
    /// observation getters return `None`. We synthesise an `AutoUpdateTask`-free
    /// `TableView` directly because the full builder path needs a broker.
    #[tokio::test]
    async fn default_table_view_has_no_auto_update_watcher() {
        // The watcher accessors all hang off `self.auto_update: Option<Arc<AutoUpdateTask>>`.
        // Replicate the public getter logic against a synthesised `Option<Arc<...>>` to
        // prove the wiring without a broker.
        fn observed_partitions(t: Option<&Arc<AutoUpdateTask>>) -> Option<u32> {
            t.map(|x| x.observed_partitions.load(Ordering::Relaxed))
        }
        fn change_count(t: Option<&Arc<AutoUpdateTask>>) -> Option<u64> {
            t.map(|x| x.change_count.load(Ordering::Relaxed))
        }
        fn has_auto_update(t: Option<&Arc<AutoUpdateTask>>) -> bool {
            t.is_some()
        }
        fn partitions_changed_notify(t: Option<&Arc<AutoUpdateTask>>) -> Option<Arc<Notify>> {
            t.map(|x| x.changed.clone())
        }

        // Default case: no builder opt-in → `None`.
        let no_watcher: Option<Arc<AutoUpdateTask>> = None;
        assert!(!has_auto_update(no_watcher.as_ref()));
        assert_eq!(observed_partitions(no_watcher.as_ref()), None);
        assert_eq!(change_count(no_watcher.as_ref()), None);
        assert!(partitions_changed_notify(no_watcher.as_ref()).is_none());

        // Opt-in case: synthesise an `AutoUpdateTask` directly. The watcher would
        // normally be spawned by `spawn_auto_update_task`; we replicate the surface
        // here without a broker.
        let observed = Arc::new(AtomicU32::new(0));
        let changes = Arc::new(AtomicU64::new(0));
        let notify = Arc::new(Notify::new());
        let shutdown = Arc::new(Notify::new());
        let handle = tokio::spawn(async {});
        let task = Arc::new(AutoUpdateTask {
            topic: "persistent://public/default/unit-test".to_owned(),
            observed_partitions: observed.clone(),
            change_count: changes.clone(),
            changed: notify.clone(),
            shutdown,
            handle: tokio::sync::Mutex::new(Some(handle)),
        });
        let with_watcher = Some(task);
        assert!(has_auto_update(with_watcher.as_ref()));
        assert_eq!(observed_partitions(with_watcher.as_ref()), Some(0));
        assert_eq!(change_count(with_watcher.as_ref()), Some(0));
        assert!(partitions_changed_notify(with_watcher.as_ref()).is_some());

        // Simulate a partition-count change observation and verify the counter and
        // Notify are wired through.
        observed.store(4, Ordering::Relaxed);
        changes.store(1, Ordering::Relaxed);
        notify.notify_waiters();
        assert_eq!(observed_partitions(with_watcher.as_ref()), Some(4));
        assert_eq!(change_count(with_watcher.as_ref()), Some(1));
    }

    /// Confirm the zero-interval guard in
    /// [`TableViewBuilder::auto_update_partitions_interval`] really collapses to
    /// `None` (i.e. "disable") rather than spinning a tight-loop ticker.
    #[test]
    fn auto_update_zero_interval_disables_watcher() {
        // Mirror the inline logic from the builder setter.
        fn normalise(interval: Duration) -> Option<Duration> {
            if interval.is_zero() {
                None
            } else {
                Some(interval)
            }
        }
        assert!(normalise(Duration::ZERO).is_none());
        assert_eq!(
            normalise(Duration::from_millis(1)),
            Some(Duration::from_millis(1))
        );
        assert_eq!(
            normalise(Duration::from_mins(1)),
            Some(Duration::from_mins(1))
        );
    }

    /// Spawn the auto-update timer (via the shared
    /// [`crate::auto_update_task`] module) at table-view's seed value (`0`) and
    /// confirm the `Notify` plumbing reaches the spawned task. Uses
    /// `tokio::time::pause()` for deterministic timing. Drop-abort semantics
    /// are covered by [`crate::auto_update_task::tests`].
    #[tokio::test(start_paused = true)]
    async fn auto_update_timer_signals_on_tick() {
        let task = spawn_auto_update_task(
            "persistent://public/default/timer-test".to_owned(),
            Duration::from_millis(100),
            0,
        );
        let notify = task.changed.clone();
        // Touch the Notify handle so its plumbing is exercised without committing to
        // an awaiter (the spawned task may not have ticked in this fake-time turn).
        assert!(Arc::strong_count(&notify) >= 2);
        tokio::time::advance(Duration::from_millis(150)).await;
        // Give the spawned task a chance to run.
        tokio::task::yield_now().await;
        // We can't easily assert on Notify directly without racing; instead verify
        // the topic was recorded and the handle is still alive (the timer is
        // running). The drop test below covers the abort-on-drop side.
        assert_eq!(task.topic, "persistent://public/default/timer-test");

        // Confirm Drop aborts the spawned task — after we drop the `Arc`, the
        // handle inside is moved out and aborted.
        drop(task);
    }

    /// Confirm the `decryptor` field flips the `Debug` `has_decryptor` flag and
    /// that the underlying option mirrors `is_some()` directly. Mirrors the
    /// other "no-broker" builder tests in this module: we exercise the storage
    /// surface and the `Debug` projection without standing up a `PulsarClient`.
    #[test]
    fn encryption_setter_storage_predicate() {
        use magnetar_proto::pb;
        use magnetar_runtime_tokio::{EncryptError, MessageDecryptor};

        #[derive(Debug)]
        struct NoOp;
        impl MessageDecryptor for NoOp {
            fn decrypt(
                &self,
                _ciphertext: &[u8],
                _metadata: &pb::MessageMetadata,
            ) -> Result<Bytes, EncryptError> {
                Err(EncryptError::new("test"))
            }
        }

        // Mirror the inline logic from the Debug impl: `decryptor.is_some()` is
        // what `has_decryptor` reports.
        let none_slot: Option<Arc<dyn MessageDecryptor>> = None;
        assert!(none_slot.is_none());

        let some_slot: Option<Arc<dyn MessageDecryptor>> = Some(Arc::new(NoOp));
        assert!(some_slot.is_some());
        assert_eq!(Arc::strong_count(some_slot.as_ref().expect("set above")), 1);
    }
}
