//! Checks of the changelog golden vectors (`tests/golden/vectors/{debezium,canal,maxwell}-json`, see
//! "Changelog formats" in `tests/golden/README.md`) against a format's native encoder and decoder.
//!
//! A null payload is decoded as an empty one (how the host hands a message without a value to a
//! format). Flink's "no row" is a skip here (a row error starting with `skipped: `); rows Flink emitted
//! before it threw (`emitted_before_error`) cannot come with an error in a decoded batch: such a case
//! must fail, and the report notes the rows.

use format_common::golden::{self, Report, files, load, messages, to_row, to_value};
use format_common::temporal::days_from_civil;
use format_common::{
    ColumnBatch, ConfigError, DataType, DecodedBatch, EncodedBatch, MessageBatch, RowKind, RowType,
    SKIPPED, Value,
};
use serde_json::Value as Json;

use crate::{Decoder, Encoder, Envelope, MetaKey};

pub type DecodeFn = Box<dyn Fn(&MessageBatch) -> Result<DecodedBatch, String>>;
pub type EncodeFn = Box<dyn Fn(&ColumnBatch, Option<&[RowKind]>) -> Result<EncodedBatch, String>>;
/// Creates a decoder: options (no prefix), the row type, the metadata keys.
pub type DecoderFactory =
    dyn Fn(&[(String, String)], &RowType, &[String]) -> Result<DecodeFn, ConfigError>;
pub type EncoderFactory = dyn Fn(&[(String, String)], &RowType) -> Result<EncodeFn, ConfigError>;
/// A format crate's `decoder`: options (no prefix), the row type, the metadata keys.
pub type DecoderOf<E> =
    fn(&[(String, String)], &RowType, &[String]) -> Result<Decoder<E>, ConfigError>;
/// A format crate's `encoder`: options (no prefix), the row type.
pub type EncoderOf = fn(&[(String, String)], &RowType) -> Result<Encoder, ConfigError>;

/// A decoded row: its kind (`+I`, `-U`, `+U`, `-D`) and values (the row's, then the metadata's).
pub type KindRow = (String, Vec<Value>);

pub fn kind_name(k: RowKind) -> &'static str {
    match k {
        RowKind::Insert => "+I",
        RowKind::UpdateBefore => "-U",
        RowKind::UpdateAfter => "+U",
        RowKind::Delete => "-D",
    }
}

fn kind_of(s: &str) -> RowKind {
    match s {
        "-U" => RowKind::UpdateBefore,
        "+U" => RowKind::UpdateAfter,
        "-D" => RowKind::Delete,
        _ => RowKind::Insert,
    }
}

fn b64(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    format_common::b64::decode(s.as_bytes(), &mut out).expect("base64 of a vector");
    out
}

fn show(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// Decodes one message: its rows with their kinds, or its row error (checking the batch's shape).
pub fn decode_one(
    dec: &DecodeFn,
    out: &RowType,
    payload: &[u8],
) -> Result<Result<Vec<KindRow>, String>, String> {
    let d = dec(&messages(&[payload]))?;
    let n = d.rows.row_count as usize;
    if let Some(e) = d.errors.first() {
        if n > 0 || e.index != 0 {
            return Err(format!("an error for message {} and {n} rows", e.index));
        }
        return Ok(Err(e.reason.clone()));
    }
    if let Some(m) = &d.messages
        && (m.len() != n || m.iter().any(|&i| i != 0))
    {
        return Err(format!("messages {m:?} for {n} rows of one message"));
    }
    if d.messages.is_none() && n != 1 {
        return Err(format!("no messages list for {n} rows"));
    }
    let kinds: Vec<RowKind> = match &d.kinds {
        Some(k) if k.len() == n => k.clone(),
        Some(k) => return Err(format!("{} kinds for {n} rows", k.len())),
        None => vec![RowKind::Insert; n],
    };
    let rows = golden::rows(out, &d.rows);
    Ok(Ok(kinds
        .iter()
        .map(|k| kind_name(*k).to_owned())
        .zip(rows)
        .collect()))
}

/// A TIMESTAMP_LTZ(3) value as java.time writes it beyond year 9999 (`+52566-12-06T02:38:43.000Z`).
fn far_millis(s: &str) -> Option<i64> {
    let s = s.strip_prefix('+')?.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let secs = t.next()?? * 3600 + t.next()?? * 60 + t.next()??;
    let ms: i64 = format!("{frac:0<3}")[..3].parse().ok()?;
    Some((days_from_civil(y, m as u32, day as u32) * 86_400 + secs) * 1000 + ms)
}

/// The expected values of a vector row: the row's fields, then the metadata keys'.
fn expected_row(
    out: &RowType,
    physical: &RowType,
    keys: &[String],
    row: &Json,
    meta: &Json,
) -> Result<Vec<Value>, String> {
    let mut values = to_row(physical, row)?;
    for (m, key) in keys.iter().enumerate() {
        let f = &out.fields[physical.fields.len() + m];
        let ty = f.type_index as usize;
        let j = &meta[key];
        let v = match to_value(out, ty, j) {
            Ok(v) => v,
            Err(e) => match (&out.types[ty].data_type, j.as_str().and_then(far_millis)) {
                (DataType::TimestampLtz(3), Some(ms)) => Value::Timestamp(ms),
                _ => return Err(format!("metadata {key}: {e}")),
            },
        };
        values.push(v);
    }
    Ok(values)
}

fn same_rows(a: &[KindRow], b: &[KindRow]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.0 == y.0 && golden::same_row(&x.1, &y.1))
}

