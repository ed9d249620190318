//! The release binary (`target/release/pulsar-connect`, or `PULSAR_CONNECT_BIN`) run as a user runs it:
//! `validate` and `run` on a job file, with the built plugins (`--plugin-dir <repo>/plugins`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

pub fn binary() -> Result<PathBuf> {
    let p = std::env::var_os("PULSAR_CONNECT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| xtask::paths::target_dir().join("release/pulsar-connect"));
    if !p.exists() {
        bail!(
            "{} not found: build it with `cargo build --release -p pulsar-connect` (or set PULSAR_CONNECT_BIN)",
            p.display()
        );
    }
    // The same binary, wrapped for the secrets scan when `cargo xtask test` runs one.
    Ok(pulsar_connect_tests::binary())
}

fn command(sub: &str, job: &Path) -> Result<Command> {
    let mut cmd = Command::new(binary()?);
    cmd.arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg(sub)
        .arg(job);
    Ok(cmd)
}

/// What a finished command said.
#[derive(Debug)]
pub struct Outcome {
    /// `None`: killed after the timeout (it was still running).
    pub code: Option<i32>,
    /// With the job file's path removed, so that names are only found in the messages.
    pub stderr: String,
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self.code {
            Some(c) => format!("exit code {c}"),
            None => "still running (killed)".into(),
        }
    }
}

/// `validate job` (it never connects anywhere).
pub fn validate(job: &Path) -> Result<Outcome> {
    finish(command("validate", job)?, job, Duration::from_secs(120))
}

/// `run job --state-dir state`, killed after `timeout` if it has not ended by then.
pub fn run_to_end(job: &Path, state: &Path, timeout: Duration) -> Result<Outcome> {
    let mut cmd = command("run", job)?;
    cmd.arg("--state-dir").arg(state);
    finish(cmd, job, timeout)
}

fn finish(mut cmd: Command, job: &Path, timeout: Duration) -> Result<Outcome> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting pulsar-connect")?;
    // Both pipes are drained (a full pipe would block the child); the plan on stdout is not checked.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_or_kill(&mut child, timeout)?;
    join(stdout);
    Ok(Outcome {
        code: status.and_then(|s| s.code()),
        stderr: strip_path(&join(stderr), job),
    })
}

/// Waits at most `timeout`; kills the child (SIGKILL) when it is still running then.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A background job whose standard output is read line by line.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
    log: PathBuf,
    job: PathBuf,
}

impl Running {
    /// `run job --state-dir state`, stderr into `log`.
    pub fn start(job: &Path, state: &Path, log: &Path) -> Result<Running> {
        let mut cmd = command("run", job)?;
        cmd.arg("--state-dir").arg(state);
        let err = std::fs::File::create(log)?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .context("starting pulsar-connect")?;
        let out = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running {
            child,
            lines: rx,
            seen: Vec::new(),
            log: log.to_path_buf(),
            job: job.to_path_buf(),
        })
    }

    /// Collects output lines until there are `n` of them, the job ends or `timeout` passes.
    pub fn wait_lines(&mut self, n: usize, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.seen.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(200)))
            {
                Ok(l) => self.seen.push(l),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if self.child.try_wait()?.is_some() {
                        break;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        Ok(())
    }

    /// Whether the process has ended (and how).
    pub fn exited(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// SIGTERM (graceful stop: final checkpoint, exit 0), then the remaining output. Killed when it
    /// has not ended 30 s later.
    pub fn stop(mut self) -> Result<(Option<ExitStatus>, Vec<String>, String)> {
        if self.child.try_wait()?.is_none() {
            Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status()
                .context("kill -TERM")?;
        }
        let status = wait_or_kill(&mut self.child, Duration::from_secs(30))?;
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(l);
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        Ok((status, self.seen, strip_path(&log, &self.job)))
    }
}

fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = pipe {
            std::io::Read::read_to_string(&mut p, &mut s).ok();
        }
        s
    })
}

fn join(h: std::thread::JoinHandle<String>) -> String {
    h.join().unwrap_or_default()
}

fn strip_path(text: &str, job: &Path) -> String {
    text.replace(&job.display().to_string(), "<job>")
}
