//! The built-in formats as built (`plugins/{json,avro,raw,csv}` from `cargo xtask build-plugins`),
//! through the real wasm runtime and Arrow RecordBatches, against a representative subset of Flink's
//! golden vectors (tests/golden/vectors). The full vector suites run natively in guest-formats
//! (`cargo test --manifest-path guest-formats/Cargo.toml`); this test shows the components behave the
//! same behind the boundary.
//!
//! Directions covered: Flink's bytes → wasm decoder → Arrow (values checked) → wasm encoder → Flink's
//! bytes again (json, avro, csv); Arrow rows → wasm encoder → Flink's bytes (raw); Flink's malformed
//! inputs → the same row / skip / error outcome; Flink's configuration errors → factory errors.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use pulsar_connect::plugins::schema::arrow_schema;
use pulsar_connect::plugins::{
    Decoded, Decoder, Encoder, HostConfig, MessageBatchBuilder, MessageRef, Plugin, PluginDir,
    PluginHost, model,
};
use pulsar_connect_tests::guests::repo_root;
use serde_json::Value as Json;

fn plugin_dir() -> PathBuf {
    let dir = std::env::var_os("PULSAR_CONNECT_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("plugins"));
    for name in ["json", "avro", "raw", "csv"] {
        let folder = dir.join(name);
        assert!(
            folder.join("plugin.toml").is_file() && folder.join(format!("{name}.wasm")).is_file(),
            "format plugin `{name}` is not built in {}: run `cargo xtask build-plugins` first \
             (or point PULSAR_CONNECT_PLUGIN_DIR at a plugin directory holding json, avro, raw and csv)",
            dir.display()
        );
    }
    dir
}

pub(super) struct Formats {
    host: PluginHost,
    dir: PluginDir,
}

impl Formats {
    pub(super) fn new() -> Formats {
        let dir = PluginDir::open(&plugin_dir()).expect("opening the plugin directory");
        let host = PluginHost::new(HostConfig::default()).expect("plugin host");
        Formats { host, dir }
    }

    pub(super) fn load(&self, name: &str) -> Plugin {
        self.host
            .load(&self.dir, name)
            .unwrap_or_else(|e| panic!("loading format plugin `{name}`: {e:?}"))
    }
}

pub(super) fn vectors(rel: &str) -> Json {
    let path = repo_root().join("tests/golden/vectors").join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// A Flink SQL type string parsed into the WIT row type's entries (children after parents).
struct TypeParser<'a> {
    s: &'a [u8],
    i: usize,
    types: Vec<model::TypeNode>,
}

impl TypeParser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn args(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        if self.eat(b'(') {
            loop {
                out.push(self.word().parse().expect("type parameter"));
                if self.eat(b')') {
                    break;
                }
                assert!(self.eat(b','), "bad type parameters");
            }
        }
        out
    }

    fn parse(&mut self) -> u32 {
        let index = self.types.len();
        self.types.push(model::TypeNode {
            data_type: model::DataType::Boolean,
            nullable: true,
        });
        let name = self.word().to_ascii_uppercase();
        let data_type = match name.as_str() {
            "BOOLEAN" => model::DataType::Boolean,
            "TINYINT" => model::DataType::Tinyint,
            "SMALLINT" => model::DataType::Smallint,
            "INT" => model::DataType::Int,
            "BIGINT" => model::DataType::Bigint,
            "FLOAT" => model::DataType::Float,
            "DOUBLE" => model::DataType::Double,
            "DECIMAL" => {
                let a = self.args();
                model::DataType::Decimal(model::DecimalType {
                    precision: a[0] as u8,
                    scale: a[1] as u8,
                })
            }
            "CHAR" => model::DataType::Char(self.args()[0]),
            "VARCHAR" => model::DataType::Varchar(self.args()[0]),
            "STRING" => model::DataType::Varchar(i32::MAX as u32),
            "BINARY" => model::DataType::Binary(self.args()[0]),
            "VARBINARY" => model::DataType::Varbinary(self.args()[0]),
            "BYTES" => model::DataType::Varbinary(i32::MAX as u32),
            "DATE" => model::DataType::Date,
            "TIME" => model::DataType::Time(self.args()[0] as u8),
            "TIMESTAMP" => model::DataType::Timestamp(self.args()[0] as u8),
            "TIMESTAMP_LTZ" => model::DataType::TimestampLtz(self.args()[0] as u8),
            "ARRAY" => {
                assert!(self.eat(b'<'));
                let e = self.parse();
                assert!(self.eat(b'>'));
                model::DataType::Array(e)
            }
            "MAP" => {
                assert!(self.eat(b'<'));
                let key = self.parse();
                // Arrow map keys are never NULL (the host maps every MAP key as NOT NULL, as Flink's
                // tables effectively do).
                self.types[key as usize].nullable = false;
                assert!(self.eat(b','));
                let value = self.parse();
                assert!(self.eat(b'>'));
                model::DataType::Map(model::MapType { key, value })
            }
            "ROW" => {
                assert!(self.eat(b'<'));
                let mut fields = Vec::new();
                loop {
                    let name = self.word();
                    let type_index = self.parse();
                    fields.push(model::Field { name, type_index });
                    if self.eat(b'>') {
                        break;
                    }
                    assert!(self.eat(b','));
                }
                model::DataType::Row(fields)
            }
            other => panic!("unknown type {other}"),
        };
        self.ws();
        if self.s[self.i..].starts_with(b"NOT NULL") {
            self.i += 8;
            self.types[index].nullable = false;
        }
        self.types[index].data_type = data_type;
        index as u32
    }
}

