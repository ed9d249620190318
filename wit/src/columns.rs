//! Rows ⇄ columns: build a [`ColumnBatch`] one row at a time, and read one back as rows.

use crate::format::exports::pulsar_connect::plugin::codec::{DecodedBatch, EncodedBatch};
use crate::format::pulsar_connect::plugin::types::{
    ByteColumn, Column, ColumnBatch, ColumnData, DataType, ListColumn, MapColumn, MessageBatch,
    RowError, RowType, TypeNode,
};
use crate::messages::{Message, messages};
use crate::values::Value;

/// A validity bitmap under construction (LSB first).
#[derive(Debug, Default)]
struct Bitmap {
    bytes: Vec<u8>,
    len: usize,
    unset: usize,
}

impl Bitmap {
    fn push(&mut self, set: bool) {
        if self.len.is_multiple_of(8) {
            self.bytes.push(0);
        }
        if set {
            if let Some(last) = self.bytes.last_mut() {
                *last |= 1 << (self.len % 8);
            }
        } else {
            self.unset += 1;
        }
        self.len += 1;
    }
}

#[derive(Debug)]
enum Data {
    Bits(Bitmap),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Dec(Vec<u64>),
    Bytes {
        data: Vec<u8>,
        offsets: Vec<u32>,
    },
    List {
        offsets: Vec<u32>,
        child: usize,
    },
    Map {
        offsets: Vec<u32>,
        keys: usize,
        values: usize,
    },
    Row(Vec<usize>),
}

#[derive(Debug)]
struct ColBuilder {
    ty: usize,
    validity: Bitmap,
    len: u32,
    data: Data,
}

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

/// Builds a [`ColumnBatch`] for a row type, one row at a time.
#[derive(Debug)]
pub struct BatchBuilder {
    types: Vec<TypeNode>,
    names: Vec<String>,
    cols: Vec<ColBuilder>,
    rows: u32,
}

impl BatchBuilder {
    pub fn new(row_type: &RowType) -> Result<Self, String> {
        validate_row_type(row_type)?;
        let mut builder = BatchBuilder {
            types: row_type.types.clone(),
            names: row_type.fields.iter().map(|f| f.name.clone()).collect(),
            cols: Vec::new(),
            rows: 0,
        };
        for field in &row_type.fields {
            builder.alloc(field.type_index as usize);
        }
        // Children are allocated after every column allocated so far, so they come after their parent.
        let mut i = 0;
        while i < builder.cols.len() {
            let data = match &builder.types[builder.cols[i].ty].data_type {
                DataType::Array(e) => Data::List {
                    offsets: vec![0],
                    child: builder.alloc(*e as usize),
                },
                DataType::Map(m) => {
                    let (k, v) = (m.key as usize, m.value as usize);
                    Data::Map {
                        offsets: vec![0],
                        keys: builder.alloc(k),
                        values: builder.alloc(v),
                    }
                }
                DataType::Row(fields) => {
                    let fields: Vec<usize> = fields.iter().map(|f| f.type_index as usize).collect();
                    Data::Row(fields.into_iter().map(|t| builder.alloc(t)).collect())
                }
                other => leaf_data(other),
            };
            builder.cols[i].data = data;
            i += 1;
        }
        Ok(builder)
    }

    fn alloc(&mut self, ty: usize) -> usize {
        self.cols.push(ColBuilder {
            ty,
            validity: Bitmap::default(),
            len: 0,
            data: Data::Row(Vec::new()),
        });
        self.cols.len() - 1
    }

