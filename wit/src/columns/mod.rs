//! Rows ⇄ columns. One column builder, [`Cols`] (typed pushes straight into the columns, what the
//! built-in formats use), with [`BatchBuilder`] on top of it for row-at-a-time code ([`Value`] rows,
//! checked against the row type); [`read_rows`] reads a [`ColumnBatch`] back as rows.
//!
//! Layout of a batch: the top-level fields are columns `0..n`, nested children follow, allocated
//! breadth-first (children after their parent).

mod builder;
mod read;
mod rows;

pub use builder::{Col, Cols, Data};
pub use read::read_rows;
pub use rows::BatchBuilder;

use crate::format::exports::pulsar_connect::plugin::codec::{DecodedBatch, EncodedBatch};
use crate::format::pulsar_connect::plugin::types::{
    ColumnBatch, DataType, MessageBatch, RowError, RowType,
};
use crate::messages::{Message, messages};
use crate::values::Value;

/// Checks that nested types refer to later entries only (so there are no cycles) and that every index
/// is in range.
pub fn validate_row_type(row_type: &RowType) -> Result<(), String> {
    let n = row_type.types.len() as u32;
    for field in &row_type.fields {
        if field.type_index >= n {
            return Err(format!(
                "field `{}` refers to type {} of {}",
                field.name, field.type_index, n
            ));
        }
    }
    for (i, node) in row_type.types.iter().enumerate() {
        let i = i as u32;
        let children: Vec<u32> = match &node.data_type {
            DataType::Array(e) => vec![*e],
            DataType::Map(m) => vec![m.key, m.value],
            DataType::Row(fields) => fields.iter().map(|f| f.type_index).collect(),
            _ => Vec::new(),
        };
        if let Some(bad) = children.iter().find(|&&c| c <= i || c >= n) {
            return Err(format!(
                "type {i} refers to type {bad}: children must come after their parent"
            ));
        }
    }
    Ok(())
}

/// The SQL name of a type, for error messages.
pub fn type_name(t: &DataType) -> String {
    match t {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Tinyint => "TINYINT".into(),
        DataType::Smallint => "SMALLINT".into(),
        DataType::Int => "INT".into(),
        DataType::Bigint => "BIGINT".into(),
        DataType::Float => "FLOAT".into(),
        DataType::Double => "DOUBLE".into(),
        DataType::Decimal(d) => format!("DECIMAL({}, {})", d.precision, d.scale),
        DataType::Char(n) => format!("CHAR({n})"),
        DataType::Varchar(n) => format!("VARCHAR({n})"),
        DataType::Binary(n) => format!("BINARY({n})"),
        DataType::Varbinary(n) => format!("VARBINARY({n})"),
        DataType::Date => "DATE".into(),
        DataType::Time(p) => format!("TIME({p})"),
        DataType::Timestamp(p) => format!("TIMESTAMP({p})"),
        DataType::TimestampLtz(p) => format!("TIMESTAMP_LTZ({p})"),
        DataType::Array(_) => "ARRAY".into(),
        DataType::Map(_) => "MAP".into(),
        DataType::Row(_) => "ROW".into(),
    }
}

/// Decodes a message batch one message at a time: `decode` turns a message into the values of one row,
/// or a reason why it cannot (reported as a row error, the batch goes on).
pub fn decode_rows(
    row_type: &RowType,
    batch: &MessageBatch,
    mut decode: impl FnMut(Message<'_>) -> Result<Vec<Value>, String>,
) -> Result<DecodedBatch, String> {
    let mut builder = BatchBuilder::new(row_type)?;
    let mut errors = Vec::new();
    for message in messages(batch) {
        let index = message.index as u32;
        if let Err(reason) = decode(message).and_then(|row| builder.push_row(&row)) {
            errors.push(RowError { index, reason });
        }
    }
    Ok(DecodedBatch {
        rows: builder.finish(),
        messages: None,
        kinds: None,
        errors,
    })
}

/// Encodes a row batch one row at a time: `encode` turns the values of a row into a payload, or a
/// reason why it cannot (reported as a row error with an empty payload).
pub fn encode_rows(
    row_type: &RowType,
    batch: &ColumnBatch,
    mut encode: impl FnMut(&[Value]) -> Result<Vec<u8>, String>,
) -> Result<EncodedBatch, String> {
    let rows = read_rows(row_type, batch)?;
    let mut payloads = Vec::new();
    let mut offsets = Vec::with_capacity(rows.len() + 1);
    offsets.push(0);
    let mut errors = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        match encode(row) {
            Ok(bytes) => payloads.extend_from_slice(&bytes),
            Err(reason) => errors.push(RowError {
                index: index as u32,
                reason,
            }),
        }
        offsets.push(payloads.len() as u32);
    }
    Ok(EncodedBatch {
        payloads,
        offsets,
        absent: None,
        errors,
    })
}
