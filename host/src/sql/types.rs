//! Flink SQL data types: parsed from DDL tokens, printed back in Flink syntax, mapped to Arrow.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, TimeUnit};

/// A Flink logical type with its nullability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkType {
    pub kind: TypeKind,
    pub nullable: bool,
}

/// The Flink logical type families the runner supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeKind {
    Char(u32),
    Varchar(u32),
    /// `STRING` = `VARCHAR(2147483647)`.
    String,
    Boolean,
    Binary(u32),
    Varbinary(u32),
    /// `BYTES` = `VARBINARY(2147483647)`.
    Bytes,
    Decimal(u8, i8),
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Float,
    Double,
    Date,
    Time(u8),
    Timestamp(u8),
    TimestampLtz(u8),
    Array(Box<FlinkType>),
    Map(Box<FlinkType>, Box<FlinkType>),
    Row(Vec<RowField>),
}

/// A field of a `ROW<...>` type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowField {
    pub name: String,
    pub ty: FlinkType,
    pub description: Option<String>,
}

pub const MAX_LENGTH: u32 = i32::MAX as u32;

impl FlinkType {
    pub fn new(kind: TypeKind) -> Self {
        FlinkType {
            kind,
            nullable: true,
        }
    }

    /// The Arrow type used for this Flink type inside the host.
    pub fn to_arrow(&self) -> DataType {
        match &self.kind {
            TypeKind::Char(_) | TypeKind::Varchar(_) | TypeKind::String => DataType::Utf8,
            TypeKind::Boolean => DataType::Boolean,
            TypeKind::Binary(_) | TypeKind::Varbinary(_) | TypeKind::Bytes => DataType::Binary,
            TypeKind::Decimal(p, s) => DataType::Decimal128(*p, *s),
            TypeKind::TinyInt => DataType::Int8,
            TypeKind::SmallInt => DataType::Int16,
            TypeKind::Int => DataType::Int32,
            TypeKind::BigInt => DataType::Int64,
            TypeKind::Float => DataType::Float32,
            TypeKind::Double => DataType::Float64,
            TypeKind::Date => DataType::Date32,
            TypeKind::Time(p) => match p {
                0..=3 => DataType::Time32(TimeUnit::Millisecond),
                4..=6 => DataType::Time64(TimeUnit::Microsecond),
                _ => DataType::Time64(TimeUnit::Nanosecond),
            },
            TypeKind::Timestamp(p) => DataType::Timestamp(time_unit(*p), None),
            TypeKind::TimestampLtz(p) => DataType::Timestamp(time_unit(*p), Some(Arc::from("UTC"))),
            TypeKind::Array(elem) => {
                DataType::List(Arc::new(Field::new("item", elem.to_arrow(), elem.nullable)))
            }
            TypeKind::Map(k, v) => {
                let entries = Fields::from(vec![
                    Field::new("key", k.to_arrow(), false),
                    Field::new("value", v.to_arrow(), v.nullable),
                ]);
                DataType::Map(
                    Arc::new(Field::new("entries", DataType::Struct(entries), false)),
                    false,
                )
            }
            TypeKind::Row(fields) => DataType::Struct(Fields::from(
                fields
                    .iter()
                    .map(|f| Field::new(&f.name, f.ty.to_arrow(), f.ty.nullable))
                    .collect::<Vec<_>>(),
            )),
        }
    }

    /// An Arrow field with this type.
    pub fn to_field(&self, name: &str) -> Field {
        Field::new(name, self.to_arrow(), self.nullable)
    }
}

fn time_unit(precision: u8) -> TimeUnit {
    match precision {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    }
}

impl fmt::Display for FlinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            TypeKind::Char(n) => write!(f, "CHAR({n})")?,
            TypeKind::Varchar(n) if *n == MAX_LENGTH => write!(f, "STRING")?,
            TypeKind::Varchar(n) => write!(f, "VARCHAR({n})")?,
            TypeKind::String => write!(f, "STRING")?,
            TypeKind::Boolean => write!(f, "BOOLEAN")?,
            TypeKind::Binary(n) => write!(f, "BINARY({n})")?,
            TypeKind::Varbinary(n) if *n == MAX_LENGTH => write!(f, "BYTES")?,
            TypeKind::Varbinary(n) => write!(f, "VARBINARY({n})")?,
            TypeKind::Bytes => write!(f, "BYTES")?,
            TypeKind::Decimal(p, s) => write!(f, "DECIMAL({p}, {s})")?,
            TypeKind::TinyInt => write!(f, "TINYINT")?,
            TypeKind::SmallInt => write!(f, "SMALLINT")?,
            TypeKind::Int => write!(f, "INT")?,
            TypeKind::BigInt => write!(f, "BIGINT")?,
            TypeKind::Float => write!(f, "FLOAT")?,
            TypeKind::Double => write!(f, "DOUBLE")?,
            TypeKind::Date => write!(f, "DATE")?,
            TypeKind::Time(p) => write!(f, "TIME({p})")?,
            TypeKind::Timestamp(p) => write!(f, "TIMESTAMP({p})")?,
            TypeKind::TimestampLtz(p) => write!(f, "TIMESTAMP_LTZ({p})")?,
            TypeKind::Array(e) => write!(f, "ARRAY<{e}>")?,
            TypeKind::Map(k, v) => write!(f, "MAP<{k}, {v}>")?,
            TypeKind::Row(fields) => {
                write!(f, "ROW<")?;
                for (i, fld) in fields.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "`{}` {}", fld.name, fld.ty)?;
                }
                write!(f, ">")?;
            }
        }
        if !self.nullable {
            write!(f, " NOT NULL")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_mapping() {
        assert_eq!(
            FlinkType::new(TypeKind::TimestampLtz(3)).to_arrow(),
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
        );
        assert_eq!(
            FlinkType::new(TypeKind::Decimal(10, 2)).to_arrow(),
            DataType::Decimal128(10, 2)
        );
        let m = FlinkType::new(TypeKind::Map(
            Box::new(FlinkType::new(TypeKind::String)),
            Box::new(FlinkType::new(TypeKind::Int)),
        ));
        assert!(matches!(m.to_arrow(), DataType::Map(_, false)));
        assert_eq!(m.to_string(), "MAP<STRING, INT>");
    }
}
