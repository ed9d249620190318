//! Java's `Double.toString` / `Float.toString` (what Jackson writes for FLOAT/DOUBLE).
//!
//! Uses the shortest digits that round-trip, with Java's rule of at least two significant digits
//! choosing the closest two-digit decimal (`4.9E-324`, not `5.0E-324`). Java 17's older algorithm
//! occasionally prints one digit more than needed (`Float.MIN_NORMAL` as `1.17549435E-38`); those
//! cases print the shortest form here.

fn digits_exp(sci: &str) -> (bool, Vec<u8>, i32) {
    // sci: "-1.2345e-7" (Rust LowerExp)
    let (neg, s) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    (neg, digits, exp.parse().unwrap_or(0))
}

fn write(neg: bool, mut digits: Vec<u8>, exp: i32, out: &mut Vec<u8>) {
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if neg {
        out.push(b'-');
    }
    if (-3..7).contains(&exp) {
        if exp < 0 {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.extend_from_slice(&digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        }
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        out.extend_from_slice(exp.to_string().as_bytes());
    }
}

/// Appends Java's `Double.toString(v)`.
pub fn write_f64(v: f64, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
    } else {
        let (neg, mut digits, mut exp) = digits_exp(&format!("{v:e}"));
        if digits.len() == 1 {
            let two = format!("{v:.1e}");
            if two.parse::<f64>() == Ok(v) {
                (_, digits, exp) = digits_exp(&two);
            }
        }
        write(neg, digits, exp, out);
    }
}

/// Appends Java's `Float.toString(v)`.
pub fn write_f32(v: f32, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
    } else {
        let (neg, mut digits, mut exp) = digits_exp(&format!("{v:e}"));
        if digits.len() == 1 {
            let two = format!("{v:.1e}");
            if two.parse::<f32>() == Ok(v) {
                (_, digits, exp) = digits_exp(&two);
            }
        }
        write(neg, digits, exp, out);
    }
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
