//! Builders for a plugin's own unit tests, run natively with `cargo test` (no wasm, no host).
//!
//! A plugin's logic lives in plain Rust types (the decoder, encoder or router struct); tests build the
//! inputs the host would pass — a [`RowType`](crate::prelude::RowType), a message batch, a key batch —
//! call the `Guest*` trait methods on those types directly, and read the results back as rows. Only the
//! factory functions (`create-decoder`, …) wrap a value in a WIT resource handle, which needs the host:
//! call your constructor (e.g. `MyCodec::new(&options, row_type)`) instead.
//!
//! ```ignore
//! use pulsar_connect_plugin::prelude::*;
//! use pulsar_connect_plugin::testing::{RowTypeBuilder, decoded_rows, message_batch};
//!
//! let row_type = RowTypeBuilder::new().column("id", DataType::Int).string("name").build();
//! let codec = MyCodec::new(&vec![], row_type.clone()).unwrap();
//! let decoded = codec::GuestDecoder::decode_batch(&codec, message_batch(&[b"1,a"])).unwrap();
//! assert_eq!(decoded_rows(&row_type, &decoded), vec![vec![Value::I32(1), Value::from("a")]]);
//! ```

/// The length of STRING (`VARCHAR(2147483647)`) and BYTES.
pub const MAX_LENGTH: u32 = i32::MAX as u32;

macro_rules! key_builders {
    ($types:path) => {
        use $types as types;

        /// Builds a key batch like the host's: `None` is a message without a key.
        pub fn key_batch(keys: &[Option<&[u8]>]) -> types::KeyBatch {
            let mut data = Vec::new();
            let mut offsets = vec![0u32];
            let mut present = vec![0u8; keys.len().div_ceil(8)];
            for (i, key) in keys.iter().enumerate() {
                if let Some(k) = key {
                    data.extend_from_slice(k);
                    present[i / 8] |= 1 << (i % 8);
                }
                offsets.push(data.len() as u32);
            }
            types::KeyBatch {
                count: keys.len() as u32,
                data,
                offsets,
                present: keys.iter().any(Option::is_none).then_some(present),
            }
        }

        /// Builds a property batch like the host's: the (name, value) pairs of each message.
        pub fn property_batch(properties: &[&[(&str, &str)]]) -> types::PropertyBatch {
            let mut batch = types::PropertyBatch {
                message_offsets: vec![0],
                names: Vec::new(),
                name_offsets: vec![0],
                values: Vec::new(),
                value_offsets: vec![0],
            };
            let mut count = 0u32;
            for message in properties {
                for (name, value) in *message {
                    batch.names.extend_from_slice(name.as_bytes());
                    batch.name_offsets.push(batch.names.len() as u32);
                    batch.values.extend_from_slice(value.as_bytes());
                    batch.value_offsets.push(batch.values.len() as u32);
                    count += 1;
                }
                batch.message_offsets.push(count);
            }
            batch
        }
    };
}

/// Test builders for router plugins.
#[cfg(feature = "router")]
pub mod router {
    key_builders!(crate::router::pulsar_connect::plugin::types);
}

#[cfg(feature = "format")]
mod format_builders {
    key_builders!(crate::format::pulsar_connect::plugin::types);
}

#[cfg(feature = "format")]
pub use format::*;

/// Test builders for format plugins (re-exported at [`crate::testing`]).
#[cfg(feature = "format")]
pub mod format {
    pub use super::format_builders::{key_batch, property_batch};
    use crate::columns::{BatchBuilder, read_rows};
    use crate::format::exports::pulsar_connect::plugin::codec::{DecodedBatch, EncodedBatch};
    use crate::format::pulsar_connect::plugin::types::{
        ColumnBatch, DataType, Field, MessageBatch, RowType, TypeNode,
    };
    use crate::values::Value;

    /// Builds a [`RowType`] column by column (top-level columns of scalar types, each nullable unless
    /// added with [`RowTypeBuilder::column_not_null`]). For ARRAY / MAP / ROW columns build the
    /// `RowType` by hand: children are `types` entries after their parent.
    #[derive(Debug, Clone)]
    pub struct RowTypeBuilder {
        row_type: RowType,
    }

    impl Default for RowTypeBuilder {
        fn default() -> Self {
            RowTypeBuilder::new()
        }
    }

    impl RowTypeBuilder {
        /// An empty row type.
        pub fn new() -> RowTypeBuilder {
            RowTypeBuilder {
                row_type: RowType {
                    types: Vec::new(),
                    fields: Vec::new(),
                },
            }
        }

