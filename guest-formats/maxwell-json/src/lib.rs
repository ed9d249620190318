//! Flink's `maxwell-json` format (flink-json 1.18, `MaxwellJsonFormatFactory`), as a wasm component and
//! as a plain Rust library: Maxwell's change events (`data`, `old`, `type`) as changelog rows, rows as
//! insert/delete events. Built on the json format's rows (crate `format-changelog`).
//!
//! ```ignore
//! let dec = maxwell_json_format::decoder(&[], &row_type, &["ingestion-timestamp".into()])?;
//! let decoded = dec.decode(&message_batch)?;
//! let enc = maxwell_json_format::encoder(&[], &row_type)?;
//! let encoded = enc.encode(&column_batch, Some(&kinds))?;
//! ```

mod decode;

pub use decode::{METADATA, Maxwell};

use format_changelog::{metadata, options};
use format_common::{ConfigError, RowType};

format_changelog::codec_types!(Maxwell);

const FORMAT: &str = "maxwell-json";

/// Creates a decoder of rows of `row_type` producing the metadata `keys` (readable keys of
/// [`METADATA`], in that order) after the row's columns. Options have no `maxwell-json.` prefix.
pub fn decoder(
    options: &[(String, String)],
    row_type: &RowType,
    keys: &[String],
) -> Result<Decoder, ConfigError> {
    let opts = options::decoding(options::parse(options, &[])?)?;
    let resolved = metadata::resolve(FORMAT, METADATA, keys)?;
    let envelope = Maxwell {
        keys: resolved.iter().map(|&k| METADATA[k].key).collect(),
    };
    format_changelog::Decoder::new(envelope, opts, row_type, METADATA, &resolved).map(Decoder)
}

/// Creates an encoder: `+I`/`+U` rows become `{"data":{row},"type":"insert"}`, `-U`/`-D` rows
/// `{"data":{row},"type":"delete"}`.
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    format_changelog::Encoder::new(
        options::parse(options, &[])?,
        row_type,
        (b"{\"data\":", b",\"type\":\"insert\"}"),
        (b"{\"data\":", b",\"type\":\"delete\"}"),
    )
    .map(Encoder)
}

#[cfg(target_arch = "wasm32")]
mod component {
    use pulsar_connect_plugin::prelude::*;

    struct MaxwellJson;

    impl codec::Guest for MaxwellJson {
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

    pulsar_connect_plugin::export_format!(MaxwellJson);
}
