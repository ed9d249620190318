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
    /// The metadata keys asked for, in order.
    pub(crate) keys: Vec<&'static str>,
}

/// The envelope's fields (the last of a repeated key).
#[derive(Default)]
struct Fields {
    before: Option<Span>,
    after: Option<Span>,
    op: Option<Span>,
    ts_ms: Option<Span>,
    source: Option<Span>,
}

fn replica_identity(what: &str) -> Stop {
    Stop::Corrupt(format!(
        "The \"before\" field of {what} message is null, if you are using Debezium Postgres Connector, please check the Postgres table has been set REPLICA IDENTITY to FULL level."
    ))
}

fn npe(what: &str) -> Stop {
    Stop::Corrupt(format!("{what} is null (NullPointerException)"))
}

impl Envelope for Debezium {
    fn name(&self) -> &'static str {
        "Debezium"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        let root = m.doc().root();
        match m.doc().kind(&root) {
            Kind::Object => {}
            Kind::Null => return Err(npe("the message")),
            _ => {
                return Err(Stop::Corrupt(
                    "not a JSON object (ClassCastException)".into(),
                ));
            }
        }
        let payload = if self.schema_include {
            match m.row("payload", m.get(&root, "payload")?.as_ref())? {
                RowState::Object(p) => p,
                RowState::Null => return Err(npe("\"payload\"")),
            }
        } else {
            root.clone()
        };
        let mut f = Fields::default();
        m.doc()
            .fields(&payload, |k, v| match k {
                b"before" => f.before = Some(v),
                b"after" => f.after = Some(v),
                b"op" => f.op = Some(v),
                b"ts_ms" => f.ts_ms = Some(v),
                b"source" => f.source = Some(v),
                _ => {}
            })
            .map_err(Stop::Corrupt)?;
        let before = m.row("before", f.before.as_ref())?;
        let after = m.row("after", f.after.as_ref())?;
        let op = m.string(f.op.as_ref())?;
        let meta = self.metadata(m, &root, &f)?;
        m.set_metadata(meta);
        let Some(op) = op else {
            return Err(npe("\"op\""));
        };
        match op.as_str() {
            "c" | "r" => {
                m.check(&before)?;
                if after == RowState::Null {
                    return Err(npe("\"after\""));
                }
                m.emit(&after, RowKind::Insert)
            }
            "u" => {
                if before == RowState::Null {
                    return Err(replica_identity("UPDATE"));
                }
                if after == RowState::Null {
                    return Err(npe("\"after\""));
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

impl Debezium {
    /// The metadata values of the message's rows. `source` is read as Flink reads it, a
    /// MAP<STRING, STRING> (anything but an object is an empty map).
    fn metadata(
        &self,
        m: &Message<'_, '_>,
        root: &Span,
        f: &Fields,
    ) -> Result<Vec<MetaValue>, Stop> {
        let json = |v: Option<Span>| v.map_or(MetaValue::Null, MetaValue::Json);
        let source = |key: &str| -> Result<Option<Span>, Stop> {
            match &f.source {
                Some(s) if m.doc().kind(s) == Kind::Object => m.get(s, key),
                _ => Ok(None),
            }
        };
        self.keys
            .iter()
            .map(|&key| {
                Ok(match key {
                    "schema" => json(m.get(root, "schema")?),
                    "ingestion-timestamp" => m
                        .long(f.ts_ms.as_ref())?
                        .map_or(MetaValue::Null, MetaValue::Millis),
                    "source.timestamp" => match m.string(source("ts_ms")?.as_ref())? {
                        None => MetaValue::Null,
                        Some(t) => MetaValue::Millis(parse_long(&t).ok_or_else(|| {
                            Stop::Corrupt(format!(
                                "For input string: \"{t}\" (NumberFormatException)"
                            ))
                        })?),
                    },
                    "source.database" => json(source("db")?),
                    "source.schema" => json(source("schema")?),
                    "source.table" => json(source("table")?),
                    "source.properties" => json(f.source.clone()),
                    _ => MetaValue::Null,
                })
            })
            .collect()
    }
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
