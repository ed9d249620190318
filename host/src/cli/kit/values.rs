//! Row values of a vector file ⇄ Arrow columns. Values are JSON in the encoding of the golden vectors
//! (`tests/golden/README.md`, "Value encoding"): DECIMAL as a plain-notation string, BINARY as base64,
//! DATE / TIME / TIMESTAMP as ISO text (TIMESTAMP_LTZ with a trailing `Z`), FLOAT / DOUBLE as numbers or
//! `"NaN"` / `"Infinity"` / `"-Infinity"` / `"-0.0"`, MAP as `[[key, value], ...]` (or an object), ROW as an
//! object.
//!
//! Expected and actual values are compared as rendered cells ([`render`]): both sides are Arrow values of
//! the column's type, so the comparison is exact, and MAP entries are compared in any order (Flink's own
//! decoders hand them out in hash order).

use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, ListArray, MapArray, StringArray,
    StructArray, Time32MillisecondArray, Time32SecondArray, Time64MicrosecondArray,
    Time64NanosecondArray, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{NaiveDate, NaiveDateTime};
use serde_json::Value as Json;

use crate::sql::{FlinkType, TypeKind};

/// The Arrow field of a vector file's column: what a table's column gives a format plugin
/// (`plugin_field`), except that a top-level TIME(0) is `Time32(Second)`, the unit the plugin boundary
/// (`plugins/schema.rs`) reads TIME(0) in. (A SQL table's TIME(0) column is `Time32(Millisecond)`, which the
/// boundary refuses today: the kit tests the plugin, not that mapping.)
pub fn field(name: &str, ty: &FlinkType) -> arrow::datatypes::Field {
    if ty.kind == TypeKind::Time(0) {
        return arrow::datatypes::Field::new(name, DataType::Time32(TimeUnit::Second), ty.nullable);
    }
    crate::plugins::schema::plugin_field(name, ty)
}

