//! `cargo xtask <task>`: the project's tasks. See `cargo xtask --help`.

use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use xtask::broker::{self, BrokerInfo, Profile, StartOptions};
use xtask::{paths, python, secrets_scan};

mod bench;
mod build_plugins;
mod demo;
mod plugin_langs;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "pulsar-connect project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// A real Apache Pulsar broker (from Maven Central) for tests and the demo.
    Broker {
        #[command(subcommand)]
        action: BrokerAction,
    },
    /// Create `.venv` with the official Python `pulsar-client` for the interop tests.
    Venv,
    /// Run the whole test suite: venv, broker (started and stopped if none is up), `cargo test`.
    Test(TestArgs),
    /// Run the vendor seed job end to end against a local real Pulsar (started, with token auth, if none is given).
    Demo,
    /// Benchmarks side by side: pulsar-connect, the Flink peer, the bare-consumer ceiling, native decode.
    Bench(bench::BenchArgs),
    /// Build the guest crates (guest-formats/*, guest-routers/*) and install them as plugins.
    BuildPlugins(build_plugins::Args),
    /// The Python and JavaScript SDKs' tests, their examples' and templates' (toolchains installed when missing).
    SdkTest,
}

#[derive(Debug, Subcommand)]
enum BrokerAction {
    /// Start the broker in the background and wait until it is healthy.
    Start(ProfileArgs),
    /// Stop the broker cleanly.
    Stop(ProfileArgs),
    /// Say whether the broker is up (exit code 0) or not (1), and where.
    Status(ProfileArgs),
    /// Stop and start again with the same ports and data.
    Restart(ProfileArgs),
}

