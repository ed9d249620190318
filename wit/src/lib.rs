//! Rust guest SDK for pulsar-connect plugins.
#![warn(missing_docs)]
//!
//! The WIT contract lives next to this file, frozen per version (`v0.1.0/`, `v0.2.0/`). A plugin crate depends
//! on this crate with exactly one of the features `format` (the world `format@0.2.0`: changelog rows, several
//! rows per message, tombstones, format metadata; ADR 0016) or `router` (`router@0.1.0`), implements the generated `Guest` trait and
//! exports it with [`export_format!`] or [`export_router!`]. The helpers turn the columnar contract into
//! row-at-a-time code: [`values::Value`], [`columns::BatchBuilder`] (rows → columns) and
//! [`columns::read_rows`] (columns → rows), and [`messages`] for the flattened message batches.
//! [`columns::Cols`] is the typed column builder underneath `BatchBuilder`, for decoders that push
//! values straight into the columns (every built-in format does).
//!
//! [`testing`] has builders for a plugin's own unit tests (`cargo test`, natively).
//!
//! ## Using it from outside this repository
//!
//! The SDK is not published to crates.io; depend on it by path (a checkout of this repository) or by git:
//!
//! ```toml
//! [dependencies]
//! pulsar-connect-plugin = { path = "/path/to/pulsar-connect/wit", features = ["format"] }
//! # or
//! pulsar-connect-plugin = { git = "https://github.com/<owner>/pulsar-connect", features = ["format"] }
//! ```
//!
//! `pulsar-connect plugins new` writes such a project; `docs/plugins.md` walks through it.
//!
//! ```ignore
//! use pulsar_connect_plugin::prelude::*;
//!
//! struct Lines;
//! impl codec::Guest for Lines {
//!     type Decoder = LinesDecoder;
//!     type Encoder = LinesEncoder;
//!     fn create_decoder(_options: Options, row_type: RowType, _metadata: Vec<String>) -> Result<codec::Decoder, ConfigError> {
//!         Ok(codec::Decoder::new(LinesDecoder { row_type }))
//!     }
//!     // ...
//! }
//! pulsar_connect_plugin::export_format!(Lines);
//! ```

/// The version of the WIT package the `format` feature exports (a plugin manifest's
/// `world = "pulsar-connect:plugin/format@0.2.0"`).
pub const FORMAT_WIT_VERSION: &str = "0.2.0";
/// The version of the WIT package the `router` feature exports.
pub const ROUTER_WIT_VERSION: &str = "0.1.0";

/// Prefix of a decoder's row-error reason that marks a *skip* in Flink's terms: the format drops the
/// message itself (Flink's format returns no row and no error: an empty or null payload, a bad record
/// under `ignore-parse-errors`). The contract needs every message to yield a row or an error, so a skip
/// is an error the host recognises by this prefix and counts apart instead of failing the job.
pub const SKIPPED: &str = "skipped: ";

/// The reason of a skip: `reason` behind [`SKIPPED`].
pub fn skipped(reason: impl std::fmt::Display) -> String {
    format!("{SKIPPED}{reason}")
}

#[cfg(feature = "format")]
#[allow(missing_docs)]
pub mod format {
    //! Generated bindings of the world `pulsar-connect:plugin/format@0.2.0`. (A plugin that stays on 0.1.0
    //! generates its bindings from `v0.1.0/` itself: the host keeps loading it.)
    wit_bindgen::generate!({
        path: "v0.2.0",
        world: "format",
        pub_export_macro: true,
        export_macro_name: "export_format",
        default_bindings_module: "pulsar_connect_plugin::format",
    });
}

#[cfg(feature = "router")]
#[allow(missing_docs)]
pub mod router {
    //! Generated bindings of the world `pulsar-connect:plugin/router@0.1.0`.
    wit_bindgen::generate!({
        path: "v0.1.0",
        world: "router",
        pub_export_macro: true,
        export_macro_name: "export_router",
        default_bindings_module: "pulsar_connect_plugin::router",
    });
}

#[cfg(feature = "format")]
pub use format::export_format;
#[cfg(feature = "router")]
pub use router::export_router;

#[cfg(feature = "format")]
pub mod columns;
#[cfg(any(feature = "format", feature = "router"))]
pub mod messages;
#[cfg(any(feature = "format", feature = "router"))]
pub mod options;
#[cfg(any(feature = "format", feature = "router"))]
pub mod testing;
#[cfg(feature = "format")]
pub mod values;

/// Logging into the host's log (tagged with the plugin's name, rate-limited by the host).
#[cfg(any(feature = "format", feature = "router"))]
pub mod log {
    #[cfg(feature = "format")]
    use crate::format::pulsar_connect::plugin::log as wit_log;
    #[cfg(all(feature = "router", not(feature = "format")))]
    use crate::router::pulsar_connect::plugin::log as wit_log;

    /// The level of a log line.
    pub use wit_log::Level;

    /// Logs `message` with structured `fields`.
    pub fn log(level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wit_log::log(level, message, &fields);
    }

    /// Logs `message` at debug level.
    pub fn debug(message: &str) {
        log(Level::Debug, message, &[]);
    }

    /// Logs `message` at info level.
    pub fn info(message: &str) {
        log(Level::Info, message, &[]);
    }

    /// Logs `message` at warn level.
    pub fn warn(message: &str) {
        log(Level::Warn, message, &[]);
    }

    /// Logs `message` at error level.
    pub fn error(message: &str) {
        log(Level::Error, message, &[]);
    }
}

/// Everything a format plugin usually needs.
#[cfg(feature = "format")]
pub mod prelude {
    pub use crate::columns::{BatchBuilder, decode_rows, encode_rows, read_rows};
    pub use crate::format::exports::pulsar_connect::plugin::codec::{
        self, DecodedBatch, EncodedBatch, RowKind,
    };
    pub use crate::format::pulsar_connect::plugin::types::{
        ColumnBatch, ConfigError, DataType, MessageBatch, RowError, RowType,
    };
    pub use crate::messages::{Message, messages};
    pub use crate::options::{Options, option};
    pub use crate::values::Value;
}

/// Everything a router plugin usually needs.
#[cfg(feature = "router")]
pub mod router_prelude {
    pub use crate::messages::keys;
    pub use crate::options::{Options, option};
    pub use crate::router::exports::pulsar_connect::plugin::routing;
    pub use crate::router::pulsar_connect::plugin::types::{ConfigError, KeyBatch, PropertyBatch};
}
