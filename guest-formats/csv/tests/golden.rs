//! Flink 1.18 golden vectors (tests/golden/vectors/csv) against the native csv format.

use format_common::golden::{
    self, DecodeFn, EncodeFn, Report, check_deserialization, check_serialization, files,
};
use format_common::{ConfigError, RowType};

fn enc(o: &[(String, String)], rt: &RowType) -> Result<EncodeFn, ConfigError> {
    let e = csv_format::encoder(o, rt)?;
    Ok(Box::new(move |b| e.encode(b)))
}

fn dec(o: &[(String, String)], rt: &RowType) -> Result<DecodeFn, ConfigError> {
    let d = csv_format::decoder(o, rt)?;
    Ok(Box::new(move |m| d.decode(m)))
}

/// Documented differences from Flink (see guest-formats/README.md).
const KNOWN: &[&str] = &[];

#[test]
fn serialization_vectors() {
    let mut r = Report::default();
    for f in files("csv", false) {
        r.merge(check_serialization(&f, &enc, &dec));
    }
    r.assert_ok(KNOWN);
}

#[test]
fn deserialization_vectors() {
    let mut r = Report::default();
    for f in files("csv", true) {
        r.merge(check_deserialization(&f, &dec));
    }
    r.assert_ok(KNOWN);
}

#[test]
fn unsupported_columns_are_config_errors() {
    let file = golden::load("csv/default.json");
    let table = golden::load("table.json");
    let all = golden::columns(&table);
    for (name, flink) in file["unsupported_columns"].as_object().unwrap() {
        let col: Vec<_> = all.iter().filter(|(n, _)| n == name).cloned().collect();
        let rt = golden::row_type(&col);
        let e = csv_format::decoder(&[], &rt).expect_err(name);
        assert_eq!(e.message, flink["message"].as_str().unwrap(), "{name}");
        assert!(csv_format::encoder(&[], &rt).is_err());
    }
}

#[test]
fn option_errors() {
    let rt = golden::row_type(&[("a".into(), "INT".into())]);
    let o = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    assert!(csv_format::decoder(&o("field-delimiter", ";;"), &rt).is_err());
    assert!(
        csv_format::decoder(
            &[
                ("disable-quote-character".into(), "true".into()),
                ("quote-character".into(), "'".into())
            ],
            &rt
        )
        .is_err()
    );
    assert!(csv_format::decoder(&o("no-such-option", "x"), &rt).is_err());
}

#[test]
fn delimiter_options_take_java_escapes() {
    use format_common::Value;
    let rt = golden::row_type(&[
        ("a".into(), "INT".into()),
        ("b".into(), "ARRAY<STRING>".into()),
    ]);
    let opts = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    // `'\t'` written in SQL reaches the format as backslash + t: Flink reads a tab.
    let o = csv_format::CsvOptions::parse(&opts(&[
        ("field-delimiter", "\\t"),
        ("array-element-delimiter", "\\u007c"),
        ("escape-character", "\\\\"),
    ]))
    .unwrap();
    assert_eq!(o.delimiter, '\t');
    assert_eq!(o.array_delimiter, "|");
    assert_eq!(o.escape, Some('\\'));
    let encoder = csv_format::encoder(&opts(&[("field-delimiter", "\\t")]), &rt).unwrap();
    let rows = vec![vec![
        Value::I32(1),
        Value::Array(vec![Value::String("x".into()), Value::String("y".into())]),
    ]];
    let encoded = encoder.encode(&golden::batch(&rt, &rows)).unwrap();
    assert_eq!(golden::payload(&encoded, 0), b"1\tx;y");
    // Still one character after unescaping; the quote is taken as written (as Flink does).
    assert!(csv_format::CsvOptions::parse(&opts(&[("field-delimiter", "\\t\\t")])).is_err());
    assert!(csv_format::CsvOptions::parse(&opts(&[("quote-character", "''")])).is_err());
    assert!(csv_format::CsvOptions::parse(&opts(&[("array-element-delimiter", "||")])).is_err());
}

#[test]
fn decimals_in_scientific_notation_when_asked() {
    use format_common::Value;
    let rt = golden::row_type(&[("d".into(), "DECIMAL(10, 0)".into())]);
    let opt = |v: &str| {
        vec![(
            "write-bigdecimal-in-scientific-notation".to_owned(),
            v.to_owned(),
        )]
    };
    let rows = vec![vec![Value::Decimal(100000)], vec![Value::Decimal(0)]];
    let sci = csv_format::encoder(&opt("true"), &rt).unwrap();
    let e = sci.encode(&golden::batch(&rt, &rows)).unwrap();
    // Written as Jackson writes a decimal (a string, quoted by the usual rule: '+' sorts below ',').
    assert_eq!(golden::payload(&e, 0), b"\"1E+5\"");
    assert_eq!(golden::payload(&e, 1), b"0");
    let plain = csv_format::encoder(&opt("false"), &rt).unwrap();
    let e = plain.encode(&golden::batch(&rt, &rows)).unwrap();
    assert_eq!(golden::payload(&e, 0), b"100000");
}
