//! The endpoint of `--metrics-addr`: Prometheus metrics at `/metrics`, the job's status as JSON at
//! `/api/status` (the snapshot the runtime publishes, [`crate::runtime::status`]) and a status page at `/`
//! (one self-contained HTML file compiled into the binary, refreshing itself from `/api/status`).
//! The runtime never depends on this module.

mod server;

pub use server::serve;

/// The status page.
pub const PAGE: &str = include_str!("page.html");
