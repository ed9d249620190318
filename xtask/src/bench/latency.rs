//! End-to-end latency at a fixed rate: a pulsar(json) → pulsar(json) job per engine that copies the input
//! message's publish time into the output message's event time; `xtask/bench/latency.py produce` publishes
//! order rows at the fixed rate, `latency.py probe` measures receive time − event time on the output topic.
//!
//! Order of a run: probe subscribed (from latest) → job started (its source from latest) → producer started;
//! the probe's window starts `warmup` seconds after the first output message, so the engine's start-up and
//! first messages do not count; when the probe is done the producer and the job are stopped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::{Ctx, proc_hwm_mb};

/// The fixed-rate settings of one latency run.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Messages per second the producer publishes.
    pub rate: u32,
    /// Seconds after the first output message that are not measured.
    pub warmup: f64,
    /// Measured seconds.
    pub seconds: f64,
    /// Checkpoint interval of both engines' jobs, in seconds.
    pub checkpoint_s: u32,
}

/// How long an engine may take from its start to the first output message.
const STARTUP_TIMEOUT_S: f64 = 180.0;

/// One latency result.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    pub name: String,
    /// The engine and its variant, for the notes under the table.
    pub short: String,
    /// What the producer achieved over its whole run (msg/s).
    pub rate_in: f64,
    /// Messages received per second within the measured window.
    pub rate_out: f64,
    pub count: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub peak_rss_mb: f64,
    pub note: String,
    pub settings: Option<Settings>,
}

/// The engine under test.
#[derive(Clone, Copy)]
pub enum Engine {
    /// No job: the probe reads the producer's topic and measures against the publish time (the broker and
    /// the two clients alone; the floor under both engines).
    Direct,
    /// pulsar-connect; `allow_latency`: the job's `table.exec.mini-batch.allow-latency` (how long the source
    /// may hold rows to fill a batch; unset by default: adaptive hand-off) when not the default.
    Ours {
        allow_latency: Option<&'static str>,
    },
    Flink,
}

impl Engine {
    fn label(&self) -> &'static str {
        match self {
            Engine::Direct => "direct",
            Engine::Ours {
                allow_latency: None,
            } => "ours",
            Engine::Ours { allow_latency: _ } => "ours-linger",
            Engine::Flink => "flink",
        }
    }

    fn describe(&self, rate: u32) -> String {
        match self {
            Engine::Direct => format!("baseline: producer → probe, no job, {rate} msg/s"),
            Engine::Ours {
                allow_latency: Some(l),
            } => format!(
                "ours: pulsar(json) → pulsar(json), {rate} msg/s, mini-batch.allow-latency = {l}"
            ),
            _ => format!(
                "{}: pulsar(json) → pulsar(json), {rate} msg/s",
                self.label()
            ),
        }
    }
}

/// A started job; `stop` ends it cleanly.
struct Job {
    child: Child,
    log: PathBuf,
    /// Flink: the file whose existence tells the runner to cancel the job and write its report.
    stop_file: Option<PathBuf>,
}

