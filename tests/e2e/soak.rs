//! The soak (issue 48 §3): a Pulsar → Pulsar exactly-once copy fed at a steady rate for a long time,
//! checkpoints every 2 s, the broker restarted at a fixed period; the job's resident memory, open file
//! descriptors and threads sampled throughout; at the end every input message must be in the output
//! exactly once.
//!
//! CI runs the short version (2 minutes, one broker restart in the middle): nothing lost or duplicated,
//! descriptors and threads flat. The long version is run by hand in the background, e.g.
//! `SOAK_SECS=2100 SOAK_REPORT=/tmp/soak.csv target/release/deps/broker_restart-* soak --nocapture`,
//! and checks the memory too (≤ 5 % growth after the first 5 minutes of each run of the process: a
//! restart re-executes it); its figures go to RELIABILITY.md.
//! Knobs: `SOAK_SECS` (120), `SOAK_RATE` messages/s (5000), `SOAK_RESTART_SECS` (half the run when it
//! is shorter than 20 minutes, else 600), `SOAK_REPORT` (a CSV of the samples).
//!
//! In the `broker_restart` test binary: it restarts the local broker.

use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use magnetar::OutgoingMessage;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};
use xtask::broker::{self, Profile};

use super::exactly_once_broker_restart::copy_job;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One sample of the job's process.
#[derive(Debug, Clone)]
struct Sample {
    at_s: f64,
    /// Which run of the job's process (a restart re-executes it: its memory starts afresh).
    run: usize,
    rss_kib: u64,
    fds: usize,
    threads: u64,
    fed: u64,
    backlog: u64,
}

