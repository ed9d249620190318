//! Read access to a received message's fields, whether it arrived alone or inside a batch.
//!
//! For a batched entry the per-message key, properties, event time and sequence id live in the
//! `SingleMessageMetadata`; the entry's `MessageMetadata` holds the producer's batch-level values.
//! These accessors give what Java's `Message` getters give.

use magnetar::proto::event::IncomingMessage;

/// The message key (`partition_key`), if any.
pub fn key(msg: &IncomingMessage) -> Option<&str> {
    match &msg.single_metadata {
        Some(single) => single.partition_key.as_deref(),
        None => msg.metadata.partition_key.as_deref(),
    }
}

/// The key as bytes: a key the producer set as bytes (`partition_key_b64_encoded`, what Java's
/// `keyBytes(...)` does) is base64-decoded; a string key is its UTF-8 bytes.
pub fn key_bytes(msg: &IncomingMessage) -> Option<std::borrow::Cow<'_, [u8]>> {
    use base64::Engine as _;
    let (key, b64) = match &msg.single_metadata {
        Some(single) => (
            single.partition_key.as_deref(),
            single.partition_key_b64_encoded.unwrap_or(false),
        ),
        None => (
            msg.metadata.partition_key.as_deref(),
            msg.metadata.partition_key_b64_encoded.unwrap_or(false),
        ),
    };
    let key = key?;
    if b64 {
        match base64::engine::general_purpose::STANDARD.decode(key) {
            Ok(bytes) => Some(std::borrow::Cow::Owned(bytes)),
            Err(_) => Some(std::borrow::Cow::Borrowed(key.as_bytes())),
        }
    } else {
        Some(std::borrow::Cow::Borrowed(key.as_bytes()))
    }
}

/// The message properties, in the order the producer set them.
pub fn properties(msg: &IncomingMessage) -> impl Iterator<Item = (&str, &str)> {
    let props = match &msg.single_metadata {
        Some(single) => &single.properties,
        None => &msg.metadata.properties,
    };
    props.iter().map(|kv| (kv.key.as_str(), kv.value.as_str()))
}

/// The producer-set event time in ms since the epoch; `None` when unset (Java returns 0).
pub fn event_time_ms(msg: &IncomingMessage) -> Option<u64> {
    let t = match &msg.single_metadata {
        Some(single) => single.event_time.or(msg.metadata.event_time),
        None => msg.metadata.event_time,
    };
    t.filter(|t| *t > 0)
}

/// The publish time in ms since the epoch (stamped by the producer when the entry was sent).
pub fn publish_time_ms(msg: &IncomingMessage) -> u64 {
    msg.metadata.publish_time
}

/// The sequence id: the single message's own when set, else the entry's plus the batch index (as the
/// Java client computes it for batched messages).
pub fn sequence_id(msg: &IncomingMessage) -> u64 {
    match &msg.single_metadata {
        Some(single) => single.sequence_id.unwrap_or_else(|| {
            msg.metadata.sequence_id + u64::try_from(msg.message_id.batch_index.max(0)).unwrap_or(0)
        }),
        None => msg.metadata.sequence_id,
    }
}

/// Whether the producer sent a null value (Pulsar's `null_value` flag), as opposed to an empty payload.
pub fn is_null_value(msg: &IncomingMessage) -> bool {
    match &msg.single_metadata {
        Some(single) => single.null_value.unwrap_or(false),
        None => msg.metadata.null_value.unwrap_or(false),
    }
}
