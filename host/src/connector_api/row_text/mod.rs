//! The text Flink's `print` connector writes for a row (shared by the `print` connector and the SQL shell's
//! tables): its `RowDataPrintFunction` converts the row to an external
//! `Row` (`String`, `Float`, `BigDecimal`, `byte[]`, `LocalDateTime`, `Instant`, `Integer[]`, `HashMap`, nested
//! `Row`) and prints `Row.toString()`: `+I[v1, v2, ...]`, NULL as `null` at every depth, strings as they are.
//! Each value is written as Java writes that object; `tests/golden/vectors/print` holds Flink 1.18.1's own lines for
//! every type (checked by `tests/print/golden_print.rs`).

mod java_float;
mod java_hash_map;
mod java_time;

pub use java_float::{double_to_string, float_to_string};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;

use crate::connector_api::changelog::{self, RowKind};
use java_hash_map::{iteration_order, key_hash, timestamp_value};

/// `+I[v1, v2, ...]` for one row: its row kind (`+I`, `-U`, `+U`, `-D`; ADR 0016), then its values.
pub fn format_row(batch: &RecordBatch, row: usize) -> String {
    let kinds = changelog::kinds(batch);
    let values = batch.num_columns() - usize::from(kinds.is_some());
    let mut s = String::with_capacity(64);
    write_fields(
        &mut s,
        changelog::kind_at(kinds, row),
        batch.columns()[..values].iter().map(|c| c.as_ref()),
        row,
    );
    s
}

/// One value as `Row.toString()` writes it (`null` for NULL).
pub fn format_value(col: &ArrayRef, row: usize) -> String {
    let mut s = String::new();
    write_value(&mut s, col.as_ref(), row);
    s
}

/// `+I[...]`: a row (top level or nested ROW) is printed with its row kind (a nested ROW's is always INSERT).
fn write_fields<'a>(
    out: &mut String,
    kind: RowKind,
    columns: impl Iterator<Item = &'a dyn Array>,
    row: usize,
) {
    out.push_str(kind.short_string());
    out.push('[');
    for (i, col) in columns.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_value(out, col, row);
    }
    out.push(']');
}

fn write_value(out: &mut String, col: &dyn Array, row: usize) {
    if col.is_null(row) {
        out.push_str("null");
        return;
    }
    match col.data_type() {
        DataType::Utf8 => out.push_str(col.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => out.push_str(col.as_string::<i64>().value(row)),
        DataType::Utf8View => out.push_str(col.as_string_view().value(row)),
        DataType::Boolean => out.push_str(if col.as_boolean().value(row) {
            "true"
        } else {
            "false"
        }),
        DataType::Int8 => out.push_str(&col.as_primitive::<Int8Type>().value(row).to_string()),
        DataType::Int16 => out.push_str(&col.as_primitive::<Int16Type>().value(row).to_string()),
        DataType::Int32 => out.push_str(&col.as_primitive::<Int32Type>().value(row).to_string()),
        DataType::Int64 => out.push_str(&col.as_primitive::<Int64Type>().value(row).to_string()),
        DataType::UInt8 => out.push_str(&col.as_primitive::<UInt8Type>().value(row).to_string()),
        DataType::UInt16 => out.push_str(&col.as_primitive::<UInt16Type>().value(row).to_string()),
        DataType::UInt32 => out.push_str(&col.as_primitive::<UInt32Type>().value(row).to_string()),
        DataType::UInt64 => out.push_str(&col.as_primitive::<UInt64Type>().value(row).to_string()),
        DataType::Float32 => out.push_str(&float_to_string(
            col.as_primitive::<Float32Type>().value(row),
        )),
        DataType::Float64 => out.push_str(&double_to_string(
            col.as_primitive::<Float64Type>().value(row),
        )),
        DataType::Decimal128(_, scale) => big_decimal(
            out,
            col.as_primitive::<Decimal128Type>().value(row),
            i32::from(*scale),
        ),
        DataType::Binary => bytes(out, col.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(out, col.as_binary::<i64>().value(row)),
        DataType::BinaryView => bytes(out, col.as_binary_view().value(row)),
        DataType::FixedSizeBinary(_) => bytes(out, col.as_fixed_size_binary().value(row)),
        DataType::Date32 => {
            java_time::local_date(out, i64::from(col.as_primitive::<Date32Type>().value(row)))
        }
        DataType::Time32(unit) => {
            let v = match unit {
                TimeUnit::Second => col.as_primitive::<Time32SecondType>().value(row),
                _ => col.as_primitive::<Time32MillisecondType>().value(row),
            };
            java_time::local_time(out, java_time::nano_of_day(i64::from(v), *unit))
        }
        DataType::Time64(unit) => {
            let v = match unit {
                TimeUnit::Microsecond => col.as_primitive::<Time64MicrosecondType>().value(row),
                _ => col.as_primitive::<Time64NanosecondType>().value(row),
            };
            java_time::local_time(out, java_time::nano_of_day(v, *unit))
        }
        DataType::Timestamp(unit, tz) => {
            let (secs, nanos) = java_time::split_epoch(timestamp_value(col, row, *unit), *unit);
            // TIMESTAMP_LTZ becomes an Instant, TIMESTAMP a LocalDateTime
            if tz.is_some() {
                java_time::instant(out, secs, nanos)
            } else {
                java_time::local_date_time(out, secs, nanos)
            }
        }
        DataType::List(_) => list(out, col.as_list::<i32>().value(row).as_ref()),
        DataType::LargeList(_) => list(out, col.as_list::<i64>().value(row).as_ref()),
        DataType::FixedSizeList(_, _) => list(out, col.as_fixed_size_list().value(row).as_ref()),
        DataType::Map(_, _) => map(out, col, row),
        DataType::Struct(_) => {
            let st = col.as_struct();
            write_fields(
                out,
                RowKind::Insert,
                st.columns().iter().map(|c| c.as_ref()),
                row,
            );
        }
        _ => out.push_str(
            &arrow::util::display::array_value_to_string(col, row).unwrap_or_else(|_| "?".into()),
        ),
    }
}

/// An ARRAY (`Object[]` of the element objects): `[a, b, null]`.
fn list(out: &mut String, values: &dyn Array) {
    out.push('[');
    for i in 0..values.len() {
        if i > 0 {
            out.push_str(", ");
        }
        write_value(out, values, i);
    }
    out.push(']');
}

/// A MAP (a `java.util.HashMap`): `{k1=v1, k2=v2}` in the HashMap's iteration order.
fn map(out: &mut String, col: &dyn Array, row: usize) {
    let entries = col.as_map().value(row);
    let (keys, values) = (entries.column(0).as_ref(), entries.column(1).as_ref());
    let texts: Vec<String> = (0..entries.len())
        .map(|i| {
            let mut s = String::new();
            write_value(&mut s, keys, i);
            s
        })
        .collect();
    let hashes: Vec<Option<i32>> = (0..entries.len()).map(|i| key_hash(keys, i)).collect();
    out.push('{');
    for (n, (k, v)) in iteration_order(&hashes, &texts).into_iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(&texts[k]);
        out.push('=');
        write_value(out, values, v);
    }
    out.push('}');
}

/// `Arrays.toString(byte[])`: signed bytes, `[1, -1]`.
fn bytes(out: &mut String, b: &[u8]) {
    out.push('[');
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&(*x as i8).to_string());
    }
    out.push(']');
}

