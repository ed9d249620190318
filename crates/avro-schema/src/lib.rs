//! The Avro schema Flink 1.18's `AvroSchemaConverter.convertToSchema(rowType)` derives from a row type:
//! the writer schema of the `avro` format (the guest in `guest-formats/avro`) and the schema the host's
//! Pulsar sink registers for a topic written with `avro` or `json` values. One derivation for both, so
//! the schema a topic is registered with is the one its payloads are written in.
//!
//! Both sides hold the same columnar row model (a list of type nodes, nested types referring to other
//! entries by index) in two sets of types: the host's plugin model and the guest SDK's WIT bindings.
//! [`row_type_view!`] maps either onto [`RowTypeView`], written once here; [`schema_json`] derives the
//! schema from that view. No dependencies: it builds for the host and for `wasm32-wasip2` alike.
//!
//! ```
//! mod model {
//!     pub enum DataType { Boolean, Tinyint, Smallint, Int, Bigint, Float, Double, Decimal(Dec),
//!         Char(u32), Varchar(u32), Binary(u32), Varbinary(u32), Date, Time(u8), Timestamp(u8),
//!         TimestampLtz(u8), Array(u32), Map(MapType), Row(Vec<Field>) }
//!     pub struct Dec { pub precision: u8, pub scale: u8 }
//!     pub struct MapType { pub key: u32, pub value: u32 }
//!     pub struct Field { pub name: String, pub type_index: u32 }
//!     pub struct TypeNode { pub data_type: DataType, pub nullable: bool }
//!     pub struct RowType { pub types: Vec<TypeNode>, pub fields: Vec<Field> }
//! }
//! use model::{DataType, Field, RowType, TypeNode};
//! avro_schema::row_type_view!(View for RowType, DataType);
//!
//! let rt = RowType {
//!     types: vec![TypeNode { data_type: DataType::Bigint, nullable: false }],
//!     fields: vec![Field { name: "id".into(), type_index: 0 }],
//! };
//! assert_eq!(
//!     avro_schema::schema_json(&View(&rt)),
//!     r#"{"type":"record","name":"record","namespace":"org.apache.flink.avro.generated","fields":[{"name":"id","type":"long"}]}"#
//! );
//! ```

use std::fmt::Write as _;

/// Flink's name of the top-level record (namespace and name).
pub const RECORD_NAME: &str = "org.apache.flink.avro.generated.record";

/// Deeper nesting is cut off (written as `"null"`): a malformed row type cannot recurse without end.
const MAX_DEPTH: usize = 256;

/// The Avro shape of one type node: how `AvroSchemaConverter` maps Flink's logical types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    /// TINYINT, SMALLINT and INT.
    Int,
    /// BIGINT.
    Long,
    Float,
    Double,
    /// CHAR(n) and VARCHAR(n).
    String,
    /// BINARY(n) and VARBINARY(n).
    Bytes,
    /// DECIMAL(p, s): `bytes` with the `decimal` logical type.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// DATE: `int` with the `date` logical type.
    Date,
    /// TIME(p): `int` milliseconds (Flink's converter supports p <= 3 only).
    TimeMillis,
    /// TIMESTAMP(p) and TIMESTAMP_LTZ(p): `long` milliseconds.
    TimestampMillis,
    /// ARRAY<T>: the index of T.
    Array {
        items: usize,
    },
    /// MAP<K, V>: the index of V (Avro maps have string keys).
    Map {
        values: usize,
    },
    /// ROW<...>: a nested record, its fields from [`RowTypeView::fields`].
    Record,
}

/// A row type as the derivation reads it. Implemented by [`row_type_view!`] for the row model.
pub trait RowTypeView {
    /// `(name, type index)` of the fields of the top-level row (`None`) or of the ROW type at an index.
    fn fields(&self, row: Option<usize>) -> Vec<(&str, usize)>;
    /// The kind and nullability of the type at `ty`; `None` for an index out of range.
    fn node(&self, ty: usize) -> Option<(Kind, bool)>;
}

