//! Byte scanning of the decoder, eight bytes at a time (SWAR on `u64`: as fast on wasm32, whose
//! `usize` is four bytes, as natively): string bodies, the UTF-8 check of a payload and field-name
//! comparison. On wasm32 the standard library's byte routines are the slow ones — `from_utf8` walks
//! `usize` words, slice equality calls a byte-at-a-time `memcmp` — so the hot paths avoid them.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `w` that is below `n` (n <= 128); exact for the lowest such byte.
#[inline]
fn bytes_below(w: u64, n: u8) -> u64 {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS
}

/// High bit set in each byte of `w` equal to `b`; exact for the lowest such byte.
#[inline]
fn bytes_equal(w: u64, b: u8) -> u64 {
    bytes_below(w ^ (ONES * u64::from(b)), 1)
}

/// The index of the first `"`, `\\` or control character at or after `j` (or `s.len()`), eight
/// bytes at a time.
#[inline]
pub(crate) fn scan_plain(s: &[u8], mut j: usize) -> usize {
    while j + 8 <= s.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[j..j + 8]);
        let w = u64::from_le_bytes(w);
        let m = bytes_equal(w, b'"') | bytes_equal(w, b'\\') | bytes_below(w, 0x20);
        if m != 0 {
            return j + (m.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < s.len() && !matches!(s[j], b'"' | b'\\' | 0..=0x1f) {
        j += 1;
    }
    j
}

#[inline(always)]
fn word(s: &[u8], j: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[j..j + 8]);
    u64::from_le_bytes(w)
}

/// The eight bytes at `j` as a word; near the end of `s` (fewer than eight left, but `s` at least
/// eight long) the bytes left, zero above them; `None` when `s` is shorter or `j` at its end.
#[inline(always)]
fn next_word(s: &[u8], j: usize) -> Option<u64> {
    if j + 8 <= s.len() {
        Some(word(s, j))
    } else if s.len() >= 8 && j < s.len() {
        // 1..=7 bytes left: shift the last word down by the bytes before `j`.
        Some(word(s, s.len() - 8) >> (8 * (j + 8 - s.len())))
    } else {
        None
    }
}

