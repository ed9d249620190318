//! `java.time` text and hash codes of the external objects Flink's converter makes of temporal values:
//! DATE → `LocalDate`, TIME → `LocalTime`, TIMESTAMP → `LocalDateTime`, TIMESTAMP_LTZ → `Instant` (UTC).

use arrow::datatypes::TimeUnit;

const NANOS_PER_DAY: i64 = 86_400_000_000_000;

/// (year, month, day) of a day count from 1970-01-01, proleptic Gregorian (as `LocalDate.ofEpochDay`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// A value in seconds + nanoseconds (floor) from its count in `unit` since the epoch.
pub fn split_epoch(value: i64, unit: TimeUnit) -> (i64, i64) {
    let per_second = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    };
    (
        value.div_euclid(per_second),
        value.rem_euclid(per_second) * (1_000_000_000 / per_second),
    )
}

/// Nanoseconds of the day of a time-of-day count in `unit`.
pub fn nano_of_day(value: i64, unit: TimeUnit) -> i64 {
    let (secs, nanos) = split_epoch(value, unit);
    (secs * 1_000_000_000 + nanos).rem_euclid(NANOS_PER_DAY)
}

/// `LocalDate.toString()`: `yyyy-MM-dd`, at least 4 year digits, `+` above 9999.
pub fn local_date(out: &mut String, days: i64) {
    let (year, month, day) = civil_from_days(days);
    if year.abs() < 1000 {
        if year < 0 {
            out.push('-');
        }
        out.push_str(&format!("{:04}", year.abs()));
    } else {
        if year > 9999 {
            out.push('+');
        }
        out.push_str(&year.to_string());
    }
    out.push_str(&format!("-{month:02}-{day:02}"));
}

/// The fraction of `LocalTime`/`Instant` text: nothing for 0, else 3, 6 or 9 digits, whichever is exact.
fn fraction(out: &mut String, nanos: i64) {
    if nanos == 0 {
        return;
    }
    if nanos % 1_000_000 == 0 {
        out.push_str(&format!(".{:03}", nanos / 1_000_000));
    } else if nanos % 1000 == 0 {
        out.push_str(&format!(".{:06}", nanos / 1000));
    } else {
        out.push_str(&format!(".{nanos:09}"));
    }
}

/// `LocalTime.toString()`: `HH:mm`, then `:ss` and the fraction only when not zero.
pub fn local_time(out: &mut String, nano_of_day: i64) {
    let secs = nano_of_day / 1_000_000_000;
    let nanos = nano_of_day % 1_000_000_000;
    out.push_str(&format!("{:02}:{:02}", secs / 3600, secs / 60 % 60));
    if secs % 60 > 0 || nanos > 0 {
        out.push_str(&format!(":{:02}", secs % 60));
        fraction(out, nanos);
    }
}

/// `LocalDateTime.toString()`: the date, `T`, the time.
pub fn local_date_time(out: &mut String, secs: i64, nanos: i64) {
    local_date(out, secs.div_euclid(86_400));
    out.push('T');
    local_time(out, secs.rem_euclid(86_400) * 1_000_000_000 + nanos);
}

/// `Instant.toString()` (ISO_INSTANT, UTC): seconds always shown, fraction in groups of 3, `Z`.
pub fn instant(out: &mut String, secs: i64, nanos: i64) {
    local_date(out, secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    out.push_str(&format!(
        "T{:02}:{:02}:{:02}",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    ));
    fraction(out, nanos);
    out.push('Z');
}

/// `LocalDate.hashCode()`.
pub fn local_date_hash(days: i64) -> i32 {
    let (year, month, day) = civil_from_days(days);
    let (y, m, d) = (year as i32, month as i32, day as i32);
    (y & 0xFFFF_F800_u32 as i32) ^ (y.wrapping_shl(11).wrapping_add(m << 6).wrapping_add(d))
}

/// `LocalTime.hashCode()` = `Long.hashCode(toNanoOfDay())`.
pub fn local_time_hash(nano_of_day: i64) -> i32 {
    long_hash(nano_of_day)
}

/// `LocalDateTime.hashCode()`.
pub fn local_date_time_hash(secs: i64, nanos: i64) -> i32 {
    local_date_hash(secs.div_euclid(86_400))
        ^ local_time_hash(secs.rem_euclid(86_400) * 1_000_000_000 + nanos)
}

/// `Instant.hashCode()`.
pub fn instant_hash(secs: i64, nanos: i64) -> i32 {
    long_hash(secs).wrapping_add(51i32.wrapping_mul(nanos as i32))
}

/// `Long.hashCode(v)`.
pub fn long_hash(v: i64) -> i32 {
    (v ^ ((v as u64) >> 32) as i64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(f: impl FnOnce(&mut String)) -> String {
        let mut s = String::new();
        f(&mut s);
        s
    }

    #[test]
    fn java_time_text() {
        assert_eq!(text(|s| local_date(s, 0)), "1970-01-01");
        assert_eq!(text(|s| local_date(s, -719_162)), "0001-01-01");
        assert_eq!(text(|s| local_date(s, 2_932_896)), "9999-12-31");
        assert_eq!(text(|s| local_date(s, 2_932_897)), "+10000-01-01");
        assert_eq!(text(|s| local_date(s, -719_529)), "-0001-12-31");
        assert_eq!(text(|s| local_time(s, 0)), "00:00");
        assert_eq!(text(|s| local_time(s, 500_000_000)), "00:00:00.500");
        assert_eq!(
            text(|s| local_time(s, 45_296_000_001_000)),
            "12:34:56.000001"
        );
        assert_eq!(
            text(|s| local_date_time(s, -1, 999_999_999)),
            "1969-12-31T23:59:59.999999999"
        );
        assert_eq!(text(|s| instant(s, 0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            text(|s| instant(s, 60, 1_000_000)),
            "1970-01-01T00:01:00.001Z"
        );
        assert_eq!(split_epoch(-1, TimeUnit::Millisecond), (-1, 999_000_000));
    }

    #[test]
    fn java_time_hash_codes() {
        // printed by Java 17: LocalDate.of(2024, 2, 29).hashCode(), LocalTime.of(12, 34, 56).hashCode(),
        // Instant.ofEpochSecond(1, 5).hashCode(), LocalDateTime.of(2024, 2, 29, 12, 34, 56, 789000000).hashCode()
        assert_eq!(local_date_hash(19_782), 4_145_309);
        assert_eq!(local_time_hash(45_296_000_000_000), 1_274_890_546);
        assert_eq!(instant_hash(1, 5), 256);
        assert_eq!(
            local_date_time_hash(19_782 * 86_400 + 45_296, 789_000_000),
            2_067_523_311
        );
        assert_eq!(long_hash(-5), 4);
    }
}
