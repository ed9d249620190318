//! What Flink 1.18's changelog formats `debezium-json`, `canal-json` and `maxwell-json` share (ADR 0016):
//! each is an envelope around rows in the json format's JSON, read with Flink's Jackson-tree
//! conversions (`json_codec::tree_decoder`) and written with the json format's encoder.
//!
//! - [`options`]: the options they share (the json format's, without `json.`), checked as Flink does;
//! - [`metadata`]: readable metadata keys, their types and the output row type (the row type's columns,
//!   then one column per requested key);
//! - [`decode`]: the decode loop: a message gives 0..n rows, each with a row kind ([`Envelope`],
//!   [`Message`]); Flink's skips and `Corrupt <Name> JSON message` errors;
//! - [`encode`]: the encoder: every row kind becomes an insert or a delete envelope around the json
//!   format's text of the row;
//! - `golden` (feature `golden`): the checks of the golden vectors of `tests/golden/vectors/*-json`
//!   (each crate's tests: `golden_tests!`) and of random inputs (`golden::fuzz`).

pub mod decode;
pub mod encode;
mod message;
pub mod metadata;
pub mod options;
mod rows;

#[cfg(feature = "golden")]
pub mod golden;

pub use decode::{Decoder, Envelope, Stop};
pub use encode::Encoder;
pub use format_common::RowKind;
pub use json_codec::tree::{Doc, Kind, Span};
pub use message::{Message, RowState};
pub use metadata::{MetaKey, MetaType, MetaValue};
