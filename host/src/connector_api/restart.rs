//! Restart strategies: whether a failed run of a job starts again, and after how long — Flink's
//! `restart-strategy.*` keys with their names, values and defaults (docs/adr/0025).
//!
//! The runtime's supervisor (`runtime::supervisor`) acts on a decision. `run` restarts by the process
//! becoming a fresh run of its own command line (`exec`), so what a strategy remembers between failures
//! ([`RestartHistory`]) can travel in an environment variable; the SQL shell restarts its jobs in process
//! and keeps it in memory. Times are wall-clock milliseconds since the Unix epoch: they must mean the
//! same in the next image.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::options::ResolvedOptions;
use crate::options::duration::format as fmt;

pub const TYPE: &str = "restart-strategy.type";
pub const FIXED_ATTEMPTS: &str = "restart-strategy.fixed-delay.attempts";
pub const FIXED_DELAY: &str = "restart-strategy.fixed-delay.delay";
pub const RATE_MAX: &str = "restart-strategy.failure-rate.max-failures-per-interval";
pub const RATE_INTERVAL: &str = "restart-strategy.failure-rate.failure-rate-interval";
pub const RATE_DELAY: &str = "restart-strategy.failure-rate.delay";
pub const EXP_INITIAL: &str = "restart-strategy.exponential-delay.initial-backoff";
pub const EXP_MAX: &str = "restart-strategy.exponential-delay.max-backoff";
pub const EXP_MULTIPLIER: &str = "restart-strategy.exponential-delay.backoff-multiplier";
pub const EXP_RESET: &str = "restart-strategy.exponential-delay.reset-backoff-threshold";
pub const EXP_JITTER: &str = "restart-strategy.exponential-delay.jitter-factor";
pub const EXP_ATTEMPTS: &str = "restart-strategy.exponential-delay.attempts-before-reset-backoff";

/// The values `restart-strategy.type` accepts (Flink's, with its alternative spellings).
pub const TYPES: &[&str] = &[
    "disable",
    "none",
    "off",
    "fixed-delay",
    "fixeddelay",
    "failure-rate",
    "failurerate",
    "exponential-delay",
    "exponentialdelay",
];

/// The environment variable that carries a [`RestartHistory`] into the restarted process.
pub const HISTORY_ENV: &str = "PULSAR_CONNECT_RESTART_HISTORY";

/// The longest cause kept in the history (the log line has it whole).
pub const MAX_CAUSE_BYTES: usize = 4096;

/// The delay of a rewind when no strategy is set.
const REWIND_DELAY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// `restart-strategy.type` unset: a rewind (the job asked to read again from its durable positions:
    /// a partition moved, an acknowledgement conflicted) restarts after 1 s without limit, any other
    /// failure ends the process (exit 1) and is left to whatever supervises it.
    RewindsOnly,
    /// `disable` / `none` / `off`: every failure ends the process, a rewind too.
    Disable,
    FixedDelay {
        attempts: u64,
        delay: Duration,
    },
    FailureRate {
        max_failures: u64,
        interval: Duration,
        delay: Duration,
    },
    ExponentialDelay {
        initial: Duration,
        max: Duration,
        multiplier: f64,
        reset_threshold: Duration,
        jitter: f64,
        attempts_before_reset: u64,
    },
}

impl RestartStrategy {
    /// The strategy the job's `SET` keys give (already validated against their declarations).
    pub fn from_settings(r: &ResolvedOptions) -> RestartStrategy {
        let dur = |k: &str, d: u64| r.get_duration(k).unwrap_or(Duration::from_secs(d));
        let int = |k: &str, d: i64| r.get_i64(k).unwrap_or(d).max(1) as u64;
        match r.get(TYPE) {
            None => RestartStrategy::RewindsOnly,
            Some("disable" | "none" | "off") => RestartStrategy::Disable,
            Some("fixed-delay" | "fixeddelay") => RestartStrategy::FixedDelay {
                attempts: int(FIXED_ATTEMPTS, 1),
                delay: dur(FIXED_DELAY, 1),
            },
            Some("failure-rate" | "failurerate") => RestartStrategy::FailureRate {
                max_failures: int(RATE_MAX, 1),
                interval: dur(RATE_INTERVAL, 60).max(Duration::from_millis(1)),
                delay: dur(RATE_DELAY, 1),
            },
            Some(_) => RestartStrategy::ExponentialDelay {
                initial: dur(EXP_INITIAL, 1).max(Duration::from_millis(1)),
                max: dur(EXP_MAX, 60).max(Duration::from_millis(1)),
                multiplier: r.get_f64(EXP_MULTIPLIER).unwrap_or(1.5).max(1.0),
                reset_threshold: dur(EXP_RESET, 3600),
                jitter: r.get_f64(EXP_JITTER).unwrap_or(0.1).clamp(0.0, 1.0),
                attempts_before_reset: int(EXP_ATTEMPTS, i32::MAX as i64),
            },
        }
    }

