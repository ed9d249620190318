//! The Pulsar connector's metadata columns as Arrow arrays, one batch of messages at a time.
//!
//! | key | Flink type | value |
//! | --- | --- | --- |
//! | `topic` | STRING | the topic the message was read from (a partition's own name) |
//! | `messageId` | BYTES | Pulsar's serialised `MessageIdData` (what Java's `MessageId.toByteArray()` gives) |
//! | `sequenceId` | BIGINT | the producer's sequence id |
//! | `publishTime` | TIMESTAMP_LTZ(3) | publish time |
//! | `eventTime` | TIMESTAMP_LTZ(3) | the producer's event time; NULL when unset (Flink shows 1970-01-01) |
//! | `properties` | MAP<STRING, STRING> | the message properties |

use std::sync::Arc;

use anyhow::{Result, bail};
use arrow::array::{
    ArrayRef, BinaryBuilder, Int64Builder, LargeBinaryBuilder, MapBuilder, MapFieldNames,
    StringBuilder, TimestampMicrosecondBuilder, TimestampMillisecondBuilder,
    TimestampNanosecondBuilder, TimestampSecondBuilder,
};
use arrow::datatypes::{DataType, TimeUnit};
use magnetar::proto::event::IncomingMessage;

use super::message;

/// The metadata keys the connector reads (`METADATA FROM '<key>'`).
pub const READABLE_KEYS: &[&str] = &[
    "topic",
    "messageId",
    "sequenceId",
    "publishTime",
    "eventTime",
    "properties",
];
/// The metadata keys the connector writes.
pub const WRITABLE_KEYS: &[&str] = &["eventTime", "properties"];

/// One message and the topic it was read from.
pub type Received<'a> = (&'a str, &'a IncomingMessage);

/// The column for metadata `key` over `rows`, as `data_type` (the column's declared type).
pub fn metadata_column(key: &str, data_type: &DataType, rows: &[Received<'_>]) -> Result<ArrayRef> {
    Ok(match (key, data_type) {
        ("topic", DataType::Utf8) => {
            let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 48);
            for (topic, _) in rows {
                b.append_value(topic);
            }
            Arc::new(b.finish())
        }
        ("messageId", DataType::Binary) => {
            let mut b = BinaryBuilder::with_capacity(rows.len(), rows.len() * 16);
            for (_, m) in rows {
                b.append_value(super::message_id::message_id_bytes(&m.message_id));
            }
            Arc::new(b.finish())
        }
        ("messageId", DataType::LargeBinary) => {
            let mut b = LargeBinaryBuilder::with_capacity(rows.len(), rows.len() * 16);
            for (_, m) in rows {
                b.append_value(super::message_id::message_id_bytes(&m.message_id));
            }
            Arc::new(b.finish())
        }
        ("sequenceId", DataType::Int64) => {
            let mut b = Int64Builder::with_capacity(rows.len());
            for (_, m) in rows {
                b.append_value(message::sequence_id(m) as i64);
            }
            Arc::new(b.finish())
        }
        ("publishTime", DataType::Timestamp(unit, tz)) => {
            timestamps(rows, *unit, tz.clone(), |m| {
                Some(message::publish_time_ms(m))
            })
        }
        ("eventTime", DataType::Timestamp(unit, tz)) => {
            timestamps(rows, *unit, tz.clone(), message::event_time_ms)
        }
        ("properties", DataType::Map(entries, _)) => {
            let (key_name, value_name) = match entries.data_type() {
                DataType::Struct(fields) if fields.len() == 2 => {
                    (fields[0].name().clone(), fields[1].name().clone())
                }
                other => bail!(
                    "metadata 'properties' must be MAP<STRING, STRING>, the entries are {other}"
                ),
            };
            let names = MapFieldNames {
                entry: entries.name().clone(),
                key: key_name,
                value: value_name,
            };
            let mut b = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new());
            for (_, m) in rows {
                for (k, v) in message::properties(m) {
                    b.keys().append_value(k);
                    b.values().append_value(v);
                }
                b.append(true)?;
            }
            let array = b.finish();
            if arrow::array::Array::data_type(&array) != data_type {
                bail!(
                    "metadata 'properties' must be MAP<STRING, STRING>, the column is {data_type}"
                );
            }
            Arc::new(array)
        }
        (key, _) if !READABLE_KEYS.contains(&key) => {
            bail!(
                "unknown metadata key '{key}' (the Pulsar connector reads {})",
                READABLE_KEYS.join(", ")
            )
        }
        (key, t) => bail!(
            "metadata '{key}' cannot be read as {t} (expected {})",
            expected_type(key)
        ),
    })
}

