//! Command-line subcommands that are more than a line in `main.rs`.

pub mod plugins;
pub mod subscriptions;
pub mod sql;
