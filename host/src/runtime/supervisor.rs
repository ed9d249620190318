//! The one restart supervisor of a job, below both front ends (`run` and the SQL shell's jobs): after a
//! failed run the job's restart strategy ([`crate::connector_api::restart`]) decides; the supervisor logs
//! the decision with its cause, counts it on the status page and says how long to wait. The caller
//! relaunches its own way: `run` by `exec` (the process becomes a fresh run of its command line,
//! carrying the history in [`HISTORY_ENV`]), the shell in process (the job planned again from its
//! statements, the history kept here). A relaunch reads again from the last checkpoint either way.

use std::time::Duration;

use tracing::warn;

use crate::connector_api::needs_rewind;
use crate::connector_api::restart::{Decision, RestartHistory, RestartStrategy, now_ms};
use crate::options::duration::format as fmt;

use super::Metrics;

pub use crate::connector_api::restart::HISTORY_ENV;

/// What to do after a failed run.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Relaunch the job after this delay.
    Restart(Duration),
    /// The job ends failed. `why`: the strategy's reason, when the user set one or the job restarted
    /// before (unset, a plain failure ends the job without more said).
    Fail { why: Option<String> },
}

pub struct Supervisor {
    strategy: RestartStrategy,
    history: RestartHistory,
    /// How many of the history's restarts the metrics counted already.
    reported: u64,
}

impl Supervisor {
    /// A supervisor with what earlier runs of this job remembered (a fresh history for a new job).
    pub fn new(strategy: RestartStrategy, history: RestartHistory) -> Supervisor {
        Supervisor {
            strategy,
            history,
            reported: 0,
        }
    }

    /// The restarts so far and their last cause on `metrics` (the status page and the restart counter).
    pub fn report(&mut self, metrics: &Metrics) {
        metrics
            .status
            .set_restarts(self.history.restarts, self.history.last_cause.clone());
        metrics
            .restarts
            .inc_by(self.history.restarts.saturating_sub(self.reported));
        self.reported = self.history.restarts;
    }

    /// A run failed with `e`: the strategy decides. A restart is logged with the strategy's state and the
    /// cause ("restarting the job (fixed-delay: attempt 1 of 2) in 1s: …") and remembered as the last cause.
    pub fn after_failure(&mut self, e: &anyhow::Error) -> Next {
        let rewind = needs_rewind(e);
        match self
            .strategy
            .decide(&mut self.history, now_ms(), rewind, rand::random::<f64>())
        {
            Decision::Restart { delay, of } => {
                let cause = format!("{e:#}");
                warn!(
                    restart = self.history.restarts,
                    "restarting the job ({of}) in {}: {cause}",
                    fmt(delay)
                );
                self.history.set_cause(&cause);
                Next::Restart(delay)
            }
            Decision::Fail { why } => Next::Fail {
                why: (self.history.restarts > 0 || self.strategy.name().is_some()).then(|| {
                    format!(
                        "not restarted after {} restart(s): {why}",
                        self.history.restarts
                    )
                }),
            },
        }
    }

    /// The history to hand to the next image of the process (`exec`).
    pub fn history(&self) -> &RestartHistory {
        &self.history
    }
}
