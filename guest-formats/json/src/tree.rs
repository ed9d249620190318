//! Jackson's tree model (`ObjectMapper.readTree`, `JsonNode`) over the message text, as Flink's changelog
//! formats use it: a value is a span of the text instead of a node.
//!
//! Flink builds debezium-json, canal-json and maxwell-json on `JsonRowDataDeserializationSchema`, which
//! reads the whole message into a Jackson tree and converts from the nodes; the envelope logic then asks
//! the tree for fields (`root.get(..)`), text (`asText()`, `toString()`) and `findValue(..)`. What the
//! tree changes against the text (the json format reads the text as it streams by):
//! - a float is a `DecimalNode` when the table has a DECIMAL anywhere (`USE_BIG_DECIMAL_FOR_FLOATS`),
//!   normalized by `stripTrailingZeros` (zero is `0`: `-0.0` loses its sign), else a `DoubleNode`;
//!   `asText()` is `BigDecimal.toString()` (`12.5`, `1E+2`) or `Double.toString()`;
//! - an integer's text is the integer's (`-0` is `0`);
//! - an object keeps the last value of a repeated key, at the key's first position;
//! - `toString()` of a container is Jackson's compact JSON of the tree (strings re-escaped).

use std::collections::HashMap;
use std::ops::Range;

use crate::parser::{Fail, Parser, R, syntax};
use crate::scan::check_utf8;
use format_common::javanum;

/// A value: its bytes in the message text.
pub type Span = Range<usize>;

/// What a value is (Jackson's node type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

/// A message read as Jackson's `readTree` reads it.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    pub(crate) text: &'a [u8],
    root: Span,
}

fn message(f: Fail) -> String {
    match f {
        Fail::Syntax(m) | Fail::Convert(m) => m,
    }
}

impl<'a> Doc<'a> {
    /// Reads `payload` (UTF-8, an optional BOM): its first JSON value is checked, whatever follows it is
    /// ignored (Jackson does not read further). `Err`: not JSON, or no content at all.
    pub fn read(payload: &'a [u8]) -> Result<Doc<'a>, String> {
        check_utf8(payload).map_err(|e| format!("invalid UTF-8 in the JSON payload: {e}"))?;
        let text = payload
            .strip_prefix("\u{feff}".as_bytes())
            .unwrap_or(payload);
        let mut p = Parser::new(text);
        if p.peek().is_none() {
            return Err("no JSON content (only whitespace)".into());
        }
        let start = p.i;
        p.skip(0).map_err(message)?;
        Ok(Doc {
            text,
            root: start..p.i,
        })
    }

    /// The root value.
    pub fn root(&self) -> Span {
        self.root.clone()
    }

    /// The message text the spans index (without a BOM).
    pub fn text(&self) -> &'a [u8] {
        self.text
    }