fn show_rows(rows: &[KindRow]) -> String {
    rows.iter()
        .map(|(k, v)| format!("{k}{v:?}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares what we decoded with what Flink did: rows (`Some`, empty = no row) or an error (`None`).
fn compare(
    r: &mut Report,
    what: &str,
    got: Result<Vec<KindRow>, String>,
    want: Option<Vec<KindRow>>,
) {
    match (got, want) {
        (Ok(g), Some(w)) if same_rows(&g, &w) => {}
        (Err(e), Some(w)) if w.is_empty() && e.starts_with(SKIPPED) => {}
        (Err(e), None) if !e.starts_with(SKIPPED) => {}
        (got, Some(w)) => r.failures.push(format!(
            "{what}: Flink gives [{}], we gave {}",
            show_rows(&w),
            match got {
                Ok(g) => format!("[{}]", show_rows(&g)),
                Err(e) => format!("the error {e}"),
            }
        )),
        (got, None) => r.failures.push(format!(
            "{what}: Flink fails, we gave {}",
            match got {
                Ok(g) => format!("[{}]", show_rows(&g)),
                Err(e) => format!("a skip ({e})"),
            }
        )),
    }
}

/// Checks a serialization file: every row of the table under every row kind, encoded and compared
/// with Flink's text (or error); Flink's bytes decoded and compared with the rows Flink decoded.
pub fn check_serialization(rel: &str, enc: &EncoderFactory, dec: &DecoderFactory) -> Report {
    let mut r = Report::default();
    let file = load(rel);
    let table = load("table.json");
    let opts = golden::options(&file);
    if let Some(ce) = file.get("config_error") {
        r.checked += 1;
        let rt = golden::row_type(&golden::columns(&table));
        if enc(&opts, &rt).is_ok() {
            r.failures.push(format!(
                "{rel}: Flink refused the options ({}), we did not",
                ce["message"]
            ));
        }
        return r;
    }
    let rt = golden::row_type(&golden::columns(&file));
    let (enc, dec) = match (enc(&opts, &rt), dec(&opts, &rt, &[])) {
        (Ok(e), Ok(d)) => (e, d),
        (Err(e), _) | (_, Err(e)) => {
            r.failures.push(format!("{rel}: refused: {}", e.message));
            return r;
        }
    };
    for v in file["vectors"].as_array().expect("vectors") {
        let kind = v["kind"].as_str().unwrap_or("+I");
        let what = format!("{rel} [{} {kind}]", v["name"].as_str().unwrap_or(""));
        let values = &table["rows"][v["row"].as_u64().unwrap_or(0) as usize]["values"];
        match to_row(&rt, values) {
            Err(e) => r.notes.push(format!(
                "{what}: not encoded, our types cannot hold it: {e}"
            )),
            Ok(row) => {
                r.checked += 1;
                let out = match enc(&golden::batch(&rt, &[row]), Some(&[kind_of(kind)])) {
                    Ok(out) => out,
                    Err(e) => {
                        r.failures.push(format!("{what}: encode-batch failed: {e}"));
                        continue;
                    }
                };
                let ours = golden::payload(&out, 0);
                match (v.get("error"), out.errors.first()) {
                    (Some(_), Some(_)) => {}
                    (Some(flink), None) => r.failures.push(format!(
                        "{what}: Flink fails ({}), we wrote {}",
                        flink["message"],
                        show(ours)
                    )),
                    (None, Some(e)) => r.failures.push(format!("{what}: we failed: {}", e.reason)),
                    (None, None) => {
                        let want = b64(v["base64"].as_str().unwrap_or(""));
                        if ours != want.as_slice() {
                            r.failures.push(format!(
                                "{what}: encoded\n   ours  {}\n   flink {}",
                                show(ours),
                                show(&want)
                            ));
                        }
                    }
                }
            }
        }
        let Some(b) = v["base64"].as_str() else {
            continue;
        };
        r.checked += 1;
        let got = match decode_one(&dec, &rt, &b64(b)) {
            Ok(g) => g,
            Err(e) => {
                r.failures.push(format!("{what}: decode-batch: {e}"));
                continue;
            }
        };
        let want = match v.get("decoded").and_then(|d| d.as_array()) {
            None => None,
            Some(rows) => {
                let rows: Result<Vec<KindRow>, String> = rows
                    .iter()
                    .map(|x| {
                        Ok((
                            x["kind"].as_str().unwrap_or("").to_owned(),
                            to_row(&rt, &x["row"])?,
                        ))
                    })
                    .collect();
                match rows {
                    Ok(rows) => Some(rows),
                    Err(e) => {
                        // Flink's values do not fit our columns (a TIMESTAMP(9) beyond the i64
                        // nanoseconds): the message must fail.
                        r.notes.push(format!(
                            "{what}: Flink decodes values our types cannot hold ({e}): must fail"
                        ));
                        None
                    }
                }
            }
        };
        compare(&mut r, &format!("{what} decode"), got, want);
    }
    r
}

/// Checks a deserialization file: the decoder with the file's options and metadata keys, each case's
/// rows (kind, row, metadata) or error.
pub fn check_deserialization(rel: &str, dec: &DecoderFactory) -> Report {
    let mut r = Report::default();
    let file = load(rel);
    let opts = golden::options(&file);
    let cols = golden::columns(&file);
    let physical = golden::row_type(&cols);
    let keys: Vec<String> = file["metadata"]
        .as_array()
        .map(|k| {
            k.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut out_cols = cols.clone();
    for k in &keys {
        let ty = file["metadata_types"][k].as_str().unwrap_or("STRING");
        out_cols.push((format!("$metadata:{k}"), ty.to_owned()));
    }
    let out = golden::row_type(&out_cols);
    let made = dec(&opts, &physical, &keys);
    let Some(d) = golden::configured(&mut r, rel, &file, made, "the decoder") else {
        return r;
    };
    for c in file["cases"].as_array().expect("cases") {
        let what = format!("{rel} [{}]", c["input"].as_str().unwrap_or(""));
        // A null payload reaches a format as an empty one.
        let bytes = c["base64"].as_str().map(b64).unwrap_or_default();
        r.checked += 1;
        let got = match decode_one(&d, &out, &bytes) {
            Ok(g) => g,
            Err(e) => {
                r.failures.push(format!("{what}: decode-batch: {e}"));
                continue;
            }
        };
        let want = match c["result"].as_str() {
            Some("rows") => {
                let rows: Result<Vec<KindRow>, String> = c["rows"]
                    .as_array()
                    .map(|rows| rows.iter().collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|x| {
                        let values =
                            expected_row(&out, &physical, &keys, &x["row"], &x["metadata"])?;
                        Ok((x["kind"].as_str().unwrap_or("").to_owned(), values))
                    })
                    .collect();
                match rows {
                    Ok(rows) => Some(rows),
                    Err(e) => {
                        r.failures
                            .push(format!("{what}: unreadable expectation: {e}"));
                        continue;
                    }
                }
            }
            _ => {
                if let Some(before) = c.get("emitted_before_error").and_then(|e| e.as_array()) {
                    r.notes.push(format!(
                        "{what}: Flink emitted {} rows before it failed; a message with an error has no rows in a decoded batch",
                        before.len()
                    ));
                }
                None
            }
        };
        compare(&mut r, &what, got, want);
    }
    r
}

/// Checks a format's manifest (`plugin.toml` of the crate at `dir`) against its code: world 0.2.0, all
/// four row kinds, the options (`own` and the shared ones) and the metadata keys with their types, in
/// order.
pub fn check_manifest(dir: &str, own: &[&str], metadata: &[MetaKey]) {
    let path = std::path::Path::new(dir).join("plugin.toml");
    let text = std::fs::read_to_string(&path).expect("plugin.toml");
    let m: toml::Table = toml::from_str(&text).expect("plugin.toml parses");
    assert_eq!(
        m["world"].as_str(),
        Some("pulsar-connect:plugin/format@0.2.0")
    );
    let modes: Vec<&str> = m["changelog-mode"]
        .as_array()
        .expect("changelog-mode")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(modes, ["INSERT", "UPDATE_BEFORE", "UPDATE_AFTER", "DELETE"]);
    let mut options: Vec<&str> = m["options"]
        .as_array()
        .expect("options")
        .iter()
        .filter_map(|o| o["name"].as_str())
        .collect();
    let mut expected: Vec<&str> = crate::options::SHARED.iter().chain(own).copied().collect();
    options.sort_unstable();
    expected.sort_unstable();
    assert_eq!(options, expected, "options of {}", path.display());
    let keys: Vec<(&str, &str, &str)> = m["metadata"]
        .as_array()
        .expect("metadata")
        .iter()
        .map(|k| {
            (
                k["key"].as_str().unwrap_or(""),
                k["type"].as_str().unwrap_or(""),
                k["doc"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let code: Vec<(&str, &str, &str)> = metadata
        .iter()
        .map(|k| (k.key, k.ty.flink(), k.doc))
        .collect();
    assert_eq!(keys, code, "metadata of {}", path.display());
}

/// Decodes `inputs` one message at a time and in batches of 64, checking the contract of a decoded
/// batch: messages ascending, every message with rows or an error (never both), kinds and messages as
/// long as the rows, columns readable as `out` (the output row type).
pub fn no_panics(
    out: &RowType,
    inputs: &[Vec<u8>],
    decode: &dyn Fn(&MessageBatch) -> Result<DecodedBatch, String>,
) {
    for size in [1, 64] {
        for chunk in inputs.chunks(size) {
            let refs: Vec<&[u8]> = chunk.iter().map(|v| v.as_slice()).collect();
            let d = decode(&messages(&refs)).expect("decode-batch");
            let n = d.rows.row_count as usize;
            let rows_of: Vec<u32> = match &d.messages {
                Some(m) => m.clone(),
                None => (0..chunk.len() as u32)
                    .filter(|i| !d.errors.iter().any(|e| e.index == *i))
                    .collect(),
            };
            assert_eq!(rows_of.len(), n, "a message for every row");
            assert!(
                rows_of.windows(2).all(|w| w[0] <= w[1]),
                "messages ascending"
            );
            assert!(d.errors.windows(2).all(|w| w[0].index < w[1].index));
            for i in 0..chunk.len() as u32 {
                let rows = rows_of.iter().filter(|&&m| m == i).count();
                let errors = d.errors.iter().filter(|e| e.index == i).count();
                assert!(
                    (rows > 0) != (errors > 0),
                    "message {i}: {rows} rows and {errors} errors"
                );
            }
            if let Some(k) = &d.kinds {
                assert_eq!(k.len(), n, "a kind for every row");
            }
            golden::rows(out, &d.rows);
        }
    }
}

/// The columns a [`fuzz`] case decodes: the all-types table's or the decode files' (`products`).
#[derive(Debug, Clone, Copy)]
pub enum Table {
    AllTypes,
    Products,
}

/// The metadata keys a [`fuzz`] case asks for: none, or all of the format's.
#[derive(Debug, Clone, Copy)]
pub enum Keys {
    Empty,
    All,
}

/// A decoder configuration for [`fuzz`]: the columns, options (no prefix), the metadata keys.
pub type FuzzCase<'a> = (Table, &'a [(&'a str, &'a str)], Keys);

/// Random and mutated inputs (every payload of the format's vector files, truncated and mutated, and
/// `NO_PANIC_RANDOM` random ones, 20 000 by default) never panic the decoders `cases` configure with
/// `decoder` (`metadata`: the format's keys), and every batch keeps the contract ([`no_panics`]).
pub fn fuzz<E: Envelope>(
    format: &str,
    decoder: DecoderOf<E>,
    metadata: &[MetaKey],
    alphabet: &[u8],
    cases: &[FuzzCase<'_>],
) {
    let random = std::env::var("NO_PANIC_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let inputs = golden::fuzz_inputs(format, alphabet, random);
    let all_types = golden::columns(&load("table.json"));
    let products = golden::columns(&load(&format!("{format}/decode-default.json")));
    let all_keys: Vec<String> = metadata.iter().map(|k| k.key.to_owned()).collect();
    for &(table, options, keys) in cases {
        let cols = match table {
            Table::AllTypes => &all_types,
            Table::Products => &products,
        };
        let keys = match keys {
            Keys::Empty => &[][..],
            Keys::All => &all_keys[..],
        };
        let d = decoder(&opts(options), &golden::row_type(cols), keys).expect("decoder");
        no_panics(d.output_row_type(), &inputs, &|m| d.decode(m));
    }
}

/// An option list.
pub fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Checks every serialization file of `format` (`tests/golden/vectors/<format>`) with the crate's
/// `encoder` and `decoder`; see [`assert_known`] for `known`.
pub fn serialization_vectors<E: Envelope + 'static>(
    format: &str,
    encoder: EncoderOf,
    decoder: DecoderOf<E>,
    known: &[&str],
) {
    let enc = move |o: &[(String, String)], rt: &RowType| -> Result<EncodeFn, ConfigError> {
        let e = encoder(o, rt)?;
        Ok(Box::new(move |b, k| e.encode(b, k)))
    };
    let dec = decode_fn(decoder);
    let mut r = Report::default();
    for f in files(format, false) {
        r.merge(check_serialization(&f, &enc, &dec));
    }
    assert_known(&r, known);
}

/// Checks every deserialization file of `format` with the crate's `decoder`; see [`assert_known`].
pub fn deserialization_vectors<E: Envelope + 'static>(
    format: &str,
    decoder: DecoderOf<E>,
    known: &[&str],
) {
    let dec = decode_fn(decoder);
    let mut r = Report::default();
    for f in files(format, true) {
        r.merge(check_deserialization(&f, &dec));
    }
    assert_known(&r, known);
}

/// The [`DecoderFactory`] of a crate's `decoder`.
fn decode_fn<E: Envelope + 'static>(decoder: DecoderOf<E>) -> Box<DecoderFactory> {
    Box::new(move |o, rt, keys| {
        let d = decoder(o, rt, keys)?;
        Ok(Box::new(move |m| d.decode(m)))
    })
}

/// Panics listing every failure none of `known` (substrings of the case names) matches, and on a known
/// failure whose reason is not the NULL in the NOT NULL column `id`: the changelog formats' only known
/// difference (Flink emits the row, a batch cannot hold it).
pub fn assert_known(r: &Report, known: &[&str]) {
    for f in r
        .failures
        .iter()
        .filter(|f| known.iter().any(|k| f.contains(k)))
    {
        assert!(f.contains("NULL in NOT NULL field `id`"), "{f}");
    }
    r.assert_ok(known);
}

/// The golden-vector tests of changelog format crate `$krate` (its `decoder`, `encoder`, `OPTIONS` and
/// `METADATA`) against `tests/golden/vectors/$format`: `serialization_vectors` and
/// `deserialization_vectors` (failing only where `$known` says, see [`golden::assert_known`]), and
/// `manifest_matches_the_code` (the crate's `plugin.toml`).
///
/// [`golden::assert_known`]: crate::golden::assert_known
#[macro_export]
macro_rules! golden_tests {
    ($krate:ident, $format:literal, $known:expr) => {
        #[test]
        fn serialization_vectors() {
            $crate::golden::serialization_vectors(
                $format,
                $krate::encoder,
                $krate::decoder,
                $known,
            );
        }

        #[test]
        fn deserialization_vectors() {
            $crate::golden::deserialization_vectors($format, $krate::decoder, $known);
        }

        #[test]
        fn manifest_matches_the_code() {
            $crate::golden::check_manifest(
                env!("CARGO_MANIFEST_DIR"),
                $krate::OPTIONS,
                $krate::METADATA,
            );
        }
    };
}
