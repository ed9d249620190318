//! Exactly-once across a broker restart: the copy job of `copy_job.rs` runs while the local broker is
//! stopped and started again (same ports, same data); whenever the job gives up it is restarted from its
//! checkpoints, as a supervisor would. The output must hold every input exactly once.
//!
//! In the `broker_restart` test binary: it restarts the local broker, which no other test may see (cargo
//! runs test binaries one after another; `broker_restart.rs`).

use std::time::Duration;

use anyhow::Result;
use xtask::broker::{self, Profile};

#[path = "cluster.rs"]
#[allow(dead_code)] // shared with takeover.rs, which uses the rest
pub(crate) mod cluster;
#[path = "copy_job.rs"]
#[allow(dead_code)] // shared with exactly_once.rs, which uses the rest
pub(crate) mod copy_job;
use copy_job::{CopyJob, assert_exactly_once};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_restart_mid_run_keeps_every_input_exactly_once() -> Result<()> {
    let _alone = crate::one_restart_at_a_time().await;
    assert!(
        std::env::var_os("PULSAR_SERVICE_URL").is_none(),
        "this test restarts the local broker; it cannot run against an external cluster (unset PULSAR_SERVICE_URL)"
    );
    let job = CopyJob::new("exactly-once").await?;
    // The broker may restart before the job has subscribed (it opens its sink first): only retention
    // keeps the input for it then (CI, 2026-12-07: the restarted broker had dropped the whole input).
    // The output has no subscription until the test reads it: what was committed before the restart
    // is kept only by retention too (seen 2026-12-07: the output's ledger dropped at the restart).
    job.broker.retain_all(&job.input)?;
    job.broker.retain_all(&job.output)?;
    let mut child = job.spawn();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let restarted = tokio::task::spawn_blocking(|| broker::restart(Profile::Default))
        .await
        .map_err(anyhow::Error::from)
        .and_then(|r| r);
    let restarted = match restarted {
        Ok(info) => info,
        Err(e) => {
            child.kill().ok();
            child.wait().ok();
            return Err(e);
        }
    };
    assert_eq!(restarted.service_url, job.broker.service_url);
    let mut restarts = 0;
    let (counts, log) = job.finish(child, &mut restarts).await?;
    eprintln!("the job was restarted {restarts} time(s) after the broker restart");
    assert_exactly_once(&counts, &log);
    Ok(())
}
