// SPDX-License-Identifier: Apache-2.0

//! Top-level `Client` façade.
//!
//! Builds a [`ConnectionShared`](crate::ConnectionShared), wires it to a
//! [`crate::transport::Transport`], starts the driver task, performs the Pulsar handshake, and
//! exposes [`open_producer`](Client::open_producer) / [`subscribe`](Client::subscribe).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use magnetar_proto::{
    ConnectionConfig, ConnectionEvent, CreateProducerRequest, HandshakeState, OpOutcome,
    PendingOpKey, RequestId, SubscribeRequest,
};
use parking_lot::Mutex;

use crate::ConnectionShared;
use crate::consumer::Consumer;
use crate::dns::DnsResolver;
use crate::driver::{
    DriverHandle, ReconnectContext, spawn as spawn_driver,
    spawn_supervised as spawn_supervised_driver,
};
use crate::error::ClientError;
use crate::pool::{ConnectionFactory, ProxyConnectionPool};
use crate::producer::Producer;
use crate::transport::{Transport, default_tls_config};
use crate::url_parse::{ParsedUrl, Scheme};

type OperationDeadline<'a> = Pin<&'a mut (dyn Future<Output = ()> + Send)>;

#[derive(Default)]
struct LookupRetryState {
    broker_failures: u32,
}

#[derive(Clone, Copy)]
enum LookupIssue {
    Initial { authoritative: bool },
    Redirect { authoritative: bool, hops: u8 },
}

fn operation_deadline_error(
    operation: &str,
    last_broker_error: Option<(i32, String)>,
) -> ClientError {
    match last_broker_error {
        Some((code, message)) => ClientError::Broker { code, message },
        None => ClientError::Timeout(format!("{operation} exceeded operation_timeout")),
    }
}

fn operation_deadline_expired(mut deadline: OperationDeadline<'_>) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    deadline.as_mut().poll(&mut cx).is_ready()
}

/// The top-level magnetar client.
///
/// Holds the bootstrap connection (the one dialled at `connect` time, used for lookup and
/// non-proxied producer / consumer ops) plus an opt-in per-broker connection pool (see
/// the crate-private `pool` module) for the Apache Pulsar Proxy case (ADR-0039): when a
/// `CommandLookupTopic` answer carries
/// `proxy_through_service_url = true`, the runtime lazily opens a second connection back to
/// the same physical address with `CommandConnect.proxy_to_broker_url` set to the logical
/// broker URL and routes the producer / consumer onto that connection.
///
/// The `pool` is `None` on the [`Client::from_socket`] path (test-only, no URL available).
/// Hitting a `proxy_through_service_url = true` lookup on that path surfaces a
/// [`ClientError::ProxyUnsupportedOnSocketClient`] — the user is expected to switch to a
/// URL-based connect to use the pool.
#[derive(Debug)]
pub struct Client {
    shared: Arc<ConnectionShared>,
    driver: Mutex<Option<DriverHandle>>,
    /// Lazy per-broker connection pool (ADR-0039). `None` on the
    /// non-URL [`Client::from_socket`] test path.
    pool: Option<Arc<ProxyConnectionPool>>,
    /// `connections_per_broker` fan-out (Java `ClientBuilder#connectionsPerBroker`,
    /// ADR-0073, issue #314). `1` (the default) preserves the historical
    /// single-connection-per-broker behaviour. Clamped to `≥ 1` by
    /// [`Self::with_connections_per_broker`]. When the [`Self::pool`] is `None`
    /// (the `from_socket` path) the client cannot dial siblings, so the
    /// effective fan-out stays `1` regardless of this value.
    connections_per_broker: usize,
    /// Round-robin cursor handing out the next connection index for a producer /
    /// consumer at [`Self::resolve_target`]. A plain `AtomicUsize` (not an RNG):
    /// the spread is deterministic, which the moonpool engine mirrors so the
    /// differential suite stays in lock-step (ADR-0011).
    connection_rr: AtomicUsize,
}

/// Decision returned by [`Client::lookup_topic`] driving where the data ops for the resolved
/// topic should ride.
///
/// Mirrors the upstream Java client's
/// [`LookupTopicResult`](https://github.com/apache/pulsar/blob/master/pulsar-client/src/main/java/org/apache/pulsar/client/impl/LookupTopicResult.java)
/// (`logicalAddress`, `physicalAddress`, `isUseProxy`).
#[derive(Debug, Clone)]
enum LookupTarget {
    /// Direct connection — the broker is reachable directly (no proxy).
    ///
    /// * `broker_url = None` — the lookup did not advertise a broker URL (single-broker cluster or
    ///   pre-2.4 broker behaviour). The bootstrap connection serves as the data plane.
    /// * `broker_url = Some(url)` — the lookup resolved to a specific broker. If `url` matches the
    ///   bootstrap's `host:port`, the bootstrap connection is reused; otherwise
    ///   `Client::resolve_target` opens (or reuses) a pool entry that dials the resolved broker
    ///   **directly** (`CommandConnect.proxy_to_broker_url = None`). Multi-broker DIRECT routing —
    ///   ADR-0039 §"Multi-broker DIRECT routing (2026-06-01)".
    Direct { broker_url: Option<String> },
    /// Proxy connection — the broker is reachable only through the proxy. Routes through
    /// the [`ProxyConnectionPool`] keyed by `broker_url`; dial target is the bootstrap's
    /// physical address (the proxy) and `CommandConnect.proxy_to_broker_url = Some(url)`.
    Proxy { broker_url: String },
}

/// Dial the transport with a bounded retry.
///
/// The *initial* dial is the one network step the reconnect supervisor cannot
/// recover (there is no connection yet to rebuild), so a dial that blocks — a
/// broker that accepts the SYN but never finishes establishing, or a transient
/// refusal — would otherwise propagate straight to the caller. Each attempt is
/// bounded by the `connect_timeout` chokepoint inside
/// [`Transport::connect_with_resolver`] (the dial closure carries it); here we
/// only retry the transient outcomes it surfaces. Only transient `Io` failures
/// (the chokepoint timeout lands as `Io(TimedOut)`) are retried; a permanent
/// error (bad TLS name/cert, protocol) is surfaced immediately. Production
/// analogue of the moonpool engine's `dial_with_retry` — both consume the same
/// [`ConnectionConfig::connect_max_retries`] / [`ConnectionConfig::operation_timeout`]
/// so the engines retry alike.
///
/// # Dual cap (Java parity)
///
/// Two independent caps bound the retry loop; whichever trips **first** ends
/// it:
///
/// 1. **Count** — `max_retries` re-dials (`connect_max_retries`).
/// 2. **Total budget** — `operation_timeout` (Java `operationTimeoutMs`) measured from the *first*
///    attempt. Tokio runs on real wall time with no virtual-clock hazard, so the elapsed check is a
///    plain [`std::time::Instant`] comparison; this mirrors the moonpool engine's
///    `now()`-comparison dual cap.
///
/// ([ADR-0052](https://github.com/CleverCloud/magnetar/blob/main/specs/adr/0052-initial-connect-timeout-retry.md))
async fn dial_with_retry<S, F, Fut>(
    max_retries: u32,
    operation_timeout: std::time::Duration,
    mut dial: F,
) -> Result<S, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<S, ClientError>>,
{
    let started = std::time::Instant::now();
    let mut attempt: u32 = 0;
    loop {
        let err = match dial().await {
            Ok(socket) => return Ok(socket),
            Err(err) => err,
        };
        // Dual cap: stop on a non-transient error, on the count backstop, or
        // once the total operation budget is spent — whichever trips first.
        if !matches!(err, ClientError::Io(_))
            || attempt >= max_retries
            || started.elapsed() >= operation_timeout
        {
            return Err(err);
        }
        attempt += 1;
        tokio::time::sleep(connect_backoff(attempt)).await;
    }
}

/// Exponential backoff for [`dial_with_retry`]: 50 ms doubling, capped at 1 s.
/// Matches the moonpool engine's schedule so the two engines retry in lockstep.
fn connect_backoff(attempt: u32) -> std::time::Duration {
    let shift = attempt.saturating_sub(1).min(5);
    std::time::Duration::from_millis((50u64 << shift).min(1_000))
}

impl Client {
    /// Connect to the given `url` using the supplied protocol-layer config.
    ///
    /// Performs the TCP connect, the optional TLS handshake (for `pulsar+ssl://`), the Pulsar
    /// `CommandConnect` round-trip, and returns once the broker has confirmed via
    /// `CommandConnected`.
    ///
    /// # Errors
    ///
    /// Surfaces socket I/O, TLS, and protocol errors via [`ClientError`].
    pub async fn connect(url: &str, config: ConnectionConfig) -> Result<Self, ClientError> {
        Self::connect_auth(url, config, None).await
    }

    /// Connect with an in-band auth provider used to answer broker
    /// `CommandAuthChallenge` (PIP-30 / PIP-292) for in-band token refresh.
    pub async fn connect_auth(
        url: &str,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
    ) -> Result<Self, ClientError> {
        let parsed = ParsedUrl::parse(url)?;
        let tls_config = match parsed.scheme {
            crate::url_parse::Scheme::Tls => Some(default_tls_config()?),
            crate::url_parse::Scheme::Plain => None,
        };
        Self::connect_with(parsed, tls_config, config, auth_provider).await
    }