    /// Rows pushed so far.
    pub fn len(&self) -> u32 {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one row. The row is checked against the row type first, so a rejected row leaves the
    /// batch unchanged.
    pub fn push_row(&mut self, row: &[Value]) -> Result<(), String> {
        if row.len() != self.names.len() {
            return Err(format!(
                "row has {} values, the row type has {} fields",
                row.len(),
                self.names.len()
            ));
        }
        for (i, value) in row.iter().enumerate() {
            self.check(self.cols[i].ty, value)
                .map_err(|e| format!("field `{}`: {e}", self.names[i]))?;
        }
        for (i, value) in row.iter().enumerate() {
            self.push(i, value);
        }
        self.rows += 1;
        Ok(())
    }

    fn check(&self, ty: usize, value: &Value) -> Result<(), String> {
        let node = &self.types[ty];
        let ok = match (&node.data_type, value) {
            (_, Value::Null) => {
                return if node.nullable {
                    Ok(())
                } else {
                    Err("NULL in a NOT NULL column".into())
                };
            }
            (DataType::Boolean, Value::Bool(_))
            | (DataType::Tinyint, Value::I8(_))
            | (DataType::Smallint, Value::I16(_))
            | (DataType::Int, Value::I32(_))
            | (DataType::Bigint, Value::I64(_))
            | (DataType::Float, Value::F32(_))
            | (DataType::Double, Value::F64(_))
            | (DataType::Date, Value::Date(_))
            | (DataType::Timestamp(_) | DataType::TimestampLtz(_), Value::Timestamp(_))
            | (DataType::Char(_) | DataType::Varchar(_), Value::String(_))
            | (DataType::Binary(_) | DataType::Varbinary(_), Value::Bytes(_)) => true,
            (DataType::Decimal(d), Value::Decimal(v)) => {
                let limit = 10i128
                    .checked_pow(u32::from(d.precision))
                    .unwrap_or(i128::MAX);
                if v.unsigned_abs() >= limit.unsigned_abs() {
                    return Err(format!(
                        "{v} does not fit DECIMAL({}, {})",
                        d.precision, d.scale
                    ));
                }
                true
            }
            (DataType::Time(p), Value::Time(v)) => {
                if *p <= 3 && i32::try_from(*v).is_err() {
                    return Err(format!("TIME({p}) value {v} out of range"));
                }
                true
            }
            (DataType::Array(e), Value::Array(items)) => {
                for item in items {
                    self.check(*e as usize, item)?;
                }
                true
            }
            (DataType::Map(m), Value::Map(entries)) => {
                for (k, v) in entries {
                    self.check(m.key as usize, k)?;
                    self.check(m.value as usize, v)?;
                }
                true
            }
            (DataType::Row(fields), Value::Row(values)) => {
                if fields.len() != values.len() {
                    return Err(format!(
                        "ROW with {} fields got {} values",
                        fields.len(),
                        values.len()
                    ));
                }
                for (f, v) in fields.iter().zip(values) {
                    self.check(f.type_index as usize, v)
                        .map_err(|e| format!("`{}`: {e}", f.name))?;
                }
                true
            }
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected {}, got {}",
                type_name(&node.data_type),
                value.kind()
            ))
        }
    }

    fn push(&mut self, col: usize, value: &Value) {
        let null = value.is_null();
        self.cols[col].validity.push(!null);
        self.cols[col].len += 1;
        // Nested values push into child columns; collect what to push first to end the borrow.
        let mut nested: Vec<(usize, &Value)> = Vec::new();
        match (&mut self.cols[col].data, value) {
            (Data::Bits(b), v) => b.push(matches!(v, Value::Bool(true))),
            (Data::I8(d), v) => d.push(if let Value::I8(x) = v { *x } else { 0 }),
            (Data::I16(d), v) => d.push(if let Value::I16(x) = v { *x } else { 0 }),
            (Data::I32(d), v) => d.push(match v {
                Value::I32(x) | Value::Date(x) => *x,
                Value::Time(x) => *x as i32,
                _ => 0,
            }),
            (Data::I64(d), v) => d.push(match v {
                Value::I64(x) | Value::Time(x) | Value::Timestamp(x) => *x,
                _ => 0,
            }),
            (Data::F32(d), v) => d.push(if let Value::F32(x) = v { *x } else { 0.0 }),
            (Data::F64(d), v) => d.push(if let Value::F64(x) = v { *x } else { 0.0 }),
            (Data::Dec(d), v) => {
                let x = if let Value::Decimal(x) = v { *x } else { 0 };
                d.push(x as u64);
                d.push(((x as u128) >> 64) as u64);
            }
            (Data::Bytes { data, offsets }, v) => {
                match v {
                    Value::String(s) => data.extend_from_slice(s.as_bytes()),
                    Value::Bytes(b) => data.extend_from_slice(b),
                    _ => {}
                }
                offsets.push(data.len() as u32);
            }
            (Data::List { offsets, child }, v) => {
                let items: &[Value] = if let Value::Array(items) = v {
                    items
                } else {
                    &[]
                };
                let end = offsets.last().copied().unwrap_or(0) + items.len() as u32;
                offsets.push(end);
                nested.extend(items.iter().map(|item| (*child, item)));
            }
            (
                Data::Map {
                    offsets,
                    keys,
                    values,
                },
                v,
            ) => {
                let entries: &[(Value, Value)] = if let Value::Map(e) = v { e } else { &[] };
                let end = offsets.last().copied().unwrap_or(0) + entries.len() as u32;
                offsets.push(end);
                for (k, val) in entries {
                    nested.push((*keys, k));
                    nested.push((*values, val));
                }
            }
            (Data::Row(children), v) => match v {
                Value::Row(values) => nested.extend(children.iter().copied().zip(values.iter())),
                _ => nested.extend(children.iter().map(|&c| (c, &Value::Null))),
            },
        }
        for (child, v) in nested {
            self.push(child, v);
        }
    }

    /// The finished batch.
    pub fn finish(self) -> ColumnBatch {
        let columns = self
            .cols
            .into_iter()
            .map(|c| Column {
                validity: (c.validity.unset > 0).then_some(c.validity.bytes),
                data: match c.data {
                    Data::Bits(b) => ColumnData::Bits(b.bytes),
                    Data::I8(d) => ColumnData::Int8(d),
                    Data::I16(d) => ColumnData::Int16(d),
                    Data::I32(d) => ColumnData::Int32(d),
                    Data::I64(d) => ColumnData::Int64(d),
                    Data::F32(d) => ColumnData::Float32(d),
                    Data::F64(d) => ColumnData::Float64(d),
                    Data::Dec(d) => ColumnData::Decimal128(d),
                    Data::Bytes { data, offsets } => {
                        ColumnData::Bytes(ByteColumn { data, offsets })
                    }
                    Data::List { offsets, child } => ColumnData::List(ListColumn {
                        offsets,
                        child: child as u32,
                    }),
                    Data::Map {
                        offsets,
                        keys,
                        values,
                    } => ColumnData::Map(MapColumn {
                        offsets,
                        keys: keys as u32,
                        values: values as u32,
                    }),
                    Data::Row(children) => {
                        ColumnData::Row(children.into_iter().map(|c| c as u32).collect())
                    }
                },
            })
            .collect();
        ColumnBatch {
            row_count: self.rows,
            columns,
        }
    }
}