/// One Arrow column of type `ty` holding `values` (`None`: NULL, a column the row leaves out).
pub fn column(ty: &FlinkType, values: &[Option<&Json>]) -> anyhow::Result<ArrayRef> {
    let values: Vec<Option<&Json>> = values.iter().map(|v| v.filter(|v| !v.is_null())).collect();
    if !ty.nullable && values.iter().any(Option::is_none) {
        bail!("NULL in a {ty} column");
    }
    let nulls = || NullBuffer::from(values.iter().map(Option::is_some).collect::<Vec<_>>());
    macro_rules! prim {
        ($array:ty, $parse:expr) => {{
            let parsed = values
                .iter()
                .map(|v| v.map($parse).transpose())
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("a {ty} value"))?;
            Arc::new(<$array>::from(parsed)) as ArrayRef
        }};
    }
    let array: ArrayRef = match &ty.kind {
        TypeKind::Boolean => prim!(BooleanArray, |v: &Json| v
            .as_bool()
            .ok_or_else(|| anyhow!("`{v}` is not a boolean"))),
        TypeKind::TinyInt => prim!(Int8Array, |v: &Json| int::<i8>(v)),
        TypeKind::SmallInt => prim!(Int16Array, |v: &Json| int::<i16>(v)),
        TypeKind::Int => prim!(Int32Array, |v: &Json| int::<i32>(v)),
        TypeKind::BigInt => prim!(Int64Array, |v: &Json| int::<i64>(v)),
        TypeKind::Float => prim!(Float32Array, |v: &Json| float(v).map(|f| f as f32)),
        TypeKind::Double => prim!(Float64Array, float),
        TypeKind::Decimal(p, s) => {
            let parsed = values
                .iter()
                .map(|v| v.map(|v| decimal(v, *s)).transpose())
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("a {ty} value"))?;
            Arc::new(Decimal128Array::from(parsed).with_precision_and_scale(*p, *s)?)
        }
        TypeKind::Char(_) | TypeKind::Varchar(_) | TypeKind::String => {
            prim!(StringArray, |v: &Json| v
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("`{v}` is not a string")))
        }
        TypeKind::Binary(_) | TypeKind::Varbinary(_) | TypeKind::Bytes => {
            let parsed = values
                .iter()
                .map(|v| v.map(bytes).transpose())
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("a {ty} value"))?;
            Arc::new(BinaryArray::from_iter(parsed))
        }
        TypeKind::Date => prim!(Date32Array, |v: &Json| date(v)),
        TypeKind::Time(_) => {
            let nanos = values
                .iter()
                .map(|v| v.map(time_nanos).transpose())
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("a {ty} value"))?;
            match ty.to_arrow() {
                // TIME(0) crosses the plugin boundary in seconds (see [`field`]).
                DataType::Time32(_) if ty.kind == TypeKind::Time(0) => {
                    Arc::new(Time32SecondArray::from(
                        nanos
                            .iter()
                            .map(|n| n.map(|n| (n / 1_000_000_000) as i32))
                            .collect::<Vec<_>>(),
                    ))
                }
                DataType::Time32(_) => Arc::new(Time32MillisecondArray::from(
                    nanos
                        .iter()
                        .map(|n| n.map(|n| (n / 1_000_000) as i32))
                        .collect::<Vec<_>>(),
                )),
                DataType::Time64(TimeUnit::Microsecond) => Arc::new(Time64MicrosecondArray::from(
                    nanos
                        .iter()
                        .map(|n| n.map(|n| n / 1000))
                        .collect::<Vec<_>>(),
                )),
                _ => Arc::new(Time64NanosecondArray::from(nanos)),
            }
        }
        TypeKind::Timestamp(_) | TypeKind::TimestampLtz(_) => {
            let ltz = matches!(ty.kind, TypeKind::TimestampLtz(_));
            let DataType::Timestamp(unit, tz) = ty.to_arrow() else {
                unreachable!("a timestamp type")
            };
            let parsed = values
                .iter()
                .map(|v| v.map(|v| timestamp(v, unit, ltz)).transpose())
                .collect::<anyhow::Result<Vec<_>>>()
                .with_context(|| format!("a {ty} value"))?;
            let array: ArrayRef = match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(parsed).with_timezone_opt(tz))
                }
                TimeUnit::Millisecond => {
                    Arc::new(TimestampMillisecondArray::from(parsed).with_timezone_opt(tz))
                }
                TimeUnit::Microsecond => {
                    Arc::new(TimestampMicrosecondArray::from(parsed).with_timezone_opt(tz))
                }
                TimeUnit::Nanosecond => {
                    Arc::new(TimestampNanosecondArray::from(parsed).with_timezone_opt(tz))
                }
            };
            array
        }
        TypeKind::Array(element) => {
            let DataType::List(field) = ty.to_arrow() else {
                unreachable!("a list type")
            };
            let mut children = Vec::new();
            let mut lengths = Vec::with_capacity(values.len());
            for v in &values {
                match v {
                    Some(v) => {
                        let items = v
                            .as_array()
                            .ok_or_else(|| anyhow!("`{v}` is not an array ({ty})"))?;
                        lengths.push(items.len());
                        children.extend(items.iter().map(Some));
                    }
                    None => lengths.push(0),
                }
            }
            let child =
                column(element, &children).with_context(|| format!("an element of {ty}"))?;
            Arc::new(ListArray::try_new(
                field,
                OffsetBuffer::from_lengths(lengths),
                child,
                Some(nulls()),
            )?)
        }
        TypeKind::Map(key_type, value_type) => {
            let DataType::Map(entries_field, sorted) = ty.to_arrow() else {
                unreachable!("a map type")
            };
            let DataType::Struct(entry_fields) = entries_field.data_type().clone() else {
                unreachable!("map entries are a struct")
            };
            let mut keys: Vec<Option<&Json>> = Vec::new();
            let mut vals: Vec<Option<&Json>> = Vec::new();
            let mut lengths = Vec::with_capacity(values.len());
            let mut owned_keys: Vec<Json> = Vec::new();
            // Object keys are strings: keep them alive beside the borrowed values.
            for v in &values {
                if let Some(Json::Object(m)) = v {
                    owned_keys.extend(m.keys().map(|k| Json::String(k.clone())));
                }
            }
            let mut next_owned = owned_keys.iter();
            for v in &values {
                match v {
                    None => lengths.push(0),
                    Some(Json::Object(m)) => {
                        lengths.push(m.len());
                        for value in m.values() {
                            keys.push(next_owned.next());
                            vals.push(Some(value));
                        }
                    }
                    Some(Json::Array(pairs)) => {
                        lengths.push(pairs.len());
                        for pair in pairs {
                            match pair.as_array().map(Vec::as_slice) {
                                Some([k, v]) => {
                                    keys.push(Some(k));
                                    vals.push(Some(v));
                                }
                                _ => bail!("MAP entry `{pair}` is not a [key, value] pair ({ty})"),
                            }
                        }
                    }
                    Some(other) => bail!("`{other}` is not a MAP ([[key, value], ...]) ({ty})"),
                }
            }
            let key_type = FlinkType {
                kind: key_type.kind.clone(),
                nullable: false,
            };
            let key_array = column(&key_type, &keys).with_context(|| format!("a key of {ty}"))?;
            let value_array =
                column(value_type, &vals).with_context(|| format!("a value of {ty}"))?;
            let entries = StructArray::try_new(entry_fields, vec![key_array, value_array], None)?;
            Arc::new(MapArray::try_new(
                entries_field,
                OffsetBuffer::from_lengths(lengths),
                entries,
                Some(nulls()),
                sorted,
            )?)
        }
        TypeKind::Row(fields) => {
            let DataType::Struct(arrow_fields) = ty.to_arrow() else {
                unreachable!("a struct type")
            };
            for v in values.iter().flatten() {
                let Json::Object(m) = v else {
                    bail!("`{v}` is not a ROW object ({ty})");
                };
                if let Some(k) = m.keys().find(|k| !fields.iter().any(|f| &f.name == *k)) {
                    bail!("ROW value `{v}` has no field `{k}` ({ty})");
                }
            }
            let children = fields
                .iter()
                .map(|f| {
                    let child: Vec<Option<&Json>> = values
                        .iter()
                        .map(|v| v.and_then(|v| v.get(&f.name)))
                        .collect();
                    // A NOT NULL field of a NULL row holds a placeholder NULL: make it nullable there.
                    let ty = FlinkType {
                        kind: f.ty.kind.clone(),
                        nullable: f.ty.nullable || values.iter().any(Option::is_none),
                    };
                    column(&ty, &child).with_context(|| format!("field `{}` of {ty}", f.name))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            Arc::new(StructArray::try_new(arrow_fields, children, Some(nulls()))?)
        }
    };
    Ok(array)
}

