//! Tableau mode, as Flink's SQL client prints results (`sql-client.execution.result-mode` = `tableau`):
//! a box of `+`, `-` and `|`, values right-aligned, `<NULL>` for NULL, values wider than their column
//! cut with `...`. A streaming result has the row-kind column `op` first and column widths taken from the
//! types (Flink's `PrintUtils.columnWidthsByType`), so rows print as they arrive; a finished result
//! (`SHOW TABLES`, `DESCRIBE`, `SHOW JOBS`) takes its widths from its contents.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use unicode_width::UnicodeWidthStr;

/// How NULL is shown.
pub const NULL: &str = "<NULL>";
/// The row-kind column's header.
pub const ROW_KIND: &str = "op";
/// `sql-client.display.max-column-width`'s default.
pub const DEFAULT_MAX_WIDTH: usize = 30;

/// Column widths of a streaming result: the header's width, or what the type needs (numbers, dates and
/// times have a known width; anything else gets `max_width`), and `op` first.
pub fn widths_by_type(fields: &[Field], max_width: usize) -> Vec<usize> {
    let mut widths = vec![ROW_KIND.len()];
    for f in fields {
        let by_type = match f.data_type() {
            DataType::Int8 => 4,
            DataType::Int16 => 6,
            DataType::Int32 => 11,
            DataType::Int64 => 20,
            DataType::Decimal128(p, _) => usize::from(*p) + 2,
            DataType::Boolean => 5,
            DataType::Date32 => 10,
            DataType::Time32(_) | DataType::Time64(_) => match time_digits(f.data_type()) {
                0 => 8,
                d => d + 9,
            },
            DataType::Timestamp(unit, _) => match unit_digits(*unit) {
                0 => 19,
                d => d + 20,
            },
            _ => max_width,
        };
        widths.push(f.name().width().max(by_type).max(NULL.len()));
    }
    widths
}

fn unit_digits(unit: TimeUnit) -> usize {
    match unit {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 3,
        TimeUnit::Microsecond => 6,
        TimeUnit::Nanosecond => 9,
    }
}

fn time_digits(t: &DataType) -> usize {
    match t {
        DataType::Time32(u) | DataType::Time64(u) => unit_digits(*u),
        _ => 0,
    }
}

/// Column widths of a finished result: the widest header or cell of each column.
pub fn widths_by_content(headers: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.width())
                .chain([h.width()])
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// `+----+------+`
pub fn border(widths: &[usize]) -> String {
    let mut s = String::from("+");
    for w in widths {
        s.push_str(&"-".repeat(w + 2));
        s.push('+');
    }
    s
}

/// `| +I |    a |`: every cell right-aligned in its column, cut with `...` when wider.
pub fn row<S: AsRef<str>>(cells: &[S], widths: &[usize]) -> String {
    let mut s = String::from("|");
    for (cell, w) in cells.iter().zip(widths) {
        let text = fit(cell.as_ref(), *w);
        s.push(' ');
        s.push_str(&" ".repeat(w.saturating_sub(text.width())));
        s.push_str(&text);
        s.push_str(" |");
    }
    s
}

/// `text` cut to `width` columns, ending with `...` when cut (as Flink's `EncodingUtils` does).
fn fit(text: &str, width: usize) -> String {
    // A line break inside a value would break the box.
    let text = text.replace(['\n', '\r'], " ");
    if text.width() <= width {
        return text;
    }
    let keep = width.saturating_sub(3);
    let mut out = String::new();
    for c in text.chars() {
        let next = format!("{out}{c}");
        if next.width() > keep {
            break;
        }
        out = next;
    }
    out.push_str(&"...".chars().take(width.min(3)).collect::<String>());
    out
}

