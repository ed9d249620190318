//! `cargo xtask bench [--smoke] [--rows N] [--no-flink]`: pulsar-connect side by side with the Flink peer,
//! the bare-consumer ceiling and native decode, in one run on the same broker and the same data. Prints a
//! table and (unless `--smoke`) writes it into BENCHMARKS.md between the `bench:begin` / `bench:end` markers.

use std::fmt::Write as _;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use crate::build_plugins;
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
}

/// One measured row of the table.
#[derive(Debug, Clone, Default)]
struct Measure {
    name: String,
    rows: u64,
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

fn metric(body: &str, name: &str, table: &str) -> f64 {
    let prefix = format!("{name}{{table=\"{table}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

struct Ctx {
    root: PathBuf,
    bin: PathBuf,
    service_url: String,
    admin_url: String,
    dir: PathBuf,
    rows: u64,
}

impl Ctx {
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
        let mut child = Command::new(&self.bin)
            .arg("--plugin-dir")
            .arg(self.root.join("plugins"))
            .args(["run"])
            .arg(&job)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .arg("--fresh")
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
            rows: self.rows,
            bytes: 0,
            wall: start.elapsed().as_secs_f64(),
            cpu,
            peak_rss_mb: rss,
            note: "whole process, incl. start-up".into(),
        })
    }

