//! The status page (`--metrics-addr`: `/`, `/api/status`, `/metrics`) of the real binary running a job
//! against the real broker, loaded in headless Chromium (Debian's `chromium`) as a person would: the
//! tables are there, and the lag the page shows falls as the job catches up with a backlog produced before
//! it started. Also the lag and ownership series, the job label, `inlong.metric.labels` and InLong's
//! metric names of a `pulsar-inlong` table.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, unique_topic};

const PARTITIONS: u32 = 2;
const PER_PARTITION: u32 = 1500;

/// Writes `PER_PARTITION` json rows to each partition of a new topic, batched (an entry holds up to 100
/// messages: the lag must count messages, not entries).
async fn produce_backlog(broker: &TestBroker, topic: &str) -> Result<()> {
    broker.create_partitioned_topic(topic, PARTITIONS)?;
    let client = broker.client().await?;
    for p in 0..PARTITIONS {
        let producer = client
            .producer(format!("{topic}-partition-{p}"))
            .batching(100, 1 << 20)
            .batching_max_publish_delay(Duration::from_millis(5))
            .create()
            .await?;
        let sends: Vec<_> = (0..PER_PARTITION)
            .map(|i| {
                let payload = format!(r#"{{"seq":{i},"payload":"row-{i}"}}"#);
                producer.send(OutgoingMessage::with_payload(payload.into_bytes()).into())
            })
            .collect();
        futures::future::try_join_all(sends).await?;
        producer.close().await?;
    }
    Ok(())
}

fn job_sql(broker: &TestBroker, name: &str, topic: &str) -> String {
    format!(
        "SET 'pipeline.name' = '{name}';
SET 'execution.checkpointing.interval' = '15s';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar-inlong', 'topic' = '{topic}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest',
  'inlong.metric.labels' = 'groupId=g1&streamId=s1&nodeId=n1');
CREATE TABLE out_rows (seq BIGINT, payload STRING) WITH ('connector' = 'blackhole');
INSERT INTO out_rows SELECT seq, payload FROM src;",
        su = broker.service_url,
        au = broker.admin_url
    )
}

/// A free loopback port (bound and released: the job binds it right after).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

struct Job(Child);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(url: &str) -> Result<String> {
    let r = xtask::broker::http::request("GET", url, None, None)?;
    if r.status != 200 {
        bail!("GET {url}: {} {}", r.status, r.body);
    }
    Ok(r.body)
}

fn status(base: &str) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&get(&format!("{base}/api/status"))?)?)
}

