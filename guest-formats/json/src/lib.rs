//! Flink's `json` format (flink-json 1.18), as a wasm component and as a plain Rust library.
//!
//! Decoding is a hand-written scanner that writes every value straight into typed columns (no tree,
//! no per-value allocation). Encoding writes Jackson's output byte for byte: field order, Java's
//! number text, `BigDecimal` text after `stripTrailingZeros`, Flink's timestamp formats, Jackson's
//! string escapes (non-BMP characters as `\uD83D\uDE00`).
//!
//! Native use:
//! ```ignore
//! let dec = json_format::decoder(&[("ignore-parse-errors".into(), "true".into())], &row_type)?;
//! let decoded: DecodedBatch = dec.decode(&message_batch)?;
//! let enc = json_format::encoder(&[], &row_type)?;
//! let encoded: EncodedBatch = enc.encode(&column_batch)?;
//! ```

mod scan;

use format_common::read::Reader;
use format_common::temporal::{self, parse_date, parse_time_prefix, parse_timestamp_prefix};
use format_common::{
    ColumnBatch, ConfigError, DataType, DecodedBatch, EncodedBatch, MessageBatch, Payloads,
    RowError, RowType, bool_option, check_known, config_error, decimal, javanum, option, skipped,
    slice_at, type_string, units_per_second,
};
use pulsar_connect_plugin::columns::Cols;
use scan::{check_utf8, same_bytes, scan_plain};

/// The options this format takes (without the `json.` prefix).
pub const OPTIONS: &[&str] = &[
    "fail-on-missing-field",
    "ignore-parse-errors",
    "timestamp-format.standard",
    "map-null-key.mode",
    "map-null-key.literal",
    "encode.decimal-as-plain-number",
    "encode.ignore-null-fields",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullKeyMode {
    Fail,
    Drop,
    Literal,
}

/// Parsed options.
#[derive(Debug, Clone)]
pub struct JsonOptions {
    pub fail_on_missing_field: bool,
    pub ignore_parse_errors: bool,
    /// `ISO-8601` (`T` between date and time) instead of `SQL` (a space).
    pub iso8601: bool,
    pub map_null_key_mode: NullKeyMode,
    pub map_null_key_literal: String,
    pub decimal_as_plain_number: bool,
    pub ignore_null_fields: bool,
}

impl JsonOptions {
    pub fn parse(options: &[(String, String)]) -> Result<JsonOptions, ConfigError> {
        check_known(options, OPTIONS)?;
        let fail_on_missing_field = bool_option(options, "fail-on-missing-field", false)?;
        let ignore_parse_errors = bool_option(options, "ignore-parse-errors", false)?;
        let iso8601 = match option(options, "timestamp-format.standard").unwrap_or("SQL") {
            s if s.eq_ignore_ascii_case("SQL") => false,
            s if s.eq_ignore_ascii_case("ISO-8601") => true,
            s => {
                return Err(config_error(
                    Some("timestamp-format.standard"),
                    format!(
                        "Unsupported value '{s}' for timestamp-format.standard. Supported values are [SQL, ISO-8601]."
                    ),
                ));
            }
        };
        let map_null_key_mode = match option(options, "map-null-key.mode").unwrap_or("FAIL") {
            s if s.eq_ignore_ascii_case("FAIL") => NullKeyMode::Fail,
            s if s.eq_ignore_ascii_case("DROP") => NullKeyMode::Drop,
            s if s.eq_ignore_ascii_case("LITERAL") => NullKeyMode::Literal,
            s => {
                return Err(config_error(
                    Some("map-null-key.mode"),
                    format!(
                        "Unsupported value '{s}' for option map-null-key.mode. Supported values are [LITERAL, FAIL, DROP]."
                    ),
                ));
            }
        };
        Ok(JsonOptions {
            fail_on_missing_field,
            ignore_parse_errors,
            iso8601,
            map_null_key_mode,
            map_null_key_literal: options
                .iter()
                .find(|(n, _)| n == "map-null-key.literal")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "null".into()),
            decimal_as_plain_number: bool_option(options, "encode.decimal-as-plain-number", false)?,
            ignore_null_fields: bool_option(options, "encode.ignore-null-fields", false)?,
        })
    }
}

