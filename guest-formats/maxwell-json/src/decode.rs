//! Maxwell's envelope (`MaxwellJsonDeserializationSchema`): `insert` → `+I` of `data`, `delete` → `-D`
//! of `data`, `update` → `-U` (`old`, the fields `old` does not name taken from `data`) then `+U`
//! (`data`); any other type (`bootstrap-*`, DDL, upper case) is an error.

use format_changelog::{
    Envelope, Kind, Message, MetaKey, MetaType, MetaValue, RowKind, RowState, Span, Stop,
};

/// The readable metadata (`MaxwellJsonDecodingFormat.ReadableMetadata`).
pub const METADATA: &[MetaKey] = &[
    MetaKey {
        key: "database",
        ty: MetaType::String,
        doc: "the originating database: `database`",
    },
    MetaKey {
        key: "table",
        ty: MetaType::String,
        doc: "the originating table: `table`",
    },
    MetaKey {
        key: "primary-key-columns",
        ty: MetaType::ArrayString,
        doc: "the primary key columns: `primary_key_columns`",
    },
    MetaKey {
        key: "ingestion-timestamp",
        ty: MetaType::TimestampLtz3,
        doc: "when the connector processed the event: `ts` (seconds, times 1000)",
    },
];

/// The maxwell-json envelope.
#[derive(Debug)]
pub struct Maxwell {
    /// The metadata keys asked for, in order.
    pub(crate) keys: Vec<&'static str>,
}

/// The message's fields (the last of a repeated key).
#[derive(Default)]
struct Fields {
    data: Option<Span>,
    old: Option<Span>,
    kind: Option<Span>,
    database: Option<Span>,
    table: Option<Span>,
    primary_key_columns: Option<Span>,
    ts: Option<Span>,
}

fn npe(what: &str) -> Stop {
    Stop::Corrupt(format!("{what} is null (NullPointerException)"))
}

impl Envelope for Maxwell {
    fn name(&self) -> &'static str {
        "Maxwell"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        let root = m.doc().root();
        if m.doc().kind(&root) != Kind::Object {
            return Err(Stop::Corrupt(
                "the message is not a JSON object (ClassCastException, NullPointerException)"
                    .into(),
            ));
        }
        let mut f = Fields::default();
        m.doc()
            .fields(&root, |k, v| match k {
                b"data" => f.data = Some(v),
                b"old" => f.old = Some(v),
                b"type" => f.kind = Some(v),
                b"database" => f.database = Some(v),
                b"table" => f.table = Some(v),
                b"primary_key_columns" => f.primary_key_columns = Some(v),
                b"ts" => f.ts = Some(v),
                _ => {}
            })
            .map_err(Stop::Corrupt)?;
        let data = m.row("data", f.data.as_ref())?;
        let old = m.row("old", f.old.as_ref())?;
        let kind = m.string(f.kind.as_ref())?;
        let meta = self.metadata(m, &f)?;
        m.set_metadata(meta);
        let Some(kind) = kind else {
            return Err(npe("\"type\""));
        };
        match kind.as_str() {
            "insert" => {
                m.check(&old)?;
                m.emit(&data, RowKind::Insert)
            }
            "delete" => {
                m.check(&old)?;
                m.emit(&data, RowKind::Delete)
            }
            "update" => {
                let (RowState::Object(_), Some(old_all)) = (&old, &f.old) else {
                    return Err(npe("\"old\" (the row before the update)"));
                };
                m.emit_merged(old_all, &old, &data, RowKind::UpdateBefore)?;
                m.emit(&data, RowKind::UpdateAfter)
            }
            other => Err(Stop::Corrupt(format!(
                "Unknown \"type\" value \"{other}\"."
            ))),
        }
    }
}

impl Maxwell {
    /// The metadata values of the message's rows.
    fn metadata(&self, m: &Message<'_, '_>, f: &Fields) -> Result<Vec<MetaValue>, Stop> {
        let json = |v: &Option<Span>| v.clone().map_or(MetaValue::Null, MetaValue::Json);
        self.keys
            .iter()
            .map(|&key| {
                Ok(match key {
                    "database" => json(&f.database),
                    "table" => json(&f.table),
                    "primary-key-columns" => json(&f.primary_key_columns),
                    // Seconds; Java's `long` multiplication wraps.
                    "ingestion-timestamp" => m
                        .long(f.ts.as_ref())?
                        .map_or(MetaValue::Null, |s| MetaValue::Millis(s.wrapping_mul(1000))),
                    _ => MetaValue::Null,
                })
            })
            .collect()
    }
}
