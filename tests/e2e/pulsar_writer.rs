//! Topic writers against the real broker: explicit partitions, bounded in-flight sends, flush waits for
//! every receipt, failures are reported with the topic and kept for a dead-letter topic.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use magnetar::OutgoingMessage;
use magnetar::proto::types::CompressionKind;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{TopicName, splits_of};
use pulsar_connect::pulsar::writer::{TopicWriter, WriterConfig};
use pulsar_connect_tests::{TestBroker, unique_topic};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_each_message_to_the_partition_it_is_given_and_flush_waits_for_every_receipt()
-> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("writer-partitions");
    broker.create_partitioned_topic(&topic, 3)?;
    let config = WriterConfig {
        max_in_flight: 50,
        ..WriterConfig::default()
    };
    let mut w = TopicWriter::open(&client, TopicName::parse(&topic)?, &config).await?;
    assert_eq!(w.partitions(), 3);
    for i in 0..3000u32 {
        w.send(
            i % 3,
            OutgoingMessage::with_payload(format!("{i}").into_bytes()).key(format!("k{i}")),
        )
        .await?;
        assert!(w.in_flight() <= 50, "at most max_in_flight sends wait");
    }
    w.flush().await?;
    assert_eq!(w.acknowledged(), 3000, "flush returns after every receipt");
    assert!(
        w.send(3, OutgoingMessage::with_payload(b"x".to_vec()))
            .await
            .unwrap_err()
            .to_string()
            .contains("partition 3 does not exist")
    );
    w.close().await?;

    let mut readers = Vec::new();
    for s in splits_of(&client, &[TopicName::parse(&topic)?]).await? {
        readers.push(
            SplitReader::open(
                &client,
                s,
                "check",
                StartPosition::Earliest,
                DataLossPolicy::Fail,
            )
            .await?,
        );
    }
    let mut per_partition = BTreeMap::new();
    for mut r in readers {
        let p = r.split().partition;
        let want = (0..3000).filter(|i| i % 3 == p).count();
        let mut got = Vec::new();
        while got.len() < want {
            let batch = r.next_batch(500, Duration::from_secs(20)).await?;
            if batch.is_empty() {
                break;
            }
            got.extend(batch.iter().map(|m| {
                std::str::from_utf8(&m.payload)
                    .unwrap()
                    .parse::<u32>()
                    .unwrap()
            }));
        }
        r.close().await?;
        per_partition.insert(p, got);
    }
    for (p, got) in &per_partition {
        let want: Vec<u32> = (0..3000).filter(|i| (i % 3) as i32 == *p).collect();
        assert_eq!(got, &want, "partition {p} holds its messages in order");
    }
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_send_fails_the_flush_and_is_kept_for_a_dead_letter_topic() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("writer-failure");
    let config = WriterConfig {
        batching: None,
        ..WriterConfig::default()
    };
    let mut w = TopicWriter::open(&client, TopicName::parse(&topic)?, &config).await?;
    w.keep_failed_messages(true);
    w.send(0, OutgoingMessage::with_payload(b"small".to_vec()))
        .await?;
    // Over the broker's default 5 MiB message size limit.
    w.send(
        0,
        OutgoingMessage::with_payload(vec![b'x'; 6 * 1024 * 1024]).key("big"),
    )
    .await?;
    let err = w.flush().await.unwrap_err().to_string();
    assert!(err.contains("1 send(s)") && err.contains(&topic), "{err}");
    let failures = w.take_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!(
        failures[0].message.as_ref().and_then(|m| m.key.as_deref()),
        Some("big")
    );
    assert_eq!(w.acknowledged(), 1);
    w.flush().await?;
    w.close().await?;
    client.close().await;
    Ok(())
}

/// Compression with batching writes batches compressed as a whole (third_party/README.md, patch 7;
/// read by the official client in tests/e2e/python_interop.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_with_batching_is_accepted() -> Result<()> {
    for compression in [
        CompressionKind::Lz4,
        CompressionKind::Zlib,
        CompressionKind::Zstd,
        CompressionKind::Snappy,
    ] {
        for batching in [WriterConfig::default().batching, None] {
            let config = WriterConfig {
                compression,
                batching,
                ..WriterConfig::default()
            };
            config.validate()?;
        }
    }
    Ok(())
}

/// Receipts are taken in as they arrive, without a flush: the writer's in-flight count falls back to zero
/// (what bounds a sink's memory), on every partition, also when one partition gets most of the sends and
/// the bound is a single send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_are_taken_in_without_a_flush_on_every_partition() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("writer-receipts");
    broker.create_partitioned_topic(&topic, 3)?;
    for max_in_flight in [1, 1_000] {
        let config = WriterConfig {
            max_in_flight,
            ..WriterConfig::default()
        };
        let mut w = TopicWriter::open(&client, TopicName::parse(&topic)?, &config).await?;
        // Nine in ten to partition 0, the rest to 1 and 2.
        for i in 0..300u32 {
            let p = if i % 10 == 9 { 1 + (i / 10) % 2 } else { 0 };
            w.send(p, OutgoingMessage::with_payload(i.to_string().into_bytes()))
                .await?;
            assert!(w.in_flight() <= max_in_flight);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while w.in_flight() > 0 && std::time::Instant::now() < deadline {
            // The input ran dry: open batches go out and receipts already in are counted.
            w.send_open_batches();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            (w.in_flight(), w.acknowledged()),
            (0, 300),
            "every receipt taken in without a flush (max_in_flight {max_in_flight})"
        );
        w.close().await?;
    }
    Ok(())
}