/// `BigDecimal.toString()`: plain when the scale is positive and the exponent not below -6 (`0.0001`,
/// `1.000000000000000000`), otherwise scientific (`1E-18`, `0E-18`, `1.2E+3` for a negative scale).
fn big_decimal(out: &mut String, unscaled: i128, scale: i32) {
    let coeff = unscaled.unsigned_abs().to_string();
    if unscaled < 0 {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&coeff);
        return;
    }
    let len = coeff.len() as i32;
    let adjusted = len - 1 - scale;
    if scale > 0 && adjusted >= -6 {
        if len > scale {
            let point = (len - scale) as usize;
            out.push_str(&coeff[..point]);
            out.push('.');
            out.push_str(&coeff[point..]);
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (scale - len) as usize));
            out.push_str(&coeff);
        }
    } else {
        out.push_str(&coeff[..1]);
        if len > 1 {
            out.push('.');
            out.push_str(&coeff[1..]);
        }
        if adjusted != 0 {
            out.push('E');
            if adjusted > 0 {
                out.push('+');
            }
            out.push_str(&adjusted.to_string());
        }
    }
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
            Field::new("f", DataType::Float32, true),
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
                Arc::new(Float64Array::from(vec![1.0, 1.0e7])),
                Arc::new(TimestampMillisecondArray::from(vec![0, -1]).with_timezone("UTC")),
                Arc::new(Float32Array::from(vec![0.1, f32::MAX])),
            ],
        )
        .unwrap();
        assert_eq!(
            format_row(&batch, 0),
            "+I[1, x, 2020-03-08T13:12:11.123, 1.0, 1970-01-01T00:00:00Z, 0.1]"
        );
        assert_eq!(
            format_row(&batch, 1),
            "+I[null, y, 2020-03-08T13:12, 1.0E7, 1969-12-31T23:59:59.999Z, 3.4028235E38]"
        );
    }

    #[test]
    fn changelog_rows_print_their_kind_and_not_the_kind_column() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, true),
            Field::new(
                "r",
                DataType::Struct(vec![Field::new("x", DataType::Int32, true)].into()),
                true,
            ),
        ]));
        let nested = StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int32, true)),
            Arc::new(Int32Array::from(vec![7, 8, 9, 10])) as ArrayRef,
        )]);
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3, 4])),
                Arc::new(nested),
            ],
        )
        .unwrap();
        let batch = changelog::attach(
            batch,
            changelog::kinds_array(&[
                RowKind::Insert,
                RowKind::UpdateBefore,
                RowKind::UpdateAfter,
                RowKind::Delete,
            ]),
        )
        .unwrap();
        let lines: Vec<String> = (0..4).map(|r| format_row(&batch, r)).collect();
        assert_eq!(
            lines,
            [
                "+I[1, +I[7]]",
                "-U[2, +I[8]]",
                "+U[3, +I[9]]",
                "-D[4, +I[10]]"
            ]
        );
    }

    #[test]
    fn big_decimal_text() {
        for (unscaled, scale, text) in [
            (0, 18, "0E-18"),
            (1, 18, "1E-18"),
            (-1, 18, "-1E-18"),
            (1_000_000_000_000_000_000, 18, "1.000000000000000000"),
            (0, 2, "0.00"),
            (-1, 2, "-0.01"),
            (1, 6, "0.000001"),
            (1, 7, "1E-7"),
            (123_456, 7, "0.0123456"),
            (1_234_567_890, 0, "1234567890"),
            (12, -2, "1.2E+3"),
        ] {
            let mut s = String::new();
            big_decimal(&mut s, unscaled, scale);
            assert_eq!(s, text, "{unscaled} scale {scale}");
        }
    }
}
