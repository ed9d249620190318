//! The `print` connector's text against Flink 1.18.1's own print connector (`tests/golden/vectors/print`, written
//! by a real `INSERT INTO` a `'connector' = 'print'` table, see tests/golden/README.md).
//!
//! - every row of the all-types table: the columns get the Arrow types the host gives them (a `CREATE TABLE ...
//!   WITH ('connector' = 'print')` through the host's SQL parser and catalog), the values of `table.json` are put
//!   into such arrays, and each row printed by the connector's formatter must equal Flink's line; every column is
//!   compared too, so a failure names the column;
//! - FLOAT / DOUBLE edge values (given by their bits) and 7114 `Float.toString` / `Double.toString` samples;
//! - the `print-identifier` prefix.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array,
    Int8Array, Int16Array, Int32Array, Int64Array, ListArray, MapArray, RecordBatch, StringArray,
    StructArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray,
    Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use pulsar_connect::connector_api::column_field;
use pulsar_connect::connector_api::row_text::{
    double_to_string, float_to_string, format_row, format_value,
};
use pulsar_connect::connectors::print::line_prefix;
use pulsar_connect::sql::{Statement, parse_script};
use pulsar_connect_tests::guests::repo_root;
use serde_json::Value as Json;

/// Cells of the all-types table the host's Arrow types cannot hold, so they cannot reach the print connector:
/// (row name, column, why). Every other cell is compared.
const NOT_REPRESENTABLE: &[(&str, &str, &str)] = &[
    ("max-values", "c_ts_9", TS9_RANGE),
    ("min-values", "c_ts_9", TS9_RANGE),
    ("old-dates", "c_ts_9", TS9_RANGE),
    ("far-future", "c_ts_9", TS9_RANGE),
    (
        "map-null-key",
        "c_map_string_int",
        "a NULL map key: Arrow map keys are non-nullable",
    ),
];

const TS9_RANGE: &str = "TIMESTAMP(9) is Arrow Timestamp(ns) in the host: i64 nanoseconds reach only \
                         1677-09-21T00:12:43.145224192 ..= 2262-04-11T23:47:16.854775807";

fn vectors(rel: &str) -> Json {
    let path = repo_root().join("tests/golden/vectors").join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn columns(file: &Json) -> Vec<(String, String)> {
    pulsar_connect_tests::vector_columns(file)
}

/// The Arrow schema the host gives a print table with these Flink columns.
fn schema_of(columns: &[(String, String)]) -> SchemaRef {
    let cols: Vec<String> = columns.iter().map(|(n, t)| format!("`{n}` {t}")).collect();
    let ddl = format!(
        "CREATE TABLE p ({}) WITH ('connector' = 'print');",
        cols.join(", ")
    );
    let statements = parse_script(&ddl).unwrap_or_else(|e| panic!("{ddl}\n{e:?}"));
    let Some(Statement::CreateTable(t)) = statements.first() else {
        panic!("{ddl}: not a CREATE TABLE");
    };
    Arc::new(Schema::new(
        t.columns.iter().map(column_field).collect::<Vec<Field>>(),
    ))
}

fn text<'a>(v: &'a Json, what: &str) -> Result<&'a str, String> {
    v.as_str()
        .ok_or_else(|| format!("{what}: expected a string, found {v}"))
}

fn nulls(values: &[&Json]) -> Option<NullBuffer> {
    let valid: Vec<bool> = values.iter().map(|v| !v.is_null()).collect();
    valid.contains(&false).then(|| NullBuffer::from(valid))
}

/// `f(v)` for each non-null value.
fn each<T>(
    values: &[&Json],
    f: impl Fn(&Json) -> Result<T, String>,
) -> Result<Vec<Option<T>>, String> {
    values
        .iter()
        .map(|v| {
            if v.is_null() {
                Ok(None)
            } else {
                f(v).map(Some)
            }
        })
        .collect()
}

fn int(v: &Json) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| format!("not an integer: {v}"))
}

/// FLOAT/DOUBLE in the table encoding: a JSON number, or "NaN" / "Infinity" / "-Infinity" / "-0.0".
fn float_text(v: &Json) -> Result<String, String> {
    match v {
        Json::String(s) => Ok(s.clone()),
        Json::Number(n) => Ok(n.to_string()),
        _ => Err(format!("not a float: {v}")),
    }
}

