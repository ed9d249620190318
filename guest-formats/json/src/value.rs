//! One value of a column's type from the JSON token at the parser: the json format's conversions.

use crate::decode::{Decoder, parse_float, parse_java_float};
use crate::parser::*;
use crate::tree::java_trim;
use format_common::temporal::{self, parse_date, parse_time_prefix, parse_timestamp_prefix};
use format_common::{DataType, decimal, units_per_second};
use pulsar_connect_plugin::columns::Cols;

impl Decoder {
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
