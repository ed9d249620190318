//! Messages → rows: the payload parsed as a dynamic message of the configured type (prost-reflect),
//! its fields read as Flink's generated deserializer reads them.

use format_common::{DecodedBatch, MessageBatch, RowType, Value, skipped};
use prost_reflect::{DynamicMessage, MapKey, Value as Pb};
use pulsar_connect_plugin::columns::decode_rows;

use crate::Config;
use crate::schema::{Conv, FieldPlan, Shape, Width};

pub fn decode_batch(
    config: &Config,
    row_type: &RowType,
    messages: &MessageBatch,
) -> Result<DecodedBatch, String> {
    decode_rows(row_type, messages, |m| {
        let message = DynamicMessage::decode(config.message.clone(), m.payload).map_err(|e| {
            let reason = format!(
                "Failed to deserialize PB object (message `{}`): {e}",
                config.message.full_name()
            );
            if config.ignore_parse_errors {
                skipped(reason)
            } else {
                reason
            }
        })?;
        Ok(read_fields(config, &config.plan.fields, &message))
    })
}

/// The values of `fields` of `message`: with `read-default-values` off (proto2 only) an absent field,
/// and an empty repeated or map field, is NULL (Flink: `hasX()` / `getXCount() > 0`); otherwise the
/// field's value or its default (a nested message: the default instance, a ROW of defaults).
fn read_fields(config: &Config, fields: &[FieldPlan], message: &DynamicMessage) -> Vec<Value> {
    fields
        .iter()
        .map(|f| {
            if !config.read_default_values && !message.has_field(&f.fd) {
                return Value::Null;
            }
            let value = message.get_field(&f.fd);
            match (&f.shape, value.as_ref()) {
                (Shape::Single(conv), v) => read(config, conv, v),
                (Shape::List(conv), Pb::List(items)) => {
                    Value::Array(items.iter().map(|v| read(config, conv, v)).collect())
                }
                (Shape::Map(key, val), Pb::Map(entries)) => {
                    // SQL maps are unordered; sorted by key so that a message reads the same every time.
                    let mut entries: Vec<(&MapKey, &Pb)> = entries.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    Value::Map(
                        entries
                            .into_iter()
                            .map(|(k, v)| (read(config, key, &key_value(k)), read(config, val, v)))
                            .collect(),
                    )
                }
                _ => Value::Null,
            }
        })
        .collect()
}

fn key_value(k: &MapKey) -> Pb {
    match k {
        MapKey::Bool(b) => Pb::Bool(*b),
        MapKey::I32(v) => Pb::I32(*v),
        MapKey::I64(v) => Pb::I64(*v),
        MapKey::U32(v) => Pb::U32(*v),
        MapKey::U64(v) => Pb::U64(*v),
        MapKey::String(s) => Pb::String(s.clone()),
    }
}

/// One protobuf value as the column's SQL value (types were matched when planning; a value of another
/// kind cannot come out of the descriptor's message and reads as NULL).
fn read(config: &Config, conv: &Conv, v: &Pb) -> Value {
    match (conv, v) {
        (Conv::Bool, Pb::Bool(b)) => Value::Bool(*b),
        (Conv::Int(_), Pb::I32(x)) => Value::I32(*x),
        // Java's int holds a uint32's bits.
        (Conv::Int(_), Pb::U32(x)) => Value::I32(*x as i32),
        (Conv::Long(_), Pb::I64(x)) => Value::I64(*x),
        (Conv::Long(_), Pb::U64(x)) => Value::I64(*x as i64),
        (Conv::Float, Pb::F32(x)) => Value::F32(*x),
        (Conv::Double, Pb::F64(x)) => Value::F64(*x),
        (Conv::String, Pb::String(s)) => Value::String(s.clone()),
        (Conv::Bytes, Pb::Bytes(b)) => Value::Bytes(b.to_vec()),
        (Conv::EnumName(e), Pb::EnumNumber(n)) => Value::String(match e.get_value(*n) {
            Some(value) => value.name().to_owned(),
            // Java's generated getter returns the UNRECOGNIZED constant for an unknown number.
            None => "UNRECOGNIZED".to_owned(),
        }),
        (Conv::EnumNumber(_, w), Pb::EnumNumber(n)) => match w {
            Width::Tinyint => Value::I8(*n as i8),
            Width::Smallint => Value::I16(*n as i16),
            Width::Int => Value::I32(*n),
            Width::Bigint => Value::I64(i64::from(*n)),
        },
        (Conv::Row(_, plan), Pb::Message(m)) => Value::Row(read_fields(config, &plan.fields, m)),
        _ => Value::Null,
    }
}
