//! Java's `Float.toString(float)` and `Double.toString(double)` as the JDKs Flink 1.18 runs on (8, 11, 17) print
//! them: `0.1`, `1.0E7`, `3.4028235E38`, `1.4E-45`, `-0.0`, `NaN`, `-Infinity`.
//!
//! Those JDKs use `jdk.internal.math.FloatingDecimal` (replaced in JDK 19, JDK-4511638), whose digits are *not*
//! always the shortest that round-trip: `1.0E23` prints `9.999999999999999E22`, `2.82879384806159E17` prints
//! `2.82879384806159008E17`. This module follows that algorithm step by step (the same integer widths, the same
//! stopping tests, the same rounding), so no case is special-cased: an integral value with at most 62 binary
//! digits is printed from a `long` with its insignificant low digits rounded off; every other value develops digits
//! from exact integers `B / S` until the remainder is within half an ULP `M`, in 32-bit, 64-bit or arbitrary
//! precision arithmetic depending on the sizes (the narrow paths compare `b + m > 10s`, the wide one
//! `b + m >= 10s`, and the 32-bit path treats an overflowed `m` as the end; both are kept). Checked against 7114
//! values printed by Java 17 (`tests/golden/vectors/print/float-to-string.txt`).

use std::cmp::Ordering;

use super::big_integer::Big;

/// `Float.toString(v)`: FLOAT is formatted from its own 24-bit significand, never widened to a double.
pub fn float_to_string(v: f32) -> String {
    let bits = v.to_bits();
    let negative = bits >> 31 != 0;
    let mut fract = bits & 0x7f_ffff;
    let exponent = ((bits >> 23) & 0xff) as i32;
    if exponent == 0xff {
        return special(fract == 0, negative);
    }
    let (bin_exp, significant_bits) = if exponent == 0 {
        if fract == 0 {
            return zero(negative);
        }
        let leading = fract.leading_zeros() as i32;
        let shift = leading - (31 - 23);
        fract <<= shift;
        (1 - shift, 32 - leading)
    } else {
        fract |= 1 << 23;
        (exponent, 24)
    };
    let d = dtoa(
        bin_exp - 127,
        u64::from(fract) << (52 - 23),
        significant_bits,
    );
    d.to_java_string(negative)
}

/// `Double.toString(v)`.
pub fn double_to_string(v: f64) -> String {
    let bits = v.to_bits();
    let negative = bits >> 63 != 0;
    let mut fract = bits & SIGNIF_MASK;
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    if exponent == 0x7ff {
        return special(fract == 0, negative);
    }
    let (bin_exp, significant_bits) = if exponent == 0 {
        if fract == 0 {
            return zero(negative);
        }
        let leading = fract.leading_zeros() as i32;
        let shift = leading - (63 - 52);
        fract <<= shift;
        (1 - shift, 64 - leading)
    } else {
        fract |= FRACT_HOB;
        (exponent, 53)
    };
    let d = dtoa(bin_exp - 1023, fract, significant_bits);
    d.to_java_string(negative)
}

fn special(infinite: bool, negative: bool) -> String {
    match (infinite, negative) {
        (false, _) => "NaN",
        (true, false) => "Infinity",
        (true, true) => "-Infinity",
    }
    .to_string()
}

fn zero(negative: bool) -> String {
    if negative { "-0.0" } else { "0.0" }.to_string()
}

const EXP_SHIFT: i32 = 52;
const FRACT_HOB: u64 = 1 << EXP_SHIFT;
const SIGNIF_MASK: u64 = FRACT_HOB - 1;
const EXP_ONE: u64 = 1023 << EXP_SHIFT;
const MAX_SMALL_BIN_EXP: i32 = 62;
const MIN_SMALL_BIN_EXP: i32 = -(63 / 3);

