//! The changelog formats as built (`plugins/{debezium,canal,maxwell}-json`), WIT 0.2.0 components, through
//! the real wasm runtime and the host's checks of what a 0.2.0 decoder returns (rows per message, row
//! kinds, metadata columns), against Flink 1.18's golden vectors (`tests/golden/vectors/<format>/`). The
//! full value-by-value comparison runs natively in `guest-formats/changelog`; here every decode case's
//! outcome (rows, their kinds, ids and names, one metadata key, or an error or a skip) and every
//! serialization vector (Flink's bytes decoded, then encoded back with their kinds) is checked behind the
//! boundary. Also: a frozen WIT 0.1.0 plugin loads and decodes next to them.

use arrow::array::{Array, Int32Array, RecordBatch, StringArray};
use pulsar_connect::plugins::model::RowKind;
use pulsar_connect::plugins::{Decoded, Decoder, Encoder, MessageBatchBuilder, MessageRef};
use serde_json::Value as Json;

use super::golden_wasm::{Formats, bytes_of, columns, options, schema_of, vectors};

const FORMATS: [&str; 3] = ["debezium-json", "canal-json", "maxwell-json"];

fn decode(decoder: &mut Decoder, payload: &[u8]) -> Decoded {
    let mut messages = MessageBatchBuilder::new();
    messages.push(MessageRef {
        payload,
        ..Default::default()
    });
    decoder
        .decode(messages.finish(false))
        .unwrap_or_else(|e| panic!("decode-batch failed: {e:?}"))
}

fn kind_of(text: &str) -> RowKind {
    RowKind::ALL
        .into_iter()
        .find(|k| k.short_string() == text)
        .unwrap_or_else(|| panic!("row kind {text}"))
}

fn kinds(decoded: &Decoded) -> Vec<RowKind> {
    decoded
        .kinds
        .clone()
        .unwrap_or_else(|| vec![RowKind::Insert; decoded.batch.num_rows()])
}

fn int(batch: &RecordBatch, column: &str, row: usize) -> Option<i64> {
    let a = batch.column_by_name(column).expect("column");
    let a = a.as_any().downcast_ref::<Int32Array>().expect("INT column");
    (!a.is_null(row)).then(|| i64::from(a.value(row)))
}

fn string(batch: &RecordBatch, column: &str, row: usize) -> Option<String> {
    let a = batch.column_by_name(column).expect("column");
    let a = a
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("STRING column");
    (!a.is_null(row)).then(|| a.value(row).to_owned())
}

/// Cases whose `id` (`INT NOT NULL`) Flink leaves NULL: an Arrow batch cannot hold that, so the message
/// fails instead (as natively, see guest-formats/changelog).
fn null_id(case: &Json) -> bool {
    let rows = case["rows"].as_array().into_iter().flatten();
    rows.chain(
        case["emitted_before_error"]
            .as_array()
            .into_iter()
            .flatten(),
    )
    .any(|r| r["row"]["id"].is_null())
}

/// Every case of a decode file: the same rows (kinds, ids, names, a metadata key), skip or error.
fn decode_file(formats: &Formats, format: &str, rel: &str) -> usize {
    let plugin = formats.load(format);
    let file = vectors(rel);
    let keys: Vec<String> = file["metadata"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let mut cols = columns(&file);
    for k in &keys {
        cols.push((
            k.clone(),
            file["metadata_types"][k].as_str().unwrap().to_owned(),
        ));
    }
    let made = Decoder::with_metadata(&plugin, &options(&file), schema_of(&cols), &keys);
    if file.get("config_error").is_some() {
        assert!(made.is_err(), "{rel}: Flink refuses the configuration");
        return 1;
    }
    let mut decoder = made.unwrap_or_else(|e| panic!("{rel}: create-decoder: {e:?}"));
    // A string metadata key to compare row by row, when the file reads one.
    let text_key = keys
        .iter()
        .find(|k| file["metadata_types"][k.as_str()] == "STRING" && *k != "schema");
    let mut checked = 0;
    for case in file["cases"].as_array().unwrap() {
        let input = case["input"].as_str().unwrap_or("");
        // A null payload arrives as an empty one (the host's message batch has no nulls).
        let payload = bytes_of(&case["base64"]).unwrap_or_default();
        let decoded = decode(&mut decoder, &payload);
        let error = decoded.errors.first();
        if case["result"] == "error" || null_id(case) {
            assert!(
                error.is_some_and(|e| !e.skip) && decoded.batch.num_rows() == 0,
                "{rel} [{input}]: Flink fails, we gave {error:?} and {} rows",
                decoded.batch.num_rows()
            );
            checked += 1;
            continue;
        }
        let want = case["rows"].as_array().unwrap();
        if want.is_empty() {
            assert!(
                decoded.batch.num_rows() == 0 && error.is_none_or(|e| e.skip),
                "{rel} [{input}]: Flink emits no row, we gave {error:?}"
            );
            checked += 1;
            continue;
        }
        assert!(error.is_none(), "{rel} [{input}]: {error:?}");
        let batch = &decoded.batch;
        assert_eq!(batch.num_rows(), want.len(), "{rel} [{input}]: rows");
        let got_kinds = kinds(&decoded);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(
                got_kinds[i],
                kind_of(w["kind"].as_str().unwrap()),
                "{rel} [{input}] row {i}: kind"
            );
            assert_eq!(
                int(batch, "id", i),
                w["row"]["id"].as_i64(),
                "{rel} [{input}] row {i}: id"
            );
            assert_eq!(
                string(batch, "name", i).as_deref(),
                w["row"]["name"].as_str(),
                "{rel} [{input}] row {i}: name"
            );
            if let Some(k) = text_key {
                assert_eq!(
                    string(batch, k, i).as_deref(),
                    w["metadata"][k.as_str()].as_str(),
                    "{rel} [{input}] row {i}: metadata {k}"
                );
            }
        }
        checked += 1;
    }
    checked
}

