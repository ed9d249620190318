//! pulsar-connect: runs Flink-SQL Pulsar connector jobs as one small native process.
//!
//! Layers (see `docs/adr/` and the README): sql → catalog → planner → runtime → connectors → plugins.

pub mod catalog;
pub mod cli;
pub mod connector_api;
pub mod connectors;
pub mod job;
pub mod options;
pub mod planner;
pub mod plugins;
pub mod pulsar;
pub mod runtime;
pub mod sql;
pub mod status;
pub mod terminal;
