//! Test support for the golden vectors in `tests/golden/vectors` (see its README): Flink type strings,
//! the vectors' JSON value encoding, message batches, and generic checks of serialization and
//! deserialization files against a format's native encoder/decoder.

use std::path::PathBuf;

use pulsar_connect_plugin::columns::{BatchBuilder, read_rows};
use serde_json::Value as Json;

use crate::temporal::{parse_date, parse_time_prefix, parse_timestamp_prefix, to_unit};
use crate::{
    ColumnBatch, ConfigError, DataType, DecimalType, DecodedBatch, EncodedBatch, Field, KeyBatch,
    MapType, MessageBatch, RowType, SKIPPED, TypeNode, Value,
};

/// The vectors directory.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/vectors")
}

/// Reads a vector file (path relative to the vectors directory).
pub fn load(rel: &str) -> Json {
    let path = vectors_dir().join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The vector files of a format whose name starts with `prefix` (sorted), relative paths.
pub fn files(format: &str, decode: bool) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(vectors_dir().join(format))
        .expect("vectors dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n.starts_with("decode-") == decode)
        .map(|n| format!("{format}/{n}"))
        .collect();
    out.sort();
    out
}

struct TypeParser<'a> {
    s: &'a [u8],
    i: usize,
    types: Vec<TypeNode>,
}

impl TypeParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i] == b' ' {
            self.i += 1;
        }
    }
    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        if self.s.get(self.i) == Some(&b'`') {
            self.i += 1;
            while self.s[self.i] != b'`' {
                self.i += 1;
            }
            self.i += 1;
            return String::from_utf8_lossy(&self.s[start + 1..self.i - 1]).into_owned();
        }
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_')
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
    fn num(&mut self) -> u32 {
        let w = self.word();
        w.parse().unwrap_or_else(|_| panic!("bad number {w}"))
    }
    fn args(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        if self.eat(b'(') {
            loop {
                out.push(self.num());
                if self.eat(b')') {
                    break;
                }
                assert!(self.eat(b','));
            }
        }
        out
    }
    /// Parses one type, returns its index.
    fn parse(&mut self) -> u32 {
        let idx = self.types.len();
        self.types.push(TypeNode {
            data_type: DataType::Boolean,
            nullable: true,
        });
        let w = self.word().to_ascii_uppercase();
        let dt = match w.as_str() {
            "BOOLEAN" => DataType::Boolean,
            "TINYINT" => DataType::Tinyint,
            "SMALLINT" => DataType::Smallint,
            "INT" | "INTEGER" => DataType::Int,
            "BIGINT" => DataType::Bigint,
            "FLOAT" => DataType::Float,
            "DOUBLE" => DataType::Double,
            "DECIMAL" => {
                let a = self.args();
                DataType::Decimal(DecimalType {
                    precision: *a.first().unwrap_or(&10) as u8,
                    scale: *a.get(1).unwrap_or(&0) as u8,
                })
            }
            "CHAR" => DataType::Char(*self.args().first().unwrap_or(&1)),
            "VARCHAR" => DataType::Varchar(*self.args().first().unwrap_or(&1)),
            "STRING" => DataType::Varchar(i32::MAX as u32),
            "BINARY" => DataType::Binary(*self.args().first().unwrap_or(&1)),
            "VARBINARY" => DataType::Varbinary(*self.args().first().unwrap_or(&1)),
            "BYTES" => DataType::Varbinary(i32::MAX as u32),
            "DATE" => DataType::Date,
            "TIME" => DataType::Time(*self.args().first().unwrap_or(&0) as u8),
            "TIMESTAMP" => DataType::Timestamp(*self.args().first().unwrap_or(&6) as u8),
            "TIMESTAMP_LTZ" => DataType::TimestampLtz(*self.args().first().unwrap_or(&6) as u8),
            "ARRAY" => {
                assert!(self.eat(b'<'));
                let e = self.parse();
                assert!(self.eat(b'>'));
                DataType::Array(e)
            }
            "MAP" => {
                assert!(self.eat(b'<'));
                let k = self.parse();
                assert!(self.eat(b','));
                let v = self.parse();
                assert!(self.eat(b'>'));
                DataType::Map(MapType { key: k, value: v })
            }
            "ROW" => {
                assert!(self.eat(b'<'));
                let mut fields = Vec::new();
                loop {
                    let name = self.word();
                    let t = self.parse();
                    fields.push(Field {
                        name,
                        type_index: t,
                    });
                    if self.eat(b'>') {
                        break;
                    }
                    assert!(self.eat(b','));
                }
                DataType::Row(fields)
            }
            other => panic!("unknown type {other}"),
        };
        self.ws();
        if self.s[self.i..].starts_with(b"NOT NULL") {
            self.i += 8;
            self.types[idx].nullable = false;
        }
        self.types[idx].data_type = dt;
        idx as u32
    }
}