/// The leading ASCII digits of the eight bytes at `j` (`None` when `s` is shorter than eight bytes or
/// `j` at its end; fewer than eight left are read as the last word): how many
/// (0..=8) and their value, found and converted without a loop per digit.
#[inline(always)]
pub(crate) fn digits8(s: &[u8], j: usize) -> Option<(usize, u64)> {
    // Near the end, the last word shifted: the zeros above the end are not digits.
    let w = next_word(s, j)?;
    // Per byte: zero exactly when it is a digit (high nibble 3, low nibble at most 9; `+ 6` carries
    // a low nibble of 10..15 into bit 4 without touching the next byte).
    let z = ((w & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030)
        | (((w & 0x0F0F_0F0F_0F0F_0F0F) + 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010);
    let nonzero = (((z & 0x7F7F_7F7F_7F7F_7F7F) + 0x7F7F_7F7F_7F7F_7F7F) | z) & HIGHS;
    let n = (nonzero.trailing_zeros() / 8) as usize;
    if n == 0 {
        return Some((0, 0));
    }
    // Left-align the n digits (the first is the most significant), zeros before them.
    let v = (w << (8 * (8 - n))) & 0x0F0F_0F0F_0F0F_0F0F;
    let v = (v.wrapping_mul(10) + (v >> 8)) & 0x00FF_00FF_00FF_00FF;
    let v = (v.wrapping_mul(100) + (v >> 16)) & 0x0000_FFFF_0000_FFFF;
    let v = (v.wrapping_mul(10_000) + (v >> 32)) & 0xFFFF_FFFF;
    Some((n, v))
}

/// An integer token at `j` (`-`? and at most 18 digits, no leading zero, no fraction, no exponent):
/// its value and the index after it; `None` for any other token (or none), which the general number
/// path then reads and reports.
#[inline(always)]
pub(crate) fn int_token(s: &[u8], j: usize) -> Option<(i64, usize)> {
    let (v, j) = int_digits(s, j)?;
    (!matches!(s.get(j), Some(b'.' | b'e' | b'E'))).then_some((v, j))
}

/// [`int_token`] without the look at the byte after the digits: for a caller that checks it is a
/// `,` or `}` anyway (a fraction or an exponent then fails that check).
#[inline(always)]
pub(crate) fn int_digits(s: &[u8], j: usize) -> Option<(i64, usize)> {
    let neg = s.get(j) == Some(&b'-');
    let start = j + usize::from(neg);
    match digits8(s, start) {
        // Up to seven digits, the usual: no loop (each one entered costs an epoch check on wasm).
        Some((n, v)) if n < 8 => {
            if n == 0 || (n > 1 && s[start] == b'0') {
                return None;
            }
            let v = v as i64;
            Some((if neg { -v } else { v }, start + n))
        }
        _ => long_int(s, start, neg),
    }
}

/// [`int_digits`] for eight digits or more, or near the end of a short input: digit by digit
/// (inlined: as a call its tuple result would pass through the shadow stack on every path).
#[inline(always)]
fn long_int(s: &[u8], start: usize, neg: bool) -> Option<(i64, usize)> {
    let (j, magnitude) = more_digits(s, start, 0);
    let digits = j - start;
    if digits == 0 || digits > 18 || (digits > 1 && s[start] == b'0') {
        return None;
    }
    // Eighteen digits are below 10^18 < 2^63.
    let v = magnitude as i64;
    Some((if neg { -v } else { v }, j))
}

/// The decimal digits from `j` on, accumulated onto `magnitude` (wrapping: callers bound the count):
/// the index after the last digit and the value.
#[inline(always)]
pub(crate) fn more_digits(s: &[u8], mut j: usize, mut magnitude: u64) -> (usize, u64) {
    while let Some(&c) = s.get(j) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        magnitude = magnitude.wrapping_mul(10).wrapping_add(u64::from(d));
        j += 1;
    }
    (j, magnitude)
}

/// The index of the closing quote of a string token at `j` whose content is printable ASCII
/// without escapes; `None` for any other token (the general string path reads it).
#[inline(always)]
pub(crate) fn ascii_string_end(s: &[u8], j: usize) -> Option<usize> {
    if s.get(j) != Some(&b'"') {
        return None;
    }
    let stop =
        |w: u64| bytes_equal(w, b'"') | bytes_equal(w, b'\\') | bytes_below(w, 0x20) | (w & HIGHS);
    let mut j = j + 1;
    // The first word outside the loop: most strings end in it (near the end of `s`, the bytes left;
    // the zeros above them would stop the scan, so a stop there is checked to be a quote).
    if let Some(w) = next_word(s, j) {
        let m = stop(w);
        if m != 0 {
            j += (m.trailing_zeros() / 8) as usize;
            return (j < s.len() && s[j] == b'"').then_some(j);
        }
        j += 8;
    }
    Some(ascii_string_rest(s, j)).filter(|&j| j != usize::MAX)
}

/// [`ascii_string_end`] past its first word; `usize::MAX` for `None` (a plain number comes back in
/// a register, an `Option` through the guest's shadow stack).
#[inline(never)]
fn ascii_string_rest(s: &[u8], mut j: usize) -> usize {
    while let Some(w) = next_word(s, j) {
        let m = bytes_equal(w, b'"') | bytes_equal(w, b'\\') | bytes_below(w, 0x20) | (w & HIGHS);
        if m != 0 {
            j += (m.trailing_zeros() / 8) as usize;
            return if j < s.len() && s[j] == b'"' {
                j
            } else {
                usize::MAX
            };
        }
        j += 8;
    }
    // An input shorter than eight bytes, byte by byte.
    while let Some(&c) = s.get(j) {
        match c {
            b'"' => return j,
            b'\\' | 0..=0x1f | 0x80.. => return usize::MAX,
            _ => j += 1,
        }
    }
    usize::MAX
}

/// `s` as UTF-8: the ASCII prefix is skipped sixteen bytes at a time, the standard check runs from the
/// first non-ASCII byte on. The error is the standard one for the whole of `s` (its byte index too).
#[inline]
pub(crate) fn check_utf8(s: &[u8]) -> Result<(), std::str::Utf8Error> {
    let mut j = 0;
    while j + 16 <= s.len() {
        if (word(s, j) | word(s, j + 8)) & HIGHS != 0 {
            break;
        }
        j += 16;
    }
    // The last (up to) sixteen bytes in two overlapping words: no byte loop for the tail.
    if s.len() >= 16
        && j + 16 > s.len()
        && (word(s, s.len() - 16) | word(s, s.len() - 8)) & HIGHS == 0
    {
        return Ok(());
    }
    // Every byte before `j` is ASCII, so `j` is a character boundary.
    match std::str::from_utf8(&s[j..]) {
        Ok(_) => Ok(()),
        Err(_) => std::str::from_utf8(s).map(|_| ()),
    }
}

/// `a == b`, eight bytes at a time: without a loop up to 32 bytes (overlapping words; on wasm a loop
/// costs an interruption check per turn), field names being short.
#[inline(always)]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n < 8 {
        return if n >= 4 {
            half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4)
        } else {
            a == b
        };
    }
    if n > 32 {
        return same_words(a, b);
    }
    let last = word(a, n - 8) == word(b, n - 8) && word(a, 0) == word(b, 0);
    if n <= 16 {
        last
    } else if n <= 24 {
        last && word(a, 8) == word(b, 8)
    } else {
        last && word(a, 8) == word(b, 8) && word(a, 16) == word(b, 16)
    }
}

