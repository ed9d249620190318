//! Arrow schemas ⇄ the WIT `row-type`.
//!
//! Arrow has no CHAR(n)/VARCHAR(n) length and rounds TIME/TIMESTAMP precisions to a unit, so a field
//! may carry the exact SQL type in its metadata under [`SQL_TYPE_KEY`] (e.g. `VARCHAR(10)`,
//! `TIMESTAMP(2)`); without it the widest type for the Arrow type is used.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};

use super::model;
use crate::sql::{FlinkType, TypeKind};

/// Field metadata key holding the exact SQL type of a CHAR/VARCHAR/BINARY/VARBINARY/TIME/TIMESTAMP field.
pub const SQL_TYPE_KEY: &str = "pulsar-connect.sql-type";
/// Length of STRING / BYTES.
pub const MAX_LENGTH: u32 = i32::MAX as u32;

/// An Arrow field for a format plugin: the exact SQL type of top-level CHAR/VARCHAR/BINARY/TIME/TIMESTAMP
/// columns goes along as field metadata (Arrow itself rounds precisions to a unit).
pub fn plugin_field(name: &str, ty: &FlinkType) -> Field {
    let field = ty.to_field(name);
    let exact = match &ty.kind {
        TypeKind::Char(_)
        | TypeKind::Binary(_)
        | TypeKind::Time(_)
        | TypeKind::Timestamp(_)
        | TypeKind::TimestampLtz(_) => true,
        TypeKind::Varchar(n) | TypeKind::Varbinary(n) => *n != crate::sql::types::MAX_LENGTH,
        _ => false,
    };
    if exact {
        let text = FlinkType {
            kind: ty.kind.clone(),
            nullable: true,
        }
        .to_string();
        field.with_metadata(HashMap::from([(SQL_TYPE_KEY.to_owned(), text)]))
    } else {
        field
    }
}

