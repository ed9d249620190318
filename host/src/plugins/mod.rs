//! The plugin platform: format and router plugins as sandboxed WebAssembly components.
//!
//! - [`directory`]: the plugin directory, read through `cap-std` handles; hash and precompiled checks.
//! - [`manifest`]: `plugin.toml` (options, limits, world); [`files`]: a plugin's own read-only folder.
//! - [`engine`], [`cache`], [`loader`]: one engine with an epoch ticker, the compile cache, loading.
//! - [`catalog`]: the plugins of one directory, built once by `main` and passed down.
//! - [`model`]: the host's plugin data model; [`bindings`]: one module per WIT version converting
//!   its generated types into it (the version seam).
//! - [`state`], [`sandbox`]: the per-instance store (empty WASI, limits, logs) and trap handling;
//!   [`instance`]: the one instantiate / factory / call / trap → re-instantiate lifecycle.
//! - [`format`], [`router`]: the typed facades the connectors use.
//! - [`schema`], [`columns`], [`messages`]: Arrow ⇄ model conversion and batch builders.
//! - [`reload`]: hot reload, a new version of a plugin taken up at a completed checkpoint (ADR 0024).
//! - [`metrics`]: per-plugin counters, exported by the runtime's metrics registry.
//! - [`kit`]: the conformance kit of `plugins test` (vectors, hostile inputs, cost report).

pub mod bindings;
pub mod cache;
pub mod catalog;
pub mod columns;
pub mod directory;
pub mod engine;
pub mod error;
pub mod files;
pub mod format;
pub mod instance;
pub mod loader;
pub mod manifest;
pub mod messages;
pub mod metrics;
pub mod model;
pub mod reload;
pub mod router;
pub mod sandbox;
pub mod schema;
pub mod state;

pub use directory::PluginDir;
pub use error::{Failure, Phase, PluginError};
pub use format::{Decoded, Decoder, Encoded, Encoder};
pub use loader::{HostConfig, Plugin, PluginHost, read_manifests};
pub use manifest::{Kind, Manifest, PulsarSchema};
pub use messages::{KeyBatchBuilder, MessageBatchBuilder, MessageRef};
pub use metrics::PluginCounters;
pub use model::{ConfigError, RowError};
pub use router::Router;
