//! The checkpoint protocol as a state machine: which checkpoint to trigger, when one is complete, when the job
//! may finish. No tasks, channels or I/O here (the runtime's event loop in `mod.rs` does those), so every rule
//! can be unit-tested with plain calls.
//!
//! Rules: one checkpoint in flight at a time; a periodic tick triggers the next one unless one is in flight or
//! the job is stopping. A stop (signal, or every source exhausted) owes a *final* checkpoint: it is triggered at
//! once when nothing is in flight, otherwise as soon as the checkpoint in flight ends (completed, failed or timed
//! out). A checkpoint completes when every pipeline acknowledged it; the final one completing lets the sources
//! finish, and the job ends cleanly when every pipeline finished after that. A final checkpoint that fails or
//! times out fails the job; an ordinary one is only counted and warned about.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Trigger checkpoint `id` in every source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    pub id: u64,
    /// The last checkpoint: sources stop reading after its snapshot.
    pub is_final: bool,
}

/// A checkpoint every pipeline acknowledged: persist it, then report [`Coordinator::persisted`] or
/// [`Coordinator::failed`].
#[derive(Debug)]
pub struct Acknowledged<S> {
    pub id: u64,
    pub is_final: bool,
    pub started: Instant,
    /// Sink subtask (global index) → what it acknowledged with.
    pub states: BTreeMap<usize, S>,
}

/// What follows a persisted checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Keep running.
    Continue,
    /// A stop arrived while it was in flight: trigger the final checkpoint.
    Trigger(Trigger),
    /// It was the final checkpoint: tell the sources to finish.
    Finish,
}

/// How the job ended when every pipeline finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// After the final checkpoint completed.
    Clean,
    /// Before the final checkpoint completed (a task failed or ended early).
    Early,
}

/// Why the protocol failed the job.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckpointError {
    #[error("the final checkpoint {id} did not complete within {timeout:?}")]
    FinalTimedOut { id: u64, timeout: Duration },
}

#[derive(Debug)]
struct Inflight<S> {
    id: u64,
    started: Instant,
    acks: BTreeMap<usize, S>,
    is_final: bool,
}

/// The coordinator's state for one run of a job: `sources` source subtasks and `sinks` sink subtasks over
/// all its pipelines (global indices `0..sources`, `0..sinks`); a checkpoint completes when every sink
/// subtask acknowledged it (with the states of the source subtasks that feed it).
#[derive(Debug)]
pub struct Coordinator<S> {
    sources: usize,
    sinks: usize,
    next_id: u64,
    timeout: Duration,
    inflight: Option<Inflight<S>>,
    exhausted: BTreeSet<usize>,
    finished: BTreeSet<usize>,
    stopping: bool,
    finishing: bool,
}

impl<S> Coordinator<S> {
    /// `pipelines` pipelines of one source and one sink subtask each; `next_id`: the id of the first
    /// checkpoint of this run (after those already in the state directory).
    pub fn new(pipelines: usize, next_id: u64, timeout: Duration) -> Self {
        Self::with_subtasks(pipelines, pipelines, next_id, timeout)
    }

    pub fn with_subtasks(sources: usize, sinks: usize, next_id: u64, timeout: Duration) -> Self {
        Coordinator {
            sources,
            sinks,
            next_id,
            timeout,
            inflight: None,
            exhausted: BTreeSet::new(),
            finished: BTreeSet::new(),
            stopping: false,
            finishing: false,
        }
    }

    /// A stop was requested or every source is exhausted: no more periodic checkpoints.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Whether a periodic tick would trigger a checkpoint now.
    pub fn wants_tick(&self) -> bool {
        self.inflight.is_none() && !self.stopping
    }

    /// When the checkpoint in flight times out.
    pub fn deadline(&self) -> Option<Instant> {
        self.inflight.as_ref().map(|f| f.started + self.timeout)
    }

    /// The periodic tick.
    pub fn tick(&mut self, now: Instant) -> Option<Trigger> {
        if !self.wants_tick() {
            return None;
        }
        Some(self.begin(now, false))
    }

    /// A stop was requested (signal): the final checkpoint is owed. `None` when one is in flight (the final one
    /// follows it) or the job is already stopping.
    pub fn stop(&mut self, now: Instant) -> Option<Trigger> {
        if self.stopping {
            return None;
        }
        self.stopping = true;
        self.owe_final(now)
    }

    /// Source subtask `source` has no more rows; when it is the last one, the job stops as on [`Self::stop`].
    pub fn exhausted(&mut self, source: usize, now: Instant) -> Option<Trigger> {
        self.exhausted.insert(source);
        if self.exhausted.len() == self.sources {
            self.stop(now)
        } else {
            None
        }
    }

