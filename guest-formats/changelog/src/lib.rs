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
//! - `golden` (feature `golden`): the checks of the golden vectors of `tests/golden/vectors/*-json`.

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

/// Declares a format crate's `Decoder` and `Encoder`: local newtypes around [`Decoder`]`<$envelope>` and
/// [`Encoder`], so the crate's wasm component can implement the SDK's codec traits for them.
#[macro_export]
macro_rules! codec_types {
    ($envelope:ty) => {
        /// A configured decoder.
        #[derive(Debug)]
        pub struct Decoder(pub $crate::Decoder<$envelope>);

        impl Decoder {
            /// Decodes a batch: each message gives its rows (with their row kinds), a skip or an error.
            pub fn decode(
                &self,
                batch: &format_common::MessageBatch,
            ) -> Result<format_common::DecodedBatch, String> {
                self.0.decode(batch)
            }

            /// The row type of decoded batches: the row type's columns, then the metadata columns.
            pub fn output_row_type(&self) -> &format_common::RowType {
                self.0.output_row_type()
            }
        }

        /// A configured encoder.
        #[derive(Debug)]
        pub struct Encoder(pub $crate::Encoder);

        impl Encoder {
            /// Encodes a batch, one payload per row; `kinds`: the row kind of each row (`None`: inserts).
            pub fn encode(
                &self,
                batch: &format_common::ColumnBatch,
                kinds: Option<&[format_common::RowKind]>,
            ) -> Result<format_common::EncodedBatch, String> {
                self.0.encode(batch, kinds)
            }
        }
    };
}
