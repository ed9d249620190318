//! The one wasmtime [`Engine`] of the process and its epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, Thread};
use std::time::Duration;

use anyhow::Context as _;
use wasmtime::{Config, Engine};

/// How often the ticker advances the epoch; deadlines are counted in these ticks.
pub const DEFAULT_EPOCH_TICK: Duration = Duration::from_millis(5);

/// Builds the engine: component model on, component-model concurrency off (it slows synchronous
/// calls and we make none concurrently), epoch interruption on (cheaper than fuel; see ADR 0004).
pub fn build_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.concurrency_support(false);
    config.epoch_interruption(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // 512 KiB (wasmtime's default) is plenty for parsers; stack overflow is a trap like any other.
    config.max_wasm_stack(512 * 1024);
    // `PULSAR_CONNECT_WASM_PROFILER=perfmap`: wasmtime writes /tmp/perf-<pid>.map, so `perf report` (and
    // callgrind, by address) name the guest's functions.
    if std::env::var_os("PULSAR_CONNECT_WASM_PROFILER").is_some_and(|v| v == "perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    Engine::new(&config).map_err(|e| anyhow::anyhow!("building the wasmtime engine: {e:#}"))
}

/// What the ticker thread and the calls share.
#[derive(Default)]
struct TickerState {
    /// Guest calls running now (instantiations included).
    active: AtomicUsize,
    /// Set when the last handle is dropped: the thread ends.
    stop: AtomicBool,
    /// Epoch increments so far.
    ticks: AtomicU64,
}

/// The thread that advances the engine's epoch every tick while guest code runs, and parks while none
/// does: an idle job costs no wake-ups (ticking all the time cost ~200 wakes and ~2 ms of CPU per
/// second). Deadlines count ticks from the start of a call, so a call always runs with a ticking epoch.
pub struct EpochTicker {
    state: Arc<TickerState>,
    thread: Thread,
}

impl EpochTicker {
    /// Starts the thread. It holds only a weak reference to the engine, and ends once this handle is
    /// dropped or every clone of the engine is.
    pub fn start(engine: &Engine, tick: Duration) -> anyhow::Result<EpochTicker> {
        let weak = engine.weak();
        let state = Arc::new(TickerState::default());
        let shared = state.clone();
        let handle = thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !shared.stop.load(Ordering::Acquire) {
                    if shared.active.load(Ordering::Acquire) == 0 {
                        // Woken by the first call to start (or by the drop of the handle).
                        thread::park();
                        continue;
                    }
                    thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    shared.ticks.fetch_add(1, Ordering::Relaxed);
                }
            })
            .context("starting the epoch ticker thread")?;
        Ok(EpochTicker {
            state,
            thread: handle.thread().clone(),
        })
    }

    /// Marks guest code as running until the guard is dropped; wakes the ticker if it was parked.
    pub fn running(&self) -> Running<'_> {
        if self.state.active.fetch_add(1, Ordering::AcqRel) == 0 {
            self.thread.unpark();
        }
        Running(self)
    }

    /// Epoch increments so far.
    pub fn ticks(&self) -> u64 {
        self.state.ticks.load(Ordering::Relaxed)
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// A running guest call (see [`EpochTicker::running`]).
pub struct Running<'a>(&'a EpochTicker);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.state.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Ticks to allow for a call of at most `timeout`: rounded up, plus one for the partly elapsed tick.
pub fn deadline_ticks(timeout: Duration, tick: Duration) -> u64 {
    let tick = tick.as_nanos().max(1);
    (timeout.as_nanos().div_ceil(tick) as u64).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ticker_ticks_only_while_guest_code_runs() {
        let engine = build_engine().unwrap();
        let ticker = EpochTicker::start(&engine, Duration::from_millis(2)).unwrap();
        thread::sleep(Duration::from_millis(60));
        assert_eq!(ticker.ticks(), 0, "parked while nothing runs");
        {
            let _a = ticker.running();
            let _b = ticker.running();
            thread::sleep(Duration::from_millis(60));
        }
        let after_calls = ticker.ticks();
        assert!(after_calls >= 2, "ticks while a call runs: {after_calls}");
        thread::sleep(Duration::from_millis(60));
        // At most the tick that was under way when the last call ended.
        assert!(ticker.ticks() <= after_calls + 1, "parked again");
        let _c = ticker.running();
        thread::sleep(Duration::from_millis(60));
        assert!(ticker.ticks() >= after_calls + 2, "woken by the next call");
    }
}