/// The Flink type a metadata key has.
pub fn expected_type(key: &str) -> &'static str {
    match key {
        "topic" => "STRING",
        "messageId" => "BYTES",
        "sequenceId" => "BIGINT",
        "publishTime" | "eventTime" => "TIMESTAMP_LTZ(3)",
        "properties" => "MAP<STRING, STRING>",
        _ => "no such key",
    }
}

fn timestamps(
    rows: &[Received<'_>],
    unit: TimeUnit,
    tz: Option<Arc<str>>,
    ms: impl Fn(&IncomingMessage) -> Option<u64>,
) -> ArrayRef {
    let values = rows.iter().map(|(_, m)| ms(m).map(|v| v as i64));
    match unit {
        TimeUnit::Second => {
            let mut b = TimestampSecondBuilder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.map(|v| v.div_euclid(1000))));
            Arc::new(b.finish().with_timezone_opt(tz))
        }
        TimeUnit::Millisecond => {
            let mut b = TimestampMillisecondBuilder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v));
            Arc::new(b.finish().with_timezone_opt(tz))
        }
        TimeUnit::Microsecond => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.map(|v| v * 1_000)));
            Arc::new(b.finish().with_timezone_opt(tz))
        }
        TimeUnit::Nanosecond => {
            let mut b = TimestampNanosecondBuilder::with_capacity(rows.len());
            values.for_each(|v| b.append_option(v.map(|v| v * 1_000_000)));
            Arc::new(b.finish().with_timezone_opt(tz))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field, Fields, TimestampMillisecondType};
    use magnetar::MessageId;
    use magnetar::proto::pb;

    fn msg(seq: u64, event_time: Option<u64>, props: &[(&str, &str)]) -> IncomingMessage {
        let metadata = pb::MessageMetadata {
            sequence_id: seq,
            publish_time: 1_700_000_000_123,
            event_time,
            properties: props
                .iter()
                .map(|(k, v)| pb::KeyValue {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            ..Default::default()
        };
        IncomingMessage {
            message_id: MessageId {
                ledger_id: 7,
                entry_id: seq,
                partition: 2,
                batch_index: -1,
                ..MessageId::EARLIEST
            },
            metadata: Arc::new(metadata),
            single_metadata: None,
            payload: bytes::Bytes::new(),
            redelivery_count: 0,
            broker_entry_metadata: None,
            arrived_at: std::time::Instant::now(),
        }
    }

    fn map_type() -> DataType {
        let entries = Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ]);
        DataType::Map(
            Arc::new(Field::new("entries", DataType::Struct(entries), false)),
            false,
        )
    }

    #[test]
    fn builds_every_readable_column() {
        let a = msg(1, Some(1_600_000_000_000), &[("k", "v"), ("x", "y")]);
        let b = msg(2, None, &[]);
        let rows = [
            ("persistent://public/default/t-partition-2", &a),
            ("persistent://public/default/t-partition-2", &b),
        ];
        let topic = metadata_column("topic", &DataType::Utf8, &rows).unwrap();
        assert_eq!(
            topic.as_string::<i32>().value(0),
            "persistent://public/default/t-partition-2"
        );
        let ids = metadata_column("messageId", &DataType::Binary, &rows).unwrap();
        let back = MessageId::from_bytes(ids.as_binary::<i32>().value(1)).unwrap();
        assert_eq!((back.ledger_id, back.entry_id, back.partition), (7, 2, 2));
        let seq = metadata_column("sequenceId", &DataType::Int64, &rows).unwrap();
        assert_eq!(
            seq.as_primitive::<arrow::datatypes::Int64Type>().values(),
            &[1, 2]
        );
        let ltz = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let et = metadata_column("eventTime", &ltz, &rows).unwrap();
        assert_eq!(et.data_type(), &ltz);
        let et = et.as_primitive::<TimestampMillisecondType>();
        assert_eq!((et.value(0), et.is_null(1)), (1_600_000_000_000, true));
        let pt = metadata_column(
            "publishTime",
            &DataType::Timestamp(TimeUnit::Microsecond, None),
            &rows,
        )
        .unwrap();
        assert_eq!(
            pt.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(0),
            1_700_000_000_123_000
        );
        let props = metadata_column("properties", &map_type(), &rows).unwrap();
        let props = props.as_map();
        assert_eq!((props.value_length(0), props.value_length(1)), (2, 0));
        assert_eq!(props.keys().as_string::<i32>().value(1), "x");
    }

    #[test]
    fn wrong_keys_and_types_are_named() {
        let a = msg(1, None, &[]);
        let rows = [("t", &a)];
        let e = metadata_column("offset", &DataType::Int64, &rows)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown metadata key 'offset'") && e.contains("messageId"),
            "{e}"
        );
        let e = metadata_column("sequenceId", &DataType::Utf8, &rows)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'sequenceId'") && e.contains("BIGINT"), "{e}");
    }
}
