//! One plugin instance in its own `Store`: limits, a deadline before every call, and the poisoning
//! rule — after a trap the store is dropped and the owner builds a fresh one.

use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use wasmtime::Store;

use super::engine::deadline_ticks;
use super::error::{Failure, Phase, PluginError, Result};
use super::loader::PluginShared;
use super::state::PluginState;

/// A store plus the world's bindings.
pub(crate) struct Sandbox<B> {
    pub store: Store<PluginState>,
    pub bindings: B,
}

/// What a guarded call returned when it did not trap.
pub(crate) struct Called<R> {
    pub value: R,
    pub started: Instant,
}

impl<B> Sandbox<B> {
    /// A new instance: a store with the plugin's limits, instantiated by `instantiate`.
    pub fn new(
        shared: &Arc<PluginShared>,
        instantiate: impl FnOnce(&mut Store<PluginState>) -> wasmtime::Result<B>,
    ) -> Result<Sandbox<B>> {
        let state = PluginState::new(
            shared.log.clone(),
            shared.memory_bytes,
            shared.files.as_deref(),
        )
        .map_err(|e| PluginError::new(&*shared.name, Phase::Instantiate, e))?;
        let mut store = Store::new(&shared.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(deadline_ticks(shared.timeout, shared.tick));
        shared.metrics.record_instantiation();
        let _running = shared.ticker.running();
        let files = shared.files.is_some();
        let bindings = super::files::guest_call(files, || instantiate(&mut store))
            .map_err(|e| PluginError::new(&*shared.name, Phase::Instantiate, anyhow!("{e:#}")))?;
        shared.metrics.record_memory(store.data().limiter.peak);
        Ok(Sandbox { store, bindings })
    }

    /// Runs `f` with a fresh deadline. A trap is returned as a [`PluginError`] describing the call and
    /// the batch; the caller must then drop this sandbox (its store is poisoned).
    pub fn call<R>(
        &mut self,
        shared: &PluginShared,
        what: &str,
        f: impl FnOnce(&mut Store<PluginState>, &B) -> wasmtime::Result<R>,
    ) -> std::result::Result<Called<R>, PluginError> {
        self.store
            .set_epoch_deadline(deadline_ticks(shared.timeout, shared.tick));
        self.store.data_mut().limiter.exceeded = None;
        shared.log.take_recent_stderr();
        let started = Instant::now();
        let running = shared.ticker.running();
        let result = super::files::guest_call(shared.files.is_some(), || {
            f(&mut self.store, &self.bindings)
        });
        drop(running);
        shared.metrics.record_memory(self.store.data().limiter.peak);
        match result {
            Ok(value) => Ok(Called { value, started }),
            Err(e) => {
                shared.metrics.record_trap();
                let (failure, cause) =
                    if e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt) {
                        (
                            Failure::Deadline,
                            format!(
                                "ran past its deadline of {} ms and was interrupted",
                                shared.timeout.as_millis()
                            ),
                        )
                    } else if let Some(wanted) = self.store.data().limiter.exceeded {
                        (
                            Failure::MemoryLimit,
                            format!(
                                "exceeded its memory limit of {} MiB (it asked for {} MiB)",
                                shared.memory_bytes >> 20,
                                wanted.div_ceil(1 << 20)
                            ),
                        )
                    } else {
                        // The trap itself, without the multi-line wasm backtrace.
                        let cause = match e.downcast_ref::<wasmtime::Trap>() {
                            Some(trap) => trap.to_string(),
                            None => format!("{e:#}")
                                .lines()
                                .next()
                                .unwrap_or_default()
                                .to_owned(),
                        };
                        (Failure::Trap, format!("trapped: {cause}"))
                    };
                let mut stderr = shared.log.take_recent_stderr();
                stderr.retain(|line| !line.trim().is_empty());
                let stderr = if stderr.is_empty() {
                    String::new()
                } else {
                    format!("; its last stderr: {}", stderr.join(" / "))
                };
                Err(PluginError::call(
                    &*shared.name,
                    failure,
                    anyhow!("{what} {cause}{stderr}"),
                ))
            }
        }
    }
}
