// SPDX-License-Identifier: Apache-2.0

//! Tokio engine for magnetar.
//!
//! Drives the sans-io [`magnetar_proto::Connection`] state machine over a tokio TCP stream,
//! optionally wrapped with `tokio-rustls`. One driver task per connection, no channels.
//!
//! # Quickstart
//!
//! ```no_run
//! use magnetar_proto::{ConnectionConfig, CreateProducerRequest};
//! use magnetar_proto::producer::OutgoingMessage;
//! use magnetar_runtime_tokio::Client;
//!
//! # async fn run() -> Result<(), magnetar_runtime_tokio::ClientError> {
//! let client = Client::connect("pulsar://localhost:6650", ConnectionConfig::default()).await?;
//!
//! let producer = client.open_producer(CreateProducerRequest {
//!     topic: "persistent://public/default/example".to_owned(),
//!     ..Default::default()
//! }).await?;
//!
//! let mut msg = OutgoingMessage {
//!     payload: bytes::Bytes::from_static(b"hello"),
//!     metadata: Default::default(),
//!     uncompressed_size: 5,
//!     num_messages: 1,
//!     txn_id: None,
//!     source_message_id: None,
//! };
//! msg.metadata.producer_name = "demo".to_owned();
//! let _id = producer.send(msg).await?;
//!
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # No channels
//!
//! This crate does not use any flavour of channel (mpsc / broadcast / watch / oneshot). The
//! pattern is documented in [GUIDELINES.md] §"No-channels rule" and atomised in
//! [ADR-0003](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0003-no-channels-rule.md):
//!
//! - User-facing futures lock `Arc<parking_lot::Mutex<magnetar_proto::Connection>>` directly.
//! - Driver wake-ups travel through a single-cell [`tokio::sync::Notify`].
//! - Future completion uses [`core::task::Waker`] slabs inside the sans-io state machine,
//!   registered via [`magnetar_proto::Connection::register_waker`] and dispatched when the matching
//!   [`magnetar_proto::OpOutcome`] lands.
//!
//! See also [ADR-0004](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0004-sans-io-protocol-core.md)
//! (sans-io split) and [ADR-0011](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0011-clock-injection-sans-io.md)
//! (clock injection on state-machine entries).
//!
//! [GUIDELINES.md]: https://github.com/CleverCloud/magnetar/blob/main/GUIDELINES.md

#![warn(unreachable_pub)]
#![forbid(unsafe_code)]
#![allow(
    // The driver state machine is naturally branchy; pedantic lints fight the readability of
    // an event-pump loop. We tighten these later once the engine has stabilised.
    clippy::too_many_lines,
    clippy::module_name_repetitions,
    clippy::missing_errors_doc,
    clippy::doc_markdown
)]

pub mod auth_file;
pub mod auto_cluster_failover;
mod client;
pub mod compress;
mod consumer;
pub mod crypto;
pub mod dns;
mod driver;
mod error;
mod log_fields;
mod pool;
mod producer;
pub mod tls_crypto;
pub mod tls_insecure;
pub mod tls_no_hostname;
mod transport;
mod url_parse;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Waker;

use parking_lot::Mutex;
use slab::Slab;
use tokio::sync::Notify;

pub use crate::auth_file::file_token_auth;
pub use crate::auto_cluster_failover::{AutoClusterFailover, TokioHealthProbe};
pub use crate::client::Client;
pub use crate::compress::CompressionError;
pub use crate::consumer::{Consumer, ReceiveFut};
pub use crate::crypto::{EncryptError, MessageDecryptor, MessageEncryptor};
pub use crate::dns::{DnsResolveFuture, DnsResolver, TokioDnsResolver, arc_dns_resolver};
pub use crate::driver::DriverHandle;
pub use crate::error::ClientError;
pub use crate::producer::{Producer, SendFut};
pub use crate::tls_insecure::insecure_tls_config;
pub use crate::tls_no_hostname::tls_config_no_hostname;
pub use crate::transport::default_tls_config;
#[cfg(feature = "scalable-topics")]
pub use crate::url_parse::is_scalable_topic_url;
pub use crate::url_parse::{ParsedUrl, Scheme};