    /// Build a [`rustls::ClientConfig`] whose trust anchors are the PEM-encoded certificate
    /// chain in `pem_bytes` (the system trust store is NOT loaded). Mirrors Java
    /// `ClientBuilder#tlsTrustCertsFilePath` — useful when the broker uses a self-signed cert.
    ///
    /// The rustls crypto provider is picked by the workspace's `crypto-*`
    /// feature (issue #9, ADR-0035) via the explicit
    /// [`crate::tls_crypto::active_provider`] shim.
    ///
    /// # Errors
    ///
    /// Returns [`ClientError::Other`] if no valid certificate is parsed from the PEM.
    pub fn tls_config_from_pem(pem_bytes: &[u8]) -> Result<Arc<rustls::ClientConfig>, ClientError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;

        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem_bytes) {
            let cert = cert.map_err(|e| {
                ClientError::Other(format!("failed to parse a trust certificate from PEM: {e}"))
            })?;
            roots.add(cert).map_err(|e| {
                ClientError::Other(format!("rustls rejected a trust certificate: {e}"))
            })?;
        }
        if roots.is_empty() {
            return Err(ClientError::Other(
                "no trust certificates were parsed from the provided PEM".to_owned(),
            ));
        }
        let config =
            rustls::ClientConfig::builder_with_provider(crate::tls_crypto::active_provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| {
                    ClientError::Other(format!(
                        "rustls rejected the workspace's default protocol versions: {e}"
                    ))
                })?
                .with_root_certificates(roots)
                .with_no_client_auth();
        Ok(Arc::new(config))
    }

    /// Connect using a pre-parsed URL and an explicit TLS configuration. Intended for advanced
    /// callers that need to customise trust anchors / client certificates / ALPN.
    ///
    /// When `config.supervisor` is `Some`, the resulting driver task is wrapped with the
    /// auto-reconnect supervisor: subsequent transport drops trigger a backoff-driven
    /// reconnect against `url` (and `tls_config` if `pulsar+ssl://`).
    ///
    /// # Errors
    ///
    /// Same as [`Self::connect`].
    pub async fn connect_with(
        url: ParsedUrl,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
    ) -> Result<Self, ClientError> {
        Self::connect_with_provider(url, tls_config, config, auth_provider, None).await
    }

    /// Same as [`Self::connect_with`] but also threads a PIP-121
    /// [`magnetar_proto::ServiceUrlProvider`] through to the auto-reconnect supervisor. When
    /// `service_url_provider` is `Some`, the supervisor re-resolves the broker URL via
    /// `provider.get_service_url()` on every reconnect attempt — so cluster-failover policies
    /// can swap broker addresses without the client being rebuilt.
    ///
    /// `service_url_provider = None` matches [`Self::connect_with`] exactly: the cached `url`
    /// is reused for every reconnect.
    pub async fn connect_with_provider(
        url: ParsedUrl,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
        service_url_provider: Option<Arc<dyn magnetar_proto::ServiceUrlProvider>>,
    ) -> Result<Self, ClientError> {
        Self::connect_with_resolver_and_provider(
            url,
            tls_config,
            config,
            auth_provider,
            service_url_provider,
            None,
        )
        .await
    }

    /// Same as [`Self::connect_with_provider`] but also threads a pluggable DNS resolver
    /// (Java `ClientBuilder#dnsResolver`) through to the internal
    /// `Transport::connect_with_resolver` entry. When `dns_resolver` is `Some`,
    /// every initial and reconnect dial routes the `(host, port)` lookup through
    /// `resolver.resolve(...)`; when `None`, the runtime falls back to tokio's
    /// built-in [`tokio::net::lookup_host`] — identical to
    /// [`Self::connect_with_provider`].
    pub async fn connect_with_resolver_and_provider(
        url: ParsedUrl,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
        service_url_provider: Option<Arc<dyn magnetar_proto::ServiceUrlProvider>>,
        dns_resolver: Option<Arc<dyn DnsResolver>>,
    ) -> Result<Self, ClientError> {
        let connect_timeout = config.connect_timeout;
        let socket = dial_with_retry(config.connect_max_retries, config.operation_timeout, || {
            Transport::connect_with_resolver(
                &url,
                tls_config.clone(),
                dns_resolver.as_deref(),
                connect_timeout,
            )
        })
        .await?;
        Self::start_supervised_handshake(
            socket,
            url,
            tls_config,
            config,
            auth_provider,
            service_url_provider,
            dns_resolver,
        )
        .await
    }

    /// Drive the handshake against an already-connected socket. Useful for tests and for
    /// custom transports (e.g. `tokio::io::duplex` in tests). The auto-reconnect supervisor
    /// is **not** wired in on this path: a raw socket cannot be reopened after a drop.
    pub async fn from_socket<S>(socket: S, config: ConnectionConfig) -> Result<Self, ClientError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        Self::start_handshake(socket, config, None).await
    }

    async fn start_handshake<S>(
        socket: S,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
    ) -> Result<Self, ClientError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        // Snapshot the post-dial handshake budget before `config` is moved
        // into `ConnectionShared` (ADR-0052, extended to the handshake).
        let operation_timeout = config.operation_timeout;
        let shared = ConnectionShared::with_auth(config, auth_provider);

        // Queue the CONNECT frame BEFORE spawning the driver — otherwise the driver might block
        // on a read before we have anything to flush.
        shared.inner.lock().begin_handshake()?;
        // Wake the driver immediately so it flushes the CONNECT.
        shared.driver_waker.notify_one();

        let driver = spawn_driver(shared.clone(), socket);

        // Park until the state machine emits `ConnectionEvent::Connected`,
        // bounded by `operation_timeout`. A peer that accepts the socket but
        // never replies to CONNECT (ADR-0052 — the dual cap scopes only to
        // the dial) would otherwise park `wait_connected` forever; the
        // timeout surfaces a bounded `Io(TimedOut)` instead (Java
        // `operationTimeoutMs` parity). Mirrors the pool path's existing
        // `tokio::time::timeout(operation_timeout, wait_connected)`.
        match bounded_wait_connected(shared.clone(), operation_timeout).await {
            Ok(()) => {
                // Lifecycle record (ADR-0054). The generic-socket path has no
                // URL, so the dial target is reported as the transport kind.
                // `auth_method` is the provider's method name — NEVER
                // `auth_data` (ADR-0054 no-secrets rule).
                let auth_method = shared
                    .auth_provider
                    .as_deref()
                    .map_or("none", |p| p.method());
                tracing::info!(
                    auth_method,
                    transport = "generic-socket",
                    "connection established"
                );
                Ok(Self {
                    shared,
                    driver: Mutex::new(Some(driver)),
                    // `from_socket` has no URL to dial back through, so the proxy pool is
                    // disabled. A lookup that returns `proxy_through_service_url = true`
                    // surfaces `ClientError::ProxyUnsupportedOnSocketClient`. With no pool the
                    // `connections_per_broker` fan-out cannot dial siblings either, so it
                    // stays effectively `1`.
                    pool: None,
                    connections_per_broker: 1,
                    connection_rr: AtomicUsize::new(0),
                })
            }
            Err(e) => {
                driver.abort();
                Err(e)
            }
        }
    }

    async fn start_supervised_handshake(
        socket: Transport,
        url: ParsedUrl,
        tls_config: Option<Arc<rustls::ClientConfig>>,
        config: ConnectionConfig,
        auth_provider: Option<Arc<dyn magnetar_proto::AuthProvider>>,
        service_url_provider: Option<Arc<dyn magnetar_proto::ServiceUrlProvider>>,
        dns_resolver: Option<Arc<dyn DnsResolver>>,
    ) -> Result<Self, ClientError> {
        // Clone the connect-time inputs into a `ConnectionFactory` so the proxy pool can
        // lazily open per-broker pinned connections later (ADR-0039). The bootstrap conn
        // itself does NOT set `proxy_to_broker_url` (it's the lookup-and-control plane).
        let factory = ConnectionFactory {
            url: url.clone(),
            tls_config: tls_config.clone(),
            bootstrap_config: config.clone(),
            operation_retry: Arc::new(Mutex::new(magnetar_proto::OperationRetryConfig::default())),
            auth_provider: auth_provider.clone(),
            service_url_provider: service_url_provider.clone(),
            dns_resolver: dns_resolver.clone(),
        };

        // Snapshot the post-dial handshake budget before `config` is moved
        // into `ConnectionShared` (ADR-0052, extended to the handshake).
        let operation_timeout = config.operation_timeout;
        let shared = ConnectionShared::with_auth(config, auth_provider);

        shared.inner.lock().begin_handshake()?;
        shared.driver_waker.notify_one();

        // Snapshot the dial identity for the lifecycle record below — `url`
        // and `tls_config` move into the reconnect context.
        let host = url.host.clone();
        let port = url.port;
        let tls = tls_config.is_some();

        let ctx = ReconnectContext {
            url,
            tls_config,
            service_url_provider,
            dns_resolver,
        };
        let driver = spawn_supervised_driver(shared.clone(), socket, ctx);

        // Bounded by `operation_timeout` — see `start_handshake` for the
        // rationale (ADR-0052, extended to the post-dial handshake).
        match bounded_wait_connected(shared.clone(), operation_timeout).await {
            Ok(()) => {
                // Lifecycle record (ADR-0054). `auth_method` is the
                // provider's method name — NEVER `auth_data` (no-secrets
                // rule).
                let auth_method = shared
                    .auth_provider
                    .as_deref()
                    .map_or("none", |p| p.method());
                tracing::info!(host = %host, port, tls, auth_method, "connection established");
                Ok(Self {
                    shared,
                    driver: Mutex::new(Some(driver)),
                    pool: Some(ProxyConnectionPool::new(factory)),
                    connections_per_broker: 1,
                    connection_rr: AtomicUsize::new(0),
                })
            }
            Err(e) => {
                driver.abort();
                Err(e)
            }
        }
    }

    /// Borrow the shared state machine. Mostly useful for tests and instrumentation.
    pub fn shared(&self) -> &Arc<ConnectionShared> {
        &self.shared
    }

    /// Apply a broker-operation retry policy to the bootstrap and every future
    /// pooled connection.
    #[must_use]
    pub fn with_operation_retry(self, config: magnetar_proto::OperationRetryConfig) -> Self {
        self.shared
            .inner
            .lock()
            .set_operation_retry_config(config.clone());
        if let Some(pool) = &self.pool {
            pool.set_operation_retry_config(config);
        }
        self
    }

    /// Create one timer for a caller-visible setup operation.
    #[doc(hidden)]
    pub fn operation_timer(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let timeout = self.shared.inner.lock().operation_timeout();
        Box::pin(tokio::time::sleep(timeout))
    }

    /// Open a producer.
    ///
    /// Returns once the broker has sent `CommandProducerSuccess`.
    ///
    /// # Errors
    ///
    /// Retryable broker refusals are reissued under `OperationRetryConfig`;
    /// exhaustion returns [`ClientError::Broker`]. A deadline with no recorded
    /// broker error returns [`ClientError::Timeout`].
    pub async fn open_producer(&self, req: CreateProducerRequest) -> Result<Producer, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.open_producer_with_operation_deadline(
            req,
            None,
            deadline.as_mut(),
            &mut last_broker_error,
        )
        .await
    }

    /// Same as [`Self::open_producer`] but with an optional encryption hook.
    pub async fn open_producer_with(
        &self,
        req: CreateProducerRequest,
        encryptor: Option<Arc<dyn crate::crypto::MessageEncryptor>>,
    ) -> Result<Producer, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.open_producer_with_operation_deadline(
            req,
            encryptor,
            deadline.as_mut(),
            &mut last_broker_error,
        )
        .await
    }

    /// Deadline-aware producer-open seam used by the engine-generic façade.
    #[doc(hidden)]
    pub async fn open_producer_with_operation_deadline(
        &self,
        req: CreateProducerRequest,
        encryptor: Option<Arc<dyn crate::crypto::MessageEncryptor>>,
        mut deadline: Pin<&mut (dyn Future<Output = ()> + Send)>,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<Producer, ClientError> {
        let compression = req.compression;
        let retry_config = self.shared.inner.lock().operation_retry_config().clone();
        let mut attachment_failures = 0_u32;
        // Pulsar requires a `CommandLookupTopic` round-trip before opening a producer or
        // consumer: lookup is what triggers the broker to acquire ownership of the topic's
        // namespace bundle. Skipping it works only when the bundle has already been activated
        // by some prior operation; a fresh broker rejects `CommandProducer` with
        // `ServerError::ServiceNotReady` ("not served by this instance, please redo the
        // lookup"). Java's `PulsarClientImpl#createProducerAsync` does the same lookup.
        //
        // ADR-0039: the lookup result decides whether the producer rides on the bootstrap
        // connection (direct, no proxy) or on a per-broker pool entry (proxy-routed). The
        // `Producer` keeps an `Arc<ConnectionShared>` pointing at whichever connection it
        // was opened against, so subsequent sends / closes go to the right socket.
        loop {
            let (target, landed_on) = self
                .lookup_topic_with_operation_deadline(
                    &req.topic,
                    deadline.as_mut(),
                    last_broker_error,
                )
                .await?;
            let topic = req.topic.clone();
            let target_shared = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    return Err(operation_deadline_error(
                        "producer target resolution",
                        last_broker_error.clone(),
                    ));
                }
                result = self.resolve_target(target, &landed_on, &topic) => result?,
            };
            // ADR-0059: the resolved data-plane connection may be a pool entry distinct from the
            // bootstrap; fast-fail before registering a doomed `CommandProducer`.
            target_shared.fail_if_no_driver()?;
            if operation_deadline_expired(deadline.as_mut()) {
                return Err(operation_deadline_error(
                    "producer open",
                    last_broker_error.clone(),
                ));
            }
            let (handle, slot) = {
                let mut conn = target_shared.inner.lock();
                let handle = conn.create_producer(req.clone());
                let slot = conn
                    .producer(handle)
                    .cloned()
                    .expect("just-created producer slot must exist");
                (handle, slot)
            };
            target_shared.driver_waker.notify_one();
            let mut guard = PendingProducerOpenGuard::new(target_shared.clone(), handle);
            let wait_shared = target_shared.clone();
            let ready = wait_producer_ready(&wait_shared, handle);
            tokio::pin!(ready);
            let ready_result = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    let last = target_shared
                        .inner
                        .lock()
                        .producer_last_open_error(handle)
                        .or_else(|| last_broker_error.clone());
                    Err(operation_deadline_error("producer open", last))
                }
                result = ready.as_mut() => result,
            };
            match ready_result {
                Ok(()) => {
                    guard.disarm();
                    let producer_name = slot.state.lock().name.clone().unwrap_or_default();
                    tracing::info!(
                        topic = %slot.identity.topic,
                        producer_name = %producer_name,
                        handle = ?handle,
                        access_mode = ?slot.identity.access_mode,
                        "producer created"
                    );
                    return Ok(Producer::assemble(
                        target_shared,
                        handle,
                        slot,
                        compression,
                        encryptor,
                    ));
                }
                Err(ClientError::Broker { code, message })
                    if magnetar_proto::is_retryable_broker_error(
                        magnetar_proto::OperationKind::ProducerOpen,
                        code,
                    ) =>
                {
                    *last_broker_error = Some((code, message.clone()));
                    attachment_failures = attachment_failures.saturating_add(1);
                    if !retry_config.should_retry_after_failure(attachment_failures) {
                        return Err(ClientError::Broker { code, message });
                    }
                    drop(guard);
                    let sleep =
                        tokio::time::sleep(retry_config.delay_after_failure(attachment_failures));
                    tokio::pin!(sleep);
                    tokio::select! {
                        biased;
                        () = deadline.as_mut() => {
                            return Err(operation_deadline_error(
                                "producer open retry",
                                last_broker_error.clone(),
                            ));
                        }
                        () = sleep.as_mut() => {}
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Issue a `CommandLookupTopic` for `topic` and decide where the topic's data ops should
    /// ride. Returns one of the [`LookupTarget`] variants:
    ///
    /// - [`LookupTarget::Direct { broker_url: None }`] — no broker URL was advertised on the
    ///   lookup; the bootstrap connection serves as the data plane (single-broker behaviour).
    /// - [`LookupTarget::Direct { broker_url: Some(url) }`] — the lookup resolved to a specific
    ///   broker (`proxy_through_service_url = false`). [`Self::resolve_target`] either reuses the
    ///   bootstrap (when `url` matches the bootstrap `host:port`) or opens a pinned pool entry that
    ///   dials the resolved broker directly. ADR-0039 §"Multi-broker DIRECT routing (2026-06-01)".
    /// - [`LookupTarget::Proxy { broker_url }`] — the lookup answered `proxy_through_service_url =
    ///   true`. The runtime opens (or reuses) a pool entry for `broker_url` with
    ///   `CommandConnect.proxy_to_broker_url = broker_url`; the data ops ride on that pool entry.
    ///   See ADR-0039.
    ///
    /// **Redirect dialing (ADR-0039)**: when the broker answers `Redirect`,
    /// the proto layer surfaces a driveable `LookupOutcome::Redirected`
    /// carrying the redirect target URL + the remaining hop budget (it does
    /// NOT chase the redirect on the bootstrap socket — that re-asked the same
    /// non-owner broker and looped to the cap on multi-broker clusters). This
    /// method's loop dials the redirect target (reusing
    /// [`Self::resolve_direct_broker`] / the per-broker pool) and re-issues the
    /// lookup THERE, threading the decremented budget back via
    /// [`magnetar_proto::Connection::lookup_redirect`], until a terminal
    /// `Connect` / `Failed` lands. The redirect cap from
    /// [`magnetar_proto::lookup::MAX_LOOKUP_REDIRECTS`] is enforced both in
    /// proto and here (a `Redirected` with no budget left surfaces the same
    /// synthetic cap `Failed` → [`ClientError::Broker`] and never dials).
    /// Drive the lookup (including any redirect dial loop) and return the
    /// terminal [`LookupTarget`] **plus** the connection the final lookup
    /// landed on. The latter matters for the redirect case: after the engine
    /// dials a redirect target and re-issues the lookup there, a terminal
    /// `Connect` that advertises no broker URL means "ride the connection you
    /// resolved on" (the dialed target), not the bootstrap — so the caller
    /// routes the data ops there. Mirrors Java `BinaryProtoLookupService`
    /// returning the `LookupTopicResult` against the connection it recursed on.
    async fn lookup_topic(
        &self,
        topic: &str,
    ) -> Result<(LookupTarget, Arc<ConnectionShared>), ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.lookup_topic_with_operation_deadline(topic, deadline.as_mut(), &mut last_broker_error)
            .await
    }

    async fn lookup_topic_with_operation_deadline(
        &self,
        topic: &str,
        mut deadline: OperationDeadline<'_>,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<(LookupTarget, Arc<ConnectionShared>), ClientError> {
        // ADR-0039 redirect dialing: the first lookup rides the bootstrap
        // connection. If the bootstrap broker is not the bundle owner it
        // answers `Redirect`; the proto layer no longer chases that on the
        // bootstrap socket (which re-asked the same non-owner and looped to
        // the cap). It surfaces a driveable `LookupOutcome::Redirected`, and
        // we dial the redirect target broker (reusing the per-broker pool) and
        // re-issue the lookup THERE — Java `BinaryProtoLookupService#findBroker`
        // recursing on `getConnection(redirectAddress)`. The hop budget the
        // outcome carries is threaded back into `Connection::lookup_redirect`
        // and decremented per dialed broker; the proto floor + this engine
        // guard keep the chain bounded by `MAX_LOOKUP_REDIRECTS`.
        let mut current = self.shared.clone();
        let mut retry_state = LookupRetryState::default();
        // First hop is the user lookup; subsequent hops are redirect re-issues
        // and carry the budget the previous hop's `Redirected` advertised.
        let mut next_hop: Option<(bool, u8)> = None;
        loop {
            let outcome = match next_hop {
                None => {
                    self.issue_lookup_on(
                        &current,
                        topic,
                        LookupIssue::Initial {
                            authoritative: false,
                        },
                        deadline.as_mut(),
                        &mut retry_state,
                        last_broker_error,
                    )
                    .await?
                }
                Some((authoritative, hops)) => {
                    self.issue_lookup_on(
                        &current,
                        topic,
                        LookupIssue::Redirect {
                            authoritative,
                            hops,
                        },
                        deadline.as_mut(),
                        &mut retry_state,
                        last_broker_error,
                    )
                    .await?
                }
            };

            // Inspect the terminal outcome for a redirect before mapping.
            if let OpOutcome::LookupResponse {
                outcome:
                    magnetar_proto::LookupOutcome::Redirected {
                        broker_service_url,
                        broker_service_url_tls,
                        authoritative,
                        hops_remaining,
                    },
                ..
            } = outcome
            {
                // Engine-side cap enforcement — defence in depth alongside the
                // proto floor. A `Redirected` with no budget left must surface
                // the SAME synthetic Failed the proto layer emits, never dial.
                if hops_remaining == 0 {
                    return Err(ClientError::Broker {
                        code: 0,
                        message: format!(
                            "lookup redirect cap exceeded ({} hops)",
                            magnetar_proto::lookup::MAX_LOOKUP_REDIRECTS
                        ),
                    });
                }
                let redirect_url = direct_broker_url(
                    broker_service_url,
                    broker_service_url_tls,
                    self.bootstrap_scheme(),
                )
                .ok_or_else(|| {
                    ClientError::Other(format!(
                        "lookup of '{topic}' was redirected but the broker advertised no \
                         broker_service_url or broker_service_url_tls to dial"
                    ))
                })?;
                tracing::debug!(
                    topic,
                    redirect_url = %redirect_url,
                    hops_remaining,
                    "lookup redirected; dialing redirect target and re-issuing"
                );
                // Dial the redirect target (bootstrap-equality reuses the
                // bootstrap; otherwise a pinned pool entry). The dial awaits
                // OUTSIDE any proto/connection lock (ADR-0038) and uses no
                // channel (ADR-0003). This is a control-plane lookup dial, not a
                // data-plane producer/consumer placement, so it always pins the
                // primary connection (index 0) — lookups never consume a
                // `connections_per_broker` fan-out slot (ADR-0073).
                current = tokio::select! {
                    biased;
                    () = deadline.as_mut() => {
                        return Err(operation_deadline_error(
                            "lookup redirect dial",
                            last_broker_error.clone(),
                        ));
                    }
                    result = self.resolve_direct_broker(&redirect_url, topic, 0) => result?,
                };
                next_hop = Some((authoritative, hops_remaining));
                continue;
            }

            let target = Self::map_lookup_outcome(topic, outcome, self.bootstrap_scheme())?;
            return Ok((target, current));
        }
    }

    /// Issue one `CommandLookupTopic` against `shared` and await its terminal
    /// [`OpOutcome`], with the bounded `SessionLost` re-issue loop
    /// (ADR-0060). `redirect_budget` is `None` for the
    /// user's first lookup (proto seeds the full cap) and `Some(hops)` for a
    /// redirect re-issue on a dialed target (proto clamps + re-checks the cap
    /// in `Connection::lookup_redirect`).
    async fn issue_lookup_on(
        &self,
        shared: &Arc<ConnectionShared>,
        topic: &str,
        issue: LookupIssue,
        mut deadline: OperationDeadline<'_>,
        retry_state: &mut LookupRetryState,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<OpOutcome, ClientError> {
        // ADR-0059: fast-fail BEFORE registering the lookup
        // when the connection is already terminal with no driver to recover it
        // — otherwise the caller hangs on a request no driver will resolve.
        shared.fail_if_no_driver()?;

        // ADR-0060: bounded lookup-retry on `SessionLost`.
        // `Connection::reset` (supervised reconnect) fails the in-flight lookup
        // with `OpOutcome::SessionLost` but does not re-issue it; on that, park
        // until the connection is live again (or terminal), then re-issue. The
        // budget is only spent on a real broker round-trip.
        let mut reissues_remaining = magnetar_proto::lookup::MAX_LOOKUP_SESSION_REISSUES;
        let retry_config = shared.inner.lock().operation_retry_config().clone();
        loop {
            let request_id = {
                if operation_deadline_expired(deadline.as_mut()) {
                    return Err(operation_deadline_error(
                        "topic lookup",
                        last_broker_error.clone(),
                    ));
                }
                let mut conn = shared.inner.lock();
                match issue {
                    LookupIssue::Initial { authoritative } => conn.lookup(topic, authoritative),
                    LookupIssue::Redirect {
                        authoritative,
                        hops,
                    } => conn.lookup_redirect(topic, authoritative, hops),
                }
            };
            shared.driver_waker.notify_one();
            let request = RequestFut::cancellable(shared.clone(), request_id);
            tokio::pin!(request);
            let outcome = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    return Err(operation_deadline_error(
                        "topic lookup",
                        last_broker_error.clone(),
                    ));
                }
                outcome = request.as_mut() => outcome,
            };

            if matches!(outcome, OpOutcome::SessionLost { .. }) {
                let readiness = tokio::select! {
                    biased;
                    () = deadline.as_mut() => {
                        return Err(operation_deadline_error(
                            "topic lookup",
                            last_broker_error.clone(),
                        ));
                    }
                    readiness = shared.await_reconnect_or_terminal() => readiness,
                };
                match readiness {
                    crate::LookupReissueReadiness::Reconnected => {
                        if reissues_remaining == 0 {
                            tracing::warn!(
                                topic,
                                max_reissues = magnetar_proto::lookup::MAX_LOOKUP_SESSION_REISSUES,
                                "lookup session-reissue cap exceeded; surfacing PeerClosed"
                            );
                            return Err(ClientError::PeerClosed);
                        }
                        reissues_remaining -= 1;
                        tracing::debug!(
                            topic,
                            reissues_remaining,
                            "lookup severed by reconnect; re-issuing against fresh session"
                        );
                        continue;
                    }
                    crate::LookupReissueReadiness::Terminal => {
                        return Err(ClientError::PeerClosed);
                    }
                }
            }

            if let OpOutcome::LookupResponse {
                outcome: magnetar_proto::LookupOutcome::Failed { code, .. },
                ..
            } = &outcome
                && magnetar_proto::is_retryable_broker_error(
                    magnetar_proto::OperationKind::Lookup,
                    *code,
                )
            {
                if let OpOutcome::LookupResponse {
                    outcome: magnetar_proto::LookupOutcome::Failed { code, message },
                    ..
                } = &outcome
                {
                    *last_broker_error = Some((*code, message.clone()));
                }
                retry_state.broker_failures = retry_state.broker_failures.saturating_add(1);
                if retry_config.should_retry_after_failure(retry_state.broker_failures) {
                    let sleep = tokio::time::sleep(
                        retry_config.delay_after_failure(retry_state.broker_failures),
                    );
                    tokio::pin!(sleep);
                    tokio::select! {
                        biased;
                        () = deadline.as_mut() => {
                            return Err(operation_deadline_error(
                                "topic lookup",
                                last_broker_error.clone(),
                            ));
                        }
                        () = sleep.as_mut() => {}
                    }
                    continue;
                }
            }

            return Ok(outcome);
        }
    }

    /// Translate a terminal lookup [`OpOutcome`] into a [`LookupTarget`] or a
    /// [`ClientError`]. Split out of [`Self::lookup_topic`] so the
    /// bounded-retry loop (ADR-0060) only re-runs the
    /// issue-await steps; the `SessionLost` arm is handled by the loop before
    /// this is reached, so it never appears here.
    fn map_lookup_outcome(
        topic: &str,
        outcome: OpOutcome,
        bootstrap_scheme: Scheme,
    ) -> Result<LookupTarget, ClientError> {
        match outcome {
            OpOutcome::LookupResponse { outcome, .. } => {
                match outcome {
                    magnetar_proto::LookupOutcome::Connect {
                        broker_service_url,
                        broker_service_url_tls,
                        proxy_through_service_url,
                    } => {
                        tracing::debug!(
                            topic,
                            broker_service_url = broker_service_url.as_deref(),
                            broker_service_url_tls = broker_service_url_tls.as_deref(),
                            proxy_through_service_url,
                            "lookup resolved"
                        );
                        if proxy_through_service_url {
                            // ADR-0039: pick the broker URL that matches our TLS posture. If we
                            // are on `pulsar+ssl://` and the broker advertises a TLS URL we
                            // prefer it; otherwise fall back to the plain URL. If the broker
                            // declined to advertise any URL we error out — the proxy cannot
                            // route us.
                            let broker_url = preferred_broker_url(
                            broker_service_url,
                            broker_service_url_tls,
                            bootstrap_scheme,
                        )
                        .ok_or_else(|| ClientError::Other(format!(
                            "lookup of '{topic}' set proxy_through_service_url=true but did \
                             not advertise a broker_service_url or broker_service_url_tls"
                        )))?;
                            Ok(LookupTarget::Proxy { broker_url })
                        } else {
                            // ADR-0039 §"Multi-broker DIRECT routing (2026-06-01)": capture
                            // the resolved broker URL so `resolve_target` can route the data
                            // ops to the right broker on multi-broker clusters. If the
                            // broker declined to advertise a URL we keep `None`, preserving
                            // the pre-amendment behaviour (route on the bootstrap connection)
                            // for single-broker setups.
                            let broker_url = direct_broker_url(
                                broker_service_url,
                                broker_service_url_tls,
                                bootstrap_scheme,
                            );
                            Ok(LookupTarget::Direct { broker_url })
                        }
                    }
                    // `Redirected` is a driveable outcome consumed by the
                    // redirect-dial loop in `lookup_topic` (it dials the target
                    // and re-issues the lookup there). It must never reach this
                    // mapper — if it does, the loop failed to intercept it.
                    // Keep the arm exhaustive and surface a clear error rather
                    // than mis-routing onto the bootstrap.
                    magnetar_proto::LookupOutcome::Redirected { .. } => Err(ClientError::Other(
                        "BUG: Redirected outcome reached map_lookup_outcome — the \
                         redirect-dial loop in lookup_topic should have consumed it \
                         (dialed the target and re-issued the lookup there)"
                            .to_owned(),
                    )),
                    magnetar_proto::LookupOutcome::Failed { code, message } => {
                        Err(ClientError::Broker { code, message })
                    }
                }
            }
            OpOutcome::Error { code, message, .. } => Err(ClientError::Broker { code, message }),
            OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected lookup outcome: {other:?}"
            ))),
        }
    }

    /// Set the `connections_per_broker` fan-out (Java
    /// `ClientBuilder#connectionsPerBroker`, ADR-0073, issue #314). Consumed by
    /// the `magnetar` façade's `ClientBuilder::connections_per_broker` after the
    /// bootstrap connection is established. `n` is clamped to `≥ 1`; `1` (the
    /// default) keeps the historical single-connection-per-broker behaviour.
    #[must_use]
    pub fn with_connections_per_broker(mut self, n: usize) -> Self {
        self.connections_per_broker = n.max(1);
        self
    }

    /// Round-robin the next connection index in `[0, connections_per_broker)` for
    /// a producer / consumer. Returns `0` when fan-out is disabled
    /// (`connections_per_broker <= 1`) or when there is no pool to dial siblings
    /// through ([`Client::from_socket`]), so those paths never touch the atomic
    /// and stay byte-identical to the pre-#314 client.
    fn pick_connection_index(&self) -> usize {
        if self.connections_per_broker <= 1 || self.pool.is_none() {
            return 0;
        }
        self.connection_rr.fetch_add(1, Ordering::Relaxed) % self.connections_per_broker
    }

    /// Resolve the bootstrap broker's connection for `index`. Index `0` is the
    /// bootstrap connection the lookup landed on; indices `≥ 1` are pool siblings
    /// dialled to the same broker (ADR-0073, #314). Fan-out only applies when the
    /// lookup actually landed on the bootstrap connection — a redirected
    /// `landed_on` (already a distinct pool entry) is returned unchanged.
    async fn bootstrap_connection_at_index(
        &self,
        landed_on: &Arc<ConnectionShared>,
        index: usize,
    ) -> Result<Arc<ConnectionShared>, ClientError> {
        // index ≥ 1 on the bootstrap connection → dedicated sibling. Index 0
        // (the default + every slot-0 producer/consumer) and a redirected
        // `landed_on` (a distinct pool entry, never the bootstrap) ride
        // `landed_on` as-is. `index ≥ 1` implies a pool exists
        // (`pick_connection_index` returns 0 when it does not).
        if index >= 1 && Arc::ptr_eq(landed_on, &self.shared) {
            let Some(pool) = self.pool.as_ref() else {
                unreachable!(
                    "connections_per_broker index >= 1 implies a pool (pick_connection_index)"
                )
            };
            return pool.get_or_open_bootstrap_sibling(index).await;
        }
        Ok(landed_on.clone())
    }

    /// Resolve the [`LookupTarget`] to the `Arc<ConnectionShared>` the caller should drive
    /// CommandProducer / CommandSubscribe on.
    ///
    /// `landed_on` is the connection the final lookup was issued against — the
    /// bootstrap for a non-redirected lookup, or the dialed redirect target
    /// after the redirect-dial loop. The `Direct { broker_url: None }` case
    /// routes to `landed_on` (ride the connection the lookup resolved on),
    /// which is the bootstrap for single-broker setups but the redirect target
    /// when a redirected owner answered `Connect` with no advertised URL.
    ///
    /// * [`LookupTarget::Direct { broker_url: None }`] — ride `landed_on`.
    /// * [`LookupTarget::Direct { broker_url: Some(url) }`] — multi-broker DIRECT routing. If
    ///   `url`'s `host:port` matches the bootstrap, reuse the bootstrap. Otherwise open (or reuse)
    ///   a pool entry keyed by `(url, url)` and dial the resolved broker directly
    ///   (`CommandConnect.proxy_to_broker_url = None`). ADR-0039 §"Multi-broker DIRECT routing
    ///   (2026-06-01)".
    /// * [`LookupTarget::Proxy { broker_url }`] — opens (or reuses) the pool entry keyed by
    ///   `(broker_url, bootstrap URL)` with `CommandConnect.proxy_to_broker_url =
    ///   Some(broker_url)`.
    async fn resolve_target(
        &self,
        target: LookupTarget,
        landed_on: &Arc<ConnectionShared>,
        topic: &str,
    ) -> Result<Arc<ConnectionShared>, ClientError> {
        // `connections_per_broker` fan-out slot for this producer / consumer
        // (ADR-0073, #314). `0` for the default single-connection client.
        let index = self.pick_connection_index();
        match target {
            LookupTarget::Direct { broker_url: None } => {
                self.bootstrap_connection_at_index(landed_on, index).await
            }
            LookupTarget::Direct {
                broker_url: Some(broker_url),
            } => self.resolve_direct_broker(&broker_url, topic, index).await,
            LookupTarget::Proxy { broker_url } => {
                let pool = self.pool.as_ref().ok_or_else(|| {
                    ClientError::ProxyUnsupportedOnSocketClient {
                        topic: topic.to_owned(),
                    }
                })?;
                // Every proxy pool entry dials the same physical address — the proxy URL the
                // bootstrap was built with. The proto-layer's `CommandConnect.proxy_to_broker_url`
                // is what tells the proxy which backend broker this connection serves. `index`
                // fans the same backend broker across N proxy connections.
                let physical = pool.bootstrap_url();
                pool.get_or_open(&broker_url, &physical, Some(broker_url.clone()), index)
                    .await
            }
        }
    }

    /// Resolve a multi-broker DIRECT routing target. If `broker_url` matches the bootstrap's
    /// `host:port`, the bootstrap connection is reused (no extra dial). Otherwise the pool
    /// opens (or reuses) a pinned connection that dials `broker_url` directly with
    /// `CommandConnect.proxy_to_broker_url = None`. ADR-0039 §"Multi-broker DIRECT routing
    /// (2026-06-01)".
    ///
    /// `broker_url` may be either a full Pulsar URL (e.g. `pulsar://broker-1:6650`) or a
    /// bare `host:port` (the `host:port` form is what
    /// [`crate::client::direct_broker_url`] / [`preferred_broker_url`] emit). Both forms
    /// must round-trip to the same parsed `(host, port)` for the bootstrap-equality check
    /// to bypass the pool dial.
    async fn resolve_direct_broker(
        &self,
        broker_url: &str,
        topic: &str,
        index: usize,
    ) -> Result<Arc<ConnectionShared>, ClientError> {
        let Some(pool) = self.pool.as_ref() else {
            // `from_socket` callers have no URL to dial — the bootstrap is the only
            // connection available. Single-broker scenarios still work; multi-broker
            // dial requests would have nowhere to land.
            tracing::warn!(
                topic,
                broker_url,
                "lookup resolved to a specific broker but client has no dial-able URL \
                 (from_socket); falling back to bootstrap connection"
            );
            return Ok(self.shared.clone());
        };
        let parsed = parse_direct_broker_url(broker_url, pool.bootstrap_scheme())?;

        // Bootstrap-equality fast path: same `host:port` as the connect-time URL → reuse the
        // bootstrap connection. Saves one TCP/TLS handshake on every single-broker /
        // bootstrap-broker lookup, and keeps existing single-broker tests on exactly one
        // socket (no spurious pool entry).
        let bootstrap = pool.bootstrap_url();
        if parsed.host == bootstrap.host && parsed.port == bootstrap.port {
            // Bootstrap broker — same fan-out as the `Direct { broker_url: None }`
            // path: index 0 reuses the bootstrap connection, siblings (index ≥ 1)
            // ride dedicated pool entries dialled to the same broker (ADR-0073, #314).
            return self
                .bootstrap_connection_at_index(&self.shared, index)
                .await;
        }

        // Different broker → pin a dedicated pool entry. `logical == physical` here because
        // we are dialling the broker directly (the proxy is not in the picture). The pool
        // is keyed on `(logical, "host:port", index)` so two DIRECT lookups to the same broker
        // URL and the same fan-out slot share one entry, just like two PROXY lookups for the
        // same backend share one.
        pool.get_or_open(broker_url, &parsed, None, index).await
    }

    /// Scheme of the bootstrap connection — used by [`Self::lookup_topic`] to pick between
    /// `broker_service_url` and `broker_service_url_tls`. We pull it back from the
    /// `ProxyConnectionPool`'s factory snapshot when available; the `from_socket` path falls
    /// back to `Plain` because there is no URL to consult. The result feeds
    /// [`preferred_broker_url`] for the proxy-pool routing decision.
    fn bootstrap_scheme(&self) -> Scheme {
        match &self.pool {
            Some(pool) => pool.bootstrap_scheme(),
            None => Scheme::Plain,
        }
    }

    /// Open a new Pulsar transaction at the broker-side transaction coordinator (PIP-31).
    /// Mirrors Java `PulsarClient#newTransaction()`. Returns the new [`magnetar_proto::TxnId`]
    /// once the TC acknowledges.
    pub async fn new_txn(
        &self,
        timeout: std::time::Duration,
    ) -> Result<magnetar_proto::TxnId, ClientError> {
        self.ensure_txn_bootstrapped().await?;
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.new_txn(timeout)
        };
        self.shared.driver_waker.notify_one();
        let outcome = RequestFut::new(self.shared.clone(), request_id).await;
        match outcome {
            magnetar_proto::OpOutcome::NewTxn { result, .. } => {
                result.map_err(|err| ClientError::Other(format!("new_txn: {err}")))
            }
            magnetar_proto::OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected new_txn outcome: {other:?}"
            ))),
        }
    }

    /// Force the broker to load the TC partition we will talk to. Pulsar brokers only assign
    /// a `TransactionMetadataStore` to a TC partition once a client explicitly handshakes via
    /// `CommandTcClientConnectRequest` (or an internal subscription opens the
    /// `__transaction_coordinator_assign-partition-N` topic). The Java client does that
    /// handshake inside `TransactionMetaStoreHandler.connectionOpened` →
    /// `Commands.newTcClientConnectRequest`. We mirror it on first use:
    ///
    /// 1. `CommandLookupTopic` on
    ///    `persistent://pulsar/system/transaction_coordinator_assign-partition-0` — forces the
    ///    broker to take ownership of the matching namespace bundle. Lookup alone is **not**
    ///    enough: ownership transfer is asynchronous, and races with `CommandNewTxn` reach the
    ///    broker before `handleMetadataStoreLoad(tcId)` finishes.
    /// 2. `CommandTcClientConnectRequest(tc_id=0)` — the broker only acknowledges this once the TC
    ///    metadata store for `tc_id` is fully loaded, which closes the race window.
    ///
    /// Subsequent `new_txn` calls observe `txn_bootstrapped` and skip the handshake. The flag
    /// stays set across reconnects: the broker persists the TC store on disk, so once loaded
    /// it survives the connection drop. magnetar currently pins the TC id to `0`
    /// (`TxnClient::new(0)`); multi-TC support would need to fan this handshake out per
    /// `tc_id`.
    async fn ensure_txn_bootstrapped(&self) -> Result<(), ClientError> {
        if self.shared.txn_bootstrapped.load(Ordering::Acquire) {
            return Ok(());
        }
        // Step 1: lookup forces bundle ownership onto this broker. The TC bundle lives on the
        // bootstrap connection regardless of what the lookup returns — `new_txn` and friends
        // below all drive `self.shared`. (If a proxy ever advertised the TC bundle on a
        // different broker we'd still hit the bundle-not-served path on `tc_client_connect`,
        // which is correct: the TC client's broker is configured separately from the data plane.)
        let _ = self
            .lookup_topic("persistent://pulsar/system/transaction_coordinator_assign-partition-0")
            .await?;
        // Step 2: explicit TC handshake — broker only responds once the TC metadata store is
        // loaded, eliminating the race between bundle-ownership-acquire and the first newTxn.
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.tc_client_connect(0)
        };
        self.shared.driver_waker.notify_one();
        let outcome = RequestFut::new(self.shared.clone(), request_id).await;
        match outcome {
            OpOutcome::Success { .. } => {}
            OpOutcome::Error { code, message, .. } => {
                return Err(ClientError::Broker { code, message });
            }
            OpOutcome::Terminal { .. } => {
                return Err(ClientError::PeerClosed);
            }
            other => {
                return Err(ClientError::Other(format!(
                    "unexpected tc_client_connect outcome: {other:?}"
                )));
            }
        }
        self.shared.txn_bootstrapped.store(true, Ordering::Release);
        Ok(())
    }

    /// Register `topic` as a partition this transaction will write to (PIP-31).
    /// Mirrors `Transaction#registerProducedTopic`.
    pub async fn add_partition_to_txn(
        &self,
        txn: magnetar_proto::TxnId,
        topic: impl Into<String>,
    ) -> Result<(), ClientError> {
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.add_partition_to_txn(txn, topic.into())
        };
        self.shared.driver_waker.notify_one();
        let outcome = RequestFut::new(self.shared.clone(), request_id).await;
        match outcome {
            magnetar_proto::OpOutcome::AddPartitionToTxn { result, .. } => {
                result.map_err(|err| ClientError::Other(format!("add_partition_to_txn: {err}")))
            }
            magnetar_proto::OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected add_partition_to_txn outcome: {other:?}"
            ))),
        }
    }

    /// Register a subscription this transaction will acknowledge on (PIP-31).
    /// Mirrors `Transaction#registerSubscriptionToTxn`.
    pub async fn add_subscription_to_txn(
        &self,
        txn: magnetar_proto::TxnId,
        topic: impl Into<String>,
        subscription: impl Into<String>,
    ) -> Result<(), ClientError> {
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.add_subscription_to_txn(txn, subscription.into(), topic.into())
        };
        self.shared.driver_waker.notify_one();
        let outcome = RequestFut::new(self.shared.clone(), request_id).await;
        match outcome {
            magnetar_proto::OpOutcome::AddSubscriptionToTxn { result, .. } => {
                result.map_err(|err| ClientError::Other(format!("add_subscription_to_txn: {err}")))
            }
            magnetar_proto::OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected add_subscription_to_txn outcome: {other:?}"
            ))),
        }
    }

    /// Commit or abort an open transaction (PIP-31). Returns the final transaction state
    /// reported by the TC. Mirrors `Transaction#commit` / `#abort`.
    pub async fn end_txn(
        &self,
        txn: magnetar_proto::TxnId,
        action: magnetar_proto::TxnAction,
    ) -> Result<magnetar_proto::TxnState, ClientError> {
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.end_txn(txn, action)
        };
        self.shared.driver_waker.notify_one();
        let outcome = RequestFut::new(self.shared.clone(), request_id).await;
        match outcome {
            magnetar_proto::OpOutcome::EndTxn { result, .. } => {
                result.map_err(|err| ClientError::Other(format!("end_txn: {err}")))
            }
            magnetar_proto::OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected end_txn outcome: {other:?}"
            ))),
        }
    }

    /// Subscribe to a topic-list watcher (PIP-145) and return the initial topic snapshot
    /// for the given namespace + regex. Subsequent updates are emitted as
    /// `ConnectionEvent::TopicListChanged` events; this snapshot helper does not stream
    /// them — pair with a follow-up event-poll API for that.
    pub async fn watch_topic_list(
        &self,
        namespace: &str,
        pattern: &str,
    ) -> Result<Vec<String>, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.watch_topic_list_with_operation_deadline(
            namespace,
            pattern,
            deadline.as_mut(),
            &mut last_broker_error,
        )
        .await
    }

    /// Deadline-aware topic-list snapshot seam used by the engine-generic
    /// pattern-consumer builder.
    #[doc(hidden)]
    pub async fn watch_topic_list_with_operation_deadline(
        &self,
        namespace: &str,
        pattern: &str,
        mut deadline: OperationDeadline<'_>,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<Vec<String>, ClientError> {
        if operation_deadline_expired(deadline.as_mut()) {
            return Err(operation_deadline_error(
                "topic-list snapshot",
                last_broker_error.clone(),
            ));
        }
        let request_id = {
            let mut conn = self.shared.inner.lock();
            conn.watch_topic_list(namespace, pattern)
        };
        self.shared.driver_waker.notify_one();
        let request = RequestFut::cancellable(self.shared.clone(), request_id);
        tokio::pin!(request);
        let outcome = tokio::select! {
            biased;
            () = deadline.as_mut() => {
                return Err(operation_deadline_error(
                    "topic-list snapshot",
                    last_broker_error.clone(),
                ));
            }
            outcome = request.as_mut() => outcome,
        };
        match outcome {
            magnetar_proto::OpOutcome::TopicListSnapshot { topics, .. } => Ok(topics),
            magnetar_proto::OpOutcome::Error { code, message, .. } => {
                Err(ClientError::Broker { code, message })
            }
            magnetar_proto::OpOutcome::Terminal { .. } => Err(ClientError::PeerClosed),
            other => Err(ClientError::Other(format!(
                "unexpected topic-list snapshot outcome: {other:?}"
            ))),
        }
    }

    /// Await the next PIP-145 `TopicListChanged` delta. Resolves with the broker-reported
    /// added / removed topics when the next watcher delta arrives, or `None` if the
    /// connection has closed and no further deltas will arrive. Pair with
    /// [`Self::watch_topic_list`] to first establish the watcher subscription.
    ///
    /// The future is cancel-safe: dropping it without polling does not drop pending
    /// deltas, the next `next_topic_list_change` call still sees them.
    pub async fn next_topic_list_change(&self) -> Option<crate::TopicListChange> {
        loop {
            if let Some(change) = self.shared.topic_list_changes.lock().pop_front() {
                return Some(change);
            }
            if self.shared.inner.lock().is_closed() {
                return None;
            }
            self.shared.topic_list_notify.notified().await;
        }
    }

    /// Non-blocking peek for the next PIP-145 topic-list delta. Returns `None` when the
    /// queue is empty.
    #[must_use]
    pub fn poll_topic_list_change(&self) -> Option<crate::TopicListChange> {
        self.shared.topic_list_changes.lock().pop_front()
    }

    /// PIP-33: await the next replicated-subscription marker observed by any consumer on
    /// this connection. Resolves once the broker emits a `REPLICATED_SUBSCRIPTION_*`
    /// marker on a subscribed topic (typically once per snapshot interval, default 1s
    /// when the namespace has `replicated_subscription_status=true`), or `None` if the
    /// connection has closed. Markers are filtered off the regular [`Consumer::receive`]
    /// stream — applications that just want to consume messages don't need this.
    ///
    /// Enroll-before-drain (mirror of [`ConnectionShared::await_reconnect_or_terminal`]):
    /// the `Notified` future is created and `enable()`d *before* the buffer drain +
    /// `is_closed()` re-check, so a marker the driver pushes (via
    /// `replicated_subscription_marker_notify.notify_waiters()`, which stores no permit)
    /// between the drain and the park is captured by this already-armed waiter rather than
    /// lost. The previous drain-then-`notified().await` shape hung whenever the marker
    /// landed in that gap (same race fixed for the subscribe-readiness waiter).
    /// No channel (ADR-0003), no host-clock read (ADR-0011).
    pub async fn next_replicated_subscription_marker(
        &self,
    ) -> Option<crate::ObservedReplicatedSubscriptionMarker> {
        loop {
            // Arm the wakeup BEFORE inspecting the buffer so a marker pushed
            // between the drain and the park is captured by this `Notified`.
            let notified = self.shared.replicated_subscription_marker_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            if let Some(marker) = self
                .shared
                .replicated_subscription_markers
                .lock()
                .pop_front()
            {
                return Some(marker);
            }
            if self.shared.inner.lock().is_closed() {
                return None;
            }
            // Neither a buffered marker nor closed — park on the pre-armed
            // waiter, then re-loop and re-arm. A spurious wake just re-drains.
            notified.await;
        }
    }

    /// Non-blocking peek for the next replicated-subscription marker observation.
    /// Returns `None` when the buffer is empty.
    #[must_use]
    pub fn poll_replicated_subscription_marker(
        &self,
    ) -> Option<crate::ObservedReplicatedSubscriptionMarker> {
        self.shared
            .replicated_subscription_markers
            .lock()
            .pop_front()
    }

    /// Query the broker for the number of partitions a topic has. Returns `0` for
    /// non-partitioned topics. Mirrors Java `PulsarClient#getPartitionsForTopic`.
    pub async fn partitioned_topic_metadata(&self, topic: &str) -> Result<u32, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.partitioned_topic_metadata_with_operation_deadline(
            topic,
            deadline.as_mut(),
            &mut last_broker_error,
        )
        .await
    }

    /// Deadline-aware partition-metadata seam used by the engine-generic façade.
    #[doc(hidden)]
    pub async fn partitioned_topic_metadata_with_operation_deadline(
        &self,
        topic: &str,
        mut deadline: Pin<&mut (dyn Future<Output = ()> + Send)>,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<u32, ClientError> {
        let retry_config = self.shared.inner.lock().operation_retry_config().clone();
        let mut broker_failures = 0_u32;
        loop {
            let request_id = {
                if operation_deadline_expired(deadline.as_mut()) {
                    return Err(operation_deadline_error(
                        "partitioned topic metadata",
                        last_broker_error.clone(),
                    ));
                }
                let mut conn = self.shared.inner.lock();
                conn.get_partitioned_topic_metadata(topic)
            };
            self.shared.driver_waker.notify_one();
            let request = RequestFut::cancellable(self.shared.clone(), request_id);
            tokio::pin!(request);
            let outcome = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    return Err(operation_deadline_error(
                        "partitioned topic metadata",
                        last_broker_error.clone(),
                    ));
                }
                outcome = request.as_mut() => outcome,
            };
            match outcome {
                magnetar_proto::OpOutcome::PartitionedMetadata {
                    partitions: _,
                    error: Some((code, message)),
                    ..
                } if magnetar_proto::is_retryable_broker_error(
                    magnetar_proto::OperationKind::PartitionedMetadata,
                    code,
                ) =>
                {
                    *last_broker_error = Some((code, message.clone()));
                    broker_failures = broker_failures.saturating_add(1);
                    if !retry_config.should_retry_after_failure(broker_failures) {
                        return Err(ClientError::Broker { code, message });
                    }
                    let sleep =
                        tokio::time::sleep(retry_config.delay_after_failure(broker_failures));
                    tokio::pin!(sleep);
                    tokio::select! {
                        biased;
                        () = deadline.as_mut() => {
                            return Err(operation_deadline_error(
                                "partitioned topic metadata",
                                last_broker_error.clone(),
                            ));
                        }
                        () = sleep.as_mut() => {}
                    }
                }
                magnetar_proto::OpOutcome::PartitionedMetadata {
                    partitions: _,
                    error: Some((code, message)),
                    ..
                } => return Err(ClientError::Broker { code, message }),
                magnetar_proto::OpOutcome::PartitionedMetadata {
                    partitions,
                    error: None,
                    ..
                } => return Ok(partitions),
                magnetar_proto::OpOutcome::Terminal { .. } => return Err(ClientError::PeerClosed),
                other => {
                    return Err(ClientError::Other(format!(
                        "unexpected partitioned metadata outcome: {other:?}"
                    )));
                }
            }
        }
    }

    // -------------------------------------------------------------------
    // PIP-460 scalable topics (ADR-0093, experimental). Drives the proto
    // `Connection` scalable entries + reads the driver-drained events from
    // `shared.scalable_events` via the same buffer + Notify pattern as the
    // PIP-145 topic-list deltas. No channels.
    // -------------------------------------------------------------------

    /// **Experimental** (PIP-460, ADR-0093). Open a scalable-topic session for
    /// `topic` and await its first layout.
    ///
    /// Upstream folds lookup and DAG-watch subscribe into one command, so this
    /// both resolves the topic **and** leaves the session open: subsequent
    /// layouts arrive through [`Self::next_scalable_event`] until
    /// [`Self::close_scalable_topic_session`]. `topic` may be a `topic://`, a
    /// `persistent://`, or a short name — the broker returns the canonical
    /// identity in [`crate::ScalableLookup::resolved_topic_name`].
    ///
    /// # Errors
    ///
    /// Fails when the broker did not advertise `supports_scalable_topics` — a
    /// Pulsar 4.x peer, or a 5.x one started with `scalableTopicsEnabled=false`
    /// — and when the connection closes before the first layout lands.
    #[cfg(feature = "scalable-topics")]
    pub async fn scalable_topic_lookup(
        &self,
        topic: &str,
    ) -> Result<crate::ScalableLookup, ClientError> {
        let session_id = {
            let mut conn = self.shared.inner.lock();
            conn.open_scalable_topic_session(topic)
                .map_err(|err| ClientError::Other(err.to_string()))?
        };
        self.shared.driver_waker.notify_one();
        loop {
            // Drain the first terminal event for our session id. A rejected
            // session ends as `DagWatchClosed`, not `LookupResolved` — waiting
            // only for the success variant would hang the caller until the
            // connection closed, which is exactly the shape
            // `scalable_topic_subscribe` avoids by racing its two outcomes.
            let drained = {
                let mut buf = self.shared.scalable_events.lock();
                let pos = buf.iter().position(|ev| {
                    matches!(
                        ev,
                        crate::ScalableEvent::LookupResolved { session_id: s, .. }
                            | crate::ScalableEvent::DagWatchClosed { session_id: s, .. }
                            if *s == session_id
                    )
                });
                pos.and_then(|p| buf.remove(p))
            };
            match drained {
                Some(crate::ScalableEvent::LookupResolved {
                    resolved_topic_name,
                    controller_broker_url,
                    segments,
                    epoch,
                    ..
                }) => {
                    return Ok(crate::ScalableLookup {
                        session_id,
                        resolved_topic_name,
                        controller_broker_url,
                        segments,
                        epoch,
                    });
                }
                Some(crate::ScalableEvent::DagWatchClosed { reason, .. }) => {
                    // Always formatted rather than defaulted: every producer of
                    // `DagWatchClosed` sets a reason, so a fallback branch would
                    // be unreachable, and naming the session makes the error
                    // useful when several are open on one connection.
                    return Err(ClientError::Other(format!(
                        "scalable-topic session {session_id} closed before it resolved: {}",
                        reason.unwrap_or_default()
                    )));
                }
                _ => {}
            }
            if self.shared.inner.lock().is_closed() {
                return Err(ClientError::Other(
                    "connection closed before scalable lookup resolved".to_owned(),
                ));
            }
            self.shared.scalable_notify.notified().await;
        }
    }

    /// **Experimental** (PIP-460, ADR-0093). Whether the connected broker
    /// advertised the PIP-460 capability. `false` against a Pulsar 4.x peer.
    #[cfg(feature = "scalable-topics")]
    #[must_use]
    pub fn broker_supports_scalable_topics(&self) -> bool {
        self.shared.inner.lock().broker_supports_scalable_topics()
    }

    /// **Experimental** (PIP-460, ADR-0093). Register as a scalable consumer
    /// with the controller leader and await the initial assignment.
    ///
    /// This is what obtains a **share** of a scalable topic — the
    /// `segment://` topics this consumer owns. Resolving the layout with
    /// [`Self::scalable_topic_lookup`] does not grant one. Rebalances arrive
    /// afterwards as [`crate::ScalableEvent::AssignmentChanged`].
    ///
    /// # Errors
    ///
    /// Fails when the broker did not advertise `supports_scalable_topics`, when
    /// the broker rejects the registration, and when the connection closes
    /// before the assignment lands.
    #[cfg(feature = "scalable-topics")]
    pub async fn scalable_topic_subscribe(
        &self,
        topic: &str,
        subscription: &str,
        consumer_name: &str,
        consumer_id: u64,
        consumer_type: magnetar_proto::ScalableConsumerType,
    ) -> Result<magnetar_proto::ConsumerAssignment, ClientError> {
        {
            let mut conn = self.shared.inner.lock();
            conn.scalable_topic_subscribe(
                topic,
                subscription,
                consumer_name,
                consumer_id,
                consumer_type,
            )
            .map_err(|err| ClientError::Other(err.to_string()))?;
        }
        self.shared.driver_waker.notify_one();
        loop {
            let drained = {
                let mut buf = self.shared.scalable_events.lock();
                let pos = buf.iter().position(|ev| {
                    matches!(
                        ev,
                        crate::ScalableEvent::ConsumerAssigned { consumer_id: c, .. }
                            | crate::ScalableEvent::ConsumerRejected { consumer_id: c, .. }
                            if *c == consumer_id
                    )
                });
                pos.and_then(|p| buf.remove(p))
            };
            match drained {
                Some(crate::ScalableEvent::ConsumerAssigned { assignment, .. }) => {
                    return Ok(assignment);
                }
                Some(crate::ScalableEvent::ConsumerRejected { reason, .. }) => {
                    return Err(ClientError::Other(reason));
                }
                _ => {}
            }
            if self.shared.inner.lock().is_closed() {
                return Err(ClientError::Other(
                    "connection closed before the scalable assignment landed".to_owned(),
                ));
            }
            self.shared.scalable_notify.notified().await;
        }
    }

    /// **Experimental** (PIP-460, ADR-0093). The current assignment for a
    /// registered scalable consumer, or `None` before it resolves.
    #[cfg(feature = "scalable-topics")]
    #[must_use]
    pub fn scalable_consumer_assignment(
        &self,
        consumer_id: u64,
    ) -> Option<magnetar_proto::ConsumerAssignment> {
        self.shared
            .inner
            .lock()
            .scalable_consumer_assignment(consumer_id)
            .cloned()
    }

    /// **Experimental** (PIP-460, ADR-0093). Open a namespace-level watch over
    /// the scalable topics matching `property_filters` (empty = all).
    ///
    /// # Errors
    ///
    /// Fails when the broker did not advertise `supports_scalable_topics`.
    #[cfg(feature = "scalable-topics")]
    pub fn watch_scalable_topics(
        &self,
        namespace: &str,
        property_filters: Vec<(String, String)>,
    ) -> Result<u64, ClientError> {
        let watch_id = {
            let mut conn = self.shared.inner.lock();
            conn.watch_scalable_topics(namespace, property_filters)
                .map_err(|err| ClientError::Other(err.to_string()))?
        };
        self.shared.driver_waker.notify_one();
        Ok(watch_id)
    }

    /// **Experimental** (PIP-460, ADR-0093). Close a namespace-level watch.
    #[cfg(feature = "scalable-topics")]
    pub fn close_scalable_topics_watch(&self, watch_id: u64) {
        {
            let mut conn = self.shared.inner.lock();
            conn.close_scalable_topics_watch(watch_id);
        }
        self.shared.driver_waker.notify_one();
    }

    /// **Experimental** (PIP-460, ADR-0093). The current matching topic set for
    /// a namespace watch, or `None` for an unknown id.
    #[cfg(feature = "scalable-topics")]
    #[must_use]
    pub fn scalable_topics_snapshot(&self, watch_id: u64) -> Option<Vec<String>> {
        self.shared.inner.lock().scalable_topics_snapshot(watch_id)
    }

    /// **Experimental** (PIP-460 / PIP-473, ADR-0093). Whether the broker
    /// advertised metadata-driven transaction-coordinator discovery. Gated on
    /// its own feature flag, independent of `supports_scalable_topics`.
    #[cfg(feature = "scalable-topics")]
    #[must_use]
    pub fn broker_supports_tc_metadata_discovery(&self) -> bool {
        self.shared
            .inner
            .lock()
            .broker_supports_tc_metadata_discovery()
    }

    /// **Experimental** (PIP-460 / PIP-473, ADR-0093). Open a
    /// transaction-coordinator discovery watch.
    ///
    /// # Errors
    ///
    /// Fails when the broker did not advertise `supports_tc_metadata_discovery`.
    #[cfg(feature = "scalable-topics")]
    pub fn watch_tc_assignments(&self) -> Result<u64, ClientError> {
        let watch_id = {
            let mut conn = self.shared.inner.lock();
            conn.watch_tc_assignments()
                .map_err(|err| ClientError::Other(err.to_string()))?
        };
        self.shared.driver_waker.notify_one();
        Ok(watch_id)
    }

    /// **Experimental** (PIP-460 / PIP-473, ADR-0093). Close a
    /// transaction-coordinator discovery watch.
    #[cfg(feature = "scalable-topics")]
    pub fn close_tc_assignments_watch(&self, watch_id: u64) {
        {
            let mut conn = self.shared.inner.lock();
            conn.close_tc_assignments_watch(watch_id);
        }
        self.shared.driver_waker.notify_one();
    }

    /// **Experimental** (PIP-460, ADR-0093). Close a scalable-topic session.
    #[cfg(feature = "scalable-topics")]
    pub fn close_scalable_topic_session(&self, session_id: u64) {
        {
            let mut conn = self.shared.inner.lock();
            conn.close_scalable_topic_session(session_id);
        }
        self.shared.driver_waker.notify_one();
    }

    /// **Experimental** (PIP-460, ADR-0093). Await the next scalable-topic
    /// event (DAG update / drop-on-change / close) drained by the driver.
    /// Returns `None` once the connection closes. Cancel-safe: dropping the
    /// future without polling does not lose buffered events.
    #[cfg(feature = "scalable-topics")]
    pub async fn next_scalable_event(&self) -> Option<crate::ScalableEvent> {
        loop {
            if let Some(ev) = self.shared.scalable_events.lock().pop_front() {
                return Some(ev);
            }
            if self.shared.inner.lock().is_closed() {
                return None;
            }
            self.shared.scalable_notify.notified().await;
        }
    }

    /// Subscribe to a topic.
    ///
    /// Returns once the broker has acked the subscribe (`CommandSuccess` correlated with the
    /// request id).
    ///
    /// # Errors
    ///
    /// Retryable broker refusals are reissued under `OperationRetryConfig`;
    /// exhaustion returns [`ClientError::Broker`]. A deadline with no recorded
    /// broker error returns [`ClientError::Timeout`].
    pub async fn subscribe(&self, req: SubscribeRequest) -> Result<Consumer, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.subscribe_with_operation_deadline(req, None, deadline.as_mut(), &mut last_broker_error)
            .await
    }

    /// Same as [`Self::subscribe`] but with an optional decryption hook (PIP-4).
    pub async fn subscribe_with(
        &self,
        req: SubscribeRequest,
        decryptor: Option<Arc<dyn crate::crypto::MessageDecryptor>>,
    ) -> Result<Consumer, ClientError> {
        let mut deadline = self.operation_timer();
        let mut last_broker_error = None;
        self.subscribe_with_operation_deadline(
            req,
            decryptor,
            deadline.as_mut(),
            &mut last_broker_error,
        )
        .await
    }

    /// Deadline-aware subscribe seam used by the engine-generic façade.
    #[doc(hidden)]
    pub async fn subscribe_with_operation_deadline(
        &self,
        req: SubscribeRequest,
        decryptor: Option<Arc<dyn crate::crypto::MessageDecryptor>>,
        mut deadline: Pin<&mut (dyn Future<Output = ()> + Send)>,
        last_broker_error: &mut Option<(i32, String)>,
    ) -> Result<Consumer, ClientError> {
        // See `open_producer_with`: subscribe also needs lookup-driven bundle activation,
        // and ADR-0039 routes proxy-resolved subscribes onto a pinned pool entry.
        let retry_config = self.shared.inner.lock().operation_retry_config().clone();
        let mut attachment_failures = 0_u32;
        loop {
            let (target, landed_on) = self
                .lookup_topic_with_operation_deadline(
                    &req.topic,
                    deadline.as_mut(),
                    last_broker_error,
                )
                .await?;
            let topic = req.topic.clone();
            let target_shared = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    return Err(operation_deadline_error(
                        "consumer target resolution",
                        last_broker_error.clone(),
                    ));
                }
                result = self.resolve_target(target, &landed_on, &topic) => result?,
            };
            target_shared.fail_if_no_driver()?;
            if operation_deadline_expired(deadline.as_mut()) {
                return Err(operation_deadline_error(
                    "consumer subscribe",
                    last_broker_error.clone(),
                ));
            }
            let (handle, slot) = {
                let mut conn = target_shared.inner.lock();
                let handle = conn.subscribe(req.clone());
                let slot = conn
                    .consumer(handle)
                    .cloned()
                    .expect("just-created consumer slot must exist");
                (handle, slot)
            };
            target_shared.driver_waker.notify_one();
            let mut guard = PendingConsumerSubscribeGuard::new(target_shared.clone(), handle);
            let wait_shared = target_shared.clone();
            let acked = wait_subscribe_acked(&wait_shared, handle, true, None);
            tokio::pin!(acked);
            let ack_result = tokio::select! {
                biased;
                () = deadline.as_mut() => {
                    let last = target_shared
                        .inner
                        .lock()
                        .consumer_last_subscribe_error(handle)
                        .or_else(|| last_broker_error.clone());
                    Err(operation_deadline_error("consumer subscribe", last))
                }
                result = acked.as_mut() => result,
            };
            match ack_result {
                Ok(()) => {
                    guard.disarm();
                    {
                        // ADR-0011: snapshot the host clock at the call site and
                        // hand it to the state machine — this is also what arms
                        // the receiver-queue auto-adjust schedule (follow-ups §4).
                        let now = std::time::Instant::now();
                        let mut conn = target_shared.inner.lock();
                        let _ = conn.initial_flow(handle, now);
                    }
                    target_shared.driver_waker.notify_one();
                    tracing::info!(
                        topic = %slot.identity.topic,
                        subscription = %slot.identity.subscription,
                        handle = ?handle,
                        "consumer subscribed"
                    );
                    return Ok(Consumer::assemble(target_shared, handle, slot, decryptor));
                }
                Err(ClientError::Broker { code, message })
                    if magnetar_proto::is_retryable_broker_error(
                        magnetar_proto::OperationKind::Subscribe,
                        code,
                    ) =>
                {
                    *last_broker_error = Some((code, message.clone()));
                    attachment_failures = attachment_failures.saturating_add(1);
                    if !retry_config.should_retry_after_failure(attachment_failures) {
                        return Err(ClientError::Broker { code, message });
                    }
                    drop(guard);
                    let sleep =
                        tokio::time::sleep(retry_config.delay_after_failure(attachment_failures));
                    tokio::pin!(sleep);
                    tokio::select! {
                        biased;
                        () = deadline.as_mut() => {
                            return Err(operation_deadline_error(
                                "consumer subscribe retry",
                                last_broker_error.clone(),
                            ));
                        }
                        () = sleep.as_mut() => {}
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Close the connection. Sends `CommandCloseConnection`-style state-machine close on the
    /// bootstrap connection, joins its driver, then closes every entry in the proxy pool
    /// (ADR-0039) and joins their drivers.
    ///
    /// Idempotent: calling close more than once does nothing on the subsequent calls.
    pub async fn close(self) {
        {
            let mut conn = self.shared.inner.lock();
            conn.close();
        }
        self.shared.driver_waker.notify_one();
        let handle = self.driver.lock().take();
        if let Some(handle) = handle {
            // We deliberately discard the join result here — close() is best-effort; consumers
            // that want the terminal error should call `join_driver` instead.
            let _ = handle.join().await;
        }
        // Tear down the proxy pool (ADR-0039). Pool entries are independent supervised
        // driver loops; each one observes its own `is_user_closed()` after we call close().
        if let Some(pool) = self.pool.as_ref() {
            pool.close().await;
        }
    }

    /// Take the driver handle so the caller can wait for it explicitly. After this call the
    /// `Client` will not join the driver on `close()`.
    pub fn take_driver(&self) -> Option<DriverHandle> {
        self.driver.lock().take()
    }

    /// Returns `true` while the underlying broker connection is in
    /// [`HandshakeState::Connected`]. Mirrors `org.apache.pulsar.client.api.Producer#isConnected`
    /// at the connection scope (Java exposes it on `Producer`/`Consumer`; magnetar's runtime
    /// keeps all producers/consumers from a single `Client` on one shared connection, so the
    /// same predicate answers both).
    pub fn is_connected(&self) -> bool {
        self.shared.inner.lock().is_connected()
    }

    /// `true` once [`Self::close`] has been called or the broker connection has otherwise
    /// entered a terminal state. Mirrors Java `PulsarClient#isClosed`. After this returns
    /// `true` no new producer / consumer opens can succeed; pair with [`Self::is_connected`]
    /// for the live test.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.inner.lock().is_closed()
    }

    /// Wall-clock time the broker connection was most recently torn down (peer close, I/O
    /// error, local `close()`). `None` while the connection has never been disconnected.
    ///
    /// Mirrors Java's `Producer/Consumer#getLastDisconnectedTimestamp`. Convert with
    /// [`std::time::SystemTime::duration_since`] if the Java-session-millis-since-epoch number
    /// is needed.
    pub fn last_disconnected_timestamp(&self) -> Option<std::time::SystemTime> {
        self.shared.inner.lock().last_disconnected_timestamp()
    }

    /// Monotonic counter bumped each time the auto-reconnect supervisor severs the broker
    /// session via [`magnetar_proto::Connection::reset`]. Callers detect a reconnect by
    /// observing this value change between two operations on the same `Client`. Mirrors
    /// Java `ClientCnx#getEpoch` at the client-façade scope.
    #[must_use]
    pub fn session_epoch(&self) -> u64 {
        self.shared.inner.lock().session_epoch()
    }
}

/// Pick the broker URL the proxy advertised for the topic — the value to thread into
/// `CommandConnect.proxy_to_broker_url` on the pinned pool entry (ADR-0039). Prefers
/// the TLS URL when the bootstrap connection is on `pulsar+ssl://`, otherwise picks the
/// plain URL. Returns `None` if the broker declined to advertise any URL (which the
/// proxy contract says shouldn't happen but the broker is the broker).
///
/// The advertised value (e.g. `pulsar://broker-c3-n12:6650`) is normalised to the
/// `host:port` form Apache Pulsar Proxy expects on
/// `CommandConnect.proxy_to_broker_url` — the Java reference client and pulsar-rs both
/// send it scheme-less. The proxy parses the field via
/// `InetSocketAddress.createUnresolved`; an unstripped `pulsar://...` makes
/// `validateBrokerTarget()` return `false` and the proxy rejects the handshake with
/// `ServerError.ServiceNotReady "Target broker cannot be validated"`.
fn preferred_broker_url(
    broker_url: Option<String>,
    broker_url_tls: Option<String>,
    scheme: Scheme,
) -> Option<String> {
    let raw = match scheme {
        Scheme::Tls => broker_url_tls.or(broker_url),
        Scheme::Plain => broker_url.or(broker_url_tls),
    }?;
    if let Ok(parsed) = ParsedUrl::parse(&raw) {
        Some(format!("{}:{}", parsed.host, parsed.port))
    } else {
        tracing::warn!(
            broker_url = %crate::log_fields::truncate_broker_str(&raw),
            "lookup advertised broker URL with unparseable scheme; \
             forwarding unchanged — proxy may reject handshake",
        );
        Some(raw)
    }
}

/// Pick the broker URL the lookup advertised on the DIRECT
/// (`proxy_through_service_url = false`) path. Mirrors
/// [`preferred_broker_url`] in TLS-posture preference but **keeps the full Pulsar
/// URL** (e.g. `pulsar://broker-1:6650`) instead of stripping the scheme: on the
/// DIRECT path the URL is fed back into [`ParsedUrl::parse`] to recover the dial
/// target and TLS choice (whereas the proxy path needs the scheme-less
/// `host:port` form `CommandConnect.proxy_to_broker_url` expects per ADR-0045).
///
/// Returns `None` when the lookup omitted both `broker_service_url` and
/// `broker_service_url_tls` (pre-2.4 brokers, single-broker setups). The caller
/// folds `None` into `LookupTarget::Direct { broker_url: None }` so the
/// bootstrap connection serves as the data plane unchanged.
fn direct_broker_url(
    broker_url: Option<String>,
    broker_url_tls: Option<String>,
    scheme: Scheme,
) -> Option<String> {
    match scheme {
        Scheme::Tls => broker_url_tls.or(broker_url),
        Scheme::Plain => broker_url.or(broker_url_tls),
    }
}

/// Parse a broker URL captured on the DIRECT lookup path into a
/// [`ParsedUrl`] usable by the pool's [`Transport::connect_with_resolver`]
/// call. [`magnetar_proto::broker_authority`] owns authority validation and
/// default-port synthesis. This adapter preserves the explicit Pulsar scheme
/// when present and otherwise inherits the bootstrap connection's TLS posture.
fn parse_direct_broker_url(
    broker_url: &str,
    bootstrap_scheme: Scheme,
) -> Result<ParsedUrl, ClientError> {
    let bootstrap_prefix = match bootstrap_scheme {
        Scheme::Tls => "pulsar+ssl://",
        Scheme::Plain => "pulsar://",
    };

    let unusable = || {
        ClientError::Other(format!(
            "lookup advertised broker URL '{broker_url}' is not a usable authority \
             (expected 'pulsar://', 'pulsar+ssl://', or a scheme-less host with an \
             optional numeric port)"
        ))
    };
    let endpoint_scheme =
        magnetar_proto::broker_endpoint_scheme(broker_url).ok_or_else(unusable)?;
    let authority =
        magnetar_proto::broker_authority(broker_url, Some(bootstrap_scheme.default_port()))
            .ok_or_else(unusable)?;
    let scheme_prefix = match endpoint_scheme {
        magnetar_proto::BrokerEndpointScheme::Pulsar => "pulsar://",
        magnetar_proto::BrokerEndpointScheme::PulsarTls => "pulsar+ssl://",
        magnetar_proto::BrokerEndpointScheme::Schemeless => bootstrap_prefix,
    };
    let synthetic = format!("{scheme_prefix}{authority}");
    ParsedUrl::parse(&synthetic).map_err(|err| {
        ClientError::Other(format!(
            "canonical broker authority '{authority}' derived from lookup URL '{broker_url}' \
             could not be represented as a Tokio dial target: {err}"
        ))
    })
}

pub(crate) async fn wait_connected(shared: Arc<ConnectionShared>) -> Result<(), ClientError> {
    ConnectedFut {
        shared,
        notification: None,
    }
    .await
}

/// [`wait_connected`] bounded by `operation_timeout` (ADR-0052, extended to
/// the post-dial handshake). A broker that accepts the socket but never
/// replies to `CommandConnect` would park `wait_connected` forever; the
/// timeout abandons the handshake with a bounded `Io(TimedOut)` instead
/// (Java `operationTimeoutMs` parity). Mirrors the pool path's existing
/// `tokio::time::timeout(operation_timeout, wait_connected)` (`pool.rs`).
pub(crate) async fn bounded_wait_connected(
    shared: Arc<ConnectionShared>,
    operation_timeout: std::time::Duration,
) -> Result<(), ClientError> {
    match tokio::time::timeout(operation_timeout, wait_connected(shared)).await {
        Ok(inner) => inner,
        Err(_elapsed) => Err(ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "handshake exceeded operation_timeout ({operation_timeout:?}): broker accepted \
                 the connection but never completed CONNECT -> CONNECTED"
            ),
        ))),
    }
}