impl Ctx {
    /// One fixed-rate latency run of `engine`.
    pub(super) fn latency(&self, engine: Engine, s: Settings, run_id: u64) -> Result<Latency> {
        let label = engine.label();
        let topic = |d: &str| format!("persistent://public/default/bench-lat-{label}-{d}-{run_id}");
        let (input, output) = (topic("in"), topic("out"));
        let name = engine.describe(s.rate);
        let (probed, time) = match engine {
            Engine::Direct => (&input, "publish"),
            _ => (&output, "event"),
        };
        let mut probe = self.python_role(
            &format!("latency-probe-{label}"),
            &[
                "probe",
                &self.service_url,
                probed,
                "--time",
                time,
                "--warmup",
                &s.warmup.to_string(),
                "--seconds",
                &s.seconds.to_string(),
                "--timeout",
                &STARTUP_TIMEOUT_S.to_string(),
            ],
        )?;
        wait_for_line(
            &mut probe.0,
            &probe.1,
            "ready",
            Duration::from_secs(60),
            "latency probe",
        )?;
        let mut job = match engine {
            Engine::Direct => None,
            Engine::Ours { allow_latency } => {
                Some(self.latency_job_ours(label, &input, &output, s, allow_latency)?)
            }
            Engine::Flink => Some(self.latency_job_flink(&input, &output, s)?),
        };
        let producer_seconds = STARTUP_TIMEOUT_S + s.warmup + s.seconds + 60.0;
        let mut producer = self.python_role(
            &format!("latency-producer-{label}"),
            &[
                "produce",
                &self.service_url,
                &input,
                "--rate",
                &s.rate.to_string(),
                "--seconds",
                &producer_seconds.to_string(),
            ],
        );
        let outcome = match producer.as_mut() {
            Ok(p) => wait_probe(&mut probe.0, &probe.1, job.as_mut(), p),
            Err(e) => Err(anyhow::anyhow!("starting the latency producer: {e:#}")),
        };
        let rss = job.as_ref().map_or(0.0, |j| proc_hwm_mb(j.child.id()));
        let produced = producer.and_then(|p| stop_producer(p.0, &p.1));
        let stopped = job.as_mut().map_or(Ok(()), stop_job);
        let _ = probe.0.kill();
        let _ = probe.0.wait();
        let probe_out = outcome?;
        let produced = produced?;
        stopped?;
        let saved = self.dir.join(format!("latency-{label}.json"));
        fs::write(&saved, probe_out.to_string())
            .with_context(|| format!("writing {}", saved.display()))?;
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
        let count = probe_out["count"].as_u64().unwrap_or(0);
        if count == 0 {
            bail!(
                "{name}: the probe measured no message; logs in {}",
                self.dir.display()
            );
        }
        let short = match engine {
            Engine::Ours {
                allow_latency: Some(l),
            } => format!("ours (allow-latency {l})"),
            _ => label.to_owned(),
        };
        Ok(Latency {
            name,
            short,
            rate_in: f(&produced, "rate"),
            rate_out: f(&probe_out, "rate"),
            count,
            p50_ms: f(&probe_out, "p50_ms"),
            p90_ms: f(&probe_out, "p90_ms"),
            p99_ms: f(&probe_out, "p99_ms"),
            max_ms: f(&probe_out, "max_ms"),
            peak_rss_mb: rss,
            settings: Some(s),
            note: match engine {
                Engine::Direct => format!(
                    "publish time → receive; producer max lag behind schedule {} ms",
                    f(&produced, "max_lag_ms")
                ),
                _ => format!(
                    "at-least-once, checkpoint every {} s; producer max lag behind schedule {} ms",
                    s.checkpoint_s,
                    f(&produced, "max_lag_ms")
                ),
            },
        })
    }

    /// Starts `xtask/bench/latency.py <args>` with stdout piped and stderr into `<dir>/<name>.log`.
    fn python_role(&self, name: &str, args: &[&str]) -> Result<(Child, PathBuf)> {
        let python =
            xtask::python::ensure_venv().context("the Python venv for the latency tools")?;
        let log = self.dir.join(format!("{name}.log"));
        let child = Command::new(&python)
            .arg(self.root.join("xtask/bench/latency.py"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?,
            ))
            .spawn()
            .with_context(|| format!("starting {} (latency.py {})", python.display(), args[0]))?;
        Ok((child, log))
    }

