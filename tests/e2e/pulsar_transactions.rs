//! Ending transactions by id from a fresh connection, as a restarted exactly-once job does: commit the
//! transaction its last checkpoint recorded, abort the one that was open, and cope with ones that already
//! ended or expired.

use std::time::Duration;

use anyhow::Result;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::runtime_tokio::Consumer;
use magnetar::{OutgoingMessage, PulsarClient};
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
    let sub = format!("check-{}", pulsar_connect_tests::now_ms());
    receive_all(broker, topic, &sub).await
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

/// Pulsar → Pulsar exactly-once rests on this: the input's cumulative ack and the output's sends in one
/// transaction. Abort: neither happened (the input is redelivered, the output never shows). Commit: both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_acks_and_output_sends_commit_or_abort_together() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let input = unique_topic("txn-in");
    let output = unique_topic("txn-out");
    let producer = client.producer(&input).create().await?;
    for i in 0..4 {
        producer
            .send(OutgoingMessage::with_payload(format!("in-{i}").into_bytes()).into())
            .await?;
    }
    producer.close().await?;
    let out = client.producer(&output).create().await?;

    for (round, commit) in [(0, false), (1, true)] {
        let consumer = subscribe(&client, &input, "job").await?;
        let mut last = None;
        for i in 0..4 {
            let m = tokio::time::timeout(Duration::from_secs(20), consumer.receive()).await??;
            assert_eq!(
                &m.payload[..],
                format!("in-{i}").as_bytes(),
                "round {round}: the input is (re)delivered from the start"
            );
            last = Some(m.message_id);
        }
        let txn = client.new_transaction(Duration::from_secs(60)).await?;
        client
            .register_partition_to_transaction(txn, &output)
            .await?;
        client
            .register_subscription_to_transaction(txn, &input, "job")
            .await?;
        for i in 0..4 {
            out.send(
                OutgoingMessage::with_payload(format!("out-{round}-{i}").into_bytes())
                    .txn(txn.id())
                    .into(),
            )
            .await?;
        }
        consumer
            .ack_cumulative_with_txn(last.unwrap(), txn.id())
            .await?;
        if commit {
            client.commit_transaction(txn).await?;
        } else {
            client.abort_transaction(txn).await?;
        }
        consumer.close().await?;
    }
    out.close().await?;
    assert_eq!(
        visible(&broker, &output).await?,
        vec!["out-1-0", "out-1-1", "out-1-2", "out-1-3"]
    );
    // The committed ack moved the subscription past the input.
    let consumer = client
        .consumer(&input)
        .subscription("job")
        .subscription_type(SubType::Exclusive)
        .subscribe()
        .await?;
    assert!(
        tokio::time::timeout(Duration::from_secs(2), consumer.receive())
            .await
            .is_err(),
        "the input was acknowledged"
    );
    consumer.close().await?;
    client.close().await;
    Ok(())
}

/// The subtasks of a restarted exactly-once job abort what the earlier run left open together, so
/// several transactions on one subscription get aborted at once. Pulsar 4.0's pending-ack handle fails
/// the abort of one of them with a `NullPointerException` when another, which held the subscription's
/// cumulative acknowledgement, is aborted at the same moment (the second finds the acknowledgement gone
/// after checking it was there); the coordinator keeps that transaction aborting, and a second ask
/// settles it. Every abort must end without an error, and the input must come back (the
/// acknowledgement was undone). The race needs the second abort to reach the subscription while the
/// first one's mark is being written: this test did not hit it on the 2-core machine (16 rounds), so it
/// checks concurrent aborts settle; `parallel::exactly_once_holds_through_kills_while_the_parallelism_changes`,
/// which did hit it in CI, is the regression check for the retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_aborts_on_one_subscription_all_settle() -> Result<()> {
    let broker = TestBroker::get();
    let cfg = ClientConfig::new(&broker.service_url);
    let mut coordinators = Vec::new();
    for _ in 0..4 {
        coordinators.push(TxnCoordinator::connect(&cfg).await?);
    }
    for round in 0..8 {
        let client = broker.client().await?;
        let input = unique_topic("txn-aborts");
        let producer = client.producer(&input).create().await?;
        for i in 0..3 {
            producer
                .send(OutgoingMessage::with_payload(format!("in-{i}").into_bytes()).into())
                .await?;
        }
        producer.close().await?;
        let consumer = subscribe(&client, &input, "job").await?;
        let mut last = None;
        for _ in 0..3 {
            last = Some(
                tokio::time::timeout(Duration::from_secs(20), consumer.receive())
                    .await??
                    .message_id,
            );
        }
        // Four transactions of the run on the subscription; the first holds its cumulative ack.
        let mut txns = Vec::new();
        for _ in 0..coordinators.len() {
            let txn = client.new_transaction(Duration::from_secs(120)).await?;
            client
                .register_subscription_to_transaction(txn, &input, "job")
                .await?;
            txns.push(txn);
        }
        consumer
            .ack_cumulative_with_txn(last.unwrap(), txns[0].id())
            .await?;
        // The run "dies": its consumer and client go away, the transactions stay open.
        consumer.close().await?;
        client.close().await;

        let ids: Vec<TxnRef> = txns.iter().map(|t| TxnRef(t.id())).collect();
        let outcomes =
            futures::future::join_all(coordinators.iter().zip(&ids).map(|(tc, id)| tc.abort(*id)))
                .await;
        for (id, outcome) in ids.iter().zip(outcomes) {
            match outcome {
                Ok(EndOutcome::Done) => {}
                Ok(EndOutcome::Unknown(why)) => {
                    panic!("round {round}: {id} was open, yet: {why}")
                }
                Err(e) => panic!("round {round}: aborting {id} failed: {e:#}"),
            }
        }
        let again = receive_all(&broker, &input, "job").await?;
        assert_eq!(
            again,
            vec!["in-0", "in-1", "in-2"],
            "round {round}: the aborted acknowledgement gives the input back"
        );
    }
    for tc in coordinators {
        tc.close().await;
    }
    Ok(())
}

/// What subscription `sub` of `topic` delivers now, from the earliest message when it is new (3 s
/// without a message ends it).
async fn receive_all(broker: &TestBroker, topic: &str, sub: &str) -> Result<Vec<String>> {
    let client = broker.client().await?;
    let consumer = subscribe(&client, topic, sub).await?;
    let mut out = Vec::new();
    while let Ok(m) = tokio::time::timeout(Duration::from_secs(3), consumer.receive()).await {
        out.push(String::from_utf8(m?.payload.to_vec())?);
    }
    consumer.close().await?;
    client.close().await;
    Ok(out)
}

/// An Exclusive consumer on subscription `sub` of `topic`, from the earliest message when it is new.
async fn subscribe(client: &PulsarClient, topic: &str, sub: &str) -> Result<Consumer> {
    Ok(client
        .consumer(topic)
        .subscription(sub)
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?)
}
