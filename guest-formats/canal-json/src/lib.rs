//! Flink's `canal-json` format (flink-json 1.18, `CanalJsonFormatFactory`), as a wasm component and as a
//! plain Rust library: Canal's change messages (`data`, `old`, `type`: several rows a message) as
//! changelog rows, rows as insert/delete messages. Built on the json format's rows (crate
//! `format-changelog`).
//!
//! ```ignore
//! let dec = canal_json_format::decoder(&[("table.include".into(), "products".into())], &row_type, &["table".into()])?;
//! let decoded = dec.decode(&message_batch)?;
//! let enc = canal_json_format::encoder(&[], &row_type)?;
//! let encoded = enc.encode(&column_batch, Some(&kinds))?;
//! ```

mod decode;

pub use decode::{Canal, METADATA};

use format_changelog::options;
use format_common::{ConfigError, RowType, config_error, option};
use regex_lite::Regex;

/// A configured decoder: [`Decoder::decode`], [`Decoder::output_row_type`].
pub type Decoder = format_changelog::Decoder<Canal>;
/// A configured encoder: [`Encoder::encode`].
pub type Encoder = format_changelog::Encoder;

/// The format's own options (besides `format_changelog::options::SHARED`), without `canal-json.`.
pub const OPTIONS: &[&str] = &["database.include", "table.include"];

const FORMAT: &str = "canal-json";

/// A `*.include` option: a regular expression the whole name must match (Java's `matches()`). The
/// syntax is the `regex-lite` crate's, which covers Java's for names (classes, groups, alternation,
/// repetition); look-around and back-references are refused.
fn include(options: &[(String, String)], name: &str) -> Result<Option<Regex>, ConfigError> {
    let Some(pattern) = option(options, name) else {
        return Ok(None);
    };
    Regex::new(&format!("^(?:{pattern})$"))
        .map(Some)
        .map_err(|e| {
            config_error(
                Some(name),
                format!("invalid regular expression `{pattern}`: {e}"),
            )
        })
}

/// Creates a decoder of rows of `row_type` producing the metadata `keys` (readable keys of
/// [`METADATA`], in that order) after the row's columns. Options have no `canal-json.` prefix.
pub fn decoder(
    options: &[(String, String)],
    row_type: &RowType,
    keys: &[String],
) -> Result<Decoder, ConfigError> {
    Decoder::configure(FORMAT, OPTIONS, METADATA, options, row_type, keys, || {
        Ok(Canal {
            database: include(options, "database.include")?,
            table: include(options, "table.include")?,
        })
    })
}

/// Creates an encoder: `+I`/`+U` rows become `{"data":[{row}],"type":"INSERT"}`, `-U`/`-D` rows
/// `{"data":[{row}],"type":"DELETE"}`.
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    format_changelog::Encoder::new(
        options::parse(options, OPTIONS)?,
        row_type,
        (b"{\"data\":[", b"],\"type\":\"INSERT\"}"),
        (b"{\"data\":[", b"],\"type\":\"DELETE\"}"),
    )
}

format_common::export_component!(changelog);
