//! `cargo xtask <command>`: project automation.

use clap::{Parser, Subcommand};

mod build_plugins;

#[derive(Debug, Parser)]
#[command(name = "xtask", about = "pulsar-connect project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build the guest crates (guest-formats/*, guest-routers/*) and install them as plugins.
    BuildPlugins(build_plugins::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::BuildPlugins(args) => build_plugins::run(args),
    }
}
