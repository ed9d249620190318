//! Rows → messages, written straight in the wire format (prost's primitives) as Java's generated
//! `toByteArray()` writes what Flink's serializer built: fields in field-number order, a NULL column
//! left unset, a proto3 field without presence not written when it holds its default, packed repeated
//! scalars where the descriptor says so, map entries with both key and value. Protobuf has no NULL
//! elements: a NULL in an ARRAY or a MAP is written as the type's default (Flink's table: 0, false,
//! `write-null-string-literal`, empty bytes, the enum's first value, the empty message).

use format_common::{ColumnBatch, EncodedBatch, RowType, Value};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};
use prost_reflect::{Kind, MessageDescriptor};
use pulsar_connect_plugin::columns::encode_rows;

use crate::Config;
use crate::schema::{Conv, Plan, Shape};

pub fn encode_batch(
    config: &Config,
    row_type: &RowType,
    rows: &ColumnBatch,
) -> Result<EncodedBatch, String> {
    encode_rows(row_type, rows, |values| {
        let mut out = Vec::new();
        write_message(config, &config.message, &config.plan, values, &mut out)?;
        Ok(out)
    })
}

fn write_message(
    config: &Config,
    message: &MessageDescriptor,
    plan: &Plan,
    values: &[Value],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    // Java's builder: a message missing a required field does not build.
    let missing: Vec<&str> = plan
        .required
        .iter()
        .filter(|r| {
            !plan
                .fields
                .iter()
                .zip(values)
                .any(|(f, v)| f.fd.number() == r.number() && !v.is_null())
        })
        .map(|r| r.name())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "Message missing required fields: {} (message `{}`)",
            missing.join(", "),
            message.full_name()
        ));
    }
    for &i in &plan.by_number {
        let (f, v) = (&plan.fields[i], &values[i]);
        if v.is_null() || overwritten_oneof(plan, values, i) {
            continue;
        }
        let number = f.fd.number();
        match (&f.shape, v) {
            (Shape::Single(conv), v) => {
                if !f.fd.supports_presence() && is_default(conv, v) {
                    continue;
                }
                write_field(config, number, conv, v, out)?;
            }
            (Shape::List(conv), Value::Array(items)) => {
                if f.fd.is_packed() && !items.is_empty() {
                    let mut packed = Vec::new();
                    for item in items {
                        write_value(config, conv, item, &mut packed)?;
                    }
                    encode_key(number, WireType::LengthDelimited, out);
                    encode_varint(packed.len() as u64, out);
                    out.extend_from_slice(&packed);
                } else {
                    for item in items {
                        write_field(config, number, conv, item, out)?;
                    }
                }
            }
            (Shape::Map(key, val), Value::Map(entries)) => {
                for (k, v) in entries {
                    let mut entry = Vec::new();
                    write_field(config, 1, key, k, &mut entry)?;
                    write_field(config, 2, val, v, &mut entry)?;
                    encode_key(number, WireType::LengthDelimited, out);
                    encode_varint(entry.len() as u64, out);
                    out.extend_from_slice(&entry);
                }
            }
            (_, other) => {
                return Err(format!(
                    "field `{}`: a {} value where the row type has another type",
                    f.fd.name(),
                    other.kind()
                ));
            }
        }
    }
    Ok(())
}

/// Flink sets the fields in row order, so of several non-NULL members of one `oneof` the last wins.
fn overwritten_oneof(plan: &Plan, values: &[Value], i: usize) -> bool {
    let Some(oneof) = plan.fields[i].fd.containing_oneof() else {
        return false;
    };
    if oneof.is_synthetic() {
        return false;
    }
    plan.fields
        .iter()
        .zip(values)
        .skip(i + 1)
        .any(|(f, v)| !v.is_null() && f.fd.containing_oneof().as_ref() == Some(&oneof))
}

/// Whether a field without presence (proto3) holds its default and so is not written (Java compares
/// floats by their bits: -0.0 is written).
fn is_default(conv: &Conv, v: &Value) -> bool {
    match (conv, v) {
        (Conv::Bool, Value::Bool(b)) => !b,
        (Conv::Int(_), Value::I32(x)) => *x == 0,
        (Conv::Long(_), Value::I64(x)) => *x == 0,
        (Conv::Float, Value::F32(x)) => x.to_bits() == 0,
        (Conv::Double, Value::F64(x)) => x.to_bits() == 0,
        (Conv::String, Value::String(s)) => s.is_empty(),
        (Conv::Bytes, Value::Bytes(b)) => b.is_empty(),
        (Conv::EnumName(_) | Conv::EnumNumber(..), v) => enum_number(conv, v) == 0,
        _ => false,
    }
}

