//! One-line live progress on a terminal (stderr): rates, totals, the lag of the partitions this process
//! owns (the broker's backlog), last checkpoint, the splits this process reads. Nothing when not a
//! terminal. The line is the [`crate::terminal`]'s status line: log lines are written above it and it is
//! redrawn below them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Metrics;

pub fn spawn(metrics: Arc<Metrics>) -> Option<tokio::task::JoinHandle<()>> {
    if !crate::terminal::is_terminal() {
        return None;
    }
    Some(tokio::spawn(async move {
        let start = Instant::now();
        let (mut last_in, mut last_out, mut last_t) = (0u64, 0u64, Instant::now());
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let (rin, rout) = (
                Metrics::total(&metrics.rows_in),
                Metrics::total(&metrics.rows_out),
            );
            let dt = last_t.elapsed().as_secs_f64().max(1e-3);
            let owned = metrics.owned_splits();
            // The broker's backlog of the partitions this process owns (once it answered).
            let lag = metrics
                .status
                .total_lag()
                .map(|l| format!("  lag {l}"))
                .unwrap_or_default();
            let line = format!(
                "{:>5}s  in {} ({:.0}/s)  out {} ({:.0}/s){lag}  checkpoints {} (last #{})  splits {}",
                start.elapsed().as_secs(),
                rin,
                (rin - last_in) as f64 / dt,
                rout,
                (rout - last_out) as f64 / dt,
                metrics.checkpoints.get(),
                metrics.last_checkpoint_id.get(),
                owned
            );
            (last_in, last_out, last_t) = (rin, rout, Instant::now());
            crate::terminal::set_status(&line);
        }
    }))
}

pub fn clear() {
    crate::terminal::clear_status();
}