/// Render the captured mid-handshake broker reason as the user-facing
/// `"handshake failed: …"` envelope, or `None` when no broker `CommandError`
/// was captured (a raw transport drop with no protocol frame). The proto layer
/// already length-bounds the broker text at the capture site (ADR-0062), so the
/// envelope here is safe to surface verbatim.
fn handshake_failure_message(conn: &magnetar_proto::Connection) -> Option<String> {
    conn.handshake_failure_reason()
        .map(|reason| format!("handshake failed: {reason}"))
}

/// Future that resolves once the state machine reports `HandshakeState::Connected` (or fails if
/// it transitions to `Failed`/`Closed` before that).
///
/// The notification is **owned and polled before connection state is
/// inspected**, exactly like [`EventWaitFut`]. It therefore stays registered
/// across `Poll::Pending` and cannot miss the driver's `notify_waiters()`.
/// That discipline is load-bearing here: the driver announces handshake
/// completion with `notify_waiters()`, which stores no permit, and a freshly
/// dialled connection is idle once `CONNECTED` lands — so a single missed
/// pulse parks the handshake for the whole `operation_timeout` instead of
/// milliseconds. Registering from a spawned helper task (as this future used
/// to) loses the pulse whenever the runtime has not scheduled the helper yet,
/// which is why the failure only ever showed up on loaded CI runners.
struct ConnectedFut {
    shared: Arc<ConnectionShared>,
    notification: Option<Pin<Box<tokio::sync::futures::OwnedNotified>>>,
}