    fn latency_job_ours(
        &self,
        label: &str,
        input: &str,
        output: &str,
        s: Settings,
        allow_latency: Option<&str>,
    ) -> Result<Job> {
        let linger = allow_latency
            .map(|l| format!("SET 'table.exec.mini-batch.allow-latency' = '{l}';\n"))
            .unwrap_or_default();
        let columns = "order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING";
        let sql = format!(
            "{linger}SET 'execution.checkpointing.interval' = '{cp}s';
CREATE TABLE src ({columns}, publish_time TIMESTAMP_LTZ(3) METADATA FROM 'publishTime' VIRTUAL) WITH ('connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{url}', 'admin-url' = '{admin}', 'format' = 'json', 'scan.startup.mode' = 'latest');
CREATE TABLE dst ({columns}, event_time TIMESTAMP_LTZ(3) METADATA FROM 'eventTime') WITH ('connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{url}', 'admin-url' = '{admin}', 'format' = 'json', 'sink.semantic' = 'at-least-once');
INSERT INTO dst SELECT order_id, order_product_id, order_customer_id, order_status, publish_time FROM src;",
            cp = s.checkpoint_s,
            url = self.service_url,
            admin = self.admin_url,
        );
        let job = self.job_file(&format!("latency-{label}"), &sql)?;
        let log = self.dir.join(format!("latency-{label}.log"));
        let child = self
            .job_command(&job, "state")
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(&log)?))
            .spawn()
            .with_context(|| format!("starting {}", self.bin.display()))?;
        Ok(Job {
            child,
            log,
            stop_file: None,
        })
    }

    fn latency_job_flink(&self, input: &str, output: &str, s: Settings) -> Result<Job> {
        let log = self.dir.join("latency-flink.log");
        let stop_file = self.dir.join("latency-flink.stop");
        // The last round's stop request must not stop this one at its start.
        match std::fs::remove_file(&stop_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", stop_file.display())),
        }
        let child = Command::new("java")
            .args(["-Xmx512m", "-jar"])
            .arg(self.root.join("bench/flink-peer/target/flink-peer.jar"))
            .arg("--sql")
            .arg(
                self.root
                    .join("bench/flink-peer/jobs/pulsar-json-pulsar.sql"),
            )
            .args(["--service-url", &self.service_url, "--topic", input])
            .args(["--var", &format!("OUT_TOPIC={output}")])
            .args([
                "--var",
                &format!("CHECKPOINT_INTERVAL={} s", s.checkpoint_s),
            ])
            .args(["--timeout", "900", "--stop-file"])
            .arg(&stop_file)
            .arg("--report")
            .arg(self.dir.join("latency-flink.json"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(&log)?))
            .spawn()
            .context("starting java (the Flink peer)")?;
        Ok(Job {
            child,
            log,
            stop_file: Some(stop_file),
        })
    }
}

