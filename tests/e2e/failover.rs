//! Scale-out through a Failover subscription (issue 17 §2): several processes run the same job file and
//! share the partitions of its input; when one dies (SIGKILL) the broker moves its partitions to the
//! others, which resume at the subscription's cursor; a process that joins later takes partitions over.
//! At-least-once: at the end the output holds every input row (rows the killed process read after its
//! last completed checkpoint are read again by the new owner: 3 333 duplicates in one of five runs).
//! Exactly-once: every input row once in the output. Every process's log shows the splits it owned. Needs the broker, the built plugins and the release
//! binary (`cargo xtask test`).

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};

use super::exactly_once::cluster::{PARTITIONS, produce};
use super::exactly_once::copy_job::{
    CopyJob, N, assert_exactly_once, push_entry, read_output, spawn, warm_up,
};

const PER_PHASE: u64 = 10_000;

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

/// Per partition of `input`, its subscription as the broker sees it: backlog, the active consumer and
/// each consumer's permits and unacknowledged messages.
fn subscription_report(broker: &TestBroker, input: &str) -> String {
    let path = input.strip_prefix("persistent://").unwrap_or(input);
    let stats = match broker.admin(
        "GET",
        &format!("/admin/v2/persistent/{path}/partitioned-stats?perPartition=true"),
        None,
    ) {
        Ok(text) => serde_json::from_str::<serde_json::Value>(&text).unwrap_or_default(),
        Err(e) => return format!("(no stats: {e:#})"),
    };
    let mut out = Vec::new();
    if let Some(partitions) = stats["partitions"].as_object() {
        for (name, p) in partitions {
            let Some(subs) = p["subscriptions"].as_object() else {
                continue;
            };
            for (sub, s) in subs {
                let consumers: Vec<String> = s["consumers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        format!(
                            "{} (permits {}, unacked {}, out {})",
                            c["consumerName"].as_str().unwrap_or("?"),
                            c["availablePermits"],
                            c["unackedMessages"],
                            c["msgOutCounter"]
                        )
                    })
                    .collect();
                // A partition that stands still: what the broker's cursor and dispatcher say of it.
                let cursor = if s["msgBacklog"].as_u64().unwrap_or(0) > 0 {
                    let partition = name.strip_prefix("persistent://").unwrap_or(name);
                    broker
                        .admin(
                            "GET",
                            &format!("/admin/v2/persistent/{partition}/internalStats"),
                            None,
                        )
                        .ok()
                        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                        .map(|v| {
                            let c = &v["cursors"][sub.as_str()];
                            format!(
                                "; cursor mark-delete {} read {} waitingReadOp {} pendingReadOps {} havePendingRead {}; ledger LAC {}",
                                c["markDeletePosition"],
                                c["readPosition"],
                                c["waitingReadOp"],
                                c["pendingReadOps"],
                                c["subscriptionHavePendingRead"],
                                v["lastConfirmedEntry"]
                            )
                        })
                        .unwrap_or_default()
                } else {
                    String::new()
                };
                out.push(format!(
                    "{name} {sub}: backlog {}, active {}, consumers {consumers:?}{cursor}",
                    s["msgBacklog"], s["activeConsumerName"]
                ));
            }
        }
    }
    out.join("\n")
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
    three_processes_a_kill_and_a_newcomer("at-least-once").await
}

/// The same exactly-once: the messages are acknowledged one by one inside the sink's transactions; a
/// partition moving while two processes hold its messages makes one acknowledgement conflict and that
/// process read again from the cursor (it restarts itself); the killed process's open transaction
/// releases its messages at its 10 s timeout and the new owner's reader asks for them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_processes_copy_every_row_exactly_once_through_a_kill_and_a_newcomer() -> Result<()>
{
    three_processes_a_kill_and_a_newcomer("exactly-once").await
}

