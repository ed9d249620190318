//! The conformance kit behind `pulsar-connect plugins test` (ADR 0020): a plugin's vectors through the
//! sandbox, a hostile-input pass, and a cost report.
//!
//! - [`vectors`]: the one vector file format (JSON lines; `docs/plugins.md`, "Vector files").
//! - [`values`]: the vectors' JSON row values ⇄ Arrow columns, and the cell rendering comparisons use.
//! - [`format`], [`router`]: the runs per plugin kind (vectors, cost, hostile inputs).
//! - [`hostile`]: the hostile inputs (truncated, mutated, random and oversized payloads or keys).
//!
//! Everything goes through the same [`Decoder`](crate::plugins::Decoder) / [`Encoder`](crate::plugins::Encoder) /
//! [`Router`](crate::plugins::Router) facades a job uses: same limits, same deadline, same checks of what the
//! plugin returns.

pub mod format;
pub mod hostile;
pub mod router;
pub mod values;
pub mod vectors;

use std::io::Write;
use std::time::{Duration, Instant};

use crate::plugins::error::{Failure, PluginError};
use crate::plugins::loader::Plugin;
use crate::plugins::manifest::{HOST_MAX_MEMORY_MIB, Kind};
use vectors::VectorFile;

/// How much the kit runs.
#[derive(Debug, Clone)]
pub struct KitConfig {
    /// Seed of the hostile inputs (the same seed gives the same inputs).
    pub seed: u64,
    /// Random inputs of the hostile pass (besides the truncated and mutated vectors).
    pub random_inputs: usize,
    /// Messages (or rows, keys) each cost measurement runs at least…
    pub cost_messages: usize,
    /// …unless this much time has passed.
    pub cost_time: Duration,
    /// Messages per batch of the cost and hostile passes.
    pub batch: usize,
}

impl Default for KitConfig {
    fn default() -> Self {
        KitConfig {
            seed: 0x5eed,
            random_inputs: 2000,
            cost_messages: 50_000,
            cost_time: Duration::from_secs(3),
            batch: 512,
        }
    }
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub vectors: usize,
    /// One line per failed vector or hostile input (`file:line name: what`).
    pub failures: Vec<String>,
    pub hostile: HostileSummary,
    pub costs: Vec<Cost>,
    /// The longest single call seen (every pass).
    pub slowest_call: Duration,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.hostile.failures.is_empty()
    }

    /// Times a call and keeps the slowest.
    pub(crate) fn timed<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let r = f();
        self.slowest_call = self.slowest_call.max(started.elapsed());
        r
    }

    pub(crate) fn fail(&mut self, file: &VectorFile, line: usize, name: &str, what: String) {
        self.failures
            .push(format!("{}:{line} `{name}`: {what}", file.path));
    }
}

/// The hostile pass: how many inputs of each kind went in and what came out.
#[derive(Debug, Default)]
pub struct HostileSummary {
    pub inputs: usize,
    pub truncated: usize,
    pub mutated: usize,
    pub random: usize,
    pub oversized: usize,
    pub rows: usize,
    pub row_errors: usize,
    /// Whole batches the plugin refused with an error (allowed; the instance stays).
    pub refused: usize,
    /// Traps, deadline hits, memory-limit hits, invalid results: each a failure.
    pub failures: Vec<String>,
}

/// One cost measurement.
#[derive(Debug, Clone)]
pub struct Cost {
    /// `decode`, `encode` or `route`.
    pub what: &'static str,
    pub items: usize,
    pub bytes: usize,
    pub elapsed: Duration,
    pub batch: usize,
}

impl Cost {
    pub fn nanos_per_item(&self) -> f64 {
        self.elapsed.as_nanos() as f64 / self.items.max(1) as f64
    }
}

/// Whether an error of a hostile input is a failure: a trap, a deadline or memory-limit hit, or a result
/// the host rejected; a plugin refusing the whole batch with its own error is not.
pub(crate) fn is_failure(e: &PluginError) -> bool {
    match e.failure {
        Failure::Deadline | Failure::MemoryLimit | Failure::Trap => true,
        Failure::Rejected => !format!("{:#}", e.inner()).contains(") failed: "),
        Failure::Other => true,
    }
}

