//! What the vectors do not show: Flink converts the whole envelope, so a row that is not emitted still
//! fails the message when it does not convert (unless ignore-parse-errors), and so does metadata.

use format_common::golden::{messages, row_type, rows};
use format_common::{SKIPPED, Value};

fn decode(
    options: &[(&str, &str)],
    keys: &[&str],
    message: &str,
) -> Result<Vec<Vec<Value>>, String> {
    let rt = row_type(&[("id".to_owned(), "INT".to_owned())]);
    let options: Vec<(String, String)> = options
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    let d = debezium_json_format::decoder(&options, &rt, &keys).unwrap();
    let out = d.decode(&messages(&[message.as_bytes()])).unwrap();
    match out.errors.first() {
        Some(e) => Err(e.reason.clone()),
        None => Ok(rows(d.output_row_type(), &out.rows)),
    }
}

#[test]
fn rows_not_emitted_are_converted_too() {
    let m = r#"{"before":{"id":"x"},"after":{"id":1},"op":"c"}"#;
    let e = decode(&[], &[], m).unwrap_err();
    assert!(e.starts_with("Corrupt Debezium JSON message"), "{e}");
    assert!(e.contains("Fail to deserialize at field: id"), "{e}");
    assert_eq!(
        decode(&[("ignore-parse-errors", "true")], &[], m),
        Ok(vec![vec![Value::I32(1)]])
    );
}

#[test]
fn metadata_conversion_and_schema_include() {
    let m = r#"{"schema":{"type":"struct", "optional" : false},"payload":{"after":{"id":1},"op":"r","ts_ms":"later","source":{"ts_ms":5,"db":{"x":[1]}}}}"#;
    let keys = ["schema", "source.timestamp", "source.database"];
    assert!(decode(&[("schema-include", "true")], &keys, m).is_ok());
    let e = decode(&[("schema-include", "true")], &["ingestion-timestamp"], m).unwrap_err();
    assert!(!e.starts_with(SKIPPED), "{e}");
    let got = decode(
        &[("schema-include", "true"), ("ignore-parse-errors", "true")],
        &[
            "ingestion-timestamp",
            "schema",
            "source.timestamp",
            "source.database",
        ],
        m,
    );
    assert_eq!(
        got,
        Ok(vec![vec![
            Value::I32(1),
            Value::Null,
            Value::String(r#"{"type":"struct","optional":false}"#.into()),
            Value::Timestamp(5),
            Value::String(r#"{"x":[1]}"#.into()),
        ]])
    );
    // Without schema-include the wrapped message has no `op`.
    let e = decode(&[], &[], m).unwrap_err();
    assert!(e.contains("\"op\" is null"), "{e}");
}