/// A row type from (name, Flink type string) columns.
pub fn row_type(columns: &[(String, String)]) -> RowType {
    let mut p = TypeParser {
        s: b"",
        i: 0,
        types: Vec::new(),
    };
    let mut fields = Vec::new();
    for (name, ty) in columns {
        p.s = ty.as_bytes();
        p.i = 0;
        let t = p.parse();
        fields.push(Field {
            name: name.clone(),
            type_index: t,
        });
    }
    RowType {
        types: p.types,
        fields,
    }
}

/// The `columns` of a vector file.
pub fn columns(file: &Json) -> Vec<(String, String)> {
    file["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["type"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The `options` of a vector file without the `<format>.` prefix.
pub fn options(file: &Json) -> Vec<(String, String)> {
    let format = file["format"].as_str().unwrap_or("");
    file["options"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let k = k
                        .strip_prefix(&format!("{format}."))
                        .unwrap_or(k)
                        .to_owned();
                    (k, v.as_str().unwrap_or("").to_owned())
                })
                .collect()
        })
        .unwrap_or_default()
}

fn num_text(j: &Json) -> Option<String> {
    match j {
        Json::Number(n) => Some(n.to_string()),
        Json::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// A vector value as a [`Value`] of type `ty`; `Err` when our types cannot hold it (e.g. a
/// TIMESTAMP(9) beyond the i64 nanosecond range).
pub fn to_value(rt: &RowType, ty: usize, j: &Json) -> Result<Value, String> {
    if j.is_null() {
        return Ok(Value::Null);
    }
    let node = &rt.types[ty];
    let bad = || format!("cannot read {j} as {:?}", node.data_type);
    let int = || j.as_i64().ok_or_else(bad);
    Ok(match &node.data_type {
        DataType::Boolean => Value::Bool(j.as_bool().ok_or_else(bad)?),
        DataType::Tinyint => Value::I8(int()? as i8),
        DataType::Smallint => Value::I16(int()? as i16),
        DataType::Int => Value::I32(int()? as i32),
        DataType::Bigint => Value::I64(int()?),
        DataType::Float => {
            Value::F32(crate::javanum::parse_f32(&num_text(j).ok_or_else(bad)?).ok_or_else(bad)?)
        }
        DataType::Double => {
            Value::F64(crate::javanum::parse_f64(&num_text(j).ok_or_else(bad)?).ok_or_else(bad)?)
        }
        DataType::Decimal(d) => {
            let s = j.as_str().ok_or_else(bad)?;
            Value::Decimal(
                crate::decimal::parse(s.as_bytes(), 38, d.scale)?
                    .ok_or_else(|| format!("{s} overflows"))?,
            )
        }
        DataType::Char(_) | DataType::Varchar(_) => {
            Value::String(j.as_str().ok_or_else(bad)?.into())
        }
        DataType::Binary(_) | DataType::Varbinary(_) => {
            let mut out = Vec::new();
            crate::b64::decode(j.as_str().ok_or_else(bad)?.as_bytes(), &mut out)?;
            Value::Bytes(out)
        }
        DataType::Date => {
            Value::Date(parse_date(j.as_str().ok_or_else(bad)?.as_bytes()).ok_or_else(bad)? as i32)
        }
        DataType::Time(p) => {
            let ((secs, nanos), rest) =
                parse_time_prefix(j.as_str().ok_or_else(bad)?.as_bytes()).ok_or_else(bad)?;
            if !rest.is_empty() {
                return Err(bad());
            }
            Value::Time(to_unit(i64::from(secs), nanos, *p).ok_or_else(bad)?)
        }
        DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
            let s = j.as_str().ok_or_else(bad)?;
            let s = s.strip_suffix('Z').unwrap_or(s);
            let ((secs, nanos), rest) =
                parse_timestamp_prefix(s.as_bytes(), b'T').ok_or_else(bad)?;
            if !rest.is_empty() {
                return Err(bad());
            }
            Value::Timestamp(
                to_unit(secs, nanos, *p).ok_or_else(|| format!("{s} overflows precision {p}"))?,
            )
        }
        DataType::Array(e) => Value::Array(
            j.as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|x| to_value(rt, *e as usize, x))
                .collect::<Result<_, _>>()?,
        ),
        DataType::Map(m) => Value::Map(
            j.as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|pair| {
                    Ok((
                        to_value(rt, m.key as usize, &pair[0])?,
                        to_value(rt, m.value as usize, &pair[1])?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        DataType::Row(fields) => Value::Row(
            fields
                .iter()
                .map(|f| to_value(rt, f.type_index as usize, &j[&f.name]))
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// A row of the vectors (an object keyed by column name) as values of `rt`'s fields.
pub fn to_row(rt: &RowType, obj: &Json) -> Result<Vec<Value>, String> {
    rt.fields
        .iter()
        .map(|f| {
            to_value(rt, f.type_index as usize, &obj[&f.name])
                .map_err(|e| format!("field {}: {e}", f.name))
        })
        .collect()
}

/// Value equality as the vectors mean it: NaN equals NaN, -0.0 differs from 0.0, map entries in any
/// order.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::F32(x), Value::F32(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Value::F64(x), Value::F64(y)) => x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
        (Value::Array(x), Value::Array(y)) | (Value::Row(x), Value::Row(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Map(x), Value::Map(y)) => {
            let mut used = vec![false; y.len()];
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    let hit = y
                        .iter()
                        .enumerate()
                        .position(|(i, (k2, v2))| !used[i] && same(k, k2) && same(v, v2));
                    hit.map(|i| used[i] = true).is_some()
                })
        }
        _ => a == b,
    }
}

pub fn same_row(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// A message batch of payloads.
pub fn messages(payloads: &[&[u8]]) -> MessageBatch {
    let mut data = Vec::new();
    let mut offsets = vec![0u32];
    for p in payloads {
        data.extend_from_slice(p);
        offsets.push(data.len() as u32);
    }
    MessageBatch {
        count: payloads.len() as u32,
        payloads: data,
        payload_offsets: offsets,
        keys: KeyBatch {
            count: payloads.len() as u32,
            data: Vec::new(),
            offsets: vec![0; payloads.len() + 1],
            present: Some(vec![0; payloads.len().div_ceil(8)]),
        },
        properties: None,
        event_times: None,
    }
}

/// A column batch of rows (through the SDK's builder).
pub fn batch(rt: &RowType, rows: &[Vec<Value>]) -> ColumnBatch {
    let mut b = BatchBuilder::new(rt).expect("row type");
    for r in rows {
        b.push_row(r).expect("row fits its type");
    }
    b.finish()
}

/// The rows of a column batch (through the SDK's reader).
pub fn rows(rt: &RowType, batch: &ColumnBatch) -> Vec<Vec<Value>> {
    read_rows(rt, batch).expect("readable batch")
}

/// Payload `i` of an encoded batch.
pub fn payload(e: &EncodedBatch, i: usize) -> &[u8] {
    &e.payloads[e.offsets[i] as usize..e.offsets[i + 1] as usize]
}

pub type EncodeFn = Box<dyn Fn(&ColumnBatch) -> Result<EncodedBatch, String>>;
pub type DecodeFn = Box<dyn Fn(&MessageBatch) -> Result<DecodedBatch, String>>;
pub type Factory<F> = dyn Fn(&[(String, String)], &RowType) -> Result<F, ConfigError>;

/// What a check found: failures, and notes (vectors left out, with the reason).
#[derive(Debug, Default)]
pub struct Report {
    pub checked: usize,
    pub failures: Vec<String>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn merge(&mut self, other: Report) {
        self.checked += other.checked;
        self.failures.extend(other.failures);
        self.notes.extend(other.notes);
    }

    /// Panics listing every failure not matched by one of `known` (substrings, each a documented
    /// difference from Flink).
    pub fn assert_ok(&self, known: &[&str]) {
        for n in &self.notes {
            eprintln!("note: {n}");
        }
        let unexpected: Vec<&String> = self
            .failures
            .iter()
            .filter(|f| !known.iter().any(|k| f.contains(k)))
            .collect();
        for f in &self.failures {
            eprintln!(
                "{}{f}",
                if unexpected.contains(&f) {
                    "FAIL: "
                } else {
                    "known difference: "
                }
            );
        }
        eprintln!(
            "{} checks, {} failures ({} unexpected)",
            self.checked,
            self.failures.len(),
            unexpected.len()
        );
        assert!(
            unexpected.is_empty(),
            "{} unexpected failures",
            unexpected.len()
        );
    }
}

fn show(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => format!("{s:?}"),
        Err(_) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

fn decode_one(
    dec: &DecodeFn,
    rt: &RowType,
    payload: &[u8],
) -> Result<Result<Vec<Value>, String>, String> {
    let d = dec(&messages(&[payload]))?;
    if let Some(e) = d.errors.first() {
        return Ok(Err(e.reason.clone()));
    }
    let rows = rows(rt, &d.rows);
    Ok(Ok(rows.into_iter().next().ok_or("no row and no error")?))
}

/// Checks a serialization file: encode every row of the table, compare with Flink's bytes, decode
/// Flink's bytes, compare with Flink's decoded values.
pub fn check_serialization(
    rel: &str,
    encoder: &Factory<EncodeFn>,
    decoder: &Factory<DecodeFn>,
) -> Report {
    let mut r = Report::default();
    let file = load(rel);
    let table = load("table.json");
    let cols = columns(&file);
    let rt = row_type(&cols);
    let opts = options(&file);
    let enc = match encoder(&opts, &rt) {
        Ok(e) => e,
        Err(e) => {
            r.failures
                .push(format!("{rel}: encoder refused: {}", e.message));
            return r;
        }
    };
    let dec = match decoder(&opts, &rt) {
        Ok(d) => d,
        Err(e) => {
            r.failures
                .push(format!("{rel}: decoder refused: {}", e.message));
            return r;
        }
    };
    for v in file["vectors"].as_array().expect("vectors") {
        let name = v["name"].as_str().unwrap_or("");
        let obj = match v.get("row") {
            Some(i) => &table["rows"][i.as_u64().unwrap() as usize]["values"],
            None => &v["values"],
        };
        let what = format!(
            "{rel} [{name}{}]",
            v.get("values").map(|x| x.to_string()).unwrap_or_default()
        );
        // Encode.
        match to_row(&rt, obj) {
            Err(e) => r.notes.push(format!(
                "{what}: not encoded, our types cannot hold it: {e}"
            )),
            Ok(row) => {
                r.checked += 1;
                match enc(&batch(&rt, &[row])) {
                    Err(e) => r.failures.push(format!("{what}: encode-batch failed: {e}")),
                    Ok(out) => {
                        let err = out.errors.first().map(|e| e.reason.clone());
                        match (&v["base64"], v.get("error"), err) {
                            (_, Some(flink), None) => r.failures.push(format!(
                                "{what}: Flink failed ({}), we encoded {}",
                                flink["message"],
                                show(payload(&out, 0))
                            )),
                            (_, Some(_), Some(_)) => {}
                            (_, None, Some(e)) => {
                                r.failures.push(format!("{what}: we failed to encode: {e}"))
                            }
                            (Json::String(b64), None, None) => {
                                let mut want = Vec::new();
                                crate::b64::decode(b64.as_bytes(), &mut want).unwrap();
                                let got = payload(&out, 0);
                                if got != want.as_slice() {
                                    r.failures.push(format!(
                                        "{what}: encoded\n   ours  {}\n   flink {}",
                                        show(got),
                                        show(&want)
                                    ));
                                }
                            }
                            // Flink: a null payload; ours is empty.
                            (Json::Null, None, None) if !payload(&out, 0).is_empty() => r
                                .failures
                                .push(format!("{what}: expected an empty (null) payload")),
                            _ => {}
                        }
                    }
                }
            }
        }
        // Decode Flink's bytes.
        let Json::String(b64) = &v["base64"] else {
            continue;
        };
        let mut bytes = Vec::new();
        crate::b64::decode(b64.as_bytes(), &mut bytes).unwrap();
        r.checked += 1;
        let got = match decode_one(&dec, &rt, &bytes) {
            Err(e) => {
                r.failures.push(format!("{what}: decode-batch failed: {e}"));
                continue;
            }
            Ok(g) => g,
        };
        let expected = match (v.get("decoded"), v.get("decode_error")) {
            (Some(d), _) => to_row(&rt, d),
            (None, Some(e)) => Err(format!("Flink: {}", e["message"])),
            _ => continue,
        };
        compare(&mut r, &what, got, expected);
    }
    r
}

fn compare(
    r: &mut Report,
    what: &str,
    got: Result<Vec<Value>, String>,
    expected: Result<Vec<Value>, String>,
) {
    match (got, expected) {
        (Ok(g), Ok(e)) => {
            if !same_row(&g, &e) {
                r.failures
                    .push(format!("{what}: decoded\n   ours  {g:?}\n   flink {e:?}"))
            }
        }
        (Err(_), Err(_)) => {}
        (Ok(g), Err(e)) => r
            .failures
            .push(format!("{what}: expected an error ({e}), decoded {g:?}")),
        (Err(g), Ok(e)) => r
            .failures
            .push(format!("{what}: decode error {g}, expected {e:?}")),
    }
}

/// The decoder `made` from deserialization file `rel`'s options; `None` when the file is done: it
/// expects Flink's configuration error (`config_error`, one check: we must refuse `flink_refused` too)
/// or we refused (a failure).
pub fn configured<T>(
    r: &mut Report,
    rel: &str,
    file: &Json,
    made: Result<T, ConfigError>,
    flink_refused: &str,
) -> Option<T> {
    if let Some(ce) = file.get("config_error") {
        r.checked += 1;
        if made.is_ok() {
            r.failures.push(format!(
                "{rel}: Flink refused {flink_refused} ({}), we did not",
                ce["message"]
            ));
        }
        return None;
    }
    match made {
        Ok(m) => Some(m),
        Err(e) => {
            r.failures
                .push(format!("{rel}: decoder refused: {}", e.message));
            None
        }
    }
}

/// Checks a deserialization file. `null_payload`: what a null payload (fed as an empty one) must
/// give for this format: `None` to leave those cases out.
pub fn check_deserialization(rel: &str, decoder: &Factory<DecodeFn>) -> Report {
    let mut r = Report::default();
    let file = load(rel);
    let cols = columns(&file);
    let rt = row_type(&cols);
    let opts = options(&file);
    let Some(dec) = configured(&mut r, rel, &file, decoder(&opts, &rt), "the options") else {
        return r;
    };
    for c in file["cases"].as_array().expect("cases") {
        let input = c["input"].as_str().unwrap_or("");
        let what = format!("{rel} [{input}]");
        let bytes = match &c["base64"] {
            Json::String(b64) => {
                let mut b = Vec::new();
                crate::b64::decode(b64.as_bytes(), &mut b).unwrap();
                b
            }
            _ => {
                if c["hex"].is_string() {
                    hex(c["hex"].as_str().unwrap())
                } else {
                    r.notes.push(format!("{what}: null payload, no such thing in a message batch; see the format's own test"));
                    continue;
                }
            }
        };
        r.checked += 1;
        let got = match decode_one(&dec, &rt, &bytes) {
            Err(e) => {
                r.failures.push(format!("{what}: decode-batch failed: {e}"));
                continue;
            }
            Ok(g) => g,
        };
        match c["result"].as_str() {
            Some("row") => {
                let expected = to_row(&rt, &c["row"]);
                compare(&mut r, &what, got, expected);
            }
            Some("null") => match got {
                Err(e) if e.starts_with(SKIPPED) => {}
                other => r
                    .failures
                    .push(format!("{what}: Flink skips it, we gave {other:?}")),
            },
            _ => match got {
                Err(e) if !e.starts_with(SKIPPED) => {}
                other => r.failures.push(format!(
                    "{what}: Flink fails ({}), we gave {other:?}",
                    c["error"]["message"]
                )),
            },
        }
    }
    r
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// A small deterministic PRNG (xorshift64*) for "random bytes never panic" tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Random bytes, biased towards `alphabet` half the time.
    pub fn bytes(&mut self, max: usize, alphabet: &[u8]) -> Vec<u8> {
        let n = self.below(max as u64 + 1) as usize;
        (0..n)
            .map(|_| {
                if !alphabet.is_empty() && self.next_u64() & 1 == 0 {
                    alphabet[self.below(alphabet.len() as u64) as usize]
                } else {
                    self.next_u64() as u8
                }
            })
            .collect()
    }
}

/// Inputs for "no input panics a decoder" tests: every payload of the format's vector files, each
/// also truncated and mutated, plus random bytes biased towards `alphabet`. Deterministic.
pub fn fuzz_inputs(format: &str, alphabet: &[u8], random: usize) -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    for f in files(format, false).into_iter().chain(files(format, true)) {
        let file = load(&f);
        let items = file
            .get("vectors")
            .or_else(|| file.get("cases"))
            .and_then(|v| v.as_array())
            .cloned()
            .unwrap_or_default();
        for v in items {
            if let Some(b64) = v["base64"].as_str() {
                let mut b = Vec::new();
                if crate::b64::decode(b64.as_bytes(), &mut b).is_ok() {
                    seeds.push(b);
                }
            }
        }
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ format.len() as u64);
    let mut out = Vec::new();
    for s in &seeds {
        out.push(s.clone());
        for _ in 0..4 {
            let mut m = s.clone();
            if !m.is_empty() {
                let cut = rng.below(m.len() as u64) as usize;
                if rng.next_u64() & 1 == 0 {
                    m.truncate(cut);
                } else {
                    for _ in 0..1 + rng.below(4) {
                        let i = rng.below(m.len() as u64) as usize;
                        m[i] = if rng.next_u64() & 1 == 0 {
                            alphabet[rng.below(alphabet.len() as u64) as usize]
                        } else {
                            rng.next_u64() as u8
                        };
                    }
                }
            }
            out.push(m);
        }
    }
    for _ in 0..random {
        out.push(rng.bytes(64, alphabet));
    }
    out
}

/// Decodes every input one message at a time and in batches of 64 with `decode`, checking the
/// contract (one row or one error per message, ascending errors) along the way.
pub fn no_panics(
    rt: &RowType,
    inputs: &[Vec<u8>],
    decode: &dyn Fn(&MessageBatch) -> Result<DecodedBatch, String>,
) {
    for chunk in inputs.chunks(64) {
        let refs: Vec<&[u8]> = chunk.iter().map(|v| v.as_slice()).collect();
        let batch = messages(&refs);
        let d = decode(&batch).expect("decode-batch");
        assert_eq!(
            d.rows.row_count as usize + d.errors.len(),
            chunk.len(),
            "every message gives a row or an error"
        );
        assert!(d.errors.windows(2).all(|w| w[0].index < w[1].index));
        // The columns must be readable for the row type.
        read_rows(rt, &d.rows).expect("decoded columns match the row type");
    }
}

/// Columns (name, Flink type) and options: one configuration of a format.
pub type Case = (Vec<(String, String)>, Vec<(String, String)>);
