//! Decoding: messages → the table's columns.

use crate::JsonOptions;
use crate::check_types;
use crate::parser::*;
use crate::scan::{check_utf8, same_bytes};
use crate::tree::java_trim;
use crate::tree_decode::Tree;
use format_common::temporal::{self, parse_date, parse_time_prefix, parse_timestamp_prefix};
use format_common::{
    ConfigError, DataType, DecodedBatch, MessageBatch, RowError, RowType, config_error, decimal,
    javanum, skipped, slice_at, units_per_second,
};
use pulsar_connect_plugin::columns::Cols;

/// The fields of one ROW (the top level or a nested row column) as the decoder looks them up.
#[derive(Debug, Clone)]
pub(crate) struct RowPlan {
    pub(crate) names: Vec<Vec<u8>>,
    pub(crate) cols: Vec<usize>,
    pub(crate) tys: Vec<usize>,
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
        let top = RowPlan {
            names: top_fields
                .iter()
                .map(|f| f.name.as_bytes().to_vec())
                .collect(),
            cols: (0..top_fields.len()).collect(),
            tys: top_fields.iter().map(|f| f.type_index as usize).collect(),
        };
        let nested = cols
            .cols
            .iter()
            .enumerate()
            .map(|(c, col)| match &row_type.types[col.ty].data_type {
                DataType::Row(fields) => Some(RowPlan {
                    names: fields.iter().map(|f| f.name.as_bytes().to_vec()).collect(),
                    cols: cols.row_children(c).to_vec(),
                    tys: fields.iter().map(|f| f.type_index as usize).collect(),
                }),
                _ => None,
            })
            .collect();
        Decoder {
            rt: row_type.clone(),
            opts,
            top,
            nested,
            tree,
        }
    }

    /// Decodes a batch: one row per message, or a row error (skips are errors whose reason starts
    /// with [`format_common::SKIPPED`]).
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        let mut p = Parser::new(&[]);
        for index in 0..batch.count as usize {
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

    /// Reads an object (at `{`) into the fields of `plan`. `row`: the nested ROW column being filled,
    /// whose children hold `base` values before this object; `None` for the top level.
    pub(crate) fn object(
        &self,
        p: &mut Parser<'_>,
        plan: &RowPlan,
        cols: &mut Cols,
        row: Option<usize>,
    ) -> R<()> {
        p.i += 1;
        let n = plan.cols.len();
        let base = match row {
            Some(c) => cols.len(c),
            // Tree mode writes several rows of a message before they are ended (and a row in parts).
            None if self.tree.is_some() => plan.cols.first().map_or(0, |&c| cols.len(c)),
            None => cols.rows(),
        };
        let mut seen_small: u64 = 0;
        let mut seen_big: Vec<bool> = if n > 64 { vec![false; n] } else { Vec::new() };
        let mut next = 0usize;
        if p.peek() == Some(b'}') {
            p.i += 1;
        } else {
            loop {
                if p.peek() != Some(b'"') {
                    return match p.peek() {
                        None => syntax("Unexpected end-of-input within/between Object entries"),
                        Some(c) => syntax(format!(
                            "Unexpected character ('{}'): was expecting double-quote to start field name",
                            c.escape_ascii()
                        )),
                    };
                }
                // Field lookup: usually the next declared field.
                let k = {
                    let key = p.str_bytes()?;
                    if next < n && same_bytes(&plan.names[next], key) {
                        Some(next)
                    } else {
                        plan.names.iter().position(|nm| same_bytes(nm, key))
                    }
                };
                p.expect(b':')?;
                match k {
                    None => p.skip(0)?,
                    Some(k) => {
                        next = k + 1;
                        let c = plan.cols[k];
                        let dup = if n > 64 {
                            std::mem::replace(&mut seen_big[k], true)
                        } else {
                            let bit = 1u64 << k;
                            let d = seen_small & bit != 0;
                            seen_small |= bit;
                            d
                        };
                        if dup {
                            // Duplicate key: the last one wins.
                            cols.truncate(c, base);
                        }
                        self.field(p, c, plan.tys[k], cols, &plan.names[k])?;
                    }
                }
                match p.peek() {
                    Some(b',') => p.i += 1,
                    Some(b'}') => {
                        p.i += 1;
                        break;
                    }
                    None => return syntax("Unexpected end-of-input within/between Object entries"),
                    Some(c) => {
                        return syntax(format!(
                            "Unexpected character ('{}'): was expecting comma to separate Object entries",
                            c.escape_ascii()
                        ));
                    }
                }
            }
        }
        let all_seen = n <= 64 && seen_small == if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        #[allow(clippy::needless_range_loop)]
        for k in 0..if all_seen { 0 } else { n } {
            let seen = if n > 64 {
                seen_big[k]
            } else {
                seen_small & (1 << k) != 0
            };
            if !seen {
                if self.opts.fail_on_missing_field {
                    return convert(format!(
                        "Some field is missing in the JSON data: `{}`",
                        String::from_utf8_lossy(&plan.names[k])
                    ));
                }
                if !self.rt.types[plan.tys[k]].nullable {
                    if self.tree.is_some() {
                        // Flink's tree path passes the NULL on; the caller decides.
                        p.null_in
                            .get_or_insert_with(|| String::from_utf8_lossy(&plan.names[k]).into());
                        cols.push_null(plan.cols[k]);
                        continue;
                    }
                    return convert(format!(
                        "field `{}` is missing and NOT NULL",
                        String::from_utf8_lossy(&plan.names[k])
                    ));
                }
                cols.push_null(plan.cols[k]);
            }
        }
        Ok(())
    }

    /// One field value: conversion errors name the field; with `ignore-parse-errors` they make the
    /// value NULL.
    fn field(
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

    #[inline]
    pub(crate) fn value_inner(
        &self,
        p: &mut Parser<'_>,
        c: usize,
        ty: usize,
        cols: &mut Cols,
    ) -> R<()> {
        let node = &self.rt.types[ty];
        let Some(tok) = p.peek() else {
            return p.eof();
        };
        if tok == b'n' {
            p.literal(b"null")?;
            if !node.nullable {
                if self.tree.is_none() {
                    return convert("NULL for a NOT NULL type");
                }
                // Flink's tree path passes the NULL on; the caller decides.
                p.note_null();
            }
            cols.push_null(c);
            return Ok(());
        }
        match &node.data_type {
            DataType::Boolean => {
                // Tree: `isBoolean() ? asBoolean() : Boolean.parseBoolean(asText().trim())`.
                let v = match tok {
                    b't' => p.literal(b"true").map(|_| true)?,
                    b'f' => p.literal(b"false").map(|_| false)?,
                    b'"' => {
                        let text = p.str_bytes()?;
                        let text = if self.tree.is_some() {
                            java_trim(text)
                        } else {
                            text
                        };
                        text.eq_ignore_ascii_case(b"true")
                    }
                    _ => {
                        p.skip(0)?;
                        false
                    }
                };
                cols.push_bool(c, v);
            }
            dt @ (DataType::Tinyint | DataType::Smallint | DataType::Int | DataType::Bigint) => {
                let (lo, hi, name) = int_range(dt);
                let v = match tok {
                    b'-' | b'0'..=b'9' => {
                        let Number {
                            text,
                            integer,
                            value,
                        } = p.number()?;
                        if integer {
                            value
                        } else {
                            let f: f64 = std::str::from_utf8(text)
                                .ok()
                                .and_then(|t| t.parse().ok())
                                .unwrap_or(f64::NAN);
                            let t = f.trunc();
                            (t >= lo as f64 && t <= hi as f64).then_some(t as i64)
                        }
                        .ok_or_else(|| {
                            Fail::Convert(format!(
                                "numeric value ({}) out of range of {name}",
                                String::from_utf8_lossy(text)
                            ))
                        })?
                    }
                    b'"' => {
                        let text = p.str_bytes()?;
                        parse_int(text).ok_or_else(|| {
                            Fail::Convert(format!(
                                "For input string: \"{}\" ({name})",
                                String::from_utf8_lossy(text)
                            ))
                        })?
                    }
                    _ => {
                        p.skip(0)?;
                        return convert(format!("expected a number for {name}"));
                    }
                };
                if v < lo || v > hi {
                    return convert(format!("numeric value ({v}) out of range of {name}"));
                }
                cols.push_int(c, v);
            }
            DataType::Float | DataType::Double => {
                let double = matches!(node.data_type, DataType::Double);
                let v = match tok {
                    b'-' | b'0'..=b'9' => parse_float(p.number()?.text, double),
                    b'"' => parse_java_float(p.str_bytes()?, double),
                    _ => None,
                };
                let Some(v) = v else {
                    return convert("not a floating point number");
                };
                if double {
                    cols.push_f64(c, v);
                } else {
                    cols.push_f32(c, v as f32);
                }
            }
            DataType::Decimal(d) => {
                let text: &[u8] = match tok {
                    b'-' | b'0'..=b'9' => p.number()?.text,
                    b'"' => p.str_bytes()?,
                    _ => return convert("not a decimal number"),
                };
                match decimal::parse(text, d.precision, d.scale).map_err(Fail::Convert)? {
                    Some(v) => cols.push_decimal(c, v),
                    // Flink: a value that does not fit the precision is NULL.
                    None => cols.push_null(c),
                }
            }
            DataType::Char(_) | DataType::Varchar(_) => match tok {
                b'"' => {
                    let text = p.str_bytes()?;
                    cols.push_bytes(c, text);
                }
                _ => {
                    let start = p.i;
                    p.skip(0)?;
                    let text = &p.s[start..p.i];
                    let buf = cols.bytes_buf(c);
                    compact(text, buf);
                    cols.finish_bytes(c);
                }
            },
            DataType::Binary(_) | DataType::Varbinary(_) => {
                if tok != b'"' {
                    return convert("expected a base64 string for BYTES");
                }
                let text = match p.string()? {
                    Some((a, b)) => &p.s[a..b],
                    None => &p.scratch[..],
                };
                let buf = cols.bytes_buf(c);
                if let Err(e) = format_common::b64::decode(text, buf) {
                    cols.abandon_bytes(c);
                    return convert(e);
                }
                cols.finish_bytes(c);
            }
            DataType::Date => {
                if tok != b'"' {
                    p.skip(0)?;
                    return convert("expected a date string yyyy-MM-dd");
                }
                let text = p.str_bytes()?;
                let d = parse_date(text).ok_or_else(|| {
                    Fail::Convert(format!(
                        "Text '{}' could not be parsed as a DATE",
                        String::from_utf8_lossy(text)
                    ))
                })?;
                cols.push_i32(c, d as i32);
            }
            DataType::Time(prec) => {
                if tok != b'"' {
                    p.skip(0)?;
                    return convert("expected a time string HH:mm:ss");
                }
                let text = p.str_bytes()?;
                let secs = match parse_time_prefix(text) {
                    Some(((secs, _), [])) => secs,
                    _ => {
                        return convert(format!(
                            "Text '{}' could not be parsed as a TIME",
                            String::from_utf8_lossy(text)
                        ));
                    }
                };
                // Flink keeps whole seconds only (SQL_TIME_FORMAT), whatever the precision.
                let v = i64::from(secs) * units_per_second(*prec);
                if *prec <= 3 {
                    cols.push_i32(c, v as i32);
                } else {
                    cols.push_i64(c, v);
                }
            }
            DataType::Timestamp(prec) | DataType::TimestampLtz(prec) => {
                let ltz = matches!(node.data_type, DataType::TimestampLtz(_));
                if tok != b'"' {
                    p.skip(0)?;
                    return convert("expected a timestamp string");
                }
                let sep = if self.opts.iso8601 { b'T' } else { b' ' };
                let text = p.str_bytes()?;
                let parsed = match parse_timestamp_prefix(text, sep) {
                    Some((v, rest)) if ltz && rest == b"Z" => Some(v),
                    Some((v, [])) if !ltz => Some(v),
                    _ => None,
                };
                let Some((secs, nanos)) = parsed else {
                    return convert(format!(
                        "Text '{}' could not be parsed as a {}",
                        String::from_utf8_lossy(text),
                        if ltz { "TIMESTAMP_LTZ" } else { "TIMESTAMP" }
                    ));
                };
                let v = temporal::to_unit(secs, nanos, *prec)
                    .ok_or_else(|| Fail::Convert("timestamp out of range".into()))?;
                cols.push_i64(c, v);
            }
            DataType::Array(e) => {
                if tok != b'[' {
                    p.skip(0)?;
                    return convert("expected a JSON array");
                }
                p.i += 1;
                let child = cols.list_child(c);
                if p.peek() == Some(b']') {
                    p.i += 1;
                } else {
                    loop {
                        self.value(p, child, *e as usize, cols)?;
                        match p.peek() {
                            Some(b',') => p.i += 1,
                            Some(b']') => {
                                p.i += 1;
                                break;
                            }
                            None => {
                                return syntax(
                                    "Unexpected end-of-input within/between Array entries",
                                );
                            }
                            Some(_) => {
                                return syntax("was expecting comma to separate Array entries");
                            }
                        }
                    }
                }
                cols.end_list(c);
            }
            DataType::Map(m) => {
                if tok != b'{' {
                    // Flink 1.18 fails the whole record here, even with ignore-parse-errors.
                    return syntax("expected a JSON object for a MAP");
                }
                p.i += 1;
                let (kc, vc) = cols.map_children(c);
                if p.peek() == Some(b'}') {
                    p.i += 1;
                } else {
                    loop {
                        if p.peek() != Some(b'"') {
                            return syntax("was expecting double-quote to start field name");
                        }
                        let key = p.str_bytes()?;
                        cols.push_bytes(kc, key);
                        p.expect(b':')?;
                        self.value(p, vc, m.value as usize, cols)?;
                        match p.peek() {
                            Some(b',') => p.i += 1,
                            Some(b'}') => {
                                p.i += 1;
                                break;
                            }
                            None => {
                                return syntax(
                                    "Unexpected end-of-input within/between Object entries",
                                );
                            }
                            Some(_) => {
                                return syntax("was expecting comma to separate Object entries");
                            }
                        }
                    }
                }
                cols.end_list(c);
            }
            DataType::Row(_) => {
                if tok != b'{' {
                    p.skip(0)?;
                    return convert("expected a JSON object for a ROW");
                }
                let plan = self.nested[c].as_ref().expect("row plan");
                self.object(p, plan, cols, Some(c))?;
                cols.push_row_valid(c);
            }
        }
        Ok(())
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