/// Defines `struct $view<'a>(&'a $row)` implementing [`RowTypeView`] for a row model of the
/// pulsar-connect shape: `$row { types: Vec<TypeNode { data_type: $data_type, nullable }>, fields:
/// Vec<Field { name, type_index }> }` with the WIT's `data-type` variants (`Decimal(d)` with
/// `d.precision`/`d.scale`, `Array(index)`, `Map(m)` with `m.value`, `Row(fields)`). The host's plugin
/// model and the guest SDK's bindings both have it; `$data_type` must be in scope as a plain name.
#[macro_export]
macro_rules! row_type_view {
    ($view:ident for $row:ty, $data_type:ident) => {
        struct $view<'a>(&'a $row);

        impl $crate::RowTypeView for $view<'_> {
            fn fields(&self, row: Option<usize>) -> Vec<(&str, usize)> {
                let fields = match row {
                    None => &self.0.fields[..],
                    Some(ty) => match self.0.types.get(ty).map(|t| &t.data_type) {
                        Some($data_type::Row(fields)) => &fields[..],
                        _ => &[][..],
                    },
                };
                fields
                    .iter()
                    .map(|f| (f.name.as_str(), f.type_index as usize))
                    .collect()
            }

            fn node(&self, ty: usize) -> Option<($crate::Kind, bool)> {
                use $crate::Kind;
                let node = self.0.types.get(ty)?;
                let kind = match &node.data_type {
                    $data_type::Boolean => Kind::Boolean,
                    $data_type::Tinyint | $data_type::Smallint | $data_type::Int => Kind::Int,
                    $data_type::Bigint => Kind::Long,
                    $data_type::Float => Kind::Float,
                    $data_type::Double => Kind::Double,
                    $data_type::Char(_) | $data_type::Varchar(_) => Kind::String,
                    $data_type::Binary(_) | $data_type::Varbinary(_) => Kind::Bytes,
                    $data_type::Decimal(d) => Kind::Decimal {
                        precision: d.precision,
                        scale: d.scale,
                    },
                    $data_type::Date => Kind::Date,
                    $data_type::Time(_) => Kind::TimeMillis,
                    $data_type::Timestamp(_) | $data_type::TimestampLtz(_) => Kind::TimestampMillis,
                    $data_type::Array(items) => Kind::Array {
                        items: *items as usize,
                    },
                    $data_type::Map(m) => Kind::Map {
                        values: m.value as usize,
                    },
                    $data_type::Row(_) => Kind::Record,
                };
                Some((kind, node.nullable))
            }
        }
    };
}

/// The Avro schema (JSON text, compact) Flink derives for `row_type`: a record named [`RECORD_NAME`];
/// a nested ROW is a record named `<parent record>_<field>`; a nullable type is the union
/// `["null", T]` and its field has `"default": null`.
pub fn schema_json(row_type: &impl RowTypeView) -> String {
    let mut out = String::new();
    let (namespace, name) = RECORD_NAME.rsplit_once('.').unwrap_or(("", RECORD_NAME));
    record(row_type, None, name, Some(namespace), 0, &mut out);
    out
}

fn record(
    rt: &impl RowTypeView,
    row: Option<usize>,
    name: &str,
    namespace: Option<&str>,
    depth: usize,
    out: &mut String,
) {
    out.push_str("{\"type\":\"record\",\"name\":");
    quote(name, out);
    if let Some(namespace) = namespace {
        out.push_str(",\"namespace\":");
        quote(namespace, out);
    }
    out.push_str(",\"fields\":[");
    for (i, (field, ty)) in rt.fields(row).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"name\":");
        quote(field, out);
        out.push_str(",\"type\":");
        type_schema(rt, ty, &format!("{name}_{field}"), depth + 1, out);
        if rt.node(ty).is_some_and(|(_, nullable)| nullable) {
            out.push_str(",\"default\":null");
        }
        out.push('}');
    }
    out.push_str("]}");
}

/// The schema of the type at `ty`; `row_name` names it if it is a ROW.
fn type_schema(rt: &impl RowTypeView, ty: usize, row_name: &str, depth: usize, out: &mut String) {
    let Some((kind, nullable)) = rt.node(ty).filter(|_| depth <= MAX_DEPTH) else {
        out.push_str("\"null\"");
        return;
    };
    if nullable {
        out.push_str("[\"null\",");
    }
    match kind {
        Kind::Boolean => out.push_str("\"boolean\""),
        Kind::Int => out.push_str("\"int\""),
        Kind::Long => out.push_str("\"long\""),
        Kind::Float => out.push_str("\"float\""),
        Kind::Double => out.push_str("\"double\""),
        Kind::String => out.push_str("\"string\""),
        Kind::Bytes => out.push_str("\"bytes\""),
        Kind::Decimal { precision, scale } => {
            let _ = write!(
                out,
                "{{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":{precision},\"scale\":{scale}}}"
            );
        }
        Kind::Date => out.push_str("{\"type\":\"int\",\"logicalType\":\"date\"}"),
        Kind::TimeMillis => out.push_str("{\"type\":\"int\",\"logicalType\":\"time-millis\"}"),
        Kind::TimestampMillis => {
            out.push_str("{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}")
        }
        Kind::Array { items } => {
            out.push_str("{\"type\":\"array\",\"items\":");
            type_schema(rt, items, row_name, depth + 1, out);
            out.push('}');
        }
        Kind::Map { values } => {
            out.push_str("{\"type\":\"map\",\"values\":");
            type_schema(rt, values, row_name, depth + 1, out);
            out.push('}');
        }
        Kind::Record => record(rt, Some(ty), row_name, None, depth, out),
    }
    if nullable {
        out.push(']');
    }
}

/// `s` as a JSON string.
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests;
