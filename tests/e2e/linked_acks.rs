//! A Pulsar source linked to an exactly-once Pulsar sink hands the sink, at each checkpoint, the
//! acknowledgements of what it returned before the barrier, never of messages still being decoded: the
//! runtime cancels a poll when a barrier arrives, and rows decoded after it go into the next transaction.
//! Acknowledging them in the earlier one lost them when the process died between the two commits (seen
//! as 3 000 missing rows in the kill -9 rounds of `exactly_once.rs`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use arrow::array::{Array, Int64Array};
use magnetar::OutgoingMessage;
use pulsar_connect::connector_api::{PipelineContext, SourcePoll};
use pulsar_connect::connectors::pulsar::txn_acks::TxnAcks;
use pulsar_connect_tests::{TestBroker, unique_topic};

const N: usize = 6_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_acknowledges_only_rows_returned_before_its_barrier() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("linked-acks");
    let client = broker.client().await?;
    let producer = client
        .producer(&topic)
        .batching(100, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(5))
        .create()
        .await?;
    let sends: Vec<_> = (0..N)
        .map(|i| {
            producer.send(
                OutgoingMessage::with_payload(
                    format!(r#"{{"seq":{i},"payload":"{}"}}"#, "x".repeat(200)).into_bytes(),
                )
                .into(),
            )
        })
        .collect();
    let ids = futures::future::try_join_all(sends).await?;
    producer.close().await?;

    let sql = format!(
        "CREATE TABLE src (seq BIGINT, payload STRING) WITH (
           'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'admin-url' = '{}',
           'format' = 'json', 'scan.startup.mode' = 'earliest');
         CREATE TABLE out (seq BIGINT, payload STRING) WITH ('connector' = 'blackhole');
         INSERT INTO out SELECT * FROM src;",
        broker.service_url, broker.admin_url
    );
    let (registry, _) = pulsar_connect_tests::jobs::registry();
    let job = pulsar_connect::job::load_text(&sql, &registry)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut source = job.catalog.get("src").expect("declared").create_source()?;
    let ctx = PipelineContext::detached(
        &format!("linked-acks-{}", pulsar_connect_tests::now_ms()),
        "0",
    );
    source.set_context(&ctx);
    // What an exactly-once Pulsar sink does with the offer.
    let acks = ctx
        .link
        .get::<TxnAcks>()
        .expect("a source with an admin-url offers its acknowledgements");
    acks.claim(Duration::from_secs(60));
    acks.set_recovered(Ok(()));

    // Polls cut short at varying points (as a barrier cuts them), a checkpoint after each.
    let mut returned: Option<usize> = None;
    let (mut cut, mut acked) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut id = 0u64;
    while returned != Some(N - 1) {
        if Instant::now() > deadline {
            bail!("only rows through {returned:?} of {N} after 90 s");
        }
        id += 1;
        let budget = Duration::from_micros(100 + (id * 397) % 1500);
        match tokio::time::timeout(budget, source.poll_batch(400)).await {
            Ok(poll) => {
                if let SourcePoll::Batch(batch) = poll? {
                    let seq = batch
                        .column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .expect("seq is BIGINT");
                    for i in 0..seq.len() {
                        let s = seq.value(i) as usize;
                        assert!(
                            returned.is_none_or(|r| s == r + 1),
                            "row {s} after {returned:?}"
                        );
                        returned = Some(s);
                    }
                }
            }
            Err(_) => cut += 1,
        }
        source.snapshot_for(id)?;
        for ack in acks.take(id) {
            acked += 1;
            let through = (ack.through.ledger_id, ack.through.entry_id);
            let last = returned.map(|r| (ids[r].ledger_id, ids[r].entry_id));
            assert!(
                last.is_some_and(|l| through <= l),
                "checkpoint {id} acknowledges entry {through:?}, but the rows returned end at {returned:?} (entry {last:?})"
            );
        }
    }
    source.close().await?;
    eprintln!(
        "{id} checkpoints, {cut} polls cut short, {acked} acknowledgements handed to the sink"
    );
    assert!(
        cut > 0 && acked > 0,
        "no poll was cut short ({cut}) or nothing acknowledged ({acked})"
    );
    Ok(())
}
