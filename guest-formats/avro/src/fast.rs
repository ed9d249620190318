//! The decoder's fast path: a plan of the top-level fields made once per decoder, and a row decoded by
//! it straight through, without building an error string per value (in the sandbox, every call of the
//! recursive [`Decoder::value`] and every `Result<_, String>` goes through the guest's stack in memory:
//! the same row cost twice the instructions of the native build). A row the fast path does not take
//! — a malformed or truncated value, trailing bytes — is rolled back and decoded again by the recursive
//! decoder, which names the problem; both accept the same bytes and push the same values. Nested, decimal
//! and temporal fields go through [`Decoder::value`] from the fast path too.

use format_common::{DataType, RowType};
use pulsar_connect_plugin::columns::Cols;

use super::{Decoder, In};

/// How a top-level field is read.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// BOOLEAN: one byte.
    Bool,
    /// INT, DATE: a varint that fits an `i32`.
    Int,
    /// BIGINT: a varint.
    Long,
    /// FLOAT: four bytes, little-endian.
    Float,
    /// DOUBLE: eight bytes, little-endian.
    Double,
    /// CHAR, VARCHAR: a length and UTF-8 (malformed sequences replaced as Java does).
    Str,
    /// BINARY, VARBINARY: a length and the bytes.
    Bin,
    /// Anything else (nullability included): [`Decoder::value`].
    Other,
}

/// One top-level field of the plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step {
    kind: Kind,
    /// A nullable field: a union whose branch 0 is null (Flink's schema), read before the value.
    nullable: bool,
    /// Its index in the row type's `types` (for [`Kind::Other`]).
    ty: usize,
}

/// The plan of `rt`'s top-level fields, in order.
pub(crate) fn plan(rt: &RowType) -> Vec<Step> {
    rt.fields
        .iter()
        .map(|f| {
            let ty = f.type_index as usize;
            let node = &rt.types[ty];
            let kind = match node.data_type {
                DataType::Boolean => Kind::Bool,
                DataType::Int | DataType::Date => Kind::Int,
                DataType::Bigint => Kind::Long,
                DataType::Float => Kind::Float,
                DataType::Double => Kind::Double,
                DataType::Char(_) | DataType::Varchar(_) => Kind::Str,
                DataType::Binary(_) | DataType::Varbinary(_) => Kind::Bin,
                _ => Kind::Other,
            };
            Step {
                kind,
                nullable: node.nullable,
                ty,
            }
        })
        .collect()
}

/// The zig-zag varint at `*i` (`None`: truncated or longer than a long; the recursive decoder says
/// which). Accepts exactly what [`In::long`] accepts.
#[inline(always)]
fn long(b: &[u8], i: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let &byte = b.get(*i)?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
        shift += 7;
        if shift >= 64 {
            return None;
        }
    }
}

/// `n` bytes at `*i`.
#[inline(always)]
fn take<'a>(b: &'a [u8], i: &mut usize, n: usize) -> Option<&'a [u8]> {
    let s = b.get(*i..i.checked_add(n)?)?;
    *i += n;
    Some(s)
}

/// A length-prefixed value at `*i`.
#[inline(always)]
fn bytes<'a>(b: &'a [u8], i: &mut usize) -> Option<&'a [u8]> {
    let n = usize::try_from(long(b, i)?).ok()?;
    take(b, i, n)
}

/// `N` bytes at `*i` as an array.
#[inline(always)]
fn fixed<const N: usize>(b: &[u8], i: &mut usize) -> Option<[u8; N]> {
    take(b, i, N)?.try_into().ok()
}

impl Decoder {
    /// Decodes one row `p` by the plan and pushes its values; false when the row is not one the fast
    /// path takes whole (values of it may have been pushed: the caller rolls the row back).
    #[inline]
    pub(crate) fn fast_row(&self, p: &[u8], cols: &mut Cols) -> bool {
        let mut i = 0;
        for (c, step) in self.plan.iter().enumerate() {
            if let Kind::Other = step.kind {
                let mut input = In { b: p, i };
                if self.value(&mut input, c, step.ty, cols, 0).is_err() {
                    return false;
                }
                i = input.i;
                continue;
            }
            if step.nullable {
                match long(p, &mut i) {
                    Some(0) => {
                        cols.push_null(c);
                        continue;
                    }
                    Some(1) => {}
                    _ => return false,
                }
            }
            let pushed = match step.kind {
                Kind::Long => long(p, &mut i).map(|v| cols.push_i64(c, v)),
                Kind::Int => long(p, &mut i)
                    .and_then(|v| i32::try_from(v).ok())
                    .map(|v| cols.push_i32(c, v)),
                Kind::Str => bytes(p, &mut i).map(|b| {
                    if b.is_ascii() {
                        cols.push_bytes(c, b);
                    } else {
                        format_common::utf8_lossy_java(b, cols.bytes_buf(c));
                        cols.finish_bytes(c);
                    }
                }),
                Kind::Bin => bytes(p, &mut i).map(|b| cols.push_bytes(c, b)),
                Kind::Double => {
                    fixed::<8>(p, &mut i).map(|b| cols.push_f64(c, f64::from_le_bytes(b)))
                }
                Kind::Float => {
                    fixed::<4>(p, &mut i).map(|b| cols.push_f32(c, f32::from_le_bytes(b)))
                }
                Kind::Bool => fixed::<1>(p, &mut i).map(|b| cols.push_bool(c, b[0] != 0)),
                Kind::Other => None,
            };
            if pushed.is_none() {
                return false;
            }
        }
        i == p.len()
    }
}