fn leaf_data(t: &DataType) -> Data {
    match t {
        DataType::Boolean => Data::Bits(Bitmap::default()),
        DataType::Tinyint => Data::I8(Vec::new()),
        DataType::Smallint => Data::I16(Vec::new()),
        DataType::Int | DataType::Date => Data::I32(Vec::new()),
        DataType::Time(p) if *p <= 3 => Data::I32(Vec::new()),
        DataType::Bigint
        | DataType::Time(_)
        | DataType::Timestamp(_)
        | DataType::TimestampLtz(_) => Data::I64(Vec::new()),
        DataType::Float => Data::F32(Vec::new()),
        DataType::Double => Data::F64(Vec::new()),
        DataType::Decimal(_) => Data::Dec(Vec::new()),
        DataType::Char(_) | DataType::Varchar(_) | DataType::Binary(_) | DataType::Varbinary(_) => {
            Data::Bytes {
                data: Vec::new(),
                offsets: vec![0],
            }
        }
        // Nested types are set up by `BatchBuilder::new`.
        DataType::Array(_) | DataType::Map(_) | DataType::Row(_) => Data::Row(Vec::new()),
    }
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

/// Reads a [`ColumnBatch`] back as rows of [`Value`]s.
pub fn read_rows(row_type: &RowType, batch: &ColumnBatch) -> Result<Vec<Vec<Value>>, String> {
    validate_row_type(row_type)?;
    let reader = Reader {
        types: &row_type.types,
        cols: &batch.columns,
    };
    (0..batch.row_count as usize)
        .map(|row| {
            row_type
                .fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    reader
                        .value(i, f.type_index as usize, row)
                        .map_err(|e| format!("field `{}`: {e}", f.name))
                })
                .collect()
        })
        .collect()
}

struct Reader<'a> {
    types: &'a [TypeNode],
    cols: &'a [Column],
}

