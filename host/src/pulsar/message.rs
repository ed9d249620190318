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

#[cfg(test)]
mod tests {
    use super::*;
    use magnetar::MessageId;
    use magnetar::proto::pb;
    use std::sync::Arc;

    fn received(
        entry_key: Option<(&str, bool)>,
        single_key: Option<(&str, bool)>,
    ) -> IncomingMessage {
        let key = |k: Option<(&str, bool)>| k.map(|(k, _)| k.to_owned());
        let flag = |k: Option<(&str, bool)>| k.map(|(_, b)| b);
        IncomingMessage {
            message_id: MessageId::EARLIEST,
            metadata: Arc::new(pb::MessageMetadata {
                partition_key: key(entry_key),
                partition_key_b64_encoded: flag(entry_key),
                ..Default::default()
            }),
            single_metadata: single_key.map(|k| pb::SingleMessageMetadata {
                partition_key: key(Some(k)),
                partition_key_b64_encoded: flag(Some(k)),
                ..Default::default()
            }),
            payload: bytes::Bytes::new(),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: std::time::Instant::now(),
        }
    }

    #[test]
    fn key_bytes_decode_flagged_keys_alone_and_in_batches() {
        // Alone: the entry's metadata; in a batch: the single message's (Java's `getKeyBytes`).
        let alone = received(Some(("AgICyAE=", true)), None);
        assert_eq!(
            key_bytes(&alone).as_deref(),
            Some(&[2u8, 2, 2, 0xc8, 1][..])
        );
        let batched = received(None, Some(("AP8=", true)));
        assert_eq!(key_bytes(&batched).as_deref(), Some(&[0u8, 0xff][..]));
        assert_eq!(key(&batched), Some("AP8="), "the key as on the wire");
        // A text key is its UTF-8 bytes, flag unset or false.
        let text = received(None, Some(("user-1", false)));
        assert_eq!(key_bytes(&text).as_deref(), Some(&b"user-1"[..]));
        assert_eq!(key_bytes(&received(None, None)), None);
    }
}
