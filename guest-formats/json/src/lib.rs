//! Flink's `json` format (flink-json 1.18), as a wasm component and as a plain Rust library.
//!
//! Decoding is a hand-written scanner that writes every value straight into typed columns (no tree,
//! no per-value allocation). Encoding writes Jackson's output byte for byte: field order, Java's
//! number text, `BigDecimal` text after `stripTrailingZeros`, Flink's timestamp formats, Jackson's
//! string escapes (non-BMP characters as `\uD83D\uDE00`).
//!
//! Native use:
//! ```ignore
//! let dec = json_format::decoder(&[("ignore-parse-errors".into(), "true".into())], &row_type)?;
//! let decoded: DecodedBatch = dec.decode(&message_batch)?;
//! let enc = json_format::encoder(&[], &row_type)?;
//! let encoded: EncodedBatch = enc.encode(&column_batch)?;
//! ```

// The same modules make package `json-codec` (root `codec.rs`: this crate without its component).
mod decode;
mod encode;
mod fast;
mod object;
mod options;
mod parser;
mod scan;
pub mod tree;
mod tree_decode;
mod value;

pub use decode::{Decoder, decoder};
pub use encode::{Encoder, encoder, encoder_with, write_string};
pub use options::{JsonOptions, NullKeyMode, OPTIONS};
pub use tree_decode::{TreeRow, tree_decoder};

use options::check_types;

format_common::export_component!(insert_only "json");