    /// The checkpoint in flight passed its deadline. An ordinary one is dropped (its id is returned, with the
    /// final checkpoint to trigger when a stop is pending); the final one fails the job.
    pub fn timed_out(&mut self, now: Instant) -> Result<(u64, Option<Trigger>), CheckpointError> {
        let Some(f) = self.inflight.take() else {
            return Ok((0, None));
        };
        if f.is_final {
            return Err(CheckpointError::FinalTimedOut {
                id: f.id,
                timeout: self.timeout,
            });
        }
        Ok((f.id, self.owe_final(now)))
    }

    /// Sink subtask `sink` acknowledged checkpoint `id` (the barriers of all its inputs reached it and it
    /// flushed). Returns the checkpoint when it was the last acknowledgement; a late one (of a timed-out
    /// checkpoint) is ignored.
    pub fn ack(&mut self, sink: usize, id: u64, state: S) -> Option<Acknowledged<S>> {
        let f = self.inflight.as_mut().filter(|f| f.id == id)?;
        f.acks.insert(sink, state);
        if f.acks.len() < self.sinks {
            return None;
        }
        let f = self.inflight.take()?;
        Some(Acknowledged {
            id: f.id,
            is_final: f.is_final,
            started: f.started,
            states: f.acks,
        })
    }

    /// The acknowledged checkpoint is durable (sources and sinks are then told it completed).
    pub fn persisted(&mut self, is_final: bool, now: Instant) -> Next {
        if is_final {
            self.finishing = true;
            return Next::Finish;
        }
        match self.owe_final(now) {
            Some(t) => Next::Trigger(t),
            None => Next::Continue,
        }
    }

    /// Persisting an ordinary acknowledged checkpoint failed (the caller fails the job when it was the final
    /// one). Returns the final checkpoint to trigger when a stop is pending.
    pub fn failed(&mut self, now: Instant) -> Option<Trigger> {
        self.owe_final(now)
    }

    /// Sink subtask `sink` ended (closed). `Some` when it was the last one.
    pub fn finished(&mut self, sink: usize) -> Option<Ended> {
        self.finished.insert(sink);
        if self.finished.len() < self.sinks {
            return None;
        }
        Some(if self.finishing {
            Ended::Clean
        } else {
            Ended::Early
        })
    }

    /// When stopping and nothing is in flight: trigger the final checkpoint.
    fn owe_final(&mut self, now: Instant) -> Option<Trigger> {
        if self.stopping && self.inflight.is_none() && !self.finishing {
            Some(self.begin(now, true))
        } else {
            None
        }
    }

