//! The write side of a table.

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;

use super::PipelineContext;

/// A table write side. One instance per INSERT into the table.
///
/// At-least-once: [`Sink::flush`] must make every row written so far durable (or pre-commit it, for an
/// exactly-once sink, returning what is needed to commit it in the state); the checkpoint is only written after
/// every sink's flush returned. [`Sink::notify_checkpoint_complete`] commits pre-committed work.
#[async_trait]
pub trait Sink: Send {
    /// Restores sink state (e.g. pending transactions to commit or abort) from a checkpoint.
    fn restore(&mut self, _state: serde_json::Value) -> Result<()> {
        Ok(())
    }

    /// Restores from the sink states the runtime hands this subtask: its own when the run that wrote the
    /// checkpoint had as many sink subtasks, otherwise all of them to subtask 0 (which settles what they
    /// left, e.g. commits their transactions) and none to the others. The default takes the only state,
    /// ignores null ones and refuses to combine several.
    fn restore_subtasks(&mut self, states: Vec<serde_json::Value>) -> Result<()> {
        let mut states: Vec<serde_json::Value> =
            states.into_iter().filter(|s| !s.is_null()).collect();
        match states.len() {
            0 => Ok(()),
            1 => self.restore(states.remove(0)),
            n => anyhow::bail!(
                "the checkpoint holds {n} sink subtask states; this sink cannot combine them"
            ),
        }
    }

    /// Which job and INSERT this sink serves (called once, before `restore`).
    fn set_context(&mut self, _ctx: &PipelineContext) {}

    /// After `set_context`: refuses a pipeline this sink cannot serve as configured (e.g. a guarantee the
    /// linked source cannot give), with the reason. `validate` calls it as `run` does.
    fn check_pipeline(&self) -> Result<()> {
        Ok(())
    }

    /// Called once after `restore` and before the first row: connect and check what can be checked, so
    /// a misconfigured sink fails the job at start.
    async fn open(&mut self) -> Result<()> {
        Ok(())
    }

    async fn write(&mut self, batch: RecordBatch) -> Result<()>;

    /// No more rows are waiting for this sink right now: send what it batches (e.g. a producer's open
    /// batch) instead of waiting for the batch to fill or its delay to pass. Called after a `write`
    /// that emptied the sink's input; must not wait for the broker's receipts.
    async fn input_idle(&mut self) -> Result<()> {
        Ok(())
    }

    /// Flush or pre-commit for checkpoint `id`; returns the sink's state for the checkpoint.
    async fn flush(&mut self, id: u64) -> Result<serde_json::Value>;

    async fn notify_checkpoint_complete(&mut self, _id: u64) -> Result<()> {
        Ok(())
    }

    /// The sink failed: release what no checkpoint covers (e.g. abort an open transaction, whose messages
    /// would otherwise hold back the topic's readers until it times out). Must not fail; log instead.
    async fn abort(&mut self) {}

    /// End of input: flush and release resources.
    async fn close(&mut self) -> Result<()>;
}
