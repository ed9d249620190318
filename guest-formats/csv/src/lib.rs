//! Flink's `csv` format (flink-csv 1.18, Jackson CSV underneath): one record per message.
//!
//! Writing follows Jackson's `CsvEncoder`: numbers and booleans bare; other values quoted only when
//! they need it (empty: never; first character `#`, longer than 24 UTF-16 units, or any character
//! below `max(delimiter, quote) + 1`, or the escape character: always), a quote inside doubled, the
//! escape character doubled; NULL as the null literal (empty by default); ARRAY (and a ROW of simple
//! types) as one field joined by the array element delimiter. Reading follows Flink's converters:
//! numbers trimmed, `Boolean.parseBoolean`, lenient `java.sql.Date.valueOf`, arrays split.
//!
//! Native use: `csv_format::decoder(&options, &row_type)?.decode(&messages)?` and
//! `csv_format::encoder(&options, &row_type)?.encode(&columns)?`.

use format_common::read::Reader;
use format_common::temporal::{self, parse_time_prefix, parse_timestamp_prefix};
use format_common::{
    ColumnBatch, ConfigError, DataType, DecodedBatch, EncodedBatch, MessageBatch, Payloads,
    RowError, RowType, SKIPPED, bool_option, check_known, config_error, decimal, javanum, option,
    skipped, slice_at, type_string,
};
use pulsar_connect_plugin::columns::Cols;

pub const OPTIONS: &[&str] = &[
    "field-delimiter",
    "disable-quote-character",
    "quote-character",
    "allow-comments",
    "ignore-parse-errors",
    "array-element-delimiter",
    "escape-character",
    "null-literal",
    "write-bigdecimal-in-scientific-notation",
];

/// Parsed options.
#[derive(Debug, Clone)]
pub struct CsvOptions {
    pub delimiter: char,
    /// `None` when quoting is disabled.
    pub quote: Option<char>,
    pub allow_comments: bool,
    pub ignore_parse_errors: bool,
    pub array_delimiter: String,
    pub escape: Option<char>,
    pub null_literal: Option<String>,
    /// DECIMAL through `BigDecimal.toString` (Flink applies the option only when it is set).
    pub scientific_decimals: bool,
}

/// The value of option `name`, not trimmed (a tab is a valid delimiter), with its Java escapes replaced
/// when `unescape` (Flink unescapes `field-delimiter`; we also unescape `escape-character` and
/// `array-element-delimiter`, whose `'\t'` Flink takes literally or refuses).
fn text_option(
    options: &[(String, String)],
    name: &str,
    unescape: bool,
) -> Result<Option<String>, ConfigError> {
    match options.iter().find(|(n, _)| n == name) {
        None => Ok(None),
        Some((_, v)) if unescape => format_common::escape::unescape_java(v)
            .map(Some)
            .map_err(|e| config_error(Some(name), format!("Option '{name}': {e}"))),
        Some((_, v)) => Ok(Some(v.clone())),
    }
}

fn single_char(
    options: &[(String, String)],
    name: &str,
    default: Option<char>,
    unescape: bool,
) -> Result<Option<char>, ConfigError> {
    match text_option(options, name, unescape)? {
        None => Ok(default),
        Some(v) => {
            let mut chars = v.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Some(c)),
                _ => {
                    let written = options
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.as_str())
                        .unwrap_or_default();
                    Err(config_error(
                        Some(name),
                        format!(
                            "Option '{name}' must be a string with single character, but was: {written}"
                        ),
                    ))
                }
            }
        }
    }
}

impl CsvOptions {
    pub fn parse(options: &[(String, String)]) -> Result<CsvOptions, ConfigError> {
        check_known(options, OPTIONS)?;
        let disable_quote = bool_option(options, "disable-quote-character", false)?;
        if disable_quote && options.iter().any(|(n, _)| n == "quote-character") {
            return Err(config_error(
                Some("quote-character"),
                "Format cannot define a quote character and disabled quote character at the same time.",
            ));
        }
        let delimiter = single_char(options, "field-delimiter", Some(','), true)?.unwrap_or(',');
        let quote = if disable_quote {
            None
        } else {
            single_char(options, "quote-character", Some('"'), false)?
        };
        Ok(CsvOptions {
            delimiter,
            quote,
            allow_comments: bool_option(options, "allow-comments", false)?,
            ignore_parse_errors: bool_option(options, "ignore-parse-errors", false)?,
            // One character, as Flink 1.18 validates it (after our unescaping).
            array_delimiter: single_char(options, "array-element-delimiter", Some(';'), true)?
                .unwrap_or(';')
                .to_string(),
            escape: single_char(options, "escape-character", None, true)?,
            scientific_decimals: bool_option(
                options,
                "write-bigdecimal-in-scientific-notation",
                false,
            )?,
            null_literal: option(options, "null-literal").map(|_| {
                options
                    .iter()
                    .find(|(n, _)| n == "null-literal")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            }),
        })
    }
}

