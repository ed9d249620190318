//! `cargo xtask bench [--smoke] [--rows N] [--no-flink] [--latency-seconds S] [--latency-rounds N] [--read-rounds N]`:
//! pulsar-connect side by side with the Flink peer, the bare-consumer ceiling and native decode, in one run on
//! the same broker and the same data, plus end-to-end latency at a fixed rate (see `latency`). Prints the
//! tables and (unless `--smoke`) writes them into BENCHMARKS.md between the `bench:begin` / `bench:end`
//! markers. `--read-rounds N` runs only the repeated reads (`reads`: each single-partition reading job N
//! times on fresh subscriptions, min / median / max); `--parallel-rounds N` only the parallel reads
//! (`parallel`: a 4-partition topic by 1, 2 and 4 subtasks, by one and by two processes); `--takeover-rounds N`
//! only the take-over after a SIGKILL (`takeover`: three exactly-once processes, one killed, with
//! `transaction-timeout` 1 min and 10 min; the full run has 3 rounds of it). `--latency-rounds N`
//! runs the latency engines in N interleaved rounds (default 3, 1 with `--smoke`) and reports medians
//! (`latency::render`).

mod decode;
mod latency;
mod machine;
mod parallel;
mod reads;
mod symbol_order;
mod takeover;
mod throughput;

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::build_plugins;
use machine::{CpuTicks, load_average};
use xtask::broker::{self, BrokerInfo, Profile, StartOptions, http};
use xtask::paths;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Tiny data, no Flink peer unless its jar is built, BENCHMARKS.md untouched (what CI runs).
    #[arg(long)]
    pub smoke: bool,
    /// Messages per topic.
    #[arg(long)]
    pub rows: Option<u64>,
    /// Skip the Flink peer.
    #[arg(long)]
    pub no_flink: bool,
    /// Measured seconds of each fixed-rate latency run (default 30; 3 with --smoke); 0 skips them.
    #[arg(long)]
    pub latency_seconds: Option<f64>,
    /// The fixed rate of the latency runs, messages per second.
    #[arg(long, default_value_t = 10_000)]
    pub latency_rate: u32,
    /// Interleaved rounds of the latency runs (default 3, 1 with --smoke): rows and figures become
    /// medians over them (one 30-s window's p99 moves by several ms from run to run).
    #[arg(long)]
    pub latency_rounds: Option<usize>,
    /// Only the latency runs (BENCHMARKS.md untouched).
    #[arg(long)]
    pub latency_only: bool,
    /// Only the repeated reads: fill one 1-partition topic, then read it this many times with every
    /// single-partition reading job, each on a fresh subscription, and report min / median / max
    /// (BENCHMARKS.md untouched; the table is printed).
    #[arg(long)]
    pub read_rounds: Option<usize>,
    /// Interleaved rounds of every throughput job (the ratios use the rounds' min and median; default 3,
    /// 1 with --smoke).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Only the parallel reads: fill one 4-partition topic, then read it this many interleaved rounds
    /// with 1, 2 and 4 source subtasks, and by one and by two processes sharing a Failover subscription
    /// (BENCHMARKS.md untouched; the table is printed).
    #[arg(long)]
    pub parallel_rounds: Option<usize>,
    /// Only the take-over: this many rounds of three processes copying exactly-once, one SIGKILLed,
    /// with `transaction-timeout` 1 min and 10 min interleaved (BENCHMARKS.md untouched; the table is
    /// printed). The full run has 3 rounds of it (1 round at 1 min with --smoke).
    #[arg(long)]
    pub takeover_rounds: Option<usize>,
}

/// One measured row of the table.
#[derive(Debug, Clone, Default)]
struct Measure {
    name: String,
    /// The topic whose messages the run read or wrote (message payload bytes are measured per topic).
    topic: Option<String>,
    rows: u64,
    /// Message payload bytes (the value; keys and metadata not counted).
    bytes: u64,
    /// Seconds from the first row to the last (steady state).
    wall: f64,
    /// CPU seconds over the same span.
    cpu: f64,
    peak_rss_mb: f64,
    note: String,
}

