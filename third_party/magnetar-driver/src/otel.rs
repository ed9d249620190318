// SPDX-License-Identifier: Apache-2.0

//! OpenTelemetry context propagation for Pulsar messages.
//!
//! When the `opentelemetry` feature is enabled the current span context is
//! injected into every outgoing message's properties at the **send boundary**
//! (the façade's send methods) — not during the
//! [`From<OutgoingMessage>`](crate::OutgoingMessage) conversion, which stays
//! pure and deterministic (ADR-0053).
//!
//! On the consumer side, call
//! [`extract_context`](crate::otel::extract_context) to recover the parent
//! context from a received message and
//! [`attach`](opentelemetry::Context::attach) it before processing:
//!
//! ```ignore
//! let msg = consumer.receive().await?;
//! let parent_cx = magnetar::otel::extract_context(&msg);
//! let _guard = parent_cx.attach();
//! // spans created here are children of the producer's span
//! ```
//!
//! If no propagator has been installed via
//! [`opentelemetry::global::set_text_map_propagator`], the global no-op
//! propagator runs and inject / extract are silent no-ops.
//!
//! # Reserved property names
//!
//! When this feature is enabled, the property names `traceparent` and
//! `tracestate` (and any other keys written by a composite or baggage
//! propagator) are reserved for propagation.
//! Setting them manually on an [`OutgoingMessage`]
//! will be silently overwritten at send time.
//!
//! # Retry and dead-letter paths
//!
//! `traceparent` / `tracestate` are also re-injected on the retry-letter
//! (`reconsume_later`) and DLQ (`republish_dead_letters`) paths of the tokio
//! [`TypedConsumer`]: when the retrying/republishing
//! consumer has an **active span**, its context replaces the inbound trace on
//! the republished copy, while the original trace stays reachable through the
//! `REAL_TOPIC` / `ORIGINAL_MESSAGE_ID` correlation properties (ADR-0053 §D2).
//! Injection follows standard OTel semantics: with no active span (or no
//! installed propagator) nothing is written, so the inbound trace is left
//! intact — attach the consumer's span before calling these methods (the
//! examples show this), exactly as on the producer send path.
//! The generic [`MultiTopicsConsumer`] retry path is
//! engine-agnostic (it must stay deterministic for the moonpool engine) and does
//! **not** auto-inject; call [`inject_context`](crate::otel::inject_context)
//! into the custom properties yourself there.
//!
//! # Security — treat inbound trace context as untrusted
//!
//! Inbound `traceparent` / `tracestate` are peer-controlled. A hostile or buggy
//! producer can:
//!
//! - **Force-sample** by setting the `sampled` flag, amplifying your ingest cost and polluting
//!   traces. A `ParentBased` sampler does **not** help here — it honours a sampled remote parent
//!   unconditionally (the root delegate only applies when there is no parent). To bound this, do
//!   not attach untrusted inbound context as the sampling parent (extract it into a span *link* or
//!   a fresh root instead), or use a custom `ShouldSample` sampler that ignores / rate-limits
//!   remote-sampled parents, or strip the inbound `sampled` bit at the trust boundary before
//!   [`attach`](opentelemetry::Context::attach)ing.
//! - **Inflate `tracestate`**. The Rust propagator does not enforce the W3C 32-member limit, so
//!   [`extract_context`](crate::otel::extract_context) defensively truncates over-long `tracestate`
//!   (right-most members dropped) before parsing (ADR-0053 §E1).

use magnetar_proto::pb;
use opentelemetry::propagation::{Extractor, Injector};

// ---------------------------------------------------------------------------
// Injector: facade-level properties Vec<(String, String)>
// ---------------------------------------------------------------------------

/// Adapts `&mut Vec<(String, String)>` to the [`opentelemetry::propagation::Injector`] trait
/// so the global propagator can write `traceparent` / `tracestate` into message properties.
///
/// The `set` implementation replaces an existing key (idempotent) rather than
/// appending a duplicate, so double-injection is safe.
struct MessagePropertiesInjector<'a>(&'a mut Vec<(String, String)>);

