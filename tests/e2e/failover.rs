//! Scale-out through a Failover subscription (issue 17 §2): several processes run the same job file and
//! share the partitions of its input; when one dies (SIGKILL) the broker moves its partitions to the
//! others, which resume at the subscription's cursor; a process that joins later takes partitions over.
//! At-least-once: at the end the output holds every input row (rows the killed process read after its
//! last completed checkpoint are read again by the new owner: 3 333 duplicates in one of five runs).
//! Every process's log shows the splits it owned. Needs the broker, the built plugins and the release
//! binary (`cargo xtask test`).

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use super::exactly_once::copy_job::{read_output, spawn};

const PARTITIONS: u32 = 6;
const PER_PHASE: u64 = 10_000;

/// Rows `from..to`, row `i` to partition `i % 6` (each partition in sequence order).
async fn produce(broker: &TestBroker, input: &str, from: u64, to: u64) -> Result<()> {
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

/// The largest number of splits the log says its process read at once.
fn most_owned(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let rest = l.split("this process now reads ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .max()
        .unwrap_or(0)
}

/// Waits until the process logging to `log` has read at least one split.
async fn wait_owning(log: &Path, what: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(90);
    while most_owned(log) == 0 {
        if Instant::now() > deadline {
            bail!(
                "{what} never read a split:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_processes_share_partitions_survive_a_kill_and_take_in_a_newcomer() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("failover-in");
    let output = unique_topic("failover-out");
    broker.create_partitioned_topic(&input, PARTITIONS)?;
    let tmp = tempfile::tempdir()?;
    let job = tmp.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "SET 'pipeline.name' = 'failover-{}';
SET 'execution.checkpointing.interval' = '300ms';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest', 'subscription-type' = 'Failover');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}', 'format' = 'json');
INSERT INTO dst SELECT seq, payload FROM src;",
            now_ms(),
            su = broker.service_url,
            au = broker.admin_url
        ),
    )?;
    // Each process has its own state directory, as on its own host.
    let start = |name: &str| -> (Child, std::path::PathBuf) {
        let log = tmp.path().join(format!("{name}.log"));
        let state = tmp.path().join(format!("{name}-state"));
        (spawn(&job, Some(&state), &log), log)
    };
    let mut procs = vec![start("a"), start("b"), start("c")];
    for (i, (_, log)) in procs.iter().enumerate() {
        wait_owning(log, &format!("process {i}")).await?;
    }
    produce(&broker, &input, 0, PER_PHASE).await?;
    // SIGKILL the second process while it copies (rows after its last completed checkpoint are read
    // again by the process its partitions move to).
    tokio::time::sleep(Duration::from_millis(150)).await;
    procs[1].0.kill()?;
    procs[1].0.wait()?;
    produce(&broker, &input, PER_PHASE, 2 * PER_PHASE).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    // A newcomer takes partitions over.
    procs.push(start("d"));
    wait_owning(&procs[3].1, "the process started last").await?;
    produce(&broker, &input, 2 * PER_PHASE, 3 * PER_PHASE).await?;

    let total = 3 * PER_PHASE;
    let counts = read_output(&broker, &output, total as usize).await?;
    let logs: Vec<(usize, String)> = procs
        .iter()
        .map(|(_, log)| {
            (
                most_owned(log),
                std::fs::read_to_string(log).unwrap_or_default(),
            )
        })
        .collect();
    for (child, _) in &mut procs {
        child.kill().ok();
        child.wait().ok();
    }
    let lost: Vec<u64> = (0..total).filter(|s| !counts.contains_key(s)).collect();
    let strays: Vec<u64> = counts.keys().copied().filter(|s| *s >= total).collect();
    let duplicates: usize = counts.values().map(|c| c - 1).sum();
    eprintln!(
        "failover: {} distinct rows of {total}, {duplicates} duplicate writes; most splits owned per process: {:?}",
        counts.len(),
        logs.iter().map(|(n, _)| *n).collect::<Vec<_>>()
    );
    assert!(
        lost.is_empty() && strays.is_empty(),
        "{} rows missing from the output (first 20: {:?}), {} not in the input; logs:\n{}",
        lost.len(),
        lost.iter().take(20).collect::<Vec<_>>(),
        strays.len(),
        logs.iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n-----\n")
    );
    for (i, (owned, log)) in logs.iter().enumerate() {
        assert!(*owned > 0, "process {i} never owned a split:\n{log}");
        assert!(
            !log.contains(" ERROR "),
            "process {i} logged an error:\n{log}"
        );
    }
    Ok(())
}
