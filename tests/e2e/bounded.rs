//! Bounded reads (issue 51): `source.stop.*` ends each partition at its cursor while the topic keeps
//! receiving messages, the job takes a final checkpoint and ends by itself, a restart keeps the end it
//! resolved, and partitions with nothing to read end at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use magnetar::{MessageId, OutgoingMessage, PulsarClient};
use pulsar_connect::connector_api::telemetry::OWNED_SPLITS;
use pulsar_connect::pulsar::message_id::format_message_id;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

/// How long a bounded job may take to end by itself.
pub(crate) const END: Duration = Duration::from_secs(90);

/// Ids the feeder sends while a job runs: none of them may be read.
const FED: u64 = 1_000_000;

fn row(id: u64) -> Vec<u8> {
    format!(r#"{{"id":{id}}}"#).into_bytes()
}

/// Sends `ids` to `topic` one by one; returns their message ids.
pub(crate) async fn send(
    client: &PulsarClient,
    topic: &str,
    ids: impl IntoIterator<Item = u64>,
) -> Result<Vec<MessageId>> {
    let producer = client.producer(topic).create().await?;
    let mut sent = Vec::new();
    for id in ids {
        sent.push(
            producer
                .send(OutgoingMessage::with_payload(row(id)).into())
                .await?,
        );
    }
    producer.close().await?;
    Ok(sent)
}

/// Keeps sending ids from [`FED`] up to every one of `topics` until stopped.
struct Feeder {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Result<u64>>,
}

impl Feeder {
    fn start(client: PulsarClient, topics: Vec<String>) -> Feeder {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut producers = Vec::new();
            for t in &topics {
                producers.push(client.producer(t).create().await?);
            }
            let mut next = FED;
            while !flag.load(Ordering::Relaxed) {
                for p in &producers {
                    p.send(OutgoingMessage::with_payload(row(next)).into())
                        .await?;
                    next += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for p in producers {
                p.close().await?;
            }
            Ok(next - FED)
        });
        Feeder { stop, task }
    }

    /// Stops it; returns how many messages it sent.
    async fn stop(self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?
    }
}

pub(crate) fn job(broker: &TestBroker, topic: &str, stop: &str) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
        CREATE TABLE src (id BIGINT) WITH (
            'connector' = 'pulsar',
            'topic' = '{topic}',
            'service-url' = '{}',
            'admin-url' = '{}',
            'format' = 'json',
            'scan.startup.mode' = 'earliest',
            {stop}
        );
        CREATE TABLE out (id BIGINT) WITH ('connector' = 'collect');
        INSERT INTO out SELECT id FROM src;",
        broker.service_url, broker.admin_url
    )
}

/// The ids of collected rows (`+I[<id>]`), sorted, and any id collected twice.
fn ids(rows: &[String]) -> (Vec<u64>, Vec<u64>) {
    let mut count: BTreeMap<u64, u32> = BTreeMap::new();
    for r in rows {
        let id = r
            .trim_start_matches("+I[")
            .trim_end_matches(']')
            .parse()
            .unwrap_or_else(|_| panic!("unexpected row {r}"));
        *count.entry(id).or_default() += 1;
    }
    let twice = count
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    (count.into_keys().collect(), twice)
}

/// Every id of `want` once, nothing else.
pub(crate) fn assert_exactly(rows: &[String], want: impl IntoIterator<Item = u64>) {
    let (got, twice) = ids(rows);
    assert!(twice.is_empty(), "read twice: {twice:?}");
    let want: Vec<u64> = want.into_iter().collect();
    let beyond: Vec<u64> = got
        .iter()
        .copied()
        .filter(|id| !want.contains(id))
        .take(10)
        .collect();
    let missing: Vec<u64> = want
        .iter()
        .copied()
        .filter(|id| !got.contains(id))
        .take(10)
        .collect();
    assert!(
        beyond.is_empty() && missing.is_empty(),
        "{} rows read, {} wanted; beyond the cursor (first 10): {beyond:?}; missing (first 10): {missing:?}",
        got.len(),
        want.len()
    );
}

