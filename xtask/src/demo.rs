//! `cargo xtask demo`: the vendor seed job end to end against a real broker.
//!
//! 1. builds the plugins, then the `pulsar-connect` binary, while
//! 2. it uses `PULSAR_SERVICE_URL` / `PULSAR_ADMIN_URL` (+ `PULSAR_TOKEN`) when given, else starts the local
//!    broker with token authentication (the seed authenticates with a token);
//! 3. runs `examples/vendor-seed.sql` (pulsar → print, `latest`) with only the URLs and the token filled
//!    in, waits until it reads, runs `examples/vendor-seed-produce.sql` (the seed's sink table, a few
//!    `INSERT ... VALUES` rows), and shows what the first job printed;
//! 4. stops the job with SIGTERM (final checkpoint) and checks it exited cleanly.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::build_plugins;
use xtask::broker::{self, BrokerInfo, Profile, StartOptions, http};
use xtask::paths;

const SEED_TOPIC: &str = "persistent://public/default/topic82547611";
const ROWS: usize = 10;

struct Target {
    service_url: String,
    admin_url: String,
    token: Option<String>,
    started: bool,
}

fn target() -> Result<Target> {
    if let Ok(service_url) = std::env::var("PULSAR_SERVICE_URL") {
        return Ok(Target {
            service_url,
            admin_url: std::env::var("PULSAR_ADMIN_URL")
                .unwrap_or_else(|_| "http://127.0.0.1:8080".into()),
            token: std::env::var("PULSAR_TOKEN").ok(),
            started: false,
        });
    }
    let mut started = false;
    let info = match BrokerInfo::load(Profile::Token).filter(|i| i.is_healthy()) {
        Some(info) => info,
        None => {
            started = true;
            broker::start(&StartOptions::new(Profile::Token))?
        }
    };
    Ok(Target {
        token: info.admin_token()?,
        service_url: info.service_url,
        admin_url: info.admin_url,
        started,
    })
}

