//! Encoding: the table's columns → JSON text as Jackson writes it.

use crate::JsonOptions;
use crate::NullKeyMode;
use crate::check_types;
use format_common::read::Reader;
use format_common::temporal::{self};
use format_common::{
    ColumnBatch, ConfigError, DataType, EncodedBatch, Payloads, RowType, decimal, javanum,
};

/// A configured encoder.
#[derive(Debug)]
pub struct Encoder {
    rt: RowType,
    opts: JsonOptions,
    /// `"name":` of each field.
    prefixes: Vec<Vec<u8>>,
}

/// Creates an encoder for `row_type` with format options (no `json.` prefix).
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    encoder_with(JsonOptions::parse(options)?, row_type)
}

/// Creates an encoder for `row_type` with parsed options (for formats that write the json format's
/// rows inside their own text, e.g. the changelog formats).
pub fn encoder_with(opts: JsonOptions, row_type: &RowType) -> Result<Encoder, ConfigError> {
    check_types(row_type)?;
    let prefixes = row_type
        .fields
        .iter()
        .map(|f| {
            let mut p = Vec::new();
            write_string(f.name.as_bytes(), &mut p);
            p.push(b':');
            p
        })
        .collect();
    Ok(Encoder {
        rt: row_type.clone(),
        opts,
        prefixes,
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
        for i in 0..rows {
            match self.write_row(&r, i, &mut out.payloads) {
                Ok(()) => out.end(),
                Err(e) => out.fail(i, e),
            }
        }
        Ok(out.finish())
    }

    /// Appends the JSON object of row `i` to `out` (on an error, whatever was appended is not a
    /// complete object).
    pub fn write_row(&self, r: &Reader<'_>, i: usize, o: &mut Vec<u8>) -> Result<(), String> {
        o.push(b'{');
        let mut first = true;
        for (c, f) in self.rt.fields.iter().enumerate() {
            if self.opts.ignore_null_fields && r.is_null(c, i) {
                continue;
            }
            if !first {
                o.push(b',');
            }
            first = false;
            o.extend_from_slice(&self.prefixes[c]);
            self.col_value(r, c, f.type_index as usize, i, o)
                .map_err(|e| format!("Fail to serialize at field: {}. {e}", f.name))?;
        }
        o.push(b'}');
        Ok(())
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
                javanum::write_i64(r.int(c, i), out);
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
