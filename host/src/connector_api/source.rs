//! The read side of a table.

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;

use super::PipelineContext;

/// What a source returned from one poll.
#[derive(Debug)]
pub enum SourcePoll {
    /// Rows (possibly fewer than asked for).
    Batch(RecordBatch),
    /// A bounded source has no more rows.
    End,
}

/// A table read side. One instance per INSERT that reads the table.
///
/// Checkpoint protocol (see `docs/adr/0005-job-runner.md`): the runtime calls [`Source::snapshot`] between polls,
/// right after it forwarded every batch the source returned so far, so the snapshot is the position *after the
/// last emitted row*. [`Source::restore`] is called once before the first poll with the state of the latest
/// complete checkpoint. [`Source::notify_checkpoint_complete`] tells the source that a checkpoint (and every
/// snapshot before it) is durable: the place to commit offsets to the broker.
#[async_trait]
pub trait Source: Send {
    /// Restores the position from a checkpoint (before the first poll).
    fn restore(&mut self, state: serde_json::Value) -> Result<()>;

    /// Restores from the states of every source subtask of the run that wrote the checkpoint (their
    /// number may differ from this run's): a parallel source keeps the positions of the splits this
    /// subtask owns (see [`PipelineContext::subtask`]). The default takes the only state there is.
    fn restore_subtasks(&mut self, states: Vec<serde_json::Value>) -> Result<()> {
        match <[serde_json::Value; 1]>::try_from(states) {
            Ok([state]) => self.restore(state),
            Err(states) if states.is_empty() => Ok(()),
            Err(states) => anyhow::bail!(
                "the checkpoint holds {} source subtask states; this source reads with one subtask and cannot combine them",
                states.len()
            ),
        }
    }

    /// How many splits there are to spread over subtasks, for the default parallelism (called on a
    /// source that is not running, before `set_context`). `None`: not known (one subtask).
    async fn split_count(&mut self) -> Result<Option<usize>> {
        Ok(None)
    }

    /// Waits for and returns up to `max_rows` rows. Must be cancel safe: the runtime may drop the future at an
    /// `.await` point (to inject a checkpoint barrier or stop), and no row may be lost or emitted twice then.
    async fn poll_batch(&mut self, max_rows: usize) -> Result<SourcePoll>;

    /// Whether the next [`Source::poll_batch`] would return rows without waiting (messages already
    /// received and queued). The runtime keeps filling a batch while this holds and hands it on as soon
    /// as it does not, so rows never wait for a timer when the source has nothing more for them
    /// (`table.exec.mini-batch.allow-latency` unset). `false`, the default, hands on every poll's rows.
    fn has_buffered(&self) -> bool {
        false
    }

    /// The position after the last row returned by [`Source::poll_batch`], serialisable as JSON.
    fn snapshot(&mut self) -> Result<serde_json::Value>;

    /// [`Source::snapshot`] for checkpoint `id` (a source that commits offsets on completion keeps it).
    fn snapshot_for(&mut self, _id: u64) -> Result<serde_json::Value> {
        self.snapshot()
    }

    /// Which job and INSERT this source serves (called once, before `restore`).
    fn set_context(&mut self, _ctx: &PipelineContext) {}

    /// Checkpoint `id` is durable.
    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// The job is stopping.
    async fn close(&mut self) -> Result<()> {
        Ok(())
    }

    /// What this source keeps on the broker for the job between runs (e.g. durable subscriptions), one
    /// line each; removed when `drop` is set (`pulsar-connect subscriptions --drop`). Called after
    /// `set_context`, on a source that is not running.
    async fn durable_state(&mut self, _drop: bool) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}
