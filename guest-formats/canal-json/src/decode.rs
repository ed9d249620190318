//! Canal's envelope (`CanalJsonDeserializationSchema`): `INSERT` → a `+I` per `data` element, `DELETE` →
//! a `-D` per element, `UPDATE` → per element `i` a `-U` (`old[i]`, the fields `old` does not name taken
//! from `data[i]`) then a `+U` (`data[i]`); `CREATE` gives no row; any other type is an error.
//! `database.include` / `table.include` are tested first, on the raw names.

use format_changelog::{
    Envelope, Kind, Message, MetaKey, MetaType, MetaValue, RowKind, RowState, Span, Stop,
};
use regex_lite::Regex;

/// The readable metadata (`CanalJsonDecodingFormat.ReadableMetadata`).
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
        key: "sql-type",
        ty: MetaType::MapStringInt,
        doc: "the SQL type of each column: `sqlType`",
    },
    MetaKey {
        key: "pk-names",
        ty: MetaType::ArrayString,
        doc: "the primary key columns: `pkNames`",
    },
    MetaKey {
        key: "ingestion-timestamp",
        ty: MetaType::TimestampLtz3,
        doc: "when the connector processed the event: `ts` (milliseconds)",
    },
    MetaKey {
        key: "event-timestamp",
        ty: MetaType::TimestampLtz3,
        doc: "when the change was made in the database: `es` (milliseconds)",
    },
];

/// The canal-json envelope.
#[derive(Debug)]
pub struct Canal {
    pub(crate) database: Option<Regex>,
    pub(crate) table: Option<Regex>,
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
    sql_type: Option<Span>,
    pk_names: Option<Span>,
    ts: Option<Span>,
    es: Option<Span>,
}

fn npe(what: &str) -> Stop {
    Stop::Corrupt(format!("{what} is null (NullPointerException)"))
}

impl Envelope for Canal {
    fn name(&self) -> &'static str {
        "Canal"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        let root = m.doc().root();
        let mut f = Fields::default();
        m.doc()
            .fields(&root, |k, v| match k {
                b"data" => f.data = Some(v),
                b"old" => f.old = Some(v),
                b"type" => f.kind = Some(v),
                b"database" => f.database = Some(v),
                b"table" => f.table = Some(v),
                b"sqlType" => f.sql_type = Some(v),
                b"pkNames" => f.pk_names = Some(v),
                b"ts" => f.ts = Some(v),
                b"es" => f.es = Some(v),
                _ => {}
            })
            .map_err(Stop::Corrupt)?;
        // Flink filters on `root.get(name).asText()` before converting anything.
        for (what, re, v) in [
            ("database", &self.database, &f.database),
            ("table", &self.table, &f.table),
        ] {
            let Some(re) = re else { continue };
            let Some(v) = v else {
                return Err(npe(&format!("\"{what}\"")));
            };
            let name = m.as_text(v)?;
            if !re.is_match(&name) {
                return Err(Stop::Skip(format!("{what} '{name}' is not included")));
            }
        }
        if m.doc().kind(&root) != Kind::Object {
            return Err(Stop::Corrupt(
                "the message is not a JSON object (ClassCastException, NullPointerException)"
                    .into(),
            ));
        }
        let data = rows(m, "data", f.data.as_ref())?;
        let old = rows(m, "old", f.old.as_ref())?;
        let kind = m.string(f.kind.as_ref())?;
        let meta = self.metadata(m, &f)?;
        m.set_metadata(meta);
        let Some(kind) = kind else {
            return Err(npe("\"type\""));
        };
        match kind.as_str() {
            "INSERT" | "DELETE" => {
                let kind = if kind == "INSERT" {
                    RowKind::Insert
                } else {
                    RowKind::Delete
                };
                for o in old.iter().flatten() {
                    m.check(o)?;
                }
                let Some(data) = data else {
                    return Err(npe("\"data\""));
                };
                for d in &data {
                    m.emit(d, kind)?;
                }
                Ok(())
            }
            "UPDATE" => {
                let Some(data) = data else {
                    return Err(npe("\"data\""));
                };
                for o in old.iter().flatten().skip(data.len()) {
                    m.check(o)?;
                }
                for (i, d) in data.iter().enumerate() {
                    let (Some(old), Some(old_all)) = (&old, &f.old) else {
                        return Err(npe("\"old\""));
                    };
                    let Some(o) = old.get(i) else {
                        return Err(Stop::Corrupt(format!(
                            "Index {i} out of bounds for length {} (ArrayIndexOutOfBoundsException)",
                            old.len()
                        )));
                    };
                    m.emit_merged(old_all, o, d, RowKind::UpdateBefore)?;
                    m.emit(d, RowKind::UpdateAfter)?;
                }
                Ok(())
            }
            "CREATE" => {
                for r in data.iter().chain(old.iter()).flatten() {
                    m.check(r)?;
                }
                Err(Stop::Skip("a DDL message (type CREATE)".into()))
            }
            other => Err(Stop::Corrupt(format!(
                "Unknown \"type\" value \"{other}\"."
            ))),
        }
    }
}

/// The rows of list field `what` as Flink converts `ARRAY<ROW<..>>` (`None`: a null list).
fn rows(m: &Message<'_, '_>, what: &str, v: Option<&Span>) -> Result<Option<Vec<RowState>>, Stop> {
    let Some(elements) = m.array(what, v)? else {
        return Ok(None);
    };
    elements
        .iter()
        .map(|e| m.row(what, Some(e)))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

impl Canal {
    /// The metadata values of the message's rows.
    fn metadata(&self, m: &Message<'_, '_>, f: &Fields) -> Result<Vec<MetaValue>, Stop> {
        let json = |v: &Option<Span>| v.clone().map_or(MetaValue::Null, MetaValue::Json);
        self.keys
            .iter()
            .map(|&key| {
                Ok(match key {
                    "database" => json(&f.database),
                    "table" => json(&f.table),
                    "sql-type" => json(&f.sql_type),
                    "pk-names" => json(&f.pk_names),
                    "ingestion-timestamp" => m
                        .long(f.ts.as_ref())?
                        .map_or(MetaValue::Null, MetaValue::Millis),
                    "event-timestamp" => m
                        .long(f.es.as_ref())?
                        .map_or(MetaValue::Null, MetaValue::Millis),
                    _ => MetaValue::Null,
                })
            })
            .collect()
    }
}
