//! Flink's `raw` format (flink-table-runtime 1.18): exactly one physical column, its value as the
//! whole payload. STRING in `charset`, BYTES as they are, BOOLEAN one byte, numbers in `endianness`.
//!
//! NULL: Flink writes a null payload and reads a null payload as NULL. A message batch has no null
//! payloads, so NULL is written as an empty payload, and an empty payload reads as NULL for the
//! fixed-size types (where Flink would fail on an empty one) and as `''` for STRING/BYTES (as Flink).
//!
//! Native use: `raw_format::decoder(&options, &row_type)?.decode(&messages)?` and
//! `raw_format::encoder(&options, &row_type)?.encode(&columns)?`.

use format_common::{
    ColumnBatch, ColumnData, ConfigError, DataType, DecodedBatch, EncodedBatch, MessageBatch,
    Payloads, RowError, RowType, bit, check_known, config_error, option, slice_at, type_string,
};
use pulsar_connect_plugin::columns::Cols;

pub const OPTIONS: &[&str] = &["charset", "endianness"];

/// Character sets this build can read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    Utf8,
    Utf16,
    Utf16Be,
    Utf16Le,
    Latin1,
    Ascii,
}

impl Charset {
    pub fn parse(name: &str) -> Option<Charset> {
        let n = name.trim().to_ascii_uppercase().replace('_', "-");
        Some(match n.as_str() {
            "UTF-8" | "UTF8" => Charset::Utf8,
            "UTF-16" | "UTF16" => Charset::Utf16,
            "UTF-16BE" | "UTF16BE" => Charset::Utf16Be,
            "UTF-16LE" | "UTF16LE" => Charset::Utf16Le,
            "ISO-8859-1" | "ISO8859-1" | "LATIN1" | "ISO-LATIN-1" => Charset::Latin1,
            "US-ASCII" | "ASCII" => Charset::Ascii,
            _ => return None,
        })
    }

    /// Java's `String.getBytes(charset)`: characters the charset cannot hold become `?`.
    pub fn encode(self, s: &str, out: &mut Vec<u8>) {
        match self {
            Charset::Utf8 => out.extend_from_slice(s.as_bytes()),
            Charset::Utf16 | Charset::Utf16Be | Charset::Utf16Le => {
                if self == Charset::Utf16 && !s.is_empty() {
                    out.extend_from_slice(&[0xFE, 0xFF]);
                }
                for u in s.encode_utf16() {
                    if self == Charset::Utf16Le {
                        out.extend_from_slice(&u.to_le_bytes());
                    } else {
                        out.extend_from_slice(&u.to_be_bytes());
                    }
                }
            }
            Charset::Latin1 | Charset::Ascii => {
                let max = if self == Charset::Latin1 { 0xFF } else { 0x7F };
                out.extend(s.chars().map(|c| {
                    if (c as u32) <= max {
                        c as u32 as u8
                    } else {
                        b'?'
                    }
                }));
            }
        }
    }

