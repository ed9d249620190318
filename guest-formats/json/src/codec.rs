//! The json format's codec without its wasm component: the root of package `json-codec`, built from
//! the same sources as `json-format` (whose root, `lib.rs`, adds the component). Formats that write and
//! read the json format's rows inside their own messages (the changelog formats) depend on this
//! package: a dependency on `json-format` would link its component's exports into theirs.

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
