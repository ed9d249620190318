//! The shell's INSERT jobs: each a job as `run` runs it (same job id rule, checkpoints and restore, a
//! final checkpoint at stop), in the background while the shell lives; `SHOW JOBS` lists them and
//! `STOP JOB` stops one.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::connector_api::Registry;
use crate::job::{self, Job};
use crate::runtime::supervisor::{Next, Supervisor};
use crate::runtime::{self, Metrics, RunOptions, RunSummary};
use crate::sql::Statement;

use super::tableau;

/// Where a job is.
#[derive(Debug, Clone)]
enum Status {
    Running,
    Finished(RunSummary),
    Stopped(RunSummary),
    Failed(String),
}

impl Status {
    fn name(&self) -> &'static str {
        match self {
            Status::Running => "RUNNING",
            Status::Finished(_) => "FINISHED",
            Status::Stopped(_) => "STOPPED",
            Status::Failed(_) => "FAILED",
        }
    }
}

struct ShellJob {
    id: String,
    /// The INSERT as typed (first line).
    statement: String,
    started: chrono::DateTime<chrono::Local>,
    stop: watch::Sender<bool>,
    status: Arc<Mutex<Status>>,
    metrics: Arc<Metrics>,
    task: Option<JoinHandle<()>>,
}

impl ShellJob {
    fn status(&self) -> Status {
        self.status
            .lock()
            .map(|s| s.clone())
            .unwrap_or(Status::Failed("status lost".into()))
    }
}

#[derive(Default)]
pub struct Jobs {
    jobs: Vec<ShellJob>,
}

impl Jobs {
    /// Plans the INSERT(s) over the session's statements and starts them as one job; returns its id.
    pub async fn start(
        &mut self,
        statements: Vec<Statement>,
        text: String,
        statement: &str,
        registry: &Registry,
        state_dir: Option<std::path::PathBuf>,
    ) -> Result<String, Vec<String>> {
        let j = job::load_statements(statements.clone(), &text, registry)
            .await
            .map_err(|e| e.0)?;
        if let Some(running) = self
            .jobs
            .iter()
            .find(|r| r.id == j.job_id && matches!(r.status(), Status::Running))
        {
            return Err(vec![format!(
                "job '{}' is already running ({}); stop it first (STOP JOB '{}') or SET 'pipeline.name' to another name",
                running.id, running.statement, running.id
            )]);
        }
        for w in &j.catalog.warnings {
            warn!("{w}");
        }
        let metrics = Metrics::new().map_err(|e| vec![format!("metrics: {e:#}")])?;
        let (stop, stop_rx) = watch::channel(false);
        let status = Arc::new(Mutex::new(Status::Running));
        let id = j.job_id.clone();
        let opts = RunOptions {
            job_id: id.clone(),
            state_dir,
            fresh: false,
            progress: false,
        };
        let task = tokio::spawn(run_job(
            j,
            statements,
            text,
            registry.clone(),
            opts,
            metrics.clone(),
            stop_rx,
            status.clone(),
        ));
        self.jobs.push(ShellJob {
            id: id.clone(),
            statement: statement
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_string(),
            started: chrono::Local::now(),
            stop,
            status,
            metrics,
            task: Some(task),
        });
        Ok(id)
    }

    /// `STOP JOB 'id'`: a final checkpoint, then the pipelines drain.
    pub async fn stop(&mut self, id: &str) -> Result<String, String> {
        let Some(index) = self.jobs.iter().position(|j| j.id == id) else {
            let ids: Vec<&str> = self.jobs.iter().map(|j| j.id.as_str()).collect();
            let mut m = format!("no job '{id}'");
            if let Some(best) = crate::options::suggest(id, ids.iter().copied()) {
                m.push_str(&format!("; did you mean '{best}'?"));
            }
            m.push_str(if ids.is_empty() {
                "; no job was started (INSERT INTO ...)"
            } else {
                "; SHOW JOBS lists the jobs"
            });
            return Err(m);
        };
        let j = &mut self.jobs[index];
        if !matches!(j.status(), Status::Running) {
            return Err(format!("job '{id}' is not running ({})", j.status().name()));
        }
        let _ = j.stop.send(true);
        if let Some(task) = j.task.take() {
            let _ = task.await;
        }
        match j.status() {
            Status::Stopped(s) | Status::Finished(s) => Ok(format!(
                "[INFO] Job '{id}' stopped after a final checkpoint: {} row(s) in, {} out, {} checkpoint(s)",
                s.rows_in, s.rows_out, s.checkpoints
            )),
            Status::Failed(e) => Err(format!("job '{id}' failed while stopping: {e}")),
            Status::Running => Err(format!("job '{id}' did not stop")),
        }
    }

