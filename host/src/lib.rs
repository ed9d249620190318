//! pulsar-connect: runs Flink-SQL Pulsar connector jobs as one small native process.
//!
//! Layers (see `docs/adr/` and the README): sql → catalog → planner → runtime → connectors → plugins.

pub mod cli;
pub mod plugins;
pub mod pulsar;
