//! Restart strategies (issue 36 §4, ADR 0025): Flink's `restart-strategy.*` decide whether a failed run
//! starts again. A job that conflicts at every checkpoint (another process of its subscription holds
//! the messages each time) restarts as often as `fixed-delay` allows, then ends with exit 1 naming the
//! limit, having made nothing visible; the next run copies every row once. A job that fails on the same
//! malformed message at every start backs off exponentially, and `disable` ends it at once. Needs the
//! broker, the built plugins and the release binary (`cargo xtask test`).

use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use pulsar_connect::pulsar::message_id::format_message_id;

use super::exactly_once::copy_job::{assert_exactly_once, read_output, spawn};
use super::failover::{Elsewhere, failover_copy_job, input_entries, wait_for_log};

const RESTARTING: &str = "restarting the job";
const CONFLICT: &str = "another consumer of the subscription holds them";

/// Waits (≤ `within`) for `child` to exit; returns its exit code.
fn exit_code(child: &mut Child, within: Duration, log: impl Fn() -> String) -> Result<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.code().unwrap_or(-1));
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            anyhow::bail!("the job did not end within {within:?}; log:\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_conflicts_at_every_checkpoint_restarts_as_often_as_fixed_delay_allows()
-> Result<()> {
    let job = failover_copy_job().await?;
    // The first checkpoint of each run comes 8 s after its start: time for the other process to hold
    // the input first.
    job.edit_job(
        "SET 'execution.checkpointing.interval' = '300ms';",
        "SET 'execution.checkpointing.interval' = '8s';
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '2';
SET 'restart-strategy.fixed-delay.delay' = '2s';",
    );
    let entries = input_entries(&job).await?;
    let mut child = job.spawn();
    let mut other = None;
    let chain = async {
        // Runs 1 and 2 conflict and restart; run 3 conflicts and is not restarted.
        for run in 1..=3 {
            let o = match other.as_mut() {
                None => other.insert(Elsewhere::attach(&job, run).await?),
                Some(o) => {
                    Elsewhere::until_reading(&job, run).await?;
                    o
                }
            };
            o.hold(&job, &entries).await?;
            if run < 3 {
                wait_for_log(&job, RESTARTING, run).await?;
                // The other process gives the messages back while the job waits for its restart.
                o.release().await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    let code = match chain {
        Ok(()) => exit_code(&mut child, Duration::from_secs(60), || job.log_text()),
        Err(e) => {
            child.kill().ok();
            child.wait().ok();
            Err(e)
        }
    };
    if let Some(mut o) = other {
        o.release().await?;
        o.close().await;
    }
    let code = code?;
    let log = job.log_text();
    ensure!(code == 1, "exit code {code}; log:\n{log}");
    ensure!(
        log.matches(RESTARTING).count() == 2
            && log.contains("restarting the job (fixed-delay: attempt 1 of 2) in 2s")
            && log.contains("restarting the job (fixed-delay: attempt 2 of 2) in 2s"),
        "two restarts, each named; log:\n{log}"
    );
    ensure!(
        log.matches(CONFLICT).count() >= 3,
        "each run failed on the conflict (the cause is in every restart line and the final error); log:\n{log}"
    );
    ensure!(
        log.contains(
            "not restarted after 2 restart(s): fixed-delay: all 2 restart attempt(s) used (`restart-strategy.fixed-delay.attempts`)"
        ),
        "the end names the limit; log:\n{log}"
    );
    // Nothing of the three aborted transactions became visible.
    let visible = read_output(&job.broker, &job.output, 0).await?;
    ensure!(
        visible.is_empty(),
        "{} rows visible after three aborted runs",
        visible.len()
    );
    // With nobody else holding the input, the next run copies every row once.
    let mut restarts = 0;
    let (counts, warnings) = job.finish(job.spawn(), &mut restarts).await?;
    assert_exactly_once(&counts, &warnings);
    Ok(())
}

/// A job reading a topic whose second message is not json, with `restart` as its `SET` lines.
async fn failing_job(
    broker: &TestBroker,
    dir: &std::path::Path,
    restart: &str,
) -> Result<(std::path::PathBuf, String)> {
    let topic = unique_topic("restarts-bad");
    let client = broker.client().await?;
    let producer = client.producer(&topic).create().await?;
    producer
        .send(OutgoingMessage::with_payload(br#"{"seq":1,"payload":"a"}"#.to_vec()).into())
        .await?;
    let bad = producer
        .send(OutgoingMessage::with_payload(b"{not json".to_vec()).into())
        .await?;
    producer.close().await?;
    client.close().await;
    let job = dir.join("job.sql");
    std::fs::write(
        &job,
        format!(
            "SET 'pipeline.name' = 'restarts-{}';
{restart}
CREATE TABLE src (seq BIGINT, payload STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{su}', 'format' = 'json',
  'scan.startup.mode' = 'earliest');
CREATE TABLE dst (seq BIGINT, payload STRING) WITH ('connector' = 'blackhole');
INSERT INTO dst SELECT seq, payload FROM src;",
            now_ms(),
            su = broker.service_url
        ),
    )?;
    Ok((job, format_message_id(&bad)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failing_at_every_start_backs_off_exponentially_or_ends_at_once() -> Result<()> {
    let broker = TestBroker::get();
    let tmp = tempfile::tempdir()?;
    // The deprecated key `restart-strategy` and Flink's spelling without a dash.
    let (job, bad) = failing_job(
        &broker,
        tmp.path(),
        "SET 'restart-strategy' = 'exponentialdelay';
SET 'restart-strategy.exponential-delay.initial-backoff' = '200ms';
SET 'restart-strategy.exponential-delay.backoff-multiplier' = '2';
SET 'restart-strategy.exponential-delay.jitter-factor' = '0';
SET 'restart-strategy.exponential-delay.attempts-before-reset-backoff' = '3';",
    )
    .await?;
    let log_path = tmp.path().join("exponential.log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut child = spawn(&job, Some(&tmp.path().join("state")), &log_path);
    let code = exit_code(&mut child, Duration::from_secs(90), log)?;
    let text = log();
    ensure!(code == 1, "exit code {code}; log:\n{text}");
    for (attempt, backoff) in [(1, "200ms"), (2, "400ms"), (3, "800ms")] {
        let line = format!(
            "restarting the job (exponential-delay: attempt {attempt} of 3, backoff {backoff}) in {backoff}"
        );
        ensure!(text.contains(&line), "{line:?} missing; log:\n{text}");
    }
    ensure!(text.matches(RESTARTING).count() == 3, "log:\n{text}");
    ensure!(
        text.matches(&bad).count() >= 4,
        "every restart and the end name the malformed message {bad}; log:\n{text}"
    );
    ensure!(
        text.contains("not restarted after 3 restart(s): exponential-delay: 3 restart attempt(s)"),
        "log:\n{text}"
    );

    // `disable`: the first failure ends the job.
    let (job, bad) =
        failing_job(&broker, tmp.path(), "SET 'restart-strategy.type' = 'none';").await?;
    let log_path = tmp.path().join("none.log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut child = spawn(&job, None, &log_path);
    let code = exit_code(&mut child, Duration::from_secs(60), log)?;
    let text = log();
    ensure!(
        code == 1 && !text.contains(RESTARTING) && text.contains(&bad),
        "exit code {code}; log:\n{text}"
    );
    ensure!(
        text.contains("not restarted after 0 restart(s): `restart-strategy.type` is `disable`"),
        "log:\n{text}"
    );
    Ok(())
}

/// The SQL shell's jobs have the same supervisor as `run`'s (issue 50 §1): a job of `sql -f` failing at
/// every start restarts as `fixed-delay` allows, in the shell's process, and then fails, which ends the
/// shell with exit 1. (Before, a shell job ignored `restart-strategy.*` and failed at its first error.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_job_follows_the_restart_strategy() -> Result<()> {
    let broker = TestBroker::get();
    let tmp = tempfile::tempdir()?;
    let (job, bad) = failing_job(
        &broker,
        tmp.path(),
        "SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '2';
SET 'restart-strategy.fixed-delay.delay' = '300ms';",
    )
    .await?;
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(pulsar_connect_tests::binary())
            .arg("--plugin-dir")
            .arg(pulsar_connect_tests::jobs::plugin_dir())
            .args(["sql", "-f"])
            .arg(&job)
            .output()
    })
    .await??;
    let text = String::from_utf8_lossy(&run.stderr);
    ensure!(
        run.status.code() == Some(1),
        "exit {:?}; stderr:\n{text}",
        run.status
    );
    for attempt in [1, 2] {
        let line = format!("restarting the job (fixed-delay: attempt {attempt} of 2) in 300ms");
        ensure!(text.contains(&line), "{line:?} missing; stderr:\n{text}");
    }
    ensure!(text.matches(RESTARTING).count() == 2, "stderr:\n{text}");
    ensure!(
        text.contains(
            "not restarted after 2 restart(s): fixed-delay: all 2 restart attempt(s) used"
        ),
        "stderr:\n{text}"
    );
    ensure!(
        text.matches(&bad).count() >= 3,
        "every restart and the end name the malformed message {bad}; stderr:\n{text}"
    );
    Ok(())
}