impl Measure {
    fn rate(&self) -> f64 {
        if self.wall > 0.0 {
            self.rows as f64 / self.wall
        } else {
            0.0
        }
    }
    fn mb_s(&self) -> f64 {
        if self.wall > 0.0 {
            self.bytes as f64 / self.wall / 1e6
        } else {
            0.0
        }
    }
    fn cpu_per_m(&self) -> f64 {
        if self.rows > 0 {
            self.cpu * 1e6 / self.rows as f64
        } else {
            0.0
        }
    }
}

/// A positive figure with `decimals` decimals, else "–" (not measured).
fn figure_or_dash(v: f64, decimals: usize) -> String {
    if v > 0.0 {
        format!("{v:.decimals$}")
    } else {
        "–".to_owned()
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn proc_cpu(pid: u32) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let t = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (t(11) + t(12)) / 100.0
}

fn proc_hwm_mb(pid: u32) -> f64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// The value of the first series `name` whose labels include `want` (others, such as the `job` every
/// series carries, are ignored); 0 when there is none.
fn series(body: &str, name: &str, want: &[(&str, &str)]) -> f64 {
    body.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let has = |(k, v): &(&str, &str)| {
                labels.split(',').any(|pair| pair == format!("{k}=\"{v}\""))
            };
            if want.iter().all(has) {
                value.trim().parse().ok()
            } else {
                None
            }
        })
        .unwrap_or(0.0)
}

fn unlabelled_metric(body: &str, name: &str) -> f64 {
    series(body, name, &[])
}

fn metric(body: &str, name: &str, table: &str) -> f64 {
    series(body, name, &[("table", table)])
}

struct Ctx {
    root: PathBuf,
    bin: PathBuf,
    service_url: String,
    admin_url: String,
    dir: PathBuf,
    rows: u64,
}

/// How a reading job runs: extra `SET` lines, extra source options, how many processes.
#[derive(Debug, Clone, Default)]
struct Reading {
    sets: String,
    source_options: String,
    processes: usize,
    /// Into Pulsar instead of blackhole: the sink table's options after the connection ones (its
    /// `'topic' = ...` first); the run then ends with the first checkpoint completed after the last row.
    sink: Option<String>,
}

