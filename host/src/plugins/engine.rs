//! The one wasmtime [`Engine`] of the process and its epoch ticker.

use std::thread;
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

/// Starts a thread that increments the engine's epoch every `tick`. It holds only a weak reference,
/// so it ends by itself once every clone of the engine has been dropped.
pub fn start_epoch_ticker(engine: &Engine, tick: Duration) -> anyhow::Result<()> {
    let weak = engine.weak();
    thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            loop {
                thread::sleep(tick);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .context("starting the epoch ticker thread")?;
    Ok(())
}

/// Ticks to allow for a call of at most `timeout`: rounded up, plus one for the partly elapsed tick.
pub fn deadline_ticks(timeout: Duration, tick: Duration) -> u64 {
    let tick = tick.as_nanos().max(1);
    (timeout.as_nanos().div_ceil(tick) as u64).saturating_add(1)
}
