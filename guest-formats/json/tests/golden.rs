//! Flink 1.18 golden vectors (tests/golden/vectors/json) against the native json format.

use format_common::golden::{
    self, DecodeFn, EncodeFn, Report, check_deserialization, check_serialization, files,
};
use format_common::{ConfigError, RowType};

fn enc(o: &[(String, String)], rt: &RowType) -> Result<EncodeFn, ConfigError> {
    let e = json_format::encoder(o, rt)?;
    Ok(Box::new(move |b| e.encode(b)))
}

fn dec(o: &[(String, String)], rt: &RowType) -> Result<DecodeFn, ConfigError> {
    let d = json_format::decoder(o, rt)?;
    Ok(Box::new(move |m| d.decode(m)))
}

/// Documented differences from Flink (see guest-formats/README.md).
const KNOWN: &[&str] = &[];

#[test]
fn serialization_vectors() {
    let mut r = Report::default();
    for f in files("json", false) {
        r.merge(check_serialization(&f, &enc, &dec));
    }
    r.assert_ok(KNOWN);
}

#[test]
fn deserialization_vectors() {
    let mut r = Report::default();
    for f in files("json", true) {
        r.merge(check_deserialization(&f, &dec));
    }
    r.assert_ok(KNOWN);
}

#[test]
fn round_trip_table() {
    // Encode every row of the table, decode it back: equal except where Flink's JSON is lossy
    // (TIME keeps whole seconds).
    let table = golden::load("table.json");
    let cols = golden::columns(&table);
    let rt = golden::row_type(&cols);
    let e = json_format::encoder(&[], &rt).unwrap();
    let d = json_format::decoder(&[], &rt).unwrap();
    let mut rows = Vec::new();
    for row in table["rows"].as_array().unwrap() {
        if let Ok(r) = golden::to_row(&rt, &row["values"]) {
            rows.push(r);
        }
    }
    let time3 = cols.iter().position(|(n, _)| n == "c_time_3").unwrap();
    let encoded = e.encode(&golden::batch(&rt, &rows)).unwrap();
    let bad: Vec<u32> = encoded.errors.iter().map(|e| e.index).collect();
    let payloads: Vec<&[u8]> = (0..rows.len())
        .filter(|i| !bad.contains(&(*i as u32)))
        .map(|i| golden::payload(&encoded, i))
        .collect();
    let decoded = d.decode(&golden::messages(&payloads)).unwrap();
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    let back = golden::rows(&rt, &decoded.rows);
    let kept: Vec<&Vec<_>> = rows
        .iter()
        .enumerate()
        .filter(|(i, _)| !bad.contains(&(*i as u32)))
        .map(|(_, r)| r)
        .collect();
    assert_eq!(back.len(), kept.len());
    for (b, r) in back.iter().zip(kept) {
        let mut r = r.clone();
        if let format_common::Value::Time(t) = &mut r[time3] {
            *t -= *t % 1000;
        }
        assert!(golden::same_row(b, &r), "\n{b:?}\n{r:?}");
    }
}