/// The time unit of a precision (0 seconds, 1..3 millis, 4..6 micros, 7..9 nanos).
pub fn time_unit(precision: u8) -> TimeUnit {
    match precision {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

fn unit_precision(unit: TimeUnit) -> u8 {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

/// Converts an Arrow schema to a WIT row type.
pub fn row_type_from_arrow(schema: &Schema) -> anyhow::Result<model::RowType> {
    let mut types = Vec::new();
    // Reserve the top-level type slots first, then fill them; children are appended after their parent.
    let mut fields = Vec::new();
    for field in schema.fields() {
        let index =
            push_type(&mut types, field).with_context(|| format!("field `{}`", field.name()))?;
        fields.push(model::Field {
            name: field.name().clone(),
            type_index: index,
        });
    }
    Ok(model::RowType { types, fields })
}

fn sql_type_param(field: &Field, expected: &[&str]) -> anyhow::Result<Option<(String, u32)>> {
    let Some(text) = field.metadata().get(SQL_TYPE_KEY) else {
        return Ok(None);
    };
    let (name, rest) = text
        .split_once('(')
        .ok_or_else(|| anyhow!("bad {SQL_TYPE_KEY} `{text}`"))?;
    let name = name.trim().to_ascii_uppercase();
    if !expected.contains(&name.as_str()) {
        bail!(
            "{SQL_TYPE_KEY} `{text}` does not fit Arrow type {}",
            field.data_type()
        );
    }
    let param = rest
        .trim_end_matches(')')
        .trim()
        .parse::<u32>()
        .map_err(|_| anyhow!("bad {SQL_TYPE_KEY} `{text}`"))?;
    Ok(Some((name, param)))
}

fn push_type(types: &mut Vec<model::TypeNode>, field: &Field) -> anyhow::Result<u32> {
    let index = types.len() as u32;
    types.push(model::TypeNode {
        data_type: model::DataType::Boolean,
        nullable: field.is_nullable(),
    });
    let data_type = match field.data_type() {
        DataType::Boolean => model::DataType::Boolean,
        DataType::Int8 => model::DataType::Tinyint,
        DataType::Int16 => model::DataType::Smallint,
        DataType::Int32 => model::DataType::Int,
        DataType::Int64 => model::DataType::Bigint,
        DataType::Float32 => model::DataType::Float,
        DataType::Float64 => model::DataType::Double,
        DataType::Decimal128(p, s) => {
            if *s < 0 || *s as u8 > *p {
                bail!("DECIMAL({p}, {s}) has a scale outside 0..=precision");
            }
            model::DataType::Decimal(model::DecimalType {
                precision: *p,
                scale: *s as u8,
            })
        }
        DataType::Utf8 => match sql_type_param(field, &["CHAR", "VARCHAR"])? {
            Some((name, n)) if name == "CHAR" => model::DataType::Char(n),
            Some((_, n)) => model::DataType::Varchar(n),
            None => model::DataType::Varchar(MAX_LENGTH),
        },
        DataType::Binary => match sql_type_param(field, &["BINARY", "VARBINARY"])? {
            Some((name, n)) if name == "BINARY" => model::DataType::Binary(n),
            Some((_, n)) => model::DataType::Varbinary(n),
            None => model::DataType::Varbinary(MAX_LENGTH),
        },
        DataType::Date32 => model::DataType::Date,
        DataType::Time32(unit) | DataType::Time64(unit) => {
            let precision = precision_in_unit(field, *unit, &["TIME"])?;
            let expected32 = precision <= 3;
            if expected32 != matches!(field.data_type(), DataType::Time32(_)) {
                bail!("TIME({precision}) must be Time32 for precision <= 3 and Time64 above");
            }
            model::DataType::Time(precision)
        }
        DataType::Timestamp(unit, tz) => {
            let precision = precision_in_unit(field, *unit, &["TIMESTAMP", "TIMESTAMP_LTZ"])?;
            if tz.is_some() {
                model::DataType::TimestampLtz(precision)
            } else {
                model::DataType::Timestamp(precision)
            }
        }
        DataType::List(item) => model::DataType::Array(push_type(types, item)?),
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                bail!("MAP entries must be a struct")
            };
            let [k, v] = kv.iter().collect::<Vec<_>>()[..] else {
                bail!("MAP entries must have 2 fields")
            };
            let key = push_type(types, k)?;
            let value = push_type(types, v)?;
            model::DataType::Map(model::MapType { key, value })
        }
        DataType::Struct(children) => {
            let mut fields = Vec::new();
            for child in children {
                fields.push(model::Field {
                    name: child.name().clone(),
                    type_index: push_type(types, child)?,
                });
            }
            model::DataType::Row(fields)
        }
        other => bail!("Arrow type {other} has no Flink SQL equivalent here"),
    };
    types[index as usize].data_type = data_type;
    Ok(index)
}

fn precision_in_unit(field: &Field, unit: TimeUnit, names: &[&str]) -> anyhow::Result<u8> {
    let precision = match sql_type_param(field, names)? {
        Some((_, p)) => u8::try_from(p)
            .ok()
            .filter(|p| *p <= 9)
            .ok_or_else(|| anyhow!("precision {p} > 9"))?,
        None => unit_precision(unit),
    };
    if time_unit(precision) != unit {
        bail!("precision {precision} does not match Arrow unit {unit:?}");
    }
    Ok(precision)
}

/// Converts a WIT row type to an Arrow schema (field metadata keeps the exact SQL types).
pub fn arrow_schema(row_type: &model::RowType) -> anyhow::Result<Schema> {
    check_row_type(row_type)?;
    let fields = row_type
        .fields
        .iter()
        .map(|f| arrow_field(row_type, &f.name, f.type_index))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Schema::new(fields))
}

