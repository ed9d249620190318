//! The Jackson-tree conversions of `json_format::tree_decoder` (what Flink's changelog formats read
//! rows with) where they differ from the json format's streaming ones.

use format_common::golden::{row_type, rows};
use format_common::{Cols, Value};
use json_format::tree::Doc;
use json_format::{JsonOptions, TreeRow, tree_decoder};

fn options(ignore_parse_errors: bool) -> JsonOptions {
    let mut o = JsonOptions::parse(&[]).unwrap();
    o.ignore_parse_errors = ignore_parse_errors;
    o
}

/// Decodes `json` (one object) as a row of `columns`; `Err` for a conversion error.
fn row(columns: &[(&str, &str)], json: &str, ignore: bool) -> Result<Vec<Value>, String> {
    let cols: Vec<(String, String)> = columns
        .iter()
        .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
        .collect();
    let rt = row_type(&cols);
    let d = tree_decoder(options(ignore), &rt, rt.fields.len()).unwrap();
    let doc = Doc::read(json.as_bytes()).unwrap();
    let mut c = Cols::new(&rt);
    match d.tree_row(&doc, &doc.root(), None, &mut c)? {
        TreeRow::Row { null_in } => assert_eq!(null_in, None),
        TreeRow::Null => return Err("null row".into()),
    }
    c.end_row();
    Ok(rows(&rt, &c.finish()).remove(0))
}

fn one(ty: &str, json_value: &str) -> Result<Value, String> {
    row(&[("v", ty)], &format!("{{\"v\":{json_value}}}"), false).map(|mut r| r.remove(0))
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

#[test]
fn numbers_are_read_from_their_nodes() {
    // With a DECIMAL in the row type floats are BigDecimal nodes: no negative zero.
    let with_decimal = [("d", "DOUBLE"), ("f", "FLOAT"), ("p", "DECIMAL(10, 2)")];
    let r = row(&with_decimal, r#"{"d":-0.0,"f":-0.0,"p":12.345}"#, false).unwrap();
    assert_eq!(r[0], Value::F64(0.0));
    assert!(matches!(r[0], Value::F64(x) if x.is_sign_positive()));
    assert!(matches!(r[1], Value::F32(x) if x == 0.0 && x.is_sign_positive()));
    assert_eq!(r[2], Value::Decimal(1235));
    // Without one they are doubles: -0.0 stays.
    assert!(matches!(one("DOUBLE", "-0.0"), Ok(Value::F64(x)) if x.is_sign_negative()));
    // An integer zero is +0.0 either way.
    assert!(matches!(one("DOUBLE", "-0"), Ok(Value::F64(x)) if x.is_sign_positive()));
    assert_eq!(one("DOUBLE", "\" 3.5 \""), Ok(Value::F64(3.5)));
}

#[test]
fn integers_convert_as_jackson_nodes() {
    assert_eq!(one("INT", "\" 101 \""), Ok(Value::I32(101)));
    assert_eq!(one("INT", "101.7"), Ok(Value::I32(101)));
    assert_eq!(one("INT", "-101.7"), Ok(Value::I32(-101)));
    assert!(one("INT", "2147483648").is_err());
    assert!(one("INT", "2147483647.5").is_err());
    assert!(one("INT", "true").is_err());
    assert_eq!(
        one("BIGINT", "\"-9223372036854775808\""),
        Ok(Value::I64(i64::MIN))
    );
    // TINYINT/SMALLINT parse the node's text: a fraction fails, a double's `42.0` too.
    assert_eq!(one("TINYINT", "42"), Ok(Value::I8(42)));
    assert!(one("TINYINT", "42.5").is_err());
    assert!(one("SMALLINT", "42.0").is_err());
    assert!(one("TINYINT", "200").is_err());
    // ... but a BigDecimal node strips its zeros: 42.0 is `42`.
    let r = row(
        &[("t", "SMALLINT"), ("p", "DECIMAL(5, 1)")],
        r#"{"t":42.0,"p":1}"#,
        false,
    );
    assert_eq!(r.unwrap()[0], Value::I16(42));
}

#[test]
fn strings_of_other_values_are_the_nodes_text() {
    assert_eq!(one("STRING", "-0"), Ok(s("0")));
    assert_eq!(one("STRING", "1.50"), Ok(s("1.5")));
    assert_eq!(one("STRING", "true"), Ok(s("true")));
    assert_eq!(
        one("STRING", r#"{ "a" : [1, "\u00e9\/"], "a" : {"b":null} }"#),
        Ok(s(r#"{"a":{"b":null}}"#))
    );
    let r = row(
        &[("v", "STRING"), ("p", "DECIMAL(5, 1)")],
        r#"{"v":100.0,"p":1}"#,
        false,
    );
    assert_eq!(r.unwrap()[0], s("1E+2"));
    assert_eq!(one("BOOLEAN", "\" TRUE \""), Ok(Value::Bool(true)));
    assert_eq!(one("BOOLEAN", "1"), Ok(Value::Bool(false)));
}

#[test]
fn bytes_maps_and_rows() {
    assert_eq!(one("BYTES", "12"), Ok(Value::Null));
    assert_eq!(one("BYTES", "\"AQI=\""), Ok(Value::Bytes(vec![1, 2])));
    assert_eq!(one("MAP<STRING, INT>", "[1,2]"), Ok(Value::Map(vec![])));
    assert_eq!(
        one("MAP<STRING, INT>", r#"{"a":1,"b":2,"a":"3"}"#),
        Ok(Value::Map(vec![
            (s("a"), Value::I32(3)),
            (s("b"), Value::I32(2))
        ]))
    );
    assert!(one("ROW<x INT>", "[1]").is_err());
    assert!(one("ARRAY<INT>", "\"a,b\"").is_err());
    // With ignore-parse-errors the innermost value that fails is NULL.
    let r = row(
        &[("a", "ARRAY<INT>"), ("w", "DOUBLE")],
        r#"{"a":[1,"x"],"w":"heavy"}"#,
        true,
    );
    assert_eq!(
        r.unwrap(),
        [Value::Array(vec![Value::I32(1), Value::Null]), Value::Null]
    );
}

#[test]
fn null_in_not_null_is_passed_on_and_noted() {
    let rt = row_type(&[("id".to_owned(), "INT NOT NULL".to_owned())]);
    let d = tree_decoder(options(false), &rt, 1).unwrap();
    for json in [r#"{"id":null}"#, "{}"] {
        let doc = Doc::read(json.as_bytes()).unwrap();
        let mut c = Cols::new(&rt);
        assert_eq!(
            d.tree_row(&doc, &doc.root(), None, &mut c),
            Ok(TreeRow::Row {
                null_in: Some("id".into())
            }),
            "{json}"
        );
    }
    let doc = Doc::read(b"null").unwrap();
    let mut c = Cols::new(&rt);
    assert_eq!(
        d.tree_row(&doc, &doc.root(), None, &mut c),
        Ok(TreeRow::Null)
    );
}
