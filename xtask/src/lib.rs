//! Project tasks shared by `cargo xtask` and the test-support crate: the real Apache Pulsar broker
//! (resolved from Maven Central, started as `PulsarStandaloneStarter`), the Python interop venv and
//! the workspace paths.

pub mod broker;
pub mod chromium;
pub mod paths;
pub mod python;
pub mod secrets_scan;
