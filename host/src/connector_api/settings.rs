//! Job settings from `SET 'key' = 'value'`, declared once like connector options.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use anyhow::anyhow;

use super::restart::{self as rs, RestartStrategy};
use crate::options::{OptionDecl, OptionSet, ResolvedOptions, check_value};
use crate::sql::Pos;

pub const CHECKPOINT_INTERVAL: &str = "execution.checkpointing.interval";
pub const CHECKPOINT_TIMEOUT: &str = "execution.checkpointing.timeout";
pub const CHECKPOINT_DIR: &str = "state.checkpoints.dir";
pub const NUM_RETAINED: &str = "state.checkpoints.num-retained";
pub const PIPELINE_NAME: &str = "pipeline.name";
pub const BATCH_SIZE: &str = "table.exec.mini-batch.size";
pub const BATCH_LINGER: &str = "table.exec.mini-batch.allow-latency";
pub const NOT_NULL_ENFORCER: &str = "table.exec.sink.not-null-enforcer";
pub const PARALLELISM_DEFAULT: &str = "parallelism.default";
pub const DYNAMIC_OPTIONS: &str = "table.dynamic-table-options.enabled";
/// The most subtasks one side of an INSERT may have.
pub const MAX_PARALLELISM: i64 = 1024;

/// The `SET` keys pulsar-connect reads.
pub static JOB_OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "job settings (SET 'key' = 'value')",
        "Keys set with `SET` in the job file. Keys not listed here are accepted with a warning (Flink jobs often set \
         engine keys such as `taskmanager.memory.process.size` that have no meaning here).",
        vec![
            OptionDecl::string(PIPELINE_NAME, "Job name. Also the job's identity for checkpoints: state lives in `<state dir>/<pipeline.name>/`. Without it the identity is `job-` + the first 12 hex digits of the SHA-256 of the job file with comments and whitespace normalised, so editing the job starts from fresh state."),
            OptionDecl::duration(CHECKPOINT_INTERVAL, "Time between checkpoints. Sources' positions are only made durable (and, for Pulsar, committed to the subscription) at checkpoints, so this bounds replay after a crash.").default("10s"),
            OptionDecl::duration(CHECKPOINT_TIMEOUT, "A checkpoint that has not completed after this long is declared failed (counted in `pulsar_connect_checkpoint_failures_total`).").default("10min"),
            OptionDecl::string(CHECKPOINT_DIR, "Directory for checkpoints (`--state-dir` overrides it). A `file://` prefix is accepted. Without either, checkpoints still flush sinks and commit sources but nothing is written to disk and a restart begins afresh."),
            OptionDecl::int(NUM_RETAINED, 1, 1000, "Number of complete checkpoints kept on disk; older ones are deleted. Keeping more than one lets a restart fall back when the newest file is damaged.").default("3"),
            OptionDecl::int(BATCH_SIZE, 1, 1_000_000, "Maximum rows per batch handed from a source to the pipeline.").default("4096"),
            OptionDecl::duration(BATCH_LINGER, "How long a source may hold rows to fill a batch. Unset (the default): adaptive — a batch is handed on as soon as the source has nothing more received for it, and grows towards `table.exec.mini-batch.size` only while more rows are already waiting, so rows never wait for a timer. `0ms`: every poll's rows are handed on at once. A longer value waits up to that long for a batch to fill (fewer, larger batches at moderate rates, at the cost of latency)."),
            OptionDecl::int(PARALLELISM_DEFAULT, 1, MAX_PARALLELISM, "Subtasks per INSERT for the sources and sinks that read and write in parallel (the Pulsar source and sink, `blackhole`) when the table sets no `scan.parallelism` / `sink.parallelism`. Each source subtask reads its share of the splits (topic partitions, key ranges) with its own decoders and transform, and feeds one sink subtask, so the rows of a partition stay in order. Unset: as many as the process has cores, capped by the number of splits; the sinks take the sources' number (docs/adr/0015)."),
            OptionDecl::boolean(DYNAMIC_OPTIONS, "Whether a query may set a table's options for itself with a hint, `FROM t /*+ OPTIONS('k' = 'v') */` or `INSERT INTO t /*+ OPTIONS(...) */` (merged over the table's own and checked with them as one set; Flink's key and default). `false`: such a hint is an error.").default("true"),
            OptionDecl::enumeration(NOT_NULL_ENFORCER, &["ERROR", "DROP"], "What to do when a NULL is written to a NOT NULL sink column: fail the job, or drop the row (counted as skipped).").default("ERROR"),
            OptionDecl::enumeration(rs::TYPE, rs::TYPES, "What happens when the job fails (Flink's restart strategies; docs/adr/0025). `disable` / `none` / `off`: the process ends (exit 1). `fixed-delay`: restart after `restart-strategy.fixed-delay.delay`, at most `restart-strategy.fixed-delay.attempts` times. `failure-rate`: restart after `restart-strategy.failure-rate.delay` while at most `restart-strategy.failure-rate.max-failures-per-interval` failures fall within `restart-strategy.failure-rate.failure-rate-interval`. `exponential-delay`: restart after a backoff that grows by `backoff-multiplier` up to `max-backoff`, with ± `jitter-factor`, reset after the job ran `reset-backoff-threshold`. A restart reads again from the last checkpoint, as the process's own fresh run of the same command line; each one is logged with its cause and counted on the status page. Once a strategy is set every failure counts, a rewind (a moved partition, a conflicting acknowledgement) too. Unset (unlike Flink, which then restarts every failure with exponential-delay): a rewind restarts after 1 s without limit and any other failure ends the process, for its supervisor to decide. The old key `restart-strategy` is read too. The sub-keys' defaults are Flink's, applied by the strategy, so the SQL shell's `SET;` lists only the sub-keys written.").aliases(&["restart-strategy"]),
            OptionDecl::int(rs::FIXED_ATTEMPTS, 1, i32::MAX as i64, "fixed-delay: how many restarts before a failure ends the job. Default: `1`."),
            OptionDecl::duration(rs::FIXED_DELAY, "fixed-delay: the time between a failure and the restart. Default: `1s`."),
            OptionDecl::int(rs::RATE_MAX, 1, i32::MAX as i64, "failure-rate: the most failures within `restart-strategy.failure-rate.failure-rate-interval` that still restart; one more ends the job. Default: `1`."),
            OptionDecl::duration(rs::RATE_INTERVAL, "failure-rate: the window failures are counted in. Default: `1min`."),
            OptionDecl::duration(rs::RATE_DELAY, "failure-rate: the time between a failure and the restart. Default: `1s`."),
            OptionDecl::duration(rs::EXP_INITIAL, "exponential-delay: the first backoff. Default: `1s`."),
            OptionDecl::duration(rs::EXP_MAX, "exponential-delay: the longest backoff. Default: `1min`."),
            OptionDecl::double(rs::EXP_MULTIPLIER, 1.0, 1000.0, "exponential-delay: each failure multiplies the backoff by this, up to `max-backoff`. Default: `1.5`."),
            OptionDecl::duration(rs::EXP_RESET, "exponential-delay: a job that ran this long since its last restart starts again from `initial-backoff` (and its attempts from 0). Default: `1h`."),
            OptionDecl::double(rs::EXP_JITTER, 0.0, 1.0, "exponential-delay: each backoff is moved by a random amount within ± this fraction, so jobs that failed together do not restart together. Default: `0.1`."),
            OptionDecl::int(rs::EXP_ATTEMPTS, 1, i32::MAX as i64, "exponential-delay: how many restarts, counted since the backoff was last reset, before a failure ends the job. Default: no limit (`2147483647`, Flink's `infinite`)."),
        ],
        vec![],
    )
});

