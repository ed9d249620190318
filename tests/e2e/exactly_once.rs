//! Exactly-once Pulsar → Pulsar: a sequence-numbered input topic copied by the real binary with
//! `'sink.semantic' = 'exactly-once'`, killed with SIGKILL at random points and restarted from its checkpoints;
//! the output (as a reader sees it: committed transactions only) must hold every input exactly once.
//! Needs the broker, the built plugins and the release binary (`cargo xtask test` provides all three).

use std::time::Duration;

use anyhow::Result;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

#[path = "cluster.rs"]
#[allow(dead_code)] // shared with fresh_broker.rs (`broker_restart`), which uses the rest
pub(crate) mod cluster;
#[path = "copy_job.rs"]
pub(crate) mod copy_job;
use copy_job::{
    CopyJob, assert_exactly_once, copy_with_kills, copy_with_kills_from, job_sql, missing,
};

const ROUNDS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_twenty_times_and_the_output_holds_every_input_once() -> Result<()> {
    let (counts, log) = copy_with_kills("exactly-once", ROUNDS).await?;
    assert_exactly_once(&counts, &log);
    Ok(())
}

/// End to end without the state directory: every run starts from scratch (as on another machine). The
/// source's acknowledgements are in the sink's transactions, so the subscription's cursor moves exactly
/// with the committed output and each run resumes where the committed output ends; a run killed between
/// acknowledging and committing leaves a transaction the next run aborts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_without_the_state_dir_and_the_output_holds_every_input_once() -> Result<()> {
    let mut job = CopyJob::new("exactly-once").await?;
    job.stateless = true;
    let (counts, warnings) = copy_with_kills_from(&job, 10).await?;
    let text = job.log_text();
    eprintln!(
        "without the state dir, 10 × kill -9: {} stale transactions of killed runs aborted at start",
        text.matches("aborted a transaction of an earlier run")
            .count()
    );
    for l in text
        .lines()
        .filter(|l| l.contains("aborted a transaction") || l.contains("ERROR"))
        .take(10)
    {
        eprintln!("  {l}");
    }
    assert!(
        text.contains("acknowledgements go into this sink's transactions"),
        "the source and the sink were not linked; log:\n{text}"
    );
    assert_exactly_once(&counts, &warnings);
    Ok(())
}

/// A run that died after its sink acknowledged the input inside a transaction and before the commit
/// leaves that transaction open, holding the acknowledgement (and rows) until it times out. Made here on
/// purpose with the official protocol: the next run, without a state directory, aborts it at start
/// (none of its rows become visible) and continues from the committed cursor; without that, every
/// acknowledgement of the new run would conflict with the stale one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_transaction_of_a_crashed_run_is_aborted_at_start() -> Result<()> {
    use magnetar::proto::pb::command_subscribe::SubType;
    let mut job = CopyJob::new("exactly-once").await?;
    job.stateless = true;
    // A first run subscribes, then dies (before its first checkpoint commits much).
    let subscription = job.subscribe_then_crash().await?;
    // The "crashed" transaction: the next 100 inputs acknowledged, a bogus row written, no commit.
    job.leave_open_transaction(&subscription, SubType::Exclusive, Duration::from_secs(120))
        .await?;

    let mut restarts = 0;
    let (counts, warnings) = job.finish(job.spawn(), &mut restarts).await?;
    let text = job.log_text();
    assert!(
        text.contains("aborted a transaction of an earlier run"),
        "the stale transaction was not aborted; log:\n{text}"
    );
    assert!(
        !counts.contains_key(&4_000_000_000),
        "the stale transaction's row is visible"
    );
    assert_exactly_once(&counts, &warnings);
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

/// A sink failing in the middle of a checkpoint period aborts its open transaction: none of its rows is
/// visible, and the topic's readers are not held back until the transaction times out (a later message
/// is read at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_exactly_once_sink_aborts_and_leaves_nothing_visible() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("eo-abort");
    // The broker refuses messages above 200 bytes on this topic: one row fails its send.
    broker.create_topic_with_max_message_size(&topic, 200)?;
    let rows: Vec<String> = (0..60)
        .map(|i| {
            let filler = if i == 40 {
                "x".repeat(400)
            } else {
                String::new()
            };
            format!("({i}, '{filler}')")
        })
        .collect();
    let sql = format!(
        "SET 'execution.checkpointing.interval' = '60s';
         CREATE TABLE t (n BIGINT, filler STRING) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
            'sink.semantic' = 'exactly-once', 'pulsar.producer.batchingEnabled' = 'false');
         INSERT INTO t VALUES {};",
        broker.service_url,
        rows.join(", ")
    );
    let job = RunningJob::start(&sql, None).await?;
    let err = job.failure(Duration::from_secs(60)).await;
    assert!(err.contains("table 't'"), "{err}");
    // A message written after the failure, outside any transaction, is the only one a reader sees.
    let client = broker.client().await?;
    let producer = client.producer(&topic).create().await?;
    producer
        .send(magnetar::OutgoingMessage::with_payload(b"after".to_vec()).into())
        .await?;
    producer.close().await?;
    let mut reader = SplitReader::open(
        &client,
        Split {
            topic: TopicName::parse(&topic)?,
            partition: -1,
        },
        &format!("verify-{}", now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        for m in reader.next_batch(100, Duration::from_millis(300)).await? {
            seen.push(String::from_utf8_lossy(&m.payload).into_owned());
        }
        if !seen.is_empty() {
            // Anything of the aborted transaction would have come before the marker.
            break;
        }
    }
    reader.close().await.ok();
    assert_eq!(seen, vec!["after".to_owned()]);
    Ok(())
}
