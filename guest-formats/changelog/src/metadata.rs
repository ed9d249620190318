//! Readable metadata (Flink's `SupportsReadableMetadata`): a format's keys and their types, the keys a
//! decoder is asked for, and the output row type (the row type's columns, then one per key, in the
//! order asked).

use format_common::{ConfigError, DataType, Field, MapType, RowType, TypeNode, config_error};

use crate::Span;

/// The type of a metadata column (every one is nullable, as in Flink).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaType {
    String,
    /// TIMESTAMP_LTZ(3): milliseconds since the epoch.
    TimestampLtz3,
    MapStringString,
    MapStringInt,
    ArrayString,
}

impl MetaType {
    /// Flink's SQL spelling (the manifest's `type`).
    pub fn flink(self) -> &'static str {
        match self {
            MetaType::String => "STRING",
            MetaType::TimestampLtz3 => "TIMESTAMP_LTZ(3)",
            MetaType::MapStringString => "MAP<STRING, STRING>",
            MetaType::MapStringInt => "MAP<STRING, INT>",
            MetaType::ArrayString => "ARRAY<STRING>",
        }
    }

    /// Appends the type's nodes to `rt` (children after their parent) and returns the index of its root.
    fn append(self, rt: &mut RowType) -> u32 {
        let mut push = |data_type: DataType, nullable: bool| {
            rt.types.push(TypeNode {
                data_type,
                nullable,
            });
            rt.types.len() as u32 - 1
        };
        let string = || DataType::Varchar(i32::MAX as u32);
        match self {
            MetaType::String => push(string(), true),
            MetaType::TimestampLtz3 => push(DataType::TimestampLtz(3), true),
            MetaType::ArrayString => {
                let at = push(DataType::Boolean, true);
                let e = push(string(), true);
                rt.types[at as usize].data_type = DataType::Array(e);
                at
            }
            MetaType::MapStringString | MetaType::MapStringInt => {
                let at = push(DataType::Boolean, true);
                // Keys are never NULL (JSON object keys; Arrow wants them NOT NULL).
                let key = push(string(), false);
                let value = if self == MetaType::MapStringInt {
                    push(DataType::Int, true)
                } else {
                    push(string(), true)
                };
                rt.types[at as usize].data_type = DataType::Map(MapType { key, value });
                at
            }
        }
    }
}

/// A readable metadata key of a format.
#[derive(Debug, Clone, Copy)]
pub struct MetaKey {
    /// The key (`METADATA FROM 'value.<key>'`).
    pub key: &'static str,
    pub ty: MetaType,
    /// Where the value comes from (the manifest's `doc`).
    pub doc: &'static str,
}

/// `database` of canal-json and maxwell-json.
pub const DATABASE: MetaKey = MetaKey {
    key: "database",
    ty: MetaType::String,
    doc: "the originating database: `database`",
};

/// `table` of canal-json and maxwell-json.
pub const TABLE: MetaKey = MetaKey {
    key: "table",
    ty: MetaType::String,
    doc: "the originating table: `table`",
};

/// The value of a metadata column for the rows of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaValue {
    Null,
    /// A JSON value of the message, converted to the column's type as Flink converts it.
    Json(Span),
    /// A TIMESTAMP_LTZ(3) value.
    Millis(i64),
}

impl MetaValue {
    /// The JSON value at `v`, NULL when there is none.
    pub fn json(v: Option<&Span>) -> MetaValue {
        v.map_or(MetaValue::Null, |v| MetaValue::Json(v.clone()))
    }
}

/// Resolves the keys a decoder is asked for against the format's `table`: indexes into it, in the
/// order asked.
pub fn resolve(
    format: &str,
    table: &[MetaKey],
    keys: &[String],
) -> Result<Vec<usize>, ConfigError> {
    keys.iter()
        .map(|k| {
            table.iter().position(|m| m.key == k).ok_or_else(|| {
                config_error(
                    None,
                    format!(
                        "Format '{format}' has no readable metadata '{k}'. Readable: {}",
                        table.iter().map(|m| m.key).collect::<Vec<_>>().join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// The row type of decoded batches: `physical`'s fields, then a column per resolved key.
pub fn output_row_type(physical: &RowType, table: &[MetaKey], resolved: &[usize]) -> RowType {
    let mut rt = physical.clone();
    for &k in resolved {
        let type_index = table[k].ty.append(&mut rt);
        rt.fields.push(Field {
            name: format!("$metadata:{}", table[k].key),
            type_index,
        });
    }
    rt
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[MetaKey] = &[
        MetaKey {
            key: "a",
            ty: MetaType::MapStringInt,
            doc: "",
        },
        MetaKey {
            key: "b",
            ty: MetaType::String,
            doc: "",
        },
    ];

    #[test]
    fn output_row_type_appends_the_keys_in_order() {
        let physical = RowType {
            types: vec![TypeNode {
                data_type: DataType::Int,
                nullable: false,
            }],
            fields: vec![Field {
                name: "id".into(),
                type_index: 0,
            }],
        };
        let keys = resolve("f", TABLE, &["b".into(), "a".into()]).unwrap();
        assert_eq!(keys, [1, 0]);
        let rt = output_row_type(&physical, TABLE, &keys);
        format_common::validate_row_type(&rt).unwrap();
        let types: Vec<String> = (0..rt.fields.len())
            .map(|f| format_common::type_string(&rt, rt.fields[f].type_index as usize))
            .collect();
        assert_eq!(
            types,
            ["INT NOT NULL", "STRING", "MAP<STRING NOT NULL, INT>"]
        );
        assert!(resolve("f", TABLE, &["c".into()]).is_err());
    }
}
