//! The Pulsar connector's metadata columns — one table: each key with its Flink type, documentation, how
//! its column is read from received messages and (for writable keys) written into outgoing ones.
//!
//! | key | Flink type | read | written |
//! | --- | --- | --- | --- |
//! | `topic` | STRING | the topic the message was read from (a partition's own name) | – |
//! | `messageId` | BYTES | Pulsar's serialised `MessageIdData` (Java's `MessageId.toByteArray()`) | – |
//! | `sequenceId` | BIGINT | the producer's sequence id | – |
//! | `publishTime` | TIMESTAMP_LTZ(3) | publish time | – |
//! | `eventTime` | TIMESTAMP_LTZ(3) | the producer's event time; NULL when unset | when not NULL and not negative |
//! | `properties` | MAP<STRING, STRING> | the message properties | entries without NULLs |

use std::sync::{Arc, LazyLock};

use anyhow::{Result, anyhow, bail};
use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, Int64Builder, LargeBinaryBuilder, MapBuilder,
    MapFieldNames, RecordBatch, StringBuilder, TimestampMicrosecondBuilder,
    TimestampMillisecondBuilder, TimestampNanosecondBuilder, TimestampSecondBuilder,
};
use arrow::datatypes::{DataType, TimeUnit};
use magnetar::OutgoingMessage;
use magnetar::proto::event::IncomingMessage;

use super::layout::{ColumnSource, Layout};
use crate::connector_api::MetadataDecl;
use crate::pulsar::{message, message_id};

/// One message and the topic it was read from.
pub type Received<'a> = (&'a str, &'a IncomingMessage);

/// Reads a key's column over received messages as the column's declared type (`None`: the key cannot be
/// read as that type).
type Read = fn(&DataType, &[Received<'_>]) -> Result<Option<ArrayRef>>;
/// Writes a key's column (one value per row) into the rows' outgoing messages.
type Write = fn(&dyn Array, &mut [OutgoingMessage]) -> Result<()>;

/// A metadata key of the connector.
pub struct MetadataColumn {
    pub decl: MetadataDecl,
    read: Read,
    write: Option<Write>,
}

/// Every metadata key of the Pulsar connector.
pub static METADATA: &[MetadataColumn] = &[
    MetadataColumn {
        decl: MetadataDecl {
            key: "topic",
            flink_type: "STRING NOT NULL",
            readable: true,
            writable: false,
            doc: "The topic (partition) the message was read from.",
        },
        read: read_topic,
        write: None,
    },
    MetadataColumn {
        decl: MetadataDecl {
            key: "messageId",
            flink_type: "BYTES NOT NULL",
            readable: true,
            writable: false,
            doc: "Pulsar's serialized message id (`MessageId.toByteArray()` of the Java client).",
        },
        read: read_message_id,
        write: None,
    },
    MetadataColumn {
        decl: MetadataDecl {
            key: "sequenceId",
            flink_type: "BIGINT NOT NULL",
            readable: true,
            writable: false,
            doc: "The producer's sequence id.",
        },
        read: read_sequence_id,
        write: None,
    },
    MetadataColumn {
        decl: MetadataDecl {
            key: "publishTime",
            flink_type: "TIMESTAMP_LTZ(3) NOT NULL",
            readable: true,
            writable: false,
            doc: "Publish time.",
        },
        read: read_publish_time,
        write: None,
    },
    MetadataColumn {
        decl: MetadataDecl {
            key: "eventTime",
            flink_type: "TIMESTAMP_LTZ(3)",
            readable: true,
            writable: true,
            doc: "Event time; NULL when the producer set none (the reference shows 1970-01-01). Written when not NULL and not negative.",
        },
        read: read_event_time,
        write: Some(write_event_time),
    },
    MetadataColumn {
        decl: MetadataDecl {
            key: "properties",
            flink_type: "MAP<STRING, STRING>",
            readable: true,
            writable: true,
            doc: "Message properties. On write, entries with a NULL key or value are skipped.",
        },
        read: read_properties,
        write: Some(write_properties),
    },
];

/// The declarations of [`METADATA`], as the connector API lists them.
pub static DECLS: LazyLock<Vec<MetadataDecl>> =
    LazyLock::new(|| METADATA.iter().map(|m| m.decl.clone()).collect());

fn lookup(key: &str) -> Result<&'static MetadataColumn> {
    METADATA.iter().find(|m| m.decl.key == key).ok_or_else(|| {
        let keys: Vec<&str> = METADATA.iter().map(|m| m.decl.key).collect();
        anyhow!(
            "unknown metadata key '{key}' (the Pulsar connector reads {})",
            keys.join(", ")
        )
    })
}

/// Whether a metadata key is written to outgoing messages.
pub fn writable(key: &str) -> bool {
    lookup(key).is_ok_and(|m| m.write.is_some())
}

/// Checks that a column of metadata `key` declared as `declared` (the Flink type the user wrote, whose Arrow
/// type is `data_type`) can be read; the error names both Flink types.
pub fn check_type(key: &str, declared: &dyn std::fmt::Display, data_type: &DataType) -> Result<()> {
    let m = lookup(key)?;
    match (m.read)(data_type, &[]) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => bail!("metadata '{key}' is {}, not {declared}", m.decl.flink_type),
        Err(e) => Err(e),
    }
}