/// 5^0 ..= 5^13 (fit an `int`).
const SMALL_5_POW: [i32; 14] = {
    let mut t = [1i32; 14];
    let mut i = 1;
    while i < t.len() {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
};
/// 5^0 ..= 5^26 (fit a `long`).
const LONG_5_POW: [i64; 27] = {
    let mut t = [1i64; 27];
    let mut i = 1;
    while i < t.len() {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
};
/// Approximately ceil(log2(5^i)).
const N_5_BITS: [i32; 27] = [
    0, 3, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56,
    59, 61,
];
/// Number of decimal digits of 2^i minus one, for i < 64.
const INSIGNIFICANT_DIGITS: [i32; 64] = [
    0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9,
    9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16, 16,
    16, 17, 17, 17, 18, 18, 18, 19,
];

/// Decimal digits (ASCII) and the exponent: value = 0.d1d2d3... × 10^dec_exponent.
struct Decimal {
    digits: Vec<u8>,
    dec_exponent: i32,
}

impl Decimal {
    /// `BinaryToASCIIBuffer.getChars`: plain notation for 10^-3 <= |v| < 10^7, else `d.dddE±n`.
    fn to_java_string(&self, negative: bool) -> String {
        let digits = std::str::from_utf8(&self.digits).unwrap_or("0");
        let n = digits.len();
        let e = self.dec_exponent;
        let mut out = String::with_capacity(n + 8);
        if negative {
            out.push('-');
        }
        if e > 0 && e < 8 {
            let int_len = n.min(e as usize);
            out.push_str(&digits[..int_len]);
            if int_len < e as usize {
                out.extend(std::iter::repeat_n('0', e as usize - int_len));
                out.push_str(".0");
            } else {
                out.push('.');
                out.push_str(if int_len < n { &digits[int_len..] } else { "0" });
            }
        } else if e <= 0 && e > -3 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-e) as usize));
            out.push_str(digits);
        } else {
            out.push_str(&digits[..1]);
            out.push('.');
            out.push_str(if n > 1 { &digits[1..] } else { "0" });
            out.push('E');
            if e <= 0 {
                out.push('-');
                out.push_str(&(-e + 1).to_string());
            } else {
                out.push_str(&(e - 1).to_string());
            }
        }
        out
    }

    /// Adds one to the last digit, carrying; a carry out of the first digit becomes `1` and a larger exponent.
    fn round_up(&mut self) {
        let Some(mut i) = self.digits.len().checked_sub(1) else {
            return;
        };
        let mut q = self.digits[i];
        if q == b'9' {
            while q == b'9' && i > 0 {
                self.digits[i] = b'0';
                i -= 1;
                q = self.digits[i];
            }
            if q == b'9' {
                self.dec_exponent += 1;
                self.digits[0] = b'1';
                return;
            }
        }
        self.digits[i] = q + 1;
    }
}