fn decimal(v: &Json, scale: i8) -> Result<i128, String> {
    let s = text(v, "DECIMAL")?;
    let fraction = s.split_once('.').map_or(0, |(_, f)| f.len());
    if fraction != scale as usize {
        return Err(format!("decimal {s} does not have scale {scale}"));
    }
    s.replace('.', "")
        .parse::<i128>()
        .map_err(|e| format!("decimal {s}: {e}"))
}

fn date(v: &Json) -> Result<i32, String> {
    let d = NaiveDate::parse_from_str(text(v, "DATE")?, "%Y-%m-%d").map_err(|e| e.to_string())?;
    Ok((d - NaiveDate::from_ymd_opt(1970, 1, 1).unwrap()).num_days() as i32)
}

fn nanos_of_day(v: &Json) -> Result<i64, String> {
    let t =
        NaiveTime::parse_from_str(text(v, "TIME")?, "%H:%M:%S%.f").map_err(|e| e.to_string())?;
    Ok(i64::from(t.num_seconds_from_midnight()) * 1_000_000_000 + i64::from(t.nanosecond()))
}

/// TIMESTAMP / TIMESTAMP_LTZ (`...Z`) text → its count of `unit` since the epoch, if it fits an i64.
fn timestamp(v: &Json, unit: TimeUnit) -> Result<i64, String> {
    let s = text(v, "TIMESTAMP")?;
    let dt = NaiveDateTime::parse_from_str(s.trim_end_matches('Z'), "%Y-%m-%dT%H:%M:%S%.f")
        .map_err(|e| format!("{s}: {e}"))?
        .and_utc();
    let (secs, nanos) = (dt.timestamp(), i64::from(dt.timestamp_subsec_nanos()));
    let (per_second, divisor) = match unit {
        TimeUnit::Second => (1, 1_000_000_000),
        TimeUnit::Millisecond => (1_000, 1_000_000),
        TimeUnit::Microsecond => (1_000_000, 1_000),
        TimeUnit::Nanosecond => (1_000_000_000, 1),
    };
    secs.checked_mul(per_second)
        .and_then(|v| v.checked_add(nanos / divisor))
        .ok_or_else(|| format!("{s} does not fit Timestamp({unit:?})"))
}

