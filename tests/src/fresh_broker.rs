//! A broker as production meets it after a first start, a restart or an upgrade: wiped and started right
//! before a round (its own `fresh` profile, beside the default broker), and restarted in the middle of
//! one. Also what a round checks on the broker afterwards: the transactions left open on a topic.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use xtask::broker::{self, BrokerInfo, Profile, StartOptions};

use crate::{TestBroker, topic_path};

/// A wiped broker started for one round; stopped when dropped (its log stays in
/// `target/pulsar/fresh/broker.log`).
pub struct FreshBroker {
    pub broker: TestBroker,
    pub info: BrokerInfo,
}

impl FreshBroker {
    /// Stops any broker of the `fresh` profile, wipes its data and starts it (health, `public/default`
    /// and the transaction coordinator's topic in place, as `cargo xtask broker start --wipe` waits for).
    /// Nothing else warms it up: no topic, transaction buffer or coordinator store is loaded yet.
    pub fn start() -> Result<FreshBroker> {
        assert!(
            std::env::var_os("PULSAR_SERVICE_URL").is_none(),
            "a fresh-broker round starts its own local broker; it cannot run against an external cluster (unset PULSAR_SERVICE_URL)"
        );
        crate::init_test_logs();
        broker::stop(Profile::Fresh)?;
        let started = Instant::now();
        let info = broker::start(&StartOptions {
            wipe: true,
            ..StartOptions::new(Profile::Fresh)
        })?;
        eprintln!(
            "fresh broker up in {:.1} s at {}",
            started.elapsed().as_secs_f64(),
            info.service_url
        );
        Ok(FreshBroker {
            broker: TestBroker {
                service_url: info.service_url.clone(),
                admin_url: info.admin_url.clone(),
                token: None,
            },
            info,
        })
    }

    /// Stops and starts it again (same ports, same data), as `cargo xtask broker restart` does.
    pub fn restart(&mut self) -> Result<()> {
        let info = broker::restart(Profile::Fresh)?;
        if info.service_url != self.broker.service_url {
            bail!(
                "the restarted broker moved from {} to {}",
                self.broker.service_url,
                info.service_url
            );
        }
        self.info = info;
        Ok(())
    }

    /// The last `n` lines of the broker's log that name one of `needles` (for a failing round's report).
    pub fn log_lines(&self, needles: &[&str], n: usize) -> String {
        let text = std::fs::read_to_string(&self.info.log_file).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| needles.iter().any(|s| l.contains(s)))
            .collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for FreshBroker {
    fn drop(&mut self) {
        if let Err(e) = broker::stop(Profile::Fresh) {
            eprintln!("stopping the fresh broker: {e:#}");
        }
    }
}

/// What the broker says about the transactions on one topic (each partition of a partitioned one).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OpenTransactions {
    /// Partitions whose transaction buffer holds open transactions, with their number.
    pub by_partition: Vec<(String, u64)>,
    /// The coordinator's open transactions that hold something (a produced partition or an
    /// acknowledgement), on the whole broker, with what they hold.
    pub holding: Vec<String>,
    /// The coordinator's open transactions that hold nothing (opened, never used: invisible to readers
    /// and to every cursor; e.g. a run killed between opening one and recording it).
    pub empty: usize,
    /// Transactions the job ended (the coordinator took the commit or abort: `COMMITTING`, `ABORTING`)
    /// whose markers the coordinator is still delivering. Their outcome is decided; they hold a reader
    /// back only while a partition's buffer still lists them, which `by_partition` shows. Seen once
    /// (campaign 2026-12-07): a lone first write's transaction aborted while its partition was stuck
    /// and then unloaded stayed `ABORTING` on the coordinator, on no partition's buffer.
    pub ending: Vec<String>,
}

impl OpenTransactions {
    pub fn total(&self) -> u64 {
        self.by_partition.iter().map(|(_, n)| n).sum::<u64>() + self.holding.len() as u64
    }
}

impl TestBroker {
    /// The transactions open on `topic` (its partitions' transaction buffers) and on the coordinator.
    pub fn open_transactions(&self, topic: &str, partitions: u32) -> Result<OpenTransactions> {
        let mut out = OpenTransactions {
            by_partition: self.buffered_open_transactions(topic, partitions)?,
            ..OpenTransactions::default()
        };
        let slow: serde_json::Value = serde_json::from_str(&self.admin(
            "GET",
            "/admin/v3/transactions/slowTransactions/0",
            None,
        )?)?;
        for (id, meta) in slow.as_object().into_iter().flatten() {
            let produced = meta["producedPartitions"]
                .as_object()
                .map_or(0, serde_json::Map::len);
            let acked = meta["ackedPartitions"]
                .as_object()
                .map_or(0, serde_json::Map::len);
            let status = meta["status"].as_str().unwrap_or("");
            if status == "ABORTING" || status == "COMMITTING" {
                out.ending.push(format!("{id}: {meta}"));
            } else if produced + acked == 0 {
                out.empty += 1;
            } else {
                out.holding.push(format!("{id}: {meta}"));
            }
        }
        Ok(out)
    }

    /// The partitions of `topic` whose transaction buffer holds open transactions, with their number
    /// (only the topic's own buffers: cheap on a broker that has seen many transactions).
    pub fn buffered_open_transactions(
        &self,
        topic: &str,
        partitions: u32,
    ) -> Result<Vec<(String, u64)>> {
        let names: Vec<String> = if partitions == 0 {
            vec![topic.to_owned()]
        } else {
            (0..partitions)
                .map(|p| format!("{topic}-partition-{p}"))
                .collect()
        };
        let mut out = Vec::new();
        for name in names {
            let path = topic_path(&name)?;
            let stats: serde_json::Value = serde_json::from_str(&self.admin(
                "GET",
                &format!("/admin/v3/transactions/transactionBufferStats/{path}"),
                None,
            )?)
            .with_context(|| format!("the transaction buffer stats of {name}"))?;
            let open = stats["ongoingTxnSize"].as_u64().unwrap_or(0);
            if open > 0 {
                out.push((name, open));
            }
        }
        Ok(out)
    }

    /// Waits up to `within` for `topic` to have no open transaction (a commit fans out asynchronously);
    /// returns what was open at the end.
    pub async fn wait_no_open_transactions(
        &self,
        topic: &str,
        partitions: u32,
        within: Duration,
    ) -> Result<OpenTransactions> {
        let deadline = Instant::now() + within;
        loop {
            let open = self.open_transactions(topic, partitions)?;
            if open.total() == 0 || Instant::now() >= deadline {
                return Ok(open);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
