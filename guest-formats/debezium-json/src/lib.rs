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

use format_changelog::options;
use format_common::{ConfigError, RowType, bool_option, config_error};

/// A configured decoder: [`Decoder::decode`], [`Decoder::output_row_type`].
pub type Decoder = format_changelog::Decoder<Debezium>;
/// A configured encoder: [`Encoder::encode`].
pub type Encoder = format_changelog::Encoder;

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
    Decoder::configure(FORMAT, OPTIONS, METADATA, options, row_type, keys, || {
        Ok(Debezium {
            schema_include: bool_option(options, "schema-include", false)?,
        })
    })
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
}

format_common::export_component!(changelog);
