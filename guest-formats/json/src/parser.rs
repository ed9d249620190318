//! The JSON scanner the decoder runs over a message: values straight into typed columns, no tree.

use crate::scan::{digits8, int_token, more_digits, same_bytes, scan_plain};
use format_common::DataType;

/// Why a value could not be decoded.
pub(crate) enum Fail {
    /// Not JSON (or not a JSON object where one must be): the whole message fails.
    Syntax(String),
    /// Valid JSON the type cannot take: with `ignore-parse-errors` the value becomes NULL.
    Convert(String),
}

pub(crate) type R<T> = Result<T, Fail>;

pub(crate) fn syntax<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Syntax(msg.into()))
}

pub(crate) fn convert<T>(msg: impl Into<String>) -> R<T> {
    Err(Fail::Convert(msg.into()))
}

pub(crate) struct Parser<'a> {
    pub(crate) s: &'a [u8],
    pub(crate) i: usize,
    pub(crate) scratch: Vec<u8>,
    /// Tree mode only: the field where a NULL went into a NOT NULL type (Flink's tree path passes such
    /// NULLs on; the caller decides), `Some("")` until the field is known.
    pub(crate) null_in: Option<String>,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(s: &'a [u8]) -> Parser<'a> {
        Parser {
            s,
            i: 0,
            scratch: Vec::new(),
            null_in: None,
        }
    }

    /// Notes a NULL in a NOT NULL type (tree mode).
    pub(crate) fn note_null(&mut self) {
        self.null_in.get_or_insert_with(String::new);
    }

    #[inline]
    pub(crate) fn ws(&mut self) {
        while let Some(&c) = self.s.get(self.i) {
            if c == b' ' || c == b'\n' || c == b'\r' || c == b'\t' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    pub(crate) fn eof<T>(&self) -> R<T> {
        syntax(format!("unexpected end of input at byte {}", self.i))
    }

    #[inline(always)]
    pub(crate) fn expect(&mut self, c: u8) -> R<()> {
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
    pub(crate) fn unexpected(&self, c: u8, found: Option<u8>) -> Fail {
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

    pub(crate) fn literal(&mut self, word: &[u8]) -> R<()> {
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
    pub(crate) fn string(&mut self) -> R<Option<(usize, usize)>> {
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

    pub(crate) fn hex4(&mut self) -> R<u32> {
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
    pub(crate) fn number(&mut self) -> R<Number<'a>> {
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
        if let Some((n, v)) = digits8(s, j) {
            j += n;
            magnitude = v;
        }
        (j, magnitude) = more_digits(s, j, magnitude);
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

    /// The object loop's fast path: an integer token at `i` (`-`? and at most 18 digits, no leading
    /// zero, no fraction, no exponent) read and consumed; `None` (nothing consumed) for any other
    /// token, which the general path then reads (and reports) as before.
    #[inline(always)]
    pub(crate) fn plain_int(&mut self) -> Option<i64> {
        let (v, j) = int_token(self.s, self.i)?;
        self.i = j;
        Some(v)
    }

    /// The object loop's fast path: a string token at `i` without escapes, consumed, as its range in
    /// `s`; `None` (nothing consumed) for any other token.
    #[inline(always)]
    pub(crate) fn plain_string(&mut self) -> Option<(usize, usize)> {
        let s = self.s;
        if s.get(self.i) != Some(&b'"') {
            return None;
        }
        let start = self.i + 1;
        let j = scan_plain(s, start);
        if s.get(j) != Some(&b'"') {
            return None;
        }
        self.i = j + 1;
        Some((start, j))
    }

    /// Whether the input at `i` starts with `quoted` (a field name and its closing quote, see
    /// [`crate::decode::RowPlan::quoted`]) right after an opening quote; if so, consumes them.
    #[inline(always)]
    pub(crate) fn key_is(&mut self, quoted: &[u8]) -> bool {
        let from = self.i + 1;
        match self.s.get(from..from + quoted.len()) {
            Some(raw) if same_bytes(raw, quoted) => {
                self.i = from + quoted.len();
                true
            }
            _ => false,
        }
    }

    /// Skips one value, checking its syntax.
    pub(crate) fn skip(&mut self, depth: usize) -> R<()> {
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
    pub(crate) fn str_bytes(&mut self) -> R<&[u8]> {
        Ok(match self.string()? {
            Some((a, b)) => &self.s[a..b],
            None => &self.scratch,
        })
    }
}

/// Compact JSON text of a value (Jackson's `JsonNode.toString()` for the STRING-from-anything case):
/// the input with whitespace outside strings removed.
pub(crate) fn compact(text: &[u8], out: &mut Vec<u8>) {
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
pub(crate) struct Number<'a> {
    pub(crate) text: &'a [u8],
    /// No fraction, no exponent.
    pub(crate) integer: bool,
    /// The value of an integer token that fits an `i64`.
    pub(crate) value: Option<i64>,
}

/// `-magnitude` or `magnitude` as an `i64`, if it fits.
#[inline]
pub(crate) fn signed(neg: bool, magnitude: u64) -> Option<i64> {
    if neg {
        // -2^63 is the one magnitude that fits only negated; `as` maps it to i64::MIN.
        (magnitude <= 1 << 63).then(|| (magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// An integer in text (a JSON string holding a number): optional sign, at most 19 digits.
pub(crate) fn parse_int(text: &[u8]) -> Option<i64> {
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

pub(crate) fn int_range(dt: &DataType) -> (i64, i64, &'static str) {
    match dt {
        DataType::Tinyint => (i8::MIN.into(), i8::MAX.into(), "TINYINT"),
        DataType::Smallint => (i16::MIN.into(), i16::MAX.into(), "SMALLINT"),
        DataType::Int => (i32::MIN.into(), i32::MAX.into(), "INT"),
        _ => (i64::MIN, i64::MAX, "BIGINT"),
    }
}