fn sample_process(pid: u32) -> Option<(u64, usize, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((field("VmRSS:")?, fds, field("Threads:")?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_exactly_once_through_broker_restarts() -> Result<()> {
    let _alone = crate::one_restart_at_a_time().await;
    assert!(
        std::env::var_os("PULSAR_SERVICE_URL").is_none(),
        "the soak restarts the local broker; it cannot run against an external cluster"
    );
    let secs = env_u64("SOAK_SECS", 120);
    let rate = env_u64("SOAK_RATE", 5000);
    let restart_every = env_u64(
        "SOAK_RESTART_SECS",
        if secs < 1200 { secs / 2 } else { 600 },
    );
    let long = secs >= 600;
    let broker = TestBroker::get();
    let (input, output) = (unique_topic("soak-in"), unique_topic("soak-out"));
    // Both kept whole: the output is read only at the end, the input compared with it.
    broker.retain_all(&input)?;
    broker.retain_all(&output)?;
    let dir = tempfile::tempdir()?;
    let (job, state, log) = (
        dir.path().join("job.sql"),
        dir.path().join("state"),
        dir.path().join("job.log"),
    );
    let sql = copy_job::job_sql(&broker, "soak", &input, &output, "exactly-once")
        .replace(
            "SET 'execution.checkpointing.interval' = '300ms';",
            "SET 'execution.checkpointing.interval' = '2s';
SET 'restart-strategy.type' = 'fixed-delay';
SET 'restart-strategy.fixed-delay.attempts' = '1000';
SET 'restart-strategy.fixed-delay.delay' = '1s';",
        )
        .replace(
            "SET 'execution.checkpointing.timeout' = '5s';",
            "SET 'execution.checkpointing.timeout' = '10s';",
        )
        .replace(
            "'transaction-timeout' = '20s'",
            "'transaction-timeout' = '60s'",
        );
    std::fs::write(&job, sql)?;
    let mut child = Running(copy_job::spawn(&job, Some(&state), &log));
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let subscribed = Instant::now() + Duration::from_secs(60);
    while !log_text().contains("reading table=src") {
        ensure!(
            Instant::now() < subscribed && child.0.try_wait()?.is_none(),
            "the job ended or did not start reading in 60 s:\n{}",
            log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The feeder: `rate` messages a second in 10-ms ticks; a send that fails is sent again (the input
    // is read back at the end, so a message stored twice by such a retry is counted on both sides).
    let fed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = tokio::spawn({
        let (broker, input, fed, stop) = (broker.clone(), input.clone(), fed.clone(), stop.clone());
        async move { feed(&broker, &input, rate, &fed, &stop).await }
    });

    let started = Instant::now();
    let mut samples = Vec::new();
    let mut restarts_done = 0u64;
    let mut supervisor_restarts = 0;
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        if child.0.try_wait()?.is_some() {
            // The restart strategy gave up (it should not): restart it as a supervisor would.
            supervisor_restarts += 1;
            child = Running(copy_job::spawn(&job, Some(&state), &log));
        }
        if let Some((rss_kib, fds, threads)) = sample_process(child.0.id()) {
            samples.push(Sample {
                at_s: started.elapsed().as_secs_f64(),
                run: log_text().matches("restarting the job").count() + supervisor_restarts,
                rss_kib,
                fds,
                threads,
                fed: fed.load(std::sync::atomic::Ordering::Relaxed),
                backlog: backlog(&broker, &input).unwrap_or(u64::MAX),
            });
        }
        if restart_every > 0
            && started.elapsed().as_secs() >= restart_every * (restarts_done + 1)
            && started.elapsed().as_secs() + 10 < secs
        {
            restarts_done += 1;
            eprintln!(
                "soak: broker restart {restarts_done} at {:?}",
                started.elapsed()
            );
            tokio::task::spawn_blocking(|| broker::restart(Profile::Default)).await??;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let fed_total = feeder.await??;

    // Drain: every input message covered by a completed checkpoint, then a graceful stop.
    let drained = Instant::now() + Duration::from_secs(180);
    loop {
        ensure!(
            Instant::now() < drained,
            "the job did not catch up within 180 s of the feed's end (backlog {:?}); log tail:\n{}",
            backlog(&broker, &input),
            tail(&log_text(), 60)
        );
        if child.0.try_wait()?.is_some() {
            supervisor_restarts += 1;
            child = Running(copy_job::spawn(&job, Some(&state), &log));
        } else if backlog(&broker, &input) == Some(0) {
            // SAFETY: SIGTERM to our own child: a graceful stop with a final checkpoint and commit.
            unsafe { copy_job::libc_kill(child.0.id() as i32) };
            if child.0.wait()?.success() {
                break;
            }
            supervisor_restarts += 1;
            child = Running(copy_job::spawn(&job, Some(&state), &log));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop(child);

    let inputs = count_seqs(&broker, &input).await?;
    let outputs = count_seqs(&broker, &output).await?;
    let text = log_text();
    let job_restarts = text.matches("restarting the job").count();
    report(&samples, long);
    let mut lost = 0u64;
    let mut extra = 0u64;
    let mut absent = 0u64;
    for seq in 0..fed_total as usize {
        let (i, o) = (
            inputs.get(seq).copied().unwrap_or(0),
            outputs.get(seq).copied().unwrap_or(0),
        );
        if i == 0 {
            absent += 1;
        }
        if o < i {
            lost += (i - o) as u64;
        } else {
            extra += (o - i) as u64;
        }
    }
    eprintln!(
        "soak: {secs} s at {rate}/s: {fed_total} fed ({absent} not in the input), {} input messages, {} output messages, lost {lost}, duplicated {extra}; {restarts_done} broker restart(s), {job_restarts} job restart(s) by its strategy, {supervisor_restarts} by the test",
        inputs.iter().map(|&c| c as u64).sum::<u64>(),
        outputs.iter().map(|&c| c as u64).sum::<u64>(),
    );
    ensure!(
        absent == 0,
        "{absent} acknowledged sends are not in the input"
    );
    ensure!(
        lost == 0 && extra == 0,
        "exactly-once broken: {lost} lost, {extra} duplicated; log tail:\n{}",
        tail(&text, 60)
    );
    check_flat(&samples, long)
}

/// Writes `rate` messages a second until `stop`; returns how many were acknowledged (the sequence
/// numbers `0..n`).
async fn feed(
    broker: &TestBroker,
    input: &str,
    rate: u64,
    fed: &std::sync::atomic::AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<u64> {
    let client = broker.client().await?;
    let producer = client
        .producer(input)
        .batching(100, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(5))
        .create()
        .await?;
    let per_tick = (rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut in_flight = FuturesUnordered::new();
    let mut next = 0u64;
    let send = |seq: u64| {
        let producer = &producer;
        async move {
            let payload = format!(r#"{{"seq":{seq},"payload":"soak-{seq:010}"}}"#);
            loop {
                match producer
                    .send(OutgoingMessage::with_payload(payload.clone().into_bytes()).into())
                    .await
                {
                    Ok(_) => return seq,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        }
    };
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        tokio::select! {
            _ = tick.tick() => {
                // Back-pressure: no more than 10 s of sends outstanding (a broker restart).
                if in_flight.len() < (rate * 10) as usize {
                    for _ in 0..per_tick {
                        in_flight.push(send(next));
                        next += 1;
                    }
                }
            }
            Some(_) = in_flight.next(), if !in_flight.is_empty() => {
                fed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    while in_flight.next().await.is_some() {
        fed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    drop(in_flight);
    producer.close().await.ok();
    Ok(next)
}

/// The job's subscription backlog on `input`, if it has a subscription.
fn backlog(broker: &TestBroker, input: &str) -> Option<u64> {
    let path = input.strip_prefix("persistent://").unwrap_or(input);
    let stats = broker
        .admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None)
        .ok()?;
    let v = serde_json::from_str::<serde_json::Value>(&stats).ok()?;
    v["subscriptions"]
        .as_object()?
        .iter()
        .find(|(k, _)| k.starts_with("pulsar-connect"))
        .and_then(|(_, s)| s["msgBacklog"].as_u64())
}

/// How often each sequence number is in `topic` (index = sequence number), read to its end.
async fn count_seqs(broker: &TestBroker, topic: &str) -> Result<Vec<u32>> {
    let client = broker.client().await?;
    let mut reader = SplitReader::open(
        &client,
        Split {
            topic: TopicName::parse(topic)?,
            partition: -1,
        },
        &format!("soak-verify-{}", now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut counts = Vec::<u32>::new();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(5) {
        let batch = reader.next_batch(5000, Duration::from_millis(500)).await?;
        if !batch.is_empty() {
            quiet_since = Instant::now();
        }
        for m in batch {
            let seq = serde_json::from_slice::<serde_json::Value>(&m.payload)
                .ok()
                .and_then(|v| v["seq"].as_u64())
                .with_context(|| format!("a message of {topic} without its seq"))?
                as usize;
            if counts.len() <= seq {
                counts.resize(seq + 1, 0);
            }
            counts[seq] += 1;
        }
    }
    reader.close().await.ok();
    Ok(counts)
}

/// The job's process, killed (if still running) and reaped when dropped: on every early return too.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.0.kill().ok();
        }
        self.0.wait().ok();
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Prints the samples (one a minute, and the last) and writes them all to `SOAK_REPORT` if set.
fn report(samples: &[Sample], long: bool) {
    eprintln!("soak: minute | run | RSS MiB | fds | threads | fed | backlog");
    let mut next_minute = 0.0;
    for (i, s) in samples.iter().enumerate() {
        if s.at_s >= next_minute || i + 1 == samples.len() || !long {
            eprintln!(
                "soak: {:6.1} | {:3} | {:7.1} | {:3} | {:7} | {:9} | {}",
                s.at_s / 60.0,
                s.run,
                s.rss_kib as f64 / 1024.0,
                s.fds,
                s.threads,
                s.fed,
                s.backlog
            );
            next_minute = (s.at_s / 60.0).floor() * 60.0 + 60.0;
        }
    }
    if let Some(path) = std::env::var_os("SOAK_REPORT") {
        let mut csv = String::from("seconds,run,rss_kib,fds,threads,fed,backlog\n");
        for s in samples {
            csv.push_str(&format!(
                "{:.1},{},{},{},{},{},{}\n",
                s.at_s, s.run, s.rss_kib, s.fds, s.threads, s.fed, s.backlog
            ));
        }
        std::fs::write(path, csv).ok();
    }
}

/// Descriptors and threads flat after the first minute (a broker restart closes and reopens the
/// connections: a band, not a trend); in the long run, RSS ≤ 5 % above its level at minute 5.
fn check_flat(samples: &[Sample], long: bool) -> Result<()> {
    let steady: Vec<&Sample> = samples.iter().filter(|s| s.at_s >= 60.0).collect();
    ensure!(!steady.is_empty(), "no samples after the first minute");
    let range = |f: fn(&Sample) -> u64| {
        let v: Vec<u64> = steady.iter().map(|s| f(s)).collect();
        (*v.iter().min().unwrap(), *v.iter().max().unwrap())
    };
    let (fd_lo, fd_hi) = range(|s| s.fds as u64);
    ensure!(
        fd_hi <= fd_lo + 16,
        "open descriptors not flat after the first minute: {fd_lo}..{fd_hi}"
    );
    let (th_lo, th_hi) = range(|s| s.threads);
    ensure!(
        th_hi <= th_lo + 8,
        "threads not flat after the first minute: {th_lo}..{th_hi}"
    );
    if long {
        // Per run of the process: its level at its minute 5, its peak after.
        let mut checked = 0;
        for run in 0..=samples.iter().map(|s| s.run).max().unwrap_or(0) {
            let of_run: Vec<&Sample> = samples.iter().filter(|s| s.run == run).collect();
            let Some(start) = of_run.first().map(|s| s.at_s) else {
                continue;
            };
            let base = of_run
                .iter()
                .filter(|s| (240.0..=300.0).contains(&(s.at_s - start)))
                .map(|s| s.rss_kib)
                .max();
            let peak = of_run
                .iter()
                .filter(|s| s.at_s - start > 300.0)
                .map(|s| s.rss_kib)
                .max();
            if let (Some(base), Some(peak)) = (base, peak) {
                checked += 1;
                ensure!(
                    peak as f64 <= base as f64 * 1.05,
                    "RSS of run {run} grew more than 5 % after its minute 5: {base} KiB then up to {peak} KiB"
                );
            }
        }
        ensure!(checked > 0, "no run of the job lasted more than 5 minutes");
    }
    Ok(())
}