#[inline]
fn half(s: &[u8], j: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[j..j + 4]);
    u32::from_le_bytes(w)
}

/// `a == b` for equal lengths of at least eight bytes.
fn same_words(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    let mut j = 0;
    while j + 8 <= n {
        if word(a, j) != word(b, j) {
            return false;
        }
        j += 8;
    }
    word(a, n - 8) == word(b, n - 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_check_agrees_with_std() {
        let cases: [&[u8]; 6] = [
            b"",
            b"{\"a\":1}",
            "{\"name\":\"gr\u{fc}n \u{1F600}\"} and some more ascii".as_bytes(),
            b"0123456789abcdef0123456789abcdef\xff",
            b"0123456789abcdef\xed\xa0\x80 tail",
            b"short \xc3",
        ];
        for c in cases {
            assert_eq!(check_utf8(c), std::str::from_utf8(c).map(|_| ()), "{c:?}");
        }
    }

    #[test]
    fn digits8_reads_leading_digits() {
        type Case<'a> = (&'a [u8], Option<(usize, u64)>);
        let cases: [Case; 8] = [
            (b"1234567", None),
            (b"12345678", Some((8, 12_345_678))),
            (b"99999999,", Some((8, 99_999_999))),
            (b"1,\"a\":2}}", Some((1, 1))),
            (b"0740:1234", Some((4, 740))),
            (b"4321.5e3", Some((4, 4321))),
            (b"}       ", Some((0, 0))),
            (b"12/:;<=>", Some((2, 12))),
        ];
        for (s, want) in cases {
            assert_eq!(digits8(s, 0), want, "{s:?}");
        }
        // Fewer than eight bytes left: the last word, shifted (nothing left: `None`).
        assert_eq!(digits8(b"{\"l\":123}", 5), Some((3, 123)));
        assert_eq!(digits8(b"{\"l\":1234567", 5), Some((7, 1_234_567)));
        assert_eq!(digits8(b"{\"l\":1234567", 12), None);
        // Every byte value after one digit: only '0'..='9' continue the number.
        for b in 0..=255u8 {
            let s = [b'7', b, b' ', b' ', b' ', b' ', b' ', b' '];
            let want = if b.is_ascii_digit() {
                (2, 70 + u64::from(b - b'0'))
            } else {
                (1, 7)
            };
            assert_eq!(digits8(&s, 0), Some(want), "byte {b}");
        }
    }

    #[test]
    fn same_bytes_is_equality() {
        let words: [&[u8]; 6] = [
            b"",
            b"a",
            b"order_id",
            b"order_ie",
            b"order_status",
            b"order_statuz",
        ];
        for a in words {
            for b in words {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
        // Every length up to past the loop-free cases, a difference at every position.
        for n in 0..=41usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same_bytes(&a, &a.clone()), "{n}");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same_bytes(&a, &b), "{n} {at}");
            }
        }
    }

    #[test]
    fn ascii_string_end_stops_where_the_general_path_takes_over() {
        // (input at the opening quote, the closing quote's index)
        let cases: [(&[u8], Option<usize>); 9] = [
            (b"\"\"", Some(1)),
            (b"\"CREATED\",", Some(8)),
            (b"\"DELIVERED\"}", Some(10)),
            (b"\"a string longer than eight\"", Some(27)),
            (b"\"esc\\\"aped\"", None),
            (b"\"gr\xc3\xbcn\"", None),
            (b"\"tab\there\"", None),
            (b"\"unterminated", None),
            (b"12", None),
        ];
        for (s, want) in cases {
            assert_eq!(ascii_string_end(s, 0), want, "{s:?}");
        }
        // Fewer than eight bytes left: the last word, shifted.
        assert_eq!(ascii_string_end(b"{\"s\":\"PAID\"}", 5), Some(10));
        assert_eq!(ascii_string_end(b"{\"s\":\"PAID", 5), None);
        assert_eq!(ascii_string_end(b"{\"s\":\"PA\\", 5), None);
        assert_eq!(ascii_string_end(b"{\"s\":\"\"", 5), Some(6));
    }

    #[test]
    fn int_token_reads_plain_integers_only() {
        type Case<'a> = (&'a [u8], Option<(i64, usize)>);
        let cases: [Case; 12] = [
            (b"0,", Some((0, 1))),
            (b"-0}", Some((0, 2))),
            (b"12345678,", Some((12_345_678, 8))),
            (b"123456789012345678}", Some((123_456_789_012_345_678, 18))),
            (b"-42", Some((-42, 3))),
            (b"1234567890123456789", None),
            (b"01", None),
            (b"1.5", None),
            (b"2e3", None),
            (b"-", None),
            (b"x", None),
            (b"", None),
        ];
        for (s, want) in cases {
            assert_eq!(int_token(s, 0), want, "{s:?}");
        }
    }
}
