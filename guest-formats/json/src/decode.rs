//! Decoding: messages → the table's columns.

use crate::JsonOptions;
use crate::check_types;
use crate::fast::FlatField;
use crate::parser::*;
use crate::scan::check_utf8;
use crate::tree_decode::Tree;
use format_common::{
    ConfigError, DataType, DecodedBatch, MessageBatch, RowError, RowType, config_error, javanum,
    skipped, slice_at,
};
use pulsar_connect_plugin::columns::Cols;

/// The fields of one ROW (the top level or a nested row column) as the decoder looks them up.
#[derive(Debug, Clone)]
pub(crate) struct RowPlan {
    pub(crate) names: Vec<Vec<u8>>,
    pub(crate) cols: Vec<usize>,
    pub(crate) tys: Vec<usize>,
    /// By field: its name and the closing quote when the name is written in JSON as it is (no `"`,
    /// `\` or control character), else `None`. A key whose raw bytes start with these is the field.
    pub(crate) quoted: Vec<Option<Vec<u8>>>,
}

impl RowPlan {
    pub(crate) fn new(names: Vec<Vec<u8>>, cols: Vec<usize>, tys: Vec<usize>) -> RowPlan {
        let quoted = names
            .iter()
            .map(|n| {
                (!n.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20))
                    .then(|| [&n[..], b"\""].concat())
            })
            .collect();
        RowPlan {
            names,
            cols,
            tys,
            quoted,
        }
    }
}

/// How the object loop reads a value of a type without the general value path (the json format's
/// streaming conversions only, and only for the common tokens: anything else takes the general path).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fast {
    /// An integer type in `lo..=hi`, from a number token without fraction or exponent.
    Int {
        lo: i64,
        hi: i64,
    },
    /// CHAR / VARCHAR from a string token without escapes.
    Text,
    No,
}

/// A configured decoder.
#[derive(Debug)]
pub struct Decoder {
    pub(crate) rt: RowType,
    pub(crate) opts: JsonOptions,
    pub(crate) top: RowPlan,
    /// By column index: the plan of a nested ROW column.
    pub(crate) nested: Vec<Option<RowPlan>>,
    /// `Some`: Flink's Jackson-tree conversions (the changelog formats, `crate::tree_decode`); `None`:
    /// the json format's streaming ones.
    pub(crate) tree: Option<Tree>,
    /// By type index: how the object loop reads a value of the type (all [`Fast::No`] in tree mode).
    pub(crate) fast: Vec<Fast>,
    /// The top-level fields as the fast path of `crate::fast` reads them; empty: no fast path.
    pub(crate) flat: Vec<FlatField>,
}

/// Creates a decoder for `row_type` with format options (no `json.` prefix).
pub fn decoder(options: &[(String, String)], row_type: &RowType) -> Result<Decoder, ConfigError> {
    let opts = JsonOptions::parse(options)?;
    // A decoding rule, as in Flink (`validateDecodingFormatOptions`): a table that is only written may
    // set both.
    if opts.fail_on_missing_field && opts.ignore_parse_errors {
        return Err(config_error(
            Some("ignore-parse-errors"),
            "fail-on-missing-field and ignore-parse-errors shouldn't both be true.",
        ));
    }
    check_types(row_type)?;
    Ok(Decoder::build(opts, row_type, row_type.fields.len(), None))
}

impl Decoder {
    /// A decoder of the first `fields` fields of `row_type` (checked).
    pub(crate) fn build(
        opts: JsonOptions,
        row_type: &RowType,
        fields: usize,
        tree: Option<Tree>,
    ) -> Decoder {
        let cols = Cols::new(row_type);
        let top_fields = &row_type.fields[..fields.min(row_type.fields.len())];
        let top = RowPlan::new(
            top_fields
                .iter()
                .map(|f| f.name.as_bytes().to_vec())
                .collect(),
            (0..top_fields.len()).collect(),
            top_fields.iter().map(|f| f.type_index as usize).collect(),
        );
        let nested = cols
            .cols
            .iter()
            .enumerate()
            .map(|(c, col)| match &row_type.types[col.ty].data_type {
                DataType::Row(fields) => Some(RowPlan::new(
                    fields.iter().map(|f| f.name.as_bytes().to_vec()).collect(),
                    cols.row_children(c).to_vec(),
                    fields.iter().map(|f| f.type_index as usize).collect(),
                )),
                _ => None,
            })
            .collect();
        let fast = row_type
            .types
            .iter()
            .map(|t| match &t.data_type {
                _ if tree.is_some() => Fast::No,
                dt
                @ (DataType::Tinyint | DataType::Smallint | DataType::Int | DataType::Bigint) => {
                    let (lo, hi, _) = int_range(dt);
                    Fast::Int { lo, hi }
                }
                DataType::Char(_) | DataType::Varchar(_) => Fast::Text,
                _ => Fast::No,
            })
            .collect();
        let mut decoder = Decoder {
            rt: row_type.clone(),
            opts,
            top,
            nested,
            tree,
            fast,
            flat: Vec::new(),
        };
        decoder.flat = decoder.flat_plan();
        decoder
    }

