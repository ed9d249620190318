//! The derivation on row types written straight as a [`RowTypeView`] (the golden all-types schema is
//! checked by the host's and the avro guest's tests against Flink's own output; `row_type_view!` runs
//! in the doc test and in both of those).

use super::{Kind, RowTypeView, schema_json};

/// Fields: `(name, type index)`.
type Fields = Vec<(&'static str, usize)>;

/// A type: its kind, nullability and (for a ROW) fields.
type Node = (Kind, bool, Fields);

/// A row type written straight as the view.
struct Rt {
    types: Vec<Node>,
    fields: Fields,
}

impl RowTypeView for Rt {
    fn fields(&self, row: Option<usize>) -> Vec<(&str, usize)> {
        match row {
            None => self.fields.clone(),
            Some(ty) => self.types.get(ty).map(|t| t.2.clone()).unwrap_or_default(),
        }
    }

    fn node(&self, ty: usize) -> Option<(Kind, bool)> {
        self.types.get(ty).map(|t| (t.0, t.1))
    }
}

fn node(kind: Kind, nullable: bool) -> Node {
    (kind, nullable, Vec::new())
}

fn record(nullable: bool, fields: Fields) -> Node {
    (Kind::Record, nullable, fields)
}

fn derive(types: Vec<Node>, fields: Fields) -> String {
    schema_json(&Rt { types, fields })
}

const TOP: &str =
    r#"{"type":"record","name":"record","namespace":"org.apache.flink.avro.generated","fields":["#;

#[test]
fn scalars_map_as_flinks_converter_does() {
    let types = vec![
        node(Kind::Boolean, false),
        node(Kind::Int, false),
        node(Kind::Int, false),
        node(Kind::Int, false),
        node(Kind::Long, false),
        node(Kind::Float, false),
        node(Kind::Double, false),
        node(Kind::String, false),
        node(Kind::String, false),
        node(Kind::Bytes, false),
        node(Kind::Bytes, false),
        node(
            Kind::Decimal {
                precision: 10,
                scale: 2,
            },
            false,
        ),
        node(Kind::Date, false),
        node(Kind::TimeMillis, false),
        node(Kind::TimestampMillis, false),
        node(Kind::TimestampMillis, false),
    ];
    let names: Vec<&'static str> = (0..types.len()).map(|i| &*format!("f{i}").leak()).collect();
    let fields = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
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
        node(Kind::Int, true),
        node(Kind::Array { items: 2 }, true),
        node(Kind::String, true),
    ];
    assert_eq!(
        derive(types, vec![("n", 0), ("a", 1)]),
        format!(
            r#"{TOP}{{"name":"n","type":["null","int"],"default":null}},{{"name":"a","type":["null",{{"type":"array","items":["null","string"]}}],"default":null}}]}}"#
        )
    );
}

#[test]
fn nested_rows_are_records_named_after_their_path_without_a_namespace() {
    // outer ROW<inner ROW<x INT>, m MAP<STRING, ROW<y BOOLEAN>>>
    let types = vec![
        record(false, vec![("inner", 1), ("m", 4)]),
        record(true, vec![("x", 2)]),
        node(Kind::Int, false),
        node(Kind::String, false),
        node(Kind::Map { values: 5 }, false),
        record(false, vec![("y", 6)]),
        node(Kind::Boolean, false),
    ];
    assert_eq!(
        derive(types, vec![("outer", 0)]),
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
    let types = vec![node(Kind::Int, false)];
    assert_eq!(
        derive(types, vec![("a\"b\\c\nd", 0)]),
        format!(r#"{TOP}{{"name":"a\"b\\c\u000ad","type":"int"}}]}}"#)
    );
}

#[test]
fn malformed_row_types_end() {
    // An index out of range, and a ROW that contains itself.
    let types = vec![record(false, vec![("me", 0)])];
    let s = derive(types, vec![("gone", 7), ("loop", 0)]);
    assert!(s.starts_with(&format!(r#"{TOP}{{"name":"gone","type":"null"}},"#)));
    assert!(s.contains(r#""type":"null""#));
    assert_eq!(
        s.matches('{').count(),
        s.matches('}').count(),
        "balanced: {s}"
    );
}
