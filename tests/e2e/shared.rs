//! Scale-out through `Shared` and `Key_Shared` subscriptions (issue 17 §2): more processes than
//! partitions, every message acknowledged individually — here inside the exactly-once sink's
//! transactions, so the output holds every input row exactly once across processes. `Key_Shared` keeps
//! each key's rows in order; with `Shared`, a process killed mid-copy leaves open transactions whose
//! messages the broker hands to the others once they time out. Needs the broker, the built plugins and
//! the release binary (`cargo xtask test`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use super::exactly_once::copy_job::{read_payloads, spawn, warm_up};

const KEYS: u64 = 30;

/// Rows `from..to` to the (non-partitioned) input, one message each, keyed `k<i % KEYS>`.
async fn produce(broker: &TestBroker, input: &str, from: u64, to: u64) -> Result<()> {
    let client = broker.client().await?;
    let producer = client.producer(input).create().await?;
    let sends: Vec<_> = (from..to)
        .map(|i| {
            let k = i % KEYS;
            let mut m = OutgoingMessage::with_payload(
                format!(r#"{{"seq":{i},"k":"k{k}","n":{}}}"#, i / KEYS).into_bytes(),
            );
            m.key = Some(format!("k{k}"));
            producer.send(m.into())
        })
        .collect();
    futures::future::try_join_all(sends).await?;
    producer.close().await?;
    Ok(())
}

/// The output in the order a reader sees it: (seq, key, per-key counter). The messages of a killed
/// process come back when its transactions time out (20 s).
async fn read_all(
    broker: &TestBroker,
    topic: &str,
    expect: usize,
) -> Result<Vec<(u64, String, u64)>> {
    let mut out = Vec::new();
    for payload in read_payloads(broker, topic, expect, Duration::from_secs(120)).await? {
        let v: serde_json::Value = serde_json::from_slice(&payload)?;
        out.push((
            v["seq"].as_u64().unwrap_or(u64::MAX),
            v["k"].as_str().unwrap_or_default().to_owned(),
            v["n"].as_u64().unwrap_or(u64::MAX),
        ));
    }
    Ok(out)
}

/// Waits until the process logging to `log` reads (its consumer is subscribed).
async fn wait_reading(log: &Path, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("this process now reads 1 of the 1 splits") {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what} never read:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A job file copying `input` to `output` exactly-once through a `kind` subscription, and a way to start
/// processes on it (each with its own state directory, as on its own host).
struct SharedJob {
    broker: TestBroker,
    input: String,
    output: String,
    job: PathBuf,
    tmp: tempfile::TempDir,
}

impl SharedJob {
    fn new(kind: &str) -> Result<SharedJob> {
        let broker = TestBroker::get();
        let input = unique_topic(&format!("{}-in", kind.to_lowercase()));
        let output = unique_topic(&format!("{}-out", kind.to_lowercase()));
        let tmp = tempfile::tempdir()?;
        let job = tmp.path().join("job.sql");
        std::fs::write(
            &job,
            format!(
                "SET 'pipeline.name' = 'shared-{}';
SET 'execution.checkpointing.interval' = '300ms';
SET 'execution.checkpointing.timeout' = '5s';
CREATE TABLE src (seq BIGINT, k STRING, n BIGINT) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest', 'subscription-type' = '{kind}');
CREATE TABLE dst (seq BIGINT, k STRING, n BIGINT) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}', 'format' = 'json',
  'sink.semantic' = 'exactly-once', 'transaction-timeout' = '20s', 'max-block-time-ms' = '5000');
INSERT INTO dst SELECT seq, k, n FROM src;",
                now_ms(),
                su = broker.service_url,
                au = broker.admin_url
            ),
        )?;
        Ok(SharedJob {
            broker,
            input,
            output,
            job,
            tmp,
        })
    }

    fn start(&self, name: &str) -> (Child, PathBuf) {
        let log = self.tmp.path().join(format!("{name}.log"));
        let state = self.tmp.path().join(format!("{name}-state"));
        (spawn(&self.job, Some(&state), &log), log)
    }

    /// Three processes reading; the output checked once every row is in. A process that exits on its
    /// own is restarted, as a supervisor would (the broker fences a topic now and then when loading its
    /// transaction buffer times out under load): the output must still hold every row once.
    async fn run(
        &self,
        rows: u64,
        kill_one: bool,
    ) -> Result<(Vec<(u64, String, u64)>, Vec<String>)> {
        warm_up(&self.broker, &self.input, &self.output).await?;
        let names = ["a", "b", "c"];
        let procs: Vec<(Child, PathBuf)> = names.iter().map(|n| self.start(n)).collect();
        for (i, (_, log)) in procs.iter().enumerate() {
            wait_reading(log, &format!("process {i}")).await?;
        }
        let procs = std::sync::Mutex::new(procs);
        produce(&self.broker, &self.input, 0, rows / 2).await?;
        if kill_one {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut p = procs.lock().unwrap();
            p[1].0.kill()?;
            p[1].0.wait()?;
        }
        produce(&self.broker, &self.input, rows / 2, rows).await?;
        let supervise = async {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let mut p = procs.lock().unwrap();
                for (i, (child, log)) in p.iter_mut().enumerate() {
                    if let Ok(Some(status)) = child.try_wait() {
                        let text = std::fs::read_to_string(&*log).unwrap_or_default();
                        let last: Vec<&str> = text.lines().rev().take(5).collect();
                        eprintln!(
                            "process {} exited ({status}); restarting it; its log ends:\n{}",
                            names[i],
                            last.join("\n")
                        );
                        *child = self.start(names[i]).0;
                    }
                }
            }
        };
        let out = tokio::select! {
            out = read_all(&self.broker, &self.output, rows as usize) => out?,
            () = supervise => unreachable!("the supervisor loops"),
        };
        let mut procs = procs.into_inner().unwrap();
        let logs = procs
            .iter()
            .map(|(_, log)| std::fs::read_to_string(log).unwrap_or_default())
            .collect();
        for (child, _) in &mut procs {
            child.kill().ok();
            child.wait().ok();
        }
        Ok((out, logs))
    }
}

/// Every input row exactly once.
fn assert_once(out: &[(u64, String, u64)], rows: u64, logs: &[String]) {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (seq, _, _) in out {
        *counts.entry(*seq).or_default() += 1;
    }
    let missing: Vec<u64> = (0..rows).filter(|s| !counts.contains_key(s)).collect();
    let doubled: Vec<u64> = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(s, _)| *s)
        .collect();
    assert!(
        missing.is_empty() && doubled.is_empty() && counts.len() as u64 == rows,
        "{} missing (first {:?}), {} doubled (first {:?}); logs:\n{}",
        missing.len(),
        &missing[..missing.len().min(10)],
        doubled.len(),
        &doubled[..doubled.len().min(10)],
        logs.join("\n-----\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_shared_processes_copy_every_row_once_in_key_order() -> Result<()> {
    let job = SharedJob::new("Key_Shared")?;
    let rows = 6_000;
    let (out, logs) = job.run(rows, false).await?;
    assert_once(&out, rows, &logs);
    // Each key's rows in the order they were written.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (seq, k, n) in &out {
        if let Some(prev) = last.insert(k.clone(), *n) {
            assert!(prev < *n, "key {k}: row {seq} (#{n}) after #{prev}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_processes_copy_every_row_once_through_a_kill() -> Result<()> {
    let job = SharedJob::new("Shared")?;
    let rows = 6_000;
    let (out, logs) = job.run(rows, true).await?;
    assert_once(&out, rows, &logs);
    Ok(())
}