/// `BinaryToASCIIBuffer.dtoa` in Java's compatible format; `fract_bits` has its high-order bit at bit 52.
fn dtoa(bin_exp: i32, fract_bits: u64, significant_bits: i32) -> Decimal {
    let tail_zeros = fract_bits.trailing_zeros() as i32;
    let n_fract_bits = EXP_SHIFT + 1 - tail_zeros;
    // number of significant bits to the right of the binary point
    let n_tiny_bits = (n_fract_bits - bin_exp - 1).max(0);
    if (MIN_SMALL_BIN_EXP..=MAX_SMALL_BIN_EXP).contains(&bin_exp)
        && n_tiny_bits == 0
        && n_fract_bits + N_5_BITS[0] < 64
    {
        // An integer that fits a long: print it, rounding off the digits below the precision.
        let insignificant = if bin_exp > significant_bits {
            insignificant_digits_for_pow2(bin_exp - significant_bits - 1)
        } else {
            0
        };
        let value = if bin_exp >= EXP_SHIFT {
            fract_bits << (bin_exp - EXP_SHIFT)
        } else {
            fract_bits >> (EXP_SHIFT - bin_exp)
        };
        return long_digits(value as i64, insignificant);
    }

    // value = B / S × 10^dec_exp with 1 <= B / S < 10; M = half an ULP scaled like B.
    let mut dec_exp = estimate_dec_exp(fract_bits, bin_exp);
    let b5 = (-dec_exp).max(0);
    let mut b2 = b5 + n_tiny_bits + bin_exp;
    let s5 = dec_exp.max(0);
    let mut s2 = s5 + n_tiny_bits;
    let m5 = b5;
    let mut m2 = b2 - significant_bits;

    let fract = fract_bits >> tail_zeros;
    b2 -= n_fract_bits - 1;
    let common2 = b2.min(s2);
    b2 -= common2;
    s2 -= common2;
    m2 -= common2;
    // the ULP below an exact power of two is half as wide
    if n_fract_bits == 1 {
        m2 -= 1;
    }
    if m2 < 0 {
        b2 -= m2;
        s2 -= m2;
        m2 = 0;
    }

    let b_bits = n_fract_bits + b2 + n5_bits(b5);
    let ten_s_bits = s2 + 1 + n5_bits(s5 + 1);
    let mut digits = Vec::with_capacity(20);
    // E-form always shows a digit after the point, so it develops at least two digits
    let e_form = |dec_exp: i32| !(-3..8).contains(&dec_exp);
    let (low, high, low_digit_difference);
    if b_bits < 32 && ten_s_bits < 32 {
        let mut b = (fract as i32)
            .wrapping_mul(SMALL_5_POW[b5 as usize])
            .wrapping_shl(b2 as u32);
        let s = SMALL_5_POW[s5 as usize].wrapping_shl(s2 as u32);
        let mut m = SMALL_5_POW[m5 as usize].wrapping_shl(m2 as u32);
        let ten_s = s.wrapping_mul(10);
        let mut q = b.wrapping_div(s);
        b = b.wrapping_rem(s).wrapping_mul(10);
        m = m.wrapping_mul(10);
        let (mut lo, mut hi) = (b < m, b.wrapping_add(m) > ten_s);
        if q == 0 && !hi {
            dec_exp -= 1;
        } else {
            digits.push(digit(q as i64));
        }
        if e_form(dec_exp) {
            (lo, hi) = (false, false);
        }
        while !lo && !hi {
            q = b.wrapping_div(s);
            b = b.wrapping_rem(s).wrapping_mul(10);
            m = m.wrapping_mul(10);
            (lo, hi) = if m > 0 {
                (b < m, b.wrapping_add(m) > ten_s)
            } else {
                (true, true)
            };
            digits.push(digit(q as i64));
        }
        (low, high) = (lo, hi);
        low_digit_difference = i64::from(b.wrapping_shl(1).wrapping_sub(ten_s));
    } else if b_bits < 64 && ten_s_bits < 64 {
        let mut b = (fract as i64)
            .wrapping_mul(LONG_5_POW[b5 as usize])
            .wrapping_shl(b2 as u32);
        let s = LONG_5_POW[s5 as usize].wrapping_shl(s2 as u32);
        let mut m = LONG_5_POW[m5 as usize].wrapping_shl(m2 as u32);
        let ten_s = s.wrapping_mul(10);
        let mut q = b.wrapping_div(s);
        b = b.wrapping_rem(s).wrapping_mul(10);
        m = m.wrapping_mul(10);
        let (mut lo, mut hi) = (b < m, b.wrapping_add(m) > ten_s);
        if q == 0 && !hi {
            dec_exp -= 1;
        } else {
            digits.push(digit(q));
        }
        if e_form(dec_exp) {
            (lo, hi) = (false, false);
        }
        while !lo && !hi {
            q = b.wrapping_div(s);
            b = b.wrapping_rem(s).wrapping_mul(10);
            m = m.wrapping_mul(10);
            (lo, hi) = if m > 0 {
                (b < m, b.wrapping_add(m) > ten_s)
            } else {
                (true, true)
            };
            digits.push(digit(q));
        }
        (low, high) = (lo, hi);
        low_digit_difference = b.wrapping_shl(1).wrapping_sub(ten_s);
    } else {
        let s = Big::pow52(s5, s2);
        let mut b = Big::from_u64(fract).mul_pow52(b5, b2);
        let mut m = Big::pow52(m5 + 1, m2 + 1);
        let ten_s = Big::pow52(s5 + 1, s2 + 1);
        let mut q = b.quo_rem_times_10(&s);
        let (mut lo, mut hi) = (b < m, b.add(&m) >= ten_s);
        if q == 0 && !hi {
            dec_exp -= 1;
        } else {
            digits.push(digit(q));
        }
        if e_form(dec_exp) {
            (lo, hi) = (false, false);
        }
        while !lo && !hi {
            q = b.quo_rem_times_10(&s);
            m = m.mul_small(10);
            (lo, hi) = (b < m, b.add(&m) >= ten_s);
            digits.push(digit(q));
        }
        (low, high) = (lo, hi);
        low_digit_difference = if hi && lo {
            match b.shl(1).cmp(&ten_s) {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            }
        } else {
            0
        };
    }
    if digits.is_empty() {
        // not reached for finite non-zero inputs (the first digit is only dropped when more follow)
        digits.push(b'0');
    }
    let mut d = Decimal {
        digits,
        dec_exponent: dec_exp + 1,
    };
    // the last digit is rounded according to the stopping condition
    if high {
        if !low {
            d.round_up();
        } else if low_digit_difference == 0 {
            // a tie: make the last digit even
            if d.digits.last().is_some_and(|c| c & 1 != 0) {
                d.round_up();
            }
        } else if low_digit_difference > 0 {
            d.round_up();
        }
    }
    d
}

