//! The host's own plugin data model: what the facades ([`format`](super::format),
//! [`router`](super::router)), the Arrow conversions and the connectors work with, whatever WIT version
//! a plugin implements. Each `bindings::v*` module converts between its generated types and these; a
//! new WIT version adds such a module and leaves this one (and everything built on it) alone.
//!
//! The shapes follow the columnar contract (nested types and columns refer to other entries by index,
//! the way Arrow lays out nested arrays), with host-side meaning where the WIT carries a convention:
//! [`RowError::skip`] is the flag the bindings derive from a guest's `skipped: ` reason.

/// A Flink SQL logical type. Nested types refer to other entries of the same [`RowType::types`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataType {
    Boolean,
    Tinyint,
    Smallint,
    Int,
    Bigint,
    Float,
    Double,
    /// DECIMAL(p, s), 1 <= p <= 38, 0 <= s <= p.
    Decimal(DecimalType),
    /// CHAR(n).
    Char(u32),
    /// VARCHAR(n); STRING is VARCHAR(2147483647).
    Varchar(u32),
    /// BINARY(n).
    Binary(u32),
    /// VARBINARY(n); BYTES is VARBINARY(2147483647).
    Varbinary(u32),
    /// Days since 1970-01-01.
    Date,
    /// TIME(p), 0 <= p <= 9.
    Time(u8),
    /// TIMESTAMP(p) WITHOUT TIME ZONE, 0 <= p <= 9.
    Timestamp(u8),
    /// TIMESTAMP_LTZ(p): an instant, 0 <= p <= 9.
    TimestampLtz(u8),
    /// ARRAY<T>: index of the element type.
    Array(u32),
    /// MAP<K, V>: indexes of the key and value types.
    Map(MapType),
    /// ROW<...>: the fields, each naming the index of its type.
    Row(Vec<Field>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecimalType {
    pub precision: u8,
    pub scale: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapType {
    pub key: u32,
    pub value: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Index into [`RowType::types`].
    pub type_index: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeNode {
    pub data_type: DataType,
    pub nullable: bool,
}

/// A table schema: `fields` are the top-level columns; a nested type's children come after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowType {
    pub types: Vec<TypeNode>,
    pub fields: Vec<Field>,
}

/// The physical values of one column (see the WIT's `column-data` for the type ⇄ variant table).
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData {
    /// LSB-first bitmap, like Arrow.
    Bits(Vec<u8>),
    Int8(Vec<i8>),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Float32(Vec<f32>),
    Float64(Vec<f64>),
    /// Two words per value, low word first, two's complement unscaled value.
    Decimal128(Vec<u64>),
    Bytes(ByteColumn),
    List(ListColumn),
    Map(MapColumn),
    /// The child column of each field.
    Row(Vec<u32>),
}

/// Variable-length values: value i is `data[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteColumn {
    pub data: Vec<u8>,
    pub offsets: Vec<u32>,
}

/// ARRAY values: value i holds the child rows `offsets[i]..offsets[i + 1]` of column `child`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListColumn {
    pub offsets: Vec<u32>,
    pub child: u32,
}

/// MAP values: value i holds the entries `offsets[i]..offsets[i + 1]` of the columns `keys` and `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapColumn {
    pub offsets: Vec<u32>,
    pub keys: u32,
    pub values: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Validity bitmap (LSB first, bit set = value present); `None`: no value is null.
    pub validity: Option<Vec<u8>>,
    pub data: ColumnData,
}

/// Rows in columnar form: `columns[0..n]` are the top-level fields, children follow their parents.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnBatch {
    pub row_count: u32,
    pub columns: Vec<Column>,
}

/// Message properties, flattened: message i owns the pairs `message_offsets[i]..message_offsets[i + 1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyBatch {
    pub message_offsets: Vec<u32>,
    pub names: Vec<u8>,
    pub name_offsets: Vec<u32>,
    pub values: Vec<u8>,
    pub value_offsets: Vec<u32>,
}

/// Message keys: key i is `data[offsets[i]..offsets[i + 1]]`; `present` is a bitmap of the messages
/// that have a key (`None`: all do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBatch {
    pub count: u32,
    pub data: Vec<u8>,
    pub offsets: Vec<u32>,
    pub present: Option<Vec<u8>>,
}

/// A batch of messages: payload i is `payloads[payload_offsets[i]..payload_offsets[i + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageBatch {
    pub count: u32,
    pub payloads: Vec<u8>,
    pub payload_offsets: Vec<u32>,
    pub keys: KeyBatch,
    pub properties: Option<PropertyBatch>,
    /// Event time in ms since the epoch per message, 0 when unset; `None` when no message has one.
    pub event_times: Option<Vec<i64>>,
}

/// A message (or row) the plugin could not handle; the rest of the batch is fine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    /// The message (decoding) or row (encoding) index in its batch.
    pub index: u32,
    /// Why, as the plugin said it (without the skip marker).
    pub reason: String,
    /// The format dropped the message itself, as Flink's format returns no row for it (an empty JSON
    /// payload, a bad record under `ignore-parse-errors`): the connector counts it as skipped rather
    /// than failing the job.
    pub skip: bool,
}

/// A configuration a plugin's factory refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The plugin's name of the offending option, when there is one.
    pub option: Option<String>,
    pub message: String,
}

/// Flink's row kind of a changelog row (ADR 0016); the SQL layer's type, shared by the whole host.
pub use crate::sql::RowKind;

/// What a decoder returned for a message batch.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedBatch {
    pub rows: ColumnBatch,
    /// The message of each row, ascending (WIT 0.2.0 on). `None`: one row per message not in `errors`.
    pub messages: Option<Vec<u32>>,
    /// The row kind of each row (WIT 0.2.0 on). `None`: every row is an insert.
    pub kinds: Option<Vec<RowKind>>,
    pub errors: Vec<RowError>,
}

/// What an encoder returned for a row batch: payload i is `payloads[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedBatch {
    pub payloads: Vec<u8>,
    pub offsets: Vec<u32>,
    /// A bitmap (LSB first) of the rows without a payload: tombstones (WIT 0.2.0 on). `None`: every row has one.
    pub absent: Option<Vec<u8>>,
    pub errors: Vec<RowError>,
}

/// The level of a line a plugin logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}
