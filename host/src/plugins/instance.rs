//! The one lifecycle of a configured plugin instance, shared by decoders, encoders and routers:
//! instantiate in a fresh [`Sandbox`] (limits, deadline), run the factory once, make batch calls
//! against the resource it returned, and after a trap drop the poisoned store and build the same
//! instance again (factory re-run) before reporting the trap.

use std::sync::Arc;

use anyhow::anyhow;
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::error::{Phase, PluginError, Result};
use super::loader::PluginShared;
use super::model::ConfigError;
use super::sandbox::{Called, Sandbox};
use super::state::PluginState;

/// What a kind of instance needs to be made (again): its bindings and its factory call.
pub(crate) trait Configure {
    /// The instance's exports.
    type Exports;

    /// The factory's name in messages (`create-decoder`).
    fn factory(&self) -> &'static str;

    /// Instantiates the plugin's pre-linked component.
    fn instantiate(
        &self,
        shared: &PluginShared,
        store: &mut Store<PluginState>,
    ) -> wasmtime::Result<Self::Exports>;

    /// Runs the factory with the configuration.
    fn create(
        &self,
        store: &mut Store<PluginState>,
        exports: &Self::Exports,
    ) -> wasmtime::Result<std::result::Result<ResourceAny, ConfigError>>;
}

/// A configured instance: the plugin, its configuration, the live store and resource, and the number
/// of batch calls so far (messages name the batch).
pub(crate) struct Instance<C: Configure> {
    shared: Arc<PluginShared>,
    config: C,
    live: Option<(Sandbox<C::Exports>, ResourceAny)>,
    batches: u64,
}

impl<C: Configure> Instance<C> {
    /// Instantiates and runs the factory; its refusal is a [`Phase::Configure`] error.
    pub fn start(shared: Arc<PluginShared>, config: C) -> Result<Instance<C>> {
        let mut instance = Instance {
            shared,
            config,
            live: None,
            batches: 0,
        };
        instance.restart()?;
        Ok(instance)
    }

    pub fn shared(&self) -> &Arc<PluginShared> {
        &self.shared
    }

    pub fn config(&self) -> &C {
        &self.config
    }

    /// Counts a batch call and returns its number (from 1).
    pub fn next_batch(&mut self) -> u64 {
        self.batches += 1;
        self.batches
    }

    fn restart(&mut self) -> Result<()> {
        let shared = self.shared.clone();
        let config = &self.config;
        let mut sandbox = Sandbox::new(&shared, |store| config.instantiate(&shared, store))?;
        let factory = config.factory();
        let called = sandbox
            .call(&shared, factory, |store, exports| {
                config.create(store, exports)
            })
            .map_err(|e| PluginError::new(&*shared.name, Phase::Configure, anyhow!("{e}")))?;
        shared
            .metrics
            .record_call(called.started.elapsed(), 0, 0, 0, 0);
        let resource = called.value.map_err(|e| {
            let option = e
                .option
                .as_ref()
                .map(|o| format!("option `{o}`: "))
                .unwrap_or_default();
            PluginError::new(
                &*shared.name,
                Phase::Configure,
                anyhow!("{factory} refused: {option}{}", e.message),
            )
            .with_option(e.option)
        })?;
        self.live = Some((sandbox, resource));
        Ok(())
    }

    /// Runs one call (`what` names it and its batch) on the resource. After a trap the instance is
    /// replaced before the error is returned; the error says whether that worked.
    pub fn call<R>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Store<PluginState>, &C::Exports, ResourceAny) -> wasmtime::Result<R>,
    ) -> Result<Called<R>> {
        if self.live.is_none() {
            self.restart()?;
        }
        let shared = self.shared.clone();
        let Some((sandbox, resource)) = self.live.as_mut() else {
            unreachable!("started above")
        };
        let resource = *resource;
        match sandbox.call(&shared, what, |store, exports| f(store, exports, resource)) {
            Ok(called) => Ok(called),
            Err(err) => {
                // The store is poisoned: drop it, start a fresh instance with the same configuration.
                self.live = None;
                shared.metrics.record_failure(err.failure);
                let restart = match self.restart() {
                    Ok(()) => {
                        shared.metrics.record_reinstantiation();
                        "; a fresh instance replaced it".to_owned()
                    }
                    Err(e) => format!("; replacing the instance failed too: {e}"),
                };
                Err(PluginError::call(
                    &*shared.name,
                    err.failure,
                    anyhow!("{:#}{restart}", err.inner()),
                ))
            }
        }
    }
}