fn check_types(rt: &RowType) -> Result<(), ConfigError> {
    format_common::validate_row_type(rt)?;
    for (i, node) in rt.types.iter().enumerate() {
        if let DataType::Map(m) = &node.data_type
            && !matches!(
                rt.types[m.key as usize].data_type,
                DataType::Char(_) | DataType::Varchar(_)
            )
        {
            return Err(config_error(
                None,
                format!(
                    "JSON format doesn't support non-string as key type of map. The type is: {}",
                    type_string(rt, i)
                ),
            ));
        }
    }
    Ok(())
}

/// The fields of one ROW (the top level or a nested row column) as the decoder looks them up.
#[derive(Debug, Clone)]
struct RowPlan {
    names: Vec<Vec<u8>>,
    cols: Vec<usize>,
    tys: Vec<usize>,
}

/// A configured decoder.
#[derive(Debug)]
pub struct Decoder {
    rt: RowType,
    opts: JsonOptions,
    top: RowPlan,
    /// By column index: the plan of a nested ROW column.
    nested: Vec<Option<RowPlan>>,
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
    let cols = Cols::new(row_type);
    let top = RowPlan {
        names: row_type
            .fields
            .iter()
            .map(|f| f.name.as_bytes().to_vec())
            .collect(),
        cols: (0..row_type.fields.len()).collect(),
        tys: row_type
            .fields
            .iter()
            .map(|f| f.type_index as usize)
            .collect(),
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
    Ok(Decoder {
        rt: row_type.clone(),
        opts,
        top,
        nested,
    })
}

/// Why a value could not be decoded.
enum Fail {
    /// Not JSON (or not a JSON object where one must be): the whole message fails.
    Syntax(String),
    /// Valid JSON the type cannot take: with `ignore-parse-errors` the value becomes NULL.
    Convert(String),
}

type R<T> = Result<T, Fail>;

fn syntax<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Syntax(msg.into()))
}

fn convert<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Convert(msg.into()))
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    scratch: Vec<u8>,
}