    /// Stops every running job (the shell exits).
    pub async fn stop_all(&mut self) {
        let running: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| matches!(j.status(), Status::Running))
            .map(|j| j.id.clone())
            .collect();
        for id in running {
            match self.stop(&id).await {
                Ok(m) => println!("{m}"),
                Err(e) => eprintln!("error: {e}"),
            }
        }
    }

    /// Waits until every job ended (`-f`: the file's jobs run to their end or until a signal stops them).
    pub async fn wait_all(&mut self, mut stop: watch::Receiver<bool>) -> bool {
        loop {
            let running: Vec<usize> = (0..self.jobs.len())
                .filter(|i| matches!(self.jobs[*i].status(), Status::Running))
                .collect();
            if running.is_empty() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(200)) => {}
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        self.stop_all().await;
                    }
                }
            }
        }
        !self
            .jobs
            .iter()
            .any(|j| matches!(j.status(), Status::Failed(_)))
    }

    /// `SHOW JOBS`
    pub fn show(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .jobs
            .iter()
            .map(|j| {
                let (rows_in, rows_out, checkpoints) = match j.status() {
                    Status::Finished(s) | Status::Stopped(s) => {
                        (s.rows_in, s.rows_out, s.checkpoints)
                    }
                    _ => (
                        Metrics::total(&j.metrics.rows_in),
                        Metrics::total(&j.metrics.rows_out),
                        j.metrics.checkpoints.get(),
                    ),
                };
                vec![
                    j.id.clone(),
                    j.status().name().to_string(),
                    rows_in.to_string(),
                    rows_out.to_string(),
                    checkpoints.to_string(),
                    j.started.format("%Y-%m-%d %H:%M:%S").to_string(),
                    j.statement.clone(),
                ]
            })
            .collect();
        tableau::table(
            &[
                "job id",
                "status",
                "rows in",
                "rows out",
                "checkpoints",
                "start time",
                "statement",
            ],
            &rows,
        )
    }
}

/// One job until it ends. A failed run goes to the job's restart supervisor, as `run`'s do: the job's
/// `restart-strategy.*` decide (unset: only a rewind restarts), and a restart plans the job again from its
/// statements and runs it anew in this process (from its last checkpoint), after the strategy's delay.
#[allow(clippy::too_many_arguments)]
async fn run_job(
    mut j: Job,
    statements: Vec<Statement>,
    text: String,
    registry: Registry,
    opts: RunOptions,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
    status: Arc<Mutex<Status>>,
) {
    let id = opts.job_id.clone();
    info!(job_id = %id, inserts = j.plans.len(), "job started");
    let mut supervisor = Supervisor::new(j.catalog.settings.restart.clone(), Default::default());
    let outcome = loop {
        let settings = j.catalog.settings.clone();
        let plans = std::mem::take(&mut j.plans);
        let e = match runtime::run(
            plans,
            &settings,
            opts.clone(),
            metrics.clone(),
            stop.clone(),
        )
        .await
        {
            Ok(s) if *stop.borrow() => break Status::Stopped(s),
            Ok(s) => break Status::Finished(s),
            Err(e) if *stop.borrow() => break Status::Failed(format!("{e:#}")),
            Err(e) => e,
        };
        match supervisor.after_failure(&e) {
            Next::Restart(delay) => {
                supervisor.report(&metrics);
                // STOP JOB while waiting: the job ends stopped, with nothing more done.
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = stop.wait_for(|s| *s) => {
                        break Status::Failed(format!("stopped while waiting to restart after: {e:#}"));
                    }
                }
                match job::load_statements(statements.clone(), &text, &registry).await {
                    Ok(again) => j = again,
                    Err(e) => break Status::Failed(e.to_string()),
                }
            }
            Next::Fail { why: None } => break Status::Failed(format!("{e:#}")),
            Next::Fail { why: Some(why) } => break Status::Failed(format!("{e:#}; {why}")),
        }
    };
    match &outcome {
        Status::Failed(e) => error!(job_id = %id, "job failed: {e}"),
        Status::Finished(s) => {
            info!(job_id = %id, rows_in = s.rows_in, rows_out = s.rows_out, checkpoints = s.checkpoints, "job finished")
        }
        _ => {}
    }
    if let Ok(mut s) = status.lock() {
        *s = outcome;
    }
}