/// Shared connection state — the lock-protected sans-io state machine + a single-cell driver
/// wake-up.
///
/// Cheap to share via `Arc`. The mutex is `parking_lot::Mutex` (not async), held only for the
/// duration of a sans-io call (no `.await` inside the critical section).
///
/// # Lock-ordering invariant (ADR-0038)
///
/// `ConnectionShared.inner` guards connection-wide state (frame buffers,
/// handshake, pending requests, the events / outcomes / wakers slabs, the
/// handle registry). Per-handle hot state lives behind its own
/// `parking_lot::Mutex` on [`magnetar_proto::ProducerSlot`] /
/// [`magnetar_proto::ConsumerSlot`]. Acquisition order is strictly **global
/// (`inner`) → per-slot (`slot.state`), never the reverse** — a holder of
/// `slot.state.lock()` MUST release the slot lock before taking `inner.lock()`.
/// The producer-send hot path skips the global lock entirely via
/// [`magnetar_proto::ProducerSlot::queue_send`]; the driver merges
/// per-slot staged frames into the connection-wide buffer through
/// `Connection::poll_transmit` (which calls `drain_producer_outbound`
/// internally). See [ADR-0038](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0038-split-connection-mutex.md).
pub struct ConnectionShared {
    /// The sans-io state machine, guarded by a non-async mutex. See the
    /// type-level docs above for the lock-ordering invariant against the
    /// per-slot mutexes.
    pub inner: Mutex<magnetar_proto::Connection>,
    /// Single-cell wakeup for the driver loop. Not a channel.
    pub driver_waker: Notify,
    /// Dedicated wakeup for futures that drain handle-correlated events.
    ///
    /// This is separate from [`Self::driver_waker`] so event waiters cannot
    /// consume outbound-work permits intended for the driver. The `Arc`
    /// permits those futures to retain an owned, pre-armed notification across
    /// polls, closing the registration gap around `notify_waiters()`.
    pub(crate) event_waker: Arc<Notify>,
    /// Pulsed when an opening producer/consumer is cancelled.
    ///
    /// Detached retry legs enroll before checking handle liveness, then stop
    /// their sleep or intermediate lookup when the caller's deadline/drop
    /// removes the handle.
    pub(crate) operation_cancel_notify: Notify,
    /// Optional auth provider that the driver consults when the broker emits
    /// [`CommandAuthChallenge`](magnetar_proto::pb::CommandAuthChallenge).
    /// `None` means no in-band token refresh — the connection will drop if the
    /// broker challenges. PIP-30 / PIP-292.
    pub auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
    /// PIP-145 topic-list-watcher deltas. The driver pushes
    /// [`magnetar_proto::ConnectionEvent::TopicListChanged`] events here as the broker
    /// emits them; surface them via [`Client::next_topic_list_change`].
    pub topic_list_changes: Mutex<std::collections::VecDeque<TopicListChange>>,
    /// Wakeup for `next_topic_list_change` futures. Notified after every push to
    /// `topic_list_changes`.
    pub topic_list_notify: Notify,
    /// PIP-33 replicated-subscription marker observations. The driver drains
    /// [`magnetar_proto::ConnectionEvent::ReplicatedSubscriptionMarkerObserved`]
    /// events here so they do not accumulate in the proto event queue.
    /// Surface via [`Client::next_replicated_subscription_marker`] /
    /// [`Client::poll_replicated_subscription_marker`]. See ADR-0034.
    pub replicated_subscription_markers:
        Mutex<std::collections::VecDeque<ObservedReplicatedSubscriptionMarker>>,
    /// Wakeup for `next_replicated_subscription_marker` futures.
    pub replicated_subscription_marker_notify: Notify,
    /// Set by the auto-reconnect supervisor between [`magnetar_proto::Connection::reset`] and
    /// the new socket's handshake. When `true`, the driver loop runs
    /// [`magnetar_proto::Connection::rebuild_producers`] +
    /// [`magnetar_proto::Connection::rebuild_consumers`] the first time it observes the new
    /// session transitioning to [`magnetar_proto::HandshakeState::Connected`], then clears
    /// the flag so the rebuild fires exactly once per reconnect. Stage 3 of the supervisor
    /// work: transparent producer / consumer replay on session loss.
    pub pending_rebuild: AtomicBool,
    /// Set to `true` the moment this connection reaches a GENUINELY-terminal
    /// state with NO driver left to recover it: the plain (non-supervised)
    /// driver's terminal exit, or the supervisor give-up after exhausting its
    /// reconnect-attempt budget (both call sites pair this with
    /// [`magnetar_proto::Connection::fail_all_pending`]). ADR-0059.
    ///
    /// This is the load-bearing "no driver will recover this" signal the
    /// synchronous fast-fail guards read at the request-issue / subscribe /
    /// lookup entry points. It is DISTINCT from
    /// [`magnetar_proto::Connection::is_closed`]: a SUPERVISED connection is
    /// transiently `Failed` between `mark_disconnected()` and the supervisor's
    /// `reset()` while it WILL recover, so `is_closed()` alone cannot tell a
    /// recoverable-`Failed` apart from a terminal-`Failed`. An entry-point
    /// guard fast-fails only when `is_closed()` AND `no_driver` are BOTH true,
    /// so a recoverable supervised connection in its transient `Failed` window
    /// is never `PeerClosed` (transparent reconnect is preserved).
    ///
    /// Mirrored 1:1 on the moonpool engine's `ConnectionShared` (ADR-0024).
    /// `AtomicBool` (not a channel) is the right primitive for this one-way
    /// latch ([ADR-0003](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0003-no-channels-rule.md)).
    pub no_driver: AtomicBool,
    /// Configured global publish memory budget in bytes. `0` disables the limit
    /// (matches `ConnectionConfig::memory_limit_bytes` default). Mirrors Java's
    /// `ClientBuilder#memoryLimit`. Reservations against this budget happen in
    /// [`crate::Producer::send`] BEFORE the payload reaches the sans-io state
    /// machine; sends that would push `memory_used` past the limit are rejected
    /// synchronously with [`ClientError::MemoryLimitExceeded`].
    pub memory_limit_bytes: u64,
    /// Current in-flight publish bytes reserved by [`crate::Producer::send`] calls
    /// that have not yet seen their [`magnetar_proto::OpOutcome::SendReceipt`] /
    /// `SendError`. Bumped in `send` (CAS against `memory_limit_bytes`); decremented
    /// in [`crate::SendFut::poll`] when the future returns `Poll::Ready`.
    pub memory_used: AtomicU64,
    /// Configured back-pressure policy when the publish budget is exhausted.
    /// Mirrors Java `org.apache.pulsar.client.api.MemoryLimitPolicy`. When
    /// `FailImmediately`, reservations that would overflow are rejected
    /// synchronously with [`ClientError::MemoryLimitExceeded`]. When
    /// `ProducerBlock`, the runtime parks the offending send future on
    /// [`Self::memory_wakers`] until enough budget frees up.
    ///
    /// Snapshotted from
    /// [`magnetar_proto::ConnectionConfig::memory_limit_policy`] at
    /// construction time. See [ADR-0020](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0020-memory-limit-producer-block.md).
    pub memory_limit_policy: magnetar_proto::MemoryLimitPolicy,
    /// Waker slab consulted by [`Self::release_memory`] when a reservation
    /// frees up. Populated by [`Self::try_reserve_memory_or_register`] from
    /// inside [`crate::Producer::send`] under
    /// [`magnetar_proto::MemoryLimitPolicy::ProducerBlock`]. Drained on every
    /// release: every parked send wakes and re-attempts the reservation
    /// (fairness is approximate — first-to-poll wins, matching Java's
    /// `MemoryLimitController` semantics).
    ///
    /// Not a channel — this is a `Slab<Waker>` behind a `parking_lot::Mutex`,
    /// the canonical no-channel wake pattern (see
    /// [ADR-0003](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0003-no-channels-rule.md)).
    pub memory_wakers: Mutex<Slab<Waker>>,
    /// Set to `true` after the first successful TC-partition lookup. Pulsar brokers do not
    /// load the `__transaction_coordinator_assign-partition-N` topic until something forces
    /// the namespace bundle onto them; the first `CommandLookupTopic` for the TC partition
    /// is that trigger. Without this bootstrap, the first `CommandNewTxn` lands on a broker
    /// whose `TransactionMetadataStoreService.stores.get(tcId)` returns `null` and the broker
    /// replies `TransactionCoordinatorNotFound` (mapped to `TxnError::NotFound`). The Java
    /// client side-steps the issue by eagerly opening one
    /// `TransactionMetaStoreHandler` per TC partition during
    /// `PulsarClientImpl.initTransactionCoordinatorClient()` — the handler itself does the
    /// lookup. We mirror that lazily: the first `Client::new_txn` looks up the TC partition,
    /// flips this flag, and subsequent calls skip the bootstrap. Persists across reconnects
    /// (broker keeps the TC store loaded on disk).
    pub txn_bootstrapped: AtomicBool,
    /// PIP-460 (ADR-0093) scalable-topic events the driver drained off the
    /// proto queue (`ScalableTopicLookupResolved`, `SegmentDagUpdated`,
    /// `DagChangedDuringConsume`, `DagWatchClosed`). Surface via
    /// [`Client::next_scalable_event`]. Not a channel — a `VecDeque` behind
    /// the same `parking_lot::Mutex` + `Notify` wake pattern as the PIP-145
    /// topic-list deltas.
    #[cfg(feature = "scalable-topics")]
    pub scalable_events: Mutex<std::collections::VecDeque<crate::ScalableEvent>>,
    /// Wakeup for `next_scalable_event` futures. Notified after every push to
    /// `scalable_events`.
    #[cfg(feature = "scalable-topics")]
    pub scalable_notify: Notify,
}