    /// Java's `new String(bytes, charset)` as UTF-8: malformed input becomes U+FFFD.
    pub fn decode(self, b: &[u8], out: &mut Vec<u8>) {
        match self {
            Charset::Utf8 => utf8_lossy_java(b, out),
            Charset::Utf16 | Charset::Utf16Be | Charset::Utf16Le => {
                let (mut le, mut b) = (self == Charset::Utf16Le, b);
                if self == Charset::Utf16 && b.len() >= 2 {
                    if b[..2] == [0xFE, 0xFF] {
                        b = &b[2..];
                    } else if b[..2] == [0xFF, 0xFE] {
                        le = true;
                        b = &b[2..];
                    }
                }
                let units = b.chunks_exact(2).map(|p| {
                    if le {
                        u16::from_le_bytes([p[0], p[1]])
                    } else {
                        u16::from_be_bytes([p[0], p[1]])
                    }
                });
                let mut buf = [0u8; 4];
                for ch in char::decode_utf16(units) {
                    let ch = ch.unwrap_or('\u{FFFD}');
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                if b.len() % 2 == 1 {
                    out.extend_from_slice("\u{FFFD}".as_bytes());
                }
            }
            Charset::Latin1 | Charset::Ascii => {
                let mut buf = [0u8; 4];
                for &x in b {
                    let ch = if self == Charset::Ascii && x > 0x7F {
                        '\u{FFFD}'
                    } else {
                        x as char
                    };
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
}

pub use format_common::utf8_lossy_java;

/// A configured raw format (the same for both directions).
#[derive(Debug, Clone)]
pub struct Raw {
    rt: RowType,
    ty: usize,
    charset: Charset,
    little_endian: bool,
}

pub type Decoder = Raw;
pub type Encoder = Raw;

fn configure(options: &[(String, String)], rt: &RowType) -> Result<Raw, ConfigError> {
    check_known(options, OPTIONS)?;
    format_common::validate_row_type(rt)?;
    let cs = option(options, "charset").unwrap_or("UTF-8");
    let charset = Charset::parse(cs).ok_or_else(|| {
        config_error(
            Some("charset"),
            format!(
                "Unsupported charset: {cs}. This build supports UTF-8, UTF-16, UTF-16BE, UTF-16LE, ISO-8859-1, US-ASCII."
            ),
        )
    })?;
    let little_endian = match option(options, "endianness").unwrap_or("big-endian") {
        s if s.eq_ignore_ascii_case("big-endian") => false,
        s if s.eq_ignore_ascii_case("little-endian") => true,
        s => {
            return Err(config_error(
                Some("endianness"),
                format!(
                    "Unsupported endianness name: {s}. Valid values of 'raw.endianness' option are 'big-endian' and 'little-endian'."
                ),
            ));
        }
    };
    if rt.fields.len() != 1 {
        let cols: Vec<String> = rt
            .fields
            .iter()
            .map(|f| format!("`{}` {}", f.name, type_string(rt, f.type_index as usize)))
            .collect();
        return Err(config_error(
            None,
            format!(
                "The 'raw' format only supports single physical column. However the defined schema contains multiple physical columns: [{}]",
                cols.join(", ")
            ),
        ));
    }
    let ty = rt.fields[0].type_index as usize;
    match rt.types[ty].data_type {
        DataType::Char(_)
        | DataType::Varchar(_)
        | DataType::Binary(_)
        | DataType::Varbinary(_)
        | DataType::Boolean
        | DataType::Tinyint
        | DataType::Smallint
        | DataType::Int
        | DataType::Bigint
        | DataType::Float
        | DataType::Double => {}
        _ => {
            let mut name = type_string(rt, ty);
            if let Some(n) = name.strip_suffix(" NOT NULL") {
                name = n.to_owned();
            }
            return Err(config_error(
                None,
                format!("The 'raw' format doesn't supports '{name}' as column type."),
            ));
        }
    }
    Ok(Raw {
        rt: rt.clone(),
        ty,
        charset,
        little_endian,
    })
}

/// Creates a decoder (options without the `raw.` prefix).
pub fn decoder(options: &[(String, String)], row_type: &RowType) -> Result<Decoder, ConfigError> {
    configure(options, row_type)
}

/// Creates an encoder (options without the `raw.` prefix).
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    configure(options, row_type)
}

fn fixed<const N: usize>(b: &[u8], le: bool, name: &str) -> Result<[u8; N], String> {
    let mut a: [u8; N] = b
        .try_into()
        .map_err(|_| format!("Size of data received for deserializing {name} type is not {N}."))?;
    if le {
        a.reverse();
    }
    Ok(a)
}

impl Raw {
    /// Decodes a batch: one row per message.
    pub fn decode(&self, batch: &MessageBatch) -> Result<DecodedBatch, String> {
        let mut cols = Cols::new(&self.rt);
        cols.reserve(batch.count as usize, batch.payloads.len() / 2);
        let mut errors = Vec::new();
        let nullable = self.rt.types[self.ty].nullable;
        let le = self.little_endian;
        for i in 0..batch.count as usize {
            let p = slice_at(&batch.payloads, &batch.payload_offsets, i);
            let dt = &self.rt.types[self.ty].data_type;
            let text = matches!(dt, DataType::Char(_) | DataType::Varchar(_));
            let binary = matches!(dt, DataType::Binary(_) | DataType::Varbinary(_));
            let r: Result<(), String> =
                if p.is_empty() && !text && !binary {
                    if nullable {
                        cols.push_null(0);
                        Ok(())
                    } else {
                        Err("empty payload (NULL) for a NOT NULL column".into())
                    }
                } else {
                    match dt {
                        DataType::Char(_) | DataType::Varchar(_) => {
                            self.charset.decode(p, cols.bytes_buf(0));
                            cols.finish_bytes(0);
                            Ok(())
                        }
                        DataType::Binary(_) | DataType::Varbinary(_) => {
                            cols.push_bytes(0, p);
                            Ok(())
                        }
                        DataType::Boolean => {
                            fixed::<1>(p, false, "BOOLEAN").map(|b| cols.push_bool(0, b[0] != 0))
                        }
                        DataType::Tinyint => {
                            fixed::<1>(p, false, "TINYINT").map(|b| cols.push_i8(0, b[0] as i8))
                        }
                        DataType::Smallint => fixed::<2>(p, le, "SMALLINT")
                            .map(|b| cols.push_i16(0, i16::from_be_bytes(b))),
                        DataType::Int => fixed::<4>(p, le, "INT")
                            .map(|b| cols.push_i32(0, i32::from_be_bytes(b))),
                        DataType::Bigint => fixed::<8>(p, le, "BIGINT")
                            .map(|b| cols.push_i64(0, i64::from_be_bytes(b))),
                        DataType::Float => fixed::<4>(p, le, "FLOAT")
                            .map(|b| cols.push_f32(0, f32::from_be_bytes(b))),
                        DataType::Double => fixed::<8>(p, le, "DOUBLE")
                            .map(|b| cols.push_f64(0, f64::from_be_bytes(b))),
                        _ => Err("unsupported type".into()),
                    }
                };
            match r {
                Ok(()) => cols.end_row(),
                Err(reason) => errors.push(RowError {
                    index: i as u32,
                    reason,
                }),
            }
        }
        Ok(format_common::decoded(cols, errors))
    }

    /// Encodes a batch: one payload per row (NULL: an empty payload).
    pub fn encode(&self, batch: &ColumnBatch) -> Result<EncodedBatch, String> {
        let rows = batch.row_count as usize;
        let col = batch.columns.first().ok_or("the batch has no column")?;
        let mut out = Payloads::with_capacity(rows);
        let le = self.little_endian;
        let missing = || format!("column 0 holds fewer than {rows} values");
        for i in 0..rows {
            if bit(col.validity.as_deref(), i) {
                let o = &mut out.payloads;
                macro_rules! num {
                    ($v:expr) => {{
                        let v = *$v.get(i).ok_or_else(missing)?;
                        o.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() });
                    }};
                }
                match (&self.rt.types[self.ty].data_type, &col.data) {
                    (DataType::Char(_) | DataType::Varchar(_), ColumnData::Bytes(b)) => {
                        let s = std::str::from_utf8(slice_at(&b.data, &b.offsets, i))
                            .map_err(|e| format!("row {i}: invalid UTF-8: {e}"))?;
                        self.charset.encode(s, o);
                    }
                    (_, ColumnData::Bytes(b)) => {
                        o.extend_from_slice(slice_at(&b.data, &b.offsets, i))
                    }
                    (_, ColumnData::Bits(b)) => {
                        o.push(u8::from(bit(Some(b), i)));
                    }
                    (_, ColumnData::Int8(v)) => o.push(*v.get(i).ok_or_else(missing)? as u8),
                    (_, ColumnData::Int16(v)) => num!(v),
                    (_, ColumnData::Int32(v)) => num!(v),
                    (_, ColumnData::Int64(v)) => num!(v),
                    (_, ColumnData::Float32(v)) => num!(v),
                    (_, ColumnData::Float64(v)) => num!(v),
                    _ => return Err("column 0 does not match the row type".into()),
                }
            }
            out.end();
        }
        Ok(out.finish())
    }
}

format_common::export_component!(insert_only "raw");