/// The column for metadata `key` over `rows`, as `data_type` (the column's declared type).
pub fn read_column(key: &str, data_type: &DataType, rows: &[Received<'_>]) -> Result<ArrayRef> {
    let m = lookup(key)?;
    (m.read)(data_type, rows)?.ok_or_else(|| {
        anyhow!(
            "metadata '{key}' cannot be read as {data_type} (expected {})",
            m.decl.flink_type
        )
    })
}

/// Writes the table's writable metadata columns of `batch` (in the sink layout) into `messages`, one per row.
pub fn write_columns(
    layout: &Layout,
    batch: &RecordBatch,
    messages: &mut [OutgoingMessage],
) -> Result<()> {
    for (i, c) in layout.sink.iter().enumerate() {
        if let ColumnSource::Metadata(key) = c
            && let Some(write) = lookup(key)?.write
        {
            write(batch.column(i).as_ref(), messages)?;
        }
    }
    Ok(())
}

fn read_topic(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    if t != &DataType::Utf8 {
        return Ok(None);
    }
    let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 48);
    for (topic, _) in rows {
        b.append_value(topic);
    }
    Ok(Some(Arc::new(b.finish())))
}

fn read_message_id(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    let ids = rows
        .iter()
        .map(|(_, m)| message_id::message_id_bytes(&m.message_id));
    Ok(match t {
        DataType::Binary => {
            let mut b = BinaryBuilder::with_capacity(rows.len(), rows.len() * 16);
            ids.for_each(|id| b.append_value(id));
            Some(Arc::new(b.finish()))
        }
        DataType::LargeBinary => {
            let mut b = LargeBinaryBuilder::with_capacity(rows.len(), rows.len() * 16);
            ids.for_each(|id| b.append_value(id));
            Some(Arc::new(b.finish()))
        }
        _ => None,
    })
}

fn read_sequence_id(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    if t != &DataType::Int64 {
        return Ok(None);
    }
    let mut b = Int64Builder::with_capacity(rows.len());
    for (_, m) in rows {
        b.append_value(message::sequence_id(m) as i64);
    }
    Ok(Some(Arc::new(b.finish())))
}

fn read_publish_time(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    Ok(match t {
        DataType::Timestamp(unit, tz) => Some(timestamps(rows, *unit, tz.clone(), |m| {
            Some(message::publish_time_ms(m))
        })),
        _ => None,
    })
}

fn read_event_time(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    Ok(match t {
        DataType::Timestamp(unit, tz) => {
            Some(timestamps(rows, *unit, tz.clone(), message::event_time_ms))
        }
        _ => None,
    })
}

