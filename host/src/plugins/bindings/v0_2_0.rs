//! Bindings of `pulsar-connect:plugin@0.2.0` (frozen: generated from `wit/v0.2.0`) and their conversion
//! into the host's [`model`](crate::plugins::model). Only the format world changed (ADR 0016): rows per
//! message, row kinds, tombstones, format metadata. Its `types` interface is 0.1.0's but for the package
//! version, so it is mapped onto 0.1.0's generated types and every column conversion is shared.

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker, ResourceAny};

use super::v0_1_0 as v1;
use super::{FormatComponent, FormatInstance};
use crate::plugins::model as m;
use crate::plugins::state::PluginState;

/// The WIT version of this module.
pub const VERSION: &str = "0.2.0";

pub mod format {
    wasmtime::component::bindgen!({
        path: "../wit/v0.2.0",
        world: "format",
        with: {
            "pulsar-connect:plugin/types": super::super::v0_1_0::types,
        },
    });
}

use format::exports::pulsar_connect::plugin::codec;
use format::pulsar_connect::plugin::log;

version_common!(VERSION);

impl FormatInstance for FormatExports {
    fn create_decoder(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
        row_type: &m::RowType,
        metadata: &[String],
    ) -> wasmtime::Result<Result<ResourceAny, m::ConfigError>> {
        let created = self.0.pulsar_connect_plugin_codec().call_create_decoder(
            store,
            options,
            &v1::row_type_to_wit(row_type),
            metadata,
        )?;
        Ok(created.map_err(v1::config_error))
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
            &v1::row_type_to_wit(row_type),
        )?;
        Ok(created.map_err(v1::config_error))
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
            .call_decode_batch(store, decoder, &v1::message_batch_into_wit(messages))?;
        Ok(decoded.map(|d| m::DecodedBatch {
            rows: v1::column_batch_from_wit(d.rows),
            messages: d.messages,
            kinds: d
                .kinds
                .map(|k| k.into_iter().map(row_kind_from_wit).collect()),
            errors: v1::row_errors_from_wit(d.errors),
        }))
    }

    fn encode_batch(
        &self,
        store: &mut Store<PluginState>,
        encoder: ResourceAny,
        rows: m::ColumnBatch,
        kinds: Option<&[m::RowKind]>,
    ) -> wasmtime::Result<Result<m::EncodedBatch, String>> {
        let kinds: Option<Vec<codec::RowKind>> =
            kinds.map(|k| k.iter().copied().map(row_kind_to_wit).collect());
        let encoded = self
            .0
            .pulsar_connect_plugin_codec()
            .encoder()
            .call_encode_batch(
                store,
                encoder,
                &v1::column_batch_to_wit(rows),
                kinds.as_deref(),
            )?;
        Ok(encoded.map(|e| m::EncodedBatch {
            payloads: e.payloads,
            offsets: e.offsets,
            absent: e.absent,
            errors: v1::encoder_errors_from_wit(e.errors),
        }))
    }
}

fn row_kind_from_wit(k: codec::RowKind) -> m::RowKind {
    match k {
        codec::RowKind::Insert => m::RowKind::Insert,
        codec::RowKind::UpdateBefore => m::RowKind::UpdateBefore,
        codec::RowKind::UpdateAfter => m::RowKind::UpdateAfter,
        codec::RowKind::Delete => m::RowKind::Delete,
    }
}

fn row_kind_to_wit(k: m::RowKind) -> codec::RowKind {
    match k {
        m::RowKind::Insert => codec::RowKind::Insert,
        m::RowKind::UpdateBefore => codec::RowKind::UpdateBefore,
        m::RowKind::UpdateAfter => codec::RowKind::UpdateAfter,
        m::RowKind::Delete => codec::RowKind::Delete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_kinds_round_trip_through_the_wit_enum() {
        for k in m::RowKind::ALL {
            assert_eq!(row_kind_from_wit(row_kind_to_wit(k)), k);
        }
    }
}
