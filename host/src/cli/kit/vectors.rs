//! The vector file of the conformance kit (`docs/plugins.md`, "Vector files"): JSON lines, one object a
//! line; blank lines and lines starting with `#` are ignored. A *header* line (it has the key `vectors`)
//! starts a section: the options and, for formats, the table's columns its vectors run with. Every other
//! line is one vector of the section above it:
//!
//! ```text
//! {"vectors": "pulsar-connect/1", "name": "default", "options": {"delimiter": ","}, "columns": [{"name": "id", "type": "INT"}]}
//! {"name": "one row", "decode": {"text": "1"}, "expect": {"row": {"id": 1}}}
//! {"name": "not a number", "decode": {"text": "x"}, "expect": {"error": "x"}}
//! {"name": "empty", "decode": {"base64": ""}, "expect": {"skip": true}}
//! {"name": "written", "encode": {"row": {"id": 1}}, "expect": {"text": "1"}}
//! {"name": "key 0", "route": {"key": {"text": "key-0"}, "partitions": 7}, "expect": {"partition": 3}}
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::sql::{FlinkType, parse_type};

/// The `vectors` tag of a header this host reads.
pub const VECTORS_VERSION: &str = "pulsar-connect/1";

/// A parsed vector file.
#[derive(Debug)]
pub struct VectorFile {
    pub path: String,
    pub sections: Vec<Section>,
}

/// A header and the vectors below it.
#[derive(Debug)]
pub struct Section {
    /// 1-based line of the header.
    pub line: usize,
    pub name: String,
    pub options: Vec<(String, String)>,
    pub columns: Vec<(String, FlinkType)>,
    /// The factory must refuse these options; the text must occur in its error (empty: any error).
    pub config_error: Option<String>,
    pub vectors: Vec<Vector>,
}

/// One vector.
#[derive(Debug)]
pub struct Vector {
    /// 1-based line in the file.
    pub line: usize,
    pub name: String,
    pub case: Case,
}

/// What a vector does and expects.
#[derive(Debug)]
pub enum Case {
    /// Decode one payload.
    Decode { payload: Vec<u8>, expect: Decoded },
    /// Encode one row (of a kind, `+I` when not given).
    Encode {
        row: Map<String, Json>,
        kind: Option<String>,
        expect: Encoded,
    },
    /// Route one key among `partitions`.
    Route {
        key: Option<Vec<u8>>,
        properties: Vec<(String, String)>,
        partitions: u32,
        expect: u32,
    },
}

/// The expected outcome of decoding.
#[derive(Debug)]
pub enum Decoded {
    /// These rows (kind and values; columns a row leaves out are not compared).
    Rows(Vec<(Option<String>, Map<String, Json>)>),
    /// No row and no error, or an error marked as a skip.
    Skip,
    /// A row error whose reason contains this text (empty: any reason).
    Error(String),
}

/// The expected outcome of encoding.
#[derive(Debug)]
pub enum Encoded {
    Bytes(Vec<u8>),
    /// No payload at all (a tombstone).
    Absent,
    Error(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    vectors: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    options: BTreeMap<String, Json>,
    #[serde(default)]
    columns: Vec<ColumnSpec>,
    #[serde(default)]
    config_error: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ColumnSpec {
    name: String,
    #[serde(rename = "type")]
    ty: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    name: String,
    #[serde(default)]
    decode: Option<Payload>,
    #[serde(default)]
    encode: Option<EncodeInput>,
    #[serde(default)]
    route: Option<RouteInput>,
    expect: Expect,
}

/// Bytes, given as exactly one of `text` (UTF-8), `base64` or `hex`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    hex: Option<String>,
}

impl Payload {
    fn given(&self) -> bool {
        self.text.is_some() || self.base64.is_some() || self.hex.is_some()
    }

