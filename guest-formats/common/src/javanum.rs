//! Java's `Double.toString` / `Float.toString` (what Jackson writes for FLOAT/DOUBLE), exactly as Java
//! 17 prints them: a port of `jdk.internal.math.FloatingDecimal`'s `dtoa` (the pre-JDK-19 algorithm,
//! which sometimes prints a digit more than the shortest round-trip text, e.g. `Float.MIN_NORMAL` as
//! `1.17549435E-38`). Checked against Java 17 output in tests/java_tostring.rs.

const EXP_SHIFT: i32 = 52;
const FRACT_HOB: u64 = 1 << 52;

/// Little-endian base-2^32 unsigned big integer, just enough for `dtoa`.
#[derive(Clone, Debug)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.len() > 1 && *self.0.last().unwrap_or(&1) == 0 {
            self.0.pop();
        }
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for w in &mut self.0 {
            let v = u64::from(*w) * u64::from(m) + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn shl(&mut self, n: i32) {
        if n <= 0 {
            return;
        }
        let (words, bits) = ((n / 32) as usize, n % 32);
        if bits > 0 {
            let mut carry = 0u32;
            for w in &mut self.0 {
                let v = (*w << bits) | carry;
                carry = *w >> (32 - bits);
                *w = v;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        if words > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, words));
        }
        self.trim();
    }

    /// v * 5^p5 * 2^p2.
    fn pow52(v: u64, p5: i32, p2: i32) -> Big {
        let mut b = Big::from_u64(v);
        for _ in 0..p5 {
            b.mul_small(5);
        }
        b.shl(p2);
        b
    }

    fn cmp(&self, o: &Big) -> std::cmp::Ordering {
        let (a, b) = (&self.0, &o.0);
        if a.len() != b.len() {
            return a.len().cmp(&b.len());
        }
        for i in (0..a.len()).rev() {
            if a[i] != b[i] {
                return a[i].cmp(&b[i]);
            }
        }
        std::cmp::Ordering::Equal
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = u64::from(*self.0.get(i).unwrap_or(&0))
                + u64::from(*o.0.get(i).unwrap_or(&0))
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    fn sub_assign(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = i64::from(self.0[i]) - i64::from(*o.0.get(i).unwrap_or(&0)) - borrow;
            if v < 0 {
                self.0[i] = (v + (1i64 << 32)) as u32;
                borrow = 1;
            } else {
                self.0[i] = v as u32;
                borrow = 0;
            }
        }
        self.trim();
    }

    /// q = self / s (q < 10), self = (self % s) * 10.
    fn quo_rem_iteration(&mut self, s: &Big) -> u32 {
        let mut q = 0;
        while self.cmp(s) != std::cmp::Ordering::Less {
            self.sub_assign(s);
            q += 1;
        }
        self.mul_small(10);
        self.trim();
        q
    }
}