fn digit(q: i64) -> u8 {
    b'0'.wrapping_add(q as u8)
}

fn n5_bits(p5: i32) -> i32 {
    N_5_BITS.get(p5 as usize).copied().unwrap_or(p5 * 3)
}

fn insignificant_digits_for_pow2(p2: i32) -> i32 {
    if p2 > 1 {
        INSIGNIFICANT_DIGITS.get(p2 as usize).copied().unwrap_or(0)
    } else {
        0
    }
}

/// `developLongDigits`: the digits of a positive integer, `insignificant` low digits rounded off (half up),
/// trailing zeros moved into the exponent.
fn long_digits(mut value: i64, insignificant: i32) -> Decimal {
    let mut dec_exponent = 0;
    if insignificant != 0 {
        let pow10 = LONG_5_POW[insignificant as usize] << insignificant;
        let residue = value % pow10;
        value /= pow10;
        dec_exponent += insignificant;
        if residue >= pow10 >> 1 {
            value += 1;
        }
    }
    let mut reversed = Vec::with_capacity(20);
    let mut c = value % 10;
    value /= 10;
    while c == 0 && value != 0 {
        dec_exponent += 1;
        c = value % 10;
        value /= 10;
    }
    while value != 0 {
        reversed.push(digit(c));
        dec_exponent += 1;
        c = value % 10;
        value /= 10;
    }
    reversed.push(digit(c));
    reversed.reverse();
    Decimal {
        digits: reversed,
        dec_exponent: dec_exponent + 1,
    }
}

/// `estimateDecExp`: floor(log10(value)), estimated in double arithmetic (may be one too high; dtoa corrects).
fn estimate_dec_exp(fract_bits: u64, bin_exp: i32) -> i32 {
    let d2 = f64::from_bits(EXP_ONE | (fract_bits & SIGNIF_MASK));
    let d = (d2 - 1.5) * 0.289529654 + 0.176091259 + f64::from(bin_exp) * 0.301029995663981;
    let bits = d.to_bits();
    let exponent = ((bits >> EXP_SHIFT) & 0x7ff) as i32 - 1023;
    let negative = bits >> 63 != 0;
    if (0..52).contains(&exponent) {
        let mask = SIGNIF_MASK >> exponent;
        let r = (((bits & SIGNIF_MASK) | FRACT_HOB) >> (EXP_SHIFT - exponent)) as i32;
        match (negative, mask & bits == 0) {
            (false, _) => r,
            (true, true) => -r,
            (true, false) => -r - 1,
        }
    } else if exponent < 0 {
        if bits & !(1 << 63) == 0 || !negative {
            0
        } else {
            -1
        }
    } else {
        d as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_text_as_java() {
        for (v, text) in [
            (0.1f32, "0.1"),
            (1.0e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (f32::MAX, "3.4028235E38"),
            (f32::from_bits(1), "1.4E-45"),
            (f32::MIN_POSITIVE, "1.17549435E-38"),
            (0.001, "0.001"),
            (9.99e-4, "9.99E-4"),
            (-0.0, "-0.0"),
            (100.0, "100.0"),
            (1.234_567_9e8, "1.23456792E8"),
            (1.0 / 3.0, "0.33333334"),
            (f32::NAN, "NaN"),
            (f32::INFINITY, "Infinity"),
            (f32::NEG_INFINITY, "-Infinity"),
            (1.0e-44, "9.8E-45"),
        ] {
            assert_eq!(float_to_string(v), text, "{v:e}");
        }
    }

    #[test]
    fn double_text_as_java_17() {
        for (v, text) in [
            (0.1f64, "0.1"),
            (0.1f32 as f64, "0.10000000149011612"),
            (1.0e7, "1.0E7"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::from_bits(1), "4.9E-324"),
            (0.001, "0.001"),
            (9.99e-4, "9.99E-4"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (100.0, "100.0"),
            (1.23456789e8, "1.23456789E8"),
            (0.30000000000000004, "0.30000000000000004"),
            (9_223_372_036_854_775_807.0, "9.223372036854776E18"),
            // FloatingDecimal's longer-than-shortest outputs (JDK-4511638), kept as Java 17 prints them
            (1.0e23, "9.999999999999999E22"),
            (2.82879384806159e17, "2.82879384806159008E17"),
            (2f64.powi(57), "1.44115188075855872E17"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(double_to_string(v), text, "{v:e}");
        }
    }
}
