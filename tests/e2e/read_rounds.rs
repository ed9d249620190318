//! The read stall of issue 16, as a ratio: the same backlog read several times, each on a fresh subscription,
//! by a split reader paced like the Pulsar source (batches of up to `table.exec.mini-batch.size` rows, a
//! little work between them), and — interleaved, as the control — by one asking for at most half the receive
//! queue per call, as the bare consumer does (which never stalled). A batch receive that emptied the receive
//! queue used to leave its replenishing flow permits unsent until something else woke the connection (a
//! checkpoint's ack, the keepalive, the stall watchdog — seconds later), so a stalled read ran at a small
//! fraction of the control's rate: 10 s and more instead of a fraction of a second. No wall-clock bound is
//! asserted, only rates relative to the control's median, with a margin (10×) far above what a loaded machine
//! does to these reads (up to 5× between rounds at a load average of 18) and far below what a stall costs.

use std::time::{Duration, Instant};

use anyhow::Result;
use magnetar::OutgoingMessage;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::{TestBroker, unique_topic};

const ROWS: usize = 40_000;
const ROUNDS: usize = 5;
/// The source's defaults: `table.exec.mini-batch.size` rows per poll, 200 ms per receive.
const SOURCE_BATCH: usize = 4096;
/// Less than half the split reader's receive queue (5 000 by default): each call leaves messages queued
/// for the next one.
const CONTROL_BATCH: usize = 1000;
const RECEIVE_WAIT: Duration = Duration::from_millis(200);
/// How much slower than the control's median a read may be before it counts as stalled.
const STALL_FACTOR: f64 = 10.0;

/// Messages per second of one read of the whole backlog, from its first batch to its last.
async fn read_round(
    client: &magnetar::PulsarClient,
    topic: &str,
    sub: &str,
    max_batch: usize,
) -> Result<f64> {
    let split = Split {
        topic: TopicName::parse(topic)?,
        partition: -1,
    };
    let mut reader = SplitReader::open(
        client,
        split,
        sub,
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut got = 0usize;
    let mut start = None;
    // A generous bound so that a wedged read fails instead of hanging (not an assertion on time).
    let give_up = Instant::now() + Duration::from_secs(300);
    while got < ROWS && Instant::now() < give_up {
        let asked = Instant::now();
        let batch = reader.next_batch(max_batch, RECEIVE_WAIT).await?;
        if batch.is_empty() {
            continue;
        }
        start.get_or_insert(asked);
        got += batch.len();
        // The source decodes a batch before it polls again: the broker fills the receive queue meanwhile.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    reader.close().await?;
    anyhow::ensure!(got >= ROWS, "read {got} of {ROWS} messages");
    let wall = start.map_or(Duration::ZERO, |s| s.elapsed()).as_secs_f64();
    Ok(got as f64 / wall.max(1e-9))
}

/// `rows` messages (payload `payload(i)`) in batches of up to 1 000, as a busy producer writes them; their ids.
pub(crate) async fn produce_batched(
    client: &magnetar::PulsarClient,
    topic: &str,
    rows: usize,
    payload: impl Fn(usize) -> String,
) -> Result<Vec<magnetar::MessageId>> {
    let producer = client
        .producer(topic)
        .batching(1000, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(10))
        .create()
        .await?;
    let sends: Vec<_> = (0..rows)
        .map(|i| producer.send(OutgoingMessage::with_payload(payload(i).into_bytes()).into()))
        .collect();
    let ids = futures::future::try_join_all(sends).await?;
    producer.close().await?;
    Ok(ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_reads_of_a_backlog_do_not_stall() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("read-rounds");
    produce_batched(&client, &topic, ROWS, |i| format!("{i:08}")).await?;

    let (mut source, mut control) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        source.push(read_round(&client, &topic, &format!("read-round-{r}"), SOURCE_BATCH).await?);
        control
            .push(read_round(&client, &topic, &format!("read-control-{r}"), CONTROL_BATCH).await?);
    }
    let mut sorted = control.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let stalled = source
        .iter()
        .filter(|r| **r < median / STALL_FACTOR)
        .count();
    assert_eq!(
        stalled, 0,
        "{stalled} of {ROUNDS} reads ran below a tenth of the control's median rate ({median:.0} msg/s): \
         source-paced {source:.0?}, control {control:.0?}"
    );
    Ok(())
}
