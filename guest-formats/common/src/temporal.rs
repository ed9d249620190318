//! Dates and times as Flink (java.time) writes and parses them. Proleptic Gregorian calendar.

use crate::units_per_second;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
#[inline]
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The civil date of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn push2(out: &mut Vec<u8>, v: u32) {
    out.push(b'0' + (v / 10) as u8);
    out.push(b'0' + (v % 10) as u8);
}

/// `yyyy-MM-dd` (java.time: a sign and more digits outside 0000..9999).
pub fn write_date(days: i64, out: &mut Vec<u8>) {
    let (y, m, d) = civil_from_days(days);
    if (0..=9999).contains(&y) {
        let y = y as u32;
        push2(out, y / 100);
        push2(out, y % 100);
    } else if y > 9999 {
        out.extend_from_slice(format!("+{y}").as_bytes());
    } else {
        out.extend_from_slice(format!("-{:04}", -y).as_bytes());
    }
    out.push(b'-');
    push2(out, m);
    out.push(b'-');
    push2(out, d);
}

/// `HH:mm:ss` of a second of the day.
pub fn write_hms(secs: u32, out: &mut Vec<u8>) {
    push2(out, secs / 3600);
    out.push(b':');
    push2(out, secs / 60 % 60);
    out.push(b':');
    push2(out, secs % 60);
}

/// `.` and the nanoseconds with trailing zeros removed (nothing when 0), like java.time's
/// `appendFraction(NANO_OF_SECOND, 0, 9, true)`.
pub fn write_fraction_stripped(nanos: u32, out: &mut Vec<u8>) {
    if nanos == 0 {
        return;
    }
    let mut digits = [0u8; 9];
    let mut n = nanos;
    for i in (0..9).rev() {
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let mut len = 9;
    while digits[len - 1] == b'0' {
        len -= 1;
    }
    out.push(b'.');
    out.extend_from_slice(&digits[..len]);
}

/// `.` and exactly `p` digits of the nanoseconds (nothing when p = 0).
pub fn write_fraction_fixed(nanos: u32, p: u8, out: &mut Vec<u8>) {
    if p == 0 {
        return;
    }
    out.push(b'.');
    let mut div = 100_000_000;
    for _ in 0..p.min(9) {
        out.push(b'0' + (nanos / div % 10) as u8);
        div /= 10;
    }
}

/// Splits a value of precision `p` into (seconds, nanoseconds of the second).
#[inline]
pub fn split(value: i64, p: u8) -> (i64, u32) {
    let unit = units_per_second(p);
    let secs = value.div_euclid(unit);
    let sub = value.rem_euclid(unit);
    (secs, (sub * (1_000_000_000 / unit)) as u32)
}

/// Writes a timestamp: date, `sep`, `HH:mm:ss`, the fraction with trailing zeros stripped.
pub fn write_timestamp(value: i64, p: u8, sep: u8, out: &mut Vec<u8>) {
    let (secs, nanos) = split(value, p);
    write_date(secs.div_euclid(86_400), out);
    out.push(sep);
    write_hms(secs.rem_euclid(86_400) as u32, out);
    write_fraction_stripped(nanos, out);
}

/// A TIME value of precision `p` as (second of day, nanoseconds).
pub fn time_parts(value: i64, p: u8) -> (u32, u32) {
    let (secs, nanos) = split(value, p);
    (secs.rem_euclid(86_400) as u32, nanos)
}

#[inline(always)]
fn digits(s: &[u8], n: usize) -> Option<u32> {
    let d = s.get(..n)?;
    let mut v = 0u32;
    for &c in d {
        let x = c.wrapping_sub(b'0');
        if x > 9 {
            return None;
        }
        v = v * 10 + u32::from(x);
    }
    Some(v)
}

/// Parses `yyyy-MM-dd` at the start of `s`; returns the day number and the rest.
#[inline]
pub fn parse_date_prefix(s: &[u8]) -> Option<(i64, &[u8])> {
    let y = i64::from(digits(s, 4)?);
    if s.get(4) != Some(&b'-') {
        return None;
    }
    let m = digits(&s[5..], 2)?;
    if s.get(7) != Some(&b'-') {
        return None;
    }
    let d = digits(&s[8..], 2)?;
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    Some((days_from_civil(y, m, d), &s[10..]))
}

/// Parses a whole `yyyy-MM-dd`.
pub fn parse_date(s: &[u8]) -> Option<i64> {
    match parse_date_prefix(s)? {
        (d, []) => Some(d),
        _ => None,
    }
}

/// Parses `HH:mm[:ss[.f{1,9}]]` at the start of `s` (ISO_LOCAL_TIME); returns (second of day,
/// nanoseconds) and the rest.
#[inline]
pub fn parse_time_prefix(s: &[u8]) -> Option<((u32, u32), &[u8])> {
    let h = digits(s, 2)?;
    if s.get(2) != Some(&b':') {
        return None;
    }
    let mi = digits(&s[3..], 2)?;
    let mut rest = &s[5..];
    let mut sec = 0;
    let mut nanos = 0;
    if rest.first() == Some(&b':') {
        sec = digits(&rest[1..], 2)?;
        rest = &rest[3..];
        if rest.first() == Some(&b'.') {
            let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if n == 0 || n > 9 {
                return None;
            }
            nanos = digits(&rest[1..], n)? * 10u32.pow(9 - n as u32);
            rest = &rest[1 + n..];
        }
    }
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    Some(((h * 3600 + mi * 60 + sec, nanos), rest))
}

/// Parses `<date><sep><time>` at the start of `s`; returns (seconds since the epoch, nanoseconds)
/// and the rest.
#[inline]
pub fn parse_timestamp_prefix(s: &[u8], sep: u8) -> Option<((i64, u32), &[u8])> {
    let (days, rest) = parse_date_prefix(s)?;
    if rest.first() != Some(&sep) {
        return None;
    }
    let ((secs, nanos), rest) = parse_time_prefix(&rest[1..])?;
    Some(((days * 86_400 + i64::from(secs), nanos), rest))
}

/// (seconds, nanoseconds) to a value of precision `p` (extra digits truncated); `None` when it does
/// not fit in an i64.
#[inline]
pub fn to_unit(secs: i64, nanos: u32, p: u8) -> Option<i64> {
    let unit = units_per_second(p);
    secs.checked_mul(unit)?
        .checked_add(i64::from(nanos) / (1_000_000_000 / unit))
}
