//! Ending transactions by id from a fresh connection, as a restarted exactly-once job does: commit the
//! transaction its last checkpoint recorded, abort the one that was open, and cope with ones that already
//! ended or expired.

use std::time::Duration;

use anyhow::Result;
use magnetar::OutgoingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use pulsar_connect::pulsar::ClientConfig;
use pulsar_connect::pulsar::transactions::{EndOutcome, TxnCoordinator, TxnRef};
use pulsar_connect_tests::{TestBroker, unique_topic};

/// Opens a transaction, sends `payloads` in it, and "crashes": the client goes away without ending it.
async fn send_and_crash(
    broker: &TestBroker,
    topic: &str,
    payloads: &[&str],
    timeout: Duration,
) -> Result<TxnRef> {
    let client = broker.client().await?;
    let producer = client.producer(topic).create().await?;
    let txn = client.new_transaction(timeout).await?;
    client.register_partition_to_transaction(txn, topic).await?;
    for p in payloads {
        producer
            .send(
                OutgoingMessage::with_payload(p.as_bytes().to_vec())
                    .txn(txn.id())
                    .into(),
            )
            .await?;
    }
    producer.close().await?;
    client.close().await;
    Ok(TxnRef(txn.id()))
}

async fn visible(broker: &TestBroker, topic: &str) -> Result<Vec<String>> {
    let client = broker.client().await?;
    let consumer = client
        .consumer(topic)
        .subscription(format!("check-{}", pulsar_connect_tests::now_ms()))
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let mut out = Vec::new();
    while let Ok(m) = tokio::time::timeout(Duration::from_secs(3), consumer.receive()).await {
        out.push(String::from_utf8(m?.payload.to_vec())?);
    }
    consumer.close().await?;
    client.close().await;
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_transaction_is_committed_after_a_restart_and_an_open_one_aborted() -> Result<()>
{
    let broker = TestBroker::get();
    let topic = unique_topic("txn-recovery");
    let recorded = send_and_crash(&broker, &topic, &["a", "b"], Duration::from_secs(120)).await?;
    let open = send_and_crash(&broker, &topic, &["x", "y"], Duration::from_secs(120)).await?;
    assert!(
        visible(&broker, &topic).await?.is_empty(),
        "nothing is visible before a commit"
    );

    let tc = TxnCoordinator::connect(&ClientConfig::new(&broker.service_url)).await?;
    assert_eq!(tc.commit(recorded).await?, EndOutcome::Done);
    assert_eq!(tc.abort(open).await?, EndOutcome::Done);
    assert_eq!(visible(&broker, &topic).await?, vec!["a", "b"]);

    // Committing again (a restart that already committed it) is not an error.
    assert!(matches!(
        tc.commit(recorded).await?,
        EndOutcome::Done | EndOutcome::Unknown(_)
    ));
    // An id the coordinator never issued.
    let bogus = TxnRef(magnetar::proto::TxnId::new(
        recorded.0.most_sig_bits,
        u64::MAX - 7,
    ));
    assert!(matches!(tc.commit(bogus).await?, EndOutcome::Unknown(_)));
    tc.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_transaction_cannot_be_committed_and_its_rows_never_show() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("txn-expired");
    let txn = send_and_crash(&broker, &topic, &["late"], Duration::from_secs(2)).await?;
    // The coordinator aborts a transaction whose timeout passed (its timeout tracker ticks about every second).
    tokio::time::sleep(Duration::from_secs(8)).await;
    let tc = TxnCoordinator::connect(&ClientConfig::new(&broker.service_url)).await?;
    let outcome = tc.commit(txn).await?;
    assert!(matches!(outcome, EndOutcome::Unknown(_)), "{outcome:?}");
    assert!(visible(&broker, &topic).await?.is_empty());
    tc.close().await;
    Ok(())
}