#[derive(Debug, Args)]
struct ProfileArgs {
    /// `token` starts a second broker with token authentication (its admin token is in
    /// target/pulsar/token/admin.token); `mtls` a third one whose TLS listeners require a client
    /// certificate (one is generated in target/pulsar/mtls/tls/).
    #[arg(long, value_enum, default_value = "none")]
    auth: Auth,
    /// Delete the broker's data first (start only).
    #[arg(long)]
    wipe: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Auth {
    None,
    Token,
    Mtls,
}

impl ProfileArgs {
    fn profile(&self) -> Profile {
        match self.auth {
            Auth::None => Profile::Default,
            Auth::Token => Profile::Token,
            Auth::Mtls => Profile::Mtls,
        }
    }
}

#[derive(Debug, Args)]
struct TestArgs {
    /// Extra arguments for `cargo test` (after `--`).
    #[arg(last = true)]
    cargo_args: Vec<String>,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.task {
        Task::Broker { action } => broker_task(action),
        Task::Venv => {
            let py = python::ensure_venv()?;
            println!("{}", py.display());
            Ok(ExitCode::SUCCESS)
        }
        Task::Test(args) => test(args),
        Task::Demo => demo::run(cargo),
        Task::Bench(args) => bench::run(args, cargo),
        Task::BuildPlugins(args) => {
            build_plugins::run(args)?;
            Ok(ExitCode::SUCCESS)
        }
        Task::SdkTest => {
            plugin_langs::sdk_test()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn broker_task(action: BrokerAction) -> Result<ExitCode> {
    match action {
        BrokerAction::Start(args) => {
            let opts = StartOptions {
                wipe: args.wipe,
                ..StartOptions::new(args.profile())
            };
            let info = broker::start(&opts)?;
            print_info(&info);
        }
        BrokerAction::Stop(args) => {
            if !broker::stop(args.profile())? {
                println!("broker ({}) was not running", args.profile().name());
            }
        }
        BrokerAction::Status(args) => {
            return Ok(match BrokerInfo::load(args.profile()) {
                Some(info) if info.is_healthy() => {
                    println!("up");
                    print_info(&info);
                    ExitCode::SUCCESS
                }
                Some(info) if broker::process_alive(info.pid) => {
                    println!(
                        "starting or unhealthy (pid {}); log: {}",
                        info.pid,
                        info.log_file.display()
                    );
                    ExitCode::FAILURE
                }
                _ => {
                    println!("down");
                    ExitCode::FAILURE
                }
            });
        }
        BrokerAction::Restart(args) => {
            let info = broker::restart(args.profile())?;
            print_info(&info);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_info(info: &BrokerInfo) {
    println!("profile:      {}", info.profile.name());
    println!("service URL:  {}", info.service_url);
    println!("admin URL:    {}", info.admin_url);
    if let Some(url) = &info.tls_service_url {
        println!("TLS service:  {url}");
    }
    if let Some(url) = &info.tls_admin_url {
        println!("TLS admin:    {url}");
    }
    if let Some(ca) = &info.ca_cert_file {
        println!("CA cert:      {}", ca.display());
    }
    if let (Some(cert), Some(key)) = (&info.client_cert_file, &info.client_key_file) {
        println!(
            "client cert:  {} (role {})",
            cert.display(),
            info.client_role.as_deref().unwrap_or("?")
        );
        println!("client key:   {}", key.display());
    }
    println!("pid:          {}", info.pid);
    if let Some(kib) = broker::rss_kib(info.pid) {
        println!("memory (RSS): {} MiB", kib / 1024);
    }
    println!("start-up:     {:.1}s", info.startup_seconds);
    println!("log:          {}", info.log_file.display());
    if let Some(token) = &info.admin_token_file {
        println!("admin token:  {} (not printed)", token.display());
    }
}

/// Starts the default broker unless one is given by `PULSAR_SERVICE_URL` or already up.
/// Returns whether this call started it (and so should stop it).
fn ensure_broker() -> Result<bool> {
    if std::env::var_os("PULSAR_SERVICE_URL").is_some() {
        return Ok(false);
    }
    if BrokerInfo::load(Profile::Default).is_some_and(|i| i.is_healthy()) {
        return Ok(false);
    }
    broker::start(&StartOptions::new(Profile::Default))?;
    Ok(true)
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn test(args: TestArgs) -> Result<ExitCode> {
    let python = python::ensure_venv()?;
    xtask::chromium::ensure()?;
    build_plugins::run(build_plugins::Args::default())?;
    // The job-runner tests run the real binary.
    let built = cargo()
        .current_dir(paths::workspace_root())
        // `--workspace`, as `cargo test --workspace` below: the same feature set, so nothing is built twice.
        .args(["build", "--release", "--workspace", "--all-targets"])
        .status()
        .context("building pulsar-connect")?;
    if !built.success() {
        bail!("building pulsar-connect failed ({built})");
    }
    let started = ensure_broker()?;
    let logs = secrets_scan::fresh_dir()?;
    let status = cargo()
        .current_dir(paths::workspace_root())
        .args(["test", "--release", "--workspace"])
        .args(&args.cargo_args)
        .env("PULSAR_CONNECT_PYTHON", &python)
        .env(secrets_scan::ENV, &logs)
        .status()
        .context("running cargo test");
    if started {
        broker::stop(Profile::Default)?;
    }
    let status = status?;
    let scanned = scan_for_secrets(&logs)?;
    if !status.success() {
        bail!("cargo test failed ({status})");
    }
    scanned?;
    let _ = std::fs::remove_dir_all(&logs);
    Ok(ExitCode::SUCCESS)
}

/// Scans the binary's outputs of a `cargo test` run for the suite's secrets (`xtask::secrets_scan`):
/// the outer error is the scan's own failure, the inner one its findings (the folder is kept then).
fn scan_for_secrets(logs: &std::path::Path) -> Result<Result<()>> {
    let secrets = secrets_scan::secrets(logs)?;
    let report = secrets_scan::scan(logs, &secrets)?;
    println!(
        "secrets scan: {} output(s) of the binary, {} KiB, {} secret(s) and the JWT / PEM patterns: {} finding(s)",
        report.files,
        report.bytes / 1024,
        report.secrets,
        report.findings.len()
    );
    if report.findings.is_empty() {
        return Ok(Ok(()));
    }
    for f in &report.findings {
        println!("  {f}");
    }
    Ok(Err(anyhow::anyhow!(
        "{} secret(s) in the binary's outputs (kept in {})",
        report.findings.len(),
        logs.display()
    )))
}
