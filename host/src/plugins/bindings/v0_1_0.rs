//! Bindings of `pulsar-connect:plugin@0.1.0` (frozen: generated from `wit/v0.1.0`) and their
//! conversion into the host's [`model`](crate::plugins::model). The only place that knows 0.1.0's
//! conventions: a row error whose reason starts with [`SKIPPED`] is a skip.

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker, ResourceAny};

use super::{FormatComponent, FormatInstance, RouterComponent, RouterInstance};
use crate::plugins::model as m;
use crate::plugins::state::PluginState;

/// The WIT version of this module.
pub const VERSION: &str = "0.1.0";

/// Prefix of a row error's reason that marks a skip (the format returned no row and no error in
/// Flink's terms). The guest side is `pulsar_connect_plugin::SKIPPED`.
pub const SKIPPED: &str = "skipped: ";

pub mod format {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "format",
    });
}

pub mod router {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "router",
        with: {
            "pulsar-connect:plugin/types": super::format::pulsar_connect::plugin::types,
            "pulsar-connect:plugin/log": super::format::pulsar_connect::plugin::log,
        },
    });
}

pub use format::pulsar_connect::plugin::log;
pub use format::pulsar_connect::plugin::types;
use types as w;

version_common!(VERSION);

// ---- the worlds ----

struct Router(router::RouterPre<PluginState>);
struct RouterExports(router::Router);

pub(super) fn router_component(
    pre: InstancePre<PluginState>,
) -> anyhow::Result<Box<dyn RouterComponent>> {
    Ok(Box::new(Router(
        router::RouterPre::new(pre).map_err(|e| anyhow::anyhow!("{e:#}"))?,
    )))
}

impl FormatInstance for FormatExports {
    fn create_decoder(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
        row_type: &m::RowType,
        metadata: &[String],
    ) -> wasmtime::Result<Result<ResourceAny, m::ConfigError>> {
        if let Some(key) = metadata.first() {
            return Ok(Err(m::ConfigError {
                option: None,
                message: format!(
                    "metadata key '{key}': a WIT {VERSION} format has no readable metadata"
                ),
            }));
        }
        let created = self.0.pulsar_connect_plugin_codec().call_create_decoder(
            store,
            options,
            &row_type_to_wit(row_type),
        )?;
        Ok(created.map_err(config_error))
    }

    fn create_encoder(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
        row_type: &m::RowType,
    ) -> wasmtime::Result<Result<ResourceAny, m::ConfigError>> {
        let created = self.0.pulsar_connect_plugin_codec().call_create_encoder(
            store,
            options,
            &row_type_to_wit(row_type),
        )?;
        Ok(created.map_err(config_error))
    }

    fn decode_batch(
        &self,
        store: &mut Store<PluginState>,
        decoder: ResourceAny,
        messages: m::MessageBatch,
    ) -> wasmtime::Result<Result<m::DecodedBatch, String>> {
        let decoded = self
            .0
            .pulsar_connect_plugin_codec()
            .decoder()
            .call_decode_batch(store, decoder, &message_batch_into_wit(messages))?;
        Ok(decoded.map(|d| m::DecodedBatch {
            rows: column_batch_from_wit(d.rows),
            messages: None,
            kinds: None,
            errors: row_errors_from_wit(d.errors),
        }))
    }

    fn encode_batch(
        &self,
        store: &mut Store<PluginState>,
        encoder: ResourceAny,
        rows: m::ColumnBatch,
        kinds: Option<&[m::RowKind]>,
    ) -> wasmtime::Result<Result<m::EncodedBatch, String>> {
        if let Some(k) = kinds.and_then(|k| k.iter().find(|k| **k != m::RowKind::Insert)) {
            return Ok(Err(format!(
                "a WIT {VERSION} format writes inserts only, not {} rows",
                k.short_string()
            )));
        }
        let encoded = self
            .0
            .pulsar_connect_plugin_codec()
            .encoder()
            .call_encode_batch(store, encoder, &column_batch_to_wit(rows))?;
        Ok(encoded.map(|e| m::EncodedBatch {
            payloads: e.payloads,
            offsets: e.offsets,
            absent: None,
            errors: encoder_errors_from_wit(e.errors),
        }))
    }
}

impl RouterComponent for Router {
    fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Box<dyn RouterInstance>> {
        Ok(Box::new(RouterExports(self.0.instantiate(store)?)))
    }
}