/// Nested types must refer to later entries only (no cycles) and indexes must be in range.
pub fn check_row_type(row_type: &model::RowType) -> anyhow::Result<()> {
    let n = row_type.types.len() as u32;
    if let Some(f) = row_type.fields.iter().find(|f| f.type_index >= n) {
        bail!("field `{}` refers to type {} of {n}", f.name, f.type_index);
    }
    for (i, node) in row_type.types.iter().enumerate() {
        let children: Vec<u32> = match &node.data_type {
            model::DataType::Array(e) => vec![*e],
            model::DataType::Map(m) => vec![m.key, m.value],
            model::DataType::Row(fields) => fields.iter().map(|f| f.type_index).collect(),
            _ => Vec::new(),
        };
        if let Some(c) = children.iter().find(|&&c| c <= i as u32 || c >= n) {
            bail!("type {i} refers to type {c}: children must come after their parent");
        }
    }
    Ok(())
}

fn arrow_field(row_type: &model::RowType, name: &str, index: u32) -> anyhow::Result<Field> {
    let node = &row_type.types[index as usize];
    let mut sql_type = None;
    let data_type = match &node.data_type {
        model::DataType::Boolean => DataType::Boolean,
        model::DataType::Tinyint => DataType::Int8,
        model::DataType::Smallint => DataType::Int16,
        model::DataType::Int => DataType::Int32,
        model::DataType::Bigint => DataType::Int64,
        model::DataType::Float => DataType::Float32,
        model::DataType::Double => DataType::Float64,
        model::DataType::Decimal(d) => {
            if d.precision == 0 || d.precision > 38 || d.scale > d.precision {
                bail!("DECIMAL({}, {}) is out of range", d.precision, d.scale);
            }
            DataType::Decimal128(d.precision, d.scale as i8)
        }
        model::DataType::Char(n) => {
            sql_type = Some(format!("CHAR({n})"));
            DataType::Utf8
        }
        model::DataType::Varchar(n) => {
            sql_type = (*n != MAX_LENGTH).then(|| format!("VARCHAR({n})"));
            DataType::Utf8
        }
        model::DataType::Binary(n) => {
            sql_type = Some(format!("BINARY({n})"));
            DataType::Binary
        }
        model::DataType::Varbinary(n) => {
            sql_type = (*n != MAX_LENGTH).then(|| format!("VARBINARY({n})"));
            DataType::Binary
        }
        model::DataType::Date => DataType::Date32,
        model::DataType::Time(p) => {
            check_precision(*p)?;
            sql_type = (unit_precision(time_unit(*p)) != *p).then(|| format!("TIME({p})"));
            if *p <= 3 {
                DataType::Time32(time_unit(*p))
            } else {
                DataType::Time64(time_unit(*p))
            }
        }
        model::DataType::Timestamp(p) => {
            check_precision(*p)?;
            sql_type = (unit_precision(time_unit(*p)) != *p).then(|| format!("TIMESTAMP({p})"));
            DataType::Timestamp(time_unit(*p), None)
        }
        model::DataType::TimestampLtz(p) => {
            check_precision(*p)?;
            sql_type = (unit_precision(time_unit(*p)) != *p).then(|| format!("TIMESTAMP_LTZ({p})"));
            DataType::Timestamp(time_unit(*p), Some(Arc::from("UTC")))
        }
        model::DataType::Array(e) => DataType::List(Arc::new(arrow_field(row_type, "item", *e)?)),
        model::DataType::Map(m) => {
            let key = arrow_field(row_type, "key", m.key)?;
            if key.is_nullable() {
                bail!("MAP keys must be NOT NULL in Arrow");
            }
            let value = arrow_field(row_type, "value", m.value)?;
            let entries = Field::new(
                "entries",
                DataType::Struct(Fields::from(vec![key, value])),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
        model::DataType::Row(fields) => DataType::Struct(Fields::from(
            fields
                .iter()
                .map(|f| arrow_field(row_type, &f.name, f.type_index))
                .collect::<anyhow::Result<Vec<_>>>()?,
        )),
    };
    let field = Field::new(name, data_type, node.nullable);
    Ok(match sql_type {
        Some(t) => field.with_metadata(HashMap::from([(SQL_TYPE_KEY.to_owned(), t)])),
        None => field,
    })
}

fn check_precision(p: u8) -> anyhow::Result<()> {
    if p > 9 {
        bail!("precision {p} is out of range 0..=9");
    }
    Ok(())
}