    /// Decodes a batch: one row per message, or a row error (skips are errors whose reason starts
    /// with [`format_common::SKIPPED`]).
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        let mut p = Parser::new(&[]);
        // Messages the fast path gave up on; once they are more than one in eight, it is not tried.
        let mut misses = 0;
        let count = batch.count as usize;
        let mut index = 0;
        while index < count {
            if !self.flat.is_empty() && misses * 8 <= index {
                // Up to the first message not in the common shape (rolled back).
                index = self.flat_messages(batch, index, &mut cols);
                if index == count {
                    break;
                }
                misses += 1;
            }
            let payload = slice_at(&batch.payloads, &batch.payload_offsets, index);
            if let Err(reason) = self.message(&mut p, payload, &mut cols) {
                cols.rollback();
                errors.push(RowError {
                    index: index as u32,
                    reason,
                });
            } else {
                cols.end_row();
            }
            index += 1;
        }
        Ok(format_common::decoded(cols, errors))
    }

    fn message<'a>(
        &self,
        p: &mut Parser<'a>,
        payload: &'a [u8],
        cols: &mut Cols,
    ) -> Result<(), String> {
        if payload.is_empty() {
            return Err(skipped("empty payload"));
        }
        let skip = |m: String| {
            if self.opts.ignore_parse_errors {
                skipped(m)
            } else {
                m
            }
        };
        if let Err(e) = check_utf8(payload) {
            return Err(skip(format!("invalid UTF-8 in the JSON payload: {e}")));
        }
        let payload = payload
            .strip_prefix("\u{feff}".as_bytes())
            .unwrap_or(payload);
        p.s = payload;
        p.i = 0;
        match p.peek() {
            Some(b'{') => {}
            None => return Err(skip("no JSON content".into())),
            Some(_) => {
                return Err(skip(
                    "the payload is not a JSON object (No content to map due to end-of-input)"
                        .into(),
                ));
            }
        }
        match self.object(p, &self.top, cols, None) {
            Ok(()) => Ok(()),
            Err(Fail::Syntax(m)) => Err(skip(format!("Failed to deserialize JSON: {m}"))),
            Err(Fail::Convert(m)) => Err(skip(m)),
        }
    }

    /// One field value: conversion errors name the field; with `ignore-parse-errors` they make the
    /// value NULL.
    pub(crate) fn field(
        &self,
        p: &mut Parser<'_>,
        c: usize,
        ty: usize,
        cols: &mut Cols,
        name: &[u8],
    ) -> R<()> {
        match self.value(p, c, ty, cols) {
            Err(Fail::Convert(m)) => Err(Fail::Convert(format!(
                "Fail to deserialize at field: {}: {m}",
                String::from_utf8_lossy(name)
            ))),
            Ok(()) => {
                if let Some(n) = &mut p.null_in
                    && n.is_empty()
                {
                    *n = String::from_utf8_lossy(name).into();
                }
                Ok(())
            }
            other => other,
        }
    }

    /// One value of type `ty` into column `c`.
    pub(crate) fn value(&self, p: &mut Parser<'_>, c: usize, ty: usize, cols: &mut Cols) -> R<()> {
        let start = p.i;
        let len = cols.len(c);
        let result = match self.tree {
            Some(tree) => self.tree_value(p, c, ty, cols, tree),
            None => self.value_inner(p, c, ty, cols),
        };
        match result {
            Err(Fail::Convert(m)) if self.opts.ignore_parse_errors => {
                let _ = m;
                cols.truncate(c, len);
                p.i = start;
                p.skip(0)?;
                cols.push_null(c);
                if self.tree.is_some() && !self.rt.types[ty].nullable {
                    p.note_null();
                }
                Ok(())
            }
            Err(Fail::Convert(m)) => {
                cols.truncate(c, len);
                Err(Fail::Convert(m))
            }
            other => other,
        }
    }
}

/// A JSON number's text as a DOUBLE, or as a FLOAT widened (`double` false); `None`: out of syntax.
pub(crate) fn parse_float(text: &[u8], double: bool) -> Option<f64> {
    // Number text is ASCII.
    let t = std::str::from_utf8(text).unwrap_or("");
    if double {
        t.parse::<f64>().ok()
    } else {
        t.parse::<f32>().ok().map(f64::from)
    }
}

/// A JSON string's content as Java's `Double.parseDouble` (or `Float.parseFloat`, widened) reads it.
pub(crate) fn parse_java_float(text: &[u8], double: bool) -> Option<f64> {
    let t = std::str::from_utf8(text).unwrap_or("");
    if double {
        javanum::parse_f64(t)
    } else {
        javanum::parse_f32(t).map(f64::from)
    }
}
