//! Network faults between the job and the broker (issue 49 §2): the copy job of `copy_job.rs` reaches the
//! broker through the fault proxy (`pulsar_connect_tests::fault_proxy`) and, while rows are in flight,
//! its connections are reset (the source's, the sink's, the one carrying a checkpoint's commit before and
//! after the broker got it), stalled for 20 s, half-closed and blackholed. Whenever the job gives up it is
//! restarted from its checkpoints, as a supervisor (or its restart strategy) would. Exactly-once: every
//! row once; at-least-once: every row, duplicates counted.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use magnetar::proto::pb::base_command::Type;
use pulsar_connect_tests::fault_proxy::{Fault, FaultProxy, Select};

use super::exactly_once::copy_job::{self, CopyJob, N};

/// Whether bytes cross the proxy (either way) within the next half second.
async fn flowing(proxy: &FaultProxy) -> bool {
    let before = proxy.stats();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = proxy.stats();
    after.bytes_to_broker + after.bytes_to_client > before.bytes_to_broker + before.bytes_to_client
}

/// One step of a round: what to do, and what it is called in the report.
#[derive(Clone, Copy)]
enum Step {
    Inject(Fault, Select),
    /// Arms a fault on the next command of a kind and waits (up to 60 s) for it to fire.
    Arm(Type, Fault, bool),
}

async fn round(semantic: &str) -> Result<()> {
    let job = CopyJob::new(semantic).await?;
    let proxy = FaultProxy::for_service_url(&job.broker.service_url).await?;
    job.edit_job(
        &format!("'service-url' = '{}'", job.broker.service_url),
        &format!("'service-url' = '{}'", proxy.service_url()),
    );
    // A job that gives up is brought back by its restart strategy (re-executed in place).
    job.edit_job(
        "SET 'execution.checkpointing.timeout' = '5s';",
        "SET 'execution.checkpointing.timeout' = '5s';
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '100';
SET 'restart-strategy.fixed-delay.delay' = '1s';",
    );
    // About 40 s of input at the throttled rate: every fault lands with rows in flight.
    job.broker.throttle_dispatch(&job.input, Some(N / 40))?;
    let mut child = job.spawn();
    let started = Instant::now();
    while !job.log_text().contains("writing table=dst")
        && started.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !job.log_text().contains("writing table=dst") {
        child.kill().ok();
        child.wait().ok();
        anyhow::bail!("the job did not start writing:\n{}", job.log_text());
    }
    let mut steps = vec![
        (
            "reset the source's connection",
            Step::Inject(Fault::Reset, Select::Carrying(Type::Subscribe)),
        ),
        (
            "reset the sink's connection",
            Step::Inject(Fault::Reset, Select::Carrying(Type::Producer)),
        ),
        (
            "stall every connection 20 s",
            Step::Inject(Fault::Stall(Duration::from_secs(20)), Select::All),
        ),
        (
            "half-close every connection",
            Step::Inject(Fault::HalfClose, Select::All),
        ),
        (
            "blackhole the source's connection",
            Step::Inject(Fault::Blackhole, Select::Carrying(Type::Subscribe)),
        ),
    ];
    if semantic == "exactly-once" {
        steps.insert(
            2,
            (
                "reset a commit before the broker gets it",
                Step::Arm(Type::EndTxn, Fault::Reset, false),
            ),
        );
        steps.insert(
            3,
            (
                "reset a commit after the broker got it",
                Step::Arm(Type::EndTxn, Fault::Reset, true),
            ),
        );
    }
    let mut restarts = 0;
    let mut report = Vec::new();
    for (what, step) in steps {
        // Each fault lands on a job moving rows: the one before is over and traffic flows again (a job
        // that gave up is restarted first). How long that took is reported; over 90 s is a hang.
        let fault_ended = Instant::now();
        let recovered = loop {
            if child.try_wait()?.is_some() {
                restarts += 1;
                child = job.spawn();
            }
            if flowing(&proxy).await {
                break fault_ended.elapsed();
            }
            if fault_ended.elapsed() > Duration::from_secs(90) {
                child.kill().ok();
                child.wait().ok();
                anyhow::bail!(
                    "before '{what}': no traffic for 90 s after the fault before it (a hang); log:\n{}",
                    job.log_text()
                );
            }
        };
        report.push(format!(
            "  traffic flowing {:.1} s later",
            recovered.as_secs_f64()
        ));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = proxy.stats();
        let hit = match step {
            Step::Inject(fault, which) => proxy.inject(fault, which),
            Step::Arm(on, fault, after) => {
                proxy.arm(on, fault, after);
                let deadline = Instant::now() + Duration::from_secs(60);
                while proxy.armed() > 0 && Instant::now() < deadline {
                    if child.try_wait()?.is_some() {
                        restarts += 1;
                        child = job.spawn();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                usize::from(proxy.armed() == 0)
            }
        };
        let live = proxy.stats().faults_on_live_traffic - before.faults_on_live_traffic;
        report.push(format!(
            "{what}: {hit} connection(s), {live} with live traffic"
        ));
        if live == 0 {
            child.kill().ok();
            child.wait().ok();
            let log = job.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            anyhow::bail!(
                "{what}: no fault hit live traffic ({hit} connection(s) hit); so far:\n{}\nthe job's log, last lines first:\n{}",
                report.join("\n"),
                tail.join("\n")
            );
        }
        if let Step::Inject(Fault::Stall(d), _) = step {
            tokio::time::sleep(d).await;
        }
    }
    // The last fault over too: a blackholed connection is given up by the client's keepalive.
    let fault_ended = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            restarts += 1;
            child = job.spawn();
        }
        if flowing(&proxy).await || fault_ended.elapsed() > Duration::from_secs(90) {
            break;
        }
    }
    report.push(format!(
        "  traffic flowing {:.1} s later",
        fault_ended.elapsed().as_secs_f64()
    ));
    job.broker.throttle_dispatch(&job.input, None)?;
    let (counts, log) = job.finish(child, &mut restarts).await?;
    let stats = proxy.stats();
    let strategy_restarts = job.log_text().matches("restarting the job").count();
    let lost = copy_job::missing(&counts);
    let duplicated: usize = counts.values().map(|&c| c.saturating_sub(1)).sum();
    eprintln!(
        "{semantic}: {} connections, {} B to the broker, {} B back; {} faults ({} on live traffic); {strategy_restarts} restart(s) by the job's strategy, {restarts} by the test; lost {}, duplicated {duplicated}\n  {}",
        stats.connections,
        stats.bytes_to_broker,
        stats.bytes_to_client,
        stats.faults,
        stats.faults_on_live_traffic,
        lost.len(),
        report.join("\n  ")
    );
    // A run that gave up said which operation failed and at which broker.
    for line in job
        .log_text()
        .lines()
        .filter(|l| l.contains("committing the transaction"))
    {
        ensure!(
            line.contains(&format!("at {}", proxy.service_url())),
            "the failed commit does not name the broker: {line}"
        );
    }
    ensure!(
        stats.connections >= 2,
        "the job's connections did not cross the proxy: {stats:?}"
    );
    ensure!(
        lost.is_empty(),
        "{semantic}: lost {} rows, e.g. {:?}\n{log}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    if semantic == "exactly-once" {
        copy_job::assert_exactly_once(&counts, &log);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_through_resets_stalls_and_half_closes() -> Result<()> {
    round("exactly-once").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_through_resets_stalls_and_half_closes() -> Result<()> {
    round("at-least-once").await
}