async fn three_processes_a_kill_and_a_newcomer(semantic: &str) -> Result<()> {
    let exactly_once = semantic == "exactly-once";
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
SET 'execution.checkpointing.timeout' = '3s';
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest', 'subscription-type' = 'Failover');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{output}', 'service-url' = '{su}', 'format' = 'json',
  'sink.semantic' = '{semantic}', 'transaction-timeout' = '10s', 'max-block-time-ms' = '3000');
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
    warm_up(&broker, &format!("{input}-partition-0"), &output).await?;
    let mut procs = vec![start("a"), start("b"), start("c")];
    for (i, (_, log)) in procs.iter().enumerate() {
        wait_owning(log, &format!("process {i}")).await?;
    }
    // Rows arrive all along (500 every 100 ms or so): the kill and the newcomer both come while the
    // processes hold rows no checkpoint committed yet.
    let total = 3 * PER_PHASE;
    let feeder = {
        let input = input.clone();
        tokio::spawn(async move {
            let broker = TestBroker::get();
            let mut from = 0;
            while from < total {
                let to = (from + 500).min(total);
                produce(&broker, &input, from, to).await?;
                from = to;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::Ok(())
        })
    };
    // SIGKILL the second process while it copies (rows after its last completed checkpoint are read
    // again by the process its partitions move to).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    procs[1].0.kill()?;
    procs[1].0.wait()?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // A newcomer takes partitions over.
    procs.push(start("d"));
    wait_owning(&procs[3].1, "the process started last").await?;
    feeder.await??;

    let counts = read_output(&broker, &output, total as usize).await?;
    // Taken while the processes still run: whether a partition short of rows stood still (a backlog, and
    // to whom the broker dispatches it) or moved on past them (no backlog: acknowledged, never written).
    let input_stats = subscription_report(&broker, &input);
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
        "failover ({semantic}): {} distinct rows of {total}, {duplicates} duplicate writes; most splits owned per process: {:?}; restarts: {}",
        counts.len(),
        logs.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        logs.iter()
            .map(|(_, l)| l.matches("restarting the job").count())
            .sum::<usize>()
    );
    assert!(
        lost.is_empty() && strays.is_empty() && (!exactly_once || duplicates == 0),
        "{} rows missing from the output (first 20: {:?}), {} not in the input, {duplicates} written twice; the input's subscription per partition:\n{input_stats}\nlogs:\n{}",
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

/// A process that died between its acknowledgements (inside its transaction) and the commit: the
/// broker holds those messages until the transaction times out, then releases them — but does not send
/// them on its own to the partition's active consumer, which has read past them. The active reader asks
/// for what is not acknowledged again every `transaction-timeout`: every row once in the output, the
/// dead process's row never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_a_crashed_process_held_in_its_transaction_are_read_once_it_times_out()
-> Result<()> {
    use magnetar::proto::pb::command_subscribe::SubType;
    let job = failover_copy_job().await?;
    job.edit_job(
        "'transaction-timeout' = '20s'",
        "'transaction-timeout' = '15s'",
    );
    let subscription = job.subscribe_then_crash().await?;
    job.leave_open_transaction(&subscription, SubType::Failover, Duration::from_secs(5))
        .await?;
    let mut restarts = 0;
    let (counts, warnings) = job.finish(job.spawn(), &mut restarts).await?;
    assert!(
        !counts.contains_key(&4_000_000_000),
        "the crashed transaction's row is visible"
    );
    assert_exactly_once(&counts, &warnings);
    Ok(())
}

/// Two processes holding the same messages (the broker moved the partition between them): made here on
/// purpose. The job reads the whole input; before its first checkpoint another consumer of the
/// subscription acknowledges every input message inside its own transaction. The job's acknowledgement
/// at the checkpoint conflicts, so its transaction is aborted (none of its rows become visible) and it
/// restarts itself to read again from the cursor; once the other transaction is aborted too, the job
/// copies every row, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_acknowledgement_aborts_the_transaction_and_restarts_the_job() -> Result<()> {
    let job = failover_copy_job().await?;
    // The first checkpoint comes 8 s after the start: time to acknowledge the input elsewhere first.
    job.edit_job(
        "SET 'execution.checkpointing.interval' = '300ms'",
        "SET 'execution.checkpointing.interval' = '8s'",
    );
    let entries = input_entries(&job).await?;
    let mut child = job.spawn();
    if let Err(e) = acknowledge_elsewhere_until_it_restarts(&job, entries).await {
        child.kill().ok();
        child.wait().ok();
        return Err(e);
    }
    let mut restarts = 0;
    let (counts, warnings) = job.finish(child, &mut restarts).await?;
    let text = job.log_text();
    assert!(
        text.contains("another consumer of the subscription holds them"),
        "the restart names the conflict; log:\n{text}"
    );
    assert_exactly_once(&counts, &warnings);
    Ok(())
}

