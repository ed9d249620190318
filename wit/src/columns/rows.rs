//! Row-at-a-time building: [`BatchBuilder`] checks a row of [`Value`]s against the row type and pushes
//! it into the typed column builder [`Cols`].

use super::{Cols, type_name, validate_row_type};
use crate::format::pulsar_connect::plugin::types::{ColumnBatch, DataType, RowType, TypeNode};
use crate::values::Value;

/// Builds a [`ColumnBatch`] for a row type, one row at a time.
#[derive(Debug)]
pub struct BatchBuilder {
    types: Vec<TypeNode>,
    names: Vec<String>,
    cols: Cols,
}

impl BatchBuilder {
    /// A builder for rows of `row_type` (refused when the row type is malformed).
    pub fn new(row_type: &RowType) -> Result<Self, String> {
        validate_row_type(row_type)?;
        Ok(BatchBuilder {
            types: row_type.types.clone(),
            names: row_type.fields.iter().map(|f| f.name.clone()).collect(),
            cols: Cols::new(row_type),
        })
    }

    /// Rows pushed so far.
    pub fn len(&self) -> u32 {
        self.cols.rows() as u32
    }

    /// Whether no row has been pushed.
    pub fn is_empty(&self) -> bool {
        self.cols.is_empty()
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
            self.check(self.cols.cols[i].ty, value)
                .map_err(|e| format!("field `{}`: {e}", self.names[i]))?;
        }
        for (i, value) in row.iter().enumerate() {
            self.push(i, value);
        }
        self.cols.end_row();
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

    /// Pushes a checked value into column `c` (nested values into its children).
    fn push(&mut self, c: usize, value: &Value) {
        let cols = &mut self.cols;
        match value {
            Value::Null => cols.push_null(c),
            Value::Bool(v) => cols.push_bool(c, *v),
            Value::I8(v) => cols.push_int(c, i64::from(*v)),
            Value::I16(v) => cols.push_int(c, i64::from(*v)),
            Value::I32(v) | Value::Date(v) => cols.push_int(c, i64::from(*v)),
            Value::I64(v) | Value::Time(v) | Value::Timestamp(v) => cols.push_int(c, *v),
            Value::F32(v) => cols.push_f32(c, *v),
            Value::F64(v) => cols.push_f64(c, *v),
            Value::Decimal(v) => cols.push_decimal(c, *v),
            Value::String(s) => cols.push_bytes(c, s.as_bytes()),
            Value::Bytes(b) => cols.push_bytes(c, b),
            Value::Array(items) => {
                let child = cols.list_child(c);
                for item in items {
                    self.push(child, item);
                }
                self.cols.end_list(c);
            }
            Value::Map(entries) => {
                let (keys, values) = cols.map_children(c);
                for (k, v) in entries {
                    self.push(keys, k);
                    self.push(values, v);
                }
                self.cols.end_list(c);
            }
            Value::Row(values) => {
                cols.push_row_valid(c);
                let children = cols.row_children(c).to_vec();
                for (child, v) in children.into_iter().zip(values) {
                    self.push(child, v);
                }
            }
        }
    }

    /// The finished batch.
    pub fn finish(self) -> ColumnBatch {
        self.cols.finish()
    }
}
