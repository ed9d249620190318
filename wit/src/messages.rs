//! Row-at-a-time access to the flattened message and key batches.

/// Bytes `i` of a flattened `data` + `offsets` pair; empty when the offsets are out of range.
pub fn slice_at<'a>(data: &'a [u8], offsets: &[u32], i: usize) -> &'a [u8] {
    let (Some(&start), Some(&end)) = (offsets.get(i), offsets.get(i + 1)) else {
        return &[];
    };
    data.get(start as usize..end as usize).unwrap_or(&[])
}

/// Whether bit `i` of an LSB-first bitmap is set; `None` means all bits are set.
pub fn bit(bitmap: Option<&[u8]>, i: usize) -> bool {
    match bitmap {
        None => true,
        Some(bits) => bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0),
    }
}

macro_rules! key_iter {
    ($types:path) => {
        use $types as types;

        /// The keys of a batch, `None` for a message without a key.
        pub fn keys(keys: &types::KeyBatch) -> impl Iterator<Item = Option<&[u8]>> + '_ {
            (0..keys.count as usize).map(move |i| {
                $crate::messages::bit(keys.present.as_deref(), i)
                    .then(|| $crate::messages::slice_at(&keys.data, &keys.offsets, i))
            })
        }

        /// The properties of message `i` as (name, value) pairs (invalid UTF-8 is skipped).
        pub fn properties(props: &types::PropertyBatch, i: usize) -> Vec<(&str, &str)> {
            let (Some(&start), Some(&end)) = (
                props.message_offsets.get(i),
                props.message_offsets.get(i + 1),
            ) else {
                return Vec::new();
            };
            (start as usize..end as usize)
                .filter_map(|j| {
                    let name = std::str::from_utf8($crate::messages::slice_at(
                        &props.names,
                        &props.name_offsets,
                        j,
                    ))
                    .ok()?;
                    let value = std::str::from_utf8($crate::messages::slice_at(
                        &props.values,
                        &props.value_offsets,
                        j,
                    ))
                    .ok()?;
                    Some((name, value))
                })
                .collect()
        }
    };
}

#[cfg(feature = "router")]
/// Key and property batches of the `router` world.
pub mod router_keys {
    key_iter!(crate::router::pulsar_connect::plugin::types);
}
#[cfg(feature = "router")]
pub use router_keys::keys;
#[cfg(feature = "router")]
pub use router_keys::properties as router_properties;

/// Message batches of the `format` world.
#[cfg(feature = "format")]
pub mod format_messages {
    key_iter!(crate::format::pulsar_connect::plugin::types);

    /// One message of a batch.
    #[derive(Debug, Clone, Copy)]
    pub struct Message<'a> {
        /// The message's index in its batch (row errors name it).
        pub index: usize,
        /// The payload (empty for an empty or null payload).
        pub payload: &'a [u8],
        /// The key, `None` for a message without one.
        pub key: Option<&'a [u8]>,
        /// Event time in milliseconds since the epoch, if the producer set one.
        pub event_time: Option<i64>,
        batch: &'a types::MessageBatch,
    }

    impl<'a> Message<'a> {
        /// The message's properties as (name, value) pairs.
        pub fn properties(&self) -> Vec<(&'a str, &'a str)> {
            self.batch
                .properties
                .as_ref()
                .map(|p| properties(p, self.index))
                .unwrap_or_default()
        }

        /// The payload as UTF-8 text.
        pub fn text(&self) -> Result<&'a str, String> {
            std::str::from_utf8(self.payload).map_err(|e| format!("payload is not UTF-8: {e}"))
        }
    }

    /// The messages of a batch, in order.
    pub fn messages(batch: &types::MessageBatch) -> impl Iterator<Item = Message<'_>> {
        (0..batch.count as usize).map(move |index| Message {
            index,
            payload: super::slice_at(&batch.payloads, &batch.payload_offsets, index),
            key: super::bit(batch.keys.present.as_deref(), index)
                .then(|| super::slice_at(&batch.keys.data, &batch.keys.offsets, index)),
            event_time: batch
                .event_times
                .as_ref()
                .and_then(|t| t.get(index).copied())
                .filter(|&t| t != 0),
            batch,
        })
    }
}
#[cfg(feature = "format")]
pub use format_messages::{Message, messages};