/// PIP-145 topic-list-watcher delta surfaced from the driver to the user-facing
/// [`Client`]. Mirrors `ConnectionEvent::TopicListChanged` with owned vectors so callers
/// don't pay for borrows across the await boundary.
#[derive(Debug, Clone)]
pub struct TopicListChange {
    /// Topics that newly match the pattern.
    pub added: Vec<String>,
    /// Topics that no longer match the pattern.
    pub removed: Vec<String>,
}

/// PIP-33: a replicated-subscription marker observation surfaced by the driver.
/// Owned snapshot of `ConnectionEvent::ReplicatedSubscriptionMarkerObserved` so callers
/// can hold it across `.await` boundaries.
#[derive(Debug, Clone)]
pub struct ObservedReplicatedSubscriptionMarker {
    /// Consumer the marker arrived on.
    pub handle: magnetar_proto::ConsumerHandle,
    /// Decoded marker payload.
    pub marker: magnetar_proto::ReplicatedSubscriptionMarker,
}

impl std::fmt::Debug for ConnectionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionShared")
            .field("inner", &"<Connection>")
            .field("has_auth_provider", &self.auth_provider.is_some())
            .finish_non_exhaustive()
    }
}

/// Outcome of [`ConnectionShared::await_reconnect_or_terminal`], the
/// wake-or-terminal park the engine-side lookup-retry loop consults after an
/// in-flight lookup was severed by a supervised reconnect (ADR-0060 /
/// follow-ups ADR-0060). Mirrored 1:1 on the moonpool engine (ADR-0024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupReissueReadiness {
    /// The connection is back in `Connected` on a fresh session — re-issue the
    /// lookup.
    Reconnected,
    /// The connection is terminal (`is_closed()`) AND `no_driver` is latched —
    /// no driver will recover it. Short-circuit to `PeerClosed` (composes with
    /// the terminal fast-fail).
    Terminal,
}

impl ConnectionShared {
    /// Construct shared state from the given protocol-layer config.
    pub fn new(config: magnetar_proto::ConnectionConfig) -> Arc<Self> {
        Self::with_auth(config, None)
    }

    /// Latch the [`Self::no_driver`] signal: this connection has reached a
    /// genuinely-terminal state and no driver task will recover it. Set by the
    /// plain driver's terminal-exit path and the supervisor give-up path,
    /// alongside [`magnetar_proto::Connection::fail_all_pending`]. ADR-0059.
    pub fn mark_no_driver(&self) {
        self.no_driver.store(true, Ordering::SeqCst);
    }

    /// `true` once [`Self::mark_no_driver`] has latched — the connection has
    /// reached a genuinely-terminal state and no driver task will recover it
    /// (plain-driver terminal exit, or supervisor give-up after exhausting its
    /// attempt budget). Read by the receive future (issue #299) to surface
    /// `Err` after a supervised give-up: at that point the connection is still
    /// `HandshakeState::Failed` with a supervisor configured, so
    /// [`magnetar_proto::Connection::consumer_handle_is_terminal`] alone cannot
    /// tell it apart from a recoverable mid-reconnect `Failed` window — the
    /// engine-side `no_driver` latch is the discriminator.
    #[must_use]
    pub fn is_no_driver(&self) -> bool {
        self.no_driver.load(Ordering::SeqCst)
    }