/// The number an enum column's value writes: its name's or its number, else (not a value of the enum)
/// the enum's first value, as Flink's serializer chooses.
fn enum_number(conv: &Conv, v: &Value) -> i32 {
    let (e, found) = match (conv, v) {
        (Conv::EnumName(e), Value::String(s)) => (e, e.get_value_by_name(s).map(|v| v.number())),
        (Conv::EnumNumber(e, _), v) => {
            let n = match v {
                Value::I8(x) => i64::from(*x),
                Value::I16(x) => i64::from(*x),
                Value::I32(x) => i64::from(*x),
                Value::I64(x) => *x,
                _ => i64::MIN,
            };
            let found = i32::try_from(n).ok().filter(|n| e.get_value(*n).is_some());
            (e, found)
        }
        (Conv::EnumName(e), _) => (e, None),
        _ => return 0,
    };
    found.unwrap_or_else(|| e.values().next().map(|v| v.number()).unwrap_or(0))
}

fn wire_type(conv: &Conv) -> WireType {
    match conv {
        Conv::Int(Kind::Fixed32 | Kind::Sfixed32) | Conv::Float => WireType::ThirtyTwoBit,
        Conv::Long(Kind::Fixed64 | Kind::Sfixed64) | Conv::Double => WireType::SixtyFourBit,
        Conv::String | Conv::Bytes | Conv::Row(..) => WireType::LengthDelimited,
        _ => WireType::Varint,
    }
}

fn write_field(
    config: &Config,
    number: u32,
    conv: &Conv,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    encode_key(number, wire_type(conv), out);
    write_value(config, conv, v, out)
}

/// One value without its key; NULL (an element of an ARRAY or MAP) as the type's default.
fn write_value(config: &Config, conv: &Conv, v: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match (conv, v) {
        (Conv::Bool, Value::Bool(b)) => encode_varint(u64::from(*b), out),
        (Conv::Bool, Value::Null) => encode_varint(0, out),
        (Conv::Int(kind), v) => {
            let x = match v {
                Value::I32(x) => *x,
                Value::Null => 0,
                other => return Err(mismatch("INT", other)),
            };
            match kind {
                Kind::Sint32 => encode_varint(u64::from(((x << 1) ^ (x >> 31)) as u32), out),
                Kind::Uint32 => encode_varint(u64::from(x as u32), out),
                Kind::Fixed32 | Kind::Sfixed32 => out.extend_from_slice(&x.to_le_bytes()),
                // int32: negative values sign-extended to ten bytes.
                _ => encode_varint(i64::from(x) as u64, out),
            }
        }
        (Conv::Long(kind), v) => {
            let x = match v {
                Value::I64(x) => *x,
                Value::Null => 0,
                other => return Err(mismatch("BIGINT", other)),
            };
            match kind {
                Kind::Sint64 => encode_varint(((x << 1) ^ (x >> 63)) as u64, out),
                Kind::Fixed64 | Kind::Sfixed64 => out.extend_from_slice(&x.to_le_bytes()),
                _ => encode_varint(x as u64, out),
            }
        }
        (Conv::Float, Value::F32(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (Conv::Float, Value::Null) => out.extend_from_slice(&0f32.to_le_bytes()),
        (Conv::Double, Value::F64(x)) => out.extend_from_slice(&x.to_le_bytes()),
        (Conv::Double, Value::Null) => out.extend_from_slice(&0f64.to_le_bytes()),
        (Conv::String, Value::String(s)) => write_bytes(s.as_bytes(), out),
        (Conv::String, Value::Null) => {
            write_bytes(config.write_null_string_literal.as_bytes(), out)
        }
        (Conv::Bytes, Value::Bytes(b)) => write_bytes(b, out),
        (Conv::Bytes, Value::Null) => write_bytes(&[], out),
        (Conv::EnumName(_) | Conv::EnumNumber(..), v) => {
            encode_varint(i64::from(enum_number(conv, v)) as u64, out)
        }
        (Conv::Row(m, plan), Value::Row(values)) => {
            let mut inner = Vec::new();
            write_message(config, m, plan, values, &mut inner)?;
            encode_varint(inner.len() as u64, out);
            out.extend_from_slice(&inner);
        }
        (Conv::Row(m, plan), Value::Null) => {
            // The default instance: empty, unless the message has required fields (it cannot build).
            let mut inner = Vec::new();
            let nulls = vec![Value::Null; plan.fields.len()];
            write_message(config, m, plan, &nulls, &mut inner)?;
            encode_varint(inner.len() as u64, out);
            out.extend_from_slice(&inner);
        }
        (_, other) => return Err(mismatch("the column's type", other)),
    }
    Ok(())
}

fn write_bytes(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len_varint(b.len() as u64) + b.len());
    encode_varint(b.len() as u64, out);
    out.extend_from_slice(b);
}

fn mismatch(want: &str, got: &Value) -> String {
    format!("a {} value where {want} was expected", got.kind())
}
