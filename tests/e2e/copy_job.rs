//! A sequence-numbered Pulsar → Pulsar copy job run by the real binary, disturbed (kill -9, broker
//! restarts) and checked: shared by the exactly-once tests of the `e2e` and `broker_restart` binaries (`#[path]`-included).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Result;
use magnetar::OutgoingMessage;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

pub const N: u32 = 20_000;

pub fn binary() -> PathBuf {
    pulsar_connect_tests::binary()
}

pub fn job_sql(
    broker: &TestBroker,
    name: &str,
    input: &str,
    output: &str,
    semantic: &str,
) -> String {
    job_sql_in(broker, name, (input, "json"), (output, "json"), semantic)
}

/// [`job_sql`] with the input's and the output's value formats.
pub fn job_sql_in(
    broker: &TestBroker,
    name: &str,
    (input, input_format): (&str, &str),
    (output, output_format): (&str, &str),
    semantic: &str,
) -> String {
    format!(
        "SET 'pipeline.name' = '{name}';
SET 'execution.checkpointing.interval' = '300ms';
SET 'execution.checkpointing.timeout' = '5s';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = '{input_format}', 'scan.startup.mode' = 'earliest');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}',
  'format' = '{output_format}', 'sink.semantic' = '{semantic}',
  'transaction-timeout' = '20s', 'max-block-time-ms' = '5000');
INSERT INTO dst SELECT seq, payload FROM src;",
        su = broker.service_url,
        au = broker.admin_url
    )
}

