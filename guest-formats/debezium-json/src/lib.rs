//! Flink's `debezium-json` format (flink-json 1.18, `DebeziumJsonFormatFactory`), as a wasm component
//! and as a plain Rust library: Debezium's change events (`before`, `after`, `op`) as changelog rows,
//! rows as insert/delete events. Built on the json format's rows (crate `format-changelog`).
//!
//! ```ignore
//! let dec = debezium_json_format::decoder(&[("schema-include".into(), "true".into())], &row_type, &["source.table".into()])?;
//! let decoded = dec.decode(&message_batch)?;   // rows, their messages and kinds; the metadata columns last
//! let enc = debezium_json_format::encoder(&[], &row_type)?;
//! let encoded = enc.encode(&column_batch, Some(&kinds))?;
//! ```

mod decode;

pub use decode::{Debezium, METADATA};

use format_changelog::{metadata, options};
use format_common::{ConfigError, RowType, bool_option, config_error};

format_changelog::codec_types!(Debezium);

/// The format's own options (besides `format_changelog::options::SHARED`), without `debezium-json.`.
pub const OPTIONS: &[&str] = &["schema-include"];

/// The name in Flink's messages and options.
const FORMAT: &str = "debezium-json";

/// Creates a decoder of rows of `row_type` producing the metadata `keys` (readable keys of
/// [`METADATA`], in that order) after the row's columns. Options have no `debezium-json.` prefix.
pub fn decoder(
    options: &[(String, String)],
    row_type: &RowType,
    keys: &[String],
) -> Result<Decoder, ConfigError> {
    let opts = options::decoding(options::parse(options, OPTIONS)?)?;
    let resolved = metadata::resolve(FORMAT, METADATA, keys)?;
    let envelope = Debezium {
        schema_include: bool_option(options, "schema-include", false)?,
        keys: resolved.iter().map(|&k| METADATA[k].key).collect(),
    };
    format_changelog::Decoder::new(envelope, opts, row_type, METADATA, &resolved).map(Decoder)
}

/// Creates an encoder: `+I`/`+U` rows become `{"before":null,"after":{row},"op":"c"}`, `-U`/`-D` rows
/// `{"before":{row},"after":null,"op":"d"}`.
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    let opts = options::parse(options, OPTIONS)?;
    if bool_option(options, "schema-include", false)? {
        return Err(config_error(
            Some("schema-include"),
            "Debezium JSON serialization doesn't support 'debezium-json.schema-include' option been set to true.",
        ));
    }
    format_changelog::Encoder::new(
        opts,
        row_type,
        (b"{\"before\":null,\"after\":", b",\"op\":\"c\"}"),
        (b"{\"before\":", b",\"after\":null,\"op\":\"d\"}"),
    )
    .map(Encoder)
}

#[cfg(target_arch = "wasm32")]
mod component {
    use pulsar_connect_plugin::prelude::*;

    struct DebeziumJson;

    impl codec::Guest for DebeziumJson {
        type Decoder = super::Decoder;
        type Encoder = super::Encoder;

        fn create_decoder(
            options: Options,
            row_type: RowType,
            metadata: Vec<String>,
        ) -> Result<codec::Decoder, ConfigError> {
            super::decoder(&options, &row_type, &metadata).map(codec::Decoder::new)
        }

        fn create_encoder(
            options: Options,
            row_type: RowType,
        ) -> Result<codec::Encoder, ConfigError> {
            super::encoder(&options, &row_type).map(codec::Encoder::new)
        }
    }

    impl codec::GuestDecoder for super::Decoder {
        fn decode_batch(&self, messages: MessageBatch) -> Result<DecodedBatch, String> {
            self.decode(&messages)
        }
    }

    impl codec::GuestEncoder for super::Encoder {
        fn encode_batch(
            &self,
            rows: ColumnBatch,
            kinds: Option<Vec<RowKind>>,
        ) -> Result<EncodedBatch, String> {
            self.encode(&rows, kinds.as_deref())
        }
    }

    pulsar_connect_plugin::export_format!(DebeziumJson);
}