fn simple(dt: &DataType) -> bool {
    !matches!(dt, DataType::Array(_) | DataType::Map(_) | DataType::Row(_))
}

fn check_types(rt: &RowType) -> Result<(), ConfigError> {
    format_common::validate_row_type(rt)?;
    for f in &rt.fields {
        let ty = f.type_index as usize;
        let children: Vec<usize> = match &rt.types[ty].data_type {
            DataType::Map(_) => {
                return Err(config_error(
                    None,
                    format!(
                        "Unsupported type '{}' for field '{}'.",
                        type_string(rt, ty),
                        f.name
                    ),
                ));
            }
            DataType::Array(e) => vec![*e as usize],
            DataType::Row(fields) => fields.iter().map(|x| x.type_index as usize).collect(),
            _ => Vec::new(),
        };
        for c in children {
            if !simple(&rt.types[c].data_type) {
                let mut name = type_string(rt, c);
                if let Some(n) = name.strip_suffix(" NOT NULL") {
                    name = n.to_owned();
                }
                return Err(config_error(
                    None,
                    format!(
                        "Only simple types are supported in the second level nesting of fields '{}' but was: {name}",
                        f.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A configured decoder.
#[derive(Debug)]
pub struct Decoder {
    rt: RowType,
    opts: CsvOptions,
    delim: Vec<u8>,
    quote: Option<Vec<u8>>,
    esc: Option<Vec<u8>>,
}

/// A configured encoder.
#[derive(Debug)]
pub struct Encoder {
    rt: RowType,
    opts: CsvOptions,
    min_safe: u32,
}

/// Creates a decoder (options without the `csv.` prefix).
pub fn decoder(options: &[(String, String)], row_type: &RowType) -> Result<Decoder, ConfigError> {
    let opts = CsvOptions::parse(options)?;
    check_types(row_type)?;
    Ok(Decoder {
        rt: row_type.clone(),
        delim: opts.delimiter.to_string().into_bytes(),
        quote: opts.quote.map(|q| q.to_string().into_bytes()),
        esc: opts.escape.map(|q| q.to_string().into_bytes()),
        opts,
    })
}

/// Creates an encoder (options without the `csv.` prefix).
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    let opts = CsvOptions::parse(options)?;
    check_types(row_type)?;
    let min_safe = (opts.delimiter as u32).max(opts.quote.map_or(0, |q| q as u32)) + 1;
    Ok(Encoder {
        rt: row_type.clone(),
        opts,
        min_safe,
    })
}

enum Fail {
    /// The record itself is broken: the message fails (skipped with ignore-parse-errors).
    Record(String),
    /// A field cannot be converted: NULL with ignore-parse-errors.
    Field(String),
}

/// Fields of one record: field i is `buf[ends[i-1]..ends[i]]`.
struct Record {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Record {
    fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }
}

/// Whether `pat` (non-empty) starts at `s[i]`.
#[inline]
fn at(s: &[u8], i: usize, pat: &[u8]) -> bool {
    s.get(i) == Some(&pat[0]) && (pat.len() == 1 || s[i..].starts_with(pat))
}

#[inline]
fn is_eol(c: u8) -> bool {
    c == b'\n' || c == b'\r'
}

impl Decoder {
    /// Parses the first record of `text` into `rec`; `Ok(false)` when there is no record.
    fn record(&self, text: &str, rec: &mut Record) -> Result<bool, Fail> {
        rec.buf.clear();
        rec.ends.clear();
        let s = text.as_bytes();
        let mut i = 0;
        if self.opts.allow_comments {
            // Jackson skips empty lines and comment lines before a record.
            loop {
                if i < s.len() && is_eol(s[i]) {
                    i += 1;
                } else if s.get(i) == Some(&b'#') {
                    while i < s.len() && !is_eol(s[i]) {
                        i += 1;
                    }
                } else {
                    break;
                }
            }
        }
        if i >= s.len() {
            return Ok(false);
        }
        let (delim, quote, esc) = (&self.delim[..], self.quote.as_deref(), self.esc.as_deref());
        loop {
            // One field starting at i.
            if let Some(q) = quote.filter(|q| at(s, i, q)) {
                i += q.len();
                loop {
                    if i >= s.len() {
                        return Err(Fail::Record("Missing closing quote for value".into()));
                    }
                    if let Some(e) = esc.filter(|e| s[i..].starts_with(e) && *e != q) {
                        i += e.len();
                        let ch_len = text[i..].chars().next().map_or(0, char::len_utf8);
                        rec.buf.extend_from_slice(&s[i..i + ch_len]);
                        i += ch_len;
                    } else if s[i..].starts_with(q) {
                        i += q.len();
                        if s[i..].starts_with(q) {
                            rec.buf.extend_from_slice(q);
                            i += q.len();
                        } else {
                            break;
                        }
                    } else {
                        rec.buf.push(s[i]);
                        i += 1;
                    }
                }
                rec.ends.push(rec.buf.len());
                if i < s.len() && !at(s, i, delim) && !is_eol(s[i]) {
                    return Err(Fail::Record(format!(
                        "Unexpected character ('{}'): Expected column separator character or end-of-line",
                        text[i..].chars().next().unwrap_or('?')
                    )));
                }
            } else if esc.is_none() && delim.len() == 1 {
                // The common case: a run up to the delimiter or the line end.
                let (d, start) = (delim[0], i);
                while i < s.len() && s[i] != d && !is_eol(s[i]) {
                    i += 1;
                }
                rec.buf.extend_from_slice(&s[start..i]);
                rec.ends.push(rec.buf.len());
            } else {
                while i < s.len() && !is_eol(s[i]) && !at(s, i, delim) {
                    if let Some(e) = esc.filter(|e| s[i..].starts_with(e)) {
                        i += e.len();
                        let ch_len = text[i..].chars().next().map_or(0, char::len_utf8);
                        rec.buf.extend_from_slice(&s[i..i + ch_len]);
                        i += ch_len;
                    } else {
                        rec.buf.push(s[i]);
                        i += 1;
                    }
                }
                rec.ends.push(rec.buf.len());
            }
            if at(s, i, delim) {
                i += delim.len();
                continue;
            }
            break;
        }
        Ok(true)
    }

    /// Decodes a batch: one row per message; skips are errors starting with [`SKIPPED`].
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        let mut rec = Record {
            buf: Vec::new(),
            ends: Vec::new(),
        };
        let n = self.rt.fields.len();
        let ignore = self.opts.ignore_parse_errors;
        for index in 0..batch.count as usize {
            let payload = slice_at(&batch.payloads, &batch.payload_offsets, index);
            let r: Result<(), String> = (|| {
                let text = std::str::from_utf8(payload)
                    .map_err(|e| format!("invalid UTF-8 in the CSV payload: {e}"))?;
                match self.record(text, &mut rec) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(if ignore {
                            skipped("no CSV record")
                        } else {
                            "No content to map due to end-of-input".into()
                        });
                    }
                    Err(Fail::Record(m) | Fail::Field(m)) => return Err(m),
                }
                // Jackson's ALLOW_TRAILING_COMMA: one empty extra value at the end is dropped.
                if rec.ends.len() == n + 1 && rec.field(n).is_empty() {
                    rec.ends.pop();
                }
                if rec.ends.len() > n {
                    return Err(format!(
                        "Too many entries: expected at most {n}, got {}",
                        rec.ends.len()
                    ));
                }
                if rec.ends.len() < n && !ignore {
                    return Err(format!(
                        "Row length mismatch. {n} fields expected but was {}.",
                        rec.ends.len()
                    ));
                }
                for (c, f) in self.rt.fields.iter().enumerate() {
                    let ty = f.type_index as usize;
                    if c >= rec.ends.len() {
                        cols.push_null(c);
                        continue;
                    }
                    let text = rec.field(c);
                    match self.field(text, c, ty, &mut cols) {
                        Ok(()) => {}
                        Err(Fail::Field(m)) if ignore => {
                            let _ = m;
                            cols.truncate(c, cols.rows());
                            cols.push_null(c);
                        }
                        Err(Fail::Field(m) | Fail::Record(m)) => {
                            return Err(format!("Fail to deserialize at field: {}: {m}", f.name));
                        }
                    }
                }
                Ok(())
            })();
            match r {
                Ok(()) => cols.end_row(),
                Err(reason) => {
                    cols.rollback();
                    let reason = if ignore && !reason.starts_with(SKIPPED) {
                        skipped(reason)
                    } else {
                        reason
                    };
                    errors.push(RowError {
                        index: index as u32,
                        reason,
                    });
                }
            }
        }
        Ok(format_common::decoded(cols, errors))
    }

    fn is_null(&self, text: &[u8]) -> bool {
        self.opts
            .null_literal
            .as_deref()
            .is_some_and(|l| l.as_bytes() == text)
    }

    fn field(&self, text: &[u8], c: usize, ty: usize, cols: &mut Cols) -> Result<(), Fail> {
        match &self.rt.types[ty].data_type {
            DataType::Array(e) => {
                let child = cols.list_child(c);
                if !text.is_empty() {
                    let d = self.opts.array_delimiter.as_bytes();
                    for part in split(text, d) {
                        self.scalar(part, child, *e as usize, cols)?;
                    }
                }
                cols.end_list(c);
                Ok(())
            }
            DataType::Row(fields) => {
                let children = cols.row_children(c).to_vec();
                let d = self.opts.array_delimiter.as_bytes();
                let parts: Vec<&[u8]> = if text.is_empty() {
                    Vec::new()
                } else {
                    split(text, d).collect()
                };
                for (k, (f, ch)) in fields.iter().zip(children).enumerate() {
                    match parts.get(k) {
                        Some(p) => self.scalar(p, ch, f.type_index as usize, cols)?,
                        None => cols.push_null(ch),
                    }
                }
                cols.push_row_valid(c);
                Ok(())
            }
            _ => self.scalar(text, c, ty, cols),
        }
    }

    fn scalar(&self, text: &[u8], c: usize, ty: usize, cols: &mut Cols) -> Result<(), Fail> {
        if self.is_null(text) {
            cols.push_null(c);
            return Ok(());
        }
        let node = &self.rt.types[ty];
        let s = std::str::from_utf8(text).unwrap_or("");
        let trimmed = s.trim_matches(|ch: char| ch <= ' ');
        let bad = |what: &str| Fail::Field(format!("For input string: \"{s}\" ({what})"));
        match &node.data_type {
            DataType::Boolean => cols.push_bool(c, trimmed.eq_ignore_ascii_case("true")),
            DataType::Tinyint => cols.push_i8(c, trimmed.parse().map_err(|_| bad("TINYINT"))?),
            DataType::Smallint => cols.push_i16(c, trimmed.parse().map_err(|_| bad("SMALLINT"))?),
            DataType::Int => cols.push_i32(c, trimmed.parse().map_err(|_| bad("INT"))?),
            DataType::Bigint => cols.push_i64(c, trimmed.parse().map_err(|_| bad("BIGINT"))?),
            DataType::Float => {
                cols.push_f32(c, javanum::parse_f32(trimmed).ok_or_else(|| bad("FLOAT"))?)
            }
            DataType::Double => {
                cols.push_f64(c, javanum::parse_f64(trimmed).ok_or_else(|| bad("DOUBLE"))?)
            }
            DataType::Decimal(d) => {
                match decimal::parse(trimmed.as_bytes(), d.precision, d.scale)
                    .map_err(Fail::Field)?
                {
                    Some(v) => cols.push_decimal(c, v),
                    None => cols.push_null(c),
                }
            }
            DataType::Char(_) | DataType::Varchar(_) => cols.push_bytes(c, text),
            DataType::Binary(_) | DataType::Varbinary(_) => {
                let buf = cols.bytes_buf(c);
                if let Err(e) = format_common::b64::decode(text, buf) {
                    cols.abandon_bytes(c);
                    return Err(Fail::Field(e));
                }
                cols.finish_bytes(c);
            }
            DataType::Date => cols.push_i32(c, sql_date(s).ok_or_else(|| bad("DATE"))? as i32),
            DataType::Time(p) => {
                let ((secs, nanos), rest) = parse_time_prefix(text).ok_or_else(|| bad("TIME"))?;
                if !rest.is_empty() {
                    return Err(bad("TIME"));
                }
                // Flink's TIME holds milliseconds.
                let v = temporal::to_unit(i64::from(secs), nanos / 1_000_000 * 1_000_000, *p)
                    .ok_or_else(|| bad("TIME"))?;
                if *p <= 3 {
                    cols.push_i32(c, v as i32);
                } else {
                    cols.push_i64(c, v);
                }
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                let ltz = matches!(node.data_type, DataType::TimestampLtz(_));
                let ok = match parse_timestamp_prefix(text, b' ') {
                    Some((v, rest)) if (ltz && rest == b"Z") || (!ltz && rest.is_empty()) => {
                        Some(v)
                    }
                    _ => None,
                };
                let (secs, nanos) = ok.ok_or_else(|| {
                    Fail::Field(format!("Text '{s}' could not be parsed as a timestamp"))
                })?;
                cols.push_i64(
                    c,
                    temporal::to_unit(secs, nanos, *p).ok_or_else(|| bad("TIMESTAMP"))?,
                );
            }
            _ => return Err(Fail::Field("unsupported nested type".into())),
        }
        Ok(())
    }
}

fn split<'a>(text: &'a [u8], d: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let r = rest?;
        if d.is_empty() {
            rest = None;
            return Some(r);
        }
        match r.windows(d.len()).position(|w| w == d) {
            Some(p) => {
                rest = Some(&r[p + d.len()..]);
                Some(&r[..p])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// `java.sql.Date.valueOf`: `yyyy-[m]m-[d]d`, month 1..12, day 1..31, lenient (Feb 30 is Mar 2).
fn sql_date(s: &str) -> Option<i64> {
    let mut parts = s.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || y.len() != 4
        || !(1..=2).contains(&m.len())
        || !(1..=2).contains(&d.len())
        || ![y, m, d]
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    Some(temporal::days_from_civil(y, m, 1) + i64::from(d) - 1)
}

impl Encoder {
    /// Encodes a batch: one record per row, no line terminator; values read straight from the
    /// columns.
    pub fn encode(&self, batch: &ColumnBatch) -> Result<EncodedBatch, String> {
        let r = Reader::new(&self.rt, batch)?;
        let rows = batch.row_count as usize;
        let mut out = Payloads::with_capacity(rows);
        let mut field = Vec::new();
        let mut buf = [0u8; 4];
        let delim = self
            .opts
            .delimiter
            .encode_utf8(&mut buf)
            .as_bytes()
            .to_vec();
        for i in 0..rows {
            for (c, f) in self.rt.fields.iter().enumerate() {
                if c > 0 {
                    out.payloads.extend_from_slice(&delim);
                }
                let ty = f.type_index as usize;
                if r.is_null(c, i) {
                    self.null(&mut out.payloads);
                    continue;
                }
                match &self.rt.types[ty].data_type {
                    // Numbers and booleans are written bare.
                    DataType::Boolean
                    | DataType::Tinyint
                    | DataType::Smallint
                    | DataType::Int
                    | DataType::Bigint
                    | DataType::Float
                    | DataType::Double => self.text(&r, c, ty, i, &mut out.payloads),
                    DataType::Array(e) => {
                        field.clear();
                        let (s, end) = r.range(c, i);
                        let child = r.list_child(c);
                        self.join((s..end).map(|j| (child, *e as usize, j)), &r, &mut field);
                        self.string(&field, &mut out.payloads);
                    }
                    DataType::Row(fields) => {
                        field.clear();
                        let children = r.row_children(c);
                        self.join(
                            fields
                                .iter()
                                .zip(children)
                                .map(|(f, ch)| (*ch as usize, f.type_index as usize, i)),
                            &r,
                            &mut field,
                        );
                        self.string(&field, &mut out.payloads);
                    }
                    _ => {
                        field.clear();
                        self.text(&r, c, ty, i, &mut field);
                        self.string(&field, &mut out.payloads);
                    }
                }
            }
            out.end();
        }
        Ok(out.finish())
    }

    fn null(&self, out: &mut Vec<u8>) {
        if let Some(l) = &self.opts.null_literal {
            out.extend_from_slice(l.as_bytes());
        }
    }

    /// Array elements (or simple row fields) as (column, type, index), joined by the delimiter.
    fn join(
        &self,
        items: impl Iterator<Item = (usize, usize, usize)>,
        r: &Reader<'_>,
        out: &mut Vec<u8>,
    ) {
        for (n, (c, ty, i)) in items.enumerate() {
            if n > 0 {
                out.extend_from_slice(self.opts.array_delimiter.as_bytes());
            }
            if r.is_null(c, i) {
                self.null(out);
            } else {
                self.text(r, c, ty, i, out);
            }
        }
    }

    /// The text of a scalar value.
    fn text(&self, r: &Reader<'_>, c: usize, ty: usize, i: usize, out: &mut Vec<u8>) {
        let dt = &self.rt.types[ty].data_type;
        match dt {
            DataType::Boolean => {
                out.extend_from_slice(if r.bool(c, i) { b"true" } else { b"false" })
            }
            DataType::Tinyint | DataType::Smallint | DataType::Int | DataType::Bigint => {
                javanum::write_i64(r.int(c, i), out)
            }
            DataType::Float => javanum::write_f32(r.f32(c, i), out),
            DataType::Double => javanum::write_f64(r.f64(c, i), out),
            DataType::Decimal(d) => {
                let (u, s) = decimal::strip(r.decimal(c, i), i32::from(d.scale));
                if self.opts.scientific_decimals {
                    decimal::write_java(u, s, out);
                } else {
                    decimal::write_plain(u, s, out);
                }
            }
            DataType::Char(_) | DataType::Varchar(_) => out.extend_from_slice(r.bytes(c, i)),
            DataType::Binary(_) | DataType::Varbinary(_) => {
                format_common::b64::encode(r.bytes(c, i), out)
            }
            DataType::Date => temporal::write_date(r.int(c, i), out),
            DataType::Time(p) => {
                let (secs, nanos) = temporal::time_parts(r.int(c, i), *p);
                temporal::write_hms(secs, out);
                temporal::write_fraction_stripped(nanos / 1_000_000 * 1_000_000, out);
            }
            DataType::Timestamp(p) | DataType::TimestampLtz(p) => {
                temporal::write_timestamp(r.int(c, i), *p, b' ', out);
                if matches!(dt, DataType::TimestampLtz(_)) {
                    out.push(b'Z');
                }
            }
            DataType::Array(_) | DataType::Map(_) | DataType::Row(_) => {}
        }
    }

    /// A string value, quoted when Jackson would quote it.
    fn string(&self, s: &[u8], out: &mut Vec<u8>) {
        let Some(q) = self.opts.quote else {
            out.extend_from_slice(s);
            return;
        };
        let esc = self.opts.escape;
        // Jackson also quotes a backslash (its default quote-escape character).
        let special = |c: char| (c as u32) < self.min_safe || c == q || c == '\\' || Some(c) == esc;
        let needs = if s.is_empty() {
            false
        } else if s.is_ascii() {
            s[0] == b'#' || s.len() > 24 || s.iter().any(|&b| special(b as char))
        } else {
            let text = std::str::from_utf8(s).unwrap_or("");
            text.starts_with('#') || text.encode_utf16().count() > 24 || text.chars().any(special)
        };
        if !needs {
            out.extend_from_slice(s);
            return;
        }
        let mut buf = [0u8; 4];
        let qb = q.encode_utf8(&mut buf).as_bytes().to_vec();
        out.extend_from_slice(&qb);
        if q.is_ascii() && esc.is_none_or(|e| e.is_ascii()) {
            // Doubling quote / escape characters byte-wise (they are ASCII, so never inside a
            // multi-byte character).
            let (qa, ea) = (q as u8, esc.map(|e| e as u8));
            let mut start = 0;
            for (i, &b) in s.iter().enumerate() {
                if b == qa || Some(b) == ea {
                    out.extend_from_slice(&s[start..=i]);
                    start = i;
                }
            }
            out.extend_from_slice(&s[start..]);
        } else {
            let text = std::str::from_utf8(s).unwrap_or("");
            for c in text.chars() {
                if c == q || Some(c) == esc {
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        out.extend_from_slice(&qb);
    }
}

format_common::export_component!(insert_only "csv");