/// A seed file with only the broker's URLs and the token filled in (no token: the auth options go).
fn localize(text: &str, t: &Target) -> String {
    let text = text
        .replace("pulsar://127.0.0.1:6650", &t.service_url)
        .replace("http://127.0.0.1:8080", &t.admin_url);
    match &t.token {
        Some(token) => text.replace("{topic token}", token),
        None => text
            .lines()
            .filter(|l| !l.contains("'auth-params'") && !l.contains("'auth-plugin-classname'"))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn subscribed(t: &Target) -> bool {
    let path = SEED_TOPIC.trim_start_matches("persistent://");
    let url = format!("{}/admin/v2/persistent/{path}/stats", t.admin_url);
    match http::get(&url, t.token.as_deref()) {
        Ok(r) if r.is_success() => serde_json::from_str::<serde_json::Value>(&r.body)
            .ok()
            .and_then(|v| {
                v["subscriptions"].as_object().map(|subs| {
                    subs.iter().any(|(name, s)| {
                        name.starts_with("pulsar-connect-")
                            && s["consumers"].as_array().is_some_and(|c| !c.is_empty())
                    })
                })
            })
            .unwrap_or(false),
        _ => false,
    }
}

fn printed(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("+I["))
        .map(str::to_owned)
        .collect()
}

fn stop(child: &mut Child) -> Result<std::process::ExitStatus> {
    // SAFETY: sending SIGTERM to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            child.kill().ok();
            bail!("the job did not stop within 60 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One line per stage, with the time since the demo started, so a first run (which builds everything)
/// never looks stuck.
struct Stages {
    started: Instant,
    total: usize,
    n: usize,
}

impl Stages {
    fn next(&mut self, what: &str) {
        self.n += 1;
        let secs = self.started.elapsed().as_secs();
        println!(
            "[demo {:>2}:{:02}] {}/{} {what}",
            secs / 60,
            secs % 60,
            self.n,
            self.total
        );
    }
}

pub fn run(cargo: impl Fn() -> Command) -> Result<ExitCode> {
    let root = paths::workspace_root();
    let mut stages = Stages {
        started: Instant::now(),
        total: 4,
        n: 0,
    };
    stages.next("the format and router plugins (wasm components)");
    build_plugins::run(build_plugins::Args::default())?;
    stages.next(if std::env::var_os("PULSAR_SERVICE_URL").is_some() {
        "the pulsar-connect binary (the first build compiles ~600 crates, cargo prints each one)"
    } else {
        "the pulsar-connect binary (the first build compiles ~600 crates, cargo prints each one) and, alongside it, a local Apache Pulsar with token authentication (the first start downloads it from Maven Central, ~280 MB)"
    });
    // The broker's download and start-up overlap the build (they wait on the network and the JVM
    // while the compiler has the cores).
    let (built, t) = std::thread::scope(|s| {
        let broker = s.spawn(target);
        let built = cargo()
            .current_dir(&root)
            .args([
                "build",
                "--release",
                "-p",
                "pulsar-connect",
                "--bin",
                "pulsar-connect",
            ])
            .status()
            .context("building pulsar-connect");
        let t = broker
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("starting the broker panicked")));
        (built, t)
    });
    if let Err(e) = built.and_then(|status| {
        anyhow::ensure!(
            status.success(),
            "building pulsar-connect failed ({status})"
        );
        Ok(())
    }) {
        // The build's error is the one to report; the broker it started is stopped on a best effort.
        if let Ok(t) = &t
            && t.started
            && let Err(stop) = broker::stop(Profile::Token)
        {
            eprintln!("stopping the broker after the failed build: {stop:#}");
        }
        return Err(e);
    }
    let t = t?;
    let bin = paths::target_dir().join("release/pulsar-connect");
    let dir = root.join("target/demo");
    fs::create_dir_all(&dir)?;
    let consume = dir.join("vendor-seed.sql");
    let produce = dir.join("vendor-seed-produce.sql");
    fs::write(
        &consume,
        localize(
            &fs::read_to_string(root.join("examples/vendor-seed.sql"))?,
            &t,
        ),
    )?;
    fs::write(
        &produce,
        localize(
            &fs::read_to_string(root.join("examples/vendor-seed-produce.sql"))?,
            &t,
        ),
    )?;
    let out = dir.join("print.out");
    let log = dir.join("job.log");
    stages.next(&format!(
        "running {} (pulsar → print, scan.startup.mode = latest)",
        consume.display()
    ));
    let mut job = Command::new(&bin)
        .current_dir(&root)
        .arg("--plugin-dir")
        .arg(root.join("plugins"))
        .arg("run")
        .arg(&consume)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .arg("--fresh")
        .stdout(Stdio::from(fs::File::create(&out)?))
        .stderr(Stdio::from(fs::File::create(&log)?))
        .spawn()
        .context("starting pulsar-connect")?;
    let result = (|| -> Result<Vec<String>> {
        let stages = &mut stages;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !subscribed(&t) {
            if let Some(status) = job.try_wait()? {
                bail!(
                    "the job exited ({status}) before reading; its log:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the job did not subscribe within 60 s; its log:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        stages.next(&format!(
            "producing {ROWS} rows with {} (the seed's sink table)",
            produce.display()
        ));
        let produced = Command::new(&bin)
            .current_dir(&root)
            .arg("--plugin-dir")
            .arg(root.join("plugins"))
            .arg("run")
            .arg(&produce)
            .arg("--state-dir")
            .arg(dir.join("state-produce"))
            .arg("--fresh")
            .output()
            .context("running the producing job")?;
        if !produced.status.success() {
            bail!(
                "the producing job failed ({}):\n{}",
                produced.status,
                String::from_utf8_lossy(&produced.stderr)
            );
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let rows = printed(&out);
            if rows.len() >= ROWS {
                return Ok(rows);
            }
            if Instant::now() > deadline {
                bail!(
                    "only {} of {ROWS} rows printed after 60 s; job log:\n{}",
                    rows.len(),
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })();
    let status = stop(&mut job);
    if t.started {
        broker::stop(Profile::Token)?;
    }
    let rows = result?;
    let status = status?;
    println!("the job printed:");
    for r in &rows {
        println!("  {r}");
    }
    if !status.success() {
        bail!(
            "the job did not exit cleanly after SIGTERM ({status}); its log: {}",
            log.display()
        );
    }
    println!(
        "OK: {} rows went Pulsar → pulsar-connect → print; the job stopped cleanly (log: {})",
        rows.len(),
        log.display()
    );
    Ok(ExitCode::SUCCESS)
}
