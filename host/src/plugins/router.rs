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
use super::reload::VersionId;
use super::state::PluginState;

/// What a router instance is made from (again, after a trap or for a new version).
struct RouterConfig {
    /// The table's options as given (checked again against a new version's manifest).
    given: Vec<(String, String)>,
    /// With the manifest's defaults.
    options: Vec<(String, String)>,
}

impl RouterConfig {
    /// Checks the plugin is a router and the options fit its manifest.
    fn new(plugin: &Plugin, given: &[(String, String)]) -> Result<RouterConfig> {
        let kind = plugin.shared.manifest.kind;
        if kind != Kind::Router {
            return Err(PluginError::new(
                plugin.name(),
                Phase::Configure,
                anyhow!("is a {kind} plugin, not a router"),
            ));
        }
        Ok(RouterConfig {
            given: given.to_vec(),
            options: plugin.resolve_options(given)?,
        })
    }
}

impl Configure for RouterConfig {
    type Exports = Box<dyn RouterInstance>;

    fn for_version(&self, plugin: &Plugin) -> Result<Self> {
        RouterConfig::new(plugin, &self.given)
    }

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
        Ok(Router {
            inner: Instance::start(plugin, RouterConfig::new(plugin, options)?)?,
        })
    }

    /// A checkpoint completed: a newer version of the plugin, if one is waiting, routes the next batch.
    pub fn checkpoint_completed(&mut self) {
        self.inner.checkpoint_completed();
    }

    /// The version of the plugin this router runs.
    pub fn version(&self) -> VersionId {
        self.inner.version()
    }

    /// Whether the router wants message properties (its manifest says so): asked before each batch, so
    /// a version switch a completed checkpoint asked for happens here.
    pub fn wants_properties(&mut self) -> bool {
        self.inner.switch_if_due();
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
        self.inner
            .guarded((keys, properties), |inner, (keys, properties)| {
                route_once(inner, keys, properties, partitions)
            })
    }
}

fn route_once(
    inner: &mut Instance<RouterConfig>,
    keys: &KeyBatch,
    properties: Option<&PropertyBatch>,
    partitions: u32,
) -> Result<Vec<u32>> {
    let batch = inner.next_batch();
    let shared = inner.shared().clone();
    if partitions == 0 {
        return Err(PluginError::call(
            &*shared.name,
            Failure::Other,
            anyhow!("route-batch: no partitions"),
        ));
    }
    let properties = properties.filter(|_| shared.manifest.wants_properties);
    let what = format!("route-batch (batch {batch})");
    let called = inner.call(&what, |store, exports, resource| {
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