impl Reader<'_> {
    fn value(&self, col: usize, ty: usize, row: usize) -> Result<Value, String> {
        let column = self
            .cols
            .get(col)
            .ok_or_else(|| format!("column {col} is missing"))?;
        if !crate::messages::bit(column.validity.as_deref(), row) {
            return Ok(Value::Null);
        }
        let node = self
            .types
            .get(ty)
            .ok_or_else(|| format!("type {ty} is missing"))?;
        let missing = || format!("column {col} has no value {row}");
        let range = |offsets: &[u32]| -> Result<(usize, usize), String> {
            match (offsets.get(row), offsets.get(row + 1)) {
                (Some(&s), Some(&e)) if s <= e => Ok((s as usize, e as usize)),
                _ => Err(missing()),
            }
        };
        let v = match (&node.data_type, &column.data) {
            (DataType::Boolean, ColumnData::Bits(b)) => b
                .get(row / 8)
                .map(|x| Value::Bool(x & (1 << (row % 8)) != 0))
                .ok_or_else(missing)?,
            (DataType::Tinyint, ColumnData::Int8(d)) => Value::I8(*d.get(row).ok_or_else(missing)?),
            (DataType::Smallint, ColumnData::Int16(d)) => {
                Value::I16(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Int, ColumnData::Int32(d)) => Value::I32(*d.get(row).ok_or_else(missing)?),
            (DataType::Date, ColumnData::Int32(d)) => Value::Date(*d.get(row).ok_or_else(missing)?),
            (DataType::Time(_), ColumnData::Int32(d)) => {
                Value::Time(i64::from(*d.get(row).ok_or_else(missing)?))
            }
            (DataType::Time(_), ColumnData::Int64(d)) => {
                Value::Time(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Bigint, ColumnData::Int64(d)) => {
                Value::I64(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Timestamp(_) | DataType::TimestampLtz(_), ColumnData::Int64(d)) => {
                Value::Timestamp(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Float, ColumnData::Float32(d)) => {
                Value::F32(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Double, ColumnData::Float64(d)) => {
                Value::F64(*d.get(row).ok_or_else(missing)?)
            }
            (DataType::Decimal(_), ColumnData::Decimal128(d)) => {
                let lo = *d.get(2 * row).ok_or_else(missing)?;
                let hi = *d.get(2 * row + 1).ok_or_else(missing)?;
                Value::Decimal((u128::from(hi) << 64 | u128::from(lo)) as i128)
            }
            (DataType::Char(_) | DataType::Varchar(_), ColumnData::Bytes(b)) => {
                let (s, e) = range(&b.offsets)?;
                let bytes = b.data.get(s..e).ok_or_else(missing)?;
                Value::String(
                    String::from_utf8(bytes.to_vec()).map_err(|e| format!("invalid UTF-8: {e}"))?,
                )
            }
            (DataType::Binary(_) | DataType::Varbinary(_), ColumnData::Bytes(b)) => {
                let (s, e) = range(&b.offsets)?;
                Value::Bytes(b.data.get(s..e).ok_or_else(missing)?.to_vec())
            }
            (DataType::Array(e), ColumnData::List(l)) => {
                let (s, end) = range(&l.offsets)?;
                let items = (s..end).map(|i| self.value(l.child as usize, *e as usize, i));
                Value::Array(items.collect::<Result<_, _>>()?)
            }
            (DataType::Map(m), ColumnData::Map(c)) => {
                let (s, end) = range(&c.offsets)?;
                let entries = (s..end).map(|i| {
                    Ok((
                        self.value(c.keys as usize, m.key as usize, i)?,
                        self.value(c.values as usize, m.value as usize, i)?,
                    ))
                });
                Value::Map(entries.collect::<Result<_, String>>()?)
            }
            (DataType::Row(fields), ColumnData::Row(children)) => {
                if fields.len() != children.len() {
                    return Err(format!(
                        "ROW column {col} has {} children for {} fields",
                        children.len(),
                        fields.len()
                    ));
                }
                let values = fields
                    .iter()
                    .zip(children)
                    .map(|(f, &c)| self.value(c as usize, f.type_index as usize, row));
                Value::Row(values.collect::<Result<_, _>>()?)
            }
            (t, _) => {
                return Err(format!(
                    "column {col} does not hold {} values",
                    type_name(t)
                ));
            }
        };
        Ok(v)
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
        errors,
    })
}
