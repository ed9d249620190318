//! The plugin platform: format and router plugins as sandboxed WebAssembly components.
//!
//! - [`directory`]: the plugin directory, read through `cap-std` handles; hash and precompiled checks.
//! - [`manifest`]: `plugin.toml` (options, limits, world).
//! - [`engine`], [`cache`], [`loader`]: one engine with an epoch ticker, the compile cache, loading.
//! - [`state`], [`sandbox`]: the per-instance store (empty WASI, limits, logs) and trap handling.
//! - [`format`], [`router`]: the typed facades the connectors use.
//! - [`schema`], [`columns`], [`messages`]: Arrow ⇄ WIT conversion and batch builders.

pub mod bindings;
pub mod cache;
pub mod catalog;
pub mod columns;
pub mod directory;
pub mod engine;
pub mod error;
pub mod format;
pub mod loader;
pub mod manifest;
pub mod messages;
pub mod metrics;
pub mod router;
pub mod sandbox;
pub mod schema;
pub mod state;

pub use bindings::v0_1_0::types as wit;
pub use directory::PluginDir;
pub use error::{Failure, Phase, PluginError};
pub use format::{Decoded, Decoder, Encoded, Encoder, RowError};
pub use loader::{HostConfig, Plugin, PluginHost, read_manifests};
pub use manifest::{Kind, Manifest, PulsarSchema};
pub use messages::{KeyBatchBuilder, MessageBatchBuilder, MessageRef};
pub use metrics::PluginCounters;
pub use router::Router;
