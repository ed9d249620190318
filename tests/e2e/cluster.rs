//! Several processes of one exactly-once Pulsar → Pulsar job on a shared subscription, each with its own
//! log, fed while they run and checked by id: shared by the take-over tests (`e2e`) and the fresh-broker
//! rounds (`broker_restart`), `#[path]`-included beside `copy_job.rs`.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use super::copy_job::{read_payloads, seq_of, spawn, warm_up};

/// The input's partitions.
pub const PARTITIONS: u32 = 6;

/// The processes of one job, each with its own log (and no state directory: the cursor is the position).
pub struct Cluster {
    pub broker: TestBroker,
    pub txn_timeout: Duration,
    tmp: tempfile::TempDir,
    job: PathBuf,
    pub input: String,
    pub output: String,
    procs: Vec<(String, Child)>,
}

impl Cluster {
    /// A job of `kind` (the subscription type) on `broker`, with a `txn_timeout` transaction timeout;
    /// `warm`: both topics (and the output's transaction buffer) are loaded before any process starts.
    pub async fn on(
        broker: TestBroker,
        kind: &str,
        txn_timeout: Duration,
        warm: bool,
    ) -> Result<Cluster> {
        let input = unique_topic("takeover-in");
        let output = unique_topic("takeover-out");
        broker.create_partitioned_topic(&input, PARTITIONS)?;
        let tmp = tempfile::tempdir()?;
        let job = tmp.path().join("job.sql");
        std::fs::write(
            &job,
            format!(
                "SET 'pipeline.name' = 'takeover-{}';
SET 'execution.checkpointing.interval' = '1s';
SET 'execution.checkpointing.timeout' = '10s';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest', 'subscription-type' = '{kind}');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}', 'format' = 'json',
  'sink.semantic' = 'exactly-once', 'transaction-timeout' = '{}s',
  'max-block-time-ms' = '3000');
INSERT INTO dst SELECT seq, payload FROM src;",
                now_ms(),
                txn_timeout.as_secs(),
                su = broker.service_url,
                au = broker.admin_url
            ),
        )?;
        if warm {
            warm_up(&broker, &format!("{input}-partition-0"), &output).await?;
        }
        Ok(Cluster {
            txn_timeout,
            broker,
            tmp,
            job,
            input,
            output,
            procs: Vec::new(),
        })
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(format!("{name}.log"))
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        self.procs
            .iter()
            .map(|(n, _)| format!("----- {n}\n{}", self.log(n)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Starts process `name` and waits until it reads (its consumers are on the subscription).
    pub async fn start(&mut self, name: &str) -> Result<()> {
        self.start_together(&[name]).await
    }

    /// Starts the processes `names` at once and waits until each reads.
    pub async fn start_together(&mut self, names: &[&str]) -> Result<()> {
        for name in names {
            let child = spawn(&self.job, None, &self.log_path(name));
            self.procs.push(((*name).to_owned(), child));
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        for name in names {
            while !self.log(name).contains("this process now reads") {
                ensure!(
                    Instant::now() < deadline,
                    "process {name} never read:\n{}",
                    self.log(name)
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// Stops every process with SIGTERM (a final checkpoint each) and waits for them; returns the names
    /// of those that did not exit with 0.
    pub fn stop_all(&mut self) -> Result<Vec<String>> {
        let mut failed = Vec::new();
        for (_, child) in &mut self.procs {
            if child.try_wait()?.is_some() {
                continue;
            }
            let status = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()?;
            ensure!(status.success(), "kill -TERM {} failed", child.id());
        }
        for (name, child) in &mut self.procs {
            let status = child.wait()?;
            if !status.success() && status.code().is_some() {
                failed.push(format!("{name} ({status})"));
            }
        }
        Ok(failed)
    }

    fn child(&mut self, name: &str) -> &mut Child {
        &mut self
            .procs
            .iter_mut()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no process {name}"))
            .1
    }

    pub fn kill(&mut self, name: &str) -> Result<()> {
        let child = self.child(name);
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    pub fn signal(&mut self, name: &str, signal: &str) -> Result<()> {
        let pid = self.child(name).id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status()?;
        ensure!(status.success(), "kill {signal} {pid} failed");
        Ok(())
    }

    /// The consumer name process `name` reads under (its log says).
    pub fn consumer_of(&self, name: &str) -> Result<String> {
        let log = self.log(name);
        log.split("consumer=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(str::to_owned)
            .with_context(|| format!("process {name} logged no consumer name:\n{log}"))
    }

    /// Rows `from..to` in steps of 500 every 100 ms, in the background.
    pub fn feed(&self, from: u64, to: u64) -> tokio::task::JoinHandle<Result<()>> {
        let input = self.input.clone();
        let broker = self.broker.clone();
        tokio::spawn(async move {
            let mut at = from;
            while at < to {
                let next = (at + 500).min(to);
                produce(&broker, &input, at, next).await?;
                at = next;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(())
        })
    }

    /// Waits until the output holds every row `0..total` (read-committed, as any consumer), at the
    /// latest `within` after `since`; every row must be there exactly once.
    pub async fn expect_exactly_once(
        &self,
        total: u64,
        since: Instant,
        within: Duration,
    ) -> Result<()> {
        let left = within.saturating_sub(since.elapsed());
        let payloads = read_payloads(&self.broker, &self.output, total as usize, left).await?;
        let mut counts = std::collections::BTreeMap::<u64, usize>::new();
        for p in payloads {
            let v: serde_json::Value = serde_json::from_slice(&p)?;
            let seq = seq_of(&v).with_context(|| format!("an output row without seq: {v}"))?;
            *counts.entry(seq).or_default() += 1;
        }
        let missing: Vec<u64> = (0..total).filter(|s| !counts.contains_key(s)).collect();
        let twice: Vec<u64> = counts
            .iter()
            .filter(|(_, c)| **c > 1)
            .map(|(s, _)| *s)
            .collect();
        if !missing.is_empty() || !twice.is_empty() {
            bail!(
                "{:.0} s after the kill ({} s transaction timeout): {} of {total} rows missing (first: {:?}), {} written twice (first: {:?}); logs:\n{}",
                since.elapsed().as_secs_f64(),
                self.txn_timeout.as_secs(),
                missing.len(),
                missing.iter().take(10).collect::<Vec<_>>(),
                twice.len(),
                twice.iter().take(10).collect::<Vec<_>>(),
                self.logs()
            );
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.procs {
            // A stopped process must be continued to die of SIGKILL's exit status cleanly.
            let _ = Command::new("kill")
                .args(["-CONT", &child.id().to_string()])
                .status();
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// Rows `from..to` into the `PARTITIONS` partitions of `input`: row `i` to partition `i % PARTITIONS`.
pub async fn produce(broker: &TestBroker, input: &str, from: u64, to: u64) -> Result<()> {
    let client = broker.client().await?;
    for p in 0..PARTITIONS {
        let producer = client
            .producer(format!("{input}-partition-{p}"))
            .batching(500, 1 << 20)
            .batching_max_publish_delay(Duration::from_millis(5))
            .create()
            .await?;
        let sends: Vec<_> = (from..to)
            .filter(|i| i % u64::from(PARTITIONS) == u64::from(p))
            .map(|i| {
                producer.send(
                    OutgoingMessage::with_payload(
                        format!(r#"{{"seq":{i},"payload":"p{p}"}}"#).into_bytes(),
                    )
                    .into(),
                )
            })
            .collect();
        futures::future::try_join_all(sends).await?;
        producer.close().await?;
    }
    Ok(())
}