fn int<T: TryFrom<i64>>(v: &Json) -> anyhow::Result<T> {
    let n = match v {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
    .ok_or_else(|| anyhow!("`{v}` is not an integer"))?;
    T::try_from(n).map_err(|_| anyhow!("{n} is out of range"))
}

fn float(v: &Json) -> anyhow::Result<f64> {
    match v {
        Json::Number(n) => n.as_f64().ok_or_else(|| anyhow!("`{v}` is not a number")),
        Json::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => other
                .parse()
                .map_err(|_| anyhow!("`{other}` is not a number")),
        },
        _ => bail!("`{v}` is not a number"),
    }
}

/// The unscaled value of a plain-notation decimal at `scale` (more fraction digits than the scale are
/// an error unless they are zeros).
fn decimal(v: &Json, scale: i8) -> anyhow::Result<i128> {
    let text = match v {
        Json::String(s) => s.clone(),
        Json::Number(n) => n.to_string(),
        _ => bail!("`{v}` is not a decimal"),
    };
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let (int_part, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac.is_empty()
        || !int_part
            .bytes()
            .chain(frac.bytes())
            .all(|b| b.is_ascii_digit())
    {
        bail!("`{text}` is not a plain decimal");
    }
    let scale = scale.max(0) as usize;
    let kept = frac.get(..scale.min(frac.len())).unwrap_or("");
    if frac.len() > scale && frac[scale..].bytes().any(|b| b != b'0') {
        bail!("`{text}` has more than {scale} fraction digits");
    }
    let mut unscaled = format!("{int_part}{kept}");
    unscaled.extend(std::iter::repeat_n('0', scale - kept.len()));
    let n: i128 = if unscaled.is_empty() {
        0
    } else {
        unscaled
            .parse()
            .map_err(|_| anyhow!("`{text}` is out of range"))?
    };
    Ok(if negative { -n } else { n })
}

fn bytes(v: &Json) -> anyhow::Result<Vec<u8>> {
    let s = v
        .as_str()
        .ok_or_else(|| anyhow!("`{v}` is not a base64 string"))?;
    STANDARD
        .decode(s)
        .map_err(|e| anyhow!("`{s}` is not base64: {e}"))
}

fn text(v: &Json) -> anyhow::Result<&str> {
    v.as_str().ok_or_else(|| anyhow!("`{v}` is not a string"))
}

const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

fn date(v: &Json) -> anyhow::Result<i32> {
    let s = text(v)?;
    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .map_err(|e| anyhow!("`{s}` is not a date (yyyy-MM-dd): {e}"))?;
    Ok(chrono::Datelike::num_days_from_ce(&d) - UNIX_EPOCH_DAYS_FROM_CE)
}

/// Nanoseconds of the day of `HH:mm:ss[.fffffffff]`.
fn time_nanos(v: &Json) -> anyhow::Result<i64> {
    let s = text(v)?;
    let t = chrono::NaiveTime::parse_from_str(s, "%H:%M:%S%.f")
        .map_err(|e| anyhow!("`{s}` is not a time (HH:mm:ss[.fff]): {e}"))?;
    Ok(
        i64::from(chrono::Timelike::num_seconds_from_midnight(&t)) * 1_000_000_000
            + i64::from(chrono::Timelike::nanosecond(&t)),
    )
}

fn timestamp(v: &Json, unit: TimeUnit, ltz: bool) -> anyhow::Result<i64> {
    let s = text(v)?;
    let body = if ltz {
        s.strip_suffix('Z')
            .ok_or_else(|| anyhow!("`{s}` lacks the trailing `Z` of a TIMESTAMP_LTZ"))?
    } else {
        s
    };
    let t = NaiveDateTime::parse_from_str(body, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(body, "%Y-%m-%d %H:%M:%S%.f"))
        .map_err(|e| anyhow!("`{s}` is not a timestamp (yyyy-MM-ddTHH:mm:ss[.fff]): {e}"))?
        .and_utc();
    let secs = t.timestamp();
    let nanos = i64::from(t.timestamp_subsec_nanos());
    let out = match unit {
        TimeUnit::Second => Some(secs),
        TimeUnit::Millisecond => secs.checked_mul(1000).map(|s| s + nanos / 1_000_000),
        TimeUnit::Microsecond => secs.checked_mul(1_000_000).map(|s| s + nanos / 1000),
        TimeUnit::Nanosecond => secs
            .checked_mul(1_000_000_000)
            .and_then(|s| s.checked_add(nanos)),
    };
    out.ok_or_else(|| anyhow!("`{s}` is out of the range of its precision"))
}

/// The canonical text of value `i` of `array`, for comparing and printing: NULL is `null`, binary is
/// hex, MAP entries are sorted.
pub fn render(array: &dyn Array, i: usize) -> String {
    let mut out = String::new();
    render_into(array, i, &mut out);
    out
}

fn render_into(array: &dyn Array, i: usize, out: &mut String) {
    use arrow::array::AsArray as _;
    if array.is_null(i) {
        out.push_str("null");
        return;
    }
    match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            let items = list.value(i);
            out.push('[');
            for j in 0..items.len() {
                if j > 0 {
                    out.push_str(", ");
                }
                render_into(&items, j, out);
            }
            out.push(']');
        }
        DataType::Map(_, _) => {
            let map = array.as_map();
            let entries = map.value(i);
            let mut pairs: Vec<String> = (0..entries.len())
                .map(|j| {
                    format!(
                        "{}={}",
                        render(entries.column(0), j),
                        render(entries.column(1), j)
                    )
                })
                .collect();
            pairs.sort();
            out.push('{');
            out.push_str(&pairs.join(", "));
            out.push('}');
        }
        DataType::Struct(fields) => {
            let row = array.as_struct();
            out.push('{');
            for (j, f) in fields.iter().enumerate() {
                if j > 0 {
                    out.push_str(", ");
                }
                out.push_str(f.name());
                out.push_str(": ");
                render_into(row.column(j), i, out);
            }
            out.push('}');
        }
        DataType::Binary => {
            out.push_str("0x");
            out.push_str(&hex::encode(array.as_binary::<i32>().value(i)));
        }
        DataType::Float32 => {
            let v = array
                .as_primitive::<arrow::datatypes::Float32Type>()
                .value(i);
            out.push_str(&format!("{v:?}"));
        }
        DataType::Float64 => {
            let v = array
                .as_primitive::<arrow::datatypes::Float64Type>()
                .value(i);
            out.push_str(&format!("{v:?}"));
        }
        _ => match ArrayFormatter::try_new(array, &FormatOptions::default()) {
            Ok(f) => out.push_str(&f.value(i).to_string()),
            Err(e) => out.push_str(&format!("<{e}>")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parse_type;
    use serde_json::json;

    fn one(ty: &str, v: Json) -> String {
        let ty = parse_type(ty).unwrap();
        render(&column(&ty, &[Some(&v)]).unwrap(), 0)
    }

    #[test]
    fn values_of_every_family() {
        assert_eq!(one("DECIMAL(10, 2)", json!("-0.01")), "-0.01");
        assert_eq!(one("DECIMAL(10, 2)", json!(12.5)), "12.50");
        assert_eq!(one("FLOAT", json!("NaN")), "NaN");
        assert_eq!(one("DOUBLE", json!("-0.0")), "-0.0");
        assert_eq!(one("BYTES", json!("AQID")), "0x010203");
        assert_eq!(one("DATE", json!("2024-02-29")), "2024-02-29");
        assert_eq!(one("TIME(3)", json!("12:34:56.789")), "12:34:56.789");
        assert_eq!(
            one("TIMESTAMP(9)", json!("2024-02-29T12:34:56.123456789")),
            "2024-02-29T12:34:56.123456789"
        );
        assert!(
            one("TIMESTAMP_LTZ(3)", json!("1970-01-01T00:00:00.001Z")).contains("00:00:00.001")
        );
        assert_eq!(
            one("MAP<STRING, INT>", json!([["n", null], ["k", 1]])),
            one("MAP<STRING, INT>", json!({"k": 1, "n": null}))
        );
        assert_eq!(
            one(
                "ROW<a INT, b ARRAY<STRING>>",
                json!({"a": 1, "b": ["x", null]})
            ),
            "{a: 1, b: [x, null]}"
        );
    }

    #[test]
    fn bad_values_are_named() {
        let ty = parse_type("DECIMAL(5, 1)").unwrap();
        let e = column(&ty, &[Some(&json!("1.25"))]).unwrap_err();
        assert!(
            format!("{e:#}").contains("more than 1 fraction digits"),
            "{e:#}"
        );
        let ty = parse_type("INT NOT NULL").unwrap();
        assert!(column(&ty, &[None]).is_err());
        let ty = parse_type("TINYINT").unwrap();
        assert!(
            format!("{:#}", column(&ty, &[Some(&json!(300))]).unwrap_err())
                .contains("out of range")
        );
    }
}
