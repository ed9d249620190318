//! The benchmark's ceiling: the source's own reading stack (split readers over every partition, from the
//! earliest message) without decoding, until N messages arrived. Prints one JSON line: rows, wall seconds
//! from the first message, process CPU seconds and peak RSS.
//!
//! Usage: `bare_consumer <service-url> <topic> <messages>`

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, SplitSet, StartPosition};
use pulsar_connect::pulsar::topics::{TopicName, splits_of};
use pulsar_connect::pulsar::{ClientConfig, connect};

fn proc_field(file: &str, key: &str) -> Option<f64> {
    std::fs::read_to_string(file)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: bare_consumer <service-url> <topic> <messages>";
    let service_url = args.next().context(usage)?;
    let topic = TopicName::parse(&args.next().context(usage)?)?;
    let n: usize = args.next().context(usage)?.parse()?;
    let client = connect(&ClientConfig::new(&service_url)).await?;
    let sub = format!(
        "bare-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis()
    );
    let mut readers = Vec::new();
    for split in splits_of(&client, &[topic]).await? {
        readers.push(
            SplitReader::open(
                &client,
                split,
                &sub,
                StartPosition::Earliest,
                DataLossPolicy::Fail,
            )
            .await?,
        );
    }
    let mut set = SplitSet::new(readers);
    let mut got = 0usize;
    let mut bytes = 0usize;
    let mut first: Option<(Instant, f64)> = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while got < n && Instant::now() < deadline {
        if let Some((_, batch)) = set.next_batch(1000, Duration::from_millis(200)).await? {
            first.get_or_insert_with(|| (Instant::now(), cpu_seconds()));
            got += batch.len();
            bytes += batch.iter().map(|m| m.payload.len()).sum::<usize>();
        }
    }
    let (t0, c0) = first.unwrap_or((Instant::now(), cpu_seconds()));
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - c0;
    println!(
        "{}",
        serde_json::json!({
            "rows": got,
            "bytes": bytes,
            "wall_seconds": wall,
            "cpu_seconds": cpu,
            "peak_rss_mb": proc_field("/proc/self/status", "VmHWM:").unwrap_or(0.0) / 1024.0,
        })
    );
    set.close().await.ok();
    Ok(())
}
