use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use pulsar_connect::cli::{self, EXIT_INVALID, EXIT_RUNTIME, load_job};
use pulsar_connect::connector_api::Registry;
use pulsar_connect::job;
use pulsar_connect::plugins::catalog::{
    COMPILE_CACHE_ENV, PluginCatalog, resolve_compile_cache, resolve_plugin_dir,
};
use pulsar_connect::plugins::reload::{PLUGIN_RELOAD_ENV, parse_reload_interval};

/// Runs Flink-SQL Pulsar connector jobs as one small native process.
#[derive(Debug, Parser)]
#[command(name = "pulsar-connect", version, about, long_about = None, after_help = "Exit codes: 0 success, 1 the job failed while running, 2 invalid job or command line, 130 stopped by a second signal.")]
struct Cli {
    /// Plugin directory (formats and routers); default ./plugins.
    #[arg(long, global = true, env = "PULSAR_CONNECT_PLUGIN_DIR")]
    plugin_dir: Option<PathBuf>,
    /// Where compiled plugins are kept between runs; `off` compiles them in memory every time.
    /// Default: $XDG_CACHE_HOME/pulsar-connect/compiled (or ~/.cache/pulsar-connect/compiled).
    #[arg(
        long,
        global = true,
        env = COMPILE_CACHE_ENV,
        value_name = "DIR|off"
    )]
    compile_cache: Option<String>,
    /// How often a running job looks for new versions of its plugins (after `plugins install`), which it
    /// switches to at the next completed checkpoint; `off` keeps the versions it started with.
    /// Default: 2s.
    #[arg(long, global = true, env = PLUGIN_RELOAD_ENV, value_name = "DURATION|off")]
    plugin_reload: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the versions of the host and its main components.
    Version,
    /// Run a job file (SET / CREATE TABLE / INSERT statements) until its sources end or a signal stops it.
    ///
    /// SIGINT/SIGTERM: stop reading, drain, take a final checkpoint, exit 0; a second signal exits at once (130).
    Run {
        /// The job file.
        job: PathBuf,
        /// Checkpoint directory (overrides SET 'state.checkpoints.dir'); state is kept in <dir>/<job id>/.
        #[arg(long, env = "PULSAR_CONNECT_STATE_DIR")]
        state_dir: Option<PathBuf>,
        /// Ignore existing checkpoints and start from the sources' configured start positions.
        #[arg(long)]
        fresh: bool,
        /// Serve Prometheus metrics at http://ADDR/metrics, a status page at http://ADDR/ and its JSON at
        /// http://ADDR/api/status (e.g. 127.0.0.1:9464).
        #[arg(long)]
        metrics_addr: Option<SocketAddr>,
    },
    /// Parse, resolve and check a job file without running it; print the plan (secrets redacted).
    Validate {
        /// The job file.
        job: PathBuf,
    },
    /// List the durable subscriptions the job's sources keep on the broker (named after the job id), or
    /// remove them with --drop (the job must not be running): the next run starts at its configured
    /// startup mode unless it restores a checkpoint.
    Subscriptions {
        /// The job file.
        job: PathBuf,
        /// Delete them.
        #[arg(long)]
        drop: bool,
    },
    /// An interactive SQL shell, as Flink's `sql-client.sh embedded`: SET, CREATE TABLE, SHOW TABLES,
    /// DESCRIBE, SELECT (rows shown live; Ctrl-C stops the query), INSERT (a job in the background),
    /// SHOW JOBS, STOP JOB. Exit codes with -f: 2 an invalid statement, 1 a job failed.
    Sql {
        /// Run this file's statements first, then read statements interactively.
        #[arg(long, value_name = "FILE")]
        init: Option<PathBuf>,
        /// Run this file's statements and exit (its INSERT jobs run until they end or a signal stops them).
        #[arg(
            short = 'f',
            long = "file",
            value_name = "FILE",
            conflicts_with = "init"
        )]
        file: Option<PathBuf>,
        /// Checkpoint directory of INSERT jobs (overrides SET 'state.checkpoints.dir').
        #[arg(long, env = "PULSAR_CONNECT_STATE_DIR")]
        state_dir: Option<PathBuf>,
        /// History file (default ~/.pulsar-connect_sql_history).
        #[arg(long, env = "PULSAR_CONNECT_SQL_HISTORY")]
        history: Option<PathBuf>,
    },
    /// Inspect and validate a plugin directory.
    #[command(subcommand)]
    Plugins(pulsar_connect::cli::plugins::PluginsCommand),
    /// Generated documentation.
    Docs {
        #[command(subcommand)]
        what: DocsCommand,
    },
}

