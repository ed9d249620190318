//! The first transactional write to a topic (ADR 0026): Apache Pulsar 4.0.7 (before apache/pulsar#24945)
//! races when two transactional messages are the first ones to reach a topic together, and the loser
//! leaves the topic's transaction buffer refusing every transactional publish until the topic is
//! unloaded. Provoked here on new topics with two clients; the sink's first write
//! (`first_write::ensure`) must find the topic stuck, unload it and write. Needs the broker.

use std::time::Duration;

use anyhow::{Result, bail};
use magnetar::{OutgoingMessage, PulsarClient};
use pulsar_connect::connectors::pulsar::sink::first_write;
use pulsar_connect::pulsar::ClientConfig;
use pulsar_connect::pulsar::topics::TopicName;
use pulsar_connect_tests::{TestBroker, unique_topic};

/// Two clients send the first transactional message of `topic` at once; returns whether a third one,
/// sent afterwards, fails (the topic is stuck).
async fn race(a: &PulsarClient, b: &PulsarClient, topic: &str) -> Result<bool> {
    async fn first(client: &PulsarClient, topic: &str) -> Result<()> {
        let producer = client.producer(topic).create().await?;
        let txn = client.new_transaction(Duration::from_secs(60)).await?;
        client
            .register_partition_to_transaction(txn, topic.to_owned())
            .await?;
        let sent = tokio::time::timeout(
            Duration::from_secs(3),
            producer.send(
                OutgoingMessage::with_payload(b"race".to_vec())
                    .txn(txn.id())
                    .into(),
            ),
        )
        .await;
        client.abort_transaction(txn).await.ok();
        let _ = tokio::time::timeout(Duration::from_secs(2), producer.close()).await;
        match sent {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => bail!("{e}"),
            Err(_) => bail!("no receipt within 3 s"),
        }
    }
    // Both producers attached before either sends, so that the two first writes meet.
    let (x, y) = tokio::join!(first(a, topic), first(b, topic));
    if x.is_ok() && y.is_ok() {
        return Ok(false);
    }
    Ok(first(a, topic).await.is_err())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_stuck_by_the_first_write_race_is_unloaded_and_written() -> Result<()> {
    let broker = TestBroker::get();
    let (a, b) = (broker.client().await?, broker.client().await?);
    let mut stuck = None;
    for _ in 0..20 {
        let topic = unique_topic("first-write-race");
        if race(&a, &b, &topic).await? {
            stuck = Some(topic);
            break;
        }
    }
    let Some(topic) = stuck else {
        bail!(
            "20 topics, and two first transactional writes never left one stuck: this broker may carry \
             apache/pulsar#24945 (then the lone first write is a cost without a purpose: see ADR 0026)"
        );
    };
    let config = ClientConfig::new(&broker.service_url);
    let partitions = [TopicName::parse(&topic)?];
    // Without an admin URL: a clear error naming the topic and the defect.
    let err = first_write::ensure("dst", &a, &partitions, None)
        .await
        .expect_err("a stuck topic was written without an unload");
    let text = format!("{err:#}");
    assert!(
        text.contains(&topic) && text.contains("24945") && text.contains("admin-url"),
        "{text}"
    );
    // With one: unloaded, then written.
    first_write::ensure(
        "dst",
        &a,
        &partitions,
        Some(first_write::Admin {
            url: &broker.admin_url,
            config: &config,
        }),
    )
    .await?;
    // The topic takes transactional writes again, from any client.
    let producer = b.producer(&topic).create().await?;
    let txn = b.new_transaction(Duration::from_secs(60)).await?;
    b.register_partition_to_transaction(txn, topic.clone())
        .await?;
    tokio::time::timeout(
        Duration::from_secs(10),
        producer.send(
            OutgoingMessage::with_payload(b"after".to_vec())
                .txn(txn.id())
                .into(),
        ),
    )
    .await??;
    b.commit_transaction(txn).await?;
    Ok(())
}