impl<'a> Parser<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.s.get(self.i) {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eof<T>(&self) -> R<T> {
        syntax(format!("unexpected end of input at byte {}", self.i))
    }

    #[inline(always)]
    fn expect(&mut self, c: u8) -> R<()> {
        match self.peek() {
            Some(x) if x == c => {
                self.i += 1;
                Ok(())
            }
            found => Err(self.unexpected(c, found)),
        }
    }

    /// The error of [`Parser::expect`] (out of line: the hot path builds no message).
    #[cold]
    #[inline(never)]
    fn unexpected(&self, c: u8, found: Option<u8>) -> Fail {
        Fail::Syntax(match found {
            Some(x) => format!(
                "expected '{}' at byte {}, found '{}'",
                c as char,
                self.i,
                x.escape_ascii()
            ),
            None => format!("unexpected end of input at byte {}", self.i),
        })
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            let end = (self.i + 8).min(self.s.len());
            syntax(format!(
                "unrecognized token '{}' at byte {}",
                String::from_utf8_lossy(&self.s[self.i..end]),
                self.i
            ))
        }
    }

    /// Reads a string (the opening quote at `i`); the bytes are borrowed when there are no escapes,
    /// else decoded into `scratch`. Returns (start, end) into `s`, or `None` for scratch.
    #[inline]
    fn string(&mut self) -> R<Option<(usize, usize)>> {
        self.i += 1;
        let start = self.i;
        let s = self.s;
        let j = scan_plain(s, start);
        if s.get(j) == Some(&b'"') {
            self.i = j + 1;
            return Ok(Some((start, j)));
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&s[start..j]);
        self.i = j;
        loop {
            let Some(&c) = s.get(self.i) else {
                return syntax("unexpected end of input in a string");
            };
            self.i += 1;
            match c {
                b'"' => return Ok(None),
                b'\\' => {
                    let Some(&e) = s.get(self.i) else {
                        return syntax("unexpected end of input in a string");
                    };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => self.scratch.push(e),
                        b'b' => self.scratch.push(8),
                        b'f' => self.scratch.push(12),
                        b'n' => self.scratch.push(b'\n'),
                        b'r' => self.scratch.push(b'\r'),
                        b't' => self.scratch.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp)
                                && s.get(self.i) == Some(&b'\\')
                                && s.get(self.i + 1) == Some(&b'u')
                            {
                                let save = self.i;
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                } else {
                                    self.i = save;
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            self.scratch
                                .extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => {
                            return syntax(format!(
                                "unrecognized character escape '{}'",
                                other.escape_ascii()
                            ));
                        }
                    }
                }
                c if c < 0x20 => {
                    return syntax(format!("illegal unquoted character (code {c}) in a string"));
                }
                c => self.scratch.push(c),
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        let Some(h) = self.s.get(self.i..self.i + 4) else {
            return syntax("unexpected end of input in a \\u escape");
        };
        let mut v = 0;
        for &c in h {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => return syntax("invalid \\u escape"),
            };
            v = v * 16 + u32::from(d);
        }
        self.i += 4;
        Ok(v)
    }

    /// Reads a number token: its text, whether it is an integer and, for an integer that fits, its
    /// value (accumulated while scanning: one pass over the digits, no overflow-checked multiply,
    /// which wasm32 lowers to a 128-bit library call).
    #[inline]
    fn number(&mut self) -> R<Number<'a>> {
        let s = self.s;
        let start = self.i;
        let mut j = start;
        let neg = s.get(j) == Some(&b'-');
        if neg {
            j += 1;
        }
        let int_start = j;
        // Up to eight digits at once, then one at a time (longer numbers, the end of the payload).
        let mut magnitude: u64 = 0;
        if let Some((n, v)) = scan::digits8(s, j) {
            j += n;
            magnitude = v;
        }
        while let Some(&c) = s.get(j) {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            magnitude = magnitude.wrapping_mul(10).wrapping_add(u64::from(d));
            j += 1;
        }
        let digits = j - int_start;
        if digits == 0 {
            return syntax(format!("unexpected character at byte {j} in a number"));
        }
        if digits > 1 && s[int_start] == b'0' {
            return syntax("invalid numeric value: leading zeroes not allowed");
        }
        let mut integer = true;
        if s.get(j) == Some(&b'.') {
            integer = false;
            j += 1;
            let f = j;
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
            if j == f {
                return syntax("decimal point must be followed by a digit");
            }
        }
        if matches!(s.get(j), Some(b'e' | b'E')) {
            integer = false;
            j += 1;
            if matches!(s.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let e = j;
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
            if j == e {
                return syntax("exponent indicator not followed by a digit");
            }
        }
        self.i = j;
        // Nineteen digits are below 10^19 < 2^64: the magnitude is exact.
        let value = if integer && digits <= 19 {
            signed(neg, magnitude)
        } else {
            None
        };
        Ok(Number {
            text: &s[start..j],
            integer,
            value,
        })
    }

    /// Skips one value, checking its syntax.
    fn skip(&mut self, depth: usize) -> R<()> {
        if depth > 512 {
            return syntax("nesting too deep");
        }
        match self.peek() {
            None => self.eof(),
            Some(b'"') => self.string().map(|_| ()),
            Some(b'{') => {
                self.i += 1;
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    if self.peek() != Some(b'"') {
                        return syntax("was expecting double-quote to start field name");
                    }
                    self.string()?;
                    self.expect(b':')?;
                    self.skip(depth + 1)?;
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(());
                        }
                        None => {
                            return syntax("unexpected end-of-input within/between Object entries");
                        }
                        Some(_) => return syntax("was expecting comma to separate Object entries"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(());
                        }
                        None => {
                            return syntax("unexpected end-of-input within/between Array entries");
                        }
                        Some(_) => return syntax("was expecting comma to separate Array entries"),
                    }
                }
            }
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number().map(|_| ()),
            Some(c) => syntax(format!(
                "unexpected character '{}' at byte {}",
                c.escape_ascii(),
                self.i
            )),
        }
    }

    /// The string at `i` as bytes (borrowed or from scratch).
    #[inline]
    fn str_bytes(&mut self) -> R<&[u8]> {
        Ok(match self.string()? {
            Some((a, b)) => &self.s[a..b],
            None => &self.scratch,
        })
    }
}