    fn parser(&self, v: &Span) -> Parser<'a> {
        let mut p = Parser::new(&self.text[..v.end.min(self.text.len())]);
        p.i = v.start;
        p
    }

    /// What value `v` is.
    pub fn kind(&self, v: &Span) -> Kind {
        match self.text.get(v.start) {
            Some(b'{') => Kind::Object,
            Some(b'[') => Kind::Array,
            Some(b'"') => Kind::String,
            Some(b't' | b'f') => Kind::Boolean,
            Some(b'n') | None => Kind::Null,
            Some(_) => Kind::Number,
        }
    }

    /// Calls `member` at each member of the container at `v` between `open` and `close` (`{` `}` or
    /// `[` `]`; none when `v` is something else); `member` reads one, leaving `p` after it.
    fn members(
        &self,
        v: &Span,
        (open, close): (u8, u8),
        mut member: impl FnMut(&mut Parser<'a>) -> R<()>,
    ) -> Result<(), String> {
        let mut p = self.parser(v);
        if p.peek() != Some(open) {
            return Ok(());
        }
        p.i += 1;
        if p.peek() == Some(close) {
            return Ok(());
        }
        loop {
            member(&mut p).map_err(message)?;
            match p.peek() {
                Some(b',') => p.i += 1,
                _ => return Ok(()),
            }
        }
    }

    /// The fields of object `v` in message order, repeated keys included (the last one is Jackson's);
    /// none when `v` is not an object (Jackson's `fields()`).
    pub fn fields(&self, v: &Span, mut f: impl FnMut(&[u8], Span)) -> Result<(), String> {
        self.members(v, (b'{', b'}'), |p| {
            if p.peek() != Some(b'"') {
                return syntax("was expecting double-quote to start field name");
            }
            let key = p.string()?;
            let escaped = key.is_none().then(|| p.scratch.clone());
            p.expect(b':')?;
            p.ws();
            let start = p.i;
            p.skip(0)?;
            let name: &[u8] = match (key, &escaped) {
                (Some((a, b)), _) => &self.text[a..b],
                (None, Some(k)) => k,
                (None, None) => &[],
            };
            f(name, start..p.i);
            Ok(())
        })
    }

    /// Jackson's `get(name)` on `v`: the value of the field's last occurrence (`None`: no such field,
    /// or `v` is not an object).
    pub fn get(&self, v: &Span, name: &str) -> Result<Option<Span>, String> {
        let mut found = None;
        self.fields(v, |k, s| {
            if k == name.as_bytes() {
                found = Some(s);
            }
        })?;
        Ok(found)
    }

    /// The elements of array `v` (none when it is not an array).
    pub fn elements(&self, v: &Span, mut f: impl FnMut(Span)) -> Result<(), String> {
        self.members(v, (b'[', b']'), |p| {
            p.ws();
            let start = p.i;
            p.skip(0)?;
            f(start..p.i);
            Ok(())
        })
    }

    /// Jackson's `asText()` of `v`: a string's content, a number's node text, `true`/`false`, `null`;
    /// `""` for an object or array.
    pub fn as_text(&self, v: &Span, big_decimal: bool, out: &mut Vec<u8>) -> Result<(), String> {
        write_text(&mut self.parser(v), big_decimal, false, out).map_err(message)
    }

    /// Flink's STRING of `v` (`JsonToRowDataConverters.convertToString`): `toString()` of an object or
    /// array (compact JSON), `asText()` of anything else. `false` (nothing written) for JSON null.
    pub fn string(&self, v: &Span, big_decimal: bool, out: &mut Vec<u8>) -> Result<bool, String> {
        if self.kind(v) == Kind::Null {
            return Ok(false);
        }
        write_text(&mut self.parser(v), big_decimal, true, out).map_err(message)?;
        Ok(true)
    }

    /// Jackson's `findValue(name) != null` on `v`: whether any object in `v`, at any depth, has the key.
    pub fn find_value(&self, v: &Span, name: &str) -> Result<bool, String> {
        any_key(&mut self.parser(v), name.as_bytes(), 0).map_err(message)
    }
}

/// The entries of a JSON object as Jackson's `ObjectNode` keeps them: a repeated key keeps its first
/// position and its last value. Values are positions in the text.
#[derive(Debug, Default)]
pub(crate) struct Entries {
    list: Vec<(Vec<u8>, usize)>,
    index: Option<HashMap<Vec<u8>, usize>>,
}

impl Entries {
    fn put(&mut self, key: &[u8], pos: usize) {
        if let Some(index) = &mut self.index {
            match index.get(key) {
                Some(&i) => self.list[i].1 = pos,
                None => {
                    index.insert(key.to_vec(), self.list.len());
                    self.list.push((key.to_vec(), pos));
                }
            }
            return;
        }
        if let Some(e) = self.list.iter_mut().find(|e| e.0 == key) {
            e.1 = pos;
            return;
        }
        self.list.push((key.to_vec(), pos));
        if self.list.len() > 16 {
            self.index = Some(
                self.list
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (e.0.clone(), i))
                    .collect(),
            );
        }
    }

    /// Reads the object at `p` (at `{`), leaving `p` after it.
    pub(crate) fn read(p: &mut Parser<'_>) -> R<Entries> {
        let mut entries = Entries::default();
        p.i += 1;
        if p.peek() == Some(b'}') {
            p.i += 1;
            return Ok(entries);
        }
        loop {
            if p.peek() != Some(b'"') {
                return syntax("was expecting double-quote to start field name");
            }
            let key = p.str_bytes()?.to_vec();
            p.expect(b':')?;
            p.ws();
            let pos = p.i;
            p.skip(0)?;
            entries.put(&key, pos);
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b'}') => {
                    p.i += 1;
                    return Ok(entries);
                }
                _ => return syntax("was expecting comma to separate Object entries"),
            }
        }
    }

    /// Calls `entry` with each entry's number and key and `p` at its value, in order, until it gives
    /// `true` (then `true`, `p` left where `entry` left it); otherwise leaves `p` where it was (after
    /// the object, when called right after [`Entries::read`]).
    pub(crate) fn each(
        &self,
        p: &mut Parser<'_>,
        mut entry: impl FnMut(&mut Parser<'_>, usize, &[u8]) -> R<bool>,
    ) -> R<bool> {
        let end = p.i;
        for (n, (k, pos)) in self.list.iter().enumerate() {
            p.i = *pos;
            if entry(p, n, k)? {
                return Ok(true);
            }
        }
        p.i = end;
        Ok(false)
    }
}

