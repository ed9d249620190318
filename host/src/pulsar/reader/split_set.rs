//! Several split readers read as one stream of batches.

use std::time::Duration;

use anyhow::Result;
use magnetar::proto::event::IncomingMessage;

use super::SplitReader;

/// Several splits read as one stream of batches, each batch from one split.
pub struct SplitSet {
    readers: Vec<SplitReader>,
    next: usize,
}

impl SplitSet {
    pub fn new(readers: Vec<SplitReader>) -> Self {
        SplitSet { readers, next: 0 }
    }

    pub fn readers(&self) -> &[SplitReader] {
        &self.readers
    }

    pub fn readers_mut(&mut self) -> &mut [SplitReader] {
        &mut self.readers
    }

    /// Whether some split has received messages that [`Self::next_batch`] would return without waiting.
    pub fn has_queued(&self) -> bool {
        self.readers
            .iter()
            .any(|r| r.consumer.available_in_queue() > 0)
    }

    pub fn push(&mut self, reader: SplitReader) {
        self.readers.push(reader);
    }

    /// The next non-empty batch (at most `max` messages) and the index of its reader, waiting at most
    /// `wait`; `None` when nothing arrived. Splits are served round robin. Cancel safe.
    pub async fn next_batch(
        &mut self,
        max: usize,
        wait: Duration,
    ) -> Result<Option<(usize, Vec<IncomingMessage>)>> {
        let n = self.readers.len();
        if n == 0 {
            tokio::time::sleep(wait).await;
            return Ok(None);
        }
        // What is already buffered, without waiting, starting after the split served last.
        for k in 0..n {
            let i = (self.next + k) % n;
            let batch = self.readers[i].next_batch(max, Duration::ZERO).await?;
            if !batch.is_empty() {
                self.next = (i + 1) % n;
                return Ok(Some((i, batch)));
            }
        }
        // Nothing buffered: wait for the first split that receives something.
        let waits = self
            .readers
            .iter_mut()
            .map(|r| Box::pin(r.next_batch(max, wait)));
        let (result, i, _) = futures::future::select_all(waits).await;
        let batch = result?;
        if batch.is_empty() {
            return Ok(None);
        }
        self.next = (i + 1) % n;
        Ok(Some((i, batch)))
    }

    pub async fn close(self) -> Result<()> {
        for r in self.readers {
            r.close().await?;
        }
        Ok(())
    }
}