/// Compact JSON text of a value (Jackson's `JsonNode.toString()` for the STRING-from-anything case):
/// the input with whitespace outside strings removed.
fn compact(text: &[u8], out: &mut Vec<u8>) {
    let mut in_str = false;
    let mut esc = false;
    for &c in text {
        if in_str {
            out.push(c);
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
            out.push(c);
        } else if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            out.push(c);
        }
    }
}

/// A number token of the input.
struct Number<'a> {
    text: &'a [u8],
    /// No fraction, no exponent.
    integer: bool,
    /// The value of an integer token that fits an `i64`.
    value: Option<i64>,
}

/// `-magnitude` or `magnitude` as an `i64`, if it fits.
#[inline]
fn signed(neg: bool, magnitude: u64) -> Option<i64> {
    if neg {
        // -2^63 is the one magnitude that fits only negated; `as` maps it to i64::MIN.
        (magnitude <= 1 << 63).then(|| (magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// An integer in text (a JSON string holding a number): optional sign, at most 19 digits.
fn parse_int(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        magnitude = magnitude * 10 + u64::from(d);
    }
    signed(neg, magnitude)
}

fn int_range(dt: &DataType) -> (i64, i64, &'static str) {
    match dt {
        DataType::Tinyint => (i8::MIN.into(), i8::MAX.into(), "TINYINT"),
        DataType::Smallint => (i16::MIN.into(), i16::MAX.into(), "SMALLINT"),
        DataType::Int => (i32::MIN.into(), i32::MAX.into(), "INT"),
        _ => (i64::MIN, i64::MAX, "BIGINT"),
    }
}

impl Decoder {
    /// Decodes a batch: one row per message, or a row error (skips are errors whose reason starts
    /// with [`format_common::SKIPPED`]).
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        let mut p = Parser {
            s: &[],
            i: 0,
            scratch: Vec::new(),
        };
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
    fn object(
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
            other => other,
        }
    }

    /// One value of type `ty` into column `c`.
    fn value(&self, p: &mut Parser<'_>, c: usize, ty: usize, cols: &mut Cols) -> R<()> {
        let start = p.i;
        let len = cols.len(c);
        match self.value_inner(p, c, ty, cols) {
            Err(Fail::Convert(m)) if self.opts.ignore_parse_errors => {
                let _ = m;
                cols.truncate(c, len);
                p.i = start;
                p.skip(0)?;
                cols.push_null(c);
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
    fn value_inner(&self, p: &mut Parser<'_>, c: usize, ty: usize, cols: &mut Cols) -> R<()> {
        let node = &self.rt.types[ty];
        let Some(tok) = p.peek() else {
            return p.eof();
        };
        if tok == b'n' {
            p.literal(b"null")?;
            if !node.nullable {
                return convert("NULL for a NOT NULL type");
            }
            cols.push_null(c);
            return Ok(());
        }
        match &node.data_type {
            DataType::Boolean => {
                let v = match tok {
                    b't' => p.literal(b"true").map(|_| true)?,
                    b'f' => p.literal(b"false").map(|_| false)?,
                    b'"' => p.str_bytes()?.eq_ignore_ascii_case(b"true"),
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
                    b'-' | b'0'..=b'9' => {
                        let text = p.number()?.text;
                        // SAFETY of from_utf8: number text is ASCII.
                        let t = std::str::from_utf8(text).unwrap_or("");
                        if double {
                            t.parse::<f64>().ok()
                        } else {
                            t.parse::<f32>().ok().map(f64::from)
                        }
                    }
                    b'"' => {
                        let text = p.str_bytes()?;
                        let t = std::str::from_utf8(text).unwrap_or("");
                        if double {
                            javanum::parse_f64(t)
                        } else {
                            javanum::parse_f32(t).map(f64::from)
                        }
                    }
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

/// A configured encoder.
#[derive(Debug)]
pub struct Encoder {
    rt: RowType,
    opts: JsonOptions,
}

/// Creates an encoder for `row_type` with format options (no `json.` prefix).
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    let opts = JsonOptions::parse(options)?;
    check_types(row_type)?;
    Ok(Encoder {
        rt: row_type.clone(),
        opts,
    })
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A JSON string as Jackson writes it.
pub fn write_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let esc: Option<&[u8]> = match c {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            8 => Some(b"\\b"),
            12 => Some(b"\\f"),
            _ => None,
        };
        if let Some(e) = esc {
            out.extend_from_slice(&s[start..i]);
            out.extend_from_slice(e);
            i += 1;
            start = i;
        } else if c < 0x20 {
            out.extend_from_slice(&s[start..i]);
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(c >> 4) as usize]);
            out.push(HEX[(c & 15) as usize]);
            i += 1;
            start = i;
        } else if c >= 0xF0 {
            // A 4-byte UTF-8 sequence: Jackson writes the surrogate pair escaped.
            out.extend_from_slice(&s[start..i]);
            let cp = if i + 3 < s.len() {
                (u32::from(c & 0x07) << 18)
                    | (u32::from(s[i + 1] & 0x3f) << 12)
                    | (u32::from(s[i + 2] & 0x3f) << 6)
                    | u32::from(s[i + 3] & 0x3f)
            } else {
                0xFFFD
            };
            let v = cp.saturating_sub(0x10000);
            for unit in [0xD800 + (v >> 10), 0xDC00 + (v & 0x3ff)] {
                out.extend_from_slice(b"\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((unit >> shift) & 15) as usize]);
                }
            }
            i += 4;
            start = i.min(s.len());
        } else {
            i += 1;
        }
    }
    out.extend_from_slice(&s[start.min(s.len())..]);
    out.push(b'"');
}

impl Encoder {
    /// Encodes a batch: one payload per row; a row Flink cannot write (a NULL map key with
    /// `map-null-key.mode` FAIL) gets a row error and an empty payload. Values are read straight from
    /// the columns.
    pub fn encode(&self, batch: &ColumnBatch) -> Result<EncodedBatch, String> {
        let r = Reader::new(&self.rt, batch)?;
        let rows = batch.row_count as usize;
        let mut out = Payloads::with_capacity(rows);
        out.payloads.reserve(rows * 16 * self.rt.fields.len());
        let prefixes: Vec<Vec<u8>> = self
            .rt
            .fields
            .iter()
            .map(|f| {
                let mut p = Vec::new();
                write_string(f.name.as_bytes(), &mut p);
                p.push(b':');
                p
            })
            .collect();
        for i in 0..rows {
            let o = &mut out.payloads;
            o.push(b'{');
            let mut first = true;
            let mut failed = None;
            for (c, f) in self.rt.fields.iter().enumerate() {
                if self.opts.ignore_null_fields && r.is_null(c, i) {
                    continue;
                }
                if !first {
                    o.push(b',');
                }
                first = false;
                o.extend_from_slice(&prefixes[c]);
                if let Err(e) = self.col_value(&r, c, f.type_index as usize, i, o) {
                    failed = Some(format!("Fail to serialize at field: {}. {e}", f.name));
                    break;
                }
            }
            o.push(b'}');
            match failed {
                None => out.end(),
                Some(e) => out.fail(i, e),
            }
        }
        Ok(out.finish())
    }

    fn col_value(
        &self,
        r: &Reader<'_>,
        c: usize,
        ty: usize,
        i: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        if r.is_null(c, i) {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        let dt = &self.rt.types[ty].data_type;
        match dt {
            DataType::Boolean => {
                out.extend_from_slice(if r.bool(c, i) { b"true" } else { b"false" })
            }
            DataType::Tinyint | DataType::Smallint | DataType::Int | DataType::Bigint => {
                write_int(r.int(c, i), out);
            }
            DataType::Float => {
                let x = r.f32(c, i);
                let quote = !x.is_finite();
                if quote {
                    out.push(b'"');
                }
                javanum::write_f32(x, out);
                if quote {
                    out.push(b'"');
                }
            }
            DataType::Double => {
                let x = r.f64(c, i);
                let quote = !x.is_finite();
                if quote {
                    out.push(b'"');
                }
                javanum::write_f64(x, out);
                if quote {
                    out.push(b'"');
                }
            }
            DataType::Decimal(d) => {
                let (u, s) = decimal::strip(r.decimal(c, i), i32::from(d.scale));
                if self.opts.decimal_as_plain_number {
                    decimal::write_plain(u, s, out);
                } else {
                    decimal::write_java(u, s, out);
                }
            }
            DataType::Char(_) | DataType::Varchar(_) => write_string(r.bytes(c, i), out),
            DataType::Binary(_) | DataType::Varbinary(_) => {
                out.push(b'"');
                format_common::b64::encode(r.bytes(c, i), out);
                out.push(b'"');
            }
            DataType::Date => {
                out.push(b'"');
                temporal::write_date(r.int(c, i), out);
                out.push(b'"');
            }
            DataType::Time(p) => {
                let (secs, _) = temporal::time_parts(r.int(c, i), *p);
                out.push(b'"');
                temporal::write_hms(secs, out);
                out.push(b'"');
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                out.push(b'"');
                temporal::write_timestamp(
                    r.int(c, i),
                    *p,
                    if self.opts.iso8601 { b'T' } else { b' ' },
                    out,
                );
                if matches!(dt, DataType::TimestampLtz(_)) {
                    out.push(b'Z');
                }
                out.push(b'"');
            }
            DataType::Array(e) => {
                let (s, end) = r.range(c, i);
                let child = r.list_child(c);
                out.push(b'[');
                for j in s..end {
                    if j > s {
                        out.push(b',');
                    }
                    self.col_value(r, child, *e as usize, j, out)?;
                }
                out.push(b']');
            }
            DataType::Map(m) => {
                let (s, end) = r.range(c, i);
                let (kc, vc) = r.map_children(c);
                // Jackson's ObjectNode: a repeated key keeps its first position, the last value.
                let mut keyed: Vec<(&[u8], usize)> = Vec::with_capacity(end - s);
                for j in s..end {
                    let key: &[u8] = if r.is_null(kc, j) {
                        match self.opts.map_null_key_mode {
                            NullKeyMode::Fail => {
                                return Err("JSON format doesn't support to serialize map data with null keys. You can drop null key entries or encode null in literals by specifying map-null-key.mode option.".into());
                            }
                            NullKeyMode::Drop => continue,
                            NullKeyMode::Literal => self.opts.map_null_key_literal.as_bytes(),
                        }
                    } else {
                        r.bytes(kc, j)
                    };
                    match keyed.iter_mut().find(|(k2, _)| *k2 == key) {
                        Some(slot) => slot.1 = j,
                        None => keyed.push((key, j)),
                    }
                }
                out.push(b'{');
                for (n, (k, j)) in keyed.iter().enumerate() {
                    if n > 0 {
                        out.push(b',');
                    }
                    write_string(k, out);
                    out.push(b':');
                    self.col_value(r, vc, m.value as usize, *j, out)?;
                }
                out.push(b'}');
            }
            DataType::Row(fields) => {
                let children = r.row_children(c);
                out.push(b'{');
                let mut first = true;
                for (f, ch) in fields.iter().zip(children) {
                    if self.opts.ignore_null_fields && r.is_null(*ch as usize, i) {
                        continue;
                    }
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    write_string(f.name.as_bytes(), out);
                    out.push(b':');
                    self.col_value(r, *ch as usize, f.type_index as usize, i, out)
                        .map_err(|e| format!("{}: {e}", f.name))?;
                }
                out.push(b'}');
            }
        }
        Ok(())
    }
}

/// Decimal text of an integer.
#[inline]
fn write_int(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(target_arch = "wasm32")]
mod component {
    use pulsar_connect_plugin::prelude::*;

    struct Json;

    impl codec::Guest for Json {
        type Decoder = super::Decoder;
        type Encoder = super::Encoder;

        fn create_decoder(
            options: Options,
            row_type: RowType,
        ) -> Result<codec::Decoder, ConfigError> {
            super::decoder(&options, &row_type).map(codec::Decoder::new)
        }

        fn create_encoder(
            options: Options,
            row_type: RowType,
        ) -> Result<codec::Encoder, ConfigError> {
            super::encoder(&options, &row_type).map(codec::Encoder::new)
        }
    }

    impl codec::GuestDecoder for super::Decoder {
        fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
            self.decode(&messages)
        }
    }

    impl codec::GuestEncoder for super::Encoder {
        fn encode_batch(&self, rows: ColumnBatch) -> Result<EncodedBatch, String> {
            self.encode(&rows)
        }
    }

    pulsar_connect_plugin::export_format!(Json);
}
