//! Flink's textual row format (`Row.toString()` of the print connector).

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, TimeUnit, *};
use arrow::record_batch::RecordBatch;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime};

/// `+I[v1, v2, ...]` for one row.
pub fn format_row(batch: &RecordBatch, row: usize) -> String {
    let mut s = String::from("+I[");
    for (i, col) in batch.columns().iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&format_value(col, row));
    }
    s.push(']');
    s
}

/// Java `LocalDateTime.toString()`: seconds and fraction only when non-zero, fraction in groups of 3 digits.
fn java_time_fraction(nanos: u32, secs: u32, out: &mut String) {
    if secs == 0 && nanos == 0 {
        return;
    }
    out.push_str(&format!(":{secs:02}"));
    if nanos > 0 {
        if nanos.is_multiple_of(1_000_000) {
            out.push_str(&format!(".{:03}", nanos / 1_000_000));
        } else if nanos.is_multiple_of(1000) {
            out.push_str(&format!(".{:06}", nanos / 1000));
        } else {
            out.push_str(&format!(".{nanos:09}"));
        }
    }
}

fn local_date_time(dt: NaiveDateTime) -> String {
    use chrono::Timelike;
    let mut s = dt.format("%Y-%m-%dT%H:%M").to_string();
    java_time_fraction(dt.nanosecond(), dt.second(), &mut s);
    s
}

fn local_time(t: NaiveTime) -> String {
    use chrono::Timelike;
    let mut s = t.format("%H:%M").to_string();
    java_time_fraction(t.nanosecond(), t.second(), &mut s);
    s
}