impl Injector for MessagePropertiesInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_owned(), value));
    }
}

// ---------------------------------------------------------------------------
// Extractor: proto-level properties Vec<pb::KeyValue>
// ---------------------------------------------------------------------------

/// Adapts `&[pb::KeyValue]` to the [`opentelemetry::propagation::Extractor`] trait
/// so the global propagator can read `traceparent` / `tracestate` from received message metadata.
struct MetadataPropertiesExtractor<'a>(&'a [pb::KeyValue]);

impl Extractor for MetadataPropertiesExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| kv.value.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|kv| kv.key.as_str()).collect()
    }
}

// ---------------------------------------------------------------------------
// Inject
// ---------------------------------------------------------------------------

/// Inject the current OpenTelemetry span context into message properties.
///
/// Called at the façade's send boundary (not inside `From<OutgoingMessage>`)
/// so the conversion stays pure and moonpool-sim determinism is preserved
/// (ADR-0053, ADR-0011).
/// No-op when no propagator is installed.
pub fn inject_context(properties: &mut Vec<(String, String)>) {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(
            &opentelemetry::Context::current(),
            &mut MessagePropertiesInjector(properties),
        );
    });
}

// ---------------------------------------------------------------------------
// Extract
// ---------------------------------------------------------------------------

/// W3C Trace Context Level 1 caps `tracestate` at 32 list-members.
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// Defensively cap a peer-controlled `tracestate` value.
///
/// Inbound `tracestate` comes from an untrusted producer, and the Rust
/// `opentelemetry` propagator does not enforce the W3C 32-member limit. To bound
/// the parse work a hostile or buggy peer can force on the consumer, we drop the
/// right-most members (the W3C-mandated truncation order) of any over-long value
/// before it reaches the propagator (ADR-0053 §E1).
///
/// Returns the truncated value, or `None` when the input is already within the
/// cap (the common case — no allocation on the fast path).
///
/// Both the over-cap check and the truncation are bounded: `nth` stops after at
/// most `MAX_TRACESTATE_MEMBERS + 1` members and `take` stops at the cap, so a
/// hostile value is never scanned in full.
fn capped_tracestate(value: &str) -> Option<String> {
    // `nth(MAX)` yields the (MAX + 1)-th member iff the value exceeds the cap,
    // walking at most MAX + 1 members rather than the whole string.
    let over_cap = value.split(',').nth(MAX_TRACESTATE_MEMBERS).is_some();
    if !over_cap {
        return None;
    }
    Some(
        value
            .split(',')
            .take(MAX_TRACESTATE_MEMBERS)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// Extract a parent OpenTelemetry context from message metadata properties.
///
/// This is the low-level helper that operates on a `&[pb::KeyValue]` slice.
/// Prefer the convenience wrappers [`extract_context`] /
/// [`extract_context_facade`] which accept full message types.
///
/// Over-long inbound `tracestate` is truncated to [`MAX_TRACESTATE_MEMBERS`]
/// before extraction (ADR-0053 §E1).
fn extract_from_properties(properties: &[pb::KeyValue]) -> opentelemetry::Context {
    // Fast path: nothing over the cap, extract directly with no copy.
    let needs_cap = properties
        .iter()
        .any(|kv| kv.key == "tracestate" && capped_tracestate(&kv.value).is_some());
    if needs_cap {
        let sanitized: Vec<pb::KeyValue> = properties
            .iter()
            .map(|kv| match (kv.key.as_str(), capped_tracestate(&kv.value)) {
                ("tracestate", Some(value)) => pb::KeyValue {
                    key: kv.key.clone(),
                    value,
                },
                _ => kv.clone(),
            })
            .collect();
        return opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&MetadataPropertiesExtractor(&sanitized))
        });
    }
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&MetadataPropertiesExtractor(properties))
    })
}