#[test]
fn flink_decode_cases_of_the_changelog_formats_through_wasm() {
    let formats = Formats::new();
    let mut checked = 0;
    for format in FORMATS {
        let dir = pulsar_connect_tests::guests::repo_root()
            .join("tests/golden/vectors")
            .join(format);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .expect("vector folder")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("decode-"))
            .collect();
        files.sort();
        assert!(files.len() >= 4, "{format}: decode files");
        for f in files {
            checked += decode_file(&formats, format, &format!("{format}/{f}"));
        }
    }
    assert!(checked > 800, "only {checked} cases checked");
}

/// Flink's serialized rows (every kind) → wasm decoder → the rows Flink decodes → wasm encoder with their
/// kinds → Flink's bytes.
fn serialization_file(formats: &Formats, format: &str, rel: &str) -> usize {
    let plugin = formats.load(format);
    let file = vectors(rel);
    if file.get("config_error").is_some() {
        let cols = vec![("id".to_owned(), "INT".to_owned())];
        assert!(
            Encoder::new(&plugin, &options(&file), schema_of(&cols)).is_err(),
            "{rel}: Flink refuses the configuration"
        );
        return 1;
    }
    let schema = schema_of(&columns(&file));
    let opts = options(&file);
    let mut decoder = Decoder::new(&plugin, &opts, schema.clone())
        .unwrap_or_else(|e| panic!("{rel}: create-decoder: {e:?}"));
    let mut encoder = Encoder::new(&plugin, &opts, schema)
        .unwrap_or_else(|e| panic!("{rel}: create-encoder: {e:?}"));
    // Rows Flink itself does not decode back to the same values (TIME(3) millis dropped, -0.0 read as
    // 0.0, ...): their bytes cannot come back from decoded rows; their kinds are still checked.
    let lossy: Vec<&str> = file["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| (v["kind"] == "+I" || v["kind"] == "-D") && v["roundtrip_equal"] == false)
        .filter_map(|v| v["name"].as_str())
        .collect();
    let mut checked = 0;
    for v in file["vectors"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap_or("");
        let Some(flink) = bytes_of(&v["base64"]) else {
            continue;
        };
        let decoded = decode(&mut decoder, &flink);
        if let Some(e) = decoded.errors.first() {
            // TIMESTAMP(9) rows outside i64 nanoseconds, or Flink's own decode error.
            assert!(
                v.get("decode_error").is_some()
                    || ["max-values", "min-values", "old-dates", "far-future"].contains(&name),
                "{rel} [{name} {}]: {}",
                v["kind"],
                e.reason
            );
            continue;
        }
        let want = v["decoded"].as_array().unwrap();
        let got = kinds(&decoded);
        assert_eq!(got.len(), want.len(), "{rel} [{name}]");
        for (k, w) in got.iter().zip(want) {
            assert_eq!(*k, kind_of(w["kind"].as_str().unwrap()), "{rel} [{name}]");
        }
        let encoded = encoder
            .encode_changes(&decoded.batch, Some(&got))
            .unwrap_or_else(|e| panic!("{rel} [{name}]: encode-batch: {e:?}"));
        assert!(
            encoded.errors.is_empty(),
            "{rel} [{name}]: {:?}",
            encoded.errors
        );
        assert!(!encoded.is_absent(0), "{rel} [{name}]: no tombstones");
        checked += 1;
        if lossy.contains(&name) {
            continue;
        }
        assert_eq!(
            String::from_utf8_lossy(encoded.payload(0)),
            String::from_utf8_lossy(&flink),
            "{rel} [{name} {}]: re-encoded bytes differ from Flink's",
            v["kind"]
        );
    }
    checked
}

#[test]
fn flink_serialized_changelog_rows_round_trip_through_wasm() {
    let formats = Formats::new();
    let mut checked = 0;
    for format in FORMATS {
        for set in ["default", "timestamp-iso8601", "decimal-plain-number"] {
            checked += serialization_file(&formats, format, &format!("{format}/{set}.json"));
        }
    }
    checked += serialization_file(
        &formats,
        "debezium-json",
        "debezium-json/schema-include.json",
    );
    assert!(checked > 500, "only {checked} vectors checked");
}

#[test]
fn an_encoder_is_never_given_a_kind_its_manifest_does_not_list() {
    let formats = Formats::new();
    let plugin = formats.load("json");
    let cols = vec![("id".to_owned(), "INT".to_owned())];
    let schema = schema_of(&cols);
    let mut encoder = Encoder::new(&plugin, &[], schema.clone()).expect("json encoder");
    let batch =
        RecordBatch::try_new(schema, vec![std::sync::Arc::new(Int32Array::from(vec![1]))]).unwrap();
    let e = encoder
        .encode_changes(&batch, Some(&[RowKind::Delete]))
        .expect_err("json writes inserts only");
    assert!(format!("{e}").contains("-D row"), "{e}");
    assert!(
        encoder
            .encode_changes(&batch, Some(&[RowKind::Insert]))
            .is_ok()
    );
}