/// Polls `/api/status` until `ok` holds for it.
fn wait_status(
    base: &str,
    job: &mut Job,
    what: &str,
    timeout: Duration,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value> {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        if let Some(exit) = job.0.try_wait()? {
            bail!("the job ended ({exit}) before {what}");
        }
        if let Ok(s) = status(base) {
            if ok(&s) {
                return Ok(s);
            }
            last = Some(s);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("timed out waiting for {what}; last status: {last:?}")
}

/// The page as Chromium renders it after its script ran (virtual time: several refreshes).
fn rendered_dom(chromium: &Path, url: &str) -> Result<String> {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=3000",
            "--dump-dom",
            url,
        ])
        .stderr(Stdio::null())
        .output()
        .context("running chromium")?;
    if !out.status.success() {
        bail!("chromium --dump-dom {url}: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn screenshot(chromium: &Path, url: &str, png: &Path) -> Result<()> {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1360,900",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .stderr(Stdio::null())
        .output()
        .context("running chromium")?;
    if !out.status.success() {
        bail!("chromium --screenshot {url}: {}", out.status);
    }
    Ok(())
}

/// The `data-lag` values of the elements with class `lag` (the partitions table) and of `#total-lag`.
fn lags(dom: &str) -> Result<(Vec<u64>, Option<u64>)> {
    let cell = regex::Regex::new(r#"<td class="num lag" data-lag="(\d*)">"#)?;
    let parts = cell
        .captures_iter(dom)
        .map(|c| c[1].parse::<u64>().map_err(|e| anyhow!("data-lag: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let total = regex::Regex::new(r#"id="total-lag" data-lag="(\d*)""#)?
        .captures(dom)
        .and_then(|c| c[1].parse().ok());
    Ok((parts, total))
}

/// The rows of table `id` in the rendered DOM.
fn rows<'a>(dom: &'a str, id: &str) -> Result<Vec<&'a str>> {
    let start = dom
        .find(&format!(r#"<table id="{id}">"#))
        .ok_or_else(|| anyhow!("no table #{id} in the page:\n{dom}"))?;
    let table = &dom[start..];
    let table = &table[..table.find("</table>").unwrap_or(table.len())];
    let body = &table[table.find("<tbody>").unwrap_or(0)..];
    Ok(body.split("<tr>").skip(1).collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_page_shows_the_job_and_a_lag_that_falls_as_it_catches_up() -> Result<()> {
    let chromium = xtask::chromium::binary()?;
    let broker = TestBroker::get();
    let topic = unique_topic("status-page");
    produce_backlog(&broker, &topic).await?;
    let backlog = u64::from(PARTITIONS * PER_PARTITION);

    let dir = tempfile::tempdir()?;
    let name = format!("status-page-{}", std::process::id());
    let job_file = dir.path().join("job.sql");
    std::fs::write(&job_file, job_sql(&broker, &name, &topic))?;
    let port = free_port()?;
    let base = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("job.log");
    let mut job = Job(Command::new(pulsar_connect_tests::binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .args(["run", "--metrics-addr", &format!("127.0.0.1:{port}")])
        .arg(&job_file)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()?);

    // The broker's backlog before the first checkpoint moved the subscription: every message.
    let first = wait_status(
        &base,
        &mut job,
        "the broker's lag of both partitions",
        Duration::from_secs(60),
        |s| {
            s["inserts"][0]["partitions"].as_array().is_some_and(|p| {
                p.len() == PARTITIONS as usize && p.iter().all(|p| p["lag_messages"].is_u64())
            })
        },
    )?;
    assert_eq!(first["job"], name.as_str(), "{first}");
    // The job's parallelism: unset, as many subtasks as cores (capped by the splits).
    assert!(
        first["parallelism"]["default"].is_null()
            && first["parallelism"]["cores"].as_u64() >= Some(1),
        "{first}"
    );
    assert_eq!(
        first["inserts"][0]["lag_messages"].as_u64(),
        Some(backlog),
        "before the first checkpoint the subscription is where the job started: {first}"
    );

    // What a person sees: the page's tables, the job, the lag per partition.
    let dom = rendered_dom(&chromium, &format!("{base}/"))?;
    assert!(dom.contains(&format!(r#"<b id="job">{name}</b>"#)), "{dom}");
    assert!(
        dom.contains(r#"<b id="parallelism" title="parallelism.default unset"#),
        "{dom}"
    );
    let inserts = rows(&dom, "inserts")?;
    assert_eq!(inserts.len(), 1, "{dom}");
    assert!(
        inserts[0].contains("src (pulsar-inlong)") && inserts[0].contains("out_rows (blackhole)"),
        "{}",
        inserts[0]
    );
    let partitions = rows(&dom, "partitions")?;
    assert_eq!(partitions.len(), PARTITIONS as usize, "{dom}");
    assert!(
        partitions.iter().all(|r| r.contains("owned")),
        "{partitions:?}"
    );
    let (part_lags, total_before) = lags(&dom)?;
    assert_eq!(part_lags.len(), PARTITIONS as usize, "{dom}");
    let total_before = total_before.ok_or_else(|| anyhow!("no total lag on the page:\n{dom}"))?;
    assert!(total_before > 0, "{dom}");
    assert!(
        dom.contains(r#"<table id="plugins">"#)
            && rows(&dom, "plugins")?.iter().any(|r| r.contains("json")),
        "{dom}"
    );
    let png = match std::env::var_os("PULSAR_CONNECT_STATUS_SCREENSHOT") {
        Some(p) => std::path::PathBuf::from(p),
        None => dir.path().join("status.png"),
    };
    screenshot(&chromium, &format!("{base}/"), &png)?;
    let bytes = std::fs::read(&png)?;
    assert!(
        bytes.starts_with(b"\x89PNG"),
        "not a PNG: {}",
        png.display()
    );

    // The metrics: lag and ownership per partition, the job label, InLong's names with its labels.
    let metrics = get(&format!("{base}/metrics"))?;
    for series in [
        format!(
            r#"pulsar_connect_source_lag_messages{{job="{name}",partition="0",table="src",topic="{topic}",groupId="g1",streamId="s1",nodeId="n1"}}"#
        ),
        format!(
            r#"pulsar_connect_source_owned_partitions{{job="{name}",partition="1",table="src",topic="{topic}",groupId="g1",streamId="s1",nodeId="n1"}} 1"#
        ),
        format!(
            r#"pulsar_connect_rows_in_total{{job="{name}",table="src",groupId="g1",streamId="s1",nodeId="n1"}}"#
        ),
        format!(
            r#"pulsar_connect_inlong_numRecordsIn{{job="{name}",table="src",groupId="g1",streamId="s1",nodeId="n1"}}"#
        ),
        format!(
            r#"pulsar_connect_inlong_numRecordsInPerSecond{{job="{name}",table="src",groupId="g1",streamId="s1",nodeId="n1"}}"#
        ),
        format!(r#"pulsar_connect_plugin_memory_peak_bytes{{job="{name}",plugin="json"}}"#),
        format!(r#"pulsar_connect_plugin_deadline_hits_total{{job="{name}",plugin="json"}} 0"#),
    ] {
        assert!(
            metrics.contains(&series),
            "`{series}` missing from:\n{metrics}"
        );
    }

    // The job reads everything, the checkpoint commits it, the broker's backlog falls to 0 — and the page
    // shows it.
    let caught_up = wait_status(
        &base,
        &mut job,
        "the lag to fall to 0 after a checkpoint",
        Duration::from_secs(90),
        |s| s["inserts"][0]["lag_messages"].as_u64() == Some(0),
    )?;
    assert_eq!(
        caught_up["inserts"][0]["rows_in"].as_u64(),
        Some(backlog),
        "{caught_up}"
    );
    let dom = rendered_dom(&chromium, &format!("{base}/"))?;
    let (part_lags, total_after) = lags(&dom)?;
    assert_eq!(total_after, Some(0), "{dom}");
    assert!(total_after < Some(total_before));
    assert_eq!(part_lags, vec![0; PARTITIONS as usize], "{dom}");
    let checkpoints = rows(&dom, "checkpoints")?;
    assert!(
        checkpoints.iter().any(|r| r.contains("completed")),
        "{checkpoints:?}"
    );
    assert!(
        rows(&dom, "inserts")?[0].contains(&format!(">{}<", "3,000")),
        "rows in: {dom}"
    );
    Ok(())
}

#[test]
fn a_malformed_inlong_metric_labels_is_a_validate_error_naming_the_table_and_the_option()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        "CREATE TABLE src (seq BIGINT) WITH (
  'connector' = 'pulsar-inlong', 'topic' = 'persistent://public/default/t', 'service-url' = 'pulsar://localhost:6650',
  'format' = 'json', 'inlong.metric.labels' = 'groupId=g1&streamId');
CREATE TABLE out_rows (seq BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out_rows SELECT seq FROM src;",
    )?;
    let out = Command::new(pulsar_connect_tests::binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg("validate")
        .arg(&job)
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("table 'src': option 'inlong.metric.labels': 'groupId=g1&streamId': 'streamId' is not key=value"),
        "{stderr}"
    );
    Ok(())
}
