//! Take-over after a process dies (issue 35, ADR 0023): several processes copy one Pulsar → Pulsar job
//! exactly-once through a shared subscription with a long `transaction-timeout` (5 min); when one is
//! SIGKILLed, the survivors abort the transaction it left open, so its partitions' rows and the output
//! behind its uncommitted writes come through in seconds, not when the transaction times out. The
//! output is checked complete (every row once) within a fifth of the timeout. A process that is stopped
//! but still connected (SIGSTOP) keeps its transaction while another process's death is taken over.
//! Needs the broker, the built plugins and the release binary (`cargo xtask test`).

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use super::exactly_once::copy_job::{read_payloads, seq_of, spawn, warm_up};
use super::failover::produce;

const PARTITIONS: u32 = 6;
/// Long enough that waiting for it would fail every check below.
const TXN_TIMEOUT: Duration = Duration::from_secs(300);
const TAKEN_OVER: &str = "took over from a process that is gone";

/// The processes of one job, each with its own log (and no state directory: the cursor is the position).
struct Cluster {
    broker: TestBroker,
    tmp: tempfile::TempDir,
    job: PathBuf,
    input: String,
    output: String,
    procs: Vec<(String, Child)>,
}

impl Cluster {
    async fn new(kind: &str) -> Result<Cluster> {
        let broker = TestBroker::get();
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
                TXN_TIMEOUT.as_secs(),
                su = broker.service_url,
                au = broker.admin_url
            ),
        )?;
        warm_up(&broker, &format!("{input}-partition-0"), &output).await?;
        Ok(Cluster {
            broker,
            tmp,
            job,
            input,
            output,
            procs: Vec::new(),
        })
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(format!("{name}.log"))
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    fn logs(&self) -> String {
        self.procs
            .iter()
            .map(|(n, _)| format!("----- {n}\n{}", self.log(n)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Starts process `name` and waits until it reads (its consumers are on the subscription).
    async fn start(&mut self, name: &str) -> Result<()> {
        let child = spawn(&self.job, None, &self.log_path(name));
        self.procs.push((name.to_owned(), child));
        let deadline = Instant::now() + Duration::from_secs(90);
        while !self.log(name).contains("this process now reads") {
            ensure!(
                Instant::now() < deadline,
                "process {name} never read:\n{}",
                self.log(name)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(())
    }

    fn child(&mut self, name: &str) -> &mut Child {
        &mut self
            .procs
            .iter_mut()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no process {name}"))
            .1
    }

    fn kill(&mut self, name: &str) -> Result<()> {
        let child = self.child(name);
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    fn signal(&mut self, name: &str, signal: &str) -> Result<()> {
        let pid = self.child(name).id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status()?;
        ensure!(status.success(), "kill {signal} {pid} failed");
        Ok(())
    }

    /// The consumer name process `name` reads under (its log says).
    fn consumer_of(&self, name: &str) -> Result<String> {
        let log = self.log(name);
        log.split("consumer=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(str::to_owned)
            .with_context(|| format!("process {name} logged no consumer name:\n{log}"))
    }

    /// Rows `from..to` in steps of 500 every 100 ms, in the background.
    fn feed(&self, from: u64, to: u64) -> tokio::task::JoinHandle<Result<()>> {
        let input = self.input.clone();
        tokio::spawn(async move {
            let broker = TestBroker::get();
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
    async fn expect_exactly_once(
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
                TXN_TIMEOUT.as_secs(),
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

/// Three processes; one is SIGKILLed while rows arrive (it holds uncommitted output and
/// acknowledgements); the survivors end its transaction and every row is in the output once, within a
/// fifth of the transaction timeout.
async fn kill_round(kind: &str) -> Result<()> {
    let mut c = Cluster::new(kind).await?;
    for name in ["a", "b", "c"] {
        c.start(name).await?;
    }
    let total = 20_000;
    let feeder = c.feed(0, total);
    // Rows keep arriving for ~4 s: the kill lands while the process holds rows no checkpoint committed.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ensure!(!feeder.is_finished(), "the input was fed before the kill");
    c.kill("b")?;
    let killed = Instant::now();
    feeder.await??;
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    let survivors = format!("{}{}", c.log("a"), c.log("c"));
    ensure!(
        survivors.contains(TAKEN_OVER),
        "no survivor logged the take-over:\n{}",
        c.logs()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_a_killed_processs_partitions_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Failover").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_a_killed_processs_messages_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Shared").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_shared_a_killed_processs_messages_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Key_Shared").await
}

/// The whole job on one machine: its only process is killed while it copies and started again; the new
/// run ends the transaction the old one left open (its consumer name is gone) instead of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_job_ends_what_its_killed_run_left_open() -> Result<()> {
    let mut c = Cluster::new("Failover").await?;
    c.start("first").await?;
    let total = 10_000;
    let feeder = c.feed(0, total);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure!(!feeder.is_finished(), "the input was fed before the kill");
    c.kill("first")?;
    let killed = Instant::now();
    c.start("second").await?;
    feeder.await??;
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    ensure!(
        c.log("second").contains(TAKEN_OVER),
        "the restarted run did not end the old run's transaction:\n{}",
        c.logs()
    );
    Ok(())
}

/// A process stopped by SIGSTOP keeps its connection, so it is alive to the broker (its partitions stay
/// its own): while it is stopped, a third process dies and is taken over, and the stopped one's open
/// transaction is left alone. Continued, it goes on; killed later, it is taken over too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_process_keeps_its_transaction_while_a_dead_one_is_taken_over() -> Result<()> {
    let mut c = Cluster::new("Failover").await?;
    c.start("a").await?;
    c.start("b").await?;
    let stopped_name = c.consumer_of("a")?;
    let total = 24_000;
    let feeder = c.feed(0, total);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // `a` stops holding an open transaction (rows arrive all along, checkpoints every second).
    c.signal("a", "-STOP")?;
    c.start("c").await?;
    let dead_name = c.consumer_of("c")?;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    c.kill("c")?;
    // `b` takes `c` over...
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.log("b").contains(&format!("owner={dead_name}")) {
        ensure!(
            Instant::now() < deadline,
            "b did not take the killed process over:\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ... and, with a few more looks at the subscription, still leaves the stopped one alone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        !c.log("b").contains(&format!("owner={stopped_name}")),
        "b aborted the transaction of a process that is stopped but connected:\n{}",
        c.logs()
    );
    c.signal("a", "-CONT")?;
    feeder.await??;
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.kill("a")?;
    let killed = Instant::now();
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    Ok(())
}