    fn bytes(&self) -> anyhow::Result<Vec<u8>> {
        match (&self.text, &self.base64, &self.hex) {
            (Some(t), None, None) => Ok(t.clone().into_bytes()),
            (None, Some(b), None) => STANDARD
                .decode(b)
                .map_err(|e| anyhow!("`base64` is not base64: {e}")),
            (None, None, Some(h)) => hex::decode(h).map_err(|e| anyhow!("`hex` is not hex: {e}")),
            _ => bail!("give the bytes as exactly one of `text`, `base64` or `hex`"),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EncodeInput {
    row: Map<String, Json>,
    #[serde(default)]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteInput {
    /// `null` or left out: a message without a key.
    #[serde(default)]
    key: Option<Payload>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    partitions: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    #[serde(default)]
    row: Option<Map<String, Json>>,
    #[serde(default)]
    rows: Option<Vec<KindRow>>,
    #[serde(default)]
    skip: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    absent: bool,
    #[serde(default)]
    partition: Option<u32>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    base64: Option<String>,
    #[serde(default)]
    hex: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KindRow {
    #[serde(default)]
    kind: Option<String>,
    row: Map<String, Json>,
}

impl VectorFile {
    pub fn read(path: &Path) -> anyhow::Result<VectorFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the vector file {}", path.display()))?;
        VectorFile::parse(&path.display().to_string(), &text)
    }

    /// Parses a vector file; errors name the file and line.
    pub fn parse(path: &str, text: &str) -> anyhow::Result<VectorFile> {
        let mut sections: Vec<Section> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let at = || format!("{path}:{line}");
            let json: Json = serde_json::from_str(trimmed)
                .with_context(|| format!("{}: not a JSON object", at()))?;
            if json.get("vectors").is_some() {
                sections.push(header(json, line).with_context(at)?);
                continue;
            }
            let Some(section) = sections.last_mut() else {
                bail!(
                    "{}: the first line must be a header ({{\"vectors\": \"{VECTORS_VERSION}\", ...}})",
                    at()
                );
            };
            section.vectors.push(vector(json, line).with_context(at)?);
        }
        if sections.is_empty() {
            bail!("{path}: no vectors (the file has no header line)");
        }
        Ok(VectorFile {
            path: path.to_owned(),
            sections,
        })
    }

    /// The number of checks: every vector, and every section that expects a factory refusal.
    pub fn len(&self) -> usize {
        self.sections
            .iter()
            .map(|s| s.vectors.len() + usize::from(s.config_error.is_some()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn header(json: Json, line: usize) -> anyhow::Result<Section> {
    let h: Header = serde_json::from_value(json).context("not a valid header")?;
    if h.vectors != VECTORS_VERSION {
        bail!(
            "header `vectors` is `{}`; this host reads `{VECTORS_VERSION}`",
            h.vectors
        );
    }
    let options = h
        .options
        .into_iter()
        .map(|(k, v)| match v {
            Json::String(s) => Ok((k, s)),
            Json::Bool(_) | Json::Number(_) => Ok((k, v.to_string())),
            other => Err(anyhow!("option `{k}` = `{other}`: give a string")),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let columns = h
        .columns
        .into_iter()
        .map(|c| {
            parse_type(&c.ty).map(|t| (c.name.clone(), t)).map_err(|e| {
                anyhow!(
                    "column `{}`: `{}` is not a Flink SQL type: {e}",
                    c.name,
                    c.ty
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Section {
        line,
        name: h.name.unwrap_or_else(|| format!("line {line}")),
        options,
        columns,
        config_error: h.config_error,
        vectors: Vec::new(),
    })
}

fn vector(json: Json, line: usize) -> anyhow::Result<Vector> {
    let l: Line = serde_json::from_value(json).context("not a valid vector")?;
    let e = l.expect;
    let expected_bytes = Payload {
        text: e.text,
        base64: e.base64,
        hex: e.hex,
    };
    let case = match (l.decode, l.encode, l.route) {
        (Some(payload), None, None) => {
            let expect = match (e.row, e.rows, e.skip, e.error) {
                (Some(row), None, false, None) => Decoded::Rows(vec![(None, row)]),
                (None, Some(rows), false, None) => {
                    Decoded::Rows(rows.into_iter().map(|r| (r.kind, r.row)).collect())
                }
                (None, None, true, None) => Decoded::Skip,
                (None, None, false, Some(text)) => Decoded::Error(text),
                _ => {
                    bail!("a decode vector expects exactly one of `row`, `rows`, `skip` or `error`")
                }
            };
            Case::Decode {
                payload: payload.bytes()?,
                expect,
            }
        }
        (None, Some(input), None) => {
            let expect = match (expected_bytes.given(), e.absent, e.error) {
                (true, false, None) => Encoded::Bytes(expected_bytes.bytes()?),
                (false, true, None) => Encoded::Absent,
                (false, false, Some(text)) => Encoded::Error(text),
                _ => bail!(
                    "an encode vector expects exactly one of `text`, `base64`, `hex`, `absent` or `error`"
                ),
            };
            Case::Encode {
                row: input.row,
                kind: input.kind,
                expect,
            }
        }
        (None, None, Some(route)) => {
            let Some(expect) = e.partition else {
                bail!("a route vector expects `partition`");
            };
            if route.partitions == 0 {
                bail!("`partitions` must be at least 1");
            }
            Case::Route {
                key: route.key.map(|k| k.bytes()).transpose()?,
                properties: route.properties.into_iter().collect(),
                partitions: route.partitions,
                expect,
            }
        }
        _ => bail!("a vector has exactly one of `decode`, `encode` or `route`"),
    };
    Ok(Vector {
        line,
        name: l.name,
        case,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_vectors_parse() {
        let f = VectorFile::parse(
            "v.jsonl",
            r#"
# a comment
{"vectors": "pulsar-connect/1", "name": "s", "options": {"a": "1", "b": true}, "columns": [{"name": "id", "type": "INT NOT NULL"}]}
{"name": "d", "decode": {"hex": "31"}, "expect": {"row": {"id": 1}}}
{"name": "e", "encode": {"row": {"id": 1}}, "expect": {"text": "1"}}
{"name": "r", "route": {"key": null, "partitions": 3}, "expect": {"partition": 0}}
"#,
        )
        .unwrap();
        assert_eq!(f.len(), 3);
        let s = &f.sections[0];
        assert_eq!(
            s.options,
            vec![("a".into(), "1".into()), ("b".into(), "true".into())]
        );
        assert!(!s.columns[0].1.nullable);
        assert!(matches!(&s.vectors[0].case, Case::Decode { payload, .. } if payload == b"1"));
        assert!(matches!(
            &s.vectors[2].case,
            Case::Route {
                key: None,
                partitions: 3,
                ..
            }
        ));
    }

    #[test]
    fn mistakes_name_the_line() {
        let e = VectorFile::parse("v.jsonl", "{\"name\": \"x\"}").unwrap_err();
        assert!(format!("{e:#}").contains("v.jsonl:1: the first line must be a header"));
        let e = VectorFile::parse(
            "v.jsonl",
            "{\"vectors\": \"pulsar-connect/1\"}\n{\"name\": \"x\", \"decode\": {\"text\": \"a\"}, \"expect\": {}}",
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("v.jsonl:2"), "{e:#}");
        let e = VectorFile::parse("v.jsonl", "{\"vectors\": \"other/9\"}").unwrap_err();
        assert!(format!("{e:#}").contains("this host reads `pulsar-connect/1`"));
    }
}
