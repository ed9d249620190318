//! The golden vectors protobuf's Python package wrote (tests/golden/protobuf, `generate.py`) against
//! the native protobuf format: our bytes equal Python's for every row, Python's bytes decode to the rows
//! Flink's rules give, broken payloads fail (or are skipped with `ignore-parse-errors`); and the
//! configuration errors name the option, the column or the message.

use std::path::PathBuf;

use format_common::golden::{self, batch, messages, payload, row_type, same_row, to_row};
use format_common::{ConfigError, RowType, SKIPPED, Value};
use serde_json::Value as Json;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/protobuf/vectors")
}

fn load(name: &str) -> Json {
    golden::load(&format!("../protobuf/vectors/{name}"))
}

fn files(decode: bool) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(vectors())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n.starts_with("decode-") == decode)
        .collect();
    out.sort();
    assert!(!out.is_empty());
    out
}

fn b64(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    format_common::b64::decode(s.as_bytes(), &mut out).unwrap();
    out
}

fn decode_one(
    d: &protobuf_format::Decoder,
    rt: &RowType,
    bytes: &[u8],
) -> Result<Vec<Value>, String> {
    let out = d.decode(&messages(&[bytes]))?;
    if let Some(e) = out.errors.first() {
        return Err(e.reason.clone());
    }
    Ok(golden::rows(rt, &out.rows).remove(0))
}

