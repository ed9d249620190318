//! Which columns of a table travel in the message key, which in the value and which are metadata
//! (`key.fields`, `key.fields-prefix`, `value.fields-include`), with the reference's validation messages.

use std::sync::Arc;

use anyhow::{Result, bail};
use arrow::datatypes::{Field, Schema, SchemaRef};

use crate::connector_api::CatalogTable;
use crate::plugins::schema::plugin_field;
use crate::sql::{ColumnKind, FlinkType};

/// The prefix of a metadata key that the value format produces (`METADATA FROM 'value.source.table'`).
pub const FORMAT_METADATA_PREFIX: &str = "value.";

/// Where a column of the source (or sink) schema comes from (or goes to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnSource {
    /// Column `i` of the value format's rows (past the value columns: its metadata columns).
    Value(usize),
    /// Column `i` of the key format's rows.
    Key(usize),
    /// A metadata key.
    Metadata(String),
}

/// The table's split into key, value and metadata.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Schema of the value format's rows (physical columns in the value, table order).
    pub value_schema: SchemaRef,
    /// Schema of the key format's rows (key fields, prefix stripped, `key.fields` order); `None` without a key format.
    pub key_schema: Option<SchemaRef>,
    /// The value format's metadata keys the table reads (`value.` stripped, each once, in column order).
    pub value_metadata: Vec<String>,
    /// What the value decoder produces: `value_schema`'s columns, then one per `value_metadata` key.
    pub value_read_schema: SchemaRef,
    /// For each source column (physical + metadata, declaration order): where it comes from.
    pub source: Vec<ColumnSource>,
    /// For each sink column (physical + non-virtual metadata): where it goes.
    pub sink: Vec<ColumnSource>,
    /// Indices (into the sink columns) of the value columns, in value-schema order.
    pub sink_value_columns: Vec<usize>,
    /// Indices (into the sink columns) of the key columns, in key-schema order.
    pub sink_key_columns: Vec<usize>,
}

