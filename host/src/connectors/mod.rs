//! The connectors built into this process, one folder each (options, config, source and sink side by
//! side). Each implements the connector API ([`crate::connector_api`]: `ConnectorFactory`, `Source`,
//! `Sink`) and is registered in the [`Registry`] under its `'connector'` value.

pub mod blackhole;
pub mod datagen;
pub mod print;
pub mod pulsar;
pub mod values;

use std::sync::Arc;

use crate::connector_api::Registry;
use crate::plugins::catalog::{PluginCatalog, resolve_plugin_dir};

impl Registry {
    /// The built-in connectors with the plugin directory of the environment
    /// ([`resolve_plugin_dir`](crate::plugins::catalog::resolve_plugin_dir) without a flag); `main`
    /// uses [`Registry::with_plugins`] with the catalog of `--plugin-dir`.
    pub fn builtin() -> Self {
        Self::with_plugins(Arc::new(PluginCatalog::new(resolve_plugin_dir(None))))
    }

    /// The built-in connectors: `print`, `datagen`, `blackhole`, `pulsar` and `upsert-pulsar` (and their
    /// InLong names), the Pulsar connector reading plugins from `plugins`.
    pub fn with_plugins(plugins: Arc<PluginCatalog>) -> Self {
        let mut r = Registry::default();
        r.register(Arc::new(print::PrintFactory::new()));
        r.register(Arc::new(datagen::DatagenFactory::new()));
        r.register(Arc::new(blackhole::BlackholeFactory::new()));
        for name in pulsar::NAMES {
            r.register(Arc::new(pulsar::PulsarFactory::new(name, plugins.clone())));
        }
        r
    }
}
