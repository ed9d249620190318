//! Bounded reads over subscriptions that dispatch to several consumers (ADR 0028): two processes share
//! the job's `Shared` or `Key_Shared` subscriptions while a feeder keeps writing; each ends when every
//! message up to its end is acknowledged by the two together, and every partition's output is the
//! input's first rows without a gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, unique_topic};

use crate::bounded::{TwoProcesses, bounded_copy_job, send_seq, wait_success};
use crate::exactly_once::copy_job::read_output;

/// The `seq` of partition `p`'s rows starts at `p * PER_PARTITION`.
const PER_PARTITION: u64 = 1_000_000;

/// Rows each partition holds before the job starts.
const BEFORE: u64 = 500;

/// Appends rows to each partition, continuing its sequence, until stopped; returns how many it wrote.
fn feed(
    client: magnetar::PulsarClient,
    partitions: Vec<String>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Result<u64>> {
    tokio::spawn(async move {
        let mut producers = Vec::new();
        for t in &partitions {
            producers.push(client.producer(t).create().await?);
        }
        let mut next = BEFORE;
        while !stop.load(Ordering::Relaxed) {
            for (p, producer) in producers.iter().enumerate() {
                let seq = p as u64 * PER_PARTITION + next;
                let row = format!(r#"{{"seq":{seq},"payload":"fed"}}"#);
                let m =
                    OutgoingMessage::with_payload(row.into_bytes()).key(format!("k{}", seq % 13));
                producer.send(m.into()).await?;
            }
            next += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for producer in producers {
            producer.close().await?;
        }
        Ok(next - BEFORE)
    })
}

async fn two_processes_end_together(kind: &str, semantic: &str) -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("bounded-shared-in");
    let output = unique_topic("bounded-shared-out");
    broker.create_partitioned_topic(&input, 4)?;
    let client = broker.client().await?;
    let partitions: Vec<String> = (0..4).map(|p| format!("{input}-partition-{p}")).collect();
    for (p, topic) in partitions.iter().enumerate() {
        let first = p as u64 * PER_PARTITION;
        send_seq(&client, topic, first..first + BEFORE).await?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feed(client, partitions, stop.clone());
    let (dir, job) = bounded_copy_job(
        &broker,
        (&input, &output),
        semantic,
        &format!("'subscription-type' = '{kind}', 'source.stop.at-message-id' = 'latest'"),
    )?;
    let ended = TwoProcesses::spawn(&job, dir.path()).wait_success().await;
    stop.store(true, Ordering::Relaxed);
    let fed = feeder.await??;
    ended?;
    let counts = read_output(&broker, &output, 4 * BEFORE as usize).await?;
    for p in 0..4u64 {
        let got: Vec<u64> = counts
            .keys()
            .filter(|s| **s / PER_PARTITION == p)
            .map(|s| s % PER_PARTITION)
            .collect();
        // Each process ends its reading of a partition at the last message when it opened; the
        // partition's output ends at the later of the two, with nothing missing before it.
        assert!(
            got.len() as u64 >= BEFORE && got.len() as u64 <= BEFORE + fed,
            "partition {p}: {} rows (fed {fed})",
            got.len()
        );
        let gaps: Vec<_> = got
            .iter()
            .enumerate()
            .filter(|(i, s)| *i as u64 != **s)
            .take(5)
            .collect();
        assert!(
            gaps.is_empty(),
            "partition {p}: a gap at (index, seq) {gaps:?}"
        );
    }
    if semantic == "exactly-once" {
        let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(10).collect();
        assert!(twice.is_empty(), "duplicated: {twice:?}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shared_processes_end_together() -> Result<()> {
    two_processes_end_together("Shared", "at-least-once").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_key_shared_exactly_once_processes_end_together() -> Result<()> {
    two_processes_end_together("Key_Shared", "exactly-once").await
}

/// `source.stop.at-message-id` with two Shared processes: each ends when the entry after the
/// subscription's mark-delete position is the cursor's (the probe reads it), and the output is exactly
/// the rows before the cursor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shared_processes_stop_before_a_message_id() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("bounded-shared-id-in");
    let output = unique_topic("bounded-shared-id-out");
    let client = broker.client().await?;
    let producer = client.producer(&input).create().await?;
    let mut ids = Vec::new();
    for seq in 0..600u64 {
        let row = format!(r#"{{"seq":{seq},"payload":"p{seq}"}}"#);
        ids.push(
            producer
                .send(OutgoingMessage::with_payload(row.into_bytes()).into())
                .await?,
        );
    }
    producer.close().await?;
    let cursor = pulsar_connect::pulsar::message_id::format_message_id(&ids[400]);
    let (dir, job) = bounded_copy_job(
        &broker,
        (&input, &output),
        "at-least-once",
        &format!("'subscription-type' = 'Shared', 'source.stop.at-message-id' = '{cursor}'"),
    )?;
    TwoProcesses::spawn(&job, dir.path()).wait_success().await?;
    let counts = read_output(&broker, &output, 400).await?;
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        (0..400).collect::<Vec<_>>(),
        "exactly the rows before {cursor}"
    );
    Ok(())
}

/// One of two Shared processes killed midway through a backfill: what it had received and not
/// acknowledged goes back to the survivor, which ends only once every message up to its end is
/// acknowledged; every input row is in the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_shared_process_leaves_its_share_to_the_other() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("bounded-shared-kill-in");
    let output = unique_topic("bounded-shared-kill-out");
    let client = broker.client().await?;
    send_seq(&client, &input, 0..3000).await?;
    // Slow enough that the kill lands in the middle of the read.
    broker.throttle_dispatch(&input, Some(600))?;
    let (dir, job) = bounded_copy_job(
        &broker,
        (&input, &output),
        "at-least-once",
        "'subscription-type' = 'Shared', 'source.stop.at-message-id' = 'latest'",
    )?;
    let TwoProcesses { mut children, logs } = TwoProcesses::spawn(&job, dir.path());
    tokio::time::sleep(Duration::from_secs(3)).await;
    anyhow::ensure!(
        children[0].try_wait()?.is_none(),
        "the first process ended before the kill:\n{}",
        std::fs::read_to_string(&logs[0]).unwrap_or_default()
    );
    children[0].kill()?;
    children[0].wait()?;
    broker.throttle_dispatch(&input, None)?;
    wait_success(&mut children[1], &logs[1]).await?;
    let counts = read_output(&broker, &output, 3000).await?;
    let missing: Vec<u64> = (0..3000)
        .filter(|s| !counts.contains_key(s))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "missing (first 10): {missing:?}");
    assert!(counts.keys().all(|s| *s < 3000), "rows beyond the input");
    Ok(())
}