impl RouterInstance for RouterExports {
    fn create_router(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
    ) -> wasmtime::Result<Result<ResourceAny, m::ConfigError>> {
        let created = self
            .0
            .pulsar_connect_plugin_routing()
            .call_create_router(store, options)?;
        Ok(created.map_err(config_error))
    }

    fn route_batch(
        &self,
        store: &mut Store<PluginState>,
        router: ResourceAny,
        keys: &m::KeyBatch,
        properties: Option<&m::PropertyBatch>,
        partitions: u32,
    ) -> wasmtime::Result<Vec<u32>> {
        let properties = properties.map(property_batch_to_wit);
        self.0
            .pulsar_connect_plugin_routing()
            .router()
            .call_route_batch(
                store,
                router,
                &key_batch_to_wit(keys),
                properties.as_ref(),
                partitions,
            )
    }
}

// ---- model ⇄ 0.1.0 (0.2.0 shares these types: `bindings::v0_2_0` uses the conversions too) ----

pub(super) fn config_error(e: w::ConfigError) -> m::ConfigError {
    m::ConfigError {
        option: e.option,
        message: e.message,
    }
}

/// Skips are a decoding notion: an encoder's reasons are kept as they are.
pub(super) fn encoder_errors_from_wit(errors: Vec<w::RowError>) -> Vec<m::RowError> {
    errors
        .into_iter()
        .map(|e| m::RowError {
            index: e.index,
            reason: e.reason,
            skip: false,
        })
        .collect()
}

/// A decoder's reason starting with [`SKIPPED`] is a skip; the flag replaces the prefix.
pub(super) fn row_errors_from_wit(errors: Vec<w::RowError>) -> Vec<m::RowError> {
    errors
        .into_iter()
        .map(|e| match e.reason.strip_prefix(SKIPPED) {
            Some(reason) => m::RowError {
                index: e.index,
                reason: reason.to_owned(),
                skip: true,
            },
            None => m::RowError {
                index: e.index,
                reason: e.reason,
                skip: false,
            },
        })
        .collect()
}

pub(super) fn row_type_to_wit(row: &m::RowType) -> w::RowType {
    w::RowType {
        types: row
            .types
            .iter()
            .map(|t| w::TypeNode {
                data_type: data_type_to_wit(&t.data_type),
                nullable: t.nullable,
            })
            .collect(),
        fields: fields_to_wit(&row.fields),
    }
}

fn fields_to_wit(fields: &[m::Field]) -> Vec<w::Field> {
    fields
        .iter()
        .map(|f| w::Field {
            name: f.name.clone(),
            type_index: f.type_index,
        })
        .collect()
}

fn data_type_to_wit(t: &m::DataType) -> w::DataType {
    use m::DataType as M;
    use w::DataType as W;
    match t {
        M::Boolean => W::Boolean,
        M::Tinyint => W::Tinyint,
        M::Smallint => W::Smallint,
        M::Int => W::Int,
        M::Bigint => W::Bigint,
        M::Float => W::Float,
        M::Double => W::Double,
        M::Decimal(d) => W::Decimal(w::DecimalType {
            precision: d.precision,
            scale: d.scale,
        }),
        M::Char(n) => W::Char(*n),
        M::Varchar(n) => W::Varchar(*n),
        M::Binary(n) => W::Binary(*n),
        M::Varbinary(n) => W::Varbinary(*n),
        M::Date => W::Date,
        M::Time(p) => W::Time(*p),
        M::Timestamp(p) => W::Timestamp(*p),
        M::TimestampLtz(p) => W::TimestampLtz(*p),
        M::Array(e) => W::Array(*e),
        M::Map(k) => W::Map(w::MapType {
            key: k.key,
            value: k.value,
        }),
        M::Row(fields) => W::Row(fields_to_wit(fields)),
    }
}

pub(super) fn column_batch_to_wit(batch: m::ColumnBatch) -> w::ColumnBatch {
    use m::ColumnData as M;
    use w::ColumnData as W;
    w::ColumnBatch {
        row_count: batch.row_count,
        columns: batch
            .columns
            .into_iter()
            .map(|c| w::Column {
                validity: c.validity,
                data: match c.data {
                    M::Bits(v) => W::Bits(v),
                    M::Int8(v) => W::Int8(v),
                    M::Int16(v) => W::Int16(v),
                    M::Int32(v) => W::Int32(v),
                    M::Int64(v) => W::Int64(v),
                    M::Float32(v) => W::Float32(v),
                    M::Float64(v) => W::Float64(v),
                    M::Decimal128(v) => W::Decimal128(v),
                    M::Bytes(b) => W::Bytes(w::ByteColumn {
                        data: b.data,
                        offsets: b.offsets,
                    }),
                    M::List(l) => W::List(w::ListColumn {
                        offsets: l.offsets,
                        child: l.child,
                    }),
                    M::Map(x) => W::Map(w::MapColumn {
                        offsets: x.offsets,
                        keys: x.keys,
                        values: x.values,
                    }),
                    M::Row(v) => W::Row(v),
                },
            })
            .collect(),
    }
}

