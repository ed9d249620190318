//! Per-plugin counters, shared by every instance of the plugin.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Live counters of one plugin (cheap relaxed atomics).
#[derive(Debug, Default)]
pub struct PluginMetrics {
    calls: AtomicU64,
    rows: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    nanos: AtomicU64,
    row_errors: AtomicU64,
    traps: AtomicU64,
    instantiations: AtomicU64,
    memory_peak: AtomicU64,
    reinstantiations: AtomicU64,
    deadlines: AtomicU64,
    memory_limit_hits: AtomicU64,
    versions_switched: AtomicU64,
    versions_refused: AtomicU64,
    versions_rolled_back: AtomicU64,
}

/// What became of a new version of a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadOutcome {
    Switched,
    Refused,
    RolledBack,
}

/// A snapshot of a plugin's counters, for the metrics layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginCounters {
    /// Calls into the plugin (factories and batch calls).
    pub calls: u64,
    /// Rows decoded, encoded or routed.
    pub rows: u64,
    /// Payload and key bytes passed in.
    pub bytes_in: u64,
    /// Payload bytes returned.
    pub bytes_out: u64,
    /// Wall time spent inside calls.
    pub time: Duration,
    /// Rows or messages reported as errors.
    pub row_errors: u64,
    /// Traps, deadlines and limit hits (each replaced the instance).
    pub traps: u64,
    /// Instances created (the first ones and the replacements).
    pub instantiations: u64,
    /// The largest linear memory any instance of the plugin has had, in bytes (its memory high-water).
    pub memory_peak_bytes: u64,
    /// Instances built again after a failed call poisoned the one before.
    pub reinstantiations: u64,
    /// Calls interrupted at their deadline (counted in `traps` too).
    pub deadlines: u64,
    /// Calls that failed asking for memory beyond the limit (counted in `traps` too).
    pub memory_limit_hits: u64,
    /// New versions that passed their first batches and took over (hot reload).
    pub versions_switched: u64,
    /// New versions refused before they ran: their load, compilation or factory failed.
    pub versions_refused: u64,
    /// New versions that failed in their first batches; the version before them took the batch back.
    pub versions_rolled_back: u64,
}

impl PluginMetrics {
    pub fn record_call(
        &self,
        elapsed: Duration,
        rows: u64,
        bytes_in: u64,
        bytes_out: u64,
        row_errors: u64,
    ) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows, Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
        self.row_errors.fetch_add(row_errors, Ordering::Relaxed);
        self.nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn record_trap(&self) {
        self.traps.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes an instance's memory size after a call (the high-water mark only grows).
    pub fn record_memory(&self, bytes: usize) {
        self.memory_peak.fetch_max(bytes as u64, Ordering::Relaxed);
    }

    /// A call failed: a deadline or memory-limit hit is counted as such (every failure is a trap).
    pub fn record_failure(&self, failure: super::error::Failure) {
        match failure {
            super::error::Failure::Deadline => {
                self.deadlines.fetch_add(1, Ordering::Relaxed);
            }
            super::error::Failure::MemoryLimit => {
                self.memory_limit_hits.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// A fresh instance replaced a poisoned one.
    pub fn record_reinstantiation(&self) {
        self.reinstantiations.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_instantiation(&self) {
        self.instantiations.fetch_add(1, Ordering::Relaxed);
    }

    /// A hot-reload outcome (counted once per version, not per instance).
    pub fn record_reload(&self, outcome: ReloadOutcome) {
        match outcome {
            ReloadOutcome::Switched => &self.versions_switched,
            ReloadOutcome::Refused => &self.versions_refused,
            ReloadOutcome::RolledBack => &self.versions_rolled_back,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> PluginCounters {
        PluginCounters {
            calls: self.calls.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            time: Duration::from_nanos(self.nanos.load(Ordering::Relaxed)),
            row_errors: self.row_errors.load(Ordering::Relaxed),
            traps: self.traps.load(Ordering::Relaxed),
            instantiations: self.instantiations.load(Ordering::Relaxed),
            memory_peak_bytes: self.memory_peak.load(Ordering::Relaxed),
            reinstantiations: self.reinstantiations.load(Ordering::Relaxed),
            deadlines: self.deadlines.load(Ordering::Relaxed),
            memory_limit_hits: self.memory_limit_hits.load(Ordering::Relaxed),
            versions_switched: self.versions_switched.load(Ordering::Relaxed),
            versions_refused: self.versions_refused.load(Ordering::Relaxed),
            versions_rolled_back: self.versions_rolled_back.load(Ordering::Relaxed),
        }
    }
}
