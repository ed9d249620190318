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

    /// Whether every split is bounded and read to its end.
    pub fn all_finished(&self) -> bool {
        self.readers.iter().all(SplitReader::is_finished)
    }

    /// A Failover subscription: whether every split this process is the active reader of is read to its
    /// end and the broker has said of every other one that another process reads it (the broker's
    /// choice settles within a second or two: the caller waits for this to hold a while).
    pub fn all_owned_finished(&self) -> bool {
        self.readers
            .iter()
            .all(|r| r.is_finished() || r.is_active() == Some(false))
    }

    /// Bounded splits read through subscriptions that dispatch to several consumers: see
    /// [`SplitReader::check_end`].
    pub async fn check_ends(&mut self, client: &magnetar::PulsarClient) {
        for r in &mut self.readers {
            r.check_end(client).await;
        }
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
        // What is already buffered, without waiting, starting after the split served last.
        for k in 0..n {
            let i = (self.next + k) % n;
            if !self.readers[i].takes_messages() {
                continue;
            }
            let batch = self.readers[i].next_batch(max, Duration::ZERO).await?;
            if !batch.is_empty() {
                self.next = (i + 1) % n;
                return Ok(Some((i, batch)));
            }
        }
        // Nothing buffered: wait for the first split that receives something.
        let (indices, waits): (Vec<usize>, Vec<_>) = self
            .readers
            .iter_mut()
            .enumerate()
            .filter(|(_, r)| r.takes_messages())
            .map(|(i, r)| (i, Box::pin(r.next_batch(max, wait))))
            .unzip();
        if waits.is_empty() {
            // Every split finished, or parked (entries beyond its end; the look above may have parked
            // the last ones).
            tokio::time::sleep(wait).await;
            return Ok(None);
        }
        let (result, k, _) = futures::future::select_all(waits).await;
        let i = indices[k];
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