fn row_type(columns: &[(String, String)]) -> model::RowType {
    let mut p = TypeParser {
        s: b"",
        i: 0,
        types: Vec::new(),
    };
    let mut fields = Vec::new();
    for (name, ty) in columns {
        p.s = ty.as_bytes();
        p.i = 0;
        let type_index = p.parse();
        fields.push(model::Field {
            name: name.clone(),
            type_index,
        });
    }
    model::RowType {
        types: p.types,
        fields,
    }
}

pub(super) fn columns(file: &Json) -> Vec<(String, String)> {
    pulsar_connect_tests::vector_columns(file)
}

pub(super) fn schema_of(columns: &[(String, String)]) -> SchemaRef {
    Arc::new(arrow_schema(&row_type(columns)).expect("arrow schema of the vector columns"))
}

/// The file's options without the `<format>.` prefix (the connector strips it).
pub(super) fn options(file: &Json) -> Vec<(String, String)> {
    let prefix = format!("{}.", file["format"].as_str().unwrap());
    file["options"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.strip_prefix(&prefix).unwrap_or(k).to_owned(),
                        v.as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn bytes_of(b64: &Json) -> Option<Vec<u8>> {
    b64.as_str()
        .map(|s| STANDARD.decode(s).expect("vector base64"))
}

fn decode_one(decoder: &mut Decoder, payload: &[u8]) -> Decoded {
    let mut messages = MessageBatchBuilder::new();
    messages.push(MessageRef {
        payload,
        ..Default::default()
    });
    let decoded = decoder
        .decode(messages.finish(false))
        .unwrap_or_else(|e| panic!("decode-batch failed: {e:?}"));
    assert_eq!(
        decoded.batch.num_rows() + decoded.errors.len(),
        1,
        "one row or one error per message"
    );
    decoded
}

pub(super) fn int_at(batch: &RecordBatch, column: &str) -> Option<i64> {
    let array = batch.column_by_name(column).expect("column");
    let ints = array
        .as_any()
        .downcast_ref::<Int32Array>()
        .expect("INT column as Int32");
    (!ints.is_null(0)).then(|| i64::from(ints.value(0)))
}

pub(super) fn string_at(batch: &RecordBatch, column: &str) -> Option<String> {
    let array = batch.column_by_name(column).expect("column");
    let strings = array
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("STRING column as Utf8");
    (!strings.is_null(0)).then(|| strings.value(0).to_owned())
}

/// Flink's bytes → wasm decoder → Arrow (checked) → wasm encoder → Flink's bytes.
fn flink_bytes_round_trip(formats: &Formats, format: &str, rel: &str, not_exact: &[&str]) -> usize {
    // Rows whose TIMESTAMP(9) lies outside the i64 nanosecond range (years 0001 and 9999): our
    // columns cannot hold them, so the decoder reports a row error.
    // TIMESTAMP(9) values outside i64 nanoseconds (years 0001, 1000/1582, 9999, 2262 + 1 ns).
    const UNREPRESENTABLE: &[&str] = &["max-values", "min-values", "old-dates", "far-future"];
    let plugin = formats.load(format);
    let file = vectors(rel);
    let schema = schema_of(&columns(&file));
    let opts = options(&file);
    let mut decoder = Decoder::new(&plugin, &opts, schema.clone())
        .unwrap_or_else(|e| panic!("{rel}: create-decoder: {e:?}"));
    let mut encoder = Encoder::new(&plugin, &opts, schema.clone())
        .unwrap_or_else(|e| panic!("{rel}: create-encoder: {e:?}"));
    let mut checked = 0;
    for v in file["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap_or("");
        let Some(flink) = bytes_of(&v["base64"]) else {
            continue;
        };
        let decoded = decode_one(&mut decoder, &flink);
        if v.get("decode_error").is_some() {
            assert_eq!(
                decoded.errors.len(),
                1,
                "{rel} [{name}]: Flink fails to decode it"
            );
            checked += 1;
            continue;
        }
        let expected = &v["decoded"];
        if let Some(e) = decoded.errors.first() {
            assert!(
                UNREPRESENTABLE.contains(&name),
                "{rel} [{name}]: decode error {}",
                e.reason
            );
            continue;
        }
        let batch = &decoded.batch;
        assert_eq!(
            int_at(batch, "id"),
            expected["id"].as_i64(),
            "{rel} [{name}]: id"
        );
        if schema.field_with_name("c_string_nn").is_ok() {
            assert_eq!(
                string_at(batch, "c_string_nn").as_deref(),
                expected["c_string_nn"].as_str(),
                "{rel} [{name}]: c_string_nn"
            );
        }
        let encoded = encoder
            .encode(batch)
            .unwrap_or_else(|e| panic!("{rel} [{name}]: encode-batch: {e:?}"));
        assert!(
            encoded.errors.is_empty(),
            "{rel} [{name}]: {:?}",
            encoded.errors
        );
        if !not_exact.contains(&name) && !not_exact.contains(&"*") {
            assert_eq!(
                String::from_utf8_lossy(encoded.payload(0)),
                String::from_utf8_lossy(&flink),
                "{rel} [{name}]: re-encoded bytes differ from Flink's"
            );
            assert_eq!(encoded.payload(0), flink.as_slice(), "{rel} [{name}]");
        }
        checked += 1;
    }
    checked
}

#[test]
fn flink_bytes_decode_and_encode_back_through_wasm() {
    let formats = Formats::new();
    // Vectors whose re-encoded bytes may differ from Flink's: none so far.
    let floats: &[&str] = &[];
    let mut checked = 0;
    for (format, rel, not_exact) in [
        ("json", "json/default.json", floats),
        ("json", "json/timestamp-iso8601.json", floats),
        ("json", "json/iso8601-literal-plain-number.json", floats),
        ("avro", "avro/default.json", floats),
        ("csv", "csv/default.json", floats),
        // Flink itself reads a NULL array as `[NULL]` here (the null literal is one element), so
        // decode → encode cannot give back the NULL arrays' bytes (rows are still decoded and checked).
        (
            "csv",
            "csv/semicolon-single-quote-null-literal.json",
            &["*"][..],
        ),
        ("csv", "csv/escape-character-backslash.json", floats),
    ] {
        checked += flink_bytes_round_trip(&formats, format, rel, not_exact);
    }
    assert!(checked > 40, "only {checked} vectors checked");
}

/// Flink's decode cases: the same row / skip / error outcome.
fn decode_cases(formats: &Formats, format: &str, rel: &str) -> usize {
    let plugin = formats.load(format);
    let file = vectors(rel);
    let cols = columns(&file);
    let schema = schema_of(&cols);
    let mut decoder = Decoder::new(&plugin, &options(&file), schema)
        .unwrap_or_else(|e| panic!("{rel}: create-decoder: {e:?}"));
    let first = cols[0].clone();
    let mut checked = 0;
    for case in file["cases"].as_array().unwrap() {
        let input = case["input"].as_str().unwrap_or("");
        // A message batch has no null payloads (an empty payload stands for one).
        let Some(payload) = bytes_of(&case["base64"]) else {
            continue;
        };
        let decoded = decode_one(&mut decoder, &payload);
        let error = decoded.errors.first().cloned();
        match case["result"].as_str().unwrap() {
            "row" => {
                assert!(error.is_none(), "{rel} [{input}]: {error:?}");
                let want = &case["row"][&first.0];
                match first.1.as_str() {
                    "INT" => assert_eq!(
                        int_at(&decoded.batch, &first.0),
                        want.as_i64(),
                        "{rel} [{input}]"
                    ),
                    "STRING" => assert_eq!(
                        string_at(&decoded.batch, &first.0).as_deref(),
                        want.as_str(),
                        "{rel} [{input}]"
                    ),
                    _ => {}
                }
            }
            "null" => assert!(
                error.as_ref().is_some_and(|e| e.skip),
                "{rel} [{input}]: Flink skips it, we gave {error:?}"
            ),
            _ => {
                // raw: an empty payload of a fixed-size type reads as NULL (it is how a NULL
                // arrives), where Flink fails on an empty payload.
                if format == "raw" && payload.is_empty() {
                    assert!(error.is_none(), "{rel} [{input}]");
                } else {
                    assert!(
                        error.as_ref().is_some_and(|e| !e.skip),
                        "{rel} [{input}]: Flink fails, we gave {error:?}"
                    );
                }
            }
        }
        checked += 1;
    }
    checked
}

#[test]
fn flink_decode_cases_through_wasm() {
    let formats = Formats::new();
    let mut checked = 0;
    for (format, rel) in [
        ("json", "json/decode-default.json"),
        ("json", "json/decode-ignore-parse-errors.json"),
        ("json", "json/decode-fail-on-missing-field.json"),
        ("avro", "avro/decode-default.json"),
        ("csv", "csv/decode-default.json"),
        ("csv", "csv/decode-ignore-parse-errors.json"),
        ("csv", "csv/decode-allow-comments.json"),
        ("raw", "raw/decode-int-UTF-8-little-endian.json"),
        ("raw", "raw/decode-string-UTF-16BE-big-endian.json"),
        ("raw", "raw/decode-string-UTF-8-big-endian.json"),
    ] {
        checked += decode_cases(&formats, format, rel);
    }
    assert!(checked > 150, "only {checked} cases checked");
}

/// Arrow rows → wasm raw encoder → Flink's bytes (and back).
fn raw_rows(formats: &Formats, rel: &str, array: impl Fn(&[Json]) -> ArrayRef) {
    let plugin = formats.load("raw");
    let file = vectors(rel);
    let schema = schema_of(&columns(&file));
    let opts = options(&file);
    let vectors = file["vectors"].as_array().unwrap();
    let values: Vec<Json> = vectors
        .iter()
        .map(|v| v["values"]["value"].clone())
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), vec![array(&values)]).expect("batch");
    let mut encoder = Encoder::new(&plugin, &opts, schema.clone()).expect("create-encoder");
    let encoded = encoder.encode(&batch).expect("encode-batch");
    assert!(encoded.errors.is_empty(), "{rel}: {:?}", encoded.errors);
    for (i, v) in vectors.iter().enumerate() {
        // A NULL value: Flink writes a null payload, we an empty one.
        let want = bytes_of(&v["base64"]).unwrap_or_default();
        assert_eq!(
            encoded.payload(i),
            want.as_slice(),
            "{rel}: row {i} ({})",
            v["values"]
        );
    }
    let mut messages = MessageBatchBuilder::new();
    for i in 0..encoded.len() {
        messages.push(MessageRef {
            payload: encoded.payload(i),
            ..Default::default()
        });
    }
    let mut decoder = Decoder::new(&plugin, &opts, schema).expect("create-decoder");
    let decoded = decoder
        .decode(messages.finish(false))
        .expect("decode-batch");
    assert!(decoded.errors.is_empty(), "{rel}: {:?}", decoded.errors);
    assert_eq!(decoded.batch.num_rows(), vectors.len());
}