/// Java `Double.toString` for ordinary magnitudes (`1.0`, `0.5`), Rust's shortest form otherwise.
fn java_double(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn timestamp(unit: &TimeUnit, v: i64) -> Option<NaiveDateTime> {
    let dt = match unit {
        TimeUnit::Second => DateTime::from_timestamp(v, 0),
        TimeUnit::Millisecond => DateTime::from_timestamp_millis(v),
        TimeUnit::Microsecond => DateTime::from_timestamp_micros(v),
        TimeUnit::Nanosecond => Some(DateTime::from_timestamp_nanos(v)),
    };
    dt.map(|d| d.naive_utc())
}

/// One value in Flink's notation (`null` for NULL).
pub fn format_value(col: &ArrayRef, row: usize) -> String {
    if col.is_null(row) {
        return "null".into();
    }
    match col.data_type() {
        DataType::Utf8 => col.as_string::<i32>().value(row).to_string(),
        DataType::LargeUtf8 => col.as_string::<i64>().value(row).to_string(),
        DataType::Utf8View => col.as_string_view().value(row).to_string(),
        DataType::Boolean => col.as_boolean().value(row).to_string(),
        DataType::Int8 => col.as_primitive::<Int8Type>().value(row).to_string(),
        DataType::Int16 => col.as_primitive::<Int16Type>().value(row).to_string(),
        DataType::Int32 => col.as_primitive::<Int32Type>().value(row).to_string(),
        DataType::Int64 => col.as_primitive::<Int64Type>().value(row).to_string(),
        DataType::UInt8 => col.as_primitive::<UInt8Type>().value(row).to_string(),
        DataType::UInt16 => col.as_primitive::<UInt16Type>().value(row).to_string(),
        DataType::UInt32 => col.as_primitive::<UInt32Type>().value(row).to_string(),
        DataType::UInt64 => col.as_primitive::<UInt64Type>().value(row).to_string(),
        DataType::Float32 => java_double(col.as_primitive::<Float32Type>().value(row) as f64),
        DataType::Float64 => java_double(col.as_primitive::<Float64Type>().value(row)),
        DataType::Decimal128(_, s) => {
            let v = col.as_primitive::<Decimal128Type>().value(row);
            Decimal128Type::format_decimal(v, 38, *s)
        }
        DataType::Binary => bytes(col.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(col.as_binary::<i64>().value(row)),
        DataType::BinaryView => bytes(col.as_binary_view().value(row)),
        DataType::Date32 => {
            let d = col.as_primitive::<Date32Type>().value(row);
            NaiveDate::from_num_days_from_ce_opt(d + 719_163)
                .map(|d| d.to_string())
                .unwrap_or_else(|| d.to_string())
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            let v = col.as_primitive::<Time32MillisecondType>().value(row);
            NaiveTime::from_num_seconds_from_midnight_opt(
                (v / 1000) as u32,
                ((v % 1000) * 1_000_000) as u32,
            )
            .map(local_time)
            .unwrap_or_default()
        }
        DataType::Time64(unit) => {
            let ns = match unit {
                TimeUnit::Microsecond => {
                    col.as_primitive::<Time64MicrosecondType>().value(row) * 1000
                }
                _ => col.as_primitive::<Time64NanosecondType>().value(row),
            };
            NaiveTime::from_num_seconds_from_midnight_opt(
                (ns / 1_000_000_000) as u32,
                (ns % 1_000_000_000) as u32,
            )
            .map(local_time)
            .unwrap_or_default()
        }
        DataType::Timestamp(unit, tz) => {
            let v = match unit {
                TimeUnit::Second => col.as_primitive::<TimestampSecondType>().value(row),
                TimeUnit::Millisecond => col.as_primitive::<TimestampMillisecondType>().value(row),
                TimeUnit::Microsecond => col.as_primitive::<TimestampMicrosecondType>().value(row),
                TimeUnit::Nanosecond => col.as_primitive::<TimestampNanosecondType>().value(row),
            };
            match timestamp(unit, v) {
                // TIMESTAMP_LTZ prints as a Java Instant (UTC, `Z`).
                Some(dt) if tz.is_some() => format!("{}Z", local_date_time(dt)),
                Some(dt) => local_date_time(dt),
                None => v.to_string(),
            }
        }
        DataType::List(_) => {
            let l = col.as_list::<i32>();
            let values = l.value(row);
            let items: Vec<String> = (0..values.len())
                .map(|i| format_value(&values, i))
                .collect();
            format!("[{}]", items.join(", "))
        }
        DataType::Map(_, _) => {
            let m = col.as_map();
            let entries = m.value(row);
            let (k, v) = (entries.column(0).clone(), entries.column(1).clone());
            let items: Vec<String> = (0..entries.len())
                .map(|i| format!("{}={}", format_value(&k, i), format_value(&v, i)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        DataType::Struct(_) => {
            let st = col.as_struct();
            let items: Vec<String> = st.columns().iter().map(|c| format_value(c, row)).collect();
            format!("+I[{}]", items.join(", "))
        }
        _ => arrow::util::display::array_value_to_string(col, row).unwrap_or_else(|_| "?".into()),
    }
}

/// Java `Arrays.toString(byte[])`: signed bytes.
fn bytes(b: &[u8]) -> String {
    let items: Vec<String> = b.iter().map(|x| (*x as i8).to_string()).collect();
    format!("[{}]", items.join(", "))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::*;
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn flink_row_format() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("d", DataType::Float64, true),
            Field::new(
                "e",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(StringArray::from(vec![Some("x"), Some("y")])),
                Arc::new(TimestampMillisecondArray::from(vec![
                    1_583_673_131_123,
                    1_583_673_120_000,
                ])),
                Arc::new(Float64Array::from(vec![1.0, 0.25])),
                Arc::new(TimestampMillisecondArray::from(vec![0, 0]).with_timezone("UTC")),
            ],
        )
        .unwrap();
        assert_eq!(
            format_row(&batch, 0),
            "+I[1, x, 2020-03-08T13:12:11.123, 1.0, 1970-01-01T00:00Z]"
        );
        assert_eq!(
            format_row(&batch, 1),
            "+I[null, y, 2020-03-08T13:12, 0.25, 1970-01-01T00:00Z]"
        );
    }
}
