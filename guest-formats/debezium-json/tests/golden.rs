//! Flink 1.18 golden vectors (tests/golden/vectors/debezium-json) against the native debezium-json
//! format: every serialization file (each row under each row kind) and every decode file.

use format_changelog::golden::{DecodeFn, EncodeFn, check_deserialization, check_serialization};
use format_common::golden::{Report, files};
use format_common::{ConfigError, RowType};

const OWN_OPTIONS: &[&str] = debezium_json_format::OPTIONS;

fn enc(o: &[(String, String)], rt: &RowType) -> Result<EncodeFn, ConfigError> {
    let e = debezium_json_format::encoder(o, rt)?;
    Ok(Box::new(move |b, k| e.encode(b, k)))
}

fn dec(o: &[(String, String)], rt: &RowType, keys: &[String]) -> Result<DecodeFn, ConfigError> {
    let d = debezium_json_format::decoder(o, rt, keys)?;
    Ok(Box::new(move |m| d.decode(m)))
}

/// Flink emits these rows with `id` (INT NOT NULL) NULL (`{"id":null}`, no `id`, and with
/// ignore-parse-errors an `id` that does not convert); a batch cannot hold a NULL in a NOT NULL column,
/// so the message fails with that reason (checked below).
const KNOWN: &[&str] = &[
    "[not-null-id-is-null]",
    "[not-null-id-missing]",
    "decode-ignore-parse-errors.json [id-overflow]",
];

fn assert_ok(r: &Report) {
    for f in r
        .failures
        .iter()
        .filter(|f| KNOWN.iter().any(|k| f.contains(k)))
    {
        assert!(f.contains("NULL in NOT NULL field `id`"), "{f}");
    }
    r.assert_ok(KNOWN);
}

#[test]
fn serialization_vectors() {
    let mut r = Report::default();
    for f in files("debezium-json", false) {
        r.merge(check_serialization(&f, &enc, &dec));
    }
    assert_ok(&r);
}

#[test]
fn deserialization_vectors() {
    let mut r = Report::default();
    for f in files("debezium-json", true) {
        r.merge(check_deserialization(&f, &dec));
    }
    assert_ok(&r);
}

#[test]
fn manifest_matches_the_code() {
    format_changelog::golden::check_manifest(
        env!("CARGO_MANIFEST_DIR"),
        OWN_OPTIONS,
        debezium_json_format::METADATA,
    );
}
