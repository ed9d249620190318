//! Parallel pipelines inside one process (docs/adr/0015): a 4-partition topic read by 1, 2 and 4 source
//! subtasks into one collecting sink subtask (barriers aligned across its inputs), every row once and each
//! partition's rows in order; and an exactly-once Pulsar → Pulsar copy killed with SIGKILL while the
//! number of subtasks changes from run to run (4, 2, 1, default), its output holding every input once.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};

use crate::exactly_once::copy_job::{self, CopyJob, assert_exactly_once, copy_with_kills_each};

const PARTITIONS: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_two_and_four_subtasks_read_every_row_once_in_partition_order() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("parallel-in");
    copy_job::produce_partitioned_input(&broker, &topic, PARTITIONS).await?;
    let total = copy_job::N as usize;
    for n in [1usize, 2, 4] {
        let sql = format!(
            "SET 'parallelism.default' = '{n}';
             SET 'execution.checkpointing.interval' = '200ms';
             CREATE TABLE src (seq BIGINT, payload STRING, tp STRING METADATA FROM 'topic' VIRTUAL) WITH (
               'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'admin-url' = '{}',
               'format' = 'json', 'scan.startup.mode' = 'earliest');
             CREATE TABLE out (seq BIGINT, tp STRING) WITH ('connector' = 'collect');
             INSERT INTO out SELECT seq, tp FROM src;",
            broker.service_url, broker.admin_url
        );
        let job = RunningJob::start(&sql, None).await?;
        job.wait_rows(total, Duration::from_secs(120)).await?;
        let (summary, rows) = job.stop().await?;
        assert_eq!(
            summary.subtasks.values().copied().collect::<Vec<_>>(),
            vec![(n, 1)],
            "parallelism {n}"
        );
        // Every row once, and per partition in the order it was written.
        let mut last: BTreeMap<i64, i64> = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        for r in &rows {
            let (seq, part) = parse(r);
            assert_eq!(seq % i64::from(PARTITIONS), part, "row {r}");
            assert!(seen.insert(seq), "parallelism {n}: row {seq} twice");
            if let Some(prev) = last.insert(part, seq) {
                assert!(
                    prev < seq,
                    "parallelism {n}: partition {part}: {seq} after {prev}"
                );
            }
        }
        assert_eq!(seen.len(), total, "parallelism {n}");
    }
    Ok(())
}

/// `+I[<seq>, <topic>-partition-<i>]` → (seq, i).
fn parse(row: &str) -> (i64, i64) {
    let inner = row.trim_start_matches("+I[").trim_end_matches(']');
    let (seq, topic) = inner.split_once(", ").expect("two columns");
    let (_, part) = topic
        .rsplit_once("-partition-")
        .expect("a partition's topic");
    (seq.parse().unwrap(), part.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_holds_through_kills_while_the_parallelism_changes() -> Result<()> {
    let job = CopyJob::with_partitions("exactly-once", PARTITIONS).await?;
    let plan = [
        Some(4),
        Some(2),
        Some(1),
        None,
        Some(4),
        Some(2),
        Some(3),
        Some(1),
    ];
    let (counts, warnings) = copy_with_kills_each(&job, plan.len(), |round| {
        job.set_parallelism(plan.get(round).copied().flatten());
    })
    .await?;
    // The last run (default: the cores, 2, capped by 4 partitions) always gets to log its shape; of the
    // killed ones, those killed before their start-up finished log none.
    let log = job.log_text();
    let shapes: Vec<usize> = [4, 3, 2]
        .into_iter()
        .filter(|n| log.contains(&format!("reads 'src' with {n} subtask(s)")))
        .collect();
    assert!(
        shapes.contains(&2) && shapes.len() >= 2,
        "runs with only {shapes:?} subtasks; log:\n{log}"
    );
    assert_exactly_once(&counts, &warnings);
    Ok(())
}