    fn begin(&mut self, now: Instant, is_final: bool) -> Trigger {
        let id = self.next_id;
        self.next_id += 1;
        self.inflight = Some(Inflight {
            id,
            started: now,
            acks: BTreeMap::new(),
            is_final,
        });
        Trigger { id, is_final }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(n: u64) -> serde_json::Value {
        serde_json::json!(n)
    }

    fn t(id: u64, is_final: bool) -> Option<Trigger> {
        Some(Trigger { id, is_final })
    }

    #[test]
    fn sources_exhaust_and_sinks_acknowledge_by_their_own_counts() {
        let now = Instant::now();
        // Three source subtasks feeding two sink subtasks.
        let mut c = Coordinator::with_subtasks(3, 2, 1, Duration::from_secs(60));
        assert_eq!(c.tick(now), t(1, false));
        assert!(c.ack(0, 1, state(1)).is_none());
        assert!(
            c.ack(1, 1, state(2)).is_some(),
            "two sink acknowledgements complete it"
        );
        assert_eq!(c.persisted(false, now), Next::Continue);
        assert_eq!(c.exhausted(0, now), None);
        assert_eq!(c.exhausted(1, now), None);
        assert_eq!(
            c.exhausted(2, now),
            t(2, true),
            "the third source ends the job"
        );
        c.ack(0, 2, state(1));
        c.ack(1, 2, state(1)).unwrap();
        assert_eq!(c.persisted(true, now), Next::Finish);
        assert_eq!(c.finished(0), None);
        assert_eq!(c.finished(1), Some(Ended::Clean));
    }

    #[test]
    fn a_checkpoint_completes_when_every_pipeline_acknowledged_it() {
        let now = Instant::now();
        let mut c = Coordinator::new(2, 7, Duration::from_secs(60));
        assert_eq!(c.tick(now), t(7, false));
        assert_eq!(c.tick(now), None, "one checkpoint in flight at a time");
        assert!(c.ack(0, 7, state(1)).is_none());
        let done = c.ack(1, 7, state(2)).expect("both acknowledged");
        assert_eq!((done.id, done.is_final), (7, false));
        assert_eq!(done.states.keys().copied().collect::<Vec<_>>(), [0, 1]);
        assert_eq!(c.persisted(false, now), Next::Continue);
        assert_eq!(c.tick(now), t(8, false));
    }

    #[test]
    fn acknowledgements_of_another_checkpoint_are_ignored() {
        let now = Instant::now();
        let mut c = Coordinator::new(1, 1, Duration::from_secs(60));
        c.tick(now);
        assert!(c.ack(0, 99, state(1)).is_none());
        assert!(c.ack(0, 1, state(1)).is_some());
    }

    #[test]
    fn a_stop_with_nothing_in_flight_triggers_the_final_checkpoint_at_once() {
        let now = Instant::now();
        let mut c = Coordinator::new(1, 3, Duration::from_secs(60));
        assert_eq!(c.stop(now), t(3, true));
        assert_eq!(c.stop(now), None);
        assert_eq!(c.tick(now), None, "no periodic checkpoints while stopping");
        assert!(c.ack(0, 3, state(1)).unwrap().is_final);
        assert_eq!(c.persisted(true, now), Next::Finish);
        assert_eq!(c.finished(0), Some(Ended::Clean));
    }

    #[test]
    fn a_stop_during_a_checkpoint_owes_the_final_one_after_it() {
        let now = Instant::now();
        let mut c = Coordinator::new(1, 1, Duration::from_secs(60));
        c.tick(now);
        assert_eq!(c.stop(now), None);
        c.ack(0, 1, state(1)).unwrap();
        assert_eq!(
            c.persisted(false, now),
            Next::Trigger(Trigger {
                id: 2,
                is_final: true
            })
        );
    }

    #[test]
    fn the_final_checkpoint_follows_a_failed_write_when_stopping() {
        let now = Instant::now();
        let mut c = Coordinator::new(1, 1, Duration::from_secs(60));
        c.tick(now);
        c.stop(now);
        c.ack(0, 1, state(1)).unwrap();
        assert_eq!(c.failed(now), t(2, true));
        let mut running = Coordinator::new(1, 1, Duration::from_secs(60));
        running.tick(now);
        running.ack(0, 1, state(1)).unwrap();
        assert_eq!(running.failed(now), None);
        assert_eq!(running.tick(now), t(2, false));
    }

    #[test]
    fn the_last_exhausted_source_stops_the_job() {
        let now = Instant::now();
        let mut c: Coordinator<serde_json::Value> = Coordinator::new(2, 1, Duration::from_secs(60));
        assert_eq!(c.exhausted(0, now), None);
        assert_eq!(
            c.exhausted(0, now),
            None,
            "the same pipeline twice counts once"
        );
        assert!(!c.is_stopping());
        assert_eq!(c.exhausted(1, now), t(1, true));
        assert!(c.is_stopping());
    }

    #[test]
    fn an_ordinary_timeout_is_dropped_and_a_final_timeout_fails() {
        let now = Instant::now();
        let timeout = Duration::from_secs(5);
        let mut c = Coordinator::new(1, 1, timeout);
        assert_eq!(c.deadline(), None);
        c.tick(now);
        assert_eq!(c.deadline(), Some(now + timeout));
        assert_eq!(c.timed_out(now), Ok((1, None)));
        assert!(
            c.ack(0, 1, state(1)).is_none(),
            "late acknowledgement ignored"
        );
        c.tick(now);
        c.stop(now);
        assert_eq!(c.timed_out(now), Ok((2, t(3, true))));
        assert_eq!(
            c.timed_out(now),
            Err(CheckpointError::FinalTimedOut { id: 3, timeout })
        );
        assert_eq!(
            CheckpointError::FinalTimedOut { id: 3, timeout }.to_string(),
            "the final checkpoint 3 did not complete within 5s"
        );
    }

    #[test]
    fn pipelines_ending_before_the_final_checkpoint_end_early() {
        let now = Instant::now();
        let mut c: Coordinator<serde_json::Value> = Coordinator::new(2, 1, Duration::from_secs(60));
        c.tick(now);
        assert_eq!(c.finished(1), None);
        assert_eq!(c.finished(0), Some(Ended::Early));
    }

    #[test]
    fn nothing_is_triggered_after_the_final_checkpoint() {
        let now = Instant::now();
        let mut c = Coordinator::new(1, 1, Duration::from_secs(60));
        c.stop(now);
        c.ack(0, 1, state(1)).unwrap();
        assert_eq!(c.persisted(true, now), Next::Finish);
        assert_eq!(c.failed(now), None);
        assert_eq!(c.tick(now), None);
    }
}
