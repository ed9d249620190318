//! The broker-side schema a sink registers: with a `json` or `avro` value format (a format whose manifest
//! says `pulsar-schema`), the Avro schema Flink's `AvroSchemaConverter` derives from the value row type,
//! announced with the producer as type JSON or AVRO — what the reference connector does. The broker stores
//! it on a schema-less topic and refuses the producer when the topic's schema is incompatible.

use anyhow::{Context as _, Result};
use arrow::datatypes::Schema;
use magnetar::proto::pb;

use crate::plugins::PulsarSchema;
use crate::plugins::model::{self, DataType};

/// The schema to announce for a value row type.
pub fn pulsar_schema(kind: PulsarSchema, value: &Schema) -> Result<pb::Schema> {
    let row = crate::plugins::schema::row_type_from_arrow(value)
        .context("deriving the topic schema from the table's value columns")?;
    let ty = match kind {
        PulsarSchema::Json => pb::schema::Type::Json,
        PulsarSchema::Avro => pb::schema::Type::Avro,
    };
    Ok(pb::Schema {
        name: String::new(),
        schema_data: avro_schema_json(&row).into_bytes().into(),
        r#type: ty as i32,
        properties: vec![
            // What the Java client announces for its JSON/AVRO schemas.
            pb::KeyValue {
                key: "__alwaysAllowNull".into(),
                value: "true".into(),
            },
            pb::KeyValue {
                key: "__jsr310ConversionEnabled".into(),
                value: "false".into(),
            },
        ],
    })
}

/// The Avro schema (JSON text) Flink derives for `row` (the derivation the avro format writes with).
pub fn avro_schema_json(row: &model::RowType) -> String {
    avro_schema::schema_json(&View(row))
}

avro_schema::row_type_view!(View for model::RowType, DataType);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{Statement, parse_script};

    fn golden(path: &str) -> String {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/vectors");
        std::fs::read_to_string(root.join(path)).unwrap()
    }

    /// The schema Flink 1.18 derives for the golden all-types table, byte for byte in meaning.
    #[test]
    fn matches_flinks_avro_schema_converter() {
        let vectors: serde_json::Value =
            serde_json::from_str(&golden("avro/decode-default.json")).unwrap();
        let columns: Vec<String> = vectors["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "`{}` {}",
                    c["name"].as_str().unwrap(),
                    c["type"].as_str().unwrap()
                )
            })
            .collect();
        let sql = format!(
            "CREATE TABLE t ({}) WITH ('connector' = 'blackhole');",
            columns.join(", ")
        );
        let Statement::CreateTable(def) = parse_script(&sql).unwrap().remove(0) else {
            panic!("not a CREATE TABLE")
        };
        let fields: Vec<_> = def
            .columns
            .iter()
            .map(crate::connector_api::column_field)
            .collect();
        let schema = pulsar_schema(PulsarSchema::Avro, &Schema::new(fields)).unwrap();
        let ours: serde_json::Value = serde_json::from_slice(&schema.schema_data).unwrap();
        let flink: serde_json::Value =
            serde_json::from_str(&golden("avro/all-types.avsc")).unwrap();
        assert_eq!(ours, flink);
        assert_eq!(schema.r#type, pb::schema::Type::Avro as i32);
    }
}
