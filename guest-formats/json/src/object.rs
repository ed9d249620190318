//! The object loop of the streaming decoder: field names looked up in a row plan, values into columns.

use crate::decode::{Decoder, Fast, RowPlan};
use crate::parser::*;
use crate::scan::same_bytes;
use pulsar_connect_plugin::columns::Cols;

impl Decoder {
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
                // Field lookup: usually the next declared field, its name as it is in the input.
                let k = match plan.quoted.get(next) {
                    Some(Some(q)) if p.key_is(q) => Some(next),
                    _ => {
                        let key = p.str_bytes()?;
                        if next < n && same_bytes(&plan.names[next], key) {
                            Some(next)
                        } else {
                            plan.names.iter().position(|nm| same_bytes(nm, key))
                        }
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
                        let ty = plan.tys[k];
                        // The common cases read here; the general path reads everything else (and
                        // reports errors) from the same byte.
                        let done = match self.fast[ty] {
                            Fast::Int { lo, hi } => {
                                let at = p.i;
                                p.ws();
                                match p.plain_int() {
                                    Some(v) if v >= lo && v <= hi => {
                                        cols.push_int(c, v);
                                        true
                                    }
                                    _ => {
                                        p.i = at;
                                        false
                                    }
                                }
                            }
                            Fast::Text => {
                                p.ws();
                                match p.plain_string() {
                                    Some((a, b)) => {
                                        cols.push_bytes(c, &p.s[a..b]);
                                        true
                                    }
                                    None => false,
                                }
                            }
                            Fast::No => false,
                        };
                        if !done {
                            self.field(p, c, ty, cols, &plan.names[k])?;
                        }
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
}