/// Extract a parent OpenTelemetry context from a received
/// [`magnetar_proto::event::IncomingMessage`].
///
/// Returns a root (empty) context when the message carries no propagation
/// headers or when no propagator is installed.
///
/// Use this when you need the raw [`opentelemetry::Context`] (e.g. to pass
/// it to a span builder). For the common case of attaching it as the
/// current context for the duration of message processing, prefer
/// [`attach_context`].
pub fn extract_context(msg: &magnetar_proto::event::IncomingMessage) -> opentelemetry::Context {
    extract_from_properties(&msg.metadata.properties)
}

/// Extract a parent OpenTelemetry context from a façade
/// [`IncomingMessage`](crate::IncomingMessage).
///
/// Identical to [`extract_context`] but accepts the façade type returned by
/// `Consumer::receive()`, `Reader::read_next`, and interceptor surfaces.
#[cfg(feature = "tokio")]
pub fn extract_context_facade(msg: &crate::IncomingMessage) -> opentelemetry::Context {
    extract_from_properties(&msg.metadata.properties)
}

/// Extract the parent context from a received
/// [`magnetar_proto::event::IncomingMessage`] and
/// [`attach`](opentelemetry::Context::attach) it as the current context.
///
/// The returned guard resets the context when dropped, so hold it for the
/// entire message-processing scope:
///
/// ```ignore
/// let msg = consumer.receive().await?;
/// let _guard = magnetar::otel::attach_context(&msg);
/// // spans created here are children of the producer's span
/// ```
///
/// No-op (returns immediately) when no propagator is installed.
///
/// # `!Send` caveat
///
/// The returned [`opentelemetry::ContextGuard`] is `!Send`.
/// Do **not** hold it across `.await` points on a multi-threaded runtime —
/// the resulting future would be `!Send` and will not compile.
/// Drop the guard before any `.await`.
pub fn attach_context(msg: &magnetar_proto::event::IncomingMessage) -> opentelemetry::ContextGuard {
    extract_context(msg).attach()
}

