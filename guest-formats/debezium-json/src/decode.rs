//! Debezium's envelope (`DebeziumJsonDeserializationSchema`): `op` `c`/`r` → `+I` of `after`, `u` → `-U`
//! of `before` then `+U` of `after`, `d` → `-D` of `before`; with `schema-include` the envelope is the
//! message's `payload` (Kafka Connect's `{"schema": .., "payload": ..}`).

use format_changelog::{
    Envelope, Kind, Message, MetaKey, MetaType, MetaValue, RowKind, RowState, Span, Stop,
};

/// The readable metadata (`DebeziumJsonDecodingFormat.ReadableMetadata`).
pub const METADATA: &[MetaKey] = &[
    MetaKey {
        key: "schema",
        ty: MetaType::String,
        doc: "the message's `schema` as JSON text (with schema-include; NULL otherwise)",
    },
    MetaKey {
        key: "ingestion-timestamp",
        ty: MetaType::TimestampLtz3,
        doc: "when the connector processed the event: `ts_ms`",
    },
    MetaKey {
        key: "source.timestamp",
        ty: MetaType::TimestampLtz3,
        doc: "when the change was made in the database: `source.ts_ms`",
    },
    MetaKey {
        key: "source.database",
        ty: MetaType::String,
        doc: "the originating database: `source.db`",
    },
    MetaKey {
        key: "source.schema",
        ty: MetaType::String,
        doc: "the originating schema: `source.schema`",
    },
    MetaKey {
        key: "source.table",
        ty: MetaType::String,
        doc: "the originating table: `source.table`",
    },
    MetaKey {
        key: "source.properties",
        ty: MetaType::MapStringString,
        doc: "the whole `source` object (nested values as JSON text)",
    },
];

/// The debezium-json envelope.
#[derive(Debug)]
pub struct Debezium {
    pub(crate) schema_include: bool,
}

fn replica_identity(what: &str) -> Stop {
    Stop::Corrupt(format!(
        "The \"before\" field of {what} message is null, if you are using Debezium Postgres Connector, please check the Postgres table has been set REPLICA IDENTITY to FULL level."
    ))
}

impl Envelope for Debezium {
    fn name(&self) -> &'static str {
        "Debezium"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        let root = m.doc().root();
        match m.doc().kind(&root) {
            Kind::Object => {}
            Kind::Null => return Err(Stop::npe("the message")),
            _ => {
                return Err(Stop::Corrupt(
                    "not a JSON object (ClassCastException)".into(),
                ));
            }
        }
        let payload = if self.schema_include {
            match m.row("payload", m.get(&root, "payload")?.as_ref())? {
                RowState::Object(p) => p,
                RowState::Null => return Err(Stop::npe("\"payload\"")),
            }
        } else {
            root.clone()
        };
        let [before, after, op, ts_ms, source] =
            m.get_all(&payload, ["before", "after", "op", "ts_ms", "source"])?;
        let before = m.row("before", before.as_ref())?;
        let after = m.row("after", after.as_ref())?;
        let op = m.string(op.as_ref())?;
        m.set_metadata(|m, key| metadata(m, key, &root, ts_ms.as_ref(), source.as_ref()))?;
        let Some(op) = op else {
            return Err(Stop::npe("\"op\""));
        };
        match op.as_str() {
            "c" | "r" => {
                m.check(&before)?;
                if after == RowState::Null {
                    return Err(Stop::npe("\"after\""));
                }
                m.emit(&after, RowKind::Insert)
            }
            "u" => {
                if before == RowState::Null {
                    return Err(replica_identity("UPDATE"));
                }
                if after == RowState::Null {
                    return Err(Stop::npe("\"after\""));
                }
                m.emit(&before, RowKind::UpdateBefore)?;
                m.emit(&after, RowKind::UpdateAfter)
            }
            "d" => {
                if before == RowState::Null {
                    return Err(replica_identity("DELETE"));
                }
                m.check(&after)?;
                m.emit(&before, RowKind::Delete)
            }
            other => Err(Stop::Corrupt(format!("Unknown \"op\" value \"{other}\"."))),
        }
    }
}

/// The value of metadata `key` for the rows of the message at `root` (`ts_ms`, `source`: its
/// payload's fields). `source` is read as Flink reads it, a MAP<STRING, STRING> (anything but an
/// object is an empty map).
fn metadata(
    m: &Message<'_, '_>,
    key: &str,
    root: &Span,
    ts_ms: Option<&Span>,
    source: Option<&Span>,
) -> Result<MetaValue, Stop> {
    let source_field = |name: &str| -> Result<Option<Span>, Stop> {
        match source {
            Some(s) if m.doc().kind(s) == Kind::Object => m.get(s, name),
            _ => Ok(None),
        }
    };
    Ok(match key {
        "schema" => MetaValue::json(m.get(root, "schema")?.as_ref()),
        "ingestion-timestamp" => m.timestamp(ts_ms, 1)?,
        "source.timestamp" => match m.string(source_field("ts_ms")?.as_ref())? {
            None => MetaValue::Null,
            Some(t) => MetaValue::Millis(parse_long(&t).ok_or_else(|| {
                Stop::Corrupt(format!("For input string: \"{t}\" (NumberFormatException)"))
            })?),
        },
        "source.database" => MetaValue::json(source_field("db")?.as_ref()),
        "source.schema" => MetaValue::json(source_field("schema")?.as_ref()),
        "source.table" => MetaValue::json(source_field("table")?.as_ref()),
        "source.properties" => MetaValue::json(source),
        _ => MetaValue::Null,
    })
}

/// Java's `Long.parseLong`: an optional sign and decimal digits.
fn parse_long(s: &str) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = digits.parse().ok()?;
    i64::try_from(if neg { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::parse_long;

    #[test]
    fn longs_parse_as_java() {
        assert_eq!(parse_long("1589362330000"), Some(1_589_362_330_000));
        assert_eq!(parse_long("+1"), Some(1));
        assert_eq!(parse_long("-9223372036854775808"), Some(i64::MIN));
        for bad in ["", "-", "yesterday", " 1", "1.5", "9223372036854775808"] {
            assert_eq!(parse_long(bad), None, "{bad}");
        }
    }
}
