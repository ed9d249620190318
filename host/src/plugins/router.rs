//! Router plugins: a partition per message, a batch per call.

use anyhow::anyhow;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::bindings::RouterInstance;
use super::error::{Failure, Phase, PluginError, Result};
use super::instance::{Configure, Instance};
use super::loader::{Plugin, PluginShared, Pre};
use super::manifest::Kind;
use super::model::{ConfigError, KeyBatch, PropertyBatch};
use super::state::PluginState;

/// What a router instance is made from (again, after a trap).
struct RouterConfig {
    options: Vec<(String, String)>,
}

impl Configure for RouterConfig {
    type Exports = Box<dyn RouterInstance>;

    fn factory(&self) -> &'static str {
        "create-router"
    }

    fn instantiate(
        &self,
        shared: &PluginShared,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self::Exports> {
        let Pre::Router(pre) = &shared.pre else {
            unreachable!("checked in Router::new")
        };
        pre.instantiate(store)
    }

    fn create(
        &self,
        store: &mut Store<PluginState>,
        exports: &Self::Exports,
    ) -> wasmtime::Result<std::result::Result<ResourceAny, ConfigError>> {
        exports.create_router(store, &self.options)
    }
}

/// A configured router.
pub struct Router {
    inner: Instance<RouterConfig>,
}

impl Router {
    /// Validates `options` against the manifest, then instantiates the plugin and runs `create-router`.
    pub fn new(plugin: &Plugin, options: &[(String, String)]) -> Result<Router> {
        let shared = plugin.shared.clone();
        if shared.manifest.kind != Kind::Router {
            return Err(PluginError::new(
                &*shared.name,
                Phase::Configure,
                anyhow!("is a {} plugin, not a router", shared.manifest.kind),
            ));
        }
        let options = plugin.resolve_options(options)?;
        Ok(Router {
            inner: Instance::start(shared, RouterConfig { options })?,
        })
    }

    /// Whether the router wants message properties (its manifest says so).
    pub fn wants_properties(&self) -> bool {
        self.inner.shared().manifest.wants_properties
    }

    /// A partition below `partitions` for each key. Properties are passed only to routers whose
    /// manifest sets `wants-properties`.
    pub fn route(
        &mut self,
        keys: &KeyBatch,
        properties: Option<&PropertyBatch>,
        partitions: u32,
    ) -> Result<Vec<u32>> {
        let batch = self.inner.next_batch();
        let shared = self.inner.shared().clone();
        if partitions == 0 {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Other,
                anyhow!("route-batch: no partitions"),
            ));
        }
        let properties = properties.filter(|_| shared.manifest.wants_properties);
        let what = format!("route-batch (batch {batch})");
        let called = self.inner.call(&what, |store, exports, resource| {
            exports.route_batch(store, resource, keys, properties, partitions)
        })?;
        let parts = called.value;
        if parts.len() != keys.count as usize {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Rejected,
                anyhow!(
                    "{what} returned {} partitions for {} messages",
                    parts.len(),
                    keys.count
                ),
            ));
        }
        if let Some((i, p)) = parts.iter().enumerate().find(|(_, p)| **p >= partitions) {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Rejected,
                anyhow!("{what} routed message {i} to partition {p} of {partitions}"),
            ));
        }
        shared.metrics.record_call(
            called.started.elapsed(),
            parts.len() as u64,
            keys.data.len() as u64,
            0,
            0,
        );
        Ok(parts)
    }
}
