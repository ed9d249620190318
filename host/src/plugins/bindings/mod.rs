//! The WIT version seam: one frozen module per released WIT version (Zed-style), each converting its
//! generated types into the host's [`model`](super::model). Everything above this module (the
//! lifecycle, the facades, the connectors) sees only the traits below and the model; a new WIT
//! version is a new module beside `v0_1_0` plus its arm in [`format_component`],
//! [`router_component`] and [`add_to_linker`].

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker, ResourceAny};

use super::model::{
    ColumnBatch, ConfigError, DecodedBatch, EncodedBatch, KeyBatch, MessageBatch, PropertyBatch,
    RowKind, RowType,
};
use super::state::PluginState;

/// What every version's module has alike, expanded in it (its generated modules `format` and `log` in scope,
/// and `Linker`, `HasSelf`, `InstancePre`, `Store`, `PluginState`, `FormatComponent`, `FormatInstance`, the
/// model as `m`): linking its `log` import into [`PluginState`], and its format world pre-instantiated
/// (`Format`) and instantiated (`FormatExports`, whose [`FormatInstance`] impl the module writes).
macro_rules! version_common {
    ($version:expr) => {
        pub(super) fn add_to_linker(linker: &mut Linker<PluginState>) -> anyhow::Result<()> {
            log::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
                .map_err(|e| anyhow::anyhow!("linking the log@{} import: {e:#}", $version))
        }

        impl log::Host for PluginState {
            fn log(&mut self, level: log::Level, message: String, fields: Vec<(String, String)>) {
                let level = match level {
                    log::Level::Trace => m::LogLevel::Trace,
                    log::Level::Debug => m::LogLevel::Debug,
                    log::Level::Info => m::LogLevel::Info,
                    log::Level::Warn => m::LogLevel::Warn,
                    log::Level::Error => m::LogLevel::Error,
                };
                self.log_import(level, message, &fields);
            }
        }

        struct Format(format::FormatPre<PluginState>);
        struct FormatExports(format::Format);

        pub(super) fn format_component(
            pre: InstancePre<PluginState>,
        ) -> anyhow::Result<Box<dyn FormatComponent>> {
            Ok(Box::new(Format(
                format::FormatPre::new(pre).map_err(|e| anyhow::anyhow!("{e:#}"))?,
            )))
        }

        impl FormatComponent for Format {
            fn instantiate(
                &self,
                store: &mut Store<PluginState>,
            ) -> wasmtime::Result<Box<dyn FormatInstance>> {
                Ok(Box::new(FormatExports(self.0.instantiate(store)?)))
            }
        }
    };
}

pub mod v0_1_0;
pub mod v0_2_0;

/// A format component pre-instantiated for the WIT version it implements.
pub(crate) trait FormatComponent: Send + Sync {
    fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Box<dyn FormatInstance>>;
}

/// The exports of one instance of a format component. The outer result is a trap, the inner one
/// what the plugin returned.
pub(crate) trait FormatInstance: Send + Sync {
    /// `metadata`: the format's readable metadata keys the decoder must produce after the row type's
    /// columns (WIT 0.2.0 on; always empty for a 0.1.0 plugin, whose manifest can declare none).
    fn create_decoder(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
        row_type: &RowType,
        metadata: &[String],
    ) -> wasmtime::Result<Result<ResourceAny, ConfigError>>;

    fn create_encoder(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
        row_type: &RowType,
    ) -> wasmtime::Result<Result<ResourceAny, ConfigError>>;

    fn decode_batch(
        &self,
        store: &mut Store<PluginState>,
        decoder: ResourceAny,
        messages: MessageBatch,
    ) -> wasmtime::Result<Result<DecodedBatch, String>>;

    /// `kinds`: the row kind of each row, `None` for inserts only (the host passes only kinds the
    /// manifest's `changelog-mode` lists, so never any to a 0.1.0 plugin).
    fn encode_batch(
        &self,
        store: &mut Store<PluginState>,
        encoder: ResourceAny,
        rows: ColumnBatch,
        kinds: Option<&[RowKind]>,
    ) -> wasmtime::Result<Result<EncodedBatch, String>>;
}

/// A router component pre-instantiated for the WIT version it implements.
pub(crate) trait RouterComponent: Send + Sync {
    fn instantiate(
        &self,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Box<dyn RouterInstance>>;
}

/// The exports of one instance of a router component.
pub(crate) trait RouterInstance: Send + Sync {
    fn create_router(
        &self,
        store: &mut Store<PluginState>,
        options: &[(String, String)],
    ) -> wasmtime::Result<Result<ResourceAny, ConfigError>>;

    fn route_batch(
        &self,
        store: &mut Store<PluginState>,
        router: ResourceAny,
        keys: &KeyBatch,
        properties: Option<&PropertyBatch>,
        partitions: u32,
    ) -> wasmtime::Result<Vec<u32>>;
}

/// Links the host's imports (`log`) of every WIT version.
pub(crate) fn add_to_linker(linker: &mut Linker<PluginState>) -> anyhow::Result<()> {
    v0_1_0::add_to_linker(linker)?;
    v0_2_0::add_to_linker(linker)
}

/// The format component of WIT `version` (a version the manifest check accepted).
pub(crate) fn format_component(
    version: &str,
    pre: InstancePre<PluginState>,
) -> anyhow::Result<Box<dyn FormatComponent>> {
    match version {
        v0_1_0::VERSION => v0_1_0::format_component(pre),
        v0_2_0::VERSION => v0_2_0::format_component(pre),
        other => Err(anyhow::anyhow!("no bindings for WIT version {other}")),
    }
}

/// The router component of WIT `version`.
pub(crate) fn router_component(
    version: &str,
    pre: InstancePre<PluginState>,
) -> anyhow::Result<Box<dyn RouterComponent>> {
    match version {
        v0_1_0::VERSION => v0_1_0::router_component(pre),
        other => Err(anyhow::anyhow!("no bindings for WIT version {other}")),
    }
}
