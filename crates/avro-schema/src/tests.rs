//! The derivation on a small row model of the pulsar-connect shape (the golden all-types schema is
//! checked by the host's and the avro guest's tests against Flink's own output).

use super::schema_json;

/// The shape of the host's plugin model and the WIT bindings (fields the derivation does not read included).
#[allow(dead_code)]
mod model {
    pub enum DataType {
        Boolean,
        Tinyint,
        Smallint,
        Int,
        Bigint,
        Float,
        Double,
        Decimal(DecimalType),
        Char(u32),
        Varchar(u32),
        Binary(u32),
        Varbinary(u32),
        Date,
        Time(u8),
        Timestamp(u8),
        TimestampLtz(u8),
        Array(u32),
        Map(MapType),
        Row(Vec<Field>),
    }
    pub struct DecimalType {
        pub precision: u8,
        pub scale: u8,
    }
    pub struct MapType {
        pub key: u32,
        pub value: u32,
    }
    pub struct Field {
        pub name: String,
        pub type_index: u32,
    }
    pub struct TypeNode {
        pub data_type: DataType,
        pub nullable: bool,
    }
    pub struct RowType {
        pub types: Vec<TypeNode>,
        pub fields: Vec<Field>,
    }
}

use model::{DataType, DecimalType, Field, MapType, RowType, TypeNode};

crate::row_type_view!(View for RowType, DataType);

fn field(name: &str, type_index: u32) -> Field {
    Field {
        name: name.into(),
        type_index,
    }
}

fn node(data_type: DataType, nullable: bool) -> TypeNode {
    TypeNode {
        data_type,
        nullable,
    }
}

fn derive(types: Vec<TypeNode>, fields: Vec<Field>) -> String {
    schema_json(&View(&RowType { types, fields }))
}

const TOP: &str =
    r#"{"type":"record","name":"record","namespace":"org.apache.flink.avro.generated","fields":["#;

#[test]
fn scalars_map_as_flinks_converter_does() {
    let types = vec![
        node(DataType::Boolean, false),
        node(DataType::Tinyint, false),
        node(DataType::Smallint, false),
        node(DataType::Int, false),
        node(DataType::Bigint, false),
        node(DataType::Float, false),
        node(DataType::Double, false),
        node(DataType::Char(3), false),
        node(DataType::Varchar(10), false),
        node(DataType::Binary(2), false),
        node(DataType::Varbinary(8), false),
        node(
            DataType::Decimal(DecimalType {
                precision: 10,
                scale: 2,
            }),
            false,
        ),
        node(DataType::Date, false),
        node(DataType::Time(3), false),
        node(DataType::Timestamp(3), false),
        node(DataType::TimestampLtz(3), false),
    ];
    let fields = (0..types.len() as u32)
        .map(|i| field(&format!("f{i}"), i))
        .collect();
    let expected = [
        r#""boolean""#,
        r#""int""#,
        r#""int""#,
        r#""int""#,
        r#""long""#,
        r#""float""#,
        r#""double""#,
        r#""string""#,
        r#""string""#,
        r#""bytes""#,
        r#""bytes""#,
        r#"{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}"#,
        r#"{"type":"int","logicalType":"date"}"#,
        r#"{"type":"int","logicalType":"time-millis"}"#,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
    ]
    .iter()
    .enumerate()
    .map(|(i, t)| format!(r#"{{"name":"f{i}","type":{t}}}"#))
    .collect::<Vec<_>>()
    .join(",");
    assert_eq!(derive(types, fields), format!("{TOP}{expected}]}}"));
}

#[test]
fn nullable_types_are_unions_with_a_null_default() {
    let types = vec![
        node(DataType::Int, true),
        node(DataType::Array(2), true),
        node(DataType::Varchar(5), true),
    ];
    assert_eq!(
        derive(types, vec![field("n", 0), field("a", 1)]),
        format!(
            r#"{TOP}{{"name":"n","type":["null","int"],"default":null}},{{"name":"a","type":["null",{{"type":"array","items":["null","string"]}}],"default":null}}]}}"#
        )
    );
}

#[test]
fn nested_rows_are_records_named_after_their_path_without_a_namespace() {
    // outer ROW<inner ROW<x INT>, m MAP<STRING, ROW<y BOOLEAN>>>
    let types = vec![
        node(DataType::Row(vec![field("inner", 1), field("m", 4)]), false),
        node(DataType::Row(vec![field("x", 2)]), true),
        node(DataType::Int, false),
        node(DataType::Varchar(u32::MAX >> 1), false),
        node(DataType::Map(MapType { key: 3, value: 5 }), false),
        node(DataType::Row(vec![field("y", 6)]), false),
        node(DataType::Boolean, false),
    ];
    assert_eq!(
        derive(types, vec![field("outer", 0)]),
        format!(
            concat!(
                r#"{TOP}{{"name":"outer","type":{{"type":"record","name":"record_outer","fields":["#,
                r#"{{"name":"inner","type":["null",{{"type":"record","name":"record_outer_inner","fields":[{{"name":"x","type":"int"}}]}}],"default":null}},"#,
                r#"{{"name":"m","type":{{"type":"map","values":{{"type":"record","name":"record_outer_m","fields":[{{"name":"y","type":"boolean"}}]}}}}}}"#,
                r#"]}}}}]}}"#
            ),
            TOP = TOP
        )
    );
}

#[test]
fn names_are_json_escaped() {
    let types = vec![node(DataType::Int, false)];
    assert_eq!(
        derive(types, vec![field("a\"b\\c\nd", 0)]),
        format!(r#"{TOP}{{"name":"a\"b\\c\u000ad","type":"int"}}]}}"#)
    );
}

#[test]
fn malformed_row_types_end() {
    // An index out of range, and a ROW that contains itself.
    let types = vec![node(DataType::Row(vec![field("me", 0)]), false)];
    let s = derive(types, vec![field("gone", 7), field("loop", 0)]);
    assert!(s.starts_with(&format!(r#"{TOP}{{"name":"gone","type":"null"}},"#)));
    assert!(s.contains(r#""type":"null""#));
    assert_eq!(
        s.matches('{').count(),
        s.matches('}').count(),
        "balanced: {s}"
    );
}