    /// The strategy's name as `restart-strategy.type` spells it (`None` when unset).
    pub fn name(&self) -> Option<&'static str> {
        match self {
            RestartStrategy::RewindsOnly => None,
            RestartStrategy::Disable => Some("disable"),
            RestartStrategy::FixedDelay { .. } => Some("fixed-delay"),
            RestartStrategy::FailureRate { .. } => Some("failure-rate"),
            RestartStrategy::ExponentialDelay { .. } => Some("exponential-delay"),
        }
    }

    /// A run failed at `now_ms` (`rewind`: the failure asks to read again from the durable positions).
    /// Updates `h` and says whether to restart. `random` in [0, 1) draws the jitter.
    pub fn decide(
        &self,
        h: &mut RestartHistory,
        now_ms: u64,
        rewind: bool,
        random: f64,
    ) -> Decision {
        let restart = |h: &mut RestartHistory, delay: Duration, of: String| {
            h.restarts += 1;
            h.resumed_ms = now_ms + delay.as_millis() as u64;
            Decision::Restart { delay, of }
        };
        match self {
            RestartStrategy::RewindsOnly if rewind => restart(
                h,
                REWIND_DELAY,
                "rewinds restart without limit (restart-strategy.type unset)".into(),
            ),
            RestartStrategy::RewindsOnly => Decision::Fail {
                why: format!(
                    "no restart strategy is set (`SET '{TYPE}'` restarts after any failure; unset, only a rewind restarts the job)"
                ),
            },
            RestartStrategy::Disable => Decision::Fail {
                why: format!("`{TYPE}` is `disable`"),
            },
            RestartStrategy::FixedDelay { attempts, delay } => {
                h.attempts += 1;
                if h.attempts > *attempts {
                    return Decision::Fail {
                        why: format!(
                            "fixed-delay: all {attempts} restart attempt(s) used (`{FIXED_ATTEMPTS}`), and the job failed again"
                        ),
                    };
                }
                restart(
                    h,
                    *delay,
                    format!("fixed-delay: attempt {} of {attempts}", h.attempts),
                )
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval,
                delay,
            } => {
                let window = interval.as_millis() as u64;
                h.failures_ms.push_back(now_ms);
                while h
                    .failures_ms
                    .front()
                    .is_some_and(|t| now_ms.saturating_sub(*t) > window)
                {
                    h.failures_ms.pop_front();
                }
                let within = h.failures_ms.len() as u64;
                if within > *max_failures {
                    return Decision::Fail {
                        why: format!(
                            "failure-rate: {within} failures within {} (`{RATE_MAX}` is {max_failures} per `{RATE_INTERVAL}`)",
                            fmt(*interval)
                        ),
                    };
                }
                restart(
                    h,
                    *delay,
                    format!(
                        "failure-rate: failure {within} of at most {max_failures} within {}",
                        fmt(*interval)
                    ),
                )
            }
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                reset_threshold,
                jitter,
                attempts_before_reset,
            } => {
                let ran_ms = now_ms.saturating_sub(h.resumed_ms);
                if h.backoff_ms == 0 || ran_ms >= reset_threshold.as_millis() as u64 {
                    // The first failure, or the job ran well for the threshold since it last started.
                    h.backoff_ms = initial.as_millis() as u64;
                    h.attempts = 0;
                } else {
                    let next = (h.backoff_ms as f64 * multiplier).min(max.as_millis() as f64);
                    h.backoff_ms = next.max(1.0) as u64;
                }
                h.attempts += 1;
                if h.attempts > *attempts_before_reset {
                    return Decision::Fail {
                        why: format!(
                            "exponential-delay: {attempts_before_reset} restart attempt(s) without the job running for {} (`{EXP_ATTEMPTS}`), and it failed again",
                            fmt(*reset_threshold)
                        ),
                    };
                }
                // ± jitter × backoff, never beyond max-backoff.
                let spread = h.backoff_ms as f64 * jitter * (2.0 * random - 1.0);
                let ms = (h.backoff_ms as f64 + spread).clamp(0.0, max.as_millis() as f64);
                let limit = if *attempts_before_reset >= i32::MAX as u64 {
                    String::new()
                } else {
                    format!(" of {attempts_before_reset}")
                };
                let of = format!(
                    "exponential-delay: attempt {}{limit}, backoff {}",
                    h.attempts,
                    fmt(Duration::from_millis(h.backoff_ms))
                );
                restart(h, Duration::from_millis(ms as u64), of)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Start the job again after `delay`; `of` says where the strategy stands.
    Restart { delay: Duration, of: String },
    /// The job has failed for good: `why` names the strategy's limit.
    Fail { why: String },
}

/// What the restart strategy remembers of earlier failures of the same command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RestartHistory {
    /// Restarts so far.
    pub restarts: u64,
    /// The cause of the last restart.
    #[serde(default)]
    pub last_cause: Option<String>,
    /// When the last restart's job started again (failure + delay).
    #[serde(default)]
    pub resumed_ms: u64,
    /// fixed-delay: failures counted; exponential-delay: attempts since the backoff was last reset.
    #[serde(default)]
    pub attempts: u64,
    /// failure-rate: the failures within the interval.
    #[serde(default)]
    pub failures_ms: VecDeque<u64>,
    /// exponential-delay: the backoff of the last restart, before jitter (0: none yet).
    #[serde(default)]
    pub backoff_ms: u64,
}

impl RestartHistory {
    /// The history the previous image of this process left ([`HISTORY_ENV`]); empty on a first start
    /// or when the variable cannot be read (a restart never fails on its own bookkeeping).
    pub fn from_env() -> RestartHistory {
        std::env::var(HISTORY_ENV)
            .ok()
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default()
    }

    /// Records the cause of the restart about to happen, cut to [`MAX_CAUSE_BYTES`]: the history is one
    /// environment variable, and Linux refuses to `exec` with one longer than 128 KiB.
    pub fn set_cause(&mut self, cause: &str) {
        let mut end = cause.len().min(MAX_CAUSE_BYTES);
        while !cause.is_char_boundary(end) {
            end -= 1;
        }
        let mut kept = cause[..end].to_owned();
        if end < cause.len() {
            kept.push_str(" …");
        }
        self.last_cause = Some(kept);
    }

    pub fn to_env(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "restart_tests.rs"]
mod tests;