        fn push(mut self, name: &str, data_type: DataType, nullable: bool) -> RowTypeBuilder {
            self.row_type.fields.push(Field {
                name: name.to_owned(),
                type_index: self.row_type.types.len() as u32,
            });
            self.row_type.types.push(TypeNode {
                data_type,
                nullable,
            });
            self
        }

        /// Adds a nullable column.
        pub fn column(self, name: &str, data_type: DataType) -> RowTypeBuilder {
            self.push(name, data_type, true)
        }

        /// Adds a `NOT NULL` column.
        pub fn column_not_null(self, name: &str, data_type: DataType) -> RowTypeBuilder {
            self.push(name, data_type, false)
        }

        /// Adds a nullable `STRING` column.
        pub fn string(self, name: &str) -> RowTypeBuilder {
            self.column(name, DataType::Varchar(super::MAX_LENGTH))
        }

        /// The row type.
        pub fn build(self) -> RowType {
            self.row_type
        }
    }

    /// Builds a message batch like the host's, one message per payload (no keys, properties or event
    /// times; see [`MessageBatchBuilder`] for those).
    pub fn message_batch(payloads: &[&[u8]]) -> MessageBatch {
        let mut b = MessageBatchBuilder::new();
        for p in payloads {
            b = b.message(p);
        }
        b.build()
    }

    /// Builds a message batch with keys, properties and event times.
    #[derive(Debug, Default)]
    pub struct MessageBatchBuilder {
        payloads: Vec<Vec<u8>>,
        keys: Vec<Option<Vec<u8>>>,
        properties: Vec<Vec<(String, String)>>,
        event_times: Vec<i64>,
    }

    impl MessageBatchBuilder {
        /// An empty batch.
        pub fn new() -> MessageBatchBuilder {
            MessageBatchBuilder::default()
        }

        /// Adds a message with a payload only.
        pub fn message(self, payload: &[u8]) -> MessageBatchBuilder {
            self.full_message(payload, None, &[], 0)
        }

        /// Adds a message with a key, properties and an event time (milliseconds since the epoch, 0:
        /// unset).
        pub fn full_message(
            mut self,
            payload: &[u8],
            key: Option<&[u8]>,
            properties: &[(&str, &str)],
            event_time: i64,
        ) -> MessageBatchBuilder {
            self.payloads.push(payload.to_vec());
            self.keys.push(key.map(<[u8]>::to_vec));
            self.properties.push(
                properties
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            self.event_times.push(event_time);
            self
        }

        /// The batch, flattened as the host flattens it.
        pub fn build(self) -> MessageBatch {
            let mut payloads = Vec::new();
            let mut payload_offsets = vec![0u32];
            for p in &self.payloads {
                payloads.extend_from_slice(p);
                payload_offsets.push(payloads.len() as u32);
            }
            let keys: Vec<Option<&[u8]>> = self.keys.iter().map(Option::as_deref).collect();
            let props: Vec<Vec<(&str, &str)>> = self
                .properties
                .iter()
                .map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect())
                .collect();
            let props: Vec<&[(&str, &str)]> = props.iter().map(Vec::as_slice).collect();
            MessageBatch {
                count: self.payloads.len() as u32,
                payloads,
                payload_offsets,
                keys: key_batch(&keys),
                properties: self
                    .properties
                    .iter()
                    .any(|p| !p.is_empty())
                    .then(|| property_batch(&props)),
                event_times: self
                    .event_times
                    .iter()
                    .any(|&t| t != 0)
                    .then_some(self.event_times),
            }
        }
    }

    /// The columns of `rows` (checked against `row_type`), as the host passes them to an encoder.
    ///
    /// # Panics
    ///
    /// When a row does not fit the row type (a test's own mistake).
    pub fn column_batch(row_type: &RowType, rows: &[Vec<Value>]) -> ColumnBatch {
        let mut b = BatchBuilder::new(row_type).expect("a valid row type");
        for (i, row) in rows.iter().enumerate() {
            b.push_row(row)
                .unwrap_or_else(|e| panic!("row {i} does not fit the row type: {e}"));
        }
        b.finish()
    }

    /// The rows of a decoded batch as values.
    ///
    /// # Panics
    ///
    /// When the decoder's columns do not fit the row type (the host would reject them too).
    pub fn decoded_rows(row_type: &RowType, decoded: &DecodedBatch) -> Vec<Vec<Value>> {
        read_rows(row_type, &decoded.rows)
            .unwrap_or_else(|e| panic!("the decoder returned columns the host rejects: {e}"))
    }

    /// The payload of each row of an encoded batch (empty for rows in `errors`).
    pub fn payloads(encoded: &EncodedBatch) -> Vec<Vec<u8>> {
        encoded
            .offsets
            .windows(2)
            .map(|w| encoded.payloads[w[0] as usize..w[1] as usize].to_vec())
            .collect()
    }
}