const SMALL_5_POW: [i64; 27] = {
    let mut t = [1i64; 27];
    let mut i = 1;
    while i < 27 {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
};

/// Bits needed for 5^i (FloatingDecimal's N_5_BITS).
fn n5bits(i: i32) -> i32 {
    if i < 0 {
        return 0;
    }
    // ceil(i * log2(5)), as Java's table; 0 for i = 0.
    ((i as f64) * 5f64.log2()).ceil() as i32
}

fn insignificant_digits_for_pow2(p2: i32) -> i32 {
    if p2 > 1 && p2 < 64 {
        ((p2 as f64) * std::f64::consts::LOG10_2).floor() as i32
    } else {
        0
    }
}

// Java's constants, not Rust's (LOG10_2 differs in the last bits).
#[allow(clippy::approx_constant)]
fn estimate_dec_exp(fract_bits: u64, bin_exp: i32) -> i32 {
    let d2 = f64::from_bits(0x3FF0_0000_0000_0000 | (fract_bits & 0x000F_FFFF_FFFF_FFFF));
    let d = (d2 - 1.5) * 0.289529654 + 0.176091259 + f64::from(bin_exp) * 0.301029995663981;
    d.floor() as i32
}

/// Decimal digits and the decimal exponent (value = 0.d1d2… × 10^dec_exponent).
struct Digits {
    digits: Vec<u8>,
    dec_exponent: i32,
}

fn develop_long_digits(mut dec_exponent: i32, mut lvalue: u64, insignificant: i32) -> Digits {
    if insignificant != 0 {
        let pow10 = 10u64.pow(insignificant as u32);
        let residue = lvalue % pow10;
        lvalue /= pow10;
        dec_exponent += insignificant;
        if residue >= (pow10 >> 1) {
            lvalue += 1;
        }
    }
    let mut digits = Vec::new();
    let mut c = lvalue % 10;
    lvalue /= 10;
    while c == 0 {
        dec_exponent += 1;
        c = lvalue % 10;
        lvalue /= 10;
    }
    while lvalue != 0 {
        digits.push(b'0' + c as u8);
        dec_exponent += 1;
        c = lvalue % 10;
        lvalue /= 10;
    }
    digits.push(b'0' + c as u8);
    digits.reverse();
    Digits {
        digits,
        dec_exponent: dec_exponent + 1,
    }
}

fn roundup(d: &mut Digits) {
    let mut i = d.digits.len() - 1;
    let mut q = d.digits[i];
    if q == b'9' {
        while q == b'9' && i > 0 {
            d.digits[i] = b'0';
            i -= 1;
            q = d.digits[i];
        }
        if q == b'9' {
            d.dec_exponent += 1;
            d.digits[0] = b'1';
            return;
        }
    }
    d.digits[i] = q + 1;
}

/// FloatingDecimal.BinaryToASCIIBuffer.dtoa (isCompatibleFormat = true).
fn dtoa(bin_exp: i32, mut fract_bits: u64, n_significant_bits: i32) -> Digits {
    let tail_zeros = fract_bits.trailing_zeros() as i32;
    let n_fract_bits = EXP_SHIFT + 1 - tail_zeros;
    let n_tiny_bits = (n_fract_bits - bin_exp - 1).max(0);
    if (-59..=62).contains(&bin_exp)
        && n_tiny_bits < 27
        && n_fract_bits + n5bits(n_tiny_bits) < 64
        && n_tiny_bits == 0
    {
        let insignificant = if bin_exp > n_significant_bits {
            insignificant_digits_for_pow2(bin_exp - n_significant_bits - 1)
        } else {
            0
        };
        if bin_exp >= EXP_SHIFT {
            fract_bits <<= bin_exp - EXP_SHIFT;
        } else {
            fract_bits >>= EXP_SHIFT - bin_exp;
        }
        return develop_long_digits(0, fract_bits, insignificant);
    }
    let mut dec_exp = estimate_dec_exp(fract_bits, bin_exp);
    let b5 = (-dec_exp).max(0);
    let mut b2 = b5 + n_tiny_bits + bin_exp;
    let s5 = dec_exp.max(0);
    let mut s2 = s5 + n_tiny_bits;
    let m5 = b5;
    let mut m2 = b2 - n_significant_bits;

    fract_bits >>= tail_zeros;
    b2 -= n_fract_bits - 1;
    let common2 = b2.min(s2);
    b2 -= common2;
    s2 -= common2;
    m2 -= common2;
    if n_fract_bits == 1 {
        m2 -= 1;
    }
    if m2 < 0 {
        b2 -= m2;
        s2 -= m2;
        m2 = 0;
    }

    let mut digits: Vec<u8> = Vec::with_capacity(20);
    let (low, high, low_digit_difference);
    let bbits = n_fract_bits + b2 + if b5 < 27 { n5bits(b5) } else { b5 * 3 };
    let ten_sbits = s2
        + 1
        + if s5 + 1 < 27 {
            n5bits(s5 + 1)
        } else {
            (s5 + 1) * 3
        };
    if bbits < 64 && ten_sbits < 64 {
        if bbits < 32 && ten_sbits < 32 {
            let mut b: i32 =
                (fract_bits as i32).wrapping_mul(SMALL_5_POW[b5 as usize] as i32) << b2;
            let s: i32 = (SMALL_5_POW[s5 as usize] as i32) << s2;
            let mut m: i32 = (SMALL_5_POW[m5 as usize] as i32) << m2;
            let tens = s.wrapping_mul(10);
            let mut q = b / s;
            b = 10 * (b % s);
            m = m.wrapping_mul(10);
            let mut lo = b < m;
            let mut hi = b.wrapping_add(m) > tens;
            if q == 0 && !hi {
                dec_exp -= 1;
            } else {
                digits.push(b'0' + q as u8);
            }
            if !(-3..8).contains(&dec_exp) {
                hi = false;
                lo = false;
            }
            while !lo && !hi {
                q = b / s;
                b = 10 * (b % s);
                m = m.wrapping_mul(10);
                if m > 0 {
                    lo = b < m;
                    hi = b.wrapping_add(m) > tens;
                } else {
                    lo = true;
                    hi = true;
                }
                digits.push(b'0' + q as u8);
            }
            low_digit_difference = i64::from((b << 1).wrapping_sub(tens));
            low = lo;
            high = hi;
        } else {
            let mut b: i64 = (fract_bits as i64).wrapping_mul(SMALL_5_POW[b5 as usize]) << b2;
            let s: i64 = SMALL_5_POW[s5 as usize] << s2;
            let mut m: i64 = SMALL_5_POW[m5 as usize] << m2;
            let tens = s.wrapping_mul(10);
            let mut q = b / s;
            b = 10 * (b % s);
            m = m.wrapping_mul(10);
            let mut lo = b < m;
            let mut hi = b.wrapping_add(m) > tens;
            if q == 0 && !hi {
                dec_exp -= 1;
            } else {
                digits.push(b'0' + q as u8);
            }
            if !(-3..8).contains(&dec_exp) {
                hi = false;
                lo = false;
            }
            while !lo && !hi {
                q = b / s;
                b = 10 * (b % s);
                m = m.wrapping_mul(10);
                if m > 0 {
                    lo = b < m;
                    hi = b.wrapping_add(m) > tens;
                } else {
                    lo = true;
                    hi = true;
                }
                digits.push(b'0' + q as u8);
            }
            low_digit_difference = (b << 1).wrapping_sub(tens);
            low = lo;
            high = hi;
        }
    } else {
        let s = Big::pow52(1, s5, s2);
        let mut b = Big::pow52(fract_bits, b5, b2);
        let mut m = Big::pow52(1, m5 + 1, m2 + 1);
        let ten_s = Big::pow52(1, s5 + 1, s2 + 1);
        let q = b.quo_rem_iteration(&s);
        let mut lo = b.cmp(&m) == std::cmp::Ordering::Less;
        let mut hi = ten_s.cmp(&b.add(&m)) != std::cmp::Ordering::Greater;
        if q == 0 && !hi {
            dec_exp -= 1;
        } else {
            digits.push(b'0' + q as u8);
        }
        if !(-3..8).contains(&dec_exp) {
            hi = false;
            lo = false;
        }
        while !lo && !hi {
            let q = b.quo_rem_iteration(&s);
            m.mul_small(10);
            lo = b.cmp(&m) == std::cmp::Ordering::Less;
            hi = ten_s.cmp(&b.add(&m)) != std::cmp::Ordering::Greater;
            digits.push(b'0' + q as u8);
        }
        low_digit_difference = if hi && lo {
            let mut b2x = b.clone();
            b2x.shl(1);
            match b2x.cmp(&ten_s) {
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
            }
        } else {
            0
        };
        low = lo;
        high = hi;
    }
    let mut d = Digits {
        digits,
        dec_exponent: dec_exp + 1,
    };
    if high {
        if low {
            if low_digit_difference == 0 {
                if d.digits.last().is_some_and(|c| c & 1 != 0) {
                    roundup(&mut d);
                }
            } else if low_digit_difference > 0 {
                roundup(&mut d);
            }
        } else {
            roundup(&mut d);
        }
    }
    d
}

/// FloatingDecimal.getChars: the Java text of the digits.
fn write_digits(neg: bool, d: &Digits, out: &mut Vec<u8>) {
    if neg {
        out.push(b'-');
    }
    let (digits, e) = (&d.digits[..], d.dec_exponent);
    let n = digits.len() as i32;
    if e > 0 && e < 8 {
        let int_len = n.min(e) as usize;
        out.extend_from_slice(&digits[..int_len]);
        if (int_len as i32) < e {
            out.extend(std::iter::repeat_n(b'0', (e - int_len as i32) as usize));
            out.extend_from_slice(b".0");
        } else {
            out.push(b'.');
            if (int_len as i32) < n {
                out.extend_from_slice(&digits[int_len..]);
            } else {
                out.push(b'0');
            }
        }
    } else if e <= 0 && e > -3 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-e) as usize));
        out.extend_from_slice(digits);
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if n > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        let exp = if e <= 0 { -(-e + 1) } else { e - 1 };
        out.extend_from_slice(exp.to_string().as_bytes());
    }
}