/// Runs `file` against `plugin` and writes the report to `out`.
pub fn run(
    plugin: &Plugin,
    file: &VectorFile,
    config: &KitConfig,
    out: &mut dyn Write,
) -> anyhow::Result<Outcome> {
    let m = plugin.manifest();
    writeln!(
        out,
        "plugin {} {} ({}), vectors {} ({} in {} sections)",
        m.name,
        m.version,
        m.world,
        file.path,
        file.len(),
        file.sections.len()
    )?;
    let mut outcome = Outcome::default();
    match plugin.kind() {
        Kind::Format => format::run(plugin, file, config, &mut outcome, out)?,
        Kind::Router => router::run(plugin, file, config, &mut outcome, out)?,
    }
    report(plugin, &outcome, out)?;
    Ok(outcome)
}

fn report(plugin: &Plugin, o: &Outcome, out: &mut dyn Write) -> anyhow::Result<()> {
    for f in &o.failures {
        writeln!(out, "FAIL {f}")?;
    }
    writeln!(
        out,
        "vectors: {} passed, {} failed",
        o.vectors - o.failures.len().min(o.vectors),
        o.failures.len()
    )?;
    let h = &o.hostile;
    writeln!(
        out,
        "hostile: {} inputs ({} truncated, {} mutated, {} random, {} oversized): {}; {} rows, {} row errors, {} refused batches",
        h.inputs,
        h.truncated,
        h.mutated,
        h.random,
        h.oversized,
        if h.failures.is_empty() {
            "no trap, no deadline or memory-limit hit".to_owned()
        } else {
            format!("{} FAILED", h.failures.len())
        },
        h.rows,
        h.row_errors,
        h.refused
    )?;
    for f in &h.failures {
        writeln!(out, "FAIL hostile: {f}")?;
    }
    writeln!(out, "cost (this machine, one core, inside the sandbox):")?;
    for c in &o.costs {
        let unit = match c.what {
            "decode" => "message",
            "encode" => "row",
            _ => "key",
        };
        let mb_s = c.bytes as f64 / c.elapsed.as_secs_f64().max(1e-9) / 1e6;
        writeln!(
            out,
            "  {:<7}{:>10.0} ns/{unit}  ({} {unit}s in batches of {}, {} bytes, {mb_s:.1} MB/s)",
            c.what,
            c.nanos_per_item(),
            c.items,
            c.batch,
            c.bytes
        )?;
    }
    let m = plugin.manifest();
    let limit = m.memory_limit_bytes(HOST_MAX_MEMORY_MIB) as u64;
    let peak = plugin.counters().memory_peak_bytes;
    writeln!(
        out,
        "memory: high-water {} of the {} MiB limit (headroom {}, {:.0} %)",
        mib(peak),
        limit >> 20,
        mib(limit.saturating_sub(peak)),
        100.0 * limit.saturating_sub(peak) as f64 / limit.max(1) as f64
    )?;
    let timeout = Duration::from_millis(m.limits.timeout_ms);
    writeln!(
        out,
        "deadline: slowest call {:.2} ms of the {} ms limit (headroom {:.1} %)",
        o.slowest_call.as_secs_f64() * 1e3,
        m.limits.timeout_ms,
        100.0 * (1.0 - o.slowest_call.as_secs_f64() / timeout.as_secs_f64().max(1e-9)).max(0.0)
    )?;
    if o.passed() {
        writeln!(out, "ok")?;
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// Bytes for a message: the text when it is short UTF-8, else hex (cut).
pub(crate) fn show_bytes(b: &[u8]) -> String {
    const MAX: usize = 120;
    match std::str::from_utf8(b) {
        Ok(s) if s.len() <= MAX => format!("{s:?}"),
        Ok(s) => format!(
            "{:?}… ({} bytes)",
            s.chars().take(MAX).collect::<String>(),
            b.len()
        ),
        Err(_) if b.len() <= MAX / 2 => format!("0x{}", hex::encode(b)),
        Err(_) => format!("0x{}… ({} bytes)", hex::encode(&b[..MAX / 2]), b.len()),
    }
}
