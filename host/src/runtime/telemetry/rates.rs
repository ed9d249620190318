//! Per-second rates of counters, computed when they are read (a scrape, a status request): each read
//! keeps a sample, and the rate is the counter's growth since the oldest sample inside the window (or
//! since the job started, before the window has a sample) — as Flink's `MeterView` over its time span.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Samples per counter key.
#[derive(Debug, Default)]
pub struct Rates {
    samples: Mutex<HashMap<String, VecDeque<(Instant, u64)>>>,
}

impl Rates {
    /// The rate of counter `key`, now at `value`, over the last `window`; `started`: when the counter was
    /// 0 (used until a sample older than one second exists).
    pub fn rate(
        &self,
        key: &str,
        value: u64,
        now: Instant,
        window: Duration,
        started: Option<Instant>,
    ) -> f64 {
        let mut all = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        let samples = all.entry(key.to_owned()).or_default();
        // Keep one sample older than the window (the base), drop those before it.
        while samples.len() > 1 && now.duration_since(samples[1].0) >= window {
            samples.pop_front();
        }
        let base = samples
            .front()
            .copied()
            .filter(|(t, _)| now.duration_since(*t) >= Duration::from_secs(1))
            .or_else(|| started.map(|t| (t, 0)));
        // At most one sample per 100 ms.
        if samples
            .back()
            .is_none_or(|(t, _)| now.duration_since(*t) >= Duration::from_millis(100))
        {
            samples.push_back((now, value));
        }
        match base {
            Some((t, v)) => {
                let dt = now.duration_since(t).as_secs_f64();
                if dt <= 0.0 {
                    0.0
                } else {
                    value.saturating_sub(v) as f64 / dt
                }
            }
            None => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_growth_over_the_window() {
        let r = Rates::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(10);
        // Before any sample: since the start.
        assert_eq!(
            r.rate("k", 100, t0 + Duration::from_secs(2), w, Some(t0)),
            50.0
        );
        // 200 more over the 4 s since that sample.
        assert_eq!(
            r.rate("k", 300, t0 + Duration::from_secs(6), w, Some(t0)),
            50.0
        );
        // The first sample left the window: measured from the second (at 6 s, 300).
        assert_eq!(
            r.rate("k", 300, t0 + Duration::from_secs(17), w, Some(t0)),
            0.0
        );
    }
}