impl Ctx {
    /// `pulsar-connect --plugin-dir <plugins> run <job> --state-dir <bench dir>/<state> --fresh`.
    fn job_command(&self, job: &Path, state: &str) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--plugin-dir")
            .arg(self.root.join("plugins"))
            .arg("run")
            .arg(job)
            .arg("--state-dir")
            .arg(self.dir.join(state))
            .arg("--fresh");
        cmd
    }

    fn job_file(&self, name: &str, sql: &str) -> Result<PathBuf> {
        let p = self.dir.join(format!("{name}.sql"));
        fs::write(&p, sql)?;
        Ok(p)
    }

    fn table(&self, name: &str, topic: &str, format: &str, extra: &str) -> String {
        let columns = if format == "raw" {
            "payload STRING".to_owned()
        } else {
            "order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING".to_owned()
        };
        format!(
            "CREATE TABLE {name} ({columns}) WITH ('connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'admin-url' = '{}', 'format' = '{format}'{extra});",
            self.service_url, self.admin_url
        )
    }

    /// A bounded producing job (datagen → pulsar): whole-process numbers.
    fn produce(
        &self,
        name: &str,
        topic: &str,
        format: &str,
        extra: &str,
        interval: &str,
    ) -> Result<Measure> {
        let sql = format!(
            "SET 'execution.checkpointing.interval' = '{interval}';
CREATE TABLE gen (order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING) WITH (
  'connector' = 'datagen', 'rows-per-second' = '1000000000', 'number-of-rows' = '{rows}',
  'fields.order_id.kind' = 'sequence', 'fields.order_id.start' = '1', 'fields.order_id.end' = '{rows}',
  'fields.order_product_id.min' = '1', 'fields.order_product_id.max' = '100000',
  'fields.order_customer_id.min' = '1', 'fields.order_customer_id.max' = '10000',
  'fields.order_status.length' = '8');
{}
INSERT INTO dst SELECT * FROM gen;",
            self.table("dst", topic, format, extra),
            rows = self.rows
        );
        let job = self.job_file(name, &sql)?;
        let start = Instant::now();
        let mut child = self
            .job_command(&job, "state")
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(
                self.dir.join(format!("{name}.log")),
            )?))
            .spawn()?;
        let pid = child.id();
        let mut cpu = 0.0;
        let mut rss = 0.0;
        let status = loop {
            // Sample before checking for the exit, so the last sample is as late as possible.
            let (c, r) = (proc_cpu(pid), proc_hwm_mb(pid));
            if let Some(s) = child.try_wait()? {
                break s;
            }
            cpu = f64::max(cpu, c);
            rss = f64::max(rss, r);
            std::thread::sleep(Duration::from_millis(10));
        };
        if !status.success() {
            bail!(
                "{name} failed ({status}); log: {}",
                self.dir.join(format!("{name}.log")).display()
            );
        }
        Ok(Measure {
            name: name.to_owned(),
            topic: Some(topic.to_owned()),
            rows: self.rows,
            bytes: 0,
            wall: start.elapsed().as_secs_f64(),
            cpu,
            peak_rss_mb: rss,
            note: "whole process, incl. start-up".into(),
        })
    }

    /// pulsar → blackhole until every row was read: numbers from the first row on.
    /// `pipeline`: the job's `pipeline.name` (its subscription); `None`: derived from the job file.
    fn consume(
        &self,
        name: &str,
        topic: &str,
        format: &str,
        pipeline: Option<&str>,
    ) -> Result<Measure> {
        self.consume_with(name, topic, format, pipeline, &Reading::default())
    }

    /// [`Self::consume`] with extra settings, by `reading.processes` processes running the same job file
    /// (rows, CPU and peak RSS summed over them).
    fn consume_with(
        &self,
        name: &str,
        topic: &str,
        format: &str,
        pipeline: Option<&str>,
        reading: &Reading,
    ) -> Result<Measure> {
        let columns = if format == "raw" {
            "payload STRING"
        } else {
            "order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING"
        };
        let sink = match &reading.sink {
            None => format!("CREATE TABLE sink ({columns}) WITH ('connector' = 'blackhole');"),
            Some(options) => format!(
                "CREATE TABLE sink ({columns}) WITH ('connector' = 'pulsar', 'service-url' = '{}', 'admin-url' = '{}', 'format' = '{format}', {options});",
                self.service_url, self.admin_url
            ),
        };
        let sql = format!(
            "SET 'execution.checkpointing.interval' = '10s';
{}{}{}
{sink}
INSERT INTO sink SELECT * FROM src;",
            pipeline
                .map(|p| format!("SET 'pipeline.name' = '{p}';\n"))
                .unwrap_or_default(),
            reading.sets,
            self.table(
                "src",
                topic,
                format,
                &format!(
                    ", 'scan.startup.mode' = 'earliest'{}",
                    reading.source_options
                )
            ),
        );
        let job = self.job_file(name, &sql)?;
        let mut procs = Vec::new();
        for k in 0..reading.processes.max(1) {
            let port = free_port()?;
            let log = self.dir.join(format!("{name}.{k}.log"));
            let child = self
                .job_command(&job, &format!("state-{k}"))
                .arg("--metrics-addr")
                .arg(format!("127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::from(fs::File::create(&log)?))
                .spawn()?;
            procs.push((child, format!("http://127.0.0.1:{port}/metrics"), log));
        }
        let cpu = |procs: &[(std::process::Child, String, PathBuf)]| -> f64 {
            procs.iter().map(|(c, _, _)| proc_cpu(c.id())).sum()
        };
        let deadline = Instant::now() + Duration::from_secs(900);
        // The span starts at the last sample that still saw no row (the job up, its metrics answering): all
        // rows count, and the span is at most one sampling interval too long. (Counting from the first sample
        // that saw rows would drop the first batch, and with tiny data — `--smoke` — every row.)
        let mut start = (Instant::now(), cpu(&procs));
        let mut all_in_at: Option<f64> = None;
        let result = loop {
            for (child, _, log) in &mut procs {
                if let Some(s) = child.try_wait()? {
                    bail!("{name} exited early ({s}); log: {}", log.display());
                }
            }
            if Instant::now() > deadline {
                break Err(anyhow::anyhow!("{name}: not done after 900 s"));
            }
            let sampled = (Instant::now(), cpu(&procs));
            // (pulsar_connect_bytes_in_total counts Arrow memory, not message bytes: MB/s comes from the
            // topic's payload bytes, see `fill_payload_bytes`.)
            let mut rows = 0.0;
            let mut checkpoints = 0.0;
            let mut answering = true;
            for (_, url, _) in &procs {
                match http::get(url, None) {
                    Ok(r) => {
                        rows += metric(&r.body, "pulsar_connect_rows_in_total", "src");
                        checkpoints +=
                            unlabelled_metric(&r.body, "pulsar_connect_checkpoints_total");
                    }
                    Err(_) => answering = false,
                }
            }
            if !answering {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            if rows == 0.0 {
                start = sampled;
            }
            // Into Pulsar, the rows count once a checkpoint completed after the last one came in (its
            // flush, and in exactly-once the transaction's commit).
            let committed = match (&reading.sink, rows >= self.rows as f64) {
                (_, false) => false,
                (None, true) => true,
                (Some(_), true) => {
                    let before = *all_in_at.get_or_insert(checkpoints);
                    checkpoints > before
                }
            };
            if committed {
                let (t0, c0) = start;
                break Ok(Measure {
                    name: name.to_owned(),
                    topic: Some(topic.to_owned()),
                    rows: rows as u64,
                    bytes: 0,
                    wall: t0.elapsed().as_secs_f64(),
                    cpu: cpu(&procs) - c0,
                    peak_rss_mb: procs.iter().map(|(c, _, _)| proc_hwm_mb(c.id())).sum(),
                    note: String::new(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for (child, _, _) in &mut procs {
            // SAFETY: SIGTERM to our own child.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
        }
        for (child, _, _) in &mut procs {
            let _ = child.wait();
        }
        result
    }

    fn ceiling(&self, name: &str, topic: &str) -> Result<Measure> {
        let out = Command::new(paths::target_dir().join("release/examples/bare_consumer"))
            .arg(&self.service_url)
            .arg(topic)
            .arg(self.rows.to_string())
            .output()?;
        if !out.status.success() {
            bail!(
                "bare_consumer failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: Value = serde_json::from_slice(out.stdout.trim_ascii())?;
        Ok(Measure {
            name: name.to_owned(),
            topic: Some(topic.to_owned()),
            rows: v["rows"].as_u64().unwrap_or(0),
            bytes: v["bytes"].as_u64().unwrap_or(0),
            wall: v["wall_seconds"].as_f64().unwrap_or(0.0),
            cpu: v["cpu_seconds"].as_f64().unwrap_or(0.0),
            peak_rss_mb: v["peak_rss_mb"].as_f64().unwrap_or(0.0),
            note: "no decoding".into(),
        })
    }

    fn flink(
        &self,
        name: &str,
        sql: &str,
        topic: &str,
        expect: bool,
        vars: &[&str],
    ) -> Result<Measure> {
        let jar = self.root.join("bench/flink-peer/target/flink-peer.jar");
        let report = self.dir.join(format!("{name}.json"));
        let mut cmd = Command::new("java");
        cmd.args(["-Xmx512m", "-jar"])
            .arg(&jar)
            .arg("--sql")
            .arg(self.root.join("bench/flink-peer/jobs").join(sql))
            .args([
                "--service-url",
                &self.service_url,
                "--admin-url",
                &self.admin_url,
                "--topic",
                topic,
            ])
            .args(["--timeout", "900", "--report"])
            .arg(&report);
        if expect {
            cmd.args(["--expect", &self.rows.to_string()]);
        }
        for v in vars {
            cmd.args(["--var", v]);
        }
        let out = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(
                self.dir.join(format!("{name}.log")),
            )?))
            .status()?;
        let r: Value = serde_json::from_str(&fs::read_to_string(&report).unwrap_or_default())
            .with_context(|| format!("{name}: no report ({out})"))?;
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        let rows = r["rows"].as_u64().unwrap_or(0);
        let (wall, cpu) = if expect {
            (
                f("wall_seconds_from_first_row"),
                f("cpu_seconds_from_first_row"),
            )
        } else {
            (f("wall_seconds"), f("cpu_seconds"))
        };
        Ok(Measure {
            name: name.to_owned(),
            topic: Some(topic.to_owned()),
            rows,
            bytes: 0,
            wall,
            cpu,
            peak_rss_mb: f("peak_rss_mb"),
            note: format!("Flink 1.18.1, {}", r["outcome"].as_str().unwrap_or("?")),
        })
    }
}

fn partitioned(admin_url: &str, topic: &str, n: u32) -> Result<()> {
    let path = topic.trim_start_matches("persistent://");
    let r = http::request(
        "PUT",
        &format!("{admin_url}/admin/v2/persistent/{path}/partitions"),
        Some(&n.to_string()),
        None,
    )?;
    if !r.is_success() {
        bail!("creating {topic}: {} {}", r.status, r.body);
    }
    Ok(())
}

/// Stops the broker at drop (also on an error or a panic) when this run started it.
struct BrokerGuard {
    started: bool,
}

impl BrokerGuard {
    fn ensure() -> Result<Self> {
        if BrokerInfo::load(Profile::Default).is_some_and(|i| i.is_healthy()) {
            return Ok(Self { started: false });
        }
        broker::start(&StartOptions::new(Profile::Default)).context("starting the broker")?;
        Ok(Self { started: true })
    }
}

impl Drop for BrokerGuard {
    fn drop(&mut self) {
        if self.started
            && let Err(e) = broker::stop(Profile::Default)
        {
            eprintln!("stopping the broker this bench started failed: {e:#}");
        }
    }
}

/// `bench/flink-peer/target/flink-peer.jar`, built (Maven) when missing or older than its sources.
fn ensure_flink_jar(root: &Path) -> Result<PathBuf> {
    let peer = root.join("bench/flink-peer");
    let jar = peer.join("target/flink-peer.jar");
    let built = fs::metadata(&jar).and_then(|m| m.modified()).ok();
    let stale = match built {
        None => true,
        Some(t) => {
            newest_mtime(&peer.join("src"))?.is_some_and(|s| s > t)
                || fs::metadata(peer.join("pom.xml"))?.modified()? > t
        }
    };
    if stale {
        eprintln!("building the Flink peer (mvn package)");
        let st = Command::new("mvn")
            .args(["-B", "-q", "-f"])
            .arg(peer.join("pom.xml"))
            .arg("package")
            .status()
            .context("running mvn (Maven is needed for the Flink peer; --no-flink skips it)")?;
        if !st.success() {
            bail!("building the Flink peer failed ({st})");
        }
    }
    Ok(jar)
}

fn newest_mtime(dir: &Path) -> Result<Option<std::time::SystemTime>> {
    let mut newest = None;
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let t = if entry.file_type()?.is_dir() {
            newest_mtime(&entry.path())?
        } else {
            Some(entry.metadata()?.modified()?)
        };
        newest = newest.max(t);
    }
    Ok(newest)
}

fn build_ours(root: &Path, cargo: &impl Fn() -> Command) -> Result<()> {
    build_plugins::run(build_plugins::Args::default())?;
    // The binary exactly as a user builds it (`cargo xtask demo` too): without the package's
    // dev-dependencies, whose features would change the hashes in its function names, and with them
    // which functions `host/link/symbol-order.txt` finds (the memory of every run depends on it). The
    // bare consumer needs the dev-dependencies: a build of its own.
    for what in [["--bin", "pulsar-connect"], ["--example", "bare_consumer"]] {
        let built = cargo()
            .current_dir(root)
            .args(["build", "--release", "-p", "pulsar-connect"])
            .args(what)
            .status()
            .context("running cargo build")?;
        if !built.success() {
            bail!(
                "building pulsar-connect {} failed ({built})",
                what.join(" ")
            );
        }
    }
    Ok(())
}

pub fn run(args: BenchArgs, cargo: impl Fn() -> Command) -> Result<std::process::ExitCode> {
    let root = paths::workspace_root();
    let rows = args
        .rows
        .unwrap_or(if args.smoke { 2_000 } else { 1_000_000 });
    let latency_seconds = args
        .latency_seconds
        .unwrap_or(if args.smoke { 3.0 } else { 30.0 });
    let load_before = load_average();
    build_ours(&root, &cargo)?;
    eprintln!("{}", symbol_order::report(&root));
    // After the build: steal is what the hypervisor took from the measured runs.
    let ticks_before = CpuTicks::now();
    let jar = root.join("bench/flink-peer/target/flink-peer.jar");
    let with_flink = !args.no_flink && (!args.smoke || jar.exists());
    if with_flink {
        ensure_flink_jar(&root)?;
    }
    let broker = BrokerGuard::ensure()?;
    let info = BrokerInfo::load(Profile::Default)
        .context("no broker (target/pulsar/default/broker.json)")?;
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let dir = root.join("target/bench").join(run_id.to_string());
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    eprintln!("bench {run_id}: logs and job files in {}", dir.display());
    let ctx = Ctx {
        bin: paths::target_dir().join("release/pulsar-connect"),
        root: root.clone(),
        service_url: info.service_url.clone(),
        admin_url: info.admin_url.clone(),
        dir,
        rows,
    };
    if let Some(rounds) = args.parallel_rounds {
        let all = parallel::run(&ctx, run_id, rounds.max(1))?;
        drop(broker);
        println!(
            "Command: `cargo xtask bench --parallel-rounds {rounds} --rows {rows}`; 1-minute load average {load_before} before, {} after; CPU steal {}.\n\n{}",
            load_average(),
            CpuTicks::now().steal_since(ticks_before),
            reads::render(&all)
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if let Some(rounds) = args.takeover_rounds {
        let all = takeover::run(&ctx, run_id, rounds.max(1), &takeover::TIMEOUTS)?;
        drop(broker);
        println!(
            "Command: `cargo xtask bench --takeover-rounds {rounds}`; 1-minute load average {load_before} before, {} after; CPU steal {}.\n\n{}",
            load_average(),
            CpuTicks::now().steal_since(ticks_before),
            takeover::render(&all)
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if let Some(rounds) = args.read_rounds {
        let all = reads::run(&ctx, run_id, rounds.max(1))?;
        drop(broker);
        println!(
            "Command: `cargo xtask bench --read-rounds {rounds} --rows {rows}`; 1-minute load average {load_before} before, {} after; CPU steal {}.\n\n{}",
            load_average(),
            CpuTicks::now().steal_since(ticks_before),
            reads::render(&all)
        );
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let rounds = args.rounds.unwrap_or(if args.smoke { 1 } else { 3 }).max(1);
    let latency_rounds = args
        .latency_rounds
        .unwrap_or(if args.smoke { 1 } else { 3 })
        .max(1);
    let mut all = Vec::new();
    let mut decode = Vec::new();
    let mut instructions = String::new();
    if !args.latency_only {
        all = throughput::run(&ctx, run_id, with_flink, rounds)?;
        match decode::timed(
            &root,
            &cargo,
            rows.min(200_000),
            if args.smoke { 1 } else { 5 },
        ) {
            Ok(ms) => {
                for m in ms {
                    report_step(&m);
                    decode.push(m);
                }
            }
            Err(e) => eprintln!("native/wasm decode bench skipped: {e:#}"),
        }
        if !args.smoke {
            match decode::instructions(&root, &cargo, &ctx.dir) {
                Ok(counts) => instructions = counts,
                Err(e) => eprintln!("decode instruction counts skipped: {e:#}"),
            }
        }
    }
    let lat = if latency_seconds > 0.0 {
        latency_runs(
            &ctx,
            run_id,
            with_flink,
            args.latency_rate,
            latency_seconds,
            args.smoke,
            latency_rounds,
        )?
    } else {
        Vec::new()
    };
    let takeovers = if args.latency_only {
        Vec::new()
    } else if args.smoke {
        takeover::run(&ctx, run_id, 1, &takeover::TIMEOUTS[..1])?
    } else {
        takeover::run(&ctx, run_id, rounds, &takeover::TIMEOUTS)?
    };
    // Scaling in every full run (issue 52 §4): 1, 2 and 4 subtasks, one and two Failover processes.
    let scaling = if args.latency_only {
        Vec::new()
    } else {
        parallel::run(&ctx, run_id, if args.smoke { 1 } else { rounds })?
    };
    drop(broker);
    let load_after = load_average();
    let steal = CpuTicks::now().steal_since(ticks_before);
    eprintln!("CPU steal during the runs: {steal}");
    let table = format!(
        "{}{}{}{}{}",
        throughput::render(&all, &decode),
        instructions,
        latency::render(&lat),
        if takeovers.is_empty() {
            String::new()
        } else {
            format!("\n{}", takeover::render(&takeovers))
        },
        if scaling.is_empty() {
            String::new()
        } else {
            parallel::render(&scaling)
        }
    );
    println!("{table}");
    if !args.smoke && !args.latency_only {
        let mut command = format!("cargo xtask bench --rows {rows} --rounds {rounds}");
        if args.no_flink {
            command.push_str(" --no-flink");
        }
        if args.latency_seconds.is_some() {
            let _ = write!(command, " --latency-seconds {latency_seconds}");
        }
        if args.latency_rate != 10_000 {
            let _ = write!(command, " --latency-rate {}", args.latency_rate);
        }
        if args.latency_rounds.is_some() {
            let _ = write!(command, " --latency-rounds {latency_rounds}");
        }
        write_benchmarks(&root, &table, &command, (&load_before, &load_after), &steal)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn report_step(m: &Measure) {
    eprintln!(
        "  {:<60} {:>10.0} msg/s  {:>6.2} CPU-s/M  {:>6.0} MB RSS",
        m.name,
        m.rate(),
        m.cpu_per_m(),
        m.peak_rss_mb
    );
}

/// The fixed-rate latency runs, ours and (when it runs) the Flink peer's, with the same settings.
fn latency_runs(
    ctx: &Ctx,
    run_id: u64,
    with_flink: bool,
    rate: u32,
    seconds: f64,
    smoke: bool,
    rounds: usize,
) -> Result<Vec<Vec<latency::Latency>>> {
    let settings = latency::Settings {
        rate,
        // Long enough for the JVM's JIT and the backlog of Flink's start-up to be behind us.
        warmup: if smoke { 1.0 } else { 15.0 },
        seconds,
        checkpoint_s: 10,
    };
    eprintln!(
        "latency at {rate} msg/s: {} s warm-up, {seconds} s measured",
        settings.warmup
    );
    let mut engines = vec![
        latency::Engine::Direct,
        latency::Engine::Ours {
            allow_latency: None,
        },
        // The same job with a fixed 20 ms mini-batch linger (the default before the adaptive hand-off).
        latency::Engine::Ours {
            allow_latency: Some("20ms"),
        },
    ];
    if with_flink {
        engines.push(latency::Engine::Flink);
    }
    let mut out = Vec::new();
    for round in 0..rounds {
        if rounds > 1 {
            eprintln!("latency round {}/{rounds}", round + 1);
        }
        let mut runs = Vec::new();
        for engine in &engines {
            // Each round on its own topics.
            let l = ctx.latency(*engine, settings, run_id * 100 + round as u64)?;
            eprintln!(
                "  {:<60} p50 {:>7.1} ms  p99 {:>7.1} ms  ({} msgs, in {:.0} msg/s, out {:.0} msg/s)",
                l.name, l.p50_ms, l.p99_ms, l.count, l.rate_in, l.rate_out
            );
            runs.push(l);
        }
        out.push(runs);
    }
    Ok(out)
}

fn write_benchmarks(
    root: &Path,
    table: &str,
    command: &str,
    (load_before, load_after): (&str, &str),
    steal: &str,
) -> Result<()> {
    let path = root.join("BENCHMARKS.md");
    let text = fs::read_to_string(&path).unwrap_or_default();
    let (begin, end) = ("<!-- bench:begin -->", "<!-- bench:end -->");
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
                    / 1024
                    / 1024
            })
        })
        .unwrap_or(0);
    let date = Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let section = format!(
        "{begin}\n## `cargo xtask bench` — {date}\n\nCommand: `{command}`. Machine: {cores} cores, {mem} GiB, 1-minute load average {load_before} before the run and {load_after} after it (other work on the machine competes with every number below); CPU steal {steal} of the machine's CPU time during the runs (the hypervisor running other guests on our cores: on a shared host every figure below moves with it, ratios within one run less so). Apache Pulsar 4.0.7 standalone (local), pulsar-connect {} (release), Flink 1.18.1 + flink-connector-pulsar 4.1.0-1.18 (`-Xmx512m`, parallelism 1). Seed order rows (4 columns, ~90-byte JSON). Reading runs count from the first row to the last; producing runs are whole processes (start-up included). CPU-s / 1M = process CPU seconds per million messages (lower is better; its inverse is messages per core). MB/s = message payload (value) bytes per second, from a bare read of the same topic.\n\n{table}{end}",
        env!("CARGO_PKG_VERSION")
    );
    let new = match (text.find(begin), text.find(end)) {
        (Some(a), Some(b)) if b > a => {
            format!("{}{}{}", &text[..a], section, &text[b + end.len()..])
        }
        _ => format!("{text}\n{section}\n"),
    };
    fs::write(&path, new).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{metric, unlabelled_metric};

    #[test]
    fn series_are_read_whatever_other_labels_they_carry() {
        let body = "pulsar_connect_rows_in_total{job=\"j\",table=\"other\"} 3\n\
                    pulsar_connect_rows_in_total{job=\"j\",table=\"src\",groupId=\"g\"} 7\n\
                    pulsar_connect_checkpoints_total_x 9\n\
                    pulsar_connect_checkpoints_total{job=\"j\"} 2\n";
        assert_eq!(metric(body, "pulsar_connect_rows_in_total", "src"), 7.0);
        assert_eq!(
            unlabelled_metric(body, "pulsar_connect_checkpoints_total"),
            2.0
        );
        assert_eq!(metric(body, "pulsar_connect_rows_out_total", "src"), 0.0);
    }
}
