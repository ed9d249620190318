//! The decoder's fast path for the common message: a JSON object whose keys are the table's fields,
//! all of them, once each and in their declared order, each with an integer or a string of printable
//! ASCII without escapes (what Flink's own json format and most producers write). One small function
//! reads such a message straight into the columns; at the first byte that departs from that shape it
//! gives up and the message is decoded again by the general path, which also finds and words any error.
//! Only a message read to its end here skips the general path's separate UTF-8 pass: every byte it
//! accepted is ASCII, and what follows the object is checked as before.

use crate::decode::{Decoder, Fast};
use crate::scan::{ascii_string_end, check_utf8, int_digits, same_bytes};
use format_common::{MessageBatch, slice_at};
use pulsar_connect_plugin::columns::Cols;

/// Whitespace as JSON has it, from `j`: one comparison when there is none, the loop out of line (on
/// wasm every loop entered costs an interruption check).
#[inline(always)]
fn skip_ws(s: &[u8], j: usize) -> usize {
    match s.get(j) {
        Some(b' ' | b'\n' | b'\r' | b'\t') => skip_ws_from(s, j + 1),
        _ => j,
    }
}

/// `key` (`name":`) at `i` with whitespace before the colon: the index after the colon, else
/// `usize::MAX` (a plain number comes back in a register, an `Option` through the shadow stack).
#[inline(never)]
fn spaced_key(s: &[u8], i: usize, key: &[u8]) -> usize {
    let name = &key[..key.len() - 1];
    let mut j = i + name.len();
    if s.get(i..j) == Some(name) && eat(s, &mut j, b':') {
        j
    } else {
        usize::MAX
    }
}

/// Consumes `b` at `i`, after whitespace if there is any (looked for only when `b` is not there).
#[inline(always)]
fn eat(s: &[u8], i: &mut usize, b: u8) -> bool {
    if s.get(*i) == Some(&b) {
        *i += 1;
        return true;
    }
    let j = skip_ws(s, *i);
    if s.get(j) == Some(&b) {
        *i = j + 1;
        return true;
    }
    false
}

#[inline(never)]
fn skip_ws_from(s: &[u8], mut j: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = s.get(j) {
        j += 1;
    }
    j
}

/// A top-level field as the fast path reads it.
#[derive(Debug, Clone)]
pub(crate) struct FlatField {
    /// The name, its closing quote and the colon (`name":`).
    key: Vec<u8>,
    col: usize,
    fast: Fast,
}

impl Decoder {
    /// The top-level fields as the fast path reads them, when they allow it (else empty): the json
    /// format's own conversions (not tree mode), every field's name plain ASCII and its type an
    /// integer or text.
    pub(crate) fn flat_plan(&self) -> Vec<FlatField> {
        let plan = &self.top;
        let fields: Vec<FlatField> = (0..plan.cols.len())
            .filter_map(|k| {
                let mut key = plan.quoted[k].clone().filter(|q| q.is_ascii())?;
                key.push(b':');
                let fast = self.fast[plan.tys[k]];
                (fast != Fast::No).then_some(FlatField {
                    key,
                    col: plan.cols[k],
                    fast,
                })
            })
            .collect();
        if self.tree.is_some() || fields.len() != plan.cols.len() {
            return Vec::new();
        }
        fields
    }

    /// Reads the messages of `batch` from `index` on as rows while they are in the common shape (see
    /// the module); returns the index of the first that is not (its values rolled back), or the
    /// count. One call for a run of messages: on wasm a call costs its prologue and an epoch check.
    /// Only for a decoder with a [`Decoder::flat_plan`].
    #[inline(never)]
    pub(crate) fn flat_messages(
        &self,
        batch: &MessageBatch,
        mut index: usize,
        cols: &mut Cols,
    ) -> usize {
        let count = batch.count as usize;
        while index < count {
            let payload = slice_at(&batch.payloads, &batch.payload_offsets, index);
            if !self.flat_message(payload, cols) {
                cols.rollback();
                return index;
            }
            cols.end_row();
            index += 1;
        }
        count
    }

    /// Reads `s` as the common message into the top-level columns: true when it is one (one value
    /// pushed per column); false otherwise, with some of the row's values maybe pushed.
    #[inline(always)]
    fn flat_message(&self, s: &[u8], cols: &mut Cols) -> bool {
        let last = self.flat.len().wrapping_sub(1);
        let mut i = 0;
        if !eat(s, &mut i, b'{') {
            return false;
        }
        for (k, field) in self.flat.iter().enumerate() {
            // `"name":` as it is in the input.
            if !eat(s, &mut i, b'"') {
                return false;
            }
            let key = &field.key[..];
            match s.get(i..i + key.len()) {
                Some(raw) if same_bytes(raw, key) => i += key.len(),
                _ => match spaced_key(s, i, key) {
                    usize::MAX => return false,
                    j => i = j,
                },
            }
            i = skip_ws(s, i);
            let c = field.col;
            match field.fast {
                // A fraction or an exponent after the digits fails the `,` / `}` below.
                Fast::Int { lo, hi } => match int_digits(s, i) {
                    // BIGINT, the usual one: every value of 18 digits fits, no match on the width.
                    Some((v, j)) if lo == i64::MIN => {
                        cols.push_i64(c, v);
                        i = j;
                    }
                    Some((v, j)) if v >= lo && v <= hi => {
                        cols.push_int(c, v);
                        i = j;
                    }
                    _ => return false,
                },
                Fast::Text => match ascii_string_end(s, i) {
                    Some(j) => {
                        cols.push_bytes(c, &s[i + 1..j]);
                        i = j + 1;
                    }
                    None => return false,
                },
                Fast::No => return false,
            }
            if !eat(s, &mut i, if k == last { b'}' } else { b',' }) {
                return false;
            }
        }
        // What follows the object is not read (as on the general path), but is part of the payload
        // whose UTF-8 the general path checks first.
        s[i..].is_empty() || check_utf8(&s[i..]).is_ok()
    }
}
