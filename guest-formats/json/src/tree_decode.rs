//! Flink's Jackson-tree conversions (`JsonToRowDataConverters`, used by `JsonRowDataDeserializationSchema`
//! and so by the changelog formats) where they differ from the json format's streaming ones
//! (`JsonParserToRowDataConverters`). The decoder runs in tree mode: the same scanner and columns, the
//! values converted as Flink converts a node:
//! - a number's text is its node's ([`crate::tree`]): with a DECIMAL in the row type `-0.0` reads as
//!   `0.0`, `1.50` as STRING is `1.5`; TINYINT/SMALLINT take the text only (`42.5` fails);
//! - strings read as numbers or BOOLEAN are trimmed (`" 101 "` → 101);
//! - an object or array read as STRING is Jackson's compact JSON of it; BINARY of a non-string is NULL;
//! - a MAP from anything but an object is empty; an object's repeated key keeps its last value;
//! - NULL in a NOT NULL type is passed on (noted for the caller: [`TreeRow::Row::null_in`]).

use crate::decode::{Decoder, RowPlan, parse_float, parse_java_float};
use crate::parser::*;
use crate::tree::{Doc, Entries, Span, decimal_parts, java_trim, number_text, write_text};
use crate::{JsonOptions, check_types};
use format_common::{ConfigError, DataType, RowType};
use pulsar_connect_plugin::columns::Cols;

/// Tree mode of a [`Decoder`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tree {
    /// Jackson reads floats as `BigDecimal` (the row type has a DECIMAL somewhere).
    big_decimal: bool,
}

/// What [`Decoder::tree_row`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeRow {
    /// One value in each of the row's columns. `null_in`: a field where a NULL went into a NOT NULL
    /// type (Flink passes the row on; the caller decides).
    Row { null_in: Option<String> },
    /// Nothing: the value is JSON null, or (with `ignore-parse-errors`) not an object.
    Null,
}

/// A decoder with Flink's tree conversions for rows inside another JSON document (the changelog
/// formats): the first `fields` fields of `row_type` are the rows' columns, the ones after them the
/// caller's (format metadata, filled with [`Decoder::tree_column`]).
pub fn tree_decoder(
    opts: JsonOptions,
    row_type: &RowType,
    fields: usize,
) -> Result<Decoder, ConfigError> {
    check_types(row_type)?;
    let big_decimal = row_type
        .types
        .iter()
        .any(|t| matches!(t.data_type, DataType::Decimal(_)));
    Ok(Decoder::build(
        opts,
        row_type,
        fields,
        Some(Tree { big_decimal }),
    ))
}

fn message(f: Fail) -> String {
    match f {
        Fail::Syntax(m) | Fail::Convert(m) => m,
    }
}

impl Decoder {
    /// Whether floats are read as `BigDecimal` (for [`Doc::string`] and friends).
    pub fn big_decimal(&self) -> bool {
        self.tree.is_some_and(|t| t.big_decimal)
    }

    /// The options.
    pub fn options(&self) -> &JsonOptions {
        &self.opts
    }