fn special(neg: bool, nan: bool, inf: bool, zero: bool, out: &mut Vec<u8>) -> bool {
    if nan {
        out.extend_from_slice(b"NaN");
    } else if inf {
        out.extend_from_slice(if neg { b"-Infinity" } else { b"Infinity" });
    } else if zero {
        out.extend_from_slice(if neg { b"-0.0" } else { b"0.0" });
    } else {
        return false;
    }
    true
}

/// Java's `Long.toString`: the decimal text of an integer (what Jackson and Flink's csv write for
/// TINYINT..BIGINT).
#[inline]
pub fn write_i64(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends Java's `Double.toString(v)`.
pub fn write_f64(v: f64, out: &mut Vec<u8>) {
    let bits = v.to_bits();
    let neg = bits >> 63 != 0;
    if special(neg, v.is_nan(), v.is_infinite(), v == 0.0, out) {
        return;
    }
    let mut fract = bits & 0x000F_FFFF_FFFF_FFFF;
    let mut bin_exp = ((bits >> 52) & 0x7ff) as i32;
    let n_significant_bits;
    if bin_exp == 0 {
        let leading = fract.leading_zeros() as i32;
        let shift = leading - (63 - EXP_SHIFT);
        fract <<= shift;
        bin_exp = 1 - shift;
        n_significant_bits = 64 - leading;
    } else {
        fract |= FRACT_HOB;
        n_significant_bits = EXP_SHIFT + 1;
    }
    bin_exp -= 1023;
    let d = dtoa(bin_exp, fract, n_significant_bits);
    write_digits(neg, &d, out);
}

/// Appends Java's `Float.toString(v)`.
pub fn write_f32(v: f32, out: &mut Vec<u8>) {
    let bits = v.to_bits();
    let neg = bits >> 31 != 0;
    if special(neg, v.is_nan(), v.is_infinite(), v == 0.0, out) {
        return;
    }
    let mut fract = bits & 0x007F_FFFF;
    let mut bin_exp = ((bits >> 23) & 0xff) as i32;
    let n_significant_bits;
    if bin_exp == 0 {
        let leading = fract.leading_zeros() as i32;
        let shift = leading - (31 - 23);
        fract <<= shift;
        bin_exp = 1 - shift;
        n_significant_bits = 32 - leading;
    } else {
        fract |= 1 << 23;
        n_significant_bits = 24;
    }
    bin_exp -= 127;
    let d = dtoa(
        bin_exp,
        u64::from(fract) << (EXP_SHIFT - 23),
        n_significant_bits,
    );
    write_digits(neg, &d, out);
}

/// Java's `Double.parseDouble` for the usual forms (`NaN`, `Infinity`, surrounding whitespace).
pub fn parse_f64(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    if body.eq_ignore_ascii_case("nan")
        || body.eq_ignore_ascii_case("inf")
        || body.eq_ignore_ascii_case("infinity")
    {
        return match body {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(if t.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
            _ => None,
        };
    }
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(t);
    t.parse().ok()
}

/// Java's `Float.parseFloat`.
pub fn parse_f32(s: &str) -> Option<f32> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    if body.eq_ignore_ascii_case("nan")
        || body.eq_ignore_ascii_case("inf")
        || body.eq_ignore_ascii_case("infinity")
    {
        return match body {
            "NaN" => Some(f32::NAN),
            "Infinity" => Some(if t.starts_with('-') {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            }),
            _ => None,
        };
    }
    let t = t.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(t);
    t.parse().ok()
}

#[cfg(test)]
mod long_tests {
    use super::write_i64;

    #[test]
    fn longs_print_as_java_long_to_string() {
        for v in [0, 7, -7, 10, -1_000, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            write_i64(v, &mut out);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
        }
    }
}
