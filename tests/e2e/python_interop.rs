//! Interop with the official Apache Pulsar client (Python `pulsar-client`, C++ core): what it writes we
//! read with every field intact, and what we write it reads.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::proto::types::CompressionKind;
use pulsar_connect::pulsar::message;
use pulsar_connect_tests::{TestBroker, run_python, unique_topic};

/// Parses the Python client's message id text, e.g. `(12,3,1,7)` = (ledger, entry, partition, batch index).
fn python_id(text: &str) -> Result<(u64, u64, i32, i32)> {
    let nums: Vec<i64> = text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|n| n.trim().parse::<i64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("message id {text}"))?;
    match nums.as_slice() {
        [l, e, p, b, ..] => Ok((*l as u64, *e as u64, *p as i32, *b as i32)),
        _ => bail!("unexpected message id {text}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_official_client_writes_we_read_with_every_field() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-from-python");
    broker.create_partitioned_topic(&topic, 3)?;
    let written = run_python(&["produce", &broker.service_url, &topic, "200"])?;
    assert_eq!(written.len(), 200);

    let client = broker.client().await?;
    let mut consumers = Vec::new();
    for p in 0..3 {
        consumers.push(
            client
                .consumer(format!("{topic}-partition-{p}"))
                .subscription("rust-reader")
                .subscription_type(SubType::Exclusive)
                .initial_position(InitialPosition::Earliest)
                .subscribe()
                .await?,
        );
    }
    let mut got = BTreeMap::new();
    for (p, consumer) in consumers.into_iter().enumerate() {
        let expected = written
            .iter()
            .filter(|w| {
                python_id(w["message_id"].as_str().unwrap()).is_ok_and(|id| id.2 == p as i32)
            })
            .count();
        let mut read = 0;
        while read < expected {
            let msg = tokio::time::timeout(Duration::from_secs(20), consumer.receive())
                .await
                .with_context(|| format!("partition {p}: {read} of {expected} messages"))??;
            let props: BTreeMap<String, String> = message::properties(&msg)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let payload = String::from_utf8(msg.payload.to_vec())
                .context("payload is the UTF-8 text written")?;
            got.insert(
                payload,
                (
                    message::key(&msg).map(str::to_owned),
                    props,
                    message::event_time_ms(&msg),
                    msg.message_id,
                ),
            );
            consumer.ack(msg.message_id).await?;
            read += 1;
        }
        let extra = tokio::time::timeout(Duration::from_millis(500), consumer.receive()).await;
        assert!(extra.is_err(), "partition {p}: more messages than written");
        consumer.close().await?;
    }
    assert_eq!(
        got.len(),
        200,
        "every message the official client wrote is read exactly once"
    );
    let mut batched = 0;
    for w in &written {
        let payload = w["payload"].as_str().unwrap();
        let (key, props, event_time, id) = got
            .get(payload)
            .with_context(|| format!("missing {payload}"))?;
        assert_eq!(key.as_deref(), w["key"].as_str(), "{payload}: key");
        let want: BTreeMap<String, String> = serde_json::from_value(w["properties"].clone())?;
        assert_eq!(props, &want, "{payload}: properties");
        assert_eq!(
            *event_time,
            w["event_time"].as_u64(),
            "{payload}: event time"
        );
        let (ledger, entry, partition, batch) = python_id(w["message_id"].as_str().unwrap())?;
        assert_eq!(
            (id.ledger_id, id.entry_id, id.partition, id.batch_index),
            (ledger, entry, partition, batch)
        );
        // The `messageId` metadata column holds what the official client's `MessageId.serialize()` gives.
        let theirs = base64::engine::general_purpose::STANDARD
            .decode(w["message_id_bytes"].as_str().unwrap())?;
        assert_eq!(id.to_bytes(), theirs, "{payload}: messageId bytes");
        if id.batch_index >= 0 {
            batched += 1;
        }
    }
    assert!(
        batched > 100,
        "the official client batched its sends ({batched} batched)"
    );
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_one_message_is_read_without_its_batch_framing() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-batch-of-one");
    let written = run_python(&["produce-one", &broker.service_url, &topic])?;
    let (_, _, _, batch_index) = python_id(written[0]["message_id"].as_str().unwrap())?;
    assert_eq!(
        batch_index, 0,
        "the official client sent it as a batch of one"
    );
    let client = broker.client().await?;
    let consumer = client
        .consumer(&topic)
        .subscription("rust-reader")
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let msg = tokio::time::timeout(Duration::from_secs(20), consumer.receive()).await??;
    assert_eq!(&msg.payload[..], b"alone in its batch");
    assert_eq!(message::key(&msg), Some("solo"));
    assert_eq!(
        message::properties(&msg).collect::<Vec<_>>(),
        vec![("p", "1")]
    );
    assert_eq!(
        (msg.message_id.batch_index, msg.message_id.batch_size),
        (0, 1)
    );
    consumer.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_we_write_the_official_client_reads() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-to-python");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    let mut expected = BTreeMap::new();
    // magnetar 1.7.4's producer compresses each message before batching, which the official client
    // rejects as corrupted (docs/adr/0001-pulsar-client.md): compression and batching are tested apart.
    let plans = [
        (CompressionKind::Lz4, false, 0..34),
        (CompressionKind::Zstd, false, 34..67),
        (CompressionKind::None, true, 67..100),
    ];
    for (compression, batching, range) in plans {
        let mut builder = client.partitioned_producer(&topic).compression(compression);
        if batching {
            builder = builder
                .batching(20, 1 << 20)
                .batching_max_publish_delay(Duration::from_millis(10));
        }
        let producer = builder.create().await?;
        let mut sends = Vec::new();
        for i in range {
            let payload = format!("rust-{i}-ünïcødé");
            expected.insert(
                payload.clone(),
                (format!("k{i}"), i.to_string(), 1_650_000_000_000u64 + i),
            );
            sends.push(
                producer
                    .new_message()
                    .key(format!("k{i}"))
                    .property("index", i.to_string())
                    .event_time_ms(1_650_000_000_000 + i)
                    .value(payload.into_bytes())
                    .send(),
            );
        }
        futures::future::try_join_all(sends).await?;
        producer.close().await?;
    }
    client.close().await;

    let read = run_python(&["consume", &broker.service_url, &topic, "100", "30"])?;
    assert_eq!(read.len(), 100);
    for r in read {
        let payload = r["payload"].as_str().unwrap();
        let (key, index, event_time) = expected
            .remove(payload)
            .with_context(|| format!("unexpected {payload}"))?;
        assert_eq!(r["key"].as_str(), Some(key.as_str()));
        assert_eq!(r["properties"]["index"].as_str(), Some(index.as_str()));
        assert_eq!(r["event_time"].as_u64(), Some(event_time));
    }
    assert!(
        expected.is_empty(),
        "not read by the official client: {:?}",
        expected.keys().collect::<Vec<_>>()
    );
    Ok(())
}
