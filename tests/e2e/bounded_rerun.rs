//! A bounded read run again over subscriptions an earlier run acknowledged: with `Failover` every start
//! resumes at the subscription's cursor, which is at the end already, so nothing arrives to end the
//! splits — the reader ends them when the broker says the subscription is acknowledged up to the stop
//! cursor (before, such a run waited for ever).

use anyhow::Result;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

use crate::bounded::{END, assert_exactly, job, partitions, send};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_backfill_run_again_ends_at_the_acknowledged_cursor() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("bounded-rerun");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    let names = partitions(&topic, 2);
    send(&client, &names[0], 0..300).await?;
    send(&client, &names[1], 1000..1300).await?;
    // Named: every run uses the same subscriptions; each starts without a checkpoint.
    let sql = format!(
        "SET 'pipeline.name' = 'rerun-{}';\n{}",
        now_ms(),
        job(
            &broker,
            &topic,
            "'subscription-type' = 'Failover', 'source.stop.at-message-id' = 'latest'"
        )
    );
    let run = || async {
        let state = tempfile::tempdir()?;
        let (_, rows) = RunningJob::start(&sql, Some(state.path()))
            .await?
            .finish(END)
            .await?;
        anyhow::Ok(rows)
    };
    assert_exactly(&run().await?, (0..300).chain(1000..1300));
    // Everything acknowledged: the second run reads nothing and ends.
    assert_exactly(&run().await?, []);
    // New rows in one partition: the third run reads them; the other partition ends at its cursor.
    send(&client, &names[0], 2000..2100).await?;
    assert_exactly(&run().await?, 2000..2100);
    Ok(())
}