#[test]
fn raw_rows_to_flink_bytes_through_wasm() {
    let formats = Formats::new();
    for rel in [
        "raw/int-UTF-8-big-endian.json",
        "raw/int-UTF-8-little-endian.json",
    ] {
        raw_rows(&formats, rel, |values| {
            Arc::new(Int32Array::from(
                values
                    .iter()
                    .map(|v| v.as_i64().map(|x| x as i32))
                    .collect::<Vec<_>>(),
            )) as ArrayRef
        });
    }
    for rel in [
        "raw/string-UTF-8-big-endian.json",
        "raw/string-UTF-16-big-endian.json",
        "raw/string-UTF-16LE-big-endian.json",
        "raw/string-ISO-8859-1-big-endian.json",
    ] {
        // Flink writes NULL as a null payload; '' and NULL both come out empty here.
        raw_rows(&formats, rel, |values| {
            Arc::new(StringArray::from(
                values.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            )) as ArrayRef
        });
    }
}

#[test]
fn flink_configuration_errors_through_wasm() {
    let formats = Formats::new();
    let opts = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let schema = |cols: &[(&str, &str)]| {
        schema_of(
            &cols
                .iter()
                .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                .collect::<Vec<_>>(),
        )
    };
    let json = formats.load("json");
    let both = opts(&[
        ("fail-on-missing-field", "true"),
        ("ignore-parse-errors", "true"),
    ]);
    assert!(Decoder::new(&json, &both, schema(&[("a", "INT")])).is_err());
    let raw = formats.load("raw");
    assert!(Decoder::new(&raw, &[], schema(&[("a", "INT"), ("b", "INT")])).is_err());
    assert!(Encoder::new(&raw, &[], schema(&[("d", "DATE")])).is_err());
    let avro = formats.load("avro");
    assert!(Decoder::new(&avro, &[], schema(&[("t", "TIMESTAMP_LTZ(3)")])).is_err());
    assert!(Encoder::new(&avro, &[], schema(&[("t", "TIMESTAMP(6)")])).is_err());
    let csv = formats.load("csv");
    assert!(Decoder::new(&csv, &[], schema(&[("m", "MAP<STRING, INT>")])).is_err());
    assert!(Encoder::new(&csv, &[], schema(&[("a", "ARRAY<ARRAY<INT>>")])).is_err());
}