/// Waits until the job's readers are open (their ends resolved).
async fn wait_reading(job: &RunningJob, splits: i64) {
    let gauge = job.metrics.telemetry("src").gauge(OWNED_SPLITS);
    for _ in 0..300 {
        if gauge.get() >= splits || job.is_finished() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the job never read {splits} splits");
}

pub(crate) fn partitions(topic: &str, n: u32) -> Vec<String> {
    (0..n).map(|p| format!("{topic}-partition-{p}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_reads_what_each_partition_held_when_it_opened() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-latest");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    for (p, t) in partitions(&topic, 2).iter().enumerate() {
        let base = p as u64 * 1000;
        send(&client, t, base..base + 300).await?;
    }
    let job = RunningJob::start(
        &job(&broker, &topic, "'source.stop.at-message-id' = 'latest'"),
        None,
    )
    .await?;
    wait_reading(&job, 2).await;
    let feeder = Feeder::start(client, partitions(&topic, 2));
    let (summary, rows) = job.finish(END).await?;
    let fed = feeder.stop().await?;
    assert_exactly(&rows, (0..300).chain(1000..1300));
    assert!(summary.checkpoints >= 1, "a final checkpoint: {summary:?}");
    eprintln!("latest: 600 rows read, {fed} messages fed meanwhile and not read");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_publish_time_ends_each_partition_before_the_time() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-time");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    for (p, t) in partitions(&topic, 2).iter().enumerate() {
        let base = p as u64 * 1000;
        send(&client, t, base..base + 200).await?;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cut = now_ms();
    tokio::time::sleep(Duration::from_millis(20)).await;
    for (p, t) in partitions(&topic, 2).iter().enumerate() {
        let base = p as u64 * 1000 + 500;
        send(&client, t, base..base + 200).await?;
    }
    let feeder = Feeder::start(client, partitions(&topic, 2));
    let job = RunningJob::start(
        &job(
            &broker,
            &topic,
            &format!("'source.stop.at-publish-time' = '{cut}'"),
        ),
        None,
    )
    .await?;
    let (_, rows) = job.finish(END).await?;
    feeder.stop().await?;
    assert_exactly(&rows, (0..200).chain(1000..1200));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_id_cursors_stop_before_and_after_the_message() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-id");
    let client = broker.client().await?;
    let sent = send(&client, &topic, 0..100).await?;
    let feeder = Feeder::start(client, vec![topic.clone()]);
    let at = format_message_id(&sent[60]);
    let job_at = RunningJob::start(
        &job(
            &broker,
            &topic,
            &format!("'source.stop.at-message-id' = '{at}'"),
        ),
        None,
    )
    .await?;
    let (_, rows) = job_at.finish(END).await?;
    assert_exactly(&rows, 0..60);
    let job_after = RunningJob::start(
        &job(
            &broker,
            &topic,
            &format!("'source.stop.after-message-id' = '{at}'"),
        ),
        None,
    )
    .await?;
    let (_, rows) = job_after.finish(END).await?;
    assert_exactly(&rows, 0..=60);
    feeder.stop().await?;
    Ok(())
}

/// Better than the peers: a cursor the partitions have not reached ends each at its last message, and
/// an empty partition at once, instead of waiting for a message that may never come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_short_of_the_cursor_or_empty_end_at_once() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-short");
    broker.create_partitioned_topic(&topic, 3)?;
    let client = broker.client().await?;
    let names = partitions(&topic, 3);
    send(&client, &names[0], 0..50).await?;
    send(&client, &names[1], 1000..1050).await?;
    let job = RunningJob::start(
        &job(
            &broker,
            &topic,
            "'source.stop.after-message-id' = '9000000000000000000:0:0'",
        ),
        None,
    )
    .await?;
    wait_reading(&job, 3).await;
    let feeder = Feeder::start(client, names[..2].to_vec());
    let (_, rows) = job.finish(END).await?;
    feeder.stop().await?;
    assert_exactly(&rows, (0..50).chain(1000..1050));
    Ok(())
}

/// A backfill stopped midway and started again from its checkpoint ends where it first resolved
/// `latest`, not at the newer last message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_backfill_keeps_the_end_it_resolved() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-restart");
    let client = broker.client().await?;
    send(&client, &topic, 0..2000).await?;
    broker.throttle_dispatch(&topic, Some(400))?;
    let state = tempfile::tempdir()?;
    // Named: a job id that stays when the stop option is edited below.
    let sql = format!(
        "SET 'pipeline.name' = 'backfill-{}';\n{}",
        now_ms(),
        job(&broker, &topic, "'source.stop.at-message-id' = 'latest'")
    );
    let first = RunningJob::start(&sql, Some(state.path())).await?;
    first.wait_rows(300, END).await?;
    let (_, mut rows) = first.stop().await?;
    assert!(
        rows.len() < 2000,
        "the first run stopped midway: {} rows",
        rows.len()
    );
    let fed = send(&client, &topic, FED..FED + 500).await?;
    broker.throttle_dispatch(&topic, None)?;
    let second = RunningJob::start(&sql, Some(state.path())).await?;
    let (summary, more) = second.finish(END).await?;
    assert!(summary.restored_from.is_some(), "restored: {summary:?}");
    rows.extend(more);
    assert_exactly(&rows, 0..2000);
    // The stop option edited: the next run from the same state resolves the end for the new cursor
    // (the recorded end names the cursor it was resolved for) and reads on up to it.
    let cursor = format_message_id(&fed[99]);
    let sql = sql.replace(
        "'source.stop.at-message-id' = 'latest'",
        &format!("'source.stop.after-message-id' = '{cursor}'"),
    );
    let third = RunningJob::start(&sql, Some(state.path())).await?;
    let (summary, more) = third.finish(END).await?;
    assert!(summary.restored_from.is_some(), "restored: {summary:?}");
    assert_exactly(&more, FED..FED + 100);
    Ok(())
}