#[derive(Debug, Subcommand)]
enum DocsCommand {
    /// Markdown of every option (job settings and connectors): the content of docs/options.md.
    Options,
}

/// glibc's allocator, set once before any other thread exists:
/// - two malloc arenas instead of glibc's default of eight per core: every thread that allocates (tokio's
///   workers, the decode and sink threads) would otherwise get an arena of its own, each holding freed
///   memory it does not return — 3-5 MB of a json read's ~50 MB peak (docs/benchmarks-history.md, "Memory");
/// - the top of the heap returned to the system only past 16 MiB free, and blocks below 4 MiB taken from the
///   heap: glibc's default (128 KiB, adjusted as blocks come and go) gave the pages of a sink's batch
///   buffers (1 MiB in exactly-once) back and faulted them in again, batch after batch — 25-45 thousand
///   page faults and up to 0.2 s of system time per million rows, in some runs and not others, against
///   ~6 000 faults with these settings (BENCHMARKS.md, "What exactly-once costs"). Peak RSS is unchanged.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets glibc allocator parameters; it runs first in main, before any other
    // thread exists, and each parameter takes any positive value.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 16 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
    }
}

fn main() -> ExitCode {
    tune_malloc();
    let cli = Cli::parse();
    // The SQL shell owns the terminal: only warnings and errors are logged there by default.
    init_tracing(if matches!(cli.command, Command::Sql { .. }) {
        "warn"
    } else {
        "info"
    });
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let reload = match parse_reload_interval(cli.plugin_reload.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    // The one plugin catalog of this process: every subcommand gets it from here.
    let plugins = Arc::new(
        PluginCatalog::with_compile_cache(
            resolve_plugin_dir(cli.plugin_dir),
            resolve_compile_cache(cli.compile_cache.as_deref()),
        )
        .with_reload(reload),
    );
    let registry = Registry::with_plugins(plugins.clone());
    match cli.command {
        Command::Version => {
            println!("pulsar-connect {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Plugins(command) => match pulsar_connect::cli::plugins::run(command, &plugins) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                ExitCode::from(1)
            }
        },
        Command::Sql {
            init,
            file,
            state_dir,
            history,
        } => pulsar_connect::cli::sql::main(
            pulsar_connect::cli::sql::Options {
                init,
                file,
                state_dir,
                history,
            },
            registry,
            &rt,
        ),
        Command::Docs {
            what: DocsCommand::Options,
        } => {
            print!("{}", job::options_markdown(&registry));
            ExitCode::SUCCESS
        }
        Command::Validate { job: path } => rt.block_on(async {
            match job::load(&path, &registry).await {
                Ok(j) => {
                    print!("{}", job::describe(&j));
                    println!(
                        "OK: {} table(s), {} INSERT(s)",
                        j.catalog.order.len(),
                        j.plans.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(errors) => {
                    for e in &errors.0 {
                        eprintln!("error: {}: {e}", path.display());
                    }
                    ExitCode::from(EXIT_INVALID)
                }
            }
        }),
        Command::Subscriptions { job: path, drop } => rt.block_on(async move {
            let j = match load_job(&path, &registry).await {
                Ok(j) => j,
                Err(code) => return code,
            };
            match cli::subscriptions::run(&j, drop).await {
                Ok(lines) => {
                    if lines.is_empty() {
                        println!("job {}: no subscriptions on the broker", j.job_id);
                    }
                    for l in lines {
                        println!("{l}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {}: {e:#}", path.display());
                    ExitCode::from(EXIT_RUNTIME)
                }
            }
        }),
        Command::Run {
            job,
            state_dir,
            fresh,
            metrics_addr,
        } => rt.block_on(cli::run::run(
            cli::run::RunArgs {
                job,
                state_dir,
                fresh,
                metrics_addr,
            },
            &registry,
            plugins.clone(),
        )),
    }
}

fn init_tracing(default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("PULSAR_CONNECT_LOG")
        .unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(pulsar_connect::terminal::is_terminal())
        .with_writer(pulsar_connect::terminal::LogWriter)
        .init();
}