/// Whether an object in the value at `p`, at any depth, has the key `name`.
fn any_key(p: &mut Parser<'_>, name: &[u8], depth: usize) -> R<bool> {
    if depth > 512 {
        return syntax("nesting too deep");
    }
    match p.peek() {
        Some(b'{') => {
            Entries::read(p)?.each(p, |p, _, k| Ok(k == name || any_key(p, name, depth + 1)?))
        }
        Some(b'[') => {
            p.i += 1;
            if p.peek() == Some(b']') {
                p.i += 1;
                return Ok(false);
            }
            loop {
                if any_key(p, name, depth + 1)? {
                    return Ok(true);
                }
                match p.peek() {
                    Some(b',') => p.i += 1,
                    _ => {
                        p.i += 1;
                        return Ok(false);
                    }
                }
            }
        }
        _ => p.skip(depth).map(|_| false),
    }
}

/// The text of the value at `p`: `asText()`, or with `containers` Jackson's compact JSON of an object or
/// array (`toString()`) where `asText()` gives `""`.
pub(crate) fn write_text(
    p: &mut Parser<'_>,
    big_decimal: bool,
    containers: bool,
    out: &mut Vec<u8>,
) -> R<()> {
    match p.peek() {
        Some(b'"') => out.extend_from_slice(p.str_bytes()?),
        Some(b'{' | b'[') if !containers => p.skip(0)?,
        Some(b'{' | b'[') => write_json(p, big_decimal, out, 0)?,
        Some(b'-' | b'0'..=b'9') => {
            let n = p.number()?;
            number_text(n.text, n.integer, big_decimal, out);
        }
        Some(b't') => {
            p.literal(b"true")?;
            out.extend_from_slice(b"true");
        }
        Some(b'f') => {
            p.literal(b"false")?;
            out.extend_from_slice(b"false");
        }
        Some(b'n') => {
            p.literal(b"null")?;
            out.extend_from_slice(b"null");
        }
        _ => p.skip(0)?,
    }
    Ok(())
}

/// Jackson's serialization of the tree of the value at `p` (what `JsonNode.toString()` gives).
fn write_json(p: &mut Parser<'_>, big_decimal: bool, out: &mut Vec<u8>, depth: usize) -> R<()> {
    if depth > 512 {
        return syntax("nesting too deep");
    }
    match p.peek() {
        Some(b'{') => {
            let entries = Entries::read(p)?;
            out.push(b'{');
            entries.each(p, |p, n, k| {
                if n > 0 {
                    out.push(b',');
                }
                write_jackson_string(k, out);
                out.push(b':');
                write_json(p, big_decimal, out, depth + 1)?;
                Ok(false)
            })?;
            out.push(b'}');
        }
        Some(b'[') => {
            p.i += 1;
            out.push(b'[');
            if p.peek() == Some(b']') {
                p.i += 1;
            } else {
                loop {
                    write_json(p, big_decimal, out, depth + 1)?;
                    match p.peek() {
                        Some(b',') => {
                            p.i += 1;
                            out.push(b',');
                        }
                        Some(b']') => {
                            p.i += 1;
                            break;
                        }
                        _ => return syntax("was expecting comma to separate Array entries"),
                    }
                }
            }
            out.push(b']');
        }
        Some(b'"') => {
            let s = p.str_bytes()?;
            write_jackson_string(s, out);
        }
        _ => write_text(p, big_decimal, false, out)?,
    }
    Ok(())
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A JSON string as Jackson's `String` generator writes it: `"`, `\` and control characters escaped,
/// everything else (non-ASCII included) as it is.
fn write_jackson_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            c if c < 0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 15)]);
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// The text of a number node read from JSON number `text`: an integer's digits (`-0` is `0`), a
/// float's `BigDecimal.toString()` after `stripTrailingZeros` (`big_decimal`) or `Double.toString()`.
pub(crate) fn number_text(text: &[u8], integer: bool, big_decimal: bool, out: &mut Vec<u8>) {
    if integer {
        out.extend_from_slice(if text == b"-0" { b"0" } else { text });
    } else if big_decimal {
        big_decimal_text(text, out);
    } else {
        let v: f64 = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(f64::NAN);
        javanum::write_f64(v, out);
    }
}

/// A JSON number as (negative, significant digits without leading zeros, scale): the value is
/// `digits × 10^-scale`. Exponents are capped far beyond any `BigDecimal` scale.
pub(crate) fn decimal_parts(text: &[u8]) -> (bool, Vec<u8>, i64) {
    let (neg, rest) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        _ => (false, text),
    };
    let mut digits = Vec::with_capacity(rest.len());
    let mut scale: i64 = 0;
    let mut in_fraction = false;
    let mut i = 0;
    while let Some(&c) = rest.get(i) {
        match c {
            b'0'..=b'9' => {
                if !(digits.is_empty() && c == b'0') {
                    digits.push(c);
                }
                if in_fraction {
                    scale += 1;
                }
            }
            b'.' => in_fraction = true,
            _ => break,
        }
        i += 1;
    }
    if matches!(rest.get(i), Some(b'e' | b'E')) {
        i += 1;
        let eneg = rest.get(i) == Some(&b'-');
        if matches!(rest.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let mut exp: i64 = 0;
        while let Some(&c) = rest.get(i).filter(|c| c.is_ascii_digit()) {
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
            i += 1;
        }
        scale -= if eneg { -exp } else { exp };
    }
    (neg, digits, scale)
}