    /// pulsar → blackhole until every row was read: numbers from the first row on.
    fn consume(&self, name: &str, topic: &str, format: &str) -> Result<Measure> {
        let port = free_port()?;
        let sql = format!(
            "SET 'execution.checkpointing.interval' = '10s';
{}
CREATE TABLE sink ({}) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT * FROM src;",
            self.table("src", topic, format, ", 'scan.startup.mode' = 'earliest'"),
            if format == "raw" {
                "payload STRING"
            } else {
                "order_id BIGINT, order_product_id BIGINT, order_customer_id BIGINT, order_status STRING"
            }
        );
        let job = self.job_file(name, &sql)?;
        let log = self.dir.join(format!("{name}.log"));
        let mut child = Command::new(&self.bin)
            .arg("--plugin-dir")
            .arg(self.root.join("plugins"))
            .arg("run")
            .arg(&job)
            .arg("--state-dir")
            .arg(self.dir.join("state"))
            .arg("--fresh")
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(fs::File::create(&log)?))
            .spawn()?;
        let pid = child.id();
        let url = format!("http://127.0.0.1:{port}/metrics");
        let deadline = Instant::now() + Duration::from_secs(900);
        let mut first: Option<(Instant, f64, f64)> = None;
        let result = loop {
            if let Some(s) = child.try_wait()? {
                bail!("{name} exited early ({s}); log: {}", log.display());
            }
            if Instant::now() > deadline {
                break Err(anyhow::anyhow!("{name}: not done after 900 s"));
            }
            let body = http::get(&url, None).map(|r| r.body).unwrap_or_default();
            let rows = metric(&body, "pulsar_connect_rows_in_total", "src");
            let bytes = metric(&body, "pulsar_connect_bytes_in_total", "src");
            if rows > 0.0 && first.is_none() {
                first = Some((Instant::now(), proc_cpu(pid), rows));
            }
            if rows >= self.rows as f64 {
                let (t0, c0, r0) = first.unwrap_or((Instant::now(), 0.0, 0.0));
                let _ = bytes;
                break Ok(Measure {
                    name: name.to_owned(),
                    rows: (rows - r0) as u64,
                    bytes: 0,
                    wall: t0.elapsed().as_secs_f64(),
                    cpu: proc_cpu(pid) - c0,
                    peak_rss_mb: proc_hwm_mb(pid),
                    note: String::new(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // SAFETY: SIGTERM to our own child.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
        let _ = child.wait();
        result
    }

    fn ceiling(&self, name: &str, topic: &str) -> Result<Measure> {
        let out = Command::new(self.root.join("target/release/examples/bare_consumer"))
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

pub fn run(args: BenchArgs, cargo: impl Fn() -> Command) -> Result<std::process::ExitCode> {
    let root = paths::workspace_root();
    let rows = args
        .rows
        .unwrap_or(if args.smoke { 2_000 } else { 1_000_000 });
    build_plugins::run(build_plugins::Args::default())?;
    let built = cargo()
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "-p",
            "pulsar-connect",
            "--bin",
            "pulsar-connect",
            "--example",
            "bare_consumer",
        ])
        .status()?;
    if !built.success() {
        bail!("building failed ({built})");
    }
    let jar = root.join("bench/flink-peer/target/flink-peer.jar");
    let with_flink = !args.no_flink && (!args.smoke || jar.exists());
    if with_flink && !jar.exists() {
        let st = Command::new("mvn")
            .args(["-B", "-q", "-f"])
            .arg(root.join("bench/flink-peer/pom.xml"))
            .arg("package")
            .status()?;
        if !st.success() {
            bail!("building the Flink peer failed ({st})");
        }
    }
    let started = match BrokerInfo::load(Profile::Default).filter(|i| i.is_healthy()) {
        Some(_) => false,
        None => {
            broker::start(&StartOptions::new(Profile::Default))?;
            true
        }
    };
    let info = BrokerInfo::load(Profile::Default).context("no broker")?;
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let dir = root.join("target/bench").join(run_id.to_string());
    fs::create_dir_all(&dir)?;
    let ctx = Ctx {
        bin: root.join("target/release/pulsar-connect"),
        root: root.clone(),
        service_url: info.service_url.clone(),
        admin_url: info.admin_url.clone(),
        dir,
        rows,
    };
    let t = |s: &str| format!("persistent://public/default/bench-{s}-{run_id}");
    let (json1, json4, avro1, eo1) = (t("json-1p"), t("json-4p"), t("avro-1p"), t("eo-1p"));
    partitioned(&ctx.admin_url, &json4, 4)?;
    let mut out: Vec<Measure> = Vec::new();
    let step = |m: Result<Measure>, out: &mut Vec<Measure>| -> Result<()> {
        let m = m?;
        eprintln!(
            "  {:<40} {:>10.0} msg/s  {:>6.2} CPU-s/M  {:>6.0} MB RSS",
            m.name,
            m.rate(),
            m.cpu_per_m(),
            m.peak_rss_mb
        );
        out.push(m);
        Ok(())
    };
    eprintln!("producing {rows} rows per topic (these runs are the sink benchmarks)");
    step(
        ctx.produce(
            "ours: datagen → json → key-hash → pulsar (1p, at-least-once)",
            &json1,
            "json",
            ", 'sink.message-router' = 'key-hash'",
            "2s",
        ),
        &mut out,
    )?;
    step(
        ctx.produce(
            "ours: datagen → json → key-hash → pulsar (4p, at-least-once)",
            &json4,
            "json",
            ", 'sink.message-router' = 'key-hash'",
            "2s",
        ),
        &mut out,
    )?;
    step(
        ctx.produce(
            "ours: datagen → json → pulsar (1p, exactly-once)",
            &eo1,
            "json",
            ", 'sink.semantic' = 'exactly-once'",
            "2s",
        ),
        &mut out,
    )?;
    step(
        ctx.produce(
            "ours: datagen → avro → pulsar (1p)",
            &avro1,
            "avro",
            "",
            "2s",
        ),
        &mut out,
    )?;
    eprintln!("reading");
    step(
        ctx.consume("ours: pulsar(json, 1p) → blackhole", &json1, "json"),
        &mut out,
    )?;
    step(
        ctx.consume("ours: pulsar(json, 4p) → blackhole", &json4, "json"),
        &mut out,
    )?;
    step(
        ctx.consume("ours: pulsar(avro, 1p) → blackhole", &avro1, "avro"),
        &mut out,
    )?;
    step(
        ctx.consume("ours: pulsar(raw, 1p) → blackhole", &json1, "raw"),
        &mut out,
    )?;
    step(ctx.ceiling("ceiling: bare consumer (1p)", &json1), &mut out)?;
    step(ctx.ceiling("ceiling: bare consumer (4p)", &json4), &mut out)?;
    if with_flink {
        eprintln!("Flink peer");
        step(
            ctx.flink(
                "flink: pulsar(json, 1p) → blackhole",
                "pulsar-json-blackhole.sql",
                &json1,
                true,
                &[],
            ),
            &mut out,
        )?;
        step(
            ctx.flink(
                "flink: pulsar(json, 4p) → blackhole",
                "pulsar-json-blackhole.sql",
                &json4,
                true,
                &[],
            ),
            &mut out,
        )?;
        step(
            ctx.flink(
                "flink: pulsar(raw, 1p) → blackhole",
                "pulsar-raw-blackhole.sql",
                &json1,
                true,
                &[],
            ),
            &mut out,
        )?;
        let rows_var = format!("ROWS={rows}");
        step(
            ctx.flink(
                "flink: datagen → json → pulsar (1p)",
                "datagen-json-pulsar.sql",
                &t("flink-sink"),
                false,
                &[&rows_var],
            ),
            &mut out,
        )?;
    }
    match decode_bench(&root, &cargo, rows.min(200_000)) {
        Ok(ms) => {
            for m in ms {
                step(Ok(m), &mut out)?;
            }
        }
        Err(e) => eprintln!("native/wasm decode bench skipped: {e:#}"),
    }
    if started {
        broker::stop(Profile::Default)?;
    }
    let table = render(&out);
    println!("{table}");
    if !args.smoke {
        write_benchmarks(&root, &table, rows)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Native vs wasm decode of the same seed rows (the `format_decode` bench of the tests crate).
fn decode_bench(root: &Path, cargo: &impl Fn() -> Command, rows: u64) -> Result<Vec<Measure>> {
    let out = cargo()
        .current_dir(root)
        .args([
            "bench",
            "-p",
            "pulsar-connect-tests",
            "--bench",
            "format_decode",
            "--",
            "--rows",
        ])
        .arg(rows.to_string())
        .env("PULSAR_CONNECT_PLUGIN_DIR", root.join("plugins"))
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut ms = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        ms.push(Measure {
            name: v["name"].as_str().unwrap_or("?").to_owned(),
            rows: v["rows"].as_u64().unwrap_or(0),
            bytes: v["bytes"].as_u64().unwrap_or(0),
            wall: v["seconds"].as_f64().unwrap_or(0.0),
            cpu: v["seconds"].as_f64().unwrap_or(0.0),
            peak_rss_mb: 0.0,
            note: v["note"].as_str().unwrap_or("").to_owned(),
        });
    }
    Ok(ms)
}

fn render(ms: &[Measure]) -> String {
    let find = |prefix: &str| ms.iter().find(|m| m.name.starts_with(prefix));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| run | msgs | msgs/s | MB/s | CPU-s / 1M msgs | peak RSS MB | note |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for m in ms {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {} | {:.2} | {} | {} |",
            m.name,
            m.rows,
            m.rate(),
            if m.bytes > 0 {
                format!("{:.1}", m.mb_s())
            } else {
                "–".into()
            },
            m.cpu_per_m(),
            if m.peak_rss_mb > 0.0 {
                format!("{:.0}", m.peak_rss_mb)
            } else {
                "–".into()
            },
            m.note
        );
    }
    let _ = writeln!(s);
    let ratio = |a: Option<&Measure>, b: Option<&Measure>, what: &str, s: &mut String| {
        if let (Some(a), Some(b)) = (a, b) {
            let per_core = if a.cpu_per_m() > 0.0 {
                b.cpu_per_m() / a.cpu_per_m()
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "- {what}: {:.2}× msgs per CPU-second, {:.2}× msgs/s, peak RSS {}",
                per_core,
                if b.rate() > 0.0 {
                    a.rate() / b.rate()
                } else {
                    0.0
                },
                if a.peak_rss_mb > 0.0 && b.peak_rss_mb > 0.0 {
                    format!("{:.2}×", a.peak_rss_mb / b.peak_rss_mb)
                } else {
                    "not measured".to_owned()
                }
            );
        }
    };
    ratio(
        find("ours: pulsar(json, 1p)"),
        find("flink: pulsar(json, 1p)"),
        "json 1p, ours / Flink",
        &mut s,
    );
    ratio(
        find("ours: pulsar(json, 4p)"),
        find("flink: pulsar(json, 4p)"),
        "json 4p, ours / Flink",
        &mut s,
    );
    ratio(
        find("ours: pulsar(raw, 1p)"),
        find("flink: pulsar(raw, 1p)"),
        "raw 1p, ours / Flink",
        &mut s,
    );
    ratio(
        find("ours: datagen → json → key-hash → pulsar (1p"),
        find("flink: datagen"),
        "sink 1p, ours / Flink",
        &mut s,
    );
    ratio(
        find("ours: pulsar(json, 1p)"),
        find("ceiling: bare consumer (1p)"),
        "json 1p, ours / bare-consumer ceiling",
        &mut s,
    );
    ratio(
        find("ours: pulsar(json, 4p)"),
        find("ceiling: bare consumer (4p)"),
        "json 4p, ours / bare-consumer ceiling",
        &mut s,
    );
    ratio(
        find("ours: datagen → json → pulsar (1p, exactly-once)"),
        find("ours: datagen → json → key-hash → pulsar (1p"),
        "exactly-once / at-least-once",
        &mut s,
    );
    ratio(
        find("decode json (wasm)"),
        find("decode json (native)"),
        "json decode, wasm / native",
        &mut s,
    );
    s
}

fn write_benchmarks(root: &Path, table: &str, rows: u64) -> Result<()> {
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
        "{begin}\n## `cargo xtask bench` — {date}\n\nCommand: `cargo xtask bench --rows {rows}`. Machine: {cores} cores, {mem} GiB. Apache Pulsar 4.0.7 standalone (local), pulsar-connect {} (release), Flink 1.18.1 + flink-connector-pulsar 4.1.0-1.18 (`-Xmx512m`, parallelism 1). Seed order rows (4 columns, ~90-byte JSON). Reading runs count from the first row to the last; producing runs are whole processes (start-up included). CPU-s / 1M = process CPU seconds per million messages (lower is better; its inverse is messages per core).\n\n{table}{end}",
        env!("CARGO_PKG_VERSION")
    );
    let new = match (text.find(begin), text.find(end)) {
        (Some(a), Some(b)) if b > a => {
            format!("{}{}{}", &text[..a], section, &text[b + end.len()..])
        }
        _ => format!("{text}\n{section}\n"),
    };
    fs::write(&path, new)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
