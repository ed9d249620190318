//! The Pulsar client spike, kept as integration tests against the real broker: what the connectors rely
//! on from `magnetar-driver` (see docs/adr/0001-pulsar-client.md).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result};
use magnetar::proto::event::IncomingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::runtime_tokio::Consumer;
use magnetar::{MessageId, OutgoingMessage, PulsarClient};
use pulsar_connect::pulsar::message;
use pulsar_connect_tests::{TestBroker, unique_topic};

// Generous: magnetar 1.7.4 rarely stalls a fresh consumer until its stall watchdog (10 s) re-attaches it
// (docs/adr/0001-pulsar-client.md).
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(45);

async fn receive(consumer: &Consumer) -> Result<IncomingMessage> {
    Ok(tokio::time::timeout(RECEIVE_TIMEOUT, consumer.receive())
        .await
        .context("no message within the receive timeout")??)
}

async fn subscribe(
    client: &PulsarClient,
    topic: &str,
    sub: &str,
    sub_type: SubType,
) -> Result<Consumer> {
    Ok(client
        .consumer(topic)
        .subscription(sub)
        .subscription_type(sub_type)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?)
}

async fn produce(client: &PulsarClient, topic: &str, n: usize) -> Result<Vec<MessageId>> {
    let producer = client.producer(topic).create().await?;
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        ids.push(
            producer
                .send(OutgoingMessage::with_payload(format!("m{i}").into_bytes()).into())
                .await?,
        );
    }
    producer.close().await?;
    Ok(ids)
}

fn text(msg: &IncomingMessage) -> String {
    String::from_utf8_lossy(&msg.payload).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_and_consume_keep_key_properties_and_event_time() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-roundtrip");
    let consumer = subscribe(&client, &topic, "s", SubType::Exclusive).await?;
    let producer = client.producer(&topic).create().await?;
    for i in 0..50u64 {
        producer
            .send(
                OutgoingMessage::with_payload(format!("payload-{i}-ü").into_bytes())
                    .key(format!("key-{i}"))
                    .property("index", i.to_string())
                    .property("origin", "rust")
                    .event_time_ms(1_600_000_000_000 + i)
                    .into(),
            )
            .await?;
    }
    let mut last_seq = None;
    for i in 0..50u64 {
        let msg = receive(&consumer).await?;
        assert_eq!(text(&msg), format!("payload-{i}-ü"));
        assert_eq!(message::key(&msg), Some(format!("key-{i}").as_str()));
        let props: Vec<_> = message::properties(&msg).collect();
        assert_eq!(
            props,
            vec![("index", i.to_string().as_str()), ("origin", "rust")]
        );
        assert_eq!(message::event_time_ms(&msg), Some(1_600_000_000_000 + i));
        assert!(message::publish_time_ms(&msg) > 1_600_000_000_000);
        let seq = message::sequence_id(&msg);
        assert!(last_seq.is_none_or(|l| seq > l), "sequence ids increase");
        last_seq = Some(seq);
        consumer.ack(msg.message_id).await?;
    }
    producer.close().await?;
    consumer.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_to_a_message_id_replays_from_that_message() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-seek");
    let consumer = subscribe(&client, &topic, "s", SubType::Exclusive).await?;
    let ids = produce(&client, &topic, 10).await?;
    for i in 0..10 {
        let msg = receive(&consumer).await?;
        assert_eq!(text(&msg), format!("m{i}"));
        consumer.ack(msg.message_id).await?;
    }
    consumer.seek_to_message(ids[4]).await?;
    let msg = receive(&consumer).await?;
    assert_eq!(
        text(&msg),
        "m4",
        "seek is inclusive: the message at the id comes first"
    );
    assert_eq!(
        (msg.message_id.ledger_id, msg.message_id.entry_id),
        (ids[4].ledger_id, ids[4].entry_id)
    );
    for i in 5..10 {
        assert_eq!(text(&receive(&consumer).await?), format!("m{i}"));
    }
    consumer.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cumulative_ack_moves_the_durable_cursor() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-cumulative");
    let consumer = subscribe(&client, &topic, "durable", SubType::Exclusive).await?;
    produce(&client, &topic, 10).await?;
    let mut fifth = None;
    for i in 0..10 {
        let msg = receive(&consumer).await?;
        if i == 5 {
            fifth = Some(msg.message_id);
        }
    }
    consumer
        .ack_cumulative(fifth.expect("ten messages"))
        .await?;
    consumer.close().await?;
    let again = subscribe(&client, &topic, "durable", SubType::Exclusive).await?;
    assert_eq!(
        text(&receive(&again).await?),
        "m6",
        "everything up to m5 was acknowledged"
    );
    again.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_message_id_is_the_last_published() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-last-id");
    let consumer = subscribe(&client, &topic, "s", SubType::Exclusive).await?;
    let ids = produce(&client, &topic, 3).await?;
    let last = consumer.last_message_id().await?;
    assert_eq!(
        (last.ledger_id, last.entry_id),
        (ids[2].ledger_id, ids[2].entry_id)
    );
    consumer.close().await?;
    client.close().await;
    Ok(())
}