    fn parser<'a>(doc: &Doc<'a>, v: &Span) -> Parser<'a> {
        let mut p = Parser::new(&doc.text[..v.end.min(doc.text.len())]);
        p.i = v.start;
        p
    }

    /// Writes the row at `v` (a JSON object) into the row columns, or only into the fields `only`
    /// (indexes of the row's fields; the others are left alone). Conversion errors name the field
    /// (`Fail to deserialize at field: ..`); with `ignore-parse-errors` the field is NULL instead.
    pub fn tree_row(
        &self,
        doc: &Doc<'_>,
        v: &Span,
        only: Option<&[usize]>,
        cols: &mut Cols,
    ) -> Result<TreeRow, String> {
        let mut p = Decoder::parser(doc, v);
        match p.peek() {
            Some(b'{') => {}
            Some(b'n') | None => return Ok(TreeRow::Null),
            Some(_) if self.opts.ignore_parse_errors => return Ok(TreeRow::Null),
            Some(_) => return Err("not a JSON object (ClassCastException)".into()),
        }
        let sub;
        let plan = match only {
            None => &self.top,
            Some(ks) => {
                sub = RowPlan::new(
                    ks.iter().map(|&k| self.top.names[k].clone()).collect(),
                    ks.iter().map(|&k| self.top.cols[k]).collect(),
                    ks.iter().map(|&k| self.top.tys[k]).collect(),
                );
                &sub
            }
        };
        if plan.cols.is_empty() {
            return Ok(TreeRow::Row { null_in: None });
        }
        self.object(&mut p, plan, cols, None).map_err(message)?;
        Ok(TreeRow::Row {
            null_in: p.null_in.take(),
        })
    }

    /// Writes the value at `v` into top-level column `c` (a caller's column after the row's) with its
    /// type's tree conversion; with `ignore-parse-errors` a value that fails is NULL.
    pub fn tree_column(
        &self,
        doc: &Doc<'_>,
        v: &Span,
        c: usize,
        cols: &mut Cols,
    ) -> Result<(), String> {
        let Some(f) = self.rt.fields.get(c) else {
            return Err(format!("no column {c}"));
        };
        let mut p = Decoder::parser(doc, v);
        self.value(&mut p, c, f.type_index as usize, cols)
            .map_err(message)
    }

    /// The value at `v` as a BIGINT (Flink's `convertToLong`); `None` for JSON null, and with
    /// `ignore-parse-errors` for a value that fails.
    pub fn tree_long(&self, doc: &Doc<'_>, v: &Span) -> Result<Option<i64>, String> {
        let mut p = Decoder::parser(doc, v);
        if matches!(p.peek(), Some(b'n') | None) {
            return Ok(None);
        }
        match self.tree_int(&mut p, &DataType::Bigint, self.big_decimal()) {
            Ok(v) => Ok(Some(v)),
            Err(_) if self.opts.ignore_parse_errors => Ok(None),
            Err(f) => Err(message(f)),
        }
    }

    /// One value in tree mode (called by `Decoder::value`).
    pub(crate) fn tree_value(
        &self,
        p: &mut Parser<'_>,
        c: usize,
        ty: usize,
        cols: &mut Cols,
        tree: Tree,
    ) -> R<()> {
        let node = &self.rt.types[ty];
        let Some(tok) = p.peek() else {
            return p.eof();
        };
        if tok == b'n' {
            // JSON null and BOOLEAN (below) as the streaming path, in tree mode: a NULL in a NOT NULL
            // type is noted, not an error; a string read as BOOLEAN is trimmed.
            return self.value_inner(p, c, ty, cols);
        }
        match &node.data_type {
            dt @ (DataType::Tinyint | DataType::Smallint | DataType::Int | DataType::Bigint) => {
                let v = self.tree_int(p, dt, tree.big_decimal)?;
                cols.push_int(c, v);
            }
            DataType::Float | DataType::Double => {
                let double = matches!(node.data_type, DataType::Double);
                let v = tree_float(p, tok, double, tree.big_decimal)?;
                if double {
                    cols.push_f64(c, v);
                } else {
                    cols.push_f32(c, v as f32);
                }
            }
            DataType::Char(_) | DataType::Varchar(_) if tok != b'"' => {
                match write_text(p, tree.big_decimal, true, cols.bytes_buf(c)) {
                    Ok(()) => cols.finish_bytes(c),
                    Err(f) => {
                        cols.abandon_bytes(c);
                        return Err(f);
                    }
                }
            }
            DataType::Binary(_) | DataType::Varbinary(_) if tok != b'"' => {
                // `JsonNode.binaryValue()` is null for anything but a string.
                p.skip(0)?;
                if !node.nullable {
                    p.note_null();
                }
                cols.push_null(c);
            }
            DataType::Map(m) => {
                let (kc, vc) = cols.map_children(c);
                if tok != b'{' {
                    // `fields()` of a non-object is empty.
                    p.skip(0)?;
                } else {
                    Entries::read(p)?.each(p, |p, _, k| {
                        cols.push_bytes(kc, k);
                        self.value(p, vc, m.value as usize, cols)?;
                        Ok(false)
                    })?;
                }
                cols.end_list(c);
            }
            _ => return self.value_inner(p, c, ty, cols),
        }
        Ok(())
    }

    /// An integer of type `dt` (`convertToInt`/`convertToLong`: `canConvertToInt() ? asInt() :
    /// parseInt(asText().trim())`; TINYINT/SMALLINT: `parseByte(asText().trim())`).
    fn tree_int(&self, p: &mut Parser<'_>, dt: &DataType, big_decimal: bool) -> R<i64> {
        let (lo, hi, name) = int_range(dt);
        let small = matches!(dt, DataType::Tinyint | DataType::Smallint);
        let bad = |text: &[u8]| {
            Fail::Convert(format!(
                "For input string: \"{}\" ({name})",
                String::from_utf8_lossy(text)
            ))
        };
        match p.peek() {
            Some(b'-' | b'0'..=b'9') => {
                let n = p.number()?;
                if n.integer {
                    return n
                        .value
                        .filter(|v| (lo..=hi).contains(v))
                        .ok_or_else(|| bad(n.text));
                }
                if small {
                    let mut text = Vec::new();
                    number_text(n.text, false, big_decimal, &mut text);
                    return parse_int(&text)
                        .filter(|v| (lo..=hi).contains(v))
                        .ok_or_else(|| bad(&text));
                }
                if big_decimal {
                    // A DecimalNode: in range exactly, then truncated.
                    let (neg, digits, scale) = decimal_parts(n.text);
                    return decimal_truncated(neg, &digits, scale)
                        .filter(|&(v, fraction)| {
                            let v = i128::from(v);
                            if fraction {
                                v > i128::from(lo) && v < i128::from(hi)
                            } else {
                                v >= i128::from(lo) && v <= i128::from(hi)
                            }
                        })
                        .map(|(v, _)| v)
                        .ok_or_else(|| bad(n.text));
                }
                let f: f64 = std::str::from_utf8(n.text)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(f64::NAN);
                if f >= lo as f64 && f <= hi as f64 {
                    Ok(f.trunc() as i64)
                } else {
                    Err(bad(n.text))
                }
            }
            Some(b'"') => {
                let text = p.str_bytes()?;
                parse_int(java_trim(text))
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| bad(text))
            }
            _ => {
                p.skip(0)?;
                convert(format!(
                    "expected a number for {name} (NumberFormatException)"
                ))
            }
        }
    }
}

