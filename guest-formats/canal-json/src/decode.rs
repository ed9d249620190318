//! Canal's envelope (`CanalJsonDeserializationSchema`): `INSERT` → a `+I` per `data` element, `DELETE` →
//! a `-D` per element, `UPDATE` → per element `i` a `-U` (`old[i]`, the fields `old` does not name taken
//! from `data[i]`) then a `+U` (`data[i]`); `CREATE` gives no row; any other type is an error.
//! `database.include` / `table.include` are tested first, on the raw names.

use format_changelog::{
    Envelope, Message, MetaKey, MetaType, MetaValue, RowKind, RowState, Span, Stop, metadata,
};
use regex_lite::Regex;

/// The readable metadata (`CanalJsonDecodingFormat.ReadableMetadata`).
pub const METADATA: &[MetaKey] = &[
    metadata::DATABASE,
    metadata::TABLE,
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
}

impl Envelope for Canal {
    fn name(&self) -> &'static str {
        "Canal"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        let root = m.doc().root();
        let [
            data,
            old_all,
            kind,
            database,
            table,
            sql_type,
            pk_names,
            ts,
            es,
        ] = m.get_all(
            &root,
            [
                "data", "old", "type", "database", "table", "sqlType", "pkNames", "ts", "es",
            ],
        )?;
        // Flink filters on `root.get(name).asText()` before converting anything.
        for (what, re, v) in [
            ("database", &self.database, &database),
            ("table", &self.table, &table),
        ] {
            let Some(re) = re else { continue };
            let Some(v) = v else {
                return Err(Stop::npe(&format!("\"{what}\"")));
            };
            let name = m.as_text(v)?;
            if !re.is_match(&name) {
                return Err(Stop::Skip(format!("{what} '{name}' is not included")));
            }
        }
        m.check_root_object()?;
        let data = rows(m, "data", data.as_ref())?;
        let old = rows(m, "old", old_all.as_ref())?;
        let kind = m.string(kind.as_ref())?;
        m.set_metadata(|m, key| {
            Ok(match key {
                "database" => MetaValue::json(database.as_ref()),
                "table" => MetaValue::json(table.as_ref()),
                "sql-type" => MetaValue::json(sql_type.as_ref()),
                "pk-names" => MetaValue::json(pk_names.as_ref()),
                "ingestion-timestamp" => m.timestamp(ts.as_ref(), 1)?,
                "event-timestamp" => m.timestamp(es.as_ref(), 1)?,
                _ => MetaValue::Null,
            })
        })?;
        let Some(kind) = kind else {
            return Err(Stop::npe("\"type\""));
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
                    return Err(Stop::npe("\"data\""));
                };
                for d in &data {
                    m.emit(d, kind)?;
                }
                Ok(())
            }
            "UPDATE" => {
                let Some(data) = data else {
                    return Err(Stop::npe("\"data\""));
                };
                for o in old.iter().flatten().skip(data.len()) {
                    m.check(o)?;
                }
                for (i, d) in data.iter().enumerate() {
                    let (Some(old), Some(old_all)) = (&old, &old_all) else {
                        return Err(Stop::npe("\"old\""));
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