/// Java's `String.hashCode()` over UTF-16 code units, masked to 31 bits (`JavaStringHash.makeHash`),
/// written here independently of the client's own implementation.
fn java_string_hash(s: &str) -> u32 {
    let h = s
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (h & i32::MAX) as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_topic_routes_keys_like_the_java_client() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-partitioned");
    broker.create_partitioned_topic(&topic, 4)?;
    assert_eq!(client.partitions_for_topic(&topic).await?, 4);
    let mut consumers = Vec::new();
    for p in 0..4 {
        consumers.push(
            subscribe(
                &client,
                &format!("{topic}-partition-{p}"),
                "s",
                SubType::Exclusive,
            )
            .await?,
        );
    }
    let producer = client.partitioned_producer(&topic).create().await?;
    let keys: Vec<String> = (0..40).map(|i| format!("customer-{i}")).collect();
    for k in &keys {
        producer
            .new_message()
            .key(k.clone())
            .value(k.clone().into_bytes())
            .send()
            .await?;
    }
    let mut seen = BTreeSet::new();
    for (p, consumer) in consumers.iter().enumerate() {
        let expected: Vec<&String> = keys
            .iter()
            .filter(|k| java_string_hash(k) as usize % 4 == p)
            .collect();
        for k in expected {
            let msg = receive(consumer).await?;
            assert_eq!(
                text(&msg),
                *k,
                "partition {p} holds the keys Java's default router sends there"
            );
            assert_eq!(msg.message_id.partition, p as i32);
            seen.insert(text(&msg));
        }
    }
    assert_eq!(seen.len(), 40);
    producer.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_index_acks_redeliver_only_the_unacknowledged_part_of_a_batch() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-batch-ack");
    let consumer = subscribe(&client, &topic, "shared", SubType::Shared).await?;
    let producer = client
        .producer(&topic)
        .batching(100, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(50))
        .create()
        .await?;
    let sends: Vec<_> = (0..10)
        .map(|i| producer.send(OutgoingMessage::with_payload(format!("b{i}").into_bytes()).into()))
        .collect();
    let ids = futures::future::try_join_all(sends).await?;
    assert!(
        ids.iter().all(|id| id.entry_id == ids[0].entry_id),
        "the ten messages share one batched entry"
    );
    for i in 0..10 {
        let msg = receive(&consumer).await?;
        assert_eq!(text(&msg), format!("b{i}"));
        assert_eq!(msg.message_id.batch_index, i);
        if i < 5 {
            consumer.ack(msg.message_id).await?;
        }
    }
    consumer.close().await?;
    let again = subscribe(&client, &topic, "shared", SubType::Shared).await?;
    let mut redelivered = Vec::new();
    for _ in 0..5 {
        redelivered.push(text(&receive(&again).await?));
    }
    redelivered.sort();
    assert_eq!(redelivered, vec!["b5", "b6", "b7", "b8", "b9"]);
    let extra = tokio::time::timeout(Duration::from_secs(2), again.receive()).await;
    assert!(
        extra.is_err(),
        "acknowledged batch members must not come back: {extra:?}"
    );
    producer.close().await?;
    again.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_is_visible_and_abort_is_not() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("spike-txn");
    let consumer = subscribe(&client, &topic, "s", SubType::Exclusive).await?;
    let producer = client.producer(&topic).create().await?;

    let committed = client.new_transaction(Duration::from_secs(60)).await?;
    client
        .register_partition_to_transaction(committed, &topic)
        .await?;
    let aborted = client.new_transaction(Duration::from_secs(60)).await?;
    client
        .register_partition_to_transaction(aborted, &topic)
        .await?;
    for i in 0..3 {
        producer
            .send(
                OutgoingMessage::with_payload(format!("commit-{i}").into_bytes())
                    .txn(committed.id())
                    .into(),
            )
            .await?;
        producer
            .send(
                OutgoingMessage::with_payload(format!("abort-{i}").into_bytes())
                    .txn(aborted.id())
                    .into(),
            )
            .await?;
    }
    let early = tokio::time::timeout(Duration::from_secs(2), consumer.receive()).await;
    assert!(
        early.is_err(),
        "nothing is visible before the commit: {early:?}"
    );
    client.abort_transaction(aborted).await?;
    client.commit_transaction(committed).await?;
    for i in 0..3 {
        let msg = receive(&consumer).await?;
        assert_eq!(text(&msg), format!("commit-{i}"));
        consumer.ack(msg.message_id).await?;
    }
    let extra = tokio::time::timeout(Duration::from_secs(3), consumer.receive()).await;
    assert!(
        extra.is_err(),
        "aborted messages must never be delivered: {extra:?}"
    );
    producer.close().await?;
    consumer.close().await?;
    client.close().await;
    Ok(())
}
