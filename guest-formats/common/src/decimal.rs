//! DECIMAL(p, s) values as unscaled i128, and Java's BigDecimal text forms.

/// Parses Java BigDecimal syntax (`-12.5`, `1.2E3`, `+.5`) and rounds HALF_UP to `scale`.
/// `Ok(None)`: the value does not fit `precision` digits (Flink makes that NULL); `Err`: not a number.
pub fn parse(text: &[u8], precision: u8, scale: u8) -> Result<Option<i128>, String> {
    if let Some(v) = parse_fast(text, precision, scale) {
        return Ok(v);
    }
    let bad = || {
        format!(
            "`{}` is not a decimal number",
            String::from_utf8_lossy(text)
        )
    };
    let mut i = 0;
    let neg = match text.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let mut digits: Vec<u8> = Vec::with_capacity(40);
    let mut frac = 0i64;
    let mut seen_digit = false;
    let mut seen_point = false;
    while i < text.len() {
        let c = text[i];
        if c.is_ascii_digit() {
            seen_digit = true;
            if !(digits.is_empty() && c == b'0') {
                digits.push(c - b'0');
            }
            if seen_point {
                frac += 1;
            }
        } else if c == b'.' && !seen_point {
            seen_point = true;
        } else {
            break;
        }
        i += 1;
    }
    if !seen_digit {
        return Err(bad());
    }
    let mut exp = 0i64;
    if i < text.len() {
        if text[i] != b'e' && text[i] != b'E' {
            return Err(bad());
        }
        i += 1;
        let eneg = match text.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        if i >= text.len() {
            return Err(bad());
        }
        for &c in &text[i..] {
            if !c.is_ascii_digit() {
                return Err(bad());
            }
            exp = (exp * 10 + i64::from(c - b'0')).min(1 << 40);
        }
        if eneg {
            exp = -exp;
        }
    }
    // value = digits * 10^(exp - frac); unscaled = digits * 10^(exp - frac + scale)
    let shift = exp - frac + i64::from(scale);
    if shift >= 0 {
        if digits.is_empty() {
            return Ok(Some(0));
        }
        if digits.len() as i64 + shift > i64::from(precision) {
            return Ok(None);
        }
        digits.extend(std::iter::repeat_n(0, shift as usize));
    } else {
        let drop = (-shift) as usize;
        let round_up = if drop > digits.len() {
            false
        } else {
            digits[digits.len() - drop] >= 5
        };
        digits.truncate(digits.len().saturating_sub(drop));
        if round_up {
            let mut j = digits.len();
            loop {
                if j == 0 {
                    digits.insert(0, 1);
                    break;
                }
                j -= 1;
                if digits[j] == 9 {
                    digits[j] = 0;
                } else {
                    digits[j] += 1;
                    break;
                }
            }
        }
        while digits.first() == Some(&0) {
            digits.remove(0);
        }
        if digits.len() > usize::from(precision) {
            return Ok(None);
        }
    }
    let mut v: i128 = 0;
    for d in digits {
        v = v * 10 + i128::from(d);
    }
    Ok(Some(if neg { -v } else { v }))
}

/// `[-]digits[.digits]` with at most `scale` fraction digits and few digits: no rounding, no
/// allocation. `None`: use the general path.
#[inline]
fn parse_fast(text: &[u8], precision: u8, scale: u8) -> Option<Option<i128>> {
    let (neg, body) = match text.first()? {
        b'-' => (true, &text[1..]),
        _ => (false, text),
    };
    if body.is_empty() || body.len() > 30 {
        return None;
    }
    let mut v: i128 = 0;
    let mut frac: Option<u8> = None;
    for &c in body {
        match c {
            b'0'..=b'9' => {
                v = v * 10 + i128::from(c - b'0');
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return None,
        }
    }
    let f = frac.unwrap_or(0);
    if f > scale || body[0] == b'.' || *body.last()? == b'.' {
        return None;
    }
    let v = v * 10i128.pow(u32::from(scale - f));
    let v = if neg { -v } else { v };
    Some(fits(v, precision).then_some(v))
}

/// BigDecimal.stripTrailingZeros: (unscaled, scale) with no trailing zero digits (zero is (0, 0)).
pub fn strip(mut v: i128, mut scale: i32) -> (i128, i32) {
    if v == 0 {
        return (0, 0);
    }
    while v % 10 == 0 {
        v /= 10;
        scale -= 1;
    }
    (v, scale)
}

/// BigDecimal.toString of (unscaled, scale).
pub fn write_java(v: i128, scale: i32, out: &mut Vec<u8>) {
    let digits = v.unsigned_abs().to_string();
    let adjusted = -(scale as i64) + (digits.len() as i64 - 1);
    if scale >= 0 && adjusted >= -6 {
        write_plain(v, scale, out);
        return;
    }
    if v < 0 {
        out.push(b'-');
    }
    out.push(digits.as_bytes()[0]);
    if digits.len() > 1 {
        out.push(b'.');
        out.extend_from_slice(&digits.as_bytes()[1..]);
    }
    out.push(b'E');
    if adjusted > 0 {
        out.push(b'+');
    }
    out.extend_from_slice(adjusted.to_string().as_bytes());
}

/// BigDecimal.toPlainString of (unscaled, scale).
pub fn write_plain(v: i128, scale: i32, out: &mut Vec<u8>) {
    let digits = v.unsigned_abs().to_string();
    if v < 0 {
        out.push(b'-');
    }
    if scale <= 0 {
        out.extend_from_slice(digits.as_bytes());
        if v != 0 {
            out.extend(std::iter::repeat_n(b'0', (-scale) as usize));
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(int.as_bytes());
        out.push(b'.');
        out.extend_from_slice(frac.as_bytes());
    } else {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
        out.extend_from_slice(digits.as_bytes());
    }
}

/// Minimal two's-complement big-endian bytes of `v` (Java BigInteger.toByteArray).
pub fn to_be_bytes_min(v: i128) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 15 {
        let b = bytes[start];
        let next = bytes[start + 1];
        if (b == 0 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            start += 1;
        } else {
            break;
        }
    }
    bytes[start..].to_vec()
}

/// Two's-complement big-endian bytes to i128; `None` when longer than 16 significant bytes.
pub fn from_be_bytes(b: &[u8]) -> Option<i128> {
    if b.is_empty() {
        return Some(0);
    }
    let neg = b[0] & 0x80 != 0;
    let mut b = b;
    while b.len() > 16 && b[0] == if neg { 0xff } else { 0 } {
        b = &b[1..];
    }
    if b.len() > 16 {
        return None;
    }
    let mut buf = [if neg { 0xff } else { 0 }; 16];
    buf[16 - b.len()..].copy_from_slice(b);
    Some(i128::from_be_bytes(buf))
}

/// Whether `v` fits DECIMAL(precision, _).
pub fn fits(v: i128, precision: u8) -> bool {
    v.unsigned_abs() < 10u128.pow(u32::from(precision.min(38)))
}
