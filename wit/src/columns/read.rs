//! Columns → rows: a [`ColumnBatch`] read back as rows of [`Value`]s (encoders, tests).

use super::{type_name, validate_row_type};
use crate::format::pulsar_connect::plugin::types::{
    Column, ColumnBatch, ColumnData, DataType, RowType, TypeNode,
};
use crate::values::Value;

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
