//! The one lifecycle of a configured plugin instance, shared by decoders, encoders and routers:
//! instantiate in a fresh [`Sandbox`] (limits, deadline), run the factory once, make batch calls
//! against the resource it returned, and after a trap drop the poisoned store and build the same
//! instance again (factory re-run) before reporting the trap. At a completed checkpoint it switches to a
//! newer version of its plugin (hot reload, [`super::reload`]), with the old instance kept for the new
//! one's first batches.

use std::sync::Arc;

use anyhow::anyhow;
use tracing::{error, info};
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::error::{Phase, PluginError, Result};
use super::loader::{Plugin, PluginShared};
use super::metrics::ReloadOutcome;
use super::model::ConfigError;
use super::reload::{PROBATION_BATCHES, VersionId, Versions};
use super::sandbox::{Called, Sandbox};
use super::state::PluginState;

/// What a kind of instance needs to be made (again): its bindings and its factory call.
pub(crate) trait Configure {
    /// The instance's exports.
    type Exports;

    /// The same configuration for another version of the plugin: its kind and the options checked
    /// against its manifest (defaults from it).
    fn for_version(&self, plugin: &Plugin) -> Result<Self>
    where
        Self: Sized;

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

/// A configured instance of one version: the plugin, its configuration, the live store and resource,
/// and the number of batch calls so far (messages name the batch).
pub(crate) struct Core<C: Configure> {
    shared: Arc<PluginShared>,
    config: C,
    live: Option<(Sandbox<C::Exports>, ResourceAny)>,
    batches: u64,
}

impl<C: Configure> Core<C> {
    fn start(shared: Arc<PluginShared>, config: C) -> Result<Core<C>> {
        let mut core = Core {
            shared,
            config,
            live: None,
            batches: 0,
        };
        core.restart()?;
        Ok(core)
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

    fn call<R>(
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

    /// This version as a plugin (for the catalog's bookkeeping: without its versions).
    fn plugin(&self) -> Plugin {
        Plugin {
            shared: self.shared.clone(),
            versions: None,
        }
    }

    fn version(&self) -> VersionId {
        VersionId::of(&self.shared)
    }
}

/// A configured instance: the version it runs ([`Core`]) and, for a version it switched to at a
/// checkpoint, the one before, kept until the new one has run [`PROBATION_BATCHES`] batches.
pub(crate) struct Instance<C: Configure> {
    core: Core<C>,
    versions: Option<Arc<Versions>>,
    /// A checkpoint completed and a newer version is waiting: switch before the next call.
    switch_due: bool,
    previous: Option<Core<C>>,
    probation: u64,
}

impl<C: Configure> Instance<C> {
    /// Instantiates and runs the factory; its refusal is a [`Phase::Configure`] error.
    pub fn start(plugin: &Plugin, config: C) -> Result<Instance<C>> {
        Ok(Instance {
            core: Core::start(plugin.shared.clone(), config)?,
            versions: plugin.versions.clone(),
            switch_due: false,
            previous: None,
            probation: 0,
        })
    }

    pub fn shared(&self) -> &Arc<PluginShared> {
        &self.core.shared
    }

    pub fn config(&self) -> &C {
        &self.core.config
    }

    /// Counts a batch call and returns its number (from 1).
    pub fn next_batch(&mut self) -> u64 {
        self.core.batches += 1;
        self.core.batches
    }

    /// Runs one call (`what` names it and its batch) on the resource. After a trap the instance is
    /// replaced before the error is returned; the error says whether that worked.
    pub fn call<R>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Store<PluginState>, &C::Exports, ResourceAny) -> wasmtime::Result<R>,
    ) -> Result<Called<R>> {
        self.core.call(what, f)
    }

    /// A checkpoint completed: if a newer version of the plugin is waiting, the next batch is the new
    /// version's (cheap: no guest code runs here).
    pub fn checkpoint_completed(&mut self) {
        if let Some(v) = &self.versions
            && self.previous.is_none()
        {
            self.switch_due = v.newer_than(&self.core.shared.sha256).is_some();
        }
    }

    /// The version this instance runs.
    pub fn version(&self) -> VersionId {
        self.core.version()
    }

    /// Runs one batch (`run` on `input`), switching versions first when a checkpoint asked for it. While
    /// a new version is on probation, a failed batch puts the version before it back, which then runs
    /// the batch: a copy of `input` is kept for that.
    pub fn guarded<A: Clone, R>(
        &mut self,
        input: A,
        run: impl Fn(&mut Self, A) -> Result<R>,
    ) -> Result<R> {
        self.switch_if_due();
        if self.previous.is_none() {
            return run(self, input);
        }
        if self
            .versions
            .as_ref()
            .is_some_and(|v| v.is_refused(&self.core.shared.sha256))
        {
            self.roll_back(None);
            return run(self, input);
        }
        match run(self, input.clone()) {
            Ok(r) => {
                self.probation = self.probation.saturating_sub(1);
                if self.probation == 0 {
                    self.previous = None;
                    if let Some(v) = &self.versions {
                        v.passed(&self.core.plugin());
                    }
                }
                Ok(r)
            }
            Err(e) => {
                self.roll_back(Some(&e));
                run(self, input)
            }
        }
    }

    /// Switches now if a completed checkpoint asked for it (otherwise the next batch does).
    pub fn switch_if_due(&mut self) {
        if self.switch_due {
            self.switch_due = false;
            self.switch();
        }
    }

    /// Builds the instance of the newest version beside this one; a refusal keeps this one.
    fn switch(&mut self) {
        let Some(versions) = self.versions.clone() else {
            return;
        };
        let Some(next) = versions.newer_than(&self.core.shared.sha256) else {
            return;
        };
        let from = self.core.version();
        let to = VersionId::of(&next.shared);
        let name = self.core.shared.name.clone();
        let factory = self.core.config.factory();
        match self
            .core
            .config
            .for_version(&next)
            .and_then(|config| Core::start(next.shared.clone(), config))
        {
            Ok(core) => {
                let old = std::mem::replace(&mut self.core, core);
                self.previous = Some(old);
                self.probation = PROBATION_BATCHES;
                info!(plugin = %name, from = %from, to = %to, "switched to plugin version {to} at a completed checkpoint ({factory} ran); {from} stays ready for its first {PROBATION_BATCHES} batches");
            }
            Err(e) => {
                let why = format!("its {factory} failed: {e}");
                error!(plugin = %name, version = %to, "plugin version {to} refused, {why}; {from} stays in use");
                versions.refuse(&next, &self.core.plugin(), ReloadOutcome::Refused, &why);
            }
        }
    }

    /// The new version failed (`err`; `None`: another instance found it bad): the one before takes over.
    fn roll_back(&mut self, err: Option<&PluginError>) {
        let Some(old) = self.previous.take() else {
            return;
        };
        let bad = std::mem::replace(&mut self.core, old);
        let (from, to) = (bad.version(), self.core.version());
        let batch = bad.batches;
        match (err, &self.versions) {
            (Some(e), Some(versions)) => {
                let why = format!("batch {batch} on it failed: {e}");
                error!(plugin = %self.core.shared.name, version = %from, "plugin version {from} rolled back to {to}, which redoes the batch: {why}");
                versions.refuse(
                    &bad.plugin(),
                    &self.core.plugin(),
                    ReloadOutcome::RolledBack,
                    &why,
                );
            }
            _ => {
                info!(plugin = %self.core.shared.name, version = %from, "plugin version {from} was refused by another instance: back to {to}");
            }
        }
        self.probation = 0;
    }
}
