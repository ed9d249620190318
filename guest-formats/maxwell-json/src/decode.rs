//! Maxwell's envelope (`MaxwellJsonDeserializationSchema`): `insert` → `+I` of `data`, `delete` → `-D`
//! of `data`, `update` → `-U` (`old`, the fields `old` does not name taken from `data`) then `+U`
//! (`data`); any other type (`bootstrap-*`, DDL, upper case) is an error.

use format_changelog::{
    Envelope, Message, MetaKey, MetaType, MetaValue, RowKind, RowState, Stop, metadata,
};

/// The readable metadata (`MaxwellJsonDecodingFormat.ReadableMetadata`).
pub const METADATA: &[MetaKey] = &[
    metadata::DATABASE,
    metadata::TABLE,
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
pub struct Maxwell;

impl Envelope for Maxwell {
    fn name(&self) -> &'static str {
        "Maxwell"
    }

    fn rows(&self, m: &mut Message<'_, '_>) -> Result<(), Stop> {
        m.check_root_object()?;
        let [
            data,
            old_all,
            kind,
            database,
            table,
            primary_key_columns,
            ts,
        ] = m.get_all(
            &m.doc().root(),
            [
                "data",
                "old",
                "type",
                "database",
                "table",
                "primary_key_columns",
                "ts",
            ],
        )?;
        let data = m.row("data", data.as_ref())?;
        let old = m.row("old", old_all.as_ref())?;
        let kind = m.string(kind.as_ref())?;
        m.set_metadata(|m, key| {
            Ok(match key {
                "database" => MetaValue::json(database.as_ref()),
                "table" => MetaValue::json(table.as_ref()),
                "primary-key-columns" => MetaValue::json(primary_key_columns.as_ref()),
                // Seconds.
                "ingestion-timestamp" => m.timestamp(ts.as_ref(), 1000)?,
                _ => MetaValue::Null,
            })
        })?;
        let Some(kind) = kind else {
            return Err(Stop::npe("\"type\""));
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
                let (RowState::Object(_), Some(old_all)) = (&old, &old_all) else {
                    return Err(Stop::npe("\"old\" (the row before the update)"));
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