#[cfg(test)]
mod tests {
    use format_common::golden::{self, Rng};

    use super::*;

    /// `rt`'s decoder with every field read by [`Decoder::value`] (the decoder before the fast path).
    fn recursive_only(rt: &RowType) -> Decoder {
        let mut d = crate::decoder(&[], rt).expect("decoder");
        for step in &mut d.plan {
            step.kind = Kind::Other;
        }
        d
    }

    /// Random rows of the scalar row type below: valid values (NULLs, multi-byte varints, non-ASCII
    /// and malformed UTF-8) and values cut short, ints out of range, bad union branches, extra bytes.
    fn scalar_rows(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
        let varint = |v: i64, out: &mut Vec<u8>| {
            let mut z = ((v << 1) ^ (v >> 63)) as u64;
            while z >= 0x80 {
                out.push(z as u8 | 0x80);
                z >>= 7;
            }
            out.push(z as u8);
        };
        let strings: [&[u8]; 5] = [
            b"",
            b"PAID",
            "d\u{e9}j\u{e0}".as_bytes(),
            b"\xed\xa0\x80x",
            b"\xff",
        ];
        (0..n)
            .map(|_| {
                let mut out = Vec::new();
                // b BOOLEAN, i INT NOT NULL, l BIGINT, f FLOAT, d DOUBLE, s STRING, y BYTES NOT NULL, t TINYINT
                for field in 0..8 {
                    let nullable = !matches!(field, 1 | 6);
                    if nullable && rng.below(4) == 0 {
                        out.push(0);
                        continue;
                    }
                    if nullable {
                        out.push(if rng.below(50) == 0 { 4 } else { 2 });
                    }
                    let big = rng.next_u64() as i64 >> rng.below(64);
                    match field {
                        0 => out.push(rng.below(3) as u8),
                        1 => varint(
                            if rng.below(20) == 0 {
                                big
                            } else {
                                big as i32 as i64
                            },
                            &mut out,
                        ),
                        2 | 7 => varint(big, &mut out),
                        3 => out.extend_from_slice(&(big as f32).to_le_bytes()),
                        4 => out.extend_from_slice(&(big as f64).to_le_bytes()),
                        _ => {
                            let s = strings[rng.below(5) as usize];
                            varint(s.len() as i64, &mut out);
                            out.extend_from_slice(s);
                        }
                    }
                }
                match rng.below(10) {
                    0 if !out.is_empty() => out.truncate(rng.below(out.len() as u64) as usize),
                    1 => out.push(0),
                    _ => {}
                }
                out
            })
            .collect()
    }

    fn same_decoding(rt: &RowType, inputs: &[Vec<u8>]) -> usize {
        let (fast, slow) = (
            crate::decoder(&[], rt).expect("decoder"),
            recursive_only(rt),
        );
        let mut rows = 0;
        for chunk in inputs.chunks(64) {
            let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
            let batch = golden::messages(&refs);
            let (a, b) = (fast.decode(&batch), slow.decode(&batch));
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "inputs {chunk:?}");
            rows += a.map(|d| d.rows.row_count as usize).unwrap_or(0);
        }
        rows
    }

    #[test]
    fn the_fast_path_decodes_what_the_recursive_decoder_does() {
        let golden_cols = golden::columns(&golden::load("avro/default.json"));
        let inputs = golden::fuzz_inputs("avro", &[0, 1, 2, 3, 0x7f, 0x80, 0xff], 5_000);
        let rows = same_decoding(&golden::row_type(&golden_cols), &inputs);
        assert!(rows > 0, "some golden rows decode");

        let scalar: Vec<(String, String)> = [
            ("b", "BOOLEAN"),
            ("i", "INT NOT NULL"),
            ("l", "BIGINT"),
            ("f", "FLOAT"),
            ("d", "DOUBLE"),
            ("s", "STRING"),
            ("y", "BYTES NOT NULL"),
            ("t", "TINYINT"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
        let inputs = scalar_rows(&mut Rng(7), 20_000);
        let rows = same_decoding(&golden::row_type(&scalar), &inputs);
        assert!(
            rows > 5_000 && rows < 15_000,
            "valid and invalid rows: {rows} decoded"
        );
    }
}