/// Waits until the probe prints its result; fails if the job, the producer or the probe ends first.
fn wait_probe(
    probe: &mut Child,
    probe_log: &Path,
    mut job: Option<&mut Job>,
    producer: &mut (Child, PathBuf),
) -> Result<Value> {
    loop {
        if let Some(job) = job.as_mut()
            && let Some(st) = job.child.try_wait()?
        {
            bail!(
                "the latency job exited early ({st}); log: {}",
                job.log.display()
            );
        }
        if let Some(st) = producer.0.try_wait()? {
            bail!(
                "the latency producer exited early ({st}): {}",
                tail(&producer.1)
            );
        }
        if let Some(st) = probe.try_wait()? {
            if !st.success() {
                bail!("the latency probe failed ({st}): {}", tail(probe_log));
            }
            let out = read_stdout(probe)?;
            return last_json_line(&out)
                .with_context(|| format!("the latency probe printed no result: {out:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Polls a child's log file until it holds `line`.
fn wait_for_line(
    child: &mut Child,
    log: &Path,
    line: &str,
    max: Duration,
    what: &str,
) -> Result<()> {
    let deadline = Instant::now() + max;
    loop {
        if fs::read_to_string(log).is_ok_and(|t| t.lines().any(|l| l.trim() == line)) {
            return Ok(());
        }
        if let Some(st) = child.try_wait()? {
            bail!("{what} exited ({st}) before it was ready: {}", tail(log));
        }
        if Instant::now() > deadline {
            bail!("{what} not ready after {} s: {}", max.as_secs(), tail(log));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM to the producer (it flushes and prints what it achieved).
fn stop_producer(mut child: Child, log: &Path) -> Result<Value> {
    signal(&child, libc::SIGTERM);
    let st = child.wait()?;
    let out = read_stdout(&mut child)?;
    if !st.success() {
        bail!("the latency producer failed ({st}): {}", tail(log));
    }
    last_json_line(&out).with_context(|| format!("the latency producer printed no result: {out:?}"))
}

/// Ours: SIGTERM (final checkpoint, clean exit). Flink: the stop file (the runner cancels the job).
fn stop_job(job: &mut Job) -> Result<()> {
    match &job.stop_file {
        Some(f) => fs::write(f, b"stop").with_context(|| format!("writing {}", f.display()))?,
        None => signal(&job.child, libc::SIGTERM),
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    while job.child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = job.child.kill();
            let _ = job.child.wait();
            bail!(
                "the latency job did not stop within 90 s (killed); log: {}",
                job.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn signal(child: &Child, sig: i32) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn read_stdout(child: &mut Child) -> Result<String> {
    use std::io::Read as _;
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out)?;
    }
    Ok(out)
}

fn last_json_line(out: &str) -> Option<Value> {
    out.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(Value::is_object)
}

/// The last lines of a log, for error messages.
fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(5);
    format!("{} (log: {})", lines[from..].join(" | "), log.display())
}

/// The latency table and the ours / Flink comparisons. `rounds`: each round runs every engine once, in the
/// same order. With more than one round a row is the engine's round with the median p99, and each figure
/// above the baseline is the median over the rounds of that round's difference (the baseline of the same
/// round), so one noisy 30-s window cannot rank two p99s a few ms apart.
pub fn render(rounds: &[Vec<Latency>]) -> String {
    use std::fmt::Write as _;
    let Some(first) = rounds.first().filter(|r| !r.is_empty()) else {
        return String::new();
    };
    let n = rounds.len();
    let (warmup, window) = first[0]
        .settings
        .map_or((0.0, 0.0), |x| (x.warmup, x.seconds));
    let mut s = String::new();
    let how = if n == 1 {
        "one run at a time".to_owned()
    } else {
        format!(
            "{n} interleaved rounds of every run, one run at a time; each row is the run's round with the median \
             p99, and the figures under the table are medians over the rounds"
        )
    };
    let _ = writeln!(
        s,
        "\nEnd-to-end latency at a fixed rate (`xtask/bench/latency.py`): receive time at a probe consumer on the \
         output topic − the input message's publish time, which the job copies into the output message's event \
         time (ms resolution, so up to 1 ms too high). Measured over {window} s, starting {warmup} s after the \
         first output message (start-up and JIT warm-up not counted). Same broker, producer and probe for every \
         row; {how}.\n"
    );
    let _ = writeln!(
        s,
        "| run | in msg/s | out msg/s (window) | msgs measured | p50 ms | p90 ms | p99 ms | max ms | peak RSS MB | note |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    // Engine e of every round.
    let runs_of = |e: usize| rounds.iter().filter_map(move |r| r.get(e));
    for e in 0..first.len() {
        let mut runs: Vec<&Latency> = runs_of(e).collect();
        runs.sort_by(|a, b| a.p99_ms.total_cmp(&b.p99_ms));
        let l = runs[runs.len() / 2];
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
            l.name,
            l.rate_in,
            l.rate_out,
            l.count,
            l.p50_ms,
            l.p90_ms,
            l.p99_ms,
            l.max_ms,
            super::figure_or_dash(l.peak_rss_mb, 0),
            l.note
        );
    }
    let index = |p: &str| first.iter().position(|l| l.name.starts_with(p));
    let median_of = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        super::reads::median(&v)
    };
    let listed = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:+.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut notes = Vec::new();
    // Per engine: (p50, p99) above the same round's baseline, medians over the rounds.
    let mut above = vec![None; first.len()];
    if let Some(b) = index("baseline:") {
        for (e, l) in first.iter().enumerate().filter(|&(e, _)| e != b) {
            let diffs = |f: fn(&Latency) -> f64| -> Vec<f64> {
                rounds
                    .iter()
                    .filter_map(|r| Some(f(r.get(e)?) - f(r.get(b)?)))
                    .collect()
            };
            let (d50, d99) = (diffs(|l| l.p50_ms), diffs(|l| l.p99_ms));
            let (m50, m99) = (median_of(d50.clone()), median_of(d99.clone()));
            above[e] = Some((m50, m99));
            let per_round = if n > 1 {
                format!(
                    " (median of {n} rounds; p50 {}; p99 {})",
                    listed(&d50),
                    listed(&d99)
                )
            } else {
                String::new()
            };
            notes.push(format!(
                "- {} above the baseline (broker and clients alone): p50 +{m50:.1} ms, p99 +{m99:.1} ms{per_round}",
                l.short
            ));
        }
    }
    let ours = first
        .iter()
        .position(|l| l.name.starts_with("ours:") && !l.name.contains("allow-latency"));
    if let (Some(o), Some(f)) = (ours, index("flink:")) {
        // A round whose Flink figure is 0 has no ratio; with none left there is no note (as before).
        let ratio = |g: fn(&Latency) -> f64| {
            let v: Vec<f64> = rounds
                .iter()
                .filter_map(|r| Some(g(r.get(o)?) / g(r.get(f)?)))
                .filter(|x| x.is_finite())
                .collect();
            (!v.is_empty()).then(|| median_of(v))
        };
        if let (Some(r50), Some(r99)) = (ratio(|l| l.p50_ms), ratio(|l| l.p99_ms)) {
            notes.push(format!(
                "- latency, ours / Flink: p50 {r50:.2}×, p99 {r99:.2}× (lower is better{})",
                if n > 1 {
                    "; medians of the rounds' ratios"
                } else {
                    ""
                }
            ));
        }
        if let (Some((o50, o99)), Some((f50, f99))) = (above[o], above[f]) {
            notes.push(format!(
                "- added over the baseline, ours vs Flink: p50 +{o50:.1} vs +{f50:.1} ms, p99 +{o99:.1} vs +{f99:.1} ms"
            ));
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(s, "\n{}", notes.join("\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, short: &str, p50_ms: f64, p99_ms: f64) -> Latency {
        Latency {
            name: name.into(),
            short: short.into(),
            rate_in: 10_000.0,
            rate_out: 10_000.0,
            count: 300_000,
            p50_ms,
            p90_ms: p50_ms,
            p99_ms,
            max_ms: p99_ms,
            peak_rss_mb: f64::NAN,
            note: String::new(),
            settings: None,
        }
    }

    fn round(base: (f64, f64), ours: (f64, f64), flink: (f64, f64)) -> Vec<Latency> {
        vec![
            run("baseline: x", "baseline", base.0, base.1),
            run("ours: x", "ours", ours.0, ours.1),
            run("flink: x", "flink", flink.0, flink.1),
        ]
    }

    #[test]
    fn rounds_are_compared_within_a_round_and_summarised_by_medians() {
        // Round 2's slow baseline would make ours look 30 ms worse if rounds were mixed.
        let rounds = vec![
            round((10.0, 20.0), (14.0, 26.0), (24.0, 35.0)),
            round((10.0, 50.0), (15.0, 56.0), (23.0, 62.0)),
            round((11.0, 21.0), (15.0, 30.0), (25.0, 30.0)),
        ];
        let text = render(&rounds);
        assert!(
            text.contains("- ours above the baseline (broker and clients alone): p50 +4.0 ms, p99 +6.0 ms (median of 3 rounds; p50 +4.0, +5.0, +4.0; p99 +6.0, +6.0, +9.0)"),
            "{text}"
        );
        assert!(
            text.contains(
                "- flink above the baseline (broker and clients alone): p50 +14.0 ms, p99 +12.0 ms"
            ),
            "{text}"
        );
        assert!(
            text.contains("p50 +4.0 vs +14.0 ms, p99 +6.0 vs +12.0 ms"),
            "{text}"
        );
        // Each row is the engine's round with the median p99: ours 30.0 (of 26, 56, 30).
        assert!(
            text.contains("| ours: x | 10000 | 10000 | 300000 | 15.0 | 15.0 | 30.0 | 30.0 |"),
            "{text}"
        );
    }

    #[test]
    fn a_flink_run_without_figures_gives_no_ratio() {
        let text = render(&[round((10.0, 20.0), (14.0, 26.0), (0.0, 0.0))]);
        assert!(!text.contains("ours / Flink"), "{text}");
    }

    #[test]
    fn one_round_reads_as_before() {
        let text = render(&[round((10.0, 20.0), (14.0, 26.0), (24.0, 35.0))]);
        assert!(text.contains("one run at a time."), "{text}");
        assert!(text.contains("p50 +4.0 ms, p99 +6.0 ms\n"), "{text}");
        assert!(
            text.contains("latency, ours / Flink: p50 0.58×, p99 0.74× (lower is better)"),
            "{text}"
        );
    }
}