    /// Fast-fail guard for the request-issue / subscribe / lookup entry points
    /// (ADR-0059). Returns `Err(ClientError::PeerClosed)`
    /// when the connection is terminal AND no driver will recover it — i.e.
    /// `is_closed()` AND [`Self::no_driver`] are BOTH set. Returns `Ok(())`
    /// otherwise, INCLUDING the transient `Failed` window of a SUPERVISED
    /// connection mid-reconnect (where `no_driver` is still `false`), so
    /// transparent reconnect is never regressed.
    ///
    /// Gating on `no_driver` alone (without `is_closed()`) would be unsound on
    /// a freshly-constructed connection whose driver has not yet started;
    /// gating on `is_closed()` alone would `PeerClosed` a recoverable
    /// supervised connection. Both conditions together pin exactly the
    /// "doomed new op" case.
    pub fn fail_if_no_driver(&self) -> Result<(), ClientError> {
        if self.no_driver.load(Ordering::SeqCst) && self.inner.lock().is_closed() {
            return Err(ClientError::PeerClosed);
        }
        Ok(())
    }

    /// Park until this connection is live again on a fresh session, or has gone
    /// genuinely terminal — whichever happens first. Used by the engine-side
    /// lookup-retry-on-`SessionLost` loop (ADR-0060): when an
    /// in-flight `CommandLookupTopic` is severed by a supervised reconnect
    /// ([`magnetar_proto::Connection::reset`] publishes
    /// [`magnetar_proto::OpOutcome::SessionLost`] on its request-id), the
    /// caller waits here before re-issuing the lookup against the new session.
    ///
    /// Returns:
    /// * [`LookupReissueReadiness::Reconnected`] once the state machine is back in
    ///   [`magnetar_proto::HandshakeState::Connected`] — the caller may re-issue the lookup.
    /// * [`LookupReissueReadiness::Terminal`] once the connection `is_closed()` AND
    ///   [`Self::no_driver`] is latched — no driver will recover it, so the caller short-circuits
    ///   to [`ClientError::PeerClosed`]. This composes with the terminal fast-fail: a terminal
    ///   `SessionLost` surfaces a clean `PeerClosed` rather than re-hanging or spinning to the
    ///   re-issue bound.
    ///
    /// Park-on-readiness, NOT a timer: we wait on
    /// [`Self::driver_waker`], which both engines pulse via
    /// `notify_waiters()` on every state transition (post-`CommandConnected`
    /// included). A bare wake that leaves the connection still not-connected and
    /// not-terminal loops back to park again — it never proceeds to re-issue. The
    /// `Notified` future is created and `enable()`d *before* the state re-check so
    /// a transition racing between the check and the await is not lost (no
    /// timer / no host-clock read — ADR-0011).
    pub async fn await_reconnect_or_terminal(&self) -> LookupReissueReadiness {
        loop {
            // Arm the wakeup BEFORE inspecting state so a transition that lands
            // between the check and the await is captured by this `Notified`.
            let notified = self.driver_waker.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            {
                let conn = self.inner.lock();
                if conn.is_connected() {
                    return LookupReissueReadiness::Reconnected;
                }
                // Terminal AND no driver will recover it — compose with the terminal fast-fail.
                if conn.is_closed() && self.no_driver.load(Ordering::SeqCst) {
                    return LookupReissueReadiness::Terminal;
                }
            }

            // Neither live nor terminal yet — park until the next driver pulse,
            // then re-check. A spurious wake just re-loops; it does NOT proceed.
            notified.await;
        }
    }