pub(super) fn column_batch_from_wit(batch: w::ColumnBatch) -> m::ColumnBatch {
    use m::ColumnData as M;
    use w::ColumnData as W;
    m::ColumnBatch {
        row_count: batch.row_count,
        columns: batch
            .columns
            .into_iter()
            .map(|c| m::Column {
                validity: c.validity,
                data: match c.data {
                    W::Bits(v) => M::Bits(v),
                    W::Int8(v) => M::Int8(v),
                    W::Int16(v) => M::Int16(v),
                    W::Int32(v) => M::Int32(v),
                    W::Int64(v) => M::Int64(v),
                    W::Float32(v) => M::Float32(v),
                    W::Float64(v) => M::Float64(v),
                    W::Decimal128(v) => M::Decimal128(v),
                    W::Bytes(b) => M::Bytes(m::ByteColumn {
                        data: b.data,
                        offsets: b.offsets,
                    }),
                    W::List(l) => M::List(m::ListColumn {
                        offsets: l.offsets,
                        child: l.child,
                    }),
                    W::Map(x) => M::Map(m::MapColumn {
                        offsets: x.offsets,
                        keys: x.keys,
                        values: x.values,
                    }),
                    W::Row(v) => M::Row(v),
                },
            })
            .collect(),
    }
}

fn key_batch_to_wit(keys: &m::KeyBatch) -> w::KeyBatch {
    w::KeyBatch {
        count: keys.count,
        data: keys.data.clone(),
        offsets: keys.offsets.clone(),
        present: keys.present.clone(),
    }
}

fn property_batch_to_wit(p: &m::PropertyBatch) -> w::PropertyBatch {
    w::PropertyBatch {
        message_offsets: p.message_offsets.clone(),
        names: p.names.clone(),
        name_offsets: p.name_offsets.clone(),
        values: p.values.clone(),
        value_offsets: p.value_offsets.clone(),
    }
}

/// Moves the batch's buffers into the WIT record (the decode path: no copy of the payloads).
pub(super) fn message_batch_into_wit(batch: m::MessageBatch) -> w::MessageBatch {
    let keys = batch.keys;
    w::MessageBatch {
        count: batch.count,
        payloads: batch.payloads,
        payload_offsets: batch.payload_offsets,
        keys: w::KeyBatch {
            count: keys.count,
            data: keys.data,
            offsets: keys.offsets,
            present: keys.present,
        },
        properties: batch.properties.map(|p| w::PropertyBatch {
            message_offsets: p.message_offsets,
            names: p.names,
            name_offsets: p.name_offsets,
            values: p.values,
            value_offsets: p.value_offsets,
        }),
        event_times: batch.event_times,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skip_prefix_becomes_the_flag() {
        let errors = row_errors_from_wit(vec![
            w::RowError {
                index: 0,
                reason: format!("{SKIPPED}empty payload"),
            },
            w::RowError {
                index: 2,
                reason: "bad json (skipped: no)".to_owned(),
            },
        ]);
        assert_eq!(
            errors,
            vec![
                m::RowError {
                    index: 0,
                    reason: "empty payload".to_owned(),
                    skip: true
                },
                m::RowError {
                    index: 2,
                    reason: "bad json (skipped: no)".to_owned(),
                    skip: false
                },
            ]
        );
    }

    #[test]
    fn column_batches_round_trip_through_the_wit_types() {
        let batch = m::ColumnBatch {
            row_count: 2,
            columns: vec![
                m::Column {
                    validity: Some(vec![0b01]),
                    data: m::ColumnData::Bytes(m::ByteColumn {
                        data: b"ab".to_vec(),
                        offsets: vec![0, 2, 2],
                    }),
                },
                m::Column {
                    validity: None,
                    data: m::ColumnData::List(m::ListColumn {
                        offsets: vec![0, 1, 1],
                        child: 2,
                    }),
                },
                m::Column {
                    validity: None,
                    data: m::ColumnData::Int64(vec![7]),
                },
            ],
        };
        assert_eq!(
            column_batch_from_wit(column_batch_to_wit(batch.clone())),
            batch
        );
    }
}
