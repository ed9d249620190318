//! Exactly-once Pulsar → Pulsar: a sequence-numbered input topic copied by the real binary with
//! `'sink.semantic' = 'exactly-once'`, killed with SIGKILL at random points and restarted from its checkpoints;
//! the output (as a reader sees it: committed transactions only) must hold every input exactly once.
//! Needs the broker, the built plugins and the release binary (`cargo xtask test` provides all three).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use magnetar::OutgoingMessage;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

const N: u32 = 20_000;
const ROUNDS: usize = 20;

fn binary() -> PathBuf {
    let p = std::env::var_os("PULSAR_CONNECT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            pulsar_connect_tests::guests::repo_root().join("target/release/pulsar-connect")
        });
    assert!(
        p.exists(),
        "{} not found: run `cargo build --release -p pulsar-connect`",
        p.display()
    );
    p
}

fn job_sql(broker: &TestBroker, name: &str, input: &str, output: &str, semantic: &str) -> String {
    format!(
        "SET 'pipeline.name' = '{name}';
SET 'execution.checkpointing.interval' = '300ms';
SET 'execution.checkpointing.timeout' = '5s';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}',
  'format' = 'json', 'sink.semantic' = '{semantic}',
  'transaction-timeout' = '20s', 'max-block-time-ms' = '5000');
INSERT INTO dst SELECT seq, payload FROM src;",
        su = broker.service_url,
        au = broker.admin_url
    )
}

