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

use format_changelog::options;
use format_common::{ConfigError, RowType};

/// A configured decoder: [`Decoder::decode`], [`Decoder::output_row_type`].
pub type Decoder = format_changelog::Decoder<Maxwell>;
/// A configured encoder: [`Encoder::encode`].
pub type Encoder = format_changelog::Encoder;

/// The format's own options (besides `format_changelog::options::SHARED`): none.
pub const OPTIONS: &[&str] = &[];

const FORMAT: &str = "maxwell-json";

/// Creates a decoder of rows of `row_type` producing the metadata `keys` (readable keys of
/// [`METADATA`], in that order) after the row's columns. Options have no `maxwell-json.` prefix.
pub fn decoder(
    options: &[(String, String)],
    row_type: &RowType,
    keys: &[String],
) -> Result<Decoder, ConfigError> {
    Decoder::configure(FORMAT, OPTIONS, METADATA, options, row_type, keys, || {
        Ok(Maxwell)
    })
}

/// Creates an encoder: `+I`/`+U` rows become `{"data":{row},"type":"insert"}`, `-U`/`-D` rows
/// `{"data":{row},"type":"delete"}`.
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    format_changelog::Encoder::new(
        options::parse(options, OPTIONS)?,
        row_type,
        (b"{\"data\":", b",\"type\":\"insert\"}"),
        (b"{\"data\":", b",\"type\":\"delete\"}"),
    )
}

format_common::export_component!(changelog);
