//! The source of `INSERT INTO t VALUES (...)`: the rows, evaluated once at planning time.
//!
//! State is the number of batches already emitted, so a restart after a completed checkpoint does not insert
//! the rows again.

use anyhow::Result;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use serde_json::json;

use crate::connector_api::{Source, SourcePoll};

pub struct ValuesSource {
    batches: Vec<RecordBatch>,
    next: usize,
}

impl ValuesSource {
    pub fn new(batches: Vec<RecordBatch>) -> Self {
        ValuesSource { batches, next: 0 }
    }
}

#[async_trait]
impl Source for ValuesSource {
    fn restore(&mut self, state: serde_json::Value) -> Result<()> {
        self.next = state
            .get("emitted_batches")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as usize;
        Ok(())
    }

    async fn poll_batch(&mut self, _max_rows: usize) -> Result<SourcePoll> {
        match self.batches.get(self.next) {
            Some(b) => {
                self.next += 1;
                Ok(SourcePoll::Batch(b.clone()))
            }
            None => Ok(SourcePoll::End),
        }
    }

    fn snapshot(&mut self) -> Result<serde_json::Value> {
        Ok(json!({ "emitted_batches": self.next }))
    }
}