/// Façade variant of [`attach_context`] that accepts the façade
/// [`IncomingMessage`](crate::IncomingMessage).
///
/// # `!Send` caveat
///
/// The returned [`opentelemetry::ContextGuard`] is `!Send`.
/// Do **not** hold it across `.await` points on a multi-threaded runtime.
#[cfg(feature = "tokio")]
pub fn attach_context_facade(msg: &crate::IncomingMessage) -> opentelemetry::ContextGuard {
    extract_context_facade(msg).attach()
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };

    use super::*;

    /// Serialises all propagator-mutating tests. The `OTel` global propagator
    /// is a process-wide singleton; concurrent tests can observe each
    /// other's mutations without this lock.
    static PROPAGATOR_MUTEX: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn dummy_incoming(proto_props: Vec<pb::KeyValue>) -> magnetar_proto::event::IncomingMessage {
        let metadata = magnetar_proto::pb::MessageMetadata {
            properties: proto_props,
            ..Default::default()
        };
        magnetar_proto::event::IncomingMessage {
            message_id: magnetar_proto::MessageId {
                ledger_id: 0,
                entry_id: 0,
                partition: -1,
                batch_index: -1,
                batch_size: -1,
                #[cfg(feature = "scalable-topics")]
                segment_id: None,
            },
            metadata: std::sync::Arc::new(metadata),
            single_metadata: None,
            payload: bytes::Bytes::new(),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: std::time::Instant::now(),
        }
    }

    /// Round-trip: inject with the W3C `TraceContext` propagator, then extract.
    /// Verifies that `traceparent` survives the facade → proto property conversion.
    #[test]
    fn inject_extract_round_trip() {
        let _lock = PROPAGATOR_MUTEX
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _guard = PropagatorGuard::install();

        let trace_id = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
        let span_id = SpanId::from_hex("00f067aa0ba902b7").unwrap();
        let span_ctx = SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );

        let otel_ctx = opentelemetry::Context::current().with_remote_span_context(span_ctx.clone());
        let _attached = otel_ctx.attach();

        let mut properties: Vec<(String, String)> = Vec::new();
        inject_context(&mut properties);

        assert!(
            properties.iter().any(|(k, _)| k == "traceparent"),
            "expected traceparent in properties: {properties:?}"
        );

        let proto_props: Vec<pb::KeyValue> = properties
            .into_iter()
            .map(|(k, v)| pb::KeyValue { key: k, value: v })
            .collect();

        let incoming = dummy_incoming(proto_props);
        let extracted_cx = extract_context(&incoming);
        let extracted_sc = extracted_cx.span().span_context().clone();

        assert_eq!(extracted_sc.trace_id(), span_ctx.trace_id());
        assert_eq!(extracted_sc.span_id(), span_ctx.span_id());
        assert!(extracted_sc.trace_flags().is_sampled());
    }

    /// When no propagator is installed (default no-op), inject produces no properties.
    #[test]
    fn no_propagator_is_noop() {
        let _lock = PROPAGATOR_MUTEX
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _guard = PropagatorGuard::install_noop();

        let mut properties: Vec<(String, String)> = Vec::new();
        inject_context(&mut properties);
        assert!(
            properties.is_empty(),
            "no-op propagator should inject nothing"
        );
    }

    /// Injecting twice replaces the key rather than duplicating it.
    #[test]
    fn inject_is_idempotent() {
        let _lock = PROPAGATOR_MUTEX
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _guard = PropagatorGuard::install();

        let span_ctx = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let otel_ctx = opentelemetry::Context::current().with_remote_span_context(span_ctx);
        let _attached = otel_ctx.attach();

        let mut properties: Vec<(String, String)> = Vec::new();
        inject_context(&mut properties);
        inject_context(&mut properties);

        let traceparent_count = properties
            .iter()
            .filter(|(k, _)| k == "traceparent")
            .count();
        assert_eq!(
            traceparent_count, 1,
            "traceparent should appear exactly once"
        );
    }

    /// Extract from a message with no `traceparent` returns a root context.
    #[test]
    fn extract_missing_traceparent_returns_root() {
        let _lock = PROPAGATOR_MUTEX
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _guard = PropagatorGuard::install();

        let incoming = dummy_incoming(vec![]);
        let cx = extract_context(&incoming);
        let sc = cx.span().span_context().clone();
        assert!(!sc.is_valid(), "expected invalid (root) span context");
    }

    /// ADR-0053 §E1 — a peer-controlled `tracestate` over the W3C 32-member cap
    /// is truncated (right-most dropped) before extraction; values within the cap
    /// are left untouched. Pure helper, no global propagator state.
    #[test]
    fn capped_tracestate_truncates_oversized() {
        let within = (0..10)
            .map(|i| format!("k{i}=v{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert!(
            capped_tracestate(&within).is_none(),
            "a tracestate within the cap must not be rewritten"
        );

        let oversized = (0..40)
            .map(|i| format!("k{i}=v{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let capped = capped_tracestate(&oversized).expect("oversized tracestate must be capped");
        assert_eq!(
            capped.split(',').count(),
            MAX_TRACESTATE_MEMBERS,
            "must truncate to exactly the W3C cap"
        );
        assert!(capped.starts_with("k0=v0"), "left-most members are kept");
        assert!(
            capped.ends_with("k31=v31"),
            "right-most members are dropped: {capped}"
        );
        assert!(
            !capped.contains("k32="),
            "members past the cap must be gone: {capped}"
        );
    }

    // --- test helpers ---

    struct PropagatorGuard;

    impl PropagatorGuard {
        fn install() -> Self {
            opentelemetry::global::set_text_map_propagator(
                opentelemetry_sdk::propagation::TraceContextPropagator::new(),
            );
            Self
        }

        fn install_noop() -> Self {
            opentelemetry::global::set_text_map_propagator(
                opentelemetry::trace::noop::NoopTextMapPropagator::new(),
            );
            Self
        }
    }

    impl Drop for PropagatorGuard {
        fn drop(&mut self) {
            opentelemetry::global::set_text_map_propagator(
                opentelemetry::trace::noop::NoopTextMapPropagator::new(),
            );
        }
    }
}