/// Java's `new BigDecimal(text).stripTrailingZeros().toString()`, zero as `0`.
fn big_decimal_text(text: &[u8], out: &mut Vec<u8>) {
    let (neg, mut digits, mut scale) = decimal_parts(text);
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
        scale -= 1;
    }
    if digits.is_empty() {
        out.push(b'0');
        return;
    }
    if neg {
        out.push(b'-');
    }
    let n = digits.len() as i64;
    let adjusted = n - 1 - scale;
    if scale == 0 {
        out.extend_from_slice(&digits);
    } else if scale > 0 && adjusted >= -6 {
        if n > scale {
            let point = (n - scale) as usize;
            out.extend_from_slice(&digits[..point]);
            out.push(b'.');
            out.extend_from_slice(&digits[point..]);
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (scale - n) as usize));
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if n > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'E');
        if adjusted > 0 {
            out.push(b'+');
        }
        out.extend_from_slice(adjusted.to_string().as_bytes());
    }
}

/// Java's `String.trim()`: characters up to U+0020 off both ends.
pub(crate) fn java_trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| c > b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|&c| c > b' ').map_or(start, |e| e + 1);
    &s[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bd(s: &str) -> String {
        let mut out = Vec::new();
        big_decimal_text(s.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_read_as_big_decimal_print_as_java() {
        for (input, java) in [
            ("12.50", "12.5"),
            ("99.0", "99"),
            ("100.0", "1E+2"),
            ("-0.0", "0"),
            ("0.000", "0"),
            ("0.000001", "0.000001"),
            ("0.0000001", "1E-7"),
            ("1.5e3", "1.5E+3"),
            ("-12.345e-2", "-0.12345"),
            ("3.141592653589793", "3.141592653589793"),
            ("1.7976931348623157E308", "1.7976931348623157E+308"),
            ("4.9E-324", "4.9E-324"),
        ] {
            assert_eq!(bd(input), java, "{input}");
        }
    }

    #[test]
    fn container_text_is_jacksons() {
        let doc =
            Doc::read(br#" {"a" : [1, -0, 2.50, "x\/y\u00e9\u0001"], "b":{}, "a":true} trailing"#)
                .unwrap();
        let mut out = Vec::new();
        assert!(doc.string(&doc.root(), true, &mut out).unwrap());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"a\":true,\"b\":{}}",
            "a repeated key keeps its first position and last value"
        );
        let doc = Doc::read(br#"[1, -0, 2.50, "x\/y\u00e9\u0001", null]"#).unwrap();
        let mut out = Vec::new();
        doc.string(&doc.root(), false, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[1,0,2.5,\"x/y\u{e9}\\u0001\",null]"
        );
        let mut out = Vec::new();
        doc.as_text(&doc.root(), false, &mut out).unwrap();
        assert!(out.is_empty(), "asText of a container is empty");
    }

    #[test]
    fn find_value_searches_every_depth() {
        let doc = Doc::read(br#"[{"a":1},{"b":{"c":[{"d":null}]}}]"#).unwrap();
        for (name, found) in [
            ("a", true),
            ("b", true),
            ("c", true),
            ("d", true),
            ("e", false),
        ] {
            assert_eq!(doc.find_value(&doc.root(), name).unwrap(), found, "{name}");
        }
    }

    #[test]
    fn fields_and_elements() {
        let doc = Doc::read(br#"{"k\"1":[1,{"x":2}],"n":null,"k\"1":3}"#).unwrap();
        let mut seen = Vec::new();
        doc.fields(&doc.root(), |k, v| {
            seen.push((String::from_utf8_lossy(k).into_owned(), doc.kind(&v)))
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                ("k\"1".to_owned(), Kind::Array),
                ("n".to_owned(), Kind::Null),
                ("k\"1".to_owned(), Kind::Number)
            ]
        );
        let v = doc.get(&doc.root(), "k\"1").unwrap().unwrap();
        assert_eq!(&doc.text()[v], b"3");
        assert!(Doc::read(b"   ").is_err());
        assert!(Doc::read(b"{\"a\":").is_err());
        assert_eq!(java_trim(b" \t x y \n"), b"x y");
        assert_eq!(java_trim(b"  "), b"");
    }
}
