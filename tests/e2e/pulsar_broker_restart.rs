//! Reconnect after the broker restarts mid-stream, without losing acknowledged sends.
//!
//! In the `broker_restart` test binary: it restarts the local broker (`cargo xtask broker restart`), which
//! no other test may see (cargo runs test binaries one after another; `broker_restart.rs`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use magnetar::OutgoingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use pulsar_connect_tests::{TestBroker, unique_topic};
use xtask::broker::{self, Profile};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_and_consumer_survive_a_broker_restart_without_losing_acknowledged_sends()
-> Result<()> {
    let _alone = crate::one_restart_at_a_time().await;
    assert!(
        std::env::var_os("PULSAR_SERVICE_URL").is_none(),
        "this test restarts the local broker; it cannot run against an external cluster (unset PULSAR_SERVICE_URL)"
    );
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("restart");
    let consumer = client
        .consumer(&topic)
        .subscription("durable")
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let producer = client.producer(&topic).create().await?;

    let mut acknowledged = BTreeSet::new();
    for i in 0..100 {
        producer
            .send(OutgoingMessage::with_payload(format!("{i}").into_bytes()).into())
            .await?;
        acknowledged.insert(i);
    }
    let mut received = BTreeSet::new();
    for _ in 0..50 {
        let msg = tokio::time::timeout(Duration::from_secs(20), consumer.receive()).await??;
        received.insert(String::from_utf8_lossy(&msg.payload).parse::<i32>()?);
        consumer.ack(msg.message_id).await?;
    }

    let restarted = tokio::task::spawn_blocking(|| broker::restart(Profile::Default)).await??;
    assert_eq!(
        restarted.service_url, broker.service_url,
        "the broker comes back on the same URL"
    );

    // Sends during and after the reconnect: a send that reports success must be delivered.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut i = 100;
    while i < 200 && Instant::now() < deadline {
        match tokio::time::timeout(
            Duration::from_secs(30),
            producer.send(OutgoingMessage::with_payload(format!("{i}").into_bytes()).into()),
        )
        .await
        {
            Ok(Ok(_)) => {
                acknowledged.insert(i);
                i += 1;
            }
            // Not acknowledged: not owed to the consumer. Try the next number.
            Ok(Err(_)) | Err(_) => i += 1,
        }
    }
    assert!(
        acknowledged.len() >= 150,
        "the producer recovered after the restart ({} acknowledged)",
        acknowledged.len()
    );

    let deadline = Instant::now() + Duration::from_secs(120);
    while !acknowledged.is_subset(&received) {
        let left = deadline
            .checked_duration_since(Instant::now())
            .context("timed out")?;
        let msg = tokio::time::timeout(left, consumer.receive())
            .await
            .with_context(|| {
                let missing: Vec<_> = acknowledged.difference(&received).take(10).collect();
                format!("acknowledged sends never delivered after the restart, e.g. {missing:?}")
            })??;
        received.insert(String::from_utf8_lossy(&msg.payload).parse::<i32>()?);
        consumer.ack(msg.message_id).await?;
    }
    producer.close().await?;
    consumer.close().await?;
    client.close().await;
    Ok(())
}
