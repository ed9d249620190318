//! Exactly-once with a state directory that fills up (issue 48 §1): `datagen` → Pulsar, the state directory
//! on a small tmpfs (the suite runs as root, as `.ci/run` does). Once it is full the job cannot journal its
//! next transaction (ADR 0026) and fails naming the directory; it is SIGKILLed for good measure, space
//! returns, and the restart from the last complete checkpoint ends with every id once and no transaction
//! left open.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use pulsar_connect_tests::TestBroker;
use pulsar_connect_tests::tmpfs::Tmpfs;

use super::exactly_once::copy_job;

const ROWS: u64 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_through_a_full_state_directory_loses_nothing() -> Result<()> {
    let broker = TestBroker::get();
    let output = pulsar_connect_tests::unique_topic("full-state-dir-out");
    broker.admin(
        "PUT",
        &format!("/admin/v2/{}", output.replace("://", "/")),
        None,
    )?;
    let dir = tempfile::tempdir()?;
    let disk = Tmpfs::mount(&dir.path().join("disk"), "256k")?;
    let (job, state, log) = (
        dir.path().join("job.sql"),
        disk.path().join("state"),
        dir.path().join("job.log"),
    );
    std::fs::write(
        &job,
        format!(
            "SET 'pipeline.name' = 'full-state-dir';
SET 'execution.checkpointing.interval' = '300ms';
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '2000',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '0', 'fields.id.end' = '{}');
CREATE TABLE dst (id BIGINT) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{}', 'format' = 'json', 'sink.semantic' = 'exactly-once',
  'transaction-timeout' = '1h');
INSERT INTO dst SELECT id FROM src;",
            ROWS - 1,
            broker.service_url
        ),
    )?;
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut child = copy_job::spawn(&job, Some(&state), &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log_text().contains("writing table=dst") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Fill the disk: the next journal write or checkpoint fails.
    let filler = disk.fill();
    let full = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && full.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().ok();
    child.wait()?;
    let text = log_text();
    ensure!(
        text.contains("No space left") && text.contains(&state.display().to_string()),
        "with the state directory full the job says so, naming it:\n{text}"
    );
    std::fs::remove_file(&filler)?;
    copy_job::run_to_end(&job, &state, &log, Duration::from_secs(120)).await?;
    copy_job::assert_each_id_once(&broker, &output, ROWS, &log_text()).await?;
    // The output's own transaction buffer (the coordinator-wide list is slow on a long-lived broker).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut open = broker.buffered_open_transactions(&output, 0)?;
    while !open.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        open = broker.buffered_open_transactions(&output, 0)?;
    }
    ensure!(
        open.is_empty(),
        "transactions left open on the output: {open:?}\n{}",
        log_text()
    );
    Ok(())
}
