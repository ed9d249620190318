//! Command-line subcommands that are more than a line in `main.rs`.

pub mod plugin_install;
pub mod plugin_new;
pub mod plugin_test;
pub mod plugins;
pub mod sql;
pub mod subscriptions;
