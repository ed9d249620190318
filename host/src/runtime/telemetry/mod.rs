//! A job's telemetry: the Prometheus series (`metrics`: the runtime's own, and the connectors' through
//! their handles, `families`), the collectors that read the status board at each scrape (`series`:
//! partitions, InLong-style per table), the status board (`status`: what the runtime publishes, served as
//! `/api/status`, given numbers rather than reading the metrics), and rates over a window (`rates`).
//!
//! Arrows: `metrics` → `series` → `status` → `rates`; `metrics` → `families`; nothing back.

mod families;
pub mod metrics;
mod rates;
mod series;
pub mod status;

pub use metrics::Metrics;
