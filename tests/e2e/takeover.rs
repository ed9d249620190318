//! Take-over after a process dies (issue 35, ADR 0023): several processes copy one Pulsar → Pulsar job
//! exactly-once through a shared subscription with a long `transaction-timeout` (5 min); when one is
//! SIGKILLed, the survivors abort the transaction it left open, so its partitions' rows and the output
//! behind its uncommitted writes come through in seconds, not when the transaction times out. The
//! output is checked complete (every row once) within a fifth of the timeout. A process that is stopped
//! but still connected (SIGSTOP) keeps its transaction while another process's death is taken over.
//! Needs the broker, the built plugins and the release binary (`cargo xtask test`).

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use pulsar_connect_tests::TestBroker;

use super::exactly_once::cluster::Cluster;

/// Long enough that waiting for it would fail every check below.
const TXN_TIMEOUT: Duration = Duration::from_secs(300);
const TAKEN_OVER: &str = "took over from a process that is gone";

/// Three processes; one is SIGKILLed while rows arrive (it holds uncommitted output and
/// acknowledgements); the survivors end its transaction and every row is in the output once, within a
/// fifth of the transaction timeout.
async fn kill_round(kind: &str) -> Result<()> {
    let mut c = Cluster::on(TestBroker::get(), kind, TXN_TIMEOUT, true).await?;
    for name in ["a", "b", "c"] {
        c.start(name).await?;
    }
    let total = 20_000;
    let feeder = c.feed(0, total);
    // Rows keep arriving for ~4 s: the kill lands while the process holds rows no checkpoint committed.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ensure!(!feeder.is_finished(), "the input was fed before the kill");
    c.kill("b")?;
    let killed = Instant::now();
    feeder.await??;
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    let survivors = format!("{}{}", c.log("a"), c.log("c"));
    ensure!(
        survivors.contains(TAKEN_OVER),
        "no survivor logged the take-over:\n{}",
        c.logs()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_a_killed_processs_partitions_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Failover").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_a_killed_processs_messages_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Shared").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_shared_a_killed_processs_messages_are_taken_over_long_before_its_transaction_times_out()
-> Result<()> {
    kill_round("Key_Shared").await
}

/// The whole job on one machine: its only process is killed while it copies and started again; the new
/// run ends the transaction the old one left open (its consumer name is gone) instead of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_job_ends_what_its_killed_run_left_open() -> Result<()> {
    let mut c = Cluster::on(TestBroker::get(), "Failover", TXN_TIMEOUT, true).await?;
    c.start("first").await?;
    let total = 10_000;
    let feeder = c.feed(0, total);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    ensure!(!feeder.is_finished(), "the input was fed before the kill");
    c.kill("first")?;
    let killed = Instant::now();
    c.start("second").await?;
    feeder.await??;
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    ensure!(
        c.log("second").contains(TAKEN_OVER),
        "the restarted run did not end the old run's transaction:\n{}",
        c.logs()
    );
    Ok(())
}

/// A process stopped by SIGSTOP keeps its connection, so it is alive to the broker (its partitions stay
/// its own): while it is stopped, a third process dies and is taken over, and the stopped one's open
/// transaction is left alone. Continued, it goes on; killed later, it is taken over too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_process_keeps_its_transaction_while_a_dead_one_is_taken_over() -> Result<()> {
    let mut c = Cluster::on(TestBroker::get(), "Failover", TXN_TIMEOUT, true).await?;
    c.start("a").await?;
    c.start("b").await?;
    let stopped_name = c.consumer_of("a")?;
    let total = 24_000;
    let feeder = c.feed(0, total);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // `a` stops holding an open transaction (rows arrive all along, checkpoints every second).
    c.signal("a", "-STOP")?;
    c.start("c").await?;
    let dead_name = c.consumer_of("c")?;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    c.kill("c")?;
    // `b` takes `c` over...
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.log("b").contains(&format!("owner={dead_name}")) {
        ensure!(
            Instant::now() < deadline,
            "b did not take the killed process over:\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // ... and, with a few more looks at the subscription, still leaves the stopped one alone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        !c.log("b").contains(&format!("owner={stopped_name}")),
        "b aborted the transaction of a process that is stopped but connected:\n{}",
        c.logs()
    );
    c.signal("a", "-CONT")?;
    feeder.await??;
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.kill("a")?;
    let killed = Instant::now();
    c.expect_exactly_once(total, killed, TXN_TIMEOUT / 5)
        .await?;
    Ok(())
}
