//! The demo for now: produce a few messages to a real Pulsar and read them back with our client.
//! `cargo xtask demo` starts a local broker and runs this; later it runs the seed job.
//!
//! Usage: `pulsar_roundtrip <service-url>`

use std::time::Duration;

use anyhow::{Context, Result};
use magnetar::OutgoingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use pulsar_connect::pulsar::{ClientConfig, connect};

#[tokio::main]
async fn main() -> Result<()> {
    let service_url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "pulsar://127.0.0.1:6650".to_owned());
    let client = connect(&ClientConfig::new(&service_url)).await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis();
    let topic = format!("persistent://public/default/demo-orders-{now}");
    let consumer = client
        .consumer(&topic)
        .subscription("demo")
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let producer = client.producer(&topic).create().await?;
    println!("producing 5 orders to {topic}");
    for i in 1..=5u64 {
        let row = format!(
            r#"{{"order_id":{i},"order_product_id":{},"order_customer_id":{},"order_status":"CREATED"}}"#,
            100 + i,
            1000 + i
        );
        let id = producer
            .send(
                OutgoingMessage::with_payload(row.into_bytes())
                    .key(format!("order-{i}"))
                    .into(),
            )
            .await?;
        println!(
            "  sent order {i} as {}",
            pulsar_connect::pulsar::message_id::format_message_id(&id)
        );
    }
    println!("consuming them back");
    for _ in 1..=5 {
        let msg = tokio::time::timeout(Duration::from_secs(30), consumer.receive())
            .await
            .context("timed out waiting for a message")??;
        println!(
            "  {} {}",
            pulsar_connect::pulsar::message::key(&msg).unwrap_or("-"),
            String::from_utf8_lossy(&msg.payload)
        );
        consumer.ack(msg.message_id).await?;
    }
    producer.close().await?;
    consumer.close().await?;
    client.close().await;
    println!("demo done");
    Ok(())
}
