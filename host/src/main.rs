use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Runs Flink-SQL Pulsar connector jobs as one small native process.
#[derive(Debug, Parser)]
#[command(name = "pulsar-connect", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the versions of the host and its main components.
    Version,
    /// Inspect and validate a plugin directory.
    #[command(subcommand)]
    Plugins(pulsar_connect::cli::plugins::PluginsCommand),
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result: anyhow::Result<()> = match cli.command {
        Command::Version => {
            println!("pulsar-connect {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Plugins(command) => pulsar_connect::cli::plugins::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("PULSAR_CONNECT_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
