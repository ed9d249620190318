//! Flink duration strings (`TimeUtils.parseDuration`): a number and an optional unit; no unit means milliseconds.

use std::time::Duration;

pub fn parse(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{text}' is not a duration; write e.g. 500ms, 10s, 1min, 2h"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let d = match unit.as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Duration::from_millis(n),
        "s" | "sec" | "secs" | "second" | "seconds" => Duration::from_secs(n),
        "m" | "min" | "mins" | "minute" | "minutes" => Duration::from_secs(n.saturating_mul(60)),
        "h" | "hour" | "hours" => Duration::from_secs(n.saturating_mul(3600)),
        "d" | "day" | "days" => Duration::from_secs(n.saturating_mul(86400)),
        "us" | "µs" | "micro" | "micros" | "microsecond" | "microseconds" => {
            Duration::from_micros(n)
        }
        "ns" | "nano" | "nanos" | "nanosecond" | "nanoseconds" => Duration::from_nanos(n),
        _ => {
            return Err(format!(
                "'{text}' has an unknown time unit '{unit}'; use ms, s, min, h or d"
            ));
        }
    };
    Ok(d)
}

pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}min", ms / 60_000)
    } else if ms.is_multiple_of(1000) && ms > 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_spellings() {
        assert_eq!(parse("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse("1 min").unwrap(), Duration::from_secs(60));
        assert_eq!(parse("500").unwrap(), Duration::from_millis(500));
        assert!(parse("ten s").is_err());
        assert!(parse("5 weeks").is_err());
        assert_eq!(format(Duration::from_secs(10)), "10s");
    }
}