fn spawn(job: &Path, state: &Path, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg("run")
        .arg(job)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

/// Sequence numbers in the output topic, as a consumer sees them.
async fn read_output(
    broker: &TestBroker,
    topic: &str,
    expect: usize,
) -> Result<BTreeMap<u64, usize>> {
    let client = broker.client().await?;
    let mut reader = SplitReader::open(
        &client,
        Split {
            topic: TopicName::parse(topic)?,
            partition: -1,
        },
        &format!("verify-{}", now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut counts = BTreeMap::new();
    let mut total = 0;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        let batch = reader.next_batch(1000, Duration::from_millis(500)).await?;
        if batch.is_empty() {
            if total >= expect && quiet_since.elapsed() > Duration::from_secs(3) {
                break;
            }
            continue;
        }
        quiet_since = Instant::now();
        for m in batch {
            let v: serde_json::Value = serde_json::from_slice(&m.payload)?;
            *counts.entry(v["seq"].as_u64().unwrap()).or_insert(0) += 1;
            total += 1;
        }
    }
    reader.close().await.ok();
    Ok(counts)
}

/// Writes `N` sequence-numbered rows to a new input topic.
async fn produce_input(broker: &TestBroker, input: &str) -> Result<()> {
    let client = broker.client().await?;
    let producer = client
        .producer(input)
        .batching(1000, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(5))
        .create()
        .await?;
    let sends: Vec<_> = (0..N)
        .map(|i| {
            producer.send(
                OutgoingMessage::with_payload(
                    format!(r#"{{"seq":{i},"payload":"row-{i:08}-{}"}}"#, "x".repeat(40))
                        .into_bytes(),
                )
                .into(),
            )
        })
        .collect();
    futures::future::try_join_all(sends).await?;
    producer.close().await?;
    Ok(())
}

/// Copies a fresh `N`-row input topic with the real binary under `semantic`, killed with SIGKILL `rounds`
/// times at random points and restarted from its checkpoints, then run to the end and stopped gracefully.
/// Returns how often each sequence number is in the output, and the job's log.
async fn copy_with_kills(semantic: &str, rounds: usize) -> Result<(BTreeMap<u64, usize>, String)> {
    let broker = TestBroker::get();
    let input = unique_topic(&format!("{semantic}-in"));
    let output = unique_topic(&format!("{semantic}-out"));
    produce_input(&broker, &input).await?;
    let tmp = tempfile::tempdir()?;
    let job = tmp.path().join("job.sql");
    std::fs::write(
        &job,
        job_sql(
            &broker,
            &format!("{semantic}-{}", now_ms()),
            &input,
            &output,
            semantic,
        ),
    )?;
    let state = tmp.path().join("state");
    let log = tmp.path().join("job.log");
    let mut seed = now_ms();
    for round in 0..rounds {
        let mut child = spawn(&job, &state, &log);
        // A pseudo-random point between 0.3 s and 2.3 s into the run.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let wait = 300 + (seed >> 33) % 2000;
        std::thread::sleep(Duration::from_millis(wait));
        if let Some(status) = child.try_wait()? {
            panic!(
                "round {round}: the job exited early ({status}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        child.kill()?; // SIGKILL
        child.wait()?;
    }
    // A last run to the end of the input, stopped gracefully.
    let mut child = spawn(&job, &state, &log);
    // Wait until the output has received everything (for exactly-once: committed or not), then stop.
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = output.strip_prefix("persistent://").unwrap();
    loop {
        let stats = broker.admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None);
        let in_count = stats
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .and_then(|v| v["msgInCounter"].as_u64())
            .unwrap_or(0);
        if in_count >= u64::from(N) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // SAFETY: SIGTERM to our own child: graceful stop with a final checkpoint and commit.
    unsafe {
        libc_kill(child.id() as i32);
    }
    let status = child.wait()?;
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        status.success(),
        "the final run did not stop cleanly ({status}):\n{log_text}"
    );
    let counts = read_output(&broker, &output, N as usize).await?;
    let warnings = log_text
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .take(40)
        .collect::<Vec<_>>()
        .join("\n");
    Ok((counts, warnings))
}

fn missing(counts: &BTreeMap<u64, usize>) -> Vec<u64> {
    (0..u64::from(N))
        .filter(|s| !counts.contains_key(s))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_twenty_times_and_the_output_holds_every_input_once() -> Result<()> {
    let (counts, log) = copy_with_kills("exactly-once", ROUNDS).await?;
    let missing = missing(&counts);
    let dupes: Vec<(u64, usize)> = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(s, c)| (*s, *c))
        .collect();
    assert!(
        missing.is_empty() && dupes.is_empty(),
        "{} missing (first {:?}), {} duplicated (first {:?}); log:\n{log}",
        missing.len(),
        &missing[..missing.len().min(10)],
        dupes.len(),
        &dupes[..dupes.len().min(10)],
    );
    Ok(())
}

/// At-least-once: after kill -9 and restarts every input row is in the output; rows written after the
/// last checkpoint before a kill are written again (counted and reported, allowed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_at_least_once_loses_nothing() -> Result<()> {
    let (counts, log) = copy_with_kills("at-least-once", 5).await?;
    let missing = missing(&counts);
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    eprintln!(
        "at-least-once after 5 × kill -9: {} distinct rows, {duplicates} duplicate writes",
        counts.len()
    );
    assert!(
        missing.is_empty(),
        "{} missing (first {:?}); log:\n{log}",
        missing.len(),
        &missing[..missing.len().min(10)],
    );
    Ok(())
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill_raw(pid: i32, sig: i32) -> i32;
}

unsafe fn libc_kill(pid: i32) {
    // SAFETY: plain kill(2) on a child pid with SIGTERM (15).
    unsafe {
        libc_kill_raw(pid, 15);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_timeout_shorter_than_the_checkpoint_cycle_is_refused() -> Result<()> {
    let broker = TestBroker::get();
    let sql = job_sql(&broker, "eo-timeout", "in", "out", "exactly-once").replace(
        "'transaction-timeout' = '20s'",
        "'transaction-timeout' = '3s'",
    );
    let (registry, _) = pulsar_connect_tests::jobs::registry();
    let err = match pulsar_connect::job::load_text(&sql, &registry).await {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("table 'dst'")
            && err.contains("transaction-timeout")
            && err.contains("too short"),
        "{err}"
    );
    Ok(())
}