/// Typed job settings.
#[derive(Debug, Clone)]
pub struct JobSettings {
    pub pipeline_name: Option<String>,
    pub checkpoint_interval: Duration,
    pub checkpoint_timeout: Duration,
    pub checkpoint_dir: Option<PathBuf>,
    pub num_retained: usize,
    pub batch_size: usize,
    /// `None`: adaptive hand-off (see [`BATCH_LINGER`]).
    pub batch_linger: Option<Duration>,
    pub drop_null_violations: bool,
    /// `parallelism.default` (`None`: the runtime's default).
    pub parallelism: Option<usize>,
    /// `restart-strategy.*`.
    pub restart: RestartStrategy,
    /// `table.dynamic-table-options.enabled`: OPTIONS hints allowed.
    pub dynamic_table_options: bool,
    /// Every SET pair, for display.
    pub raw: ResolvedOptions,
}

impl Default for JobSettings {
    fn default() -> Self {
        resolve(&[])
            .map(|(s, _)| s)
            .unwrap_or_else(|_| unreachable!("defaults are valid"))
    }
}

/// Validates `SET` pairs; returns settings and warnings for unknown keys.
pub fn resolve(sets: &[(String, String, Pos)]) -> anyhow::Result<(JobSettings, Vec<String>)> {
    let set = &*JOB_OPTIONS;
    let mut warnings = Vec::new();
    let mut known = Vec::new();
    for (k, v, pos) in sets {
        match set.options.iter().find(|d| d.spellings().any(|s| s == k)) {
            Some(d) => {
                check_value(&d.kind, v).map_err(|m| anyhow!("{pos}: SET '{k}': {m}"))?;
                // A later SET overrides an earlier one (under any of its spellings), as in the Flink
                // SQL client.
                let key = d.key.to_string();
                known.retain(|(kk, _, _): &(String, String, Pos)| *kk != key);
                known.push((key, v.clone(), *pos));
            }
            None => {
                let hint = crate::options::suggest(k, set.options.iter().map(|d| d.key.as_ref()))
                    .map(|b| format!("; did you mean '{b}'?"))
                    .unwrap_or_default();
                warnings.push(format!(
                    "{pos}: SET '{k}' is not used by pulsar-connect and is ignored{hint}"
                ));
            }
        }
    }
    let r = set.validate("(job)", &known, &[]).map_err(|es| {
        anyhow!(
            "{}",
            es.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let dur = |k: &str| r.get_duration(k).unwrap_or_default();
    Ok((
        JobSettings {
            pipeline_name: r.get(PIPELINE_NAME).map(str::to_string),
            checkpoint_interval: dur(CHECKPOINT_INTERVAL).max(Duration::from_millis(10)),
            checkpoint_timeout: dur(CHECKPOINT_TIMEOUT).max(Duration::from_millis(100)),
            checkpoint_dir: r
                .get(CHECKPOINT_DIR)
                .map(|d| PathBuf::from(d.strip_prefix("file://").unwrap_or(d))),
            num_retained: r.get_i64(NUM_RETAINED).unwrap_or(3).max(1) as usize,
            batch_size: r.get_i64(BATCH_SIZE).unwrap_or(4096).max(1) as usize,
            batch_linger: r.get_duration(BATCH_LINGER),
            drop_null_violations: r.get(NOT_NULL_ENFORCER) == Some("DROP"),
            parallelism: r.get_i64(PARALLELISM_DEFAULT).map(|n| n.max(1) as usize),
            restart: RestartStrategy::from_settings(&r),
            dynamic_table_options: r.get_bool(DYNAMIC_OPTIONS).unwrap_or(true),
            raw: r,
        },
        warnings,
    ))
}