/// Splits a list option on `;` and `,` (the reference uses `;`, the vendor's document `,`).
pub fn split_list(value: &str) -> Vec<String> {
    value
        .split([';', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl Layout {
    /// `upsert`: the key fields are the primary key's columns (in its order), and a source reads them from
    /// the key whatever `value.fields-include` says (a tombstone has no value).
    pub fn of(table: &CatalogTable, upsert: bool) -> Result<Layout> {
        let o = &table.options;
        let physical: Vec<(&str, &FlinkType)> = table
            .def
            .columns
            .iter()
            .filter_map(|c| match &c.kind {
                ColumnKind::Physical(ty) => Some((c.name.as_str(), ty)),
                _ => None,
            })
            .collect();
        let key_format = o.get("key.format");
        let key_fields = match (&table.def.primary_key, upsert) {
            (Some(pk), true) => pk.clone(),
            _ => o.get("key.fields").map(split_list).unwrap_or_default(),
        };
        let prefix = o.get("key.fields-prefix").unwrap_or("");
        let except_key = o.get("value.fields-include") == Some("EXCEPT_KEY");
        // `'key.fields' = ''` is still a key-fields declaration (both peers refuse it without a key format).
        match (
            key_format.is_some(),
            key_fields.is_empty() && !o.contains("key.fields") && !upsert,
        ) {
            (true, _) if key_fields.is_empty() => bail!(
                "option 'key.format': a key format 'key.format' requires the declaration of one or more key fields using 'key.fields'"
            ),
            (false, false) => bail!(
                "option 'key.fields': the key fields are only used with a key format: set 'key.format' too"
            ),
            _ => {}
        }
        if !prefix.is_empty() && !except_key {
            bail!(
                "option 'key.fields-prefix': a key prefix is not allowed when option 'value.fields-include' is set to 'ALL'; set it to 'EXCEPT_KEY'"
            );
        }
        let mut key_indices = Vec::new();
        for k in &key_fields {
            let Some(i) = physical.iter().position(|(n, _)| n == k) else {
                let names: Vec<&str> = physical.iter().map(|(n, _)| *n).collect();
                bail!(
                    "option 'key.fields': '{k}' is not a physical column of the table (physical columns: {})",
                    names.join(", ")
                );
            };
            if !k.starts_with(prefix) {
                bail!(
                    "option 'key.fields': all fields in 'key.fields' must be prefixed with '{prefix}' when option 'key.fields-prefix' is set, but '{k}' is not"
                );
            }
            if key_indices.contains(&i) {
                bail!("option 'key.fields': '{k}' is listed twice");
            }
            key_indices.push(i);
        }
        let value_indices: Vec<usize> = (0..physical.len())
            .filter(|i| !(except_key && key_indices.contains(i)))
            .collect();
        if value_indices.is_empty() {
            bail!(
                "option 'value.fields-include': the value has no column left (every physical column is a key field); use 'ALL'"
            );
        }
        let value_schema = Arc::new(Schema::new(
            value_indices
                .iter()
                .map(|&i| plugin_field(physical[i].0, physical[i].1))
                .collect::<Vec<_>>(),
        ));
        let key_schema = key_format.map(|_| {
            Arc::new(Schema::new(
                key_indices
                    .iter()
                    .map(|&i| plugin_field(&physical[i].0[prefix.len()..], physical[i].1))
                    .collect::<Vec<_>>(),
            ))
        });
        let physical_at = |name: &str, key_first: bool| -> ColumnSource {
            let i = physical
                .iter()
                .position(|(n, _)| *n == name)
                .expect("a physical column");
            let key = key_indices.iter().position(|&k| k == i);
            match (value_indices.iter().position(|&v| v == i), key) {
                (_, Some(k)) if key_first => ColumnSource::Key(k),
                (Some(v), _) => ColumnSource::Value(v),
                (None, k) => ColumnSource::Key(k.unwrap_or(0)),
            }
        };
        let physical_source = |name: &str| physical_at(name, false);
        let mut value_metadata: Vec<String> = Vec::new();
        let mut read_fields: Vec<Field> = value_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let mut source = Vec::new();
        for c in table.source_columns() {
            let key = table.metadata_key(c).unwrap_or(&c.name);
            source.push(match &c.kind {
                ColumnKind::Physical(_) => physical_at(&c.name, upsert),
                ColumnKind::Metadata { ty, .. } => match key.strip_prefix(FORMAT_METADATA_PREFIX) {
                    Some(k) => {
                        let j = match value_metadata.iter().position(|m| m == k) {
                            Some(j) => j,
                            None => {
                                value_metadata.push(k.to_owned());
                                read_fields.push(plugin_field(k, ty));
                                value_metadata.len() - 1
                            }
                        };
                        ColumnSource::Value(value_schema.fields().len() + j)
                    }
                    None => ColumnSource::Metadata(key.to_owned()),
                },
                ColumnKind::Computed { .. } => ColumnSource::Metadata(key.to_owned()),
            });
        }
        let value_read_schema = Arc::new(Schema::new(read_fields));
        let sink_cols: Vec<_> = table.sink_columns().collect();
        let sink = sink_cols
            .iter()
            .map(|c| match &c.kind {
                ColumnKind::Physical(_) => physical_source(&c.name),
                _ => ColumnSource::Metadata(table.metadata_key(c).unwrap_or(&c.name).to_owned()),
            })
            .collect();
        let sink_index = |name: &str| sink_cols.iter().position(|c| c.name == name).unwrap_or(0);
        let sink_value_columns = value_indices
            .iter()
            .map(|&i| sink_index(physical[i].0))
            .collect();
        let sink_key_columns = key_indices
            .iter()
            .map(|&i| sink_index(physical[i].0))
            .collect();
        Ok(Layout {
            value_schema,
            key_schema,
            value_metadata,
            value_read_schema,
            source,
            sink,
            sink_value_columns,
            sink_key_columns,
        })
    }
}