/// An Arrow array of `field`'s type holding `values` (table encoding, tests/golden/README.md).
fn array(field: &Field, values: &[&Json]) -> Result<ArrayRef, String> {
    let null = &Json::Null;
    Ok(match field.data_type() {
        DataType::Utf8 => Arc::new(StringArray::from(each(values, |v| {
            text(v, "STRING").map(str::to_owned)
        })?)),
        DataType::Boolean => Arc::new(BooleanArray::from(each(values, |v| {
            v.as_bool().ok_or_else(|| format!("not a boolean: {v}"))
        })?)),
        DataType::Int8 => Arc::new(Int8Array::from(each(values, |v| {
            i8::try_from(int(v)?).map_err(|e| e.to_string())
        })?)),
        DataType::Int16 => Arc::new(Int16Array::from(each(values, |v| {
            i16::try_from(int(v)?).map_err(|e| e.to_string())
        })?)),
        DataType::Int32 => Arc::new(Int32Array::from(each(values, |v| {
            i32::try_from(int(v)?).map_err(|e| e.to_string())
        })?)),
        DataType::Int64 => Arc::new(Int64Array::from(each(values, int)?)),
        DataType::Float32 => Arc::new(Float32Array::from(each(values, |v| {
            float_text(v)?.parse::<f32>().map_err(|e| e.to_string())
        })?)),
        DataType::Float64 => Arc::new(Float64Array::from(each(values, |v| {
            float_text(v)?.parse::<f64>().map_err(|e| e.to_string())
        })?)),
        DataType::Decimal128(p, s) => Arc::new(
            Decimal128Array::from(each(values, |v| decimal(v, *s))?)
                .with_precision_and_scale(*p, *s)
                .map_err(|e| e.to_string())?,
        ),
        DataType::Binary => {
            let bytes = each(values, |v| {
                STANDARD
                    .decode(text(v, "BYTES")?)
                    .map_err(|e| e.to_string())
            })?;
            Arc::new(BinaryArray::from_iter(bytes))
        }
        DataType::Date32 => Arc::new(Date32Array::from(each(values, date)?)),
        DataType::Time32(TimeUnit::Second) => {
            Arc::new(Time32SecondArray::from(each(values, |v| {
                Ok((nanos_of_day(v)? / 1_000_000_000) as i32)
            })?))
        }
        DataType::Time32(_) => Arc::new(Time32MillisecondArray::from(each(values, |v| {
            Ok((nanos_of_day(v)? / 1_000_000) as i32)
        })?)),
        DataType::Time64(TimeUnit::Microsecond) => {
            Arc::new(Time64MicrosecondArray::from(each(values, |v| {
                Ok(nanos_of_day(v)? / 1000)
            })?))
        }
        DataType::Time64(_) => Arc::new(Time64NanosecondArray::from(each(values, nanos_of_day)?)),
        DataType::Timestamp(unit, tz) => {
            let v = each(values, |v| timestamp(v, *unit))?;
            let a: ArrayRef = match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Millisecond => {
                    Arc::new(TimestampMillisecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Microsecond => {
                    Arc::new(TimestampMicrosecondArray::from(v).with_timezone_opt(tz.clone()))
                }
                TimeUnit::Nanosecond => {
                    Arc::new(TimestampNanosecondArray::from(v).with_timezone_opt(tz.clone()))
                }
            };
            a
        }
        DataType::List(item) => {
            let mut children = Vec::new();
            let mut lengths = Vec::new();
            for v in values {
                let items = if v.is_null() {
                    &[][..]
                } else {
                    v.as_array().ok_or("ARRAY: not a JSON array")?
                };
                children.extend(items.iter());
                lengths.push(items.len());
            }
            let child = array(item, &children)?;
            Arc::new(
                ListArray::try_new(
                    item.clone(),
                    OffsetBuffer::from_lengths(lengths),
                    child,
                    nulls(values),
                )
                .map_err(|e| e.to_string())?,
            )
        }
        DataType::Map(entries_field, sorted) => {
            let DataType::Struct(entry_fields) = entries_field.data_type() else {
                return Err("MAP entries are not a struct".into());
            };
            let (mut keys, mut vals, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
            for v in values {
                let pairs = if v.is_null() {
                    &[][..]
                } else {
                    v.as_array().ok_or("MAP: not a JSON array")?
                };
                for pair in pairs {
                    keys.push(&pair[0]);
                    vals.push(&pair[1]);
                }
                lengths.push(pairs.len());
            }
            if keys.iter().any(|k| k.is_null()) && !entry_fields[0].is_nullable() {
                return Err("a NULL map key: Arrow map keys are non-nullable".into());
            }
            let entries = StructArray::try_new(
                entry_fields.clone(),
                vec![
                    array(&entry_fields[0], &keys)?,
                    array(&entry_fields[1], &vals)?,
                ],
                None,
            )
            .map_err(|e| e.to_string())?;
            Arc::new(
                MapArray::try_new(
                    entries_field.clone(),
                    OffsetBuffer::from_lengths(lengths),
                    entries,
                    nulls(values),
                    *sorted,
                )
                .map_err(|e| e.to_string())?,
            )
        }
        DataType::Struct(fields) => {
            let mut children = Vec::new();
            for f in fields {
                let child: Vec<&Json> = values
                    .iter()
                    .map(|v| v.get(f.name()).unwrap_or(null))
                    .collect();
                children.push(array(f, &child)?);
            }
            Arc::new(
                StructArray::try_new(fields.clone(), children, nulls(values))
                    .map_err(|e| e.to_string())?,
            )
        }
        other => return Err(format!("no test builder for {other}")),
    })
}

/// Where two texts first differ, with some context.
fn first_difference(ours: &str, flink: &str) -> String {
    let at = ours
        .char_indices()
        .zip(flink.chars())
        .find(|((_, a), b)| a != b)
        .map(|((i, _), _)| i)
        .unwrap_or(ours.len().min(flink.len()));
    let from = ours[..at]
        .char_indices()
        .rev()
        .nth(20)
        .map_or(0, |(i, _)| i);
    format!(
        "first difference at byte {at}: ours …{:?}… vs Flink …{:?}…",
        &ours[from..],
        flink.get(from..).unwrap_or("")
    )
    .chars()
    .take(400)
    .collect()
}

#[test]
fn every_type_prints_as_flink_print_connector() {
    let table = vectors("table.json");
    let print = vectors("print/all-types.json");
    let cols = columns(&print);
    assert_eq!(
        cols,
        columns(&table),
        "print/all-types.json covers the whole table"
    );
    let schema = schema_of(&cols);
    let rows = table["rows"].as_array().unwrap();
    let lines = print["lines"].as_array().unwrap();
    assert_eq!(lines.len(), rows.len());

    let mut failures = Vec::new();
    let mut not_representable = BTreeSet::new();
    let mut compared_rows = 0;
    for (expected, row) in lines.iter().zip(rows) {
        let name = expected["name"].as_str().unwrap();
        let fields = expected["fields"].as_array().unwrap();
        let mut cells = Vec::new();
        for ((field, flink), (column, _)) in schema.fields().iter().zip(fields).zip(&cols) {
            let value = &row["values"][column];
            match array(field, &[value]) {
                Ok(cell) => {
                    let ours = format_value(&cell, 0);
                    let flink = flink.as_str().unwrap();
                    if ours != flink {
                        failures.push(format!(
                            "row `{name}`, column {column} ({}): ours {ours:?}, Flink {flink:?}",
                            field.data_type()
                        ));
                    }
                    cells.push(cell);
                }
                Err(why) => {
                    not_representable.insert((name.to_owned(), column.clone(), why));
                }
            }
        }
        if cells.len() == schema.fields().len() {
            let batch = RecordBatch::try_new(schema.clone(), cells).expect("one-row batch");
            let ours = format_row(&batch, 0);
            let flink = expected["line"].as_str().unwrap();
            if ours != flink {
                failures.push(format!(
                    "row `{name}`: line differs, {}",
                    first_difference(&ours, flink)
                ));
            }
            compared_rows += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} difference(s) from Flink 1.18.1's print connector:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let gaps: BTreeSet<(&str, &str)> = not_representable
        .iter()
        .map(|(r, c, _)| (r.as_str(), c.as_str()))
        .collect();
    let known: BTreeSet<(&str, &str)> =
        NOT_REPRESENTABLE.iter().map(|(r, c, _)| (*r, *c)).collect();
    assert_eq!(
        gaps, known,
        "cells that could not be built as the host's Arrow types: {not_representable:#?}"
    );
    let rows_with_gaps: BTreeSet<&str> = known.iter().map(|(r, _)| *r).collect();
    assert_eq!(
        compared_rows,
        rows.len() - rows_with_gaps.len(),
        "whole lines compared"
    );
}

#[test]
fn float_and_double_edge_values_print_as_flink() {
    let print = vectors("print/floats.json");
    let schema = schema_of(&columns(&print));
    let lines = print["lines"].as_array().unwrap();
    let hex = |v: &Json| u64::from_str_radix(v.as_str().unwrap(), 16).unwrap();
    let names: Vec<&str> = lines.iter().map(|l| l["name"].as_str().unwrap()).collect();
    let f: Vec<f32> = lines
        .iter()
        .map(|l| f32::from_bits(hex(&l["float_bits"]) as u32))
        .collect();
    let d: Vec<f64> = lines
        .iter()
        .map(|l| f64::from_bits(hex(&l["double_bits"])))
        .collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(names)),
            Arc::new(Float32Array::from(f)),
            Arc::new(Float64Array::from(d)),
        ],
    )
    .unwrap();
    let failures: Vec<String> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let (ours, flink) = (format_row(&batch, i), l["line"].as_str().unwrap());
            (ours != flink).then(|| format!("ours {ours}\nFlink {flink}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn java_17_float_and_double_to_string_samples() {
    let path = repo_root().join("tests/golden/vectors/print/float-to-string.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines() {
        let mut parts = line.splitn(3, ' ');
        let (kind, bits, java) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let ours = match kind {
            "f" => float_to_string(f32::from_bits(u32::from_str_radix(bits, 16).unwrap())),
            "d" => double_to_string(f64::from_bits(u64::from_str_radix(bits, 16).unwrap())),
            other => panic!("unknown kind {other} in {line}"),
        };
        if ours != java {
            failures.push(format!("{kind} {bits}: ours {ours}, Java {java}"));
        }
        count += 1;
    }
    assert_eq!(count, 7114);
    assert!(
        failures.is_empty(),
        "{} of {count} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn identifier_prefix_as_flink() {
    let print = vectors("print/identifier.json");
    let batch = RecordBatch::try_new(
        schema_of(&columns(&print)),
        vec![
            Arc::new(Int32Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec![Some("x"), None])),
        ],
    )
    .unwrap();
    for case in print["cases"].as_array().unwrap() {
        let prefix = line_prefix(case["options"]["print-identifier"].as_str(), 0, 1);
        let ours: String = (0..batch.num_rows())
            .map(|r| format!("{prefix}{}\n", format_row(&batch, r)))
            .collect();
        assert_eq!(
            ours,
            case["output"].as_str().unwrap(),
            "options {}",
            case["options"]
        );
    }
}