/// Runs the binary on `job`, with `state` as its state directory (or none: every run starts from scratch,
/// as on another machine).
pub fn spawn(job: &Path, state: Option<&Path>, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut cmd = Command::new(binary());
    cmd.arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg("run")
        .arg(job);
    if let Some(state) = state {
        cmd.arg("--state-dir").arg(state);
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

/// Sequence numbers in the output topic, as a consumer sees them.
pub async fn read_output(
    broker: &TestBroker,
    topic: &str,
    expect: usize,
) -> Result<BTreeMap<u64, usize>> {
    read_output_by(broker, topic, expect, seq_of).await
}

/// The `seq` of a json output row.
pub fn seq_of(v: &serde_json::Value) -> Option<u64> {
    v["seq"].as_u64()
}

/// How often each output message counts under `key` (the message's JSON value to a number).
pub async fn read_output_by(
    broker: &TestBroker,
    topic: &str,
    expect: usize,
    key: fn(&serde_json::Value) -> Option<u64>,
) -> Result<BTreeMap<u64, usize>> {
    let mut counts = BTreeMap::new();
    for payload in read_payloads(broker, topic, expect, Duration::from_secs(90)).await? {
        let v: serde_json::Value = serde_json::from_slice(&payload)?;
        let k = key(&v).ok_or_else(|| anyhow::anyhow!("an output message without its key: {v}"))?;
        *counts.entry(k).or_insert(0) += 1;
    }
    Ok(counts)
}

/// The payloads in (non-partitioned) `topic` in the order a consumer sees them: read until at least
/// `expect` came and nothing more for 3 s, or `timeout` passed.
pub async fn read_payloads(
    broker: &TestBroker,
    topic: &str,
    expect: usize,
    timeout: Duration,
) -> Result<Vec<Vec<u8>>> {
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
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        let batch = reader.next_batch(1000, Duration::from_millis(500)).await?;
        if batch.is_empty() {
            if out.len() >= expect && quiet_since.elapsed() > Duration::from_secs(3) {
                break;
            }
            continue;
        }
        quiet_since = Instant::now();
        out.extend(batch.into_iter().map(|m| m.payload.to_vec()));
    }
    reader.close().await.ok();
    Ok(out)
}

/// Loads both topics and the output's transaction buffer before several processes start on them: under
/// load, Pulsar 4.0.7 fenced a fresh output topic when three transactional producers attached while its
/// transaction buffer was still recovering (`Failed to change state of transaction buffer to Ready from
/// NoSnapshot`). One aborted transactional message leaves nothing visible.
pub async fn warm_up(broker: &TestBroker, input: &str, output: &str) -> Result<()> {
    let client = broker.client().await?;
    let producer = client.producer(input).create().await?;
    producer.close().await?;
    let producer = client.producer(output).create().await?;
    let txn = client.new_transaction(Duration::from_secs(60)).await?;
    client
        .register_partition_to_transaction(txn, output)
        .await?;
    producer
        .send(
            OutgoingMessage::with_payload(b"warm-up (aborted)".to_vec())
                .txn(txn.id())
                .into(),
        )
        .await?;
    client.abort_transaction(txn).await?;
    producer.close().await?;
    client.close().await;
    Ok(())
}

/// Adds the entry (the whole batch) of message `id` to `entries`, unless it is the last one there.
pub fn push_entry(entries: &mut Vec<magnetar::MessageId>, id: magnetar::MessageId) {
    let entry = magnetar::MessageId {
        batch_index: -1,
        batch_size: -1,
        ..id
    };
    if entries.last() != Some(&entry) {
        entries.push(entry);
    }
}

/// Writes `N` sequence-numbered rows to a new input topic.
pub async fn produce_input(broker: &TestBroker, input: &str) -> Result<()> {
    produce_rows(broker, input, (0..N).collect()).await
}

/// Writes the `N` rows to a new topic of `partitions` partitions: row `i` to partition `i % partitions`.
pub async fn produce_partitioned_input(
    broker: &TestBroker,
    input: &str,
    partitions: u32,
) -> Result<()> {
    broker.create_partitioned_topic(input, partitions)?;
    for p in 0..partitions {
        let rows = (0..N).filter(|i| i % partitions == p).collect();
        produce_rows(broker, &format!("{input}-partition-{p}"), rows).await?;
    }
    Ok(())
}

async fn produce_rows(broker: &TestBroker, input: &str, rows: Vec<u32>) -> Result<()> {
    let payloads = rows
        .into_iter()
        .map(|i| format!(r#"{{"seq":{i},"payload":"row-{i:08}-{}"}}"#, "x".repeat(40)))
        .collect();
    produce_payloads(broker, input, payloads).await
}

async fn produce_payloads(broker: &TestBroker, input: &str, payloads: Vec<String>) -> Result<()> {
    let client = broker.client().await?;
    let producer = client
        .producer(input)
        // Entries of 10 messages at most, so a dispatch throttle (`copy_with_kills_each`) is smooth: the
        // broker charges a dispatch after the fact, and its first read of up to 100 entries is a burst.
        .batching(10, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(5))
        .create()
        .await?;
    let sends: Vec<_> = payloads
        .into_iter()
        .map(|p| producer.send(OutgoingMessage::with_payload(p.into_bytes()).into()))
        .collect();
    futures::future::try_join_all(sends).await?;
    producer.close().await?;
    Ok(())
}

/// A copy job over a fresh `N`-row input topic: its topics, SQL file, state dir and log.
pub struct CopyJob {
    pub broker: TestBroker,
    pub input: String,
    pub output: String,
    pub job: PathBuf,
    pub state: PathBuf,
    /// Runs without the state directory (restarts from scratch).
    pub stateless: bool,
    /// Partitions of the input topic (0: not partitioned).
    pub partitions: u32,
    /// What an output message counts as, and how many there are to read (default: its `seq`, `N`).
    pub output_key: fn(&serde_json::Value) -> Option<u64>,
    pub outputs: usize,
    pub log: PathBuf,
    _tmp: tempfile::TempDir,
}

impl CopyJob {
    pub async fn new(semantic: &str) -> Result<CopyJob> {
        Self::with_partitions(semantic, 0).await
    }

    /// A copy job whose input topic has `partitions` partitions (0: a non-partitioned topic).
    pub async fn with_partitions(semantic: &str, partitions: u32) -> Result<CopyJob> {
        Self::on(TestBroker::get(), semantic, partitions).await
    }

    /// [`Self::with_partitions`] on `broker`.
    pub async fn on(broker: TestBroker, semantic: &str, partitions: u32) -> Result<CopyJob> {
        let input = unique_topic(&format!("{semantic}-in"));
        let output = unique_topic(&format!("{semantic}-out"));
        if partitions == 0 {
            produce_input(&broker, &input).await?;
        } else {
            produce_partitioned_input(&broker, &input, partitions).await?;
        }
        let sql = job_sql(
            &broker,
            &format!("{semantic}-{}", now_ms()),
            &input,
            &output,
            semantic,
        );
        Self::assemble(broker, input, output, partitions, &sql)
    }

    /// A copy job of changelog rows (ADR 0016): `N` Debezium change events in, message `i` a create of
    /// row `i`, or for odd `i` an update of it (two rows: `-U` and `+U`); copied into a `debezium-json`
    /// topic, where a `-U` is written as a delete event. An output message counts as `2 seq` (a create)
    /// or `2 seq + 1` (a delete): every input gives `2 i`, an odd one `2 i + 1` as well.
    pub async fn changelog(semantic: &str) -> Result<CopyJob> {
        let broker = TestBroker::get();
        let input = unique_topic(&format!("{semantic}-cdc-in"));
        let output = unique_topic(&format!("{semantic}-cdc-out"));
        let events = (0..N)
            .map(|i| {
                let row = |p: &str| format!(r#"{{"seq":{i},"payload":"{p}-{i:08}"}}"#);
                if i % 2 == 1 {
                    format!(
                        r#"{{"before":{},"after":{},"op":"u"}}"#,
                        row("old"),
                        row("new")
                    )
                } else {
                    format!(r#"{{"before":null,"after":{},"op":"c"}}"#, row("row"))
                }
            })
            .collect();
        produce_payloads(&broker, &input, events).await?;
        let sql = job_sql_in(
            &broker,
            &format!("{semantic}-cdc-{}", now_ms()),
            (&input, "debezium-json"),
            (&output, "debezium-json"),
            semantic,
        );
        let mut job = Self::assemble(broker, input, output, 0, &sql)?;
        job.output_key = |v| match v["op"].as_str()? {
            "c" => Some(2 * v["after"]["seq"].as_u64()?),
            "d" => Some(2 * v["before"]["seq"].as_u64()? + 1),
            _ => None,
        };
        job.outputs = (N + N / 2) as usize;
        Ok(job)
    }

    fn assemble(
        broker: TestBroker,
        input: String,
        output: String,
        partitions: u32,
        sql: &str,
    ) -> Result<CopyJob> {
        let tmp = tempfile::tempdir()?;
        let job = tmp.path().join("job.sql");
        std::fs::write(&job, sql)?;
        Ok(CopyJob {
            state: tmp.path().join("state"),
            stateless: false,
            partitions,
            output_key: seq_of,
            outputs: N as usize,
            log: tmp.path().join("job.log"),
            job,
            broker,
            input,
            output,
            _tmp: tmp,
        })
    }

    /// Starts the binary on the job (restoring from the state dir when it holds a checkpoint).
    pub fn spawn(&self) -> Child {
        let state = (!self.stateless).then_some(self.state.as_path());
        spawn(&self.job, state, &self.log)
    }

    /// Sets `parallelism.default` for the next runs (none: the default).
    pub fn set_parallelism(&self, n: Option<usize>) {
        let text = std::fs::read_to_string(&self.job).unwrap();
        let mut lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("SET 'parallelism.default'"))
            .collect();
        let set = n.map(|n| format!("SET 'parallelism.default' = '{n}';"));
        if let Some(set) = &set {
            lines.insert(0, set);
        }
        std::fs::write(&self.job, lines.join("\n")).unwrap();
    }

    /// Replaces `from` by `to` in the job file (for the next runs).
    pub fn edit_job(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.job).unwrap();
        assert!(text.contains(from), "the job has no {from:?}");
        std::fs::write(&self.job, text.replace(from, to)).unwrap();
    }

    /// Starts a run and SIGKILLs it as soon as its subscription exists (before its first checkpoint
    /// committed much); returns the subscription's name.
    pub async fn subscribe_then_crash(&self) -> Result<String> {
        let mut child = self.spawn();
        let path = self
            .input
            .strip_prefix("persistent://")
            .unwrap_or(&self.input);
        let deadline = Instant::now() + Duration::from_secs(60);
        let subscription = loop {
            if Instant::now() > deadline {
                child.kill().ok();
                child.wait().ok();
                panic!("no subscription; log:\n{}", self.log_text());
            }
            // On a just-started broker the first run can fail before the transaction coordinator is
            // loaded: restart it, as a supervisor would.
            if child.try_wait()?.is_some() {
                child = self.spawn();
            }
            // Not there yet (or the topic's stats not ready): ask again.
            let stats: serde_json::Value = self
                .broker
                .admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            if let Some(s) = stats["subscriptions"]
                .as_object()
                .and_then(|s| s.keys().find(|k| k.starts_with("pulsar-connect")).cloned())
            {
                break s;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        child.kill().ok(); // SIGKILL
        child.wait()?;
        Ok(subscription)
    }

    /// What a run that died between its sink's acknowledgement and its commit leaves behind, made with
    /// the official protocol: a transaction (timing out after `timeout`) that acknowledges the next 100
    /// inputs on `subscription` — cumulatively, or entry by entry when the subscription is not Exclusive —
    /// and holds a bogus output row (`seq` 4 000 000 000), never committed.
    pub async fn leave_open_transaction(
        &self,
        subscription: &str,
        kind: magnetar::proto::pb::command_subscribe::SubType,
        timeout: Duration,
    ) -> Result<()> {
        use magnetar::proto::pb::command_subscribe::SubType;
        let client = self.broker.client().await?;
        let consumer = client
            .consumer(&self.input)
            .subscription(subscription)
            .subscription_type(kind)
            .subscribe()
            .await?;
        let mut entries: Vec<magnetar::MessageId> = Vec::new();
        for _ in 0..100 {
            let m = tokio::time::timeout(Duration::from_secs(20), consumer.receive()).await??;
            push_entry(&mut entries, m.message_id);
        }
        let txn = client.new_transaction(timeout).await?;
        client
            .register_subscription_to_transaction(txn, self.input.clone(), subscription.to_owned())
            .await?;
        client
            .register_partition_to_transaction(txn, self.output.clone())
            .await?;
        if kind == SubType::Exclusive {
            let last = *entries.last().expect("received");
            consumer.ack_cumulative_with_txn(last, txn.id()).await?;
        } else {
            consumer.ack_batch_with_txn(entries, txn.id()).await?;
        }
        let producer = client.producer(&self.output).create().await?;
        producer
            .send(
                OutgoingMessage::with_payload(br#"{"seq":4000000000,"payload":"stale"}"#.to_vec())
                    .txn(txn.id())
                    .into(),
            )
            .await?;
        producer.close().await?;
        consumer.close().await?;
        client.close().await;
        Ok(())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the job's subscription on the input has no backlog: every input row is covered by a
    /// completed checkpoint (the position is committed when a checkpoint completes).
    pub fn input_consumed(&self) -> bool {
        self.subscription_stats()
            .is_some_and(|s| s["msgBacklog"].as_u64() == Some(0))
    }

    /// The broker's stats of the job's subscription on the input (of all partitions together), if it
    /// has one yet.
    pub fn subscription_stats(&self) -> Option<serde_json::Value> {
        let path = self
            .input
            .strip_prefix("persistent://")
            .unwrap_or(&self.input);
        let stats = if self.partitions > 0 {
            "partitioned-stats"
        } else {
            "stats"
        };
        let stats = self
            .broker
            .admin("GET", &format!("/admin/v2/persistent/{path}/{stats}"), None)
            .ok()?;
        let mut v = serde_json::from_str::<serde_json::Value>(&stats).ok()?;
        let subs = v["subscriptions"].as_object_mut()?;
        let name = subs
            .keys()
            .find(|k| k.starts_with("pulsar-connect"))?
            .clone();
        subs.remove(&name)
    }

    /// Consumers attached to the job's subscription (on any partition).
    fn consumers(&self) -> usize {
        self.subscription_stats()
            .and_then(|s| s["consumers"].as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// Runs `child` (restarting the job whenever it exits, as a supervisor would) until the input is
    /// consumed, stops it gracefully and returns how often each sequence number is in the output, with
    /// the ERROR/WARN lines of the log. `restarts` counts the restarts.
    pub async fn finish(
        &self,
        mut child: Child,
        restarts: &mut usize,
    ) -> Result<(BTreeMap<u64, usize>, String)> {
        let deadline = Instant::now() + Duration::from_secs(180);
        // Every run gets time to start (install its signal handler, settle the restored checkpoint's
        // transactions) before it is judged or stopped: a SIGTERM before the handler kills it outright.
        const START_UP: Duration = Duration::from_secs(2);
        tokio::time::sleep(START_UP).await;
        loop {
            assert!(
                Instant::now() < deadline,
                "the input was not consumed and the job did not stop cleanly within 180 s; log:\n{}",
                self.log_text()
            );
            if child.try_wait()?.is_some() {
                // It gave up (e.g. the broker was away): restart it from its checkpoint.
                *restarts += 1;
                child = self.spawn();
                tokio::time::sleep(START_UP).await;
                continue;
            }
            if !self.input_consumed() {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            // SAFETY: SIGTERM to our own child: graceful stop with a final checkpoint and commit.
            unsafe {
                libc_kill(child.id() as i32);
            }
            if child.wait()?.success() {
                break;
            }
            // The final checkpoint failed (a supervisor restarts the job; so do we).
            *restarts += 1;
            child = self.spawn();
            tokio::time::sleep(START_UP).await;
        }
        let log_text = self.log_text();
        let counts =
            read_output_by(&self.broker, &self.output, self.outputs, self.output_key).await?;
        let warnings = log_text
            .lines()
            .filter(|l| l.contains("ERROR") || l.contains("WARN"))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n");
        Ok((counts, warnings))
    }
}

/// Copies with the binary under `semantic`, killed with SIGKILL `rounds` times at random points and
/// restarted from its checkpoints, then run until the input is consumed and stopped gracefully.
pub async fn copy_with_kills(
    semantic: &str,
    rounds: usize,
) -> Result<(BTreeMap<u64, usize>, String)> {
    copy_with_kills_from(&CopyJob::new(semantic).await?, rounds).await
}

/// [`copy_with_kills`] for a prepared job (e.g. one without a state directory).
pub async fn copy_with_kills_from(
    job: &CopyJob,
    rounds: usize,
) -> Result<(BTreeMap<u64, usize>, String)> {
    copy_with_kills_each(job, rounds, |_| {}).await
}

/// [`copy_with_kills_from`], calling `before(round)` before each run (the last one is round `rounds`),
/// e.g. to change the job file.
///
/// Each kill lands with work in flight: the input's dispatch is throttled so that the killed runs
/// cannot copy it all, every run is killed at a random point 0.3–2.3 s after it attached its consumers, and
/// at each kill rows must have been delivered to the run and a backlog be left (the figures are printed). The last run goes
/// unthrottled.
pub async fn copy_with_kills_each(
    job: &CopyJob,
    rounds: usize,
    before: impl Fn(usize),
) -> Result<(BTreeMap<u64, usize>, String)> {
    // Each killed run gets its input for at most 2.3 s: together at most ~3/5 of it (and a first burst).
    let per_second = (N as usize / (4 * rounds.max(1))).max(50) as u32;
    let per_partition = per_second / job.partitions.max(1);
    job.broker
        .throttle_dispatch(&job.input, Some(per_partition.max(10)))?;
    let mut seed = now_ms();
    let mut backlogs = Vec::with_capacity(rounds);
    for round in 0..rounds {
        before(round);
        let mut child = job.spawn();
        let deadline = Instant::now() + Duration::from_secs(60);
        while job.consumers() == 0 {
            if let Some(status) = child.try_wait()? {
                panic!(
                    "round {round}: the job exited before it attached ({status}):\n{}",
                    job.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no consumer attached within 60 s; log:\n{}",
                job.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // A pseudo-random point 0.3–2.3 s after the consumers attached.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(300 + (seed >> 33) % 2000));
        if let Some(status) = child.try_wait()? {
            panic!(
                "round {round}: the job exited early ({status}):\n{}",
                job.log_text()
            );
        }
        let stats = job.subscription_stats().unwrap_or_default();
        child.kill()?; // SIGKILL
        child.wait()?;
        let backlog = stats["msgBacklog"].as_u64().unwrap_or(0);
        let delivered: u64 = stats["consumers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["msgOutCounter"].as_u64())
            .sum();
        backlogs.push((delivered, backlog));
        // The next run's consumers are told from this one's by their absence in between.
        let deadline = Instant::now() + Duration::from_secs(30);
        while job.consumers() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    eprintln!(
        "{rounds} × kill -9 (dispatch {per_second} msg/s): (delivered to the run, backlog of {N}) at each kill {backlogs:?}"
    );
    // Most kills land with rows in flight (delivered to the run, more left to copy); a run that copied
    // nothing before its kill is what a stall looks like, and the last kills may find the input drained.
    let in_flight = backlogs.iter().filter(|(d, b)| *d > 0 && *b > 0).count();
    assert!(
        in_flight * 2 >= rounds,
        "only {in_flight} of {rounds} kills landed with rows in flight: {backlogs:?}; log:\n{}",
        job.log_text()
    );
    job.broker.throttle_dispatch(&job.input, None)?;
    let mut restarts = 0;
    before(rounds);
    let result = job.finish(job.spawn(), &mut restarts).await?;
    assert_eq!(
        restarts,
        0,
        "the last run failed on its own; log:\n{}",
        job.log_text()
    );
    Ok(result)
}

/// Asserts that every input sequence number is in the output exactly once.
pub fn assert_exactly_once(counts: &BTreeMap<u64, usize>, log: &str) {
    let missing = missing(counts);
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
}

pub fn missing(counts: &BTreeMap<u64, usize>) -> Vec<u64> {
    (0..u64::from(N))
        .filter(|s| !counts.contains_key(s))
        .collect()
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill_raw(pid: i32, sig: i32) -> i32;
}

pub unsafe fn libc_kill(pid: i32) {
    // SAFETY: plain kill(2) on a child pid with SIGTERM (15).
    unsafe {
        libc_kill_raw(pid, 15);
    }
}

/// Runs the binary on `job` until it ends by itself (a bounded input), at most `within`; fails when it
/// does not end in time or ends with an error (the log says why).
pub async fn run_to_end(job: &Path, state: &Path, log: &Path, within: Duration) -> Result<()> {
    let log_text = || std::fs::read_to_string(log).unwrap_or_default();
    let mut child = spawn(job, Some(state), log);
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait()?;
            anyhow::bail!("the run did not finish within {within:?}:\n{}", log_text());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    anyhow::ensure!(
        status.success(),
        "the run failed ({status}):\n{}",
        log_text()
    );
    Ok(())
}

/// Every id `0..rows` exactly once in the json rows `{"id": ..}` of (non-partitioned) `output`.
pub async fn assert_each_id_once(
    broker: &TestBroker,
    output: &str,
    rows: u64,
    log: &str,
) -> Result<()> {
    let counts = read_output_by(broker, output, rows as usize, |v| v["id"].as_u64()).await?;
    let missing = (0..rows).filter(|i| !counts.contains_key(i)).count();
    let twice = counts.values().filter(|&&n| n > 1).count();
    anyhow::ensure!(
        missing == 0 && twice == 0 && counts.len() == rows as usize,
        "{missing} id(s) missing, {twice} more than once, {} distinct of {rows}; log:\n{log}",
        counts.len()
    );
    Ok(())
}