#[test]
fn python_bytes_are_ours_and_decode_to_flinks_rows() {
    let mut checked = 0;
    for name in files(false) {
        let file = load(&name);
        let rt = row_type(&golden::columns(&file));
        let opts = golden::options(&file);
        let enc = protobuf_format::encoder_in(&vectors(), &opts, &rt).expect(&name);
        let dec = protobuf_format::decoder_in(&vectors(), &opts, &rt).expect(&name);
        for v in file["vectors"].as_array().unwrap() {
            let what = format!("{name} [{}]", v["name"]);
            let want = b64(v["base64"].as_str().unwrap());
            let row = to_row(&rt, &v["values"]).expect(&what);
            let out = enc.encode(&batch(&rt, &[row])).expect(&what);
            assert!(out.errors.is_empty(), "{what}: {:?}", out.errors);
            assert_eq!(
                hex_of(payload(&out, 0)),
                hex_of(&want),
                "{what}: ours vs Python's bytes"
            );
            let got = decode_one(&dec, &rt, &want).expect(&what);
            let expected = to_row(&rt, &v["decoded"]).expect(&what);
            assert!(
                same_row(&got, &expected),
                "{what}: decoded\n ours   {got:?}\n python {expected:?}"
            );
            let again = enc.encode(&batch(&rt, &[got])).expect(&what);
            assert_eq!(
                hex_of(payload(&again, 0)),
                hex_of(&b64(v["decoded_base64"].as_str().unwrap())),
                "{what}: the decoded row written again"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

#[test]
fn python_decode_cases() {
    for name in files(true) {
        let file = load(&name);
        let rt = row_type(&golden::columns(&file));
        let opts = golden::options(&file);
        let dec = protobuf_format::decoder_in(&vectors(), &opts, &rt).expect(&name);
        for c in file["cases"].as_array().unwrap() {
            let what = format!("{name} [{}]", c["input"]);
            let got = decode_one(&dec, &rt, &b64(c["base64"].as_str().unwrap()));
            match c["result"].as_str().unwrap() {
                "row" => {
                    let want = to_row(&rt, &c["row"]).expect(&what);
                    let got = got.expect(&what);
                    assert!(
                        same_row(&got, &want),
                        "{what}: ours {got:?}, python {want:?}"
                    );
                    let enc = protobuf_format::encoder_in(&vectors(), &opts, &rt).expect(&name);
                    let again = enc.encode(&batch(&rt, &[got])).expect(&what);
                    assert_eq!(
                        hex_of(payload(&again, 0)),
                        hex_of(&b64(c["row_base64"].as_str().unwrap())),
                        "{what}: the row written again"
                    );
                }
                "null" => {
                    let e = got.expect_err(&what);
                    assert!(e.starts_with(SKIPPED), "{what}: {e}");
                }
                _ => {
                    let e = got.expect_err(&what);
                    assert!(!e.starts_with(SKIPPED), "{what}: {e}");
                    assert!(
                        e.starts_with("Failed to deserialize PB object (message `pulsar_connect.golden.AllTypes`)"),
                        "{what}: {e}"
                    );
                }
            }
        }
    }
}

fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn refused(pairs: &[(&str, &str)], cols: &[(&str, &str)]) -> ConfigError {
    let cols: Vec<(String, String)> = cols
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    protobuf_format::decoder_in(&vectors(), &options(pairs), &row_type(&cols)).expect_err("refused")
}

const FILE: (&str, &str) = ("descriptor-file", "golden.desc");
const MSG: (&str, &str) = ("message-name", "pulsar_connect.golden.AllTypes");

#[test]
fn configuration_errors_name_the_option_column_and_message() {
    let e = refused(
        &[FILE, ("message-name", "pulsar_connect.golden.Nope")],
        &[("f_int32", "INT")],
    );
    assert_eq!(e.option.as_deref(), Some("message-name"));
    assert!(
        e.message.starts_with("message `pulsar_connect.golden.Nope` is not in descriptor set `golden.desc` (its messages: pulsar_connect.golden.AllTypes, "),
        "{}",
        e.message
    );
    let e = refused(&[FILE], &[("f_int32", "INT")]);
    assert_eq!(e.option.as_deref(), Some("message-name"));
    for (file, want) in [
        (
            "missing.desc",
            "cannot read `missing.desc` in the plugin's descriptors folder",
        ),
        (
            "../golden.desc",
            "must be a path relative to the plugin's descriptors folder",
        ),
        (
            "/etc/passwd",
            "must be a path relative to the plugin's descriptors folder",
        ),
        ("golden2.json", "cannot read"),
        ("all-types-proto3.json", "is not a valid descriptor set"),
    ] {
        let e = refused(&[("descriptor-file", file), MSG], &[("f_int32", "INT")]);
        assert_eq!(e.option.as_deref(), Some("descriptor-file"), "{file}");
        assert!(e.message.contains(want), "{file}: {}", e.message);
    }
    let e = refused(&[MSG], &[("f_int32", "INT")]);
    assert_eq!(e.option.as_deref(), Some("descriptor-file"));
    let e = refused(
        &[FILE, MSG, ("message-class-name", "x")],
        &[("f_int32", "INT")],
    );
    assert_eq!(e.option.as_deref(), Some("message-class-name"));
    // Flink's schema validation messages, with the message named.
    for (cols, want) in [
        (
            vec![("nope", "INT")],
            "Column nope does not exists in definition of proto class.",
        ),
        (
            vec![("f_int32", "BIGINT")],
            "Protobuf field type does not match column type, INT(protobuf) is not compatible of BIGINT",
        ),
        (
            vec![("f_string", "BYTES")],
            "Protobuf field type does not match column type, STRING(protobuf) is not compatible of VARBINARY",
        ),
        (
            vec![("f_int64", "TIMESTAMP(3)")],
            "Protobuf field type does not match column type, LONG(protobuf) is not compatible of TIMESTAMP_WITHOUT_TIME_ZONE",
        ),
        (
            vec![("f_inner", "STRING")],
            "Unexpected LogicalType: STRING. It should be RowType",
        ),
        (
            vec![("f_ints", "INT")],
            "Unexpected LogicalType: INT. It should be ArrayType",
        ),
        (
            vec![("f_counts", "ARRAY<BIGINT>")],
            "Unexpected LogicalType: ARRAY<BIGINT>. It should be MapType",
        ),
        (
            vec![("f_inners", "ARRAY<INT>")],
            "Unexpected logicalType: INT. It should be RowType",
        ),
        (
            vec![("f_inner", "ROW<`zz` INT>")],
            "Column zz does not exists in definition of proto class.",
        ),
    ] {
        let e = refused(&[FILE, MSG], &cols);
        assert_eq!(
            e.message,
            format!("{want} (message `pulsar_connect.golden.AllTypes`)"),
            "{cols:?}"
        );
    }
}

#[test]
fn a_null_required_field_is_a_row_error_naming_the_message() {
    let rt = row_type(&[
        ("id".into(), "BIGINT".into()),
        ("count".into(), "INT".into()),
    ]);
    let opts = options(&[FILE, ("message-name", "pulsar_connect.golden2.Record")]);
    let enc = protobuf_format::encoder_in(&vectors(), &opts, &rt).unwrap();
    let out = enc
        .encode(&batch(
            &rt,
            &[
                vec![Value::Null, Value::I32(1)],
                vec![Value::I64(1), Value::Null],
            ],
        ))
        .unwrap();
    assert_eq!(out.errors.len(), 1);
    assert_eq!(out.errors[0].index, 0);
    assert_eq!(
        out.errors[0].reason,
        "Message missing required fields: id (message `pulsar_connect.golden2.Record`)"
    );
    assert_eq!(hex_of(payload(&out, 1)), "0801");
}

#[test]
fn oneof_members_the_last_non_null_wins() {
    let rt = row_type(&[
        ("c_name".into(), "STRING".into()),
        ("c_number".into(), "BIGINT".into()),
    ]);
    let enc = protobuf_format::encoder_in(&vectors(), &options(&[FILE, MSG]), &rt).unwrap();
    let out = enc
        .encode(&batch(
            &rt,
            &[vec![Value::String("n".into()), Value::I64(0)]],
        ))
        .unwrap();
    // Only c_number (field 27, varint 0: written, a oneof member has presence).
    assert_eq!(hex_of(payload(&out, 0)), "d80100");
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn flinks_message_class_name_finds_the_message_of_the_generated_class() {
    let rt = row_type(&[("id".into(), "BIGINT".into())]);
    for (class, message) in [
        // java_package + java_multiple_files.
        (
            "dev.pulsarconnect.golden.AllTypes",
            "pulsar_connect.golden.AllTypes",
        ),
        // No Java options: the proto package and the outer class named after the file.
        (
            "pulsar_connect.golden2.Golden2$Record",
            "pulsar_connect.golden2.Record",
        ),
        (
            "pulsar_connect.golden2.Golden2.Item",
            "pulsar_connect.golden2.Item",
        ),
    ] {
        let cols = if message.ends_with("AllTypes") {
            row_type(&[("f_int32".into(), "INT".into())])
        } else if message.ends_with("Item") {
            row_type(&[("x".into(), "INT".into())])
        } else {
            rt.clone()
        };
        let d = protobuf_format::decoder_in(
            &vectors(),
            &options(&[FILE, ("message-class-name", class)]),
            &cols,
        )
        .unwrap_or_else(|e| panic!("{class}: {e:?}"));
        assert_eq!(d.message_name(), message, "{class}");
    }
    let e = refused(
        &[FILE, ("message-class-name", "com.example.Nope")],
        &[("f_int32", "INT")],
    );
    assert_eq!(e.option.as_deref(), Some("message-class-name"));
    assert!(
        e.message.contains("generates the Java class `com.example.Nope` (its classes: dev.pulsarconnect.golden.AllTypes, "),
        "{}",
        e.message
    );
}
