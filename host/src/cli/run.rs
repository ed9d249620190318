//! `pulsar-connect run JOB`: one job in this process until its sources end or a signal stops it; a failed
//! run is handed to the job's restart supervisor ([`crate::runtime::supervisor`]), and a restart makes
//! this process a fresh run of its own command line (`exec`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use tracing::{info, warn};

use super::{EXIT_FORCED, EXIT_RUNTIME, load_job};
use crate::connector_api::Registry;
use crate::connector_api::restart::RestartHistory;
use crate::plugins::catalog::PluginCatalog;
use crate::runtime::supervisor::{HISTORY_ENV, Next, Supervisor};
use crate::runtime::{self, Metrics, RunOptions};

/// `run`'s arguments.
#[derive(Debug, Clone)]
pub struct RunArgs {
    pub job: PathBuf,
    pub state_dir: Option<PathBuf>,
    pub fresh: bool,
    pub metrics_addr: Option<SocketAddr>,
}

pub async fn run(args: RunArgs, registry: &Registry, plugins: Arc<PluginCatalog>) -> ExitCode {
    let path = args.job;
    let j = match load_job(&path, registry).await {
        Ok(j) => j,
        Err(code) => return code,
    };
    for w in &j.catalog.warnings {
        warn!("{w}");
    }
    let metrics = match Metrics::new().and_then(|m| m.export_plugins(plugins).map(|()| m)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: metrics: {e:#}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let settings = j.catalog.settings.clone();
    let mut supervisor = Supervisor::new(settings.restart.clone(), RestartHistory::from_env());
    supervisor.report(&metrics);
    if let Some(addr) = args.metrics_addr {
        match crate::status::serve(addr, metrics.clone()).await {
            Ok(bound) => {
                info!("status at http://{bound}/ (metrics at /metrics, JSON at /api/status)")
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(EXIT_RUNTIME);
            }
        }
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(signals(stop_tx));
    info!(job_id = %j.job_id, inserts = j.plans.len(), "job started");
    let opts = RunOptions {
        job_id: j.job_id.clone(),
        state_dir: args.state_dir,
        fresh: args.fresh,
        progress: true,
    };
    match runtime::run(j.plans, &settings, opts, metrics, stop_rx).await {
        Ok(s) => {
            info!(rows_in = s.rows_in, rows_out = s.rows_out, checkpoints = s.checkpoints, restored_from = ?s.restored_from, "job finished");
            ExitCode::SUCCESS
        }
        Err(e) => match supervisor.after_failure(&e) {
            Next::Restart(delay) => {
                tokio::time::sleep(delay).await;
                exec_again(supervisor.history())
            }
            Next::Fail { why } => {
                eprintln!("error: {}: {e:#}", path.display());
                if let Some(why) = why {
                    eprintln!("error: {}: {why}", path.display());
                }
                ExitCode::from(EXIT_RUNTIME)
            }
        },
    }
}

/// This process becomes a fresh run of the same command line (without `--fresh`), carrying `history`.
/// `exec` keeps the pid, the log and whatever supervises the process, and closes every broker
/// connection, so the broker dispatches from the subscriptions' cursors to the new consumers.
fn exec_again(history: &RestartHistory) -> ExitCode {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(err) => {
            eprintln!("error: restarting the job: the program's path: {err}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let args: Vec<std::ffi::OsString> = std::env::args_os()
        .skip(1)
        .filter(|a| a != "--fresh")
        .collect();
    let err = std::process::Command::new(exe)
        .args(args)
        .env(HISTORY_ENV, history.to_env())
        .exec();
    eprintln!("error: restarting the job: {err}");
    ExitCode::from(EXIT_RUNTIME)
}

/// First SIGINT/SIGTERM: graceful stop. Second: exit at once.
async fn signals(stop: tokio::sync::watch::Sender<bool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        warn!("cannot install signal handlers");
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        count += 1;
        if count == 1 {
            info!("signal received: stopping (send it again to exit at once)");
            let _ = stop.send(true);
        } else {
            eprintln!("second signal: exiting immediately");
            std::process::exit(EXIT_FORCED as i32);
        }
    }
}
