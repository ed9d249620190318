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

#[inline]
fn word(s: &[u8], j: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[j..j + 8]);
    u64::from_le_bytes(w)
}

/// The leading ASCII digits of the eight bytes at `j` (`None` when fewer than eight remain): how many
/// (0..=8) and their value, found and converted without a loop per digit.
#[inline]
pub(crate) fn digits8(s: &[u8], j: usize) -> Option<(usize, u64)> {
    if j + 8 > s.len() {
        return None;
    }
    let w = word(s, j);
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

/// `a == b`, eight bytes at a time.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut j = 0;
    while j + 8 <= a.len() {
        if word(a, j) != word(b, j) {
            return false;
        }
        j += 8;
    }
    a[j..].iter().zip(&b[j..]).all(|(x, y)| x == y)
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
    }
}