impl Future for ConnectedFut {
    type Output = Result<(), ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            // Register (or stay registered) BEFORE reading connection state, so a
            // pulse that lands between the state check and the park cannot be lost.
            let notification = this
                .notification
                .get_or_insert_with(|| Box::pin(this.shared.event_waker.clone().notified_owned()));
            let notified = notification.as_mut().poll(cx);

            let mut conn = this.shared.inner.lock();
            match Self::inspect(&mut conn) {
                Poll::Ready(outcome) => return Poll::Ready(outcome),
                Poll::Pending => {
                    drop(conn);
                    if notified.is_ready() {
                        // Consumed a pulse without reaching a terminal state: re-arm
                        // and re-check rather than parking on a spent notification.
                        this.notification = None;
                        continue;
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl ConnectedFut {
    /// Drain the handshake-relevant events and classify the connection state.
    /// `Poll::Pending` means "still handshaking" — the caller parks.
    fn inspect(conn: &mut magnetar_proto::Connection) -> Poll<Result<(), ClientError>> {
        // Take only the events this future terminalizes on; anything else stays
        // queued for its own waiter (same discipline as `EventWaitFut`). Both
        // admitted variants are terminal here, so one event is all we ever need.
        if let Some(ev) = conn.poll_event_if(|event| {
            matches!(
                event,
                ConnectionEvent::Connected { .. } | ConnectionEvent::Closed { .. }
            )
        }) {
            match ev {
                ConnectionEvent::Connected { .. } => return Poll::Ready(Ok(())),
                ConnectionEvent::Closed { reason } => {
                    // A mid-handshake broker `CommandError` populates
                    // `handshake_failure_reason`, but the terminal drop that
                    // follows surfaces here as a `Closed` event whose `reason`
                    // is the generic transport string ("peer closed the
                    // connection"). Prefer the captured handshake reason — and
                    // wrap it in the SAME "handshake failed: …" envelope as the
                    // `Failed`-state branch below — so the broker's explanation
                    // surfaces regardless of which terminalization path won the
                    // capture-vs-drop race. The reason is already length-bounded
                    // at the proto capture site (ADR-0062).
                    let msg = handshake_failure_message(conn).unwrap_or_else(|| {
                        reason.unwrap_or_else(|| "connection closed during handshake".into())
                    });
                    return Poll::Ready(Err(ClientError::Other(msg)));
                }
                _ => unreachable!("poll_event_if admitted only Connected / Closed"),
            }
        }
        match conn.state() {
            HandshakeState::Connected => Poll::Ready(Ok(())),
            HandshakeState::Failed => {
                // Prefer the broker-supplied reason if the peer sent a
                // `CommandError` mid-handshake (proxy auth rejection,
                // namespace not found via proxy_to_broker_url, etc.). Falls
                // back to the opaque message for raw transport drops where no
                // protocol frame ever arrived (TLS error, ECONNREFUSED).
                let msg = handshake_failure_message(conn)
                    .unwrap_or_else(|| "handshake failed".to_owned());
                Poll::Ready(Err(ClientError::Other(msg)))
            }
            HandshakeState::Closed => Poll::Ready(Err(ClientError::Closed)),
            _ => Poll::Pending,
        }
    }
}

/// "Wait for the broker reply to a request-id-keyed command" future.
///
/// Reused for lookup, partitioned-metadata, watch-topic-list-snapshot, and
/// the txn family — i.e. every command whose response is correlated by
/// `request_id` rather than by `producer_id` / `consumer_id`. Mirrors the
/// moonpool engine's identically-named `RequestFut`.
pub(crate) struct RequestFut {
    pub(crate) shared: Arc<ConnectionShared>,
    pub(crate) request_id: magnetar_proto::RequestId,
    cancel_on_drop: bool,
}

impl RequestFut {
    pub(crate) fn new(
        shared: Arc<ConnectionShared>,
        request_id: magnetar_proto::RequestId,
    ) -> Self {
        Self {
            shared,
            request_id,
            cancel_on_drop: false,
        }
    }

    pub(crate) fn cancellable(
        shared: Arc<ConnectionShared>,
        request_id: magnetar_proto::RequestId,
    ) -> Self {
        Self {
            shared,
            request_id,
            cancel_on_drop: true,
        }
    }
}

impl Future for RequestFut {
    type Output = magnetar_proto::OpOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let key = magnetar_proto::PendingOpKey::Request(self.request_id);
        let mut conn = self.shared.inner.lock();
        if let Some(outcome) = conn.take_outcome(key) {
            return Poll::Ready(outcome);
        }
        conn.register_waker(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for RequestFut {
    /// Drop-time cleanup: clear our entry from the connection's waker slab so
    /// a cancelled `partitioned_metadata` / `lookup` future does not leave a
    /// dangling [`std::task::Waker`] behind. Without this hook the entry is
    /// otherwise reclaimed lazily — either when the matching broker response
    /// finally lands (the dispatcher `remove`s the waker and wakes a no-op
    /// task) or on the next [`magnetar_proto::Connection::reset`] — but for
    /// long-running connections that issue many short-lived lookups whose
    /// callers cancel before the round-trip completes, those entries
    /// accumulate. Defense-in-depth per the lookup multi-agent review
    /// MEDIUM-4 finding. ADR-0024 four-layer coverage lives in
    /// `tests/lookup_drop_unregister.rs`.
    fn drop(&mut self) {
        if self.cancel_on_drop {
            self.shared.inner.lock().cancel_request(self.request_id);
        } else {
            let key = magnetar_proto::PendingOpKey::Request(self.request_id);
            self.shared.inner.lock().unregister_waker(key);
        }
    }
}

struct PendingProducerOpenGuard {
    shared: Arc<ConnectionShared>,
    handle: magnetar_proto::ProducerHandle,
    armed: bool,
}

impl PendingProducerOpenGuard {
    fn new(shared: Arc<ConnectionShared>, handle: magnetar_proto::ProducerHandle) -> Self {
        Self {
            shared,
            handle,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for PendingProducerOpenGuard {
    fn drop(&mut self) {
        if self.armed {
            self.shared.inner.lock().cancel_producer_open(self.handle);
            self.shared.operation_cancel_notify.notify_waiters();
            self.shared.driver_waker.notify_one();
        }
    }
}

struct PendingConsumerSubscribeGuard {
    shared: Arc<ConnectionShared>,
    handle: magnetar_proto::ConsumerHandle,
    armed: bool,
}

impl PendingConsumerSubscribeGuard {
    fn new(shared: Arc<ConnectionShared>, handle: magnetar_proto::ConsumerHandle) -> Self {
        Self {
            shared,
            handle,
            armed: true,
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for PendingConsumerSubscribeGuard {
    fn drop(&mut self) {
        if self.armed {
            self.shared
                .inner
                .lock()
                .cancel_consumer_subscribe(self.handle);
            self.shared.operation_cancel_notify.notify_waiters();
            self.shared.driver_waker.notify_one();
        }
    }
}

async fn wait_producer_ready(
    shared: &Arc<ConnectionShared>,
    handle: magnetar_proto::ProducerHandle,
) -> Result<(), ClientError> {
    // Select only ProducerReady/ProducerClosedByBroker events for this handle;
    // concurrent setup waiters retain ownership of their own events.
    EventWaitFut {
        shared: shared.clone(),
        matcher: EventMatcher::ProducerReady(handle),
        notification: None,
    }
    .await
}

pub(crate) async fn wait_subscribe_acked(
    shared: &Arc<ConnectionShared>,
    handle: magnetar_proto::ConsumerHandle,
    accept_prior_attachment: bool,
    expected_waiter_id: Option<RequestId>,
) -> Result<(), ClientError> {
    EventWaitFut {
        shared: shared.clone(),
        matcher: EventMatcher::SubscribeAcked(handle, accept_prior_attachment, expected_waiter_id),
        notification: None,
    }
    .await
}

#[derive(Debug, Clone, Copy)]
enum EventMatcher {
    ProducerReady(magnetar_proto::ProducerHandle),
    SubscribeAcked(magnetar_proto::ConsumerHandle, bool, Option<RequestId>),
}

/// The dedicated event notification is owned and polled before connection
/// state is inspected. It therefore remains registered across `Pending` and
/// cannot miss a driver `notify_waiters()` that races with the state check.
/// Keeping it separate from `driver_waker` also prevents event waiters from
/// consuming outbound-work permits intended for the driver loop.
/// Each waiter removes only events for its own handle; unrelated concurrent
/// setup events remain in the connection queue for their owning waiter.
struct EventWaitFut {
    shared: Arc<ConnectionShared>,
    matcher: EventMatcher,
    notification: Option<Pin<Box<tokio::sync::futures::OwnedNotified>>>,
}

impl Future for EventWaitFut {
    type Output = Result<(), ClientError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        loop {
            let notification = this
                .notification
                .get_or_insert_with(|| Box::pin(this.shared.event_waker.clone().notified_owned()));
            let notified = notification.as_mut().poll(cx);

            let mut conn = this.shared.inner.lock();
            // Inspect both events and the outcome slab.
            loop {
                let matcher = this.matcher;
                match conn.poll_event_if(|event| match (matcher, event) {
                    (
                        EventMatcher::ProducerReady(expected),
                        ConnectionEvent::ProducerReady { handle, .. }
                        | ConnectionEvent::ProducerClosedByBroker { handle, .. }
                        | ConnectionEvent::ProducerOpenFailed { handle, .. },
                    ) => expected == *handle,
                    (
                        EventMatcher::SubscribeAcked(expected, _, _),
                        ConnectionEvent::SubscribeAcked { handle }
                        | ConnectionEvent::ConsumerClosedByBroker { handle, .. }
                        | ConnectionEvent::SubscribeFailed { handle, .. },
                    ) => expected == *handle,
                    _ => false,
                }) {
                    Some(ConnectionEvent::ProducerReady { handle, .. }) => {
                        if let EventMatcher::ProducerReady(h) = this.matcher {
                            if h == handle {
                                return Poll::Ready(Ok(()));
                            }
                        }
                    }
                    Some(ConnectionEvent::SubscribeAcked { handle }) => {
                        if let EventMatcher::SubscribeAcked(h, _, waiter_id) = this.matcher {
                            let completed = match waiter_id {
                                Some(waiter_id) => conn
                                    .consume_consumer_subscribe_waiter_completion(
                                        handle, waiter_id,
                                    ),
                                None => conn.consume_initial_consumer_subscribe_completion(handle),
                            };
                            if h == handle && completed {
                                return Poll::Ready(Ok(()));
                            }
                        }
                    }
                    Some(ConnectionEvent::ProducerClosedByBroker {
                        handle,
                        assigned_broker_service_url,
                    }) => {
                        if let EventMatcher::ProducerReady(h) = this.matcher {
                            if h == handle {
                                // Broker-forced close — degraded-but-recovering
                                // (warn! per ADR-0054 §2.1); the open future
                                // surfaces `Closed` and the caller decides.
                                let topic = conn
                                    .producer(handle)
                                    .map(|s| s.identity.topic.clone())
                                    .unwrap_or_default();
                                tracing::warn!(
                                    handle = ?handle,
                                    topic = %topic,
                                    assigned_broker_service_url = assigned_broker_service_url
                                        .as_deref()
                                        .map(crate::log_fields::truncate_broker_str),
                                    "broker closed producer while waiting for ProducerReady"
                                );
                                return Poll::Ready(Err(ClientError::Closed));
                            }
                        }
                    }
                    Some(ConnectionEvent::ProducerOpenFailed {
                        handle,
                        code,
                        message,
                    }) => {
                        if let EventMatcher::ProducerReady(h) = this.matcher {
                            if h == handle {
                                return Poll::Ready(Err(ClientError::Broker { code, message }));
                            }
                        }
                    }
                    Some(ConnectionEvent::ConsumerClosedByBroker {
                        handle,
                        assigned_broker_service_url,
                    }) => {
                        if let EventMatcher::SubscribeAcked(h, _, _) = this.matcher {
                            if h == handle {
                                // Broker-forced close — warn! per ADR-0054 §2.1.
                                let (topic, subscription) = conn
                                    .consumer(handle)
                                    .map(|s| {
                                        (s.identity.topic.clone(), s.identity.subscription.clone())
                                    })
                                    .unwrap_or_default();
                                tracing::warn!(
                                    handle = ?handle,
                                    topic = %topic,
                                    subscription = %subscription,
                                    assigned_broker_service_url = assigned_broker_service_url
                                        .as_deref()
                                        .map(crate::log_fields::truncate_broker_str),
                                    "broker closed consumer while waiting for SubscribeAcked"
                                );
                                return Poll::Ready(Err(ClientError::Closed));
                            }
                        }
                    }
                    Some(ConnectionEvent::SubscribeFailed {
                        handle,
                        code,
                        message,
                    }) => {
                        if let EventMatcher::SubscribeAcked(h, _, _) = this.matcher {
                            if h == handle {
                                return Poll::Ready(Err(ClientError::Broker { code, message }));
                            }
                        }
                    }
                    Some(ConnectionEvent::Closed { reason }) => {
                        // Connection-level close while a producer-open / subscribe
                        // future was parked. ADR-0055 §1: a TERMINAL drop
                        // (`fail_all_pending`, which carries a `reason`) must
                        // unblock the waiter with the terminal `PeerClosed`, the
                        // same outcome the request / send / receive surfaces — not
                        // a generic `Other`. A user-requested graceful `close()`
                        // (reason `None`) keeps the existing `Closed` mapping so
                        // "user wants out" stays distinguishable from "peer went
                        // away". warn! per ADR-0054 §2.1; `reason` is
                        // broker-controlled text.
                        tracing::warn!(
                            reason = reason
                                .as_deref()
                                .map(crate::log_fields::truncate_broker_str),
                            "connection closed while waiting for producer/consumer readiness"
                        );
                        return Poll::Ready(Err(match reason {
                            Some(_) => ClientError::PeerClosed,
                            None => ClientError::Closed,
                        }));
                    }
                    Some(_) => {} // ignore unrelated events
                    None => break,
                }
            }

            // Consume a queued success event before consulting the durable
            // attachment bit. The bit is only a reset-race fallback: using it
            // first would leave the initial SubscribeAcked in the queue, where
            // a later seek/re-subscribe waiter could mistake it for its fresh
            // acknowledgement and send Flow before the broker registered the
            // replacement consumer.
            if let EventMatcher::ProducerReady(handle) = this.matcher {
                if conn.producer_has_ever_attached(handle) {
                    return Poll::Ready(Ok(()));
                }
            }
            if let EventMatcher::SubscribeAcked(handle, accept_prior_attachment, waiter_id) =
                this.matcher
            {
                let completed = match waiter_id {
                    Some(waiter_id) => {
                        conn.consume_consumer_subscribe_waiter_completion(handle, waiter_id)
                    }
                    None => {
                        accept_prior_attachment
                            && conn.consume_initial_consumer_subscribe_completion(handle)
                    }
                };
                if completed {
                    return Poll::Ready(Ok(()));
                }
            }

            let terminal = match this.matcher {
                EventMatcher::SubscribeAcked(handle, _, _) => {
                    conn.consumer_handle_is_terminal(handle)
                }
                EventMatcher::ProducerReady(_) => conn.is_terminally_closed(),
            };
            if terminal || this.shared.is_no_driver() {
                return Poll::Ready(Err(if this.shared.is_no_driver() {
                    ClientError::PeerClosed
                } else {
                    ClientError::Closed
                }));
            }

            // Success-side: `ProducerSuccess` / `Success` in the sans-io layer push
            // `ProducerReady` / `SubscribeAcked` events. Failure-side: a `CommandError` correlated
            // with the pending producer-open / subscribe pushes the matching
            // `ProducerOpenFailed` / `SubscribeFailed` event. Both paths are observed by the match
            // arms above, so we never need to peek at the request-id-keyed outcome slab here.

            drop(conn);

            if notified.is_pending() {
                return Poll::Pending;
            }
            // An unrelated event pulse completed this notification. Replace
            // it, arm the replacement, and re-check state before parking.
            this.notification = None;
        }
    }
}

impl Drop for EventWaitFut {
    fn drop(&mut self) {
        let EventMatcher::SubscribeAcked(handle, _, Some(waiter_id)) = self.matcher else {
            return;
        };
        let now = std::time::Instant::now();
        let changed = self
            .shared
            .inner
            .lock()
            .abandon_consumer_subscribe_waiter(handle, waiter_id, now);
        if changed {
            self.shared.driver_waker.notify_one();
        }
    }
}

// Keep the unused-imports happy on builds that don't enable the consumer/producer suite.
#[allow(dead_code)]
fn _opoutcome_usage_marker(_o: OpOutcome, _k: PendingOpKey) {}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::BytesMut;
    use magnetar_proto::{CreateProducerRequest, SubscribeRequest, decode_one, encode_command, pb};

    use super::*;

    struct WakeCounter(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for WakeCounter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn handshake_complete_shared() -> Arc<ConnectionShared> {
        handshake_complete_shared_with_config(ConnectionConfig::default())
    }

    fn handshake_complete_supervised_shared() -> Arc<ConnectionShared> {
        handshake_complete_shared_with_config(ConnectionConfig {
            supervisor: Some(magnetar_proto::SupervisorConfig::default()),
            ..ConnectionConfig::default()
        })
    }

    fn handshake_complete_shared_with_config(config: ConnectionConfig) -> Arc<ConnectionShared> {
        let shared = ConnectionShared::new(config);
        let connected = pb::BaseCommand {
            r#type: pb::base_command::Type::Connected as i32,
            connected: Some(pb::CommandConnected {
                server_version: "magnetar-test".to_owned(),
                protocol_version: Some(21),
                max_message_size: Some(5 * 1024 * 1024),
                feature_flags: Some(pb::FeatureFlags::default()),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &connected).expect("encode CommandConnected");
        {
            let mut conn = shared.inner.lock();
            conn.begin_handshake().expect("begin handshake");
            conn.handle_bytes(Instant::now(), &frame)
                .expect("complete handshake");
        }
        shared
    }

    fn inject_broker_error(
        shared: &Arc<ConnectionShared>,
        request_id: u64,
        code: pb::ServerError,
        message: &str,
    ) {
        let error = pb::BaseCommand {
            r#type: pb::base_command::Type::Error as i32,
            error: Some(pb::CommandError {
                request_id,
                error: code as i32,
                message: message.to_owned(),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &error).expect("encode CommandError");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle CommandError");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn event_waiter_registers_before_returning_pending() {
        let shared = ConnectionShared::new(ConnectionConfig::default());
        let mut future = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::ProducerReady(magnetar_proto::ProducerHandle(42)),
            notification: None,
        });
        let counter = Arc::new(WakeCounter(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);

        assert!(future.as_mut().poll(&mut cx).is_pending());
        shared.event_waker.notify_waiters();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);

        let shared = handshake_complete_shared();
        let (first, second, second_request_id) = {
            let mut conn = shared.inner.lock();
            let first = conn.create_producer(CreateProducerRequest {
                topic: "persistent://public/default/first-concurrent-producer".to_owned(),
                ..Default::default()
            });
            let second_request_id = conn.peek_next_request_id_for_test();
            let second = conn.create_producer(CreateProducerRequest {
                topic: "persistent://public/default/second-concurrent-producer".to_owned(),
                ..Default::default()
            });
            (first, second, second_request_id)
        };
        inject_broker_error(
            &shared,
            second_request_id,
            pb::ServerError::AuthorizationError,
            "second producer denied",
        );
        let mut first_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::ProducerReady(first),
            notification: None,
        });
        let mut second_waiter = Box::pin(EventWaitFut {
            shared,
            matcher: EventMatcher::ProducerReady(second),
            notification: None,
        });
        assert!(first_waiter.as_mut().poll(&mut cx).is_pending());
        assert!(matches!(
            second_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Err(ClientError::Broker { code, ref message }))
                if code == pb::ServerError::AuthorizationError as i32
                    && message == "second producer denied"
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn subscribe_waiter_registers_before_returning_pending() {
        let shared = handshake_complete_shared();
        let handle = shared.inner.lock().subscribe(SubscribeRequest {
            topic: "persistent://public/default/pending-waiter-registration".to_owned(),
            subscription: "pending-waiter-registration".to_owned(),
            ..Default::default()
        });
        let mut future = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, true, None),
            notification: None,
        });
        let counter = Arc::new(WakeCounter(std::sync::atomic::AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);

        assert!(future.as_mut().poll(&mut cx).is_pending());
        shared.event_waker.notify_waiters();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);

        let shared = handshake_complete_shared();
        let (first, second, second_request_id) = {
            let mut conn = shared.inner.lock();
            let first = conn.subscribe(SubscribeRequest {
                topic: "persistent://public/default/first-concurrent-consumer".to_owned(),
                subscription: "first-concurrent-consumer".to_owned(),
                ..Default::default()
            });
            let second_request_id = conn.peek_next_request_id_for_test();
            let second = conn.subscribe(SubscribeRequest {
                topic: "persistent://public/default/second-concurrent-consumer".to_owned(),
                subscription: "second-concurrent-consumer".to_owned(),
                ..Default::default()
            });
            (first, second, second_request_id)
        };
        inject_broker_error(
            &shared,
            second_request_id,
            pb::ServerError::AuthorizationError,
            "second consumer denied",
        );
        let mut first_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(first, true, None),
            notification: None,
        });
        let mut second_waiter = Box::pin(EventWaitFut {
            shared,
            matcher: EventMatcher::SubscribeAcked(second, true, None),
            notification: None,
        });
        assert!(first_waiter.as_mut().poll(&mut cx).is_pending());
        assert!(matches!(
            second_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Err(ClientError::Broker { code, ref message }))
                if code == pb::ServerError::AuthorizationError as i32
                    && message == "second consumer denied"
        ));

        let shared = handshake_complete_supervised_shared();
        let (handle, request_id) = {
            let mut conn = shared.inner.lock();
            let request_id = conn.peek_next_request_id_for_test();
            let handle = conn.subscribe(SubscribeRequest {
                topic: "persistent://public/default/subscribe-acked-before-seek".to_owned(),
                subscription: "subscribe-acked-before-seek".to_owned(),
                ..Default::default()
            });
            (handle, request_id)
        };
        let success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &success).expect("encode CommandSuccess");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle CommandSuccess");
        let mut initial_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, true, None),
            notification: None,
        });
        assert!(matches!(
            initial_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let mut reattach_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, false, None),
            notification: None,
        });
        assert!(
            reattach_waiter.as_mut().poll(&mut cx).is_pending(),
            "the initial waiter must consume its ack so a seek cannot reuse the stale event"
        );
        drop(reattach_waiter);

        let (background_request_id, seek_request_id) = {
            let mut conn = shared.inner.lock();
            let background_request_id = conn
                .rebuild_consumers()
                .into_iter()
                .next()
                .expect("background reattach request");
            let seek_request_id = conn
                .resubscribe_consumer_after_seek(handle)
                .expect("seek reattach request");
            (background_request_id, seek_request_id)
        };
        let background_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: background_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &background_success).expect("encode background success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle background success");
        let mut staged = shared.inner.lock().poll_transmit();
        while !staged.is_empty() {
            let frame = decode_one(&mut staged).expect("staged frame must decode");
            assert_ne!(
                frame.command.r#type,
                pb::base_command::Type::Flow as i32,
                "an older background ack must not release seek flow"
            );
        }
        let mut seek_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, false, Some(seek_request_id)),
            notification: None,
        });
        assert!(
            seek_waiter.as_mut().poll(&mut cx).is_pending(),
            "a seek waiter must not consume an unattended background reattach ack"
        );
        let seek_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: seek_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &seek_success).expect("encode seek success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle seek success");
        shared.inner.lock().mark_disconnected();
        assert!(
            seek_waiter.as_mut().poll(&mut cx).is_pending(),
            "a supervised transport failure must not terminate the seek waiter"
        );
        shared.inner.lock().reset();
        assert!(
            seek_waiter.as_mut().poll(&mut cx).is_pending(),
            "a reset must not expose an old-session seek completion"
        );
        shared
            .inner
            .lock()
            .begin_handshake()
            .expect("restart handshake");
        let connected = pb::BaseCommand {
            r#type: pb::base_command::Type::Connected as i32,
            connected: Some(pb::CommandConnected {
                server_version: "magnetar-test".to_owned(),
                protocol_version: Some(21),
                max_message_size: Some(5 * 1024 * 1024),
                feature_flags: Some(pb::FeatureFlags::default()),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &connected).expect("encode reconnect CommandConnected");
        let rebuilt_request_id = {
            let mut conn = shared.inner.lock();
            conn.handle_bytes(Instant::now(), &frame)
                .expect("complete reconnect handshake");
            conn.rebuild_consumers()
                .into_iter()
                .next()
                .expect("rebuilt subscribe request")
        };
        let rebuilt_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: rebuilt_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &rebuilt_success).expect("encode rebuilt success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle rebuilt success");
        let mut staged = shared.inner.lock().poll_transmit();
        while !staged.is_empty() {
            let frame = decode_one(&mut staged).expect("staged frame must decode");
            assert_ne!(
                frame.command.r#type,
                pb::base_command::Type::Flow as i32,
                "reset/rebuild must preserve user-owned seek flow"
            );
        }
        assert!(matches!(
            seek_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Ok(()))
        ));

        let retry_waiter_id = shared
            .inner
            .lock()
            .resubscribe_consumer_after_seek(handle)
            .expect("retry-owned seek subscribe");
        let mut retry_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, false, Some(retry_waiter_id)),
            notification: None,
        });
        inject_broker_error(
            &shared,
            retry_waiter_id.0,
            pb::ServerError::ServiceNotReady,
            "retry seek subscribe",
        );
        assert!(retry_waiter.as_mut().poll(&mut cx).is_pending());
        let retry_request_id = shared
            .inner
            .lock()
            .retry_consumer_subscribe_if_current(handle, retry_waiter_id)
            .expect("replacement subscribe request");
        let retry_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: retry_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &retry_success).expect("encode retry success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle retry success");
        let mut staged = shared.inner.lock().poll_transmit();
        while !staged.is_empty() {
            let frame = decode_one(&mut staged).expect("staged frame must decode");
            assert_ne!(
                frame.command.r#type,
                pb::base_command::Type::Flow as i32,
                "retry replacement must preserve user-owned seek flow"
            );
        }
        assert!(matches!(
            retry_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Ok(()))
        ));

        let cancelled_waiter_id = shared
            .inner
            .lock()
            .resubscribe_consumer_after_seek(handle)
            .expect("cancelled seek subscribe");
        let cancelled_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, false, Some(cancelled_waiter_id)),
            notification: None,
        });
        drop(cancelled_waiter);
        let cancelled_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: cancelled_waiter_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &cancelled_success).expect("encode cancelled success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle cancelled success");
        let mut staged = shared.inner.lock().poll_transmit();
        let mut saw_flow = false;
        while !staged.is_empty() {
            let frame = decode_one(&mut staged).expect("staged frame must decode");
            saw_flow |= frame.command.r#type == pb::base_command::Type::Flow as i32;
        }
        assert!(
            saw_flow,
            "cancelling a seek waiter must transfer its active subscribe to flow ownership"
        );

        let disconnected_waiter_id = shared
            .inner
            .lock()
            .resubscribe_consumer_after_seek(handle)
            .expect("disconnect-cancelled seek subscribe");
        let disconnected_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, false, Some(disconnected_waiter_id)),
            notification: None,
        });
        let disconnected_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: disconnected_waiter_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &disconnected_success)
            .expect("encode disconnect-cancelled success");
        {
            let mut conn = shared.inner.lock();
            conn.handle_bytes(Instant::now(), &frame)
                .expect("handle disconnect-cancelled success");
            conn.mark_disconnected();
            conn.reset();
        }
        drop(disconnected_waiter);
        shared
            .inner
            .lock()
            .begin_handshake()
            .expect("restart handshake after waiter cancellation");
        let connected = pb::BaseCommand {
            r#type: pb::base_command::Type::Connected as i32,
            connected: Some(pb::CommandConnected {
                server_version: "magnetar-test".to_owned(),
                protocol_version: Some(21),
                max_message_size: Some(5 * 1024 * 1024),
                feature_flags: Some(pb::FeatureFlags::default()),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &connected).expect("encode reconnect CommandConnected");
        let rebuilt_request_id = {
            let mut conn = shared.inner.lock();
            conn.handle_bytes(Instant::now(), &frame)
                .expect("complete reconnect after waiter cancellation");
            conn.rebuild_consumers()
                .into_iter()
                .next()
                .expect("rebuilt flow-owned subscribe request")
        };
        let rebuilt_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: rebuilt_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &rebuilt_success).expect("encode flow-owned rebuilt success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle flow-owned rebuilt success");
        let mut staged = shared.inner.lock().poll_transmit();
        let mut saw_flow = false;
        while !staged.is_empty() {
            let frame = decode_one(&mut staged).expect("staged frame must decode");
            saw_flow |= frame.command.r#type == pb::base_command::Type::Flow as i32;
        }
        assert!(
            saw_flow,
            "cancelling during reconnect must transfer the rebuilt subscribe to flow ownership"
        );

        let shared = handshake_complete_shared();
        let (handle, request_id) = {
            let mut conn = shared.inner.lock();
            let request_id = conn.peek_next_request_id_for_test();
            let handle = conn.subscribe(SubscribeRequest {
                topic: "persistent://public/default/subscribe-acked-before-reset".to_owned(),
                subscription: "subscribe-acked-before-reset".to_owned(),
                ..Default::default()
            });
            (handle, request_id)
        };
        let success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &success).expect("encode CommandSuccess");
        {
            let mut conn = shared.inner.lock();
            conn.handle_bytes(Instant::now(), &frame)
                .expect("handle CommandSuccess");
            conn.reset();
        }
        let mut initial_waiter = Box::pin(EventWaitFut {
            shared: shared.clone(),
            matcher: EventMatcher::SubscribeAcked(handle, true, None),
            notification: None,
        });
        assert!(
            initial_waiter.as_mut().poll(&mut cx).is_pending(),
            "a reset must not expose an old-session initial subscribe completion"
        );
        shared
            .inner
            .lock()
            .begin_handshake()
            .expect("restart handshake");
        let connected = pb::BaseCommand {
            r#type: pb::base_command::Type::Connected as i32,
            connected: Some(pb::CommandConnected {
                server_version: "magnetar-test".to_owned(),
                protocol_version: Some(21),
                max_message_size: Some(5 * 1024 * 1024),
                feature_flags: Some(pb::FeatureFlags::default()),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &connected).expect("encode reconnect CommandConnected");
        let rebuilt_request_id = {
            let mut conn = shared.inner.lock();
            conn.handle_bytes(Instant::now(), &frame)
                .expect("complete reconnect handshake");
            conn.rebuild_consumers()
                .into_iter()
                .next()
                .expect("rebuilt subscribe request")
        };
        let rebuilt_success = pb::BaseCommand {
            r#type: pb::base_command::Type::Success as i32,
            success: Some(pb::CommandSuccess {
                request_id: rebuilt_request_id.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &rebuilt_success).expect("encode rebuilt success");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("handle rebuilt success");
        assert!(matches!(
            initial_waiter.as_mut().poll(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let mut reattach_waiter = Box::pin(EventWaitFut {
            shared,
            matcher: EventMatcher::SubscribeAcked(handle, false, None),
            notification: None,
        });
        assert!(
            reattach_waiter.as_mut().poll(&mut cx).is_pending(),
            "a seek/re-subscribe waiter must still require its fresh acknowledgement"
        );
    }

    #[test]
    fn preferred_broker_url_strips_scheme_on_tls_bootstrap() {
        let got = preferred_broker_url(
            Some("pulsar://b-c3-n12:6650".to_owned()),
            Some("pulsar+ssl://b-c3-n12:6651".to_owned()),
            Scheme::Tls,
        );
        assert_eq!(got.as_deref(), Some("b-c3-n12:6651"));
    }

    #[test]
    fn preferred_broker_url_strips_scheme_on_plain_bootstrap() {
        let got = preferred_broker_url(
            Some("pulsar://b-c3-n12:6650".to_owned()),
            Some("pulsar+ssl://b-c3-n12:6651".to_owned()),
            Scheme::Plain,
        );
        assert_eq!(got.as_deref(), Some("b-c3-n12:6650"));
    }

    #[test]
    fn preferred_broker_url_falls_back_when_preferred_missing() {
        // TLS bootstrap, but the broker only advertised the plain URL — fall back to plain.
        let got =
            preferred_broker_url(Some("pulsar://b-c3-n12:6650".to_owned()), None, Scheme::Tls);
        assert_eq!(got.as_deref(), Some("b-c3-n12:6650"));
    }

    #[test]
    fn preferred_broker_url_default_port_when_url_has_none() {
        // Broker advertised a URL without explicit port. Default port from the URL scheme
        // (NOT the bootstrap scheme) — same convention as pulsar-rs.
        let got = preferred_broker_url(Some("pulsar://b-c3-n12".to_owned()), None, Scheme::Plain);
        assert_eq!(got.as_deref(), Some("b-c3-n12:6650"));

        let got = preferred_broker_url(None, Some("pulsar+ssl://b-c3-n12".to_owned()), Scheme::Tls);
        assert_eq!(got.as_deref(), Some("b-c3-n12:6651"));
    }

    #[test]
    fn preferred_broker_url_returns_none_when_no_url_advertised() {
        assert!(preferred_broker_url(None, None, Scheme::Tls).is_none());
        assert!(preferred_broker_url(None, None, Scheme::Plain).is_none());
    }

    #[test]
    fn preferred_broker_url_passes_through_unparseable_input() {
        // Defensive fallback: if the broker advertised a value we can't parse as a
        // Pulsar URL, forward it as-is (with a warning). Better than dropping the
        // lookup result on the floor.
        let got = preferred_broker_url(Some("not a url".to_owned()), None, Scheme::Plain);
        assert_eq!(got.as_deref(), Some("not a url"));
    }

    /// A single-bit corruption of the `pulsar` scheme word, the shape
    /// moonpool-sim's bit-flip chaos actually produced for issue #364.
    const CORRUPTED_SCHEME_BROKER_URL: &str = "ptlsar://broker-sim.proxy.internal:6650";

    /// Regression: a DIRECT-path broker URL whose scheme is corrupted must
    /// FAIL the lookup, not resolve to a fabricated dial target.
    ///
    /// `ParsedUrl::parse` rejects `"ptlsar://…"` with
    /// [`ClientError::UnsupportedScheme`]. Before the fix, that rejection fell
    /// through to the bare-`host:port` fallback, which prefixed a SECOND scheme
    /// onto a string that already carried one
    /// (`"pulsar://ptlsar://broker-sim.proxy.internal:6650"`). `url::Url::parse`
    /// does not reject that: for the non-special `pulsar` scheme the authority
    /// ends at the first `/`, so it read the authority as `"ptlsar:"` — host
    /// `"ptlsar"`, no port digits — and `.port().unwrap_or_else(default_port)`
    /// substituted 6650. The function returned
    /// `Ok(ParsedUrl { host: "ptlsar", port: 6650 })`, a plausible-looking but
    /// entirely fabricated broker the pool would then dial.
    ///
    /// Mirrors `magnetar_runtime_moonpool::client::direct_broker_authority`'s
    /// rejection of the same input.
    #[test]
    fn parse_direct_broker_url_rejects_corrupted_scheme() {
        let err = parse_direct_broker_url(CORRUPTED_SCHEME_BROKER_URL, Scheme::Plain)
            .expect_err("a corrupted scheme must not resolve to a dial target");
        assert!(
            matches!(err, ClientError::Other(_)),
            "expected the scheme rejection, got {err:?}",
        );
    }

    /// The bare-`host:port` fallback is only for input carrying NO scheme at
    /// all — the shape [`preferred_broker_url`] emits. It must keep working:
    /// the fix narrows the fallback, it does not remove it.
    #[test]
    fn parse_direct_broker_url_accepts_bare_host_port() {
        let parsed = parse_direct_broker_url("b-c3-n12:6650", Scheme::Plain)
            .expect("a scheme-less host:port is a legitimate DIRECT-path input");
        assert_eq!(parsed.host, "b-c3-n12");
        assert_eq!(parsed.port, 6650);
        assert_eq!(parsed.scheme, Scheme::Plain);

        // Port omitted entirely -> the synthesised bootstrap scheme supplies it.
        let parsed = parse_direct_broker_url("b-c3-n12", Scheme::Tls)
            .expect("a scheme-less bare host is a legitimate DIRECT-path input");
        assert_eq!(parsed.host, "b-c3-n12");
        assert_eq!(parsed.port, 6651);
        assert_eq!(parsed.scheme, Scheme::Tls);
    }

    /// And the ordinary case a real broker advertises: a well-formed Pulsar
    /// URL parses on the first attempt, never reaching the fallback.
    #[test]
    fn parse_direct_broker_url_accepts_full_pulsar_url() {
        let parsed = parse_direct_broker_url("pulsar://b-c3-n12:6650", Scheme::Tls)
            .expect("a well-formed Pulsar URL must parse");
        assert_eq!(parsed.host, "b-c3-n12");
        assert_eq!(parsed.port, 6650);
        // The URL's own scheme wins over the bootstrap scheme.
        assert_eq!(parsed.scheme, Scheme::Plain);

        let parsed = parse_direct_broker_url("pulsar+ssl://b-c3-n12", Scheme::Plain)
            .expect("a well-formed TLS Pulsar URL must parse");
        assert_eq!(parsed.host, "b-c3-n12");
        assert_eq!(parsed.port, 6651);
        assert_eq!(parsed.scheme, Scheme::Tls);
    }

    /// The Tokio adapter and the canonical authority helper must remain in
    /// lock-step. The wrapper's output is the exact host/port pair carried by
    /// the resulting [`ParsedUrl`].
    #[test]
    fn parse_direct_broker_url_agrees_with_broker_authority() {
        enum Expect {
            Agree(&'static str),
            BothReject,
        }
        use Expect::{Agree, BothReject};

        let cases: &[(&str, Expect)] = &[
            // Recognised schemes, explicit port.
            ("pulsar://b-c3-n12:6650", Agree("b-c3-n12:6650")),
            ("pulsar+ssl://b-c3-n12:6651", Agree("b-c3-n12:6651")),
            ("PULSAR://b-c3-n12:6650", Agree("b-c3-n12:6650")),
            ("PuLsAr+SsL://b-c3-n12:6651", Agree("b-c3-n12:6651")),
            // Default-port synthesis from the URL's OWN scheme.
            ("pulsar://b-c3-n12", Agree("b-c3-n12:6650")),
            ("pulsar+ssl://b-c3-n12", Agree("b-c3-n12:6651")),
            // Explicit port beats the default; trailing path is trimmed.
            ("pulsar://b-c3-n12:7000", Agree("b-c3-n12:7000")),
            ("pulsar://b-c3-n12:6650/extra/path", Agree("b-c3-n12:6650")),
            ("pulsar://b-c3-n12/extra/path", Agree("b-c3-n12:6650")),
            // Scheme-less authorities use the caller-supplied default.
            ("b-c3-n12:6650", Agree("b-c3-n12:6650")),
            ("b-c3-n12", Agree("b-c3-n12:6650")),
            // Bracketed IPv6. The port-less row is the one ADR-0087 moved:
            // this function was ALREADY correct here (`url` parses the
            // brackets), so before the fix it and `probe_authority` genuinely
            // disagreed. Now they agree, which is the point.
            ("pulsar://[::1]:6650", Agree("[::1]:6650")),
            ("pulsar://[::1]", Agree("[::1]:6650")),
            ("pulsar+ssl://[2001:db8::1]", Agree("[2001:db8::1]:6651")),
            ("[::1]:6650", Agree("[::1]:6650")),
            ("[::1]", Agree("[::1]:6650")),
            // Unrecognised schemes: refused by both, never truncated
            // (ADR-0085). `ptlsar` is the single-bit corruption of the scheme
            // word moonpool-sim's chaos produced for issue #364.
            (CORRUPTED_SCHEME_BROKER_URL, BothReject),
            ("http://broker:8080", BothReject),
            ("pulsarx://broker:6650", BothReject),
            // No authority to derive anything from.
            ("", BothReject),
            ("pulsar://", BothReject),
            ("pulsar+ssl://", BothReject),
            ("pulsar://[::1", BothReject),
            ("pulsar://broker:abc", BothReject),
        ];

        for (input, expect) in cases {
            let tokio_authority = parse_direct_broker_url(input, Scheme::Plain)
                .ok()
                .map(|p| format!("{}:{}", p.host, p.port));
            let proto_authority = magnetar_proto::broker_authority(input, Some(6650));
            let observed = (tokio_authority.as_deref(), proto_authority.as_deref());

            match expect {
                Agree(authority) => assert_eq!(
                    observed,
                    (Some(*authority), Some(*authority)),
                    "parse_direct_broker_url and broker_authority must agree on {input:?}",
                ),
                BothReject => {
                    assert_eq!(observed, (None, None), "both parsers must reject {input:?}");
                }
            }
        }
    }

    /// An advertised broker URL with no authority behind it must not resolve to
    /// a dial target. Twin of moonpool's
    /// `proxy_broker_authority_rejects_unusable_authority`, which ADR-0087 had
    /// to *fix* — the moonpool parser had no empty-authority check and returned
    /// `Ok("")` / `Ok(":6650")`. This side was already correct (`url::Url`
    /// supplies the check), so this test pins that rather than changing it.
    #[test]
    fn parse_direct_broker_url_rejects_unusable_authority() {
        for input in ["", "pulsar://", "pulsar+ssl://"] {
            let err = parse_direct_broker_url(input, Scheme::Plain)
                .expect_err("an input with no authority must not resolve to a dial target");
            assert!(
                matches!(err, ClientError::Other(_)),
                "expected the authority rejection for {input:?}, got {err:?}",
            );
        }
    }

    #[test]
    fn parse_direct_broker_url_reports_unusable_authority() {
        for input in ["pulsar://", "pulsar://broker:abc", "pulsar://[::1"] {
            let err = parse_direct_broker_url(input, Scheme::Plain)
                .expect_err("an unusable authority must be rejected");
            assert!(
                err.to_string().contains("not a usable authority"),
                "unexpected rejection for {input:?}: {err}",
            );
        }

        let input = "broker name";
        assert_eq!(
            magnetar_proto::broker_authority(input, Some(6650)).as_deref(),
            Some("broker name:6650"),
            "the canonical sans-I/O helper deliberately leaves DNS-name validation to the adapter",
        );
        let err = parse_direct_broker_url(input, Scheme::Plain)
            .expect_err("Tokio must reject an authority its URL adapter cannot represent");
        assert!(
            err.to_string()
                .contains("could not be represented as a Tokio dial target"),
            "unexpected adapter rejection for {input:?}: {err}",
        );
    }

    /// A port-less bracketed IPv6 literal resolves to the scheme's default port.
    ///
    /// This function was already correct here — `url::Url` understands brackets
    /// — which is precisely why it is worth pinning: until ADR-0087 the other
    /// three parsers derived the port-less `[::1]` from the same input, so this
    /// engine and moonpool disagreed on a real (if rare) deployment shape. The
    /// assertion documents which side was right.
    #[test]
    fn parse_direct_broker_url_handles_portless_bracketed_ipv6() {
        let parsed = parse_direct_broker_url("pulsar://[::1]", Scheme::Plain)
            .expect("a port-less bracketed IPv6 literal must resolve");
        assert_eq!(parsed.host, "[::1]");
        assert_eq!(parsed.port, 6650);

        let parsed = parse_direct_broker_url("pulsar+ssl://[2001:db8::1]", Scheme::Plain)
            .expect("a port-less bracketed IPv6 literal must resolve on the TLS scheme too");
        assert_eq!(parsed.host, "[2001:db8::1]");
        assert_eq!(parsed.port, 6651);

        // An explicit port still wins.
        let parsed = parse_direct_broker_url("pulsar://[::1]:6700", Scheme::Plain)
            .expect("an explicit port must resolve");
        assert_eq!(parsed.host, "[::1]");
        assert_eq!(parsed.port, 6700);
    }

    /// Regression: [`wait_connected`] must already be registered for the
    /// driver's handshake pulse by the time it returns `Poll::Pending`.
    ///
    /// The driver announces handshake completion with `notify_waiters()`,
    /// which — unlike `notify_one()` — stores **no permit**. A waiter that
    /// registers asynchronously (the pre-fix `ConnectedFut` spawned a helper
    /// task to `await` the notification) misses the pulse outright whenever
    /// the helper has not been scheduled yet. A freshly dialled connection is
    /// idle after `CONNECTED`, so nothing ever pulses again: the handshake
    /// wait then parks for the full `operation_timeout`, surfacing at the
    /// caller as `open_producer: timed out: producer target resolution
    /// exceeded operation_timeout`.
    ///
    /// The test reproduces that ordering deterministically — it polls the
    /// future once (parking it), then completes the handshake and pulses
    /// **without yielding to the executor**, so a waiter that had not
    /// registered synchronously cannot have registered at all.
    #[tokio::test(flavor = "current_thread")]
    async fn wait_connected_registers_before_the_driver_pulse_can_race_it() {
        let shared = ConnectionShared::new(ConnectionConfig::default());
        shared
            .inner
            .lock()
            .begin_handshake()
            .expect("begin handshake");

        let counter = Arc::new(WakeCounter(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = Box::pin(wait_connected(shared.clone()));

        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "a pre-handshake connection must park the wait"
        );

        // The driver's inbound arm: feed CONNECTED, then pulse. No `.await`
        // separates the two, so a not-yet-scheduled waiter never registers.
        let connected = pb::BaseCommand {
            r#type: pb::base_command::Type::Connected as i32,
            connected: Some(pb::CommandConnected {
                server_version: "magnetar-test".to_owned(),
                protocol_version: Some(21),
                max_message_size: Some(5 * 1024 * 1024),
                feature_flags: Some(pb::FeatureFlags::default()),
            }),
            ..Default::default()
        };
        let mut frame = BytesMut::new();
        encode_command(&mut frame, &connected).expect("encode CommandConnected");
        shared
            .inner
            .lock()
            .handle_bytes(Instant::now(), &frame)
            .expect("complete handshake");
        shared.event_waker.notify_waiters();
        shared.driver_waker.notify_waiters();

        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            1,
            "the handshake pulse was lost: wait_connected was not registered when the driver \
             fired notify_waiters(), so it would park until operation_timeout"
        );
        assert!(
            matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(()))),
            "the wait must resolve once the handshake completed"
        );
    }
}