fn read_properties(t: &DataType, rows: &[Received<'_>]) -> Result<Option<ArrayRef>> {
    let DataType::Map(entries, _) = t else {
        return Ok(None);
    };
    let (key_name, value_name) = match entries.data_type() {
        DataType::Struct(fields) if fields.len() == 2 => {
            (fields[0].name().clone(), fields[1].name().clone())
        }
        other => {
            bail!("metadata 'properties' must be MAP<STRING, STRING>, the entries are {other}")
        }
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
    if array.data_type() != t {
        bail!("metadata 'properties' must be MAP<STRING, STRING>, the column is {t}");
    }
    Ok(Some(Arc::new(array)))
}

/// `eventTime` in ms, where not NULL and not negative.
fn write_event_time(col: &dyn Array, messages: &mut [OutgoingMessage]) -> Result<()> {
    let ms: Vec<Option<i64>> = match col.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => col
            .as_primitive::<arrow::datatypes::TimestampSecondType>()
            .iter()
            .map(|v| v.map(|t| t.saturating_mul(1000)))
            .collect(),
        DataType::Timestamp(TimeUnit::Millisecond, _) => col
            .as_primitive::<arrow::datatypes::TimestampMillisecondType>()
            .iter()
            .collect(),
        DataType::Timestamp(TimeUnit::Microsecond, _) => col
            .as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
            .iter()
            .map(|v| v.map(|t| t.div_euclid(1_000)))
            .collect(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => col
            .as_primitive::<arrow::datatypes::TimestampNanosecondType>()
            .iter()
            .map(|v| v.map(|t| t.div_euclid(1_000_000)))
            .collect(),
        other => bail!("column of metadata 'eventTime' must be TIMESTAMP_LTZ(3), not {other}"),
    };
    for (m, t) in messages.iter_mut().zip(ms) {
        if let Some(t) = t.filter(|t| *t >= 0) {
            m.event_time_ms = Some(t as u64);
        }
    }
    Ok(())
}

/// `properties`: the map's entries, those with a NULL key or value skipped (as in the reference).
fn write_properties(col: &dyn Array, messages: &mut [OutgoingMessage]) -> Result<()> {
    let not_a_map = || anyhow!("column of metadata 'properties' must be MAP<STRING, STRING>");
    let map = col.as_map_opt().ok_or_else(not_a_map)?;
    let (Some(keys), Some(values)) = (
        map.keys().as_string_opt::<i32>(),
        map.values().as_string_opt::<i32>(),
    ) else {
        return Err(not_a_map());
    };
    let offsets = map.value_offsets();
    for (r, m) in messages.iter_mut().enumerate() {
        if map.is_null(r) {
            continue;
        }
        m.properties.extend(
            (offsets[r] as usize..offsets[r + 1] as usize)
                .filter(|&j| keys.is_valid(j) && values.is_valid(j))
                .map(|j| (keys.value(j).to_owned(), values.value(j).to_owned())),
        );
    }
    Ok(())
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
        let topic = read_column("topic", &DataType::Utf8, &rows).unwrap();
        assert_eq!(
            topic.as_string::<i32>().value(0),
            "persistent://public/default/t-partition-2"
        );
        let ids = read_column("messageId", &DataType::Binary, &rows).unwrap();
        let back = MessageId::from_bytes(ids.as_binary::<i32>().value(1)).unwrap();
        assert_eq!((back.ledger_id, back.entry_id, back.partition), (7, 2, 2));
        let seq = read_column("sequenceId", &DataType::Int64, &rows).unwrap();
        assert_eq!(
            seq.as_primitive::<arrow::datatypes::Int64Type>().values(),
            &[1, 2]
        );
        let ltz = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let et = read_column("eventTime", &ltz, &rows).unwrap();
        assert_eq!(et.data_type(), &ltz);
        let et = et.as_primitive::<TimestampMillisecondType>();
        assert_eq!((et.value(0), et.is_null(1)), (1_600_000_000_000, true));
        let pt = read_column(
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
        let props = read_column("properties", &map_type(), &rows).unwrap();
        let props = props.as_map();
        assert_eq!((props.value_length(0), props.value_length(1)), (2, 0));
        assert_eq!(props.keys().as_string::<i32>().value(1), "x");
    }

    #[test]
    fn wrong_keys_and_types_are_named() {
        let a = msg(1, None, &[]);
        let rows = [("t", &a)];
        let e = read_column("offset", &DataType::Int64, &rows)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown metadata key 'offset'") && e.contains("messageId"),
            "{e}"
        );
        let e = read_column("sequenceId", &DataType::Utf8, &rows)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'sequenceId'") && e.contains("BIGINT"), "{e}");
    }
}