/// The table is declared unbounded from `latest`; a query's OPTIONS hint makes it a backfill of what the
/// topic holds, which ends by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_options_hint_turns_a_query_into_a_backfill() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-hint");
    let client = broker.client().await?;
    send(&client, &topic, 0..500).await?;
    let feeder = Feeder::start(client, vec![topic.clone()]);
    let sql = job(&broker, &topic, "'pulsar.reader.receiver-queue-size' = '100'")
        .replace("'scan.startup.mode' = 'earliest',", "'scan.startup.mode' = 'latest',")
        .replace(
            "FROM src;",
            "FROM src /*+ OPTIONS('scan.startup.mode' = 'earliest', 'source.stop.at-message-id' = 'latest') */;",
        );
    let job = RunningJob::start(&sql, None).await?;
    let (_, rows) = job.finish(END).await?;
    feeder.stop().await?;
    let (got, twice) = ids(&rows);
    assert!(twice.is_empty(), "read twice: {twice:?}");
    // Everything sent before the job started, and whatever the feeder had sent before the reader
    // opened (the end is the last message then); nothing after.
    assert!(
        got.starts_with(&(0..500).collect::<Vec<_>>()),
        "{} rows",
        got.len()
    );
    assert!(got[500..].iter().all(|id| *id >= FED), "{got:?}");
    let fed: Vec<u64> = got[500..].to_vec();
    assert!(
        fed.windows(2).all(|w| w[1] == w[0] + 1),
        "a gap among the fed rows: {fed:?}"
    );
    Ok(())
}

/// Sends `{"seq": s, "payload": "p<s>"}` for each of `seqs` to `topic` (the copy job's input rows).
pub(crate) async fn send_seq(
    client: &PulsarClient,
    topic: &str,
    seqs: impl IntoIterator<Item = u64>,
) -> Result<()> {
    let producer = client.producer(topic).create().await?;
    for seq in seqs {
        let row = format!(r#"{{"seq":{seq},"payload":"p{seq}"}}"#);
        producer
            .send(OutgoingMessage::with_payload(row.into_bytes()).into())
            .await?;
    }
    producer.close().await?;
    Ok(())
}

/// The copy job (`exactly_once::copy_job::job_sql`) with `source` added to its source table's options,
/// written into a fresh directory; the directory and the job file.
pub(crate) fn bounded_copy_job(
    broker: &TestBroker,
    (input, output): (&str, &str),
    semantic: &str,
    source: &str,
) -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    let sql = crate::exactly_once::copy_job::job_sql(
        broker,
        &format!("bounded-copy-{}", now_ms()),
        input,
        output,
        semantic,
    )
    .replace(
        "'scan.startup.mode' = 'earliest');",
        &format!("'scan.startup.mode' = 'earliest', {source});"),
    );
    anyhow::ensure!(sql.contains(source), "{sql}");
    let dir = tempfile::tempdir()?;
    let job = dir.path().join("job.sql");
    std::fs::write(&job, sql)?;
    Ok((dir, job))
}

