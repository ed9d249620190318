//! Hot reload of a plugin in a running job (issue 33 §4, ADR 0024), through the real binary and
//! `plugins install` as a user runs them: a job reads a topic with the `hostile` test format (every row
//! carries the format's `tag` option, whose default each version's manifest sets) into `print`, while
//! messages keep arriving. New versions are installed into its plugin directory one after another:
//! one whose factory refuses, one that panics in every batch, one that works. The first two are refused
//! and rolled back with the reason logged, the third takes over at a completed checkpoint; every message
//! is printed exactly once, the rows before the switch with the old tag, after it with the new one; the
//! metrics and the status page show the version in use.
//! Needs the broker and the release binary (`cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::guests::hostile_build;
use pulsar_connect_tests::{TestBroker, binary, unique_topic};

const WAIT: Duration = Duration::from_secs(60);

/// `pulsar-connect plugins install` of build `n` ([`hostile_build`]); its sha256.
fn install(plugin_dir: &Path, work: &Path, n: u32, refuse: bool, panic: bool) -> Result<String> {
    let build = hostile_build(n, refuse, panic);
    let wasm_path = work.join(format!("hostile-{n}.wasm"));
    let manifest_path = work.join(format!("hostile-{n}.toml"));
    std::fs::write(&wasm_path, &build.wasm)?;
    std::fs::write(&manifest_path, &build.manifest)?;
    let out = Command::new(binary())
        .args(["plugins", "install"])
        .arg(&wasm_path)
        .arg("--manifest")
        .arg(&manifest_path)
        .arg("--plugin-dir")
        .arg(plugin_dir)
        .output()?;
    ensure!(
        out.status.success(),
        "plugins install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(build.sha256)
}

struct Job {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Job {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The printed rows: (payload, tag).
    fn rows(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(&self.stdout)
            .unwrap_or_default()
            .lines()
            .filter_map(parse_row)
            .collect()
    }

    fn wait_log(&mut self, what: &str) -> Result<String> {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Some(exit) = self.child.try_wait()? {
                bail!(
                    "the job ended ({exit}) before logging `{what}`:\n{}",
                    self.log()
                );
            }
            if let Some(line) = self.log().lines().find(|l| l.contains(what)) {
                return Ok(line.to_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("no `{what}` in the job's log:\n{}", self.log())
    }
}

/// `+I[[49, 50], v1]` → ("12", "v1").
fn parse_row(line: &str) -> Option<(String, String)> {
    let inner = line.strip_prefix("+I[[")?.strip_suffix(']')?;
    let (bytes, tag) = inner.split_once("], ")?;
    let payload: Vec<u8> = bytes
        .split(", ")
        .map(|b| b.parse::<i8>().map(|b| b as u8))
        .collect::<Result<_, _>>()
        .ok()?;
    Some((String::from_utf8(payload).ok()?, tag.to_owned()))
}

fn get(url: &str) -> Result<String> {
    let r = xtask::broker::http::request("GET", url, None, None)?;
    ensure!(r.status == 200, "GET {url}: {} {}", r.status, r.body);
    Ok(r.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_versions_are_refused_rolled_back_or_taken_up_at_a_checkpoint_losing_nothing()
-> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("hot-reload");
    let tmp = tempfile::tempdir()?;
    let plugins = tmp.path().join("plugins");
    let sha1 = install(&plugins, tmp.path(), 1, false, false)?;

    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let job_file = tmp.path().join("job.sql");
    std::fs::write(
        &job_file,
        format!(
            "SET 'execution.checkpointing.interval' = '300ms';
CREATE TABLE src (payload BYTES, tag STRING, calls BIGINT, decoders BIGINT) WITH (
  'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'hostile',
  'scan.startup.mode' = 'earliest');
CREATE TABLE out_rows (payload BYTES, tag STRING) WITH ('connector' = 'print');
INSERT INTO out_rows SELECT payload, tag FROM src;",
            broker.service_url
        ),
    )?;
    let stdout = tmp.path().join("stdout");
    let stderr = tmp.path().join("stderr");
    let mut job = Job {
        child: Command::new(binary())
            .arg("--plugin-dir")
            .arg(&plugins)
            .args(["--plugin-reload", "200ms", "--compile-cache", "off", "run"])
            .arg(&job_file)
            .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::from(std::fs::File::create(&stdout)?))
            .stderr(Stdio::from(std::fs::File::create(&stderr)?))
            .spawn()
            .context("starting the job")?,
        stdout,
        stderr,
    };

    // Messages keep arriving, 50 a second, until told to stop.
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let producing = {
        let client = broker.client().await?;
        let producer = client.producer(&topic).create().await?;
        let (sent, stop) = (sent.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let n = sent.load(Ordering::Relaxed);
                producer
                    .send(OutgoingMessage::with_payload(n.to_string().into_bytes()).into())
                    .await?;
                sent.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            producer.close().await?;
            anyhow::Ok(())
        })
    };
    let wait_rows = |job: &Job, n: usize| {
        let deadline = Instant::now() + WAIT;
        while job.rows().len() < n {
            ensure!(Instant::now() < deadline, "fewer than {n} rows printed");
            std::thread::sleep(Duration::from_millis(100));
        }
        anyhow::Ok(())
    };
    wait_rows(&job, 20)?;

    // A version whose factory refuses the table's configuration: refused, the old one stays.
    install(&plugins, tmp.path(), 2, true, false)?;
    let refused = job.wait_log("refused, its create-decoder failed")?;
    ensure!(
        refused.contains("2.0.0") && refused.contains("asked to refuse"),
        "{refused}"
    );
    // A version that panics in every batch: rolled back, the old one redoes the batch.
    let before = job.rows().len();
    install(&plugins, tmp.path(), 3, false, true)?;
    let rolled_back = job.wait_log("rolled back to 1.0.0")?;
    ensure!(rolled_back.contains("3.0.0"), "{rolled_back}");
    wait_rows(&job, before + 20)?;
    // A good version takes over at a completed checkpoint and passes its first batches.
    let sha4 = install(&plugins, tmp.path(), 4, false, false)?;
    job.wait_log("switched to plugin version 4.0.0")?;
    let in_use = job.wait_log("now in use")?;
    ensure!(in_use.contains("4.0.0"), "{in_use}");
    let after = job.rows().len();
    wait_rows(&job, after + 20)?;

    stop.store(true, Ordering::Relaxed);
    producing.await??;
    let total = sent.load(Ordering::Relaxed) as usize;
    wait_rows(&job, total)?;
    std::thread::sleep(Duration::from_secs(1));
    let rows = job.rows();

    // Every message once, in order: the v1 rows, then the v4 rows; v2 and v3 made none.
    let payloads: Vec<String> = rows.iter().map(|(p, _)| p.clone()).collect();
    let want: Vec<String> = (0..total).map(|i| i.to_string()).collect();
    ensure!(
        payloads == want,
        "every message printed once, in order: got {} rows for {total} messages",
        rows.len()
    );
    let switch = rows
        .iter()
        .position(|(_, t)| t == "v4")
        .context("no v4 rows")?;
    ensure!(
        rows[..switch].iter().all(|(_, t)| t == "v1")
            && rows[switch..].iter().all(|(_, t)| t == "v4"),
        "v1 rows, then v4 rows: {:?}",
        rows.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>()
    );

    // The metrics and the status page show the version in use and what became of the others.
    let metrics = get(&format!("http://127.0.0.1:{port}/metrics"))?;
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name) && l.contains("plugin=\"hostile\""))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    let version = line("pulsar_connect_plugin_version_info");
    ensure!(
        version.contains("version=\"4.0.0\"") && version.contains(&sha4) && version.ends_with(" 1"),
        "{version}\n{metrics}"
    );
    ensure!(
        !metrics.contains(&sha1),
        "the first version is no longer reported in use"
    );
    for (name, n) in [
        ("pulsar_connect_plugin_versions_switched_total", 1),
        ("pulsar_connect_plugin_versions_refused_total", 1),
        ("pulsar_connect_plugin_versions_rolled_back_total", 1),
    ] {
        let l = line(name);
        ensure!(l.ends_with(&format!(" {n}")), "{name}: `{l}`");
    }
    let status: serde_json::Value =
        serde_json::from_str(&get(&format!("http://127.0.0.1:{port}/api/status"))?)?;
    let plugin = status["plugins"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["plugin"] == "hostile"))
        .context("hostile in the status")?;
    ensure!(
        plugin["version"] == "4.0.0" && plugin["sha256"] == sha4.as_str(),
        "{plugin}"
    );
    Ok(())
}