/// The integer part of `±digits × 10^-scale` (truncated) and whether a fraction was cut off; `None`
/// beyond ±10^30.
fn decimal_truncated(neg: bool, digits: &[u8], scale: i64) -> Option<(i64, bool)> {
    let n = digits.len() as i64;
    let int_len = n - scale;
    if int_len > 30 {
        return None;
    }
    let int_digits = &digits[..int_len.clamp(0, n) as usize];
    let fraction = digits[int_digits.len()..].iter().any(|&d| d != b'0');
    let mut v: i128 = 0;
    for &d in int_digits {
        v = v * 10 + i128::from(d - b'0');
    }
    for _ in 0..(int_len - n).max(0) {
        v *= 10;
    }
    // Beyond an i64: out of every range.
    i64::try_from(if neg { -v } else { v })
        .ok()
        .map(|x| (x, fraction))
}

/// FLOAT/DOUBLE (`convertToFloat`/`convertToDouble`): a `DoubleNode` (a float without `big_decimal`)
/// as a double (narrowed for FLOAT), anything else parsed from its text (`asText().trim()`), so an
/// integer or `BigDecimal` zero is `+0.0`.
fn tree_float(p: &mut Parser<'_>, tok: u8, double: bool, big_decimal: bool) -> R<f64> {
    let v = match tok {
        b'-' | b'0'..=b'9' => {
            let n = p.number()?;
            if !n.integer && !big_decimal {
                parse_float(n.text, true).map(|d| if double { d } else { f64::from(d as f32) })
            } else {
                parse_float(n.text, double).map(|x| if x == 0.0 { 0.0 } else { x })
            }
        }
        b'"' => parse_java_float(p.str_bytes()?, double),
        _ => {
            p.skip(0)?;
            None
        }
    };
    v.ok_or_else(|| Fail::Convert("not a floating point number (NumberFormatException)".into()))
}

#[cfg(test)]
mod tests {
    use super::decimal_truncated;
    use crate::tree::decimal_parts;

    fn trunc(s: &str) -> Option<(i64, bool)> {
        let (neg, d, scale) = decimal_parts(s.as_bytes());
        decimal_truncated(neg, &d, scale)
    }

    #[test]
    fn decimals_truncate_toward_zero() {
        assert_eq!(trunc("101.7"), Some((101, true)));
        assert_eq!(trunc("-101.7"), Some((-101, true)));
        assert_eq!(trunc("1e2"), Some((100, false)));
        assert_eq!(trunc("0.5"), Some((0, true)));
        assert_eq!(trunc("2147483647.0"), Some((2147483647, false)));
        assert_eq!(trunc("1e40"), None);
        assert_eq!(trunc("-0.0"), Some((0, false)));
    }
}
