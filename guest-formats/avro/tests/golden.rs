//! Flink 1.18 golden vectors (tests/golden/vectors/avro) against the native avro format.

use format_common::golden::{
    self, DecodeFn, EncodeFn, Report, check_deserialization, check_serialization, files,
};
use format_common::{ConfigError, RowType};

fn enc(o: &[(String, String)], rt: &RowType) -> Result<EncodeFn, ConfigError> {
    let e = avro_format::encoder(o, rt)?;
    Ok(Box::new(move |b| e.encode(b)))
}

fn dec(o: &[(String, String)], rt: &RowType) -> Result<DecodeFn, ConfigError> {
    let d = avro_format::decoder(o, rt)?;
    Ok(Box::new(move |m| d.decode(m)))
}

#[test]
fn serialization_vectors() {
    let mut r = Report::default();
    for f in files("avro", false) {
        r.merge(check_serialization(&f, &enc, &dec));
    }
    r.assert_ok(&[]);
}

#[test]
fn deserialization_vectors() {
    let mut r = Report::default();
    for f in files("avro", true) {
        r.merge(check_deserialization(&f, &dec));
    }
    r.assert_ok(&[]);
}

#[test]
fn unsupported_columns_are_config_errors() {
    let file = golden::load("avro/default.json");
    let table = golden::load("table.json");
    let all = golden::columns(&table);
    for (name, flink) in file["unsupported_columns"].as_object().unwrap() {
        let col: Vec<_> = all.iter().filter(|(n, _)| n == name).cloned().collect();
        let rt = golden::row_type(&col);
        let e = avro_format::decoder(&[], &rt).expect_err(name);
        assert_eq!(e.message, flink["message"].as_str().unwrap(), "{name}");
        assert!(avro_format::encoder(&[], &rt).is_err());
    }
}

#[test]
fn schema_is_flinks() {
    let file = golden::load("avro/default.json");
    let rt = golden::row_type(&golden::columns(&file));
    let ours: serde_json::Value = serde_json::from_str(&avro_format::schema_json(&rt)).unwrap();
    assert_eq!(ours, file["avro_schema"]);
    let avsc = std::fs::read_to_string(golden::vectors_dir().join("avro/all-types.avsc")).unwrap();
    let avsc: serde_json::Value = serde_json::from_str(&avsc).unwrap();
    assert_eq!(ours, avsc);
}