    /// Try to reserve `bytes` against the configured memory budget. Returns
    /// `Ok(())` when the reservation succeeds (or no limit is configured —
    /// `memory_limit_bytes = 0`); returns `Err(ClientError::MemoryLimitExceeded
    /// { current, limit, requested })` when the reservation would push
    /// `memory_used` past `memory_limit_bytes`.
    ///
    /// Lock-free: a CAS loop on `memory_used`. Mirrors Java's
    /// `MemoryLimitController` (in `MemoryLimitPolicy.FailImmediately`
    /// mode).
    ///
    /// See [ADR-0003](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0003-no-channels-rule.md)
    /// — `AtomicU64` is not a channel; it's the right primitive for this counter.
    pub fn try_reserve_memory(&self, bytes: u64) -> Result<(), ClientError> {
        if self.memory_limit_bytes == 0 {
            return Ok(());
        }
        loop {
            let current = self.memory_used.load(Ordering::Acquire);
            let next = current.saturating_add(bytes);
            if next > self.memory_limit_bytes {
                return Err(ClientError::MemoryLimitExceeded {
                    current,
                    limit: self.memory_limit_bytes,
                    requested: bytes,
                });
            }
            // Acquire-Release CAS so that releases on other threads are visible.
            if self
                .memory_used
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Ok(());
            }
            // Lost the race; retry with the fresh value.
        }
    }

    /// Release a previous reservation. Called by [`crate::SendFut`] when the
    /// send completes (success or error). Saturating sub so a buggy
    /// over-release can't underflow the counter.
    ///
    /// After releasing, drains every waker parked on
    /// [`Self::memory_wakers`] so blocked
    /// [`magnetar_proto::MemoryLimitPolicy::ProducerBlock`] sends re-attempt
    /// their reservation. Drain-all (rather than wake-one) matches Java's
    /// `MemoryLimitController` behaviour where any released byte may unblock
    /// several smaller pending sends; spurious wake-ups are cheap because
    /// the futures re-check the CAS budget on every poll.
    pub fn release_memory(&self, bytes: u64) {
        if bytes == 0 || self.memory_limit_bytes == 0 {
            // No budget configured: there cannot be parked wakers either.
            return;
        }
        // `fetch_sub` wraps on underflow; guard manually with a CAS loop.
        loop {
            let current = self.memory_used.load(Ordering::Acquire);
            let next = current.saturating_sub(bytes);
            if self
                .memory_used
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                break;
            }
        }
        self.drain_memory_wakers();
    }

    /// Try to reserve `bytes` against the configured memory budget; on
    /// failure, register `waker` on [`Self::memory_wakers`] so the caller can
    /// be re-polled when budget frees up via [`Self::release_memory`].
    ///
    /// Returns:
    /// - `Ok(())` when the reservation succeeded (or no limit is configured).
    /// - `Err(slab_key)` when the reservation failed; the caller MUST cancel the registration via
    ///   [`Self::cancel_memory_waker`] if it is dropped before observing the next release.
    ///
    /// This is the building block of
    /// [`magnetar_proto::MemoryLimitPolicy::ProducerBlock`]. The
    /// `SendFut` future in `crate::producer` polls this method until it
    /// succeeds; on `Drop` it calls
    /// [`Self::cancel_memory_waker`] to evict the stale waker slot.
    ///
    /// Re-checking after registration closes the lost-wakeup window: a
    /// release that lands between the failed CAS and the slab insert will
    /// have drained the (empty) slab without observing this waker, so we
    /// re-attempt the reservation once the waker is installed.
    pub fn try_reserve_memory_or_register(&self, bytes: u64, waker: &Waker) -> Result<(), usize> {
        // Fast path: no budget configured, or budget has room right now.
        if self.try_reserve_memory(bytes).is_ok() {
            return Ok(());
        }
        // Slow path: park a waker and re-check. The recheck closes the race
        // where a release fires between the failed CAS above and the slab
        // insert below.
        let key = self.memory_wakers.lock().insert(waker.clone());
        if self.try_reserve_memory(bytes).is_ok() {
            // Won the recheck; drop our registration so the next release
            // doesn't wake a future that already completed.
            self.cancel_memory_waker(key);
            return Ok(());
        }
        Err(key)
    }

    /// Remove a previously-registered waker. Called from the
    /// `SendFut` `Drop` impl in `crate::producer`
    /// and on the "won the recheck" path of
    /// [`Self::try_reserve_memory_or_register`]. Idempotent — a missing slot
    /// is a no-op (a concurrent [`Self::release_memory`] may have drained it
    /// already).
    pub fn cancel_memory_waker(&self, slab_key: usize) {
        let mut slab = self.memory_wakers.lock();
        if slab.contains(slab_key) {
            slab.remove(slab_key);
        }
    }

    /// Drain every parked waker and wake it. Called from
    /// [`Self::release_memory`] after the CAS-decrement lands.
    ///
    /// Held the slab lock only for the duration of the swap; `wake()` runs
    /// outside the critical section so user code that re-polls cannot
    /// deadlock on the slab mutex.
    fn drain_memory_wakers(&self) {
        // `slab.drain()` empties the slab in-place and yields the
        // stored wakers. Drop the slab guard before waking — user code
        // that re-polls on `wake()` could try to re-register a waker,
        // which would deadlock against the slab mutex.
        //
        // Pre-allocate the intermediate `Vec` to the slab's current
        // length so the drain is one allocation instead of relying on
        // `Vec`'s growth doubling.
        let wakers: Vec<Waker> = {
            let mut slab = self.memory_wakers.lock();
            let mut out = Vec::with_capacity(slab.len());
            out.extend(slab.drain());
            out
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Construct with an auth provider for in-band challenge refresh.
    pub fn with_auth(
        config: magnetar_proto::ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
    ) -> Arc<Self> {
        let memory_limit_bytes = config.memory_limit_bytes;
        let memory_limit_policy = config.memory_limit_policy;
        // ADR-0028: opt-in anti-thrash detector. When the supervisor config
        // declares a threshold, mirror it onto the sans-io detector so the
        // engine driver can feed re-attach outcomes into it.
        let anti_thrash_threshold = config
            .supervisor
            .as_ref()
            .and_then(|s| s.anti_thrash_threshold);
        let anti_thrash_cooldown = config.supervisor.as_ref().map_or_else(
            || std::time::Duration::from_secs(30),
            |s| s.max_backoff_after_thrash,
        );
        let mut conn =
            magnetar_proto::Connection::new(config, Arc::new(std::time::SystemTime::now));
        conn.set_anti_thrash(anti_thrash_threshold, anti_thrash_cooldown);
        // Construction postcondition: a freshly-built connection has not begun
        // the handshake, so it can be neither `Connected` nor terminal. This
        // runs before any socket I/O, so it cannot fire on broker / wire input;
        // it would only trip if `Connection::new` ever stopped starting in
        // `HandshakeState::Uninitialized`. Mirrored 1:1 in the moonpool engine's
        // `ConnectionShared::with_auth_and_wall_clock_base` (ADR-0038 symmetry).
        debug_assert!(
            !conn.is_connected() && !conn.is_closed(),
            "freshly-constructed ConnectionShared must start in a non-connected, \
             non-terminal handshake state",
        );
        Arc::new(Self {
            inner: Mutex::new(conn),
            driver_waker: Notify::new(),
            event_waker: Arc::new(Notify::new()),
            operation_cancel_notify: Notify::new(),
            auth_provider,
            topic_list_changes: Mutex::new(std::collections::VecDeque::new()),
            topic_list_notify: Notify::new(),
            replicated_subscription_markers: Mutex::new(std::collections::VecDeque::new()),
            replicated_subscription_marker_notify: Notify::new(),
            pending_rebuild: AtomicBool::new(false),
            no_driver: AtomicBool::new(false),
            memory_limit_bytes,
            memory_used: AtomicU64::new(0),
            memory_limit_policy,
            memory_wakers: Mutex::new(Slab::new()),
            txn_bootstrapped: AtomicBool::new(false),
            #[cfg(feature = "scalable-topics")]
            scalable_events: Mutex::new(std::collections::VecDeque::new()),
            #[cfg(feature = "scalable-topics")]
            scalable_notify: Notify::new(),
        })
    }
}

/// PIP-460 (ADR-0093) resolved scalable-topic lookup. Returned by
/// [`Client::scalable_topic_lookup`]. **Experimental.**
#[cfg(feature = "scalable-topics")]
#[derive(Debug, Clone)]
pub struct ScalableLookup {
    /// Client-allocated session id. The session stays open and keeps receiving
    /// layout updates until it is closed; pass this to
    /// `close_scalable_topic_session`.
    pub session_id: u64,
    /// Canonical `topic://...` identity the broker resolved the request to.
    pub resolved_topic_name: Option<String>,
    /// Controller broker serving this topic's layout, when advertised.
    pub controller_broker_url: Option<String>,
    /// Initial DAG snapshot for the topic.
    pub segments: Vec<magnetar_proto::SegmentDescriptor>,
    /// Layout epoch the snapshot was stamped with.
    pub epoch: u64,
}

/// PIP-460 (ADR-0093) scalable-topic event surfaced from the driver to the
/// user-facing [`Client`]. Owned snapshot of the relevant
/// [`magnetar_proto::ConnectionEvent`] variants so callers can hold them
/// across `.await` boundaries. **Experimental.**
#[cfg(feature = "scalable-topics")]
#[derive(Debug, Clone)]
pub enum ScalableEvent {
    /// A scalable-topic session resolved: its first layout landed.
    LookupResolved {
        /// Client-allocated session id of the originating lookup.
        session_id: u64,
        /// Canonical `topic://...` identity the broker resolved the request to.
        resolved_topic_name: Option<String>,
        /// Controller broker serving this topic's layout, when advertised.
        controller_broker_url: Option<String>,
        /// Initial DAG snapshot for the topic.
        segments: Vec<magnetar_proto::SegmentDescriptor>,
        /// Layout epoch the snapshot was stamped with.
        epoch: u64,
    },
    /// An open session applied a subsequent layout.
    DagUpdated {
        /// Session id the update belongs to.
        session_id: u64,
        /// The applied delta.
        delta: magnetar_proto::DagDelta,
    },
    /// The segment DAG changed under a live consumer (drop-on-change).
    DagChangedDuringConsume {
        /// Session id whose DAG changed.
        session_id: u64,
        /// Why the DAG changed.
        reason: magnetar_proto::DagChangeReason,
    },
    /// The scalable-topic session closed.
    DagWatchClosed {
        /// Session id that closed.
        session_id: u64,
        /// Optional close reason.
        reason: Option<String>,
    },
    /// A scalable consumer's registration resolved with its initial share.
    ConsumerAssigned {
        /// Consumer id that registered.
        consumer_id: u64,
        /// The `segment://` topics this consumer owns.
        assignment: magnetar_proto::ConsumerAssignment,
    },
    /// The controller leader rebalanced a registered consumer's share.
    AssignmentChanged {
        /// Consumer id whose share changed.
        consumer_id: u64,
        /// What to attach to and detach from.
        delta: magnetar_proto::AssignmentDelta,
    },
    /// A scalable consumer's registration was rejected.
    ConsumerRejected {
        /// Consumer id whose registration failed.
        consumer_id: u64,
        /// Why the broker rejected it.
        reason: String,
    },
    /// A namespace-level scalable-topics watch delivered a snapshot or a diff.
    TopicsChanged {
        /// Watch id the update belongs to.
        watch_id: u64,
        /// The snapshot or diff the broker sent.
        change: magnetar_proto::TopicsChange,
    },
    /// A namespace-level scalable-topics watch ended.
    TopicsWatchClosed {
        /// Watch id that closed.
        watch_id: u64,
        /// Optional close reason.
        reason: Option<String>,
    },
    /// The metadata-driven transaction-coordinator assignment set changed.
    TcAssignmentsChanged {
        /// Watch id the update belongs to.
        watch_id: u64,
        /// Number of transaction-coordinator partitions.
        parallelism: u32,
        /// Which broker serves each coordinator.
        assignments: Vec<magnetar_proto::TcAssignment>,
    },
    /// A transaction-coordinator discovery watch ended.
    TcAssignmentsWatchClosed {
        /// Watch id that closed.
        watch_id: u64,
        /// Optional close reason.
        reason: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use magnetar_proto::ConnectionConfig;

    use super::{ConnectionShared, TopicListChange};

    #[test]
    fn shared_state_can_be_constructed() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        let _g = s.inner.lock();
        // Topic-list buffer starts empty.
        assert!(s.topic_list_changes.lock().is_empty());
    }

    /// ADR-0059 regression: `fail_if_no_driver()` must NOT
    /// fast-fail a connection that is `is_closed()` (here: `Failed`) while a
    /// supervisor is still able to recover it — i.e. while `no_driver` is unset.
    /// This pins the exact window a SUPERVISED connection lives in between
    /// `mark_disconnected()` (→ `Failed`, so `is_closed()` is true) and the
    /// supervisor's `reset()` (→ `Uninitialized`): an op issued there must reach
    /// the live driver and recover, NOT be wrongly `PeerClosed`d (which would
    /// regress transparent reconnect, ADR-0038). Gating on `is_closed()` alone —
    /// the naive guard — would fail this test. 1:1 twin of the moonpool engine.
    #[test]
    fn fail_if_no_driver_does_not_fire_on_recoverable_failed_window() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        // Drive the connection to `Failed` (a transient drop), exactly as a
        // supervised driver would on `PeerClosed` before its next `reset()`.
        s.inner.lock().mark_disconnected();
        assert!(
            s.inner.lock().is_closed(),
            "mark_disconnected must put the connection in a terminal handshake state",
        );
        assert!(
            !s.no_driver.load(super::Ordering::SeqCst),
            "no_driver must still be UNSET in the recoverable-Failed window",
        );
        // The guard must return Ok — the supervised driver is still alive and
        // will recover this connection. A `PeerClosed` here is the regression.
        assert!(
            s.fail_if_no_driver().is_ok(),
            "fail_if_no_driver must NOT fire while the connection is recoverable \
             (is_closed but no_driver unset) — regressing this breaks transparent reconnect",
        );
    }

    /// ADR-0059: `fail_if_no_driver()` DOES fast-fail with
    /// `PeerClosed` once BOTH conditions hold — `is_closed()` AND the `no_driver`
    /// latch (set by the plain driver's terminal exit / supervisor give-up). 1:1
    /// twin of the moonpool engine.
    #[test]
    fn fail_if_no_driver_fires_when_closed_and_no_driver_latched() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        s.inner.lock().mark_disconnected();
        // The terminal-exit / give-up paths latch this alongside
        // `fail_all_pending`.
        s.mark_no_driver();
        assert!(s.inner.lock().is_closed());
        assert!(s.no_driver.load(super::Ordering::SeqCst));
        assert!(
            matches!(s.fail_if_no_driver(), Err(super::ClientError::PeerClosed)),
            "fail_if_no_driver must return PeerClosed once the connection is terminal \
             AND no driver is left to recover it",
        );
    }

    /// ADR-0059: the `no_driver` latch is unsound as a sole gate — on a
    /// freshly-constructed connection whose driver has not started,
    /// `fail_if_no_driver` must return Ok because the connection is not yet
    /// `is_closed()`. Pins the second half of the two-condition gate. 1:1 twin
    /// of the moonpool engine.
    #[test]
    fn fail_if_no_driver_does_not_fire_before_any_terminal_state() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        assert!(
            !s.inner.lock().is_closed(),
            "a fresh connection is not terminal",
        );
        assert!(
            s.fail_if_no_driver().is_ok(),
            "fail_if_no_driver must not fire on a non-terminal connection",
        );
    }

    #[test]
    fn topic_list_changes_buffer_round_trip() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        s.topic_list_changes.lock().push_back(TopicListChange {
            added: vec!["a".to_owned()],
            removed: vec![],
        });
        s.topic_list_changes.lock().push_back(TopicListChange {
            added: vec![],
            removed: vec!["b".to_owned()],
        });
        let first = s.topic_list_changes.lock().pop_front().unwrap();
        assert_eq!(first.added, vec!["a".to_owned()]);
        let second = s.topic_list_changes.lock().pop_front().unwrap();
        assert_eq!(second.removed, vec!["b".to_owned()]);
        assert!(s.topic_list_changes.lock().is_empty());
    }

    #[test]
    fn memory_limit_zero_disables_enforcement() {
        let s = ConnectionShared::new(ConnectionConfig::default());
        assert_eq!(s.memory_limit_bytes, 0);
        assert!(s.try_reserve_memory(u64::MAX).is_ok());
        // No-op release.
        s.release_memory(u64::MAX);
    }

    #[test]
    fn memory_limit_reserve_and_release_round_trip() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 1024,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);

        assert!(s.try_reserve_memory(400).is_ok());
        assert!(s.try_reserve_memory(400).is_ok());
        assert_eq!(s.memory_used.load(super::Ordering::Acquire), 800);

        // Overflow: 800 + 300 > 1024.
        match s.try_reserve_memory(300) {
            Err(super::ClientError::MemoryLimitExceeded {
                current,
                limit,
                requested,
            }) => {
                assert_eq!(current, 800);
                assert_eq!(limit, 1024);
                assert_eq!(requested, 300);
            }
            other => panic!("expected MemoryLimitExceeded, got {other:?}"),
        }

        // Releasing makes room.
        s.release_memory(400);
        assert!(s.try_reserve_memory(300).is_ok());
    }

    #[test]
    fn memory_limit_release_is_saturating() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 1024,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);
        // Over-release must not underflow.
        s.release_memory(1_000_000);
        assert_eq!(s.memory_used.load(super::Ordering::Acquire), 0);
    }

    // Cheap counter-Waker so we don't pull in `futures-task` for the test.
    // Mirrors the pattern used elsewhere in the workspace; counts how many
    // times `wake()` was invoked.
    struct CountingWaker {
        count: std::sync::atomic::AtomicUsize,
    }

    impl CountingWaker {
        fn new() -> std::sync::Arc<Self> {
            std::sync::Arc::new(Self {
                count: std::sync::atomic::AtomicUsize::new(0),
            })
        }

        fn count(&self) -> usize {
            self.count.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl std::task::Wake for CountingWaker {
        fn wake(self: std::sync::Arc<Self>) {
            self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn try_reserve_memory_or_register_succeeds_when_budget_available() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 1024,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);
        let cw = CountingWaker::new();
        let waker = std::task::Waker::from(cw.clone());

        // Empty budget: must take the fast path and NOT register a waker.
        s.try_reserve_memory_or_register(512, &waker)
            .expect("should succeed with budget available");
        assert_eq!(s.memory_used.load(super::Ordering::Acquire), 512);
        assert_eq!(s.memory_wakers.lock().len(), 0);
        assert_eq!(cw.count(), 0);
    }

    #[test]
    fn try_reserve_memory_or_register_parks_when_budget_full() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 1024,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);
        // Saturate the budget.
        s.try_reserve_memory(1024).expect("initial reserve");

        let cw = CountingWaker::new();
        let waker = std::task::Waker::from(cw.clone());

        let key = s
            .try_reserve_memory_or_register(1, &waker)
            .expect_err("must park when full");
        assert_eq!(s.memory_wakers.lock().len(), 1);
        assert_eq!(cw.count(), 0);

        // Releasing wakes parked futures.
        s.release_memory(1024);
        assert_eq!(s.memory_used.load(super::Ordering::Acquire), 0);
        assert_eq!(cw.count(), 1);
        // The slab was drained — caller's cancel must be a no-op.
        s.cancel_memory_waker(key);
        assert_eq!(s.memory_wakers.lock().len(), 0);
    }

    #[test]
    fn cancel_memory_waker_clears_slot() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 100,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);
        s.try_reserve_memory(100).expect("initial reserve");

        let cw = CountingWaker::new();
        let waker = std::task::Waker::from(cw.clone());

        let key = s
            .try_reserve_memory_or_register(1, &waker)
            .expect_err("must park when full");
        assert_eq!(s.memory_wakers.lock().len(), 1);

        // Cancel: simulates the future being dropped before release.
        s.cancel_memory_waker(key);
        assert_eq!(s.memory_wakers.lock().len(), 0);

        // Release after cancel must not panic and must not wake the dropped waker.
        s.release_memory(100);
        assert_eq!(cw.count(), 0);
    }

    #[test]
    fn release_wakes_all_parked_wakers() {
        let cfg = ConnectionConfig {
            memory_limit_bytes: 100,
            ..ConnectionConfig::default()
        };
        let s = ConnectionShared::new(cfg);
        s.try_reserve_memory(100).expect("initial reserve");

        let cw1 = CountingWaker::new();
        let cw2 = CountingWaker::new();
        let w1 = std::task::Waker::from(cw1.clone());
        let w2 = std::task::Waker::from(cw2.clone());

        let _k1 = s.try_reserve_memory_or_register(1, &w1).expect_err("park");
        let _k2 = s.try_reserve_memory_or_register(1, &w2).expect_err("park");
        assert_eq!(s.memory_wakers.lock().len(), 2);

        s.release_memory(100);
        assert_eq!(cw1.count(), 1);
        assert_eq!(cw2.count(), 1);
        assert_eq!(s.memory_wakers.lock().len(), 0);
    }

    /// Lost-wakeup race-window coverage: the recheck path inside
    /// `ConnectionShared::try_reserve_memory_or_register` returns
    /// `Ok(())` when a concurrent `release_memory` frees budget between
    /// the failed fast-path CAS and the post-slab CAS. Drives the race
    /// via two threads and a tight loop. Mirrors the moonpool engine's
    /// `try_reserve_memory_or_register_wins_recheck_under_contention`
    /// 1:1 so ADR-0024's runtime test parity gate stays balanced.
    #[test]
    fn try_reserve_memory_or_register_wins_recheck_under_contention() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicUsize;
        use std::task::Wake;
        use std::time::{Duration, Instant};

        struct NoopWaker(AtomicUsize);
        impl Wake for NoopWaker {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, super::Ordering::SeqCst);
            }
        }

        let cfg = ConnectionConfig {
            memory_limit_bytes: 16,
            ..ConnectionConfig::default()
        };
        let shared = ConnectionShared::new(cfg);
        let waker_ctr = Arc::new(NoopWaker(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(waker_ctr.clone());

        // Adaptive loop: iterate until the wall-clock deadline elapses, with
        // a minimum-iteration floor so the recheck-path coverage stays hit
        // even on a fast host. The original fixed 10_000-iteration loop
        // panicked under heavy parallel test load (e.g. full workspace
        // `cargo test --all-features`, or `--lib --bins` where 133 lib tests
        // run concurrently): the loop performs 10_000 thread spawn/join
        // round-trips, so the in-loop `assert!(Instant::now() <= deadline)`
        // measured how fast the host creates threads, not anything about
        // `try_reserve_memory_or_register`. The helper's correctness contract
        // holds regardless of iteration count, so the deadline now ENDS the
        // loop instead of failing it. Mirrors the moonpool twin, which
        // already carried this shape — the fix had only ever been applied to
        // one of the two engines.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut iters = 0usize;
        while Instant::now() <= deadline && iters < 10_000 {
            iters += 1;
            shared.try_reserve_memory(16).expect("seed budget at limit");

            let releaser = {
                let s = shared.clone();
                std::thread::spawn(move || {
                    std::thread::yield_now();
                    s.release_memory(16);
                })
            };
            let outcome = shared.try_reserve_memory_or_register(2, &waker);
            releaser.join().expect("releaser thread");

            match outcome {
                Ok(()) => {
                    assert!(shared.memory_wakers.lock().is_empty());
                    shared.release_memory(2);
                }
                Err(key) => {
                    shared.cancel_memory_waker(key);
                }
            }
        }
        // Coverage floor: enough iterations for the recheck-path hit count to
        // be meaningful. Two orders of magnitude below what a loaded host
        // manages in 5s (the failing runs were still clearing thousands), so
        // this catches a degenerate zero/one-iteration loop without
        // reintroducing a machine-speed assertion.
        assert!(
            iters >= 100,
            "expected ≥100 race iterations within 5s, got {iters}",
        );
        // Best-effort coverage probe — always passes correctness-wise. On
        // contention-rich hardware the recheck-won path fires within tens of
        // iterations; the outcome distribution is deliberately not asserted,
        // since the helper's contract holds on either branch.
    }
}
