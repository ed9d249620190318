//! Where a bounded read ends over a Failover subscription whose cursor is at or past the split's end
//! already: an earlier run of the job (same `pipeline.name`, hence the same subscription) read and
//! acknowledged the split up to it, or another process did before the partition moved here. The broker
//! then sends the active reader nothing up to the end, and a reader that finishes a split on the first
//! message at or beyond it would wait for ever. So the active reader that received nothing for a while
//! asks, at most once per [`CHECK_EVERY`], how far the subscription is acknowledged (its mark-delete
//! position, [`acknowledged_through`]), and finishes the split when that covers the end.

use std::time::{Duration, Instant};

use anyhow::Result;
use magnetar::runtime_tokio::Consumer;

use super::shared_end::{CHECK_EVERY, acknowledged_through};
use super::stop::EndCheck;
use crate::pulsar::topics::Split;

/// A Failover reader's checks of its split's end.
#[derive(Debug)]
pub(super) struct FailoverEnd {
    next_check: Instant,
}

impl FailoverEnd {
    pub(super) fn new() -> FailoverEnd {
        FailoverEnd {
            next_check: Instant::now(),
        }
    }

    /// Whether the subscription is acknowledged up to the end, asked only when `idle` (how long the
    /// reader has received nothing) is at least [`CHECK_EVERY`] and once per [`CHECK_EVERY`].
    pub(super) async fn check(
        &mut self,
        consumer: &Consumer,
        split: &Split,
        end: &EndCheck,
        idle: Duration,
    ) -> Result<bool> {
        let now = Instant::now();
        if idle < CHECK_EVERY || now < self.next_check {
            return Ok(false);
        }
        self.next_check = now + CHECK_EVERY;
        let (_, mark) = acknowledged_through(consumer, split).await?;
        Ok(mark.is_some_and(|mark| end.done_after(&mark)))
    }
}