/// While the job holds the input (read, not acknowledged), another consumer of its subscription
/// acknowledges every entry in its own transaction; once the job restarted, that transaction is aborted.
async fn acknowledge_elsewhere_until_it_restarts(
    job: &CopyJob,
    entries: Vec<magnetar::MessageId>,
) -> Result<()> {
    let mut other = Elsewhere::attach(job, 1).await?;
    other.hold(job, &entries).await?;
    wait_for_log(job, "restarting the job", 1).await?;
    // The other process gives its messages back.
    other.release().await?;
    other.close().await;
    Ok(())
}

/// Waits (≤ 60 s) until the job's log holds `text` at least `count` times.
pub(super) async fn wait_for_log(job: &CopyJob, text: &str, count: usize) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while job.log_text().matches(text).count() < count {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the log never held {text:?} {count} time(s):\n{}",
            job.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Every entry of the job's input (read by a reader of its own).
pub(super) async fn input_entries(job: &CopyJob) -> Result<Vec<magnetar::MessageId>> {
    let mut ids = Vec::new();
    let client = job.broker.client().await?;
    let mut reader = SplitReader::open(
        &client,
        Split {
            topic: TopicName::parse(&job.input)?,
            partition: -1,
        },
        &format!("ids-{}", now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut seen = 0;
    while seen < N as usize {
        let batch = reader.next_batch(1000, Duration::from_secs(10)).await?;
        anyhow::ensure!(!batch.is_empty(), "the input ended after {seen} messages");
        seen += batch.len();
        for m in batch {
            push_entry(&mut ids, m.message_id);
        }
    }
    reader.close().await.ok();
    client.close().await;
    Ok(ids)
}

/// Another process of the job's Failover subscription, holding messages in transactions of its own
/// (what a process the broker moved the partition away from does). Its consumer is attached only while
/// it acknowledges: a standby consumer left attached would become the active one while the job restarts
/// (on a non-partitioned topic the first consumer attached is active) and keep the job idle.
pub(super) struct Elsewhere {
    client: magnetar::PulsarClient,
    subscription: String,
    txn: Option<magnetar::Transaction>,
}

impl Elsewhere {
    /// Ready once the job's `run`-th run reads and had 2 s to receive the input (20 000 rows take well
    /// under a second): [`Elsewhere::until_reading`].
    pub(super) async fn attach(job: &CopyJob, run: usize) -> Result<Elsewhere> {
        Self::until_reading(job, run).await?;
        let subscription = job
            .log_text()
            .split("subscription=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(str::to_owned)
            .expect("the log names the subscription");
        Ok(Elsewhere {
            client: job.broker.client().await?,
            subscription,
            txn: None,
        })
    }

    /// Waits until the job's `run`-th run reads (its log says so) and had 2 s to receive the input.
    pub(super) async fn until_reading(job: &CopyJob, run: usize) -> Result<()> {
        wait_for_log(job, "this process now reads 1 of the 1 splits", run).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        Ok(())
    }

    /// Acknowledges `entries` inside a new transaction, left open.
    pub(super) async fn hold(
        &mut self,
        job: &CopyJob,
        entries: &[magnetar::MessageId],
    ) -> Result<()> {
        use magnetar::proto::pb::command_subscribe::SubType;
        let consumer = self
            .client
            .consumer(&job.input)
            .subscription(&self.subscription)
            .subscription_type(SubType::Failover)
            .name("zz-another-process")
            .subscribe()
            .await?;
        let txn = self
            .client
            .new_transaction(Duration::from_secs(120))
            .await?;
        self.client
            .register_subscription_to_transaction(txn, job.input.clone(), self.subscription.clone())
            .await?;
        consumer
            .ack_batch_with_txn(entries.to_vec(), txn.id())
            .await?;
        consumer.close().await.ok();
        self.txn = Some(txn);
        Ok(())
    }

    /// Aborts the open transaction: its messages go back to the subscription.
    pub(super) async fn release(&mut self) -> Result<()> {
        if let Some(txn) = self.txn.take() {
            self.client.abort_transaction(txn).await?;
        }
        Ok(())
    }

    pub(super) async fn close(self) {
        self.client.close().await;
    }
}

/// The exactly-once copy job of `copy_job`, its source read through a Failover subscription, every run
/// without a state directory (the cursor is the position).
pub(super) async fn failover_copy_job() -> Result<CopyJob> {
    let mut job = CopyJob::new("exactly-once").await?;
    job.stateless = true;
    job.edit_job(
        "'scan.startup.mode' = 'earliest'",
        "'scan.startup.mode' = 'earliest', 'subscription-type' = 'Failover'",
    );
    Ok(job)
}
