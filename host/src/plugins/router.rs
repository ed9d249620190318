//! Router plugins: a partition per message, a batch per call.

use std::sync::Arc;

use anyhow::anyhow;
use wasmtime::component::ResourceAny;

use super::bindings::v0_1_0::router::Router as RouterWorld;
use super::bindings::v0_1_0::types as wit;
use super::error::{Failure, Phase, PluginError, Result};
use super::loader::{Plugin, PluginShared, Pre};
use super::manifest::Kind;
use super::sandbox::Sandbox;

/// A configured router.
pub struct Router {
    shared: Arc<PluginShared>,
    options: Vec<(String, String)>,
    live: Option<(Sandbox<RouterWorld>, ResourceAny)>,
    batches: u64,
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
        let mut router = Router {
            shared,
            options,
            live: None,
            batches: 0,
        };
        router.start()?;
        Ok(router)
    }

    /// Whether the router wants message properties (its manifest says so).
    pub fn wants_properties(&self) -> bool {
        self.shared.manifest.wants_properties
    }

    fn start(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let Pre::Router(pre) = &shared.pre else {
            unreachable!("checked in Router::new")
        };
        let mut sandbox = Sandbox::new(&shared, |store| pre.instantiate(store))?;
        let options = &self.options;
        let called = sandbox
            .call(&shared, "create-router", |store, b: &RouterWorld| {
                b.pulsar_connect_plugin_routing()
                    .call_create_router(store, options)
            })
            .map_err(|e| PluginError::new(&*shared.name, Phase::Configure, anyhow!("{e}")))?;
        shared
            .metrics
            .record_call(called.started.elapsed(), 0, 0, 0, 0);
        let resource = called.value.map_err(|e| {
            let option = e
                .option
                .map(|o| format!("option `{o}`: "))
                .unwrap_or_default();
            PluginError::new(
                &*shared.name,
                Phase::Configure,
                anyhow!("create-router refused: {option}{}", e.message),
            )
        })?;
        self.live = Some((sandbox, resource));
        Ok(())
    }

    /// A partition below `partitions` for each key. Properties are passed only to routers whose
    /// manifest sets `wants-properties`.
    pub fn route(
        &mut self,
        keys: &wit::KeyBatch,
        properties: Option<&wit::PropertyBatch>,
        partitions: u32,
    ) -> Result<Vec<u32>> {
        self.batches += 1;
        let batch = self.batches;
        let shared = self.shared.clone();
        if partitions == 0 {
            return Err(PluginError::call(
                &*shared.name,
                Failure::Other,
                anyhow!("route-batch: no partitions"),
            ));
        }
        if self.live.is_none() {
            self.start()?;
        }
        let properties = properties.filter(|_| shared.manifest.wants_properties);
        let Some((sandbox, resource)) = self.live.as_mut() else {
            unreachable!("started above")
        };
        let resource = *resource;
        let what = format!("route-batch (batch {batch})");
        let called = sandbox.call(&shared, &what, |store, b: &RouterWorld| {
            b.pulsar_connect_plugin_routing()
                .router()
                .call_route_batch(store, resource, keys, properties, partitions)
        });
        let called = match called {
            Ok(c) => c,
            Err(err) => {
                self.live = None;
                let restart = match self.start() {
                    Ok(()) => "; a fresh instance replaced it".to_owned(),
                    Err(e) => format!("; replacing the instance failed too: {e}"),
                };
                return Err(PluginError::call(
                    &*shared.name,
                    err.failure,
                    anyhow!("{:#}{restart}", err.inner()),
                ));
            }
        };
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
