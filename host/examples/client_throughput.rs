//! Measures the Pulsar client layer against a real broker: produce N small messages (batched, pipelined)
//! and consume them back (batch receive). Prints msgs/s and the process CPU time per million messages.
//! The numbers in docs/adr/0001-pulsar-client.md come from this.
//!
//! Usage: `client_throughput <service-url> [messages] [payload-bytes]` (env `WINDOW`: sends in flight, default 2000)

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use magnetar::OutgoingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use pulsar_connect::pulsar::{ClientConfig, connect};

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
    // utime and stime are fields 14 and 15 of /proc/self/stat (11 and 12 after the command name).
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let service_url = args
        .next()
        .context("usage: client_throughput <service-url> [messages] [payload-bytes]")?;
    let n: usize = args
        .next()
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(200_000);
    let size: usize = args.next().map(|v| v.parse()).transpose()?.unwrap_or(100);
    let client = connect(&ClientConfig::new(&service_url)).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let topic = format!("persistent://public/default/throughput-{now}");
    let consumer = client
        .consumer(&topic)
        .subscription("bench")
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .receiver_queue_size(5_000)
        .subscribe()
        .await?;
    let producer = client
        .producer(&topic)
        .batching(1_000, 128 * 1024)
        .batching_max_publish_delay(Duration::from_millis(5))
        .create()
        .await?;
    let payload = bytes::Bytes::from(vec![b'x'; size]);
    let window: usize = std::env::var("WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);

    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut in_flight = FuturesUnordered::new();
    for _ in 0..n {
        if in_flight.len() >= window {
            in_flight.next().await.context("a send future")??;
        }
        in_flight.push(producer.send(OutgoingMessage::with_payload(payload.clone()).into()));
    }
    while let Some(r) = in_flight.next().await {
        r?;
    }
    let (produce_s, produce_cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);

    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut got = 0;
    let mut last = None;
    while got < n {
        let batch = consumer
            .receive_batch(1_000, Duration::from_secs(30))
            .await?;
        anyhow::ensure!(!batch.is_empty(), "no message for 30 s after {got}");
        got += batch.len();
        last = batch.last().map(|m| m.message_id);
    }
    if let Some(id) = last {
        consumer.ack_cumulative(id).await?;
    }
    let (consume_s, consume_cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    println!("messages: {n} x {size} B, batching 1000 msgs / 128 KiB / 5 ms");
    println!(
        "produce: {:>9.0} msg/s  {:>6.1} MB/s  {:.2} CPU-s per million msgs",
        n as f64 / produce_s,
        (n * size) as f64 / produce_s / 1e6,
        produce_cpu / n as f64 * 1e6
    );
    println!(
        "consume: {:>9.0} msg/s  {:>6.1} MB/s  {:.2} CPU-s per million msgs",
        n as f64 / consume_s,
        (n * size) as f64 / consume_s / 1e6,
        consume_cpu / n as f64 * 1e6
    );
    producer.close().await?;
    consumer.close().await?;
    client.close().await;
    Ok(())
}