/// Waits at most [`END`] for `child` to end by itself; its exit status must be success.
pub(crate) async fn wait_success(
    child: &mut std::process::Child,
    log: &std::path::Path,
) -> Result<()> {
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > END {
            child.kill().ok();
            anyhow::bail!(
                "the job did not end by itself within {END:?}:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    anyhow::ensure!(
        status.success(),
        "exit {status}:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    Ok(())
}

/// Two processes of the same job file started together, each with a state directory and a log of its
/// own in `dir` (`state-a`, `a.log`; `state-b`, `b.log`): processes sharing the job's subscriptions.
pub(crate) struct TwoProcesses {
    pub children: [std::process::Child; 2],
    pub logs: [std::path::PathBuf; 2],
}

impl TwoProcesses {
    pub(crate) fn spawn(job: &std::path::Path, dir: &std::path::Path) -> TwoProcesses {
        use crate::exactly_once::copy_job::spawn;
        let logs = [dir.join("a.log"), dir.join("b.log")];
        let children = [
            spawn(job, Some(&dir.join("state-a")), &logs[0]),
            spawn(job, Some(&dir.join("state-b")), &logs[1]),
        ];
        TwoProcesses { children, logs }
    }

    /// Waits for both to end by themselves with success ([`wait_success`]); both are waited for before
    /// the first failure is returned.
    pub(crate) async fn wait_success(&mut self) -> Result<()> {
        let mut ended = Ok(());
        for (child, log) in self.children.iter_mut().zip(&self.logs) {
            if let Err(e) = wait_success(child, log).await {
                ended = ended.and(Err(e));
            }
        }
        ended
    }
}

/// `run` of a bounded exactly-once Pulsar → Pulsar copy: the job ends by itself with exit code 0 after its
/// final checkpoint, and the output holds every input row once, committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_ends_a_bounded_exactly_once_copy_with_exit_code_0() -> Result<()> {
    use crate::exactly_once::copy_job::{read_output, spawn};
    let broker = TestBroker::get();
    let input = unique_topic("bounded-run-in");
    let output = unique_topic("bounded-run-out");
    send_seq(&broker.client().await?, &input, 0..3000).await?;
    let (dir, job) = bounded_copy_job(
        &broker,
        (&input, &output),
        "exactly-once",
        "'source.stop.at-message-id' = 'latest'",
    )?;
    let log = dir.path().join("job.log");
    let mut child = spawn(&job, Some(&dir.path().join("state")), &log);
    wait_success(&mut child, &log).await?;
    let counts = read_output(&broker, &output, 3000).await?;
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(10).collect();
    assert!(twice.is_empty(), "duplicated: {twice:?}");
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (0..3000).collect::<Vec<_>>(),
        "every input row once"
    );
    Ok(())
}

/// Key-hash ranges (`enable-key-hash-range`, two readers per split, each on a subscription of its own):
/// each range reader ends at the split's end, and the job ends with every row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_hash_range_readers_end_too() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-ranges");
    let client = broker.client().await?;
    let producer = client.producer(&topic).create().await?;
    for id in 0..400u64 {
        let m = OutgoingMessage::with_payload(row(id)).key(format!("k{}", id % 37));
        producer.send(m.into()).await?;
    }
    producer.close().await?;
    let feeder = Feeder::start(client, vec![topic.clone()]);
    let sql = job(
        &broker,
        &topic,
        "'source.stop.at-message-id' = 'latest', 'enable-key-hash-range' = 'true', 'scan.parallelism' = '2'",
    );
    let job = RunningJob::start(&sql, None).await?;
    let (_, rows) = job.finish(END).await?;
    feeder.stop().await?;
    let (got, twice) = ids(&rows);
    assert!(twice.is_empty(), "read twice: {twice:?}");
    // The feeder may have written before the readers opened (their end is the last message then).
    assert_eq!(
        got.iter()
            .filter(|id| **id < FED)
            .copied()
            .collect::<Vec<_>>(),
        (0..400).collect::<Vec<_>>()
    );
    Ok(())
}

/// A bounded copy run by two processes sharing the job's Failover subscriptions: each reads the
/// partitions the broker makes it the active reader of up to their end, waits until the broker's choice
/// has settled, and ends; a partition left by the first process to end moves to the other. Both exit 0
/// and every input row is in the output (at-least-once: at least once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_failover_processes_each_end_after_their_partitions() -> Result<()> {
    use crate::exactly_once::copy_job::read_output;
    let broker = TestBroker::get();
    let input = unique_topic("bounded-failover-in");
    let output = unique_topic("bounded-failover-out");
    broker.create_partitioned_topic(&input, 4)?;
    let client = broker.client().await?;
    for p in 0..4u64 {
        send_seq(
            &client,
            &format!("{input}-partition-{p}"),
            p * 1000..p * 1000 + 500,
        )
        .await?;
    }
    let (dir, job) = bounded_copy_job(
        &broker,
        (&input, &output),
        "at-least-once",
        "'subscription-type' = 'Failover', 'source.stop.at-message-id' = 'latest'",
    )?;
    TwoProcesses::spawn(&job, dir.path()).wait_success().await?;
    let counts = read_output(&broker, &output, 2000).await?;
    let want: Vec<u64> = (0..4u64).flat_map(|p| p * 1000..p * 1000 + 500).collect();
    let missing: Vec<u64> = want
        .iter()
        .copied()
        .filter(|s| !counts.contains_key(s))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "missing (first 10): {missing:?}");
    assert!(
        counts.keys().all(|s| want.contains(s)),
        "rows beyond the input"
    );
    Ok(())
}