/// A finished result: header, rows and the `N rows in set` line (`Empty set` without rows).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    if rows.is_empty() {
        return "Empty set\n".to_string();
    }
    let widths = widths_by_content(headers, rows);
    let line = border(&widths);
    let mut s = format!("{line}\n{}\n{line}\n", row(headers, &widths));
    for r in rows {
        s.push_str(&row(r, &widths));
        s.push('\n');
    }
    s.push_str(&line);
    s.push('\n');
    s.push_str(&format!(
        "{} row{} in set\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    ));
    s
}

/// One value as the tableau shows it: as `CAST(v AS STRING)` writes it (`TRUE`, `2020-03-08
/// 13:12:11.123`, `x'0aff'`), nested values and numbers as the `print` connector writes them, NULL as
/// `<NULL>`.
pub fn value(col: &ArrayRef, row: usize) -> String {
    if col.is_null(row) {
        return NULL.to_string();
    }
    match col.data_type() {
        DataType::Boolean => if col.as_boolean().value(row) {
            "TRUE"
        } else {
            "FALSE"
        }
        .to_string(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => {
            let bytes: &[u8] = match col.data_type() {
                DataType::Binary => col.as_binary::<i32>().value(row),
                DataType::LargeBinary => col.as_binary::<i64>().value(row),
                DataType::BinaryView => col.as_binary_view().value(row),
                _ => col.as_fixed_size_binary().value(row),
            };
            format!("x'{}'", hex::encode(bytes))
        }
        DataType::Timestamp(unit, _) => {
            let fmt = match unit_digits(*unit) {
                0 => "%Y-%m-%d %H:%M:%S",
                3 => "%Y-%m-%d %H:%M:%S%.3f",
                6 => "%Y-%m-%d %H:%M:%S%.6f",
                _ => "%Y-%m-%d %H:%M:%S%.9f",
            };
            let options = FormatOptions::default()
                .with_timestamp_format(Some(fmt))
                .with_timestamp_tz_format(Some(fmt));
            ArrayFormatter::try_new(col.as_ref(), &options)
                .map(|f| f.value(row).to_string())
                .unwrap_or_else(|_| crate::connector_api::row_text::format_value(col, row))
        }
        _ => crate::connector_api::row_text::format_value(col, row),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Int32Array, StringArray, TimestampMillisecondArray};

    use super::*;

    #[test]
    fn a_streaming_result_as_flink_prints_it() {
        let fields = vec![
            Field::new("id", DataType::Int32, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ];
        let widths = widths_by_type(&fields, DEFAULT_MAX_WIDTH);
        assert_eq!(widths, vec![2, 11, 30, 6, 23]);
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(1), None])),
            Arc::new(StringArray::from(vec![
                Some("Alice"),
                Some(&"x".repeat(40)[..]),
            ])),
            Arc::new(BooleanArray::from(vec![Some(true), Some(false)])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(1_583_673_131_123),
                None,
            ])),
        ];
        let cells = |r: usize| -> Vec<String> {
            std::iter::once("+I".to_string())
                .chain(cols.iter().map(|c| value(c, r)))
                .collect()
        };
        assert_eq!(
            border(&widths),
            "+----+-------------+--------------------------------+--------+-------------------------+"
        );
        assert_eq!(
            row(&cells(0), &widths),
            "| +I |           1 |                          Alice |   TRUE | 2020-03-08 13:12:11.123 |"
        );
        assert_eq!(
            row(&cells(1), &widths),
            format!(
                "| +I |      <NULL> | {}... |  FALSE |                  <NULL> |",
                "x".repeat(27)
            )
        );
    }

    #[test]
    fn a_finished_result_fits_its_contents() {
        let t = table(
            &["table name"],
            &[vec!["orders".into()], vec!["payments".into()]],
        );
        assert_eq!(
            t,
            "+------------+\n| table name |\n+------------+\n|     orders |\n|   payments |\n+------------+\n2 rows in set\n"
        );
        assert_eq!(table(&["x"], &[]), "Empty set\n");
        assert_eq!(fit("日本語テキスト", 8), "日本...");
    }
}
