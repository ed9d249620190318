//! Encode → decode is the identity where Flink's JSON is lossless, for every precision, extremes,
//! unicode and NULLs; row errors name the field and the problem.

use format_common::Value;
use format_common::golden;

fn cols(spec: &[(&str, &str)]) -> Vec<(String, String)> {
    spec.iter()
        .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
        .collect()
}

#[test]
fn every_timestamp_precision_round_trips() {
    let mut spec = Vec::new();
    for p in 0..=9 {
        spec.push((format!("ts{p}"), format!("TIMESTAMP({p})")));
        spec.push((format!("ltz{p}"), format!("TIMESTAMP_LTZ({p})")));
    }
    let rt = golden::row_type(&spec);
    let mut rows = Vec::new();
    for base in [0i64, -1, 1, 1_709_210_096, -2_208_988_800, 253_402_300_799] {
        let row: Vec<Value> = (0..=9u8)
            .flat_map(|p| {
                let unit = format_common::units_per_second(p);
                // A value with all `p` digits set, within the i64 range of the unit.
                let v = base
                    .checked_mul(unit)
                    .and_then(|v| v.checked_add(unit - 1))
                    .map_or(Value::Null, Value::Timestamp);
                [v.clone(), v]
            })
            .collect();
        rows.push(row);
    }
    rows.push(vec![Value::Null; 20]);
    for iso in [false, true] {
        let o: Vec<(String, String)> = if iso {
            vec![("timestamp-format.standard".into(), "ISO-8601".into())]
        } else {
            vec![]
        };
        let e = json_format::encoder(&o, &rt).unwrap();
        let d = json_format::decoder(&o, &rt).unwrap();
        let out = e.encode(&golden::batch(&rt, &rows)).unwrap();
        assert!(out.errors.is_empty());
        let payloads: Vec<&[u8]> = (0..rows.len()).map(|i| golden::payload(&out, i)).collect();
        let back = d.decode(&golden::messages(&payloads)).unwrap();
        assert!(back.errors.is_empty(), "{:?}", back.errors);
        assert_eq!(golden::rows(&rt, &back.rows), rows);
    }
}

#[test]
fn extremes_unicode_nulls_round_trip() {
    let rt = golden::row_type(&cols(&[
        ("i", "INT"),
        ("l", "BIGINT NOT NULL"),
        ("f", "FLOAT"),
        ("d", "DOUBLE"),
        ("m", "DECIMAL(38, 10)"),
        ("s", "STRING"),
        ("b", "BYTES"),
        ("dt", "DATE"),
        ("a", "ARRAY<MAP<STRING, ROW<x INT, y ARRAY<STRING>>>>"),
    ]));
    let nested = Value::Array(vec![
        Value::Null,
        Value::Map(vec![
            (
                Value::String("ключ 😀".into()),
                Value::Row(vec![
                    Value::I32(-1),
                    Value::Array(vec![
                        Value::Null,
                        Value::String("\u{0}\u{1f}\"\\\u{2028}".into()),
                    ]),
                ]),
            ),
            (Value::String(String::new()), Value::Null),
        ]),
    ]);
    let rows = vec![
        vec![
            Value::I32(i32::MIN),
            Value::I64(i64::MAX),
            Value::F32(f32::MIN_POSITIVE / 8.0),
            Value::F64(f64::MAX),
            Value::Decimal(-(10i128.pow(38) - 1)),
            Value::String("日本語 e\u{301} 👍🏽 \u{feff}".into()),
            Value::Bytes((0..=255).collect()),
            Value::Date(-719_162),
            nested,
        ],
        vec![
            Value::Null,
            Value::I64(i64::MIN),
            Value::F32(f32::NEG_INFINITY),
            Value::F64(f64::NAN),
            Value::Decimal(1),
            Value::String(String::new()),
            Value::Bytes(vec![]),
            Value::Date(2_932_896),
            Value::Array(vec![]),
        ],
    ];
    let e = json_format::encoder(&[], &rt).unwrap();
    let d = json_format::decoder(&[], &rt).unwrap();
    let out = e.encode(&golden::batch(&rt, &rows)).unwrap();
    assert!(out.errors.is_empty());
    let payloads: Vec<&[u8]> = (0..rows.len()).map(|i| golden::payload(&out, i)).collect();
    let back = d.decode(&golden::messages(&payloads)).unwrap();
    assert!(back.errors.is_empty(), "{:?}", back.errors);
    let got = golden::rows(&rt, &back.rows);
    for (g, r) in got.iter().zip(&rows) {
        assert!(golden::same_row(g, r), "\n{g:?}\n{r:?}");
    }
}

#[test]
fn row_errors_name_the_field_and_the_problem() {
    let rt = golden::row_type(&cols(&[
        ("id", "INT"),
        ("ts", "TIMESTAMP(3)"),
        ("r", "ROW<a SMALLINT>"),
    ]));
    let d = json_format::decoder(&[], &rt).unwrap();
    let out = d
        .decode(&golden::messages(&[
            br#"{"id":"abc"}"#,
            br#"{"ts":"yesterday"}"#,
            br#"{"r":{"a":70000}}"#,
            br#"{"id":1,"#,
            br#"{"id":2}"#,
        ]))
        .unwrap();
    assert_eq!(out.rows.row_count, 1);
    let reasons: Vec<&str> = out.errors.iter().map(|e| e.reason.as_str()).collect();
    assert!(
        reasons[0].contains("field: id") && reasons[0].contains("abc"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("field: ts") && reasons[1].contains("yesterday"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].contains("field: r") && reasons[2].contains("70000"),
        "{reasons:?}"
    );
    assert!(reasons[3].contains("end-of-input"), "{reasons:?}");
    // With ignore-parse-errors the bad fields are NULL and the broken message is a counted skip.
    let d = json_format::decoder(&[("ignore-parse-errors".into(), "true".into())], &rt).unwrap();
    let out = d
        .decode(&golden::messages(&[
            br#"{"id":"abc","ts":"2024-01-01 00:00:00"}"#,
            br#"{"id":1,"#,
        ]))
        .unwrap();
    assert_eq!(out.rows.row_count, 1);
    assert_eq!(out.errors.len(), 1);
    assert!(out.errors[0].reason.starts_with(format_common::SKIPPED));
    assert_eq!(
        golden::rows(&rt, &out.rows),
        vec![vec![
            Value::Null,
            Value::Timestamp(1_704_067_200_000),
            Value::Null
        ]]
    );
}
