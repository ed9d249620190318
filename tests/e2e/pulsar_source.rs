//! The `pulsar` source end to end against the real broker: startup modes, metadata columns, key/value
//! formats, topic lists and patterns with discovery, checkpoints and resume, data loss, authentication.
//! Needs the broker (`cargo xtask broker start`) and the built plugins (`cargo xtask build-plugins`).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use magnetar::{MessageId, OutgoingMessage, PulsarClient};
use pulsar_connect::pulsar::message_id::format_message_id;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, now_ms, unique_topic};

const WAIT: Duration = Duration::from_secs(60);

/// One seed-like order row as JSON.
fn order(i: u32) -> String {
    format!(
        r#"{{"order_id":{i},"order_product_id":{},"order_customer_id":{},"order_status":"s{i}"}}"#,
        i * 10,
        i % 7
    )
}

/// Sends `messages` (payload, key, properties, event time) to `topic` one by one; returns the ids.
async fn send(
    client: &PulsarClient,
    topic: &str,
    messages: impl IntoIterator<Item = OutgoingMessage>,
) -> Result<Vec<MessageId>> {
    let producer = client.producer(topic).create().await?;
    let mut ids = Vec::new();
    for m in messages {
        ids.push(producer.send(m.into()).await?);
    }
    producer.close().await?;
    Ok(ids)
}

async fn send_orders(
    client: &PulsarClient,
    topic: &str,
    range: std::ops::Range<u32>,
) -> Result<Vec<MessageId>> {
    send(
        client,
        topic,
        range.map(|i| OutgoingMessage::with_payload(order(i).into_bytes())),
    )
    .await
}

fn source_table(name: &str, broker: &TestBroker, topic_opt: &str, extra: &str) -> String {
    format!(
        "CREATE TABLE {name} (
            order_id BIGINT,
            order_product_id BIGINT,
            order_customer_id BIGINT,
            order_status VARCHAR
        ) WITH (
            'connector' = 'pulsar',
            {topic_opt},
            'service-url' = '{}',
            'admin-url' = '{}',
            'format' = 'json'{extra}
        );",
        broker.service_url, broker.admin_url
    )
}

fn job(broker: &TestBroker, topic_opt: &str, extra: &str) -> String {
    format!(
        "SET 'execution.checkpointing.interval' = '300ms';
        {}
        CREATE TABLE out (order_id BIGINT, order_status VARCHAR) WITH ('connector' = 'collect');
        INSERT INTO out SELECT order_id, order_status FROM src;",
        source_table("src", broker, topic_opt, extra)
    )
}

/// The order ids in collected rows (`+I[<id>, s<id>]`).
fn ids(rows: &[String]) -> Vec<u32> {
    let mut v: Vec<u32> = rows
        .iter()
        .map(|r| {
            r.trim_start_matches("+I[")
                .split(',')
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("unexpected row {r}"))
        })
        .collect();
    v.sort();
    v
}

/// Waits until the job's source subtasks read `splits` splits together (each opened its readers at their
/// resolved starts).
async fn wait_reading(job: &RunningJob, splits: i64) {
    let gauge = job
        .metrics
        .telemetry("src")
        .gauge(pulsar_connect::connector_api::telemetry::OWNED_SPLITS);
    for _ in 0..300 {
        if gauge.get() >= splits {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the job never read {splits} splits (reads {})", gauge.get());
}

/// Waits until the job's subscription on `topic` has a connected consumer (its start is resolved).
async fn wait_subscribed(broker: &TestBroker, topic: &str) {
    let path = topic.strip_prefix("persistent://").unwrap();
    for _ in 0..200 {
        if let Ok(stats) = broker.admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&stats)
            && v["subscriptions"].as_object().is_some_and(|subs| {
                subs.values()
                    .any(|s| s["consumers"].as_array().is_some_and(|c| !c.is_empty()))
            })
        {
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no consumer subscribed to {topic}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_reads_every_partition_once_with_metadata_columns() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-meta");
    broker.create_partitioned_topic(&topic, 3)?;
    let client = broker.client().await?;
    for p in 0..3u32 {
        let msgs = (0..10u32).filter(|i| i % 3 == p).map(|i| {
            OutgoingMessage::with_payload(order(i).into_bytes())
                .key(format!("k{i}"))
                .property("origin", "test")
                .property("n", i.to_string())
                .event_time_ms(1_000 + u64::from(i))
        });
        send(&client, &format!("{topic}-partition-{p}"), msgs).await?;
    }
    let sql = format!(
        "CREATE TABLE src (
            order_id BIGINT,
            order_product_id BIGINT,
            order_customer_id BIGINT,
            order_status VARCHAR,
            `topic` STRING METADATA VIRTUAL,
            mid BYTES METADATA FROM 'messageId' VIRTUAL,
            seq BIGINT METADATA FROM 'sequenceId' VIRTUAL,
            pt TIMESTAMP_LTZ(3) METADATA FROM 'publishTime' VIRTUAL,
            et TIMESTAMP_LTZ(3) METADATA FROM 'eventTime',
            props MAP<STRING, STRING> METADATA FROM 'properties'
        ) WITH (
            'connector' = 'pulsar',
            'topic' = '{topic}',
            'service-url' = '{}',
            'format' = 'json',
            'scan.startup.mode' = 'earliest'
        );
        CREATE TABLE out (id BIGINT, t STRING, mid BYTES, et TIMESTAMP_LTZ(3), props MAP<STRING, STRING>, recent BOOLEAN)
            WITH ('connector' = 'collect');
        INSERT INTO out SELECT order_id, `topic`, mid, et, props, pt > TIMESTAMP '2020-01-01 00:00:00' FROM src;",
        broker.service_url
    );
    let job = RunningJob::start(&sql, None).await?;
    let rows = job.wait_rows(10, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows2) = job.stop().await?;
    assert_eq!(
        rows.len(),
        rows2.len(),
        "nothing more than the 10 messages: {rows2:#?}"
    );
    assert_eq!(ids(&rows2), (0..10).collect::<Vec<_>>());
    for r in &rows2 {
        let id: u32 = ids(std::slice::from_ref(r))[0];
        assert!(
            r.contains(&format!("{topic}-partition-{}", id % 3)),
            "topic metadata: {r}"
        );
        assert!(
            r.contains("origin=test") && r.contains(&format!("n={id}")),
            "properties: {r}"
        );
        let et = if id == 0 {
            "1970-01-01T00:00:01Z".to_owned()
        } else {
            format!("1970-01-01T00:00:01.{id:03}Z")
        };
        assert!(r.contains(&et), "event time: {r}");
        assert!(r.ends_with("true]"), "publish time: {r}");
        // The serialized MessageIdData starts with field 1 (ledgerId, varint): tag byte 8.
        assert!(r.contains(", [8, "), "message id bytes: {r}");
    }
    Ok(())
}

/// Large messages (16 KiB each, 640 KiB in all: batches far over a receiver queue's usual bytes) and
/// small ones behind them: every row, in order, intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_read_intact_with_small_ones_behind_them() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-large");
    let client = broker.client().await?;
    let status = |i: u32| format!("s{i}-{}", "x".repeat(16 * 1024));
    let large = (0..40).map(|i| {
        let row = format!(
            r#"{{"order_id":{i},"order_product_id":1,"order_customer_id":2,"order_status":"{}"}}"#,
            status(i)
        );
        OutgoingMessage::with_payload(row.into_bytes())
    });
    send(&client, &topic, large).await?;
    send_orders(&client, &topic, 40..45).await?;
    let job = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ", 'scan.startup.mode' = 'earliest'",
        ),
        None,
    )
    .await?;
    job.wait_rows(45, WAIT).await?;
    let (_, rows) = job.stop().await?;
    assert_eq!(ids(&rows), (0..45).collect::<Vec<_>>());
    for (i, row) in rows.iter().take(40).enumerate() {
        assert_eq!(row, &format!("+I[{i}, {}]", status(i as u32)), "row {i}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_reads_only_messages_published_after_the_start() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-latest");
    let client = broker.client().await?;
    send_orders(&client, &topic, 0..5).await?;
    let job = RunningJob::start(&job(&broker, &format!("'topic' = '{topic}'"), ""), None).await?;
    wait_subscribed(&broker, &topic).await;
    send_orders(&client, &topic, 5..8).await?;
    job.wait_rows(3, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows) = job.stop().await?;
    assert_eq!(ids(&rows), vec![5, 6, 7]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn specific_offsets_are_inclusive_and_timestamp_starts_at_publish_time() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-specific");
    let client = broker.client().await?;
    let first = send_orders(&client, &topic, 0..10).await?;
    // Without admin-url too: positions are set over the binary protocol.
    let job1 = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{topic}'"),
            &format!(
                ",\n'scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = '{}'",
                format_message_id(&first[3])
            ),
        ),
        None,
    )
    .await?;
    job1.wait_rows(7, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, rows) = job1.stop().await?;
    assert_eq!(ids(&rows), (3..10).collect::<Vec<_>>());

    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = now_ms();
    tokio::time::sleep(Duration::from_millis(50)).await;
    send_orders(&client, &topic, 10..14).await?;
    let job2 = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{topic}'"),
            &format!(
                ",\n'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '{t}'"
            ),
        ),
        None,
    )
    .await?;
    job2.wait_rows(4, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, rows) = job2.stop().await?;
    assert_eq!(ids(&rows), (10..14).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_subscription_starts_at_its_cursor_or_where_told() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-external");
    let client = broker.client().await?;
    send_orders(&client, &topic, 0..6).await?;
    let sub = format!("ext-{}", now_ms());
    let extra = format!(
        ",\n'scan.startup.mode' = 'external-subscription', 'scan.startup.sub-name' = '{sub}', 'scan.startup.sub-start-offset' = 'earliest'"
    );
    let job1 =
        RunningJob::start(&job(&broker, &format!("'topic' = '{topic}'"), &extra), None).await?;
    job1.wait_rows(6, WAIT).await?;
    // Let a checkpoint complete so the position is committed to the subscription.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (_, rows) = job1.stop().await?;
    assert_eq!(ids(&rows), (0..6).collect::<Vec<_>>());
    // The subscription now sits after message 5: a fresh job (no checkpoint) continues from there.
    send_orders(&client, &topic, 6..9).await?;
    let job2 =
        RunningJob::start(&job(&broker, &format!("'topic' = '{topic}'"), &extra), None).await?;
    job2.wait_rows(3, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows) = job2.stop().await?;
    assert_eq!(ids(&rows), vec![6, 7, 8]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_job_resumes_after_the_last_emitted_message() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-resume");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    let state = tempfile::tempdir()?;
    // Batched messages: resuming inside a batch must skip exactly the emitted members.
    let producer = client
        .producer(format!("{topic}-partition-0"))
        .batching(1000, 1 << 20)
        .batching_max_publish_delay(Duration::from_millis(20))
        .create()
        .await?;
    let sends: Vec<_> = (0..20u32)
        .map(|i| producer.send(OutgoingMessage::with_payload(order(i).into_bytes()).into()))
        .collect();
    futures::future::try_join_all(sends).await?;
    producer.close().await?;
    send_orders(&client, &format!("{topic}-partition-1"), 20..30).await?;
    let sql = job(
        &broker,
        &format!("'topic' = '{topic}'"),
        ",\n'scan.startup.mode' = 'latest'",
    );
    // `latest` on the first run: nothing yet; it is resolved once and kept in the checkpoint.
    let job1 = RunningJob::start(&sql, Some(state.path())).await?;
    // Not just a consumer on the topic (resolving `latest` subscribes one first): every split read.
    wait_reading(&job1, 2).await;
    send_orders(&client, &format!("{topic}-partition-0"), 100..105).await?;
    job1.wait_rows(5, WAIT).await?;
    let (_, rows) = job1.stop().await?;
    assert_eq!(ids(&rows), (100..105).collect::<Vec<_>>());
    // Written while the job is down: the restored job must read them (not jump to a new latest).
    send_orders(&client, &format!("{topic}-partition-0"), 105..110).await?;
    send_orders(&client, &format!("{topic}-partition-1"), 110..112).await?;
    let job2 = RunningJob::start(&sql, Some(state.path())).await?;
    job2.wait_rows(7, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows) = job2.stop().await?;
    assert_eq!(ids(&rows), (105..112).collect::<Vec<_>>());
    Ok(())
}

/// `enable-key-hash-range` with `scan.parallelism` = 3: every partition is read by three Key_Shared readers,
/// each owning a third of the key hash space; together they read every message once, each key in order,
/// and a restored job resumes every (partition, range) after what it emitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_hash_ranges_split_the_keys_across_readers() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-keys");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    let state = tempfile::tempdir()?;
    let keyed = |range: std::ops::Range<u32>| {
        range.map(|i| {
            OutgoingMessage::with_payload(order(i).into_bytes()).key(format!("customer-{}", i % 30))
        })
    };
    // Message i goes to partition i % 2 (so every key lives on one partition). Unbatched: Key_Shared
    // dispatches a batch by its first key, so producers feeding key ranges must batch by key (Pulsar's
    // rule for Key_Shared, documented with the option).
    let produce = |range: std::ops::Range<u32>| {
        let client = &client;
        let topic = topic.clone();
        async move {
            for p in 0..2u32 {
                let producer = client
                    .producer(format!("{topic}-partition-{p}"))
                    .create()
                    .await?;
                let sends: Vec<_> = keyed(range.clone())
                    .enumerate()
                    .filter(|(k, _)| (range.start + *k as u32) % 2 == p)
                    .map(|(_, m)| producer.send(m.into()))
                    .collect();
                futures::future::try_join_all(sends).await?;
                producer.close().await?;
            }
            anyhow::Ok(())
        }
    };
    produce(0..300).await?;
    let sql = job(
        &broker,
        &format!("'topic' = '{topic}'"),
        ",\n'scan.startup.mode' = 'earliest', 'enable-key-hash-range' = 'true', 'scan.parallelism' = '3'",
    )
    .replace(
        "INSERT INTO out SELECT order_id, order_status FROM src;",
        "INSERT INTO out SELECT order_id, order_customer_id FROM src;",
    )
    .replace("order_status VARCHAR) WITH ('connector' = 'collect')", "cust BIGINT) WITH ('connector' = 'collect')");
    let job1 = RunningJob::start(&sql, Some(state.path())).await?;
    let rows = job1.wait_rows(300, WAIT).await?;
    // Three Key_Shared range subscriptions per partition, sharing the partition's messages.
    for p in 0..2 {
        let path = format!("{topic}-partition-{p}");
        let path = path.strip_prefix("persistent://").unwrap();
        let stats: serde_json::Value = serde_json::from_str(&broker.admin(
            "GET",
            &format!("/admin/v2/persistent/{path}/stats"),
            None,
        )?)?;
        let subs = stats["subscriptions"].as_object().expect("subscriptions");
        let ranges: Vec<(&String, u64)> = subs
            .iter()
            .filter(|(name, _)| name.contains("-keys-"))
            .map(|(name, s)| {
                assert_eq!(s["type"], "Key_Shared", "{name}");
                (name, s["msgOutCounter"].as_u64().unwrap_or(0))
            })
            .collect();
        assert_eq!(ranges.len(), 3, "partition {p}: {subs:?}");
        let delivered: u64 = ranges.iter().map(|(_, n)| n).sum();
        assert_eq!(
            delivered,
            stats["msgInCounter"].as_u64().unwrap(),
            "partition {p}: every message delivered to exactly one range: {ranges:?}"
        );
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (_, more) = job1.stop().await?;
    assert_eq!(more.len(), rows.len(), "nothing read twice");
    assert_eq!(ids(&rows), (0..300).collect::<Vec<_>>());
    // Per key, in publish order (a key lives on one partition and in one range).
    let mut last_of_key: std::collections::HashMap<u32, u32> = Default::default();
    for id in rows.iter().map(|r| ids(std::slice::from_ref(r))[0]) {
        if let Some(prev) = last_of_key.insert(id % 30, id) {
            assert!(
                prev < id,
                "key customer-{} out of order: {prev} then {id}",
                id % 30
            );
        }
    }
    // Written while the job is down; the restored readers continue after what they emitted.
    produce(300..400).await?;
    let job2 = RunningJob::start(&sql, Some(state.path())).await?;
    job2.wait_rows(100, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (_, rows) = job2.stop().await?;
    assert_eq!(ids(&rows), (300..400).collect::<Vec<_>>());
    Ok(())
}

/// `pulsar-connect subscriptions job.sql [--drop]`: the job's durable subscriptions are listed, dropped, and
/// gone from the broker afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subscriptions_command_lists_and_drops_the_jobs_subscriptions() -> Result<()> {
    use pulsar_connect::cli::subscriptions;
    let broker = TestBroker::get();
    let topic = unique_topic("src-subs");
    broker.create_partitioned_topic(&topic, 2)?;
    let client = broker.client().await?;
    send_orders(&client, &format!("{topic}-partition-0"), 0..3).await?;
    send_orders(&client, &format!("{topic}-partition-1"), 3..5).await?;
    let sql = format!(
        "SET 'pipeline.name' = 'subs-{}';\n{}",
        now_ms(),
        job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ",\n'scan.startup.mode' = 'earliest'"
        )
    );
    let job1 = RunningJob::start(&sql, None).await?;
    job1.wait_rows(5, WAIT).await?;
    job1.stop().await?;
    let (registry, _) = pulsar_connect_tests::jobs::registry();
    let loaded = match pulsar_connect::job::load_text(&sql, &registry).await {
        Ok(j) => j,
        Err(e) => panic!("{}", e.0.join("; ")),
    };
    let listed = subscriptions::run(&loaded, false).await?;
    assert_eq!(listed.len(), 2, "{listed:?}");
    for p in 0..2 {
        assert!(
            listed.iter().any(|l| l.contains(&format!(
                "{topic}-partition-{p} subscription 'pulsar-connect-subs-"
            ))),
            "{listed:?}"
        );
    }
    let dropped = subscriptions::run(&loaded, true).await?;
    assert_eq!(dropped.len(), 2, "{dropped:?}");
    assert!(dropped.iter().all(|l| l.contains("dropped")), "{dropped:?}");
    assert!(subscriptions::run(&loaded, false).await?.is_empty());
    let path = format!("{topic}-partition-0");
    let stats = broker.admin(
        "GET",
        &format!(
            "/admin/v2/persistent/{}/stats",
            path.strip_prefix("persistent://").unwrap()
        ),
        None,
    )?;
    assert!(!stats.contains("pulsar-connect-subs-"), "{stats}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_lists_and_patterns_pick_up_new_topics_and_partitions() -> Result<()> {
    let broker = TestBroker::get();
    let base = unique_topic("disc");
    let a = format!("{base}-a");
    let client = broker.client().await?;
    send_orders(&client, &a, 0..3).await?;
    let pattern = format!("{}-.*", base.replace('.', "\\."));
    let job1 = RunningJob::start(
        &job(
            &broker,
            &format!("'topic-pattern' = '{pattern}'"),
            ",\n'scan.startup.mode' = 'earliest', 'partition.discovery.interval-millis' = '300'",
        ),
        None,
    )
    .await?;
    job1.wait_rows(3, WAIT).await?;
    // A new matching topic (read from its earliest message) and a non-matching one.
    let b = format!("{base}-b");
    broker.create_partitioned_topic(&b, 2)?;
    send_orders(&client, &format!("{b}-partition-1"), 3..5).await?;
    send_orders(&client, &unique_topic("other"), 50..52).await?;
    job1.wait_rows(5, WAIT).await?;
    // A partition added to a matching partitioned topic.
    let path = b.strip_prefix("persistent://").unwrap();
    broker.admin(
        "POST",
        &format!("/admin/v2/persistent/{path}/partitions"),
        Some("3"),
    )?;
    send_orders(&client, &format!("{b}-partition-2"), 5..7).await?;
    job1.wait_rows(7, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows) = job1.stop().await?;
    assert_eq!(ids(&rows), (0..7).collect::<Vec<_>>());

    // A list with `,` and `;`, short names included.
    let (c, d) = (unique_topic("list-c"), unique_topic("list-d"));
    send_orders(&client, &c, 0..2).await?;
    send_orders(&client, &d, 2..4).await?;
    let short_d = d.rsplit('/').next().unwrap();
    let job2 = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{c};{short_d}'"),
            ",\n'scan.startup.mode' = 'earliest'",
        ),
        None,
    )
    .await?;
    job2.wait_rows(4, WAIT).await?;
    let (_, rows) = job2.stop().await?;
    assert_eq!(ids(&rows), (0..4).collect::<Vec<_>>());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_and_value_formats_with_prefix_and_except_key() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-key");
    let client = broker.client().await?;
    let msgs = (0..4u32).map(|i| {
        let m = OutgoingMessage::with_payload(
            format!(r#"{{"order_id":{i},"order_status":"s{i}"}}"#).into_bytes(),
        );
        // One message without a key: its key column is NULL.
        if i == 3 {
            m
        } else {
            m.key(format!("user-{i}"))
        }
    });
    send(&client, &topic, msgs).await?;
    let sql = format!(
        "CREATE TABLE src (
            k_user STRING,
            order_id BIGINT,
            order_status STRING
        ) WITH (
            'connector' = 'pulsar-inlong',
            'topic' = '{topic}',
            'service-url' = '{}',
            'key.format' = 'raw',
            'key.fields' = 'k_user',
            'key.fields-prefix' = 'k_',
            'value.format' = 'json',
            'value.fields-include' = 'EXCEPT_KEY',
            'scan.startup.mode' = 'earliest'
        );
        CREATE TABLE out (order_id BIGINT, k STRING) WITH ('connector' = 'collect');
        INSERT INTO out SELECT order_id, k_user FROM src;",
        broker.service_url
    );
    let job = RunningJob::start(&sql, None).await?;
    let rows = job.wait_rows(4, WAIT).await?;
    let (_, _) = job.stop().await?;
    let set: BTreeSet<String> = rows.into_iter().collect();
    let want: BTreeSet<String> = [
        "+I[0, user-0]",
        "+I[1, user-1]",
        "+I[2, user-2]",
        "+I[3, null]",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(set, want);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_fail_with_their_id_or_are_skipped_when_asked() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-bad");
    let client = broker.client().await?;
    let ids_sent = send(
        &client,
        &topic,
        [
            OutgoingMessage::with_payload(order(0).into_bytes()),
            OutgoingMessage::with_payload(b"{not json".to_vec()),
            OutgoingMessage::with_payload(order(2).into_bytes()),
        ],
    )
    .await?;
    let failing = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ",\n'scan.startup.mode' = 'earliest'",
        ),
        None,
    )
    .await?;
    let err = failing.failure(WAIT).await;
    assert!(
        err.contains(&format_message_id(&ids_sent[1]))
            && err.contains(&topic)
            && err.contains("json.ignore-parse-errors"),
        "{err}"
    );
    let skipping = RunningJob::start(
        &job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ",\n'scan.startup.mode' = 'earliest', 'json.ignore-parse-errors' = 'true'",
        ),
        None,
    )
    .await?;
    skipping.wait_rows(2, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, rows) = skipping.stop().await?;
    assert_eq!(ids(&rows), vec![0, 2]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_beyond_the_end_of_a_recreated_topic_is_data_loss() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("src-loss");
    let client = broker.client().await?;
    send_orders(&client, &topic, 0..5).await?;
    let state = tempfile::tempdir()?;
    let name = format!("loss-{}", now_ms());
    let sql = format!(
        "SET 'pipeline.name' = '{name}';\n{}",
        job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ",\n'scan.startup.mode' = 'earliest'"
        )
    );
    let job1 = RunningJob::start(&sql, Some(state.path())).await?;
    job1.wait_rows(5, WAIT).await?;
    job1.stop().await?;
    // Delete and recreate the topic with fewer messages: the checkpoint's position is now beyond its end.
    drop(client);
    let path = topic.strip_prefix("persistent://").unwrap();
    broker.admin(
        "DELETE",
        &format!("/admin/v2/persistent/{path}?force=true"),
        None,
    )?;
    let client = broker.client().await?;
    send_orders(&client, &topic, 100..102).await?;
    let err = RunningJob::start(&sql, Some(state.path()))
        .await?
        .failure(WAIT)
        .await;
    assert!(err.contains("data loss") && err.contains(&topic), "{err}");
    // Asked to, it resumes from the earliest message of the new topic.
    let tolerant = format!(
        "SET 'pipeline.name' = '{name}';\n{}",
        job(
            &broker,
            &format!("'topic' = '{topic}'"),
            ",\n'scan.startup.mode' = 'earliest', 'properties.pulsar.reader.failOnDataLoss' = 'false'",
        )
    );
    let job3 = RunningJob::start(&tolerant, Some(state.path())).await?;
    job3.wait_rows(2, WAIT).await?;
    let (_, rows) = job3.stop().await?;
    assert_eq!(ids(&rows), vec![100, 101]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_authentication_works_and_a_wrong_token_is_a_clear_error() -> Result<()> {
    let started = pulsar_connect_tests::ensure_token_broker()?;
    let result = async {
        let broker = TestBroker::with_token_auth();
        let topic = unique_topic("src-token");
        let client = broker.client().await?;
        send_orders(&client, &topic, 0..3).await?;
        let token = broker.token.clone().expect("the token profile has an admin token");
        let sql = |params: &str| {
            job(
                &broker,
                &format!("'topic' = '{topic}'"),
                &format!(
                    ",\n'scan.startup.mode' = 'earliest', 'auth-plugin-classname' = 'org.apache.pulsar.client.impl.auth.AuthenticationToken', 'auth-params' = '{params}'"
                ),
            )
        };
        let ok = RunningJob::start(&sql(&format!("token:{token}")), None).await?;
        ok.wait_rows(3, WAIT).await?;
        ok.stop().await?;
        // The token from a file, under `properties.` with the camelCase spelling.
        let file = tempfile::NamedTempFile::new()?;
        std::fs::write(file.path(), format!("{token}\n"))?;
        let from_file = job(
            &broker,
            &format!("'topic' = '{topic}'"),
            &format!(
                ",\n'scan.startup.mode' = 'earliest', 'properties.authPluginClassName' = 'token', 'properties.authParams' = 'file://{}'",
                file.path().display()
            ),
        );
        let ok = RunningJob::start(&from_file, None).await?;
        ok.wait_rows(3, WAIT).await?;
        ok.stop().await?;
        let secret = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJub2JvZHkifQ.not-the-signature";
        let err = RunningJob::start(&sql(&format!("token:{secret}")), None)
            .await?
            .failure(WAIT)
            .await;
        assert!(
            err.to_ascii_lowercase().contains("auth") && err.contains(&broker.service_url),
            "{err}"
        );
        assert!(!err.contains(secret), "the token was printed: {err}");
        Ok(())
    }
    .await;
    if started {
        xtask::broker::stop(xtask::broker::Profile::Token)?;
    }
    result
}

/// `interop.py` of the official Python client: its `@@` result lines.
fn run_python(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    let out = std::process::Command::new(pulsar_connect_tests::python())
        .arg(pulsar_connect_tests::python_script("interop.py"))
        .args(args)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "interop.py {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("@@"))
        .map(|l| Ok(serde_json::from_str(l)?))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metadata_column_of_what_the_official_python_client_writes() -> Result<()> {
    use base64::Engine as _;
    let broker = TestBroker::get();
    let topic = unique_topic("src-python");
    // Batched, LZ4 then ZSTD compressed, with keys, properties and event times.
    let written = run_python(&["produce", &broker.service_url, &topic, "40"])?;
    assert_eq!(written.len(), 40);
    let sql = format!(
        "CREATE TABLE src (
            k STRING,
            payload STRING,
            `topic` STRING METADATA VIRTUAL,
            mid BYTES METADATA FROM 'messageId' VIRTUAL,
            et TIMESTAMP_LTZ(3) METADATA FROM 'eventTime',
            props MAP<STRING, STRING> METADATA FROM 'properties'
        ) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}',
            'key.format' = 'raw', 'key.fields' = 'k', 'value.format' = 'raw', 'value.fields-include' = 'EXCEPT_KEY',
            'scan.startup.mode' = 'earliest'
        );
        CREATE TABLE out (k STRING, payload STRING, t STRING, mid BYTES, et TIMESTAMP_LTZ(3), props MAP<STRING, STRING>)
            WITH ('connector' = 'collect');
        INSERT INTO out SELECT k, payload, `topic`, mid, et, props FROM src;",
        broker.service_url
    );
    let job = RunningJob::start(&sql, None).await?;
    let rows = job.wait_rows(40, WAIT).await?;
    job.stop().await?;
    for w in &written {
        let key = w["key"].as_str().unwrap();
        let row = rows
            .iter()
            .find(|r| r.starts_with(&format!("+I[{key}, ")))
            .unwrap_or_else(|| panic!("no row for {key}: {rows:#?}"));
        assert!(
            row.contains(w["payload"].as_str().unwrap()),
            "payload: {row}"
        );
        assert!(row.contains(&format!(", {topic}, ")), "topic: {row}");
        // messageId: exactly the bytes the official client serialises (Java's signed-byte printing).
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(w["message_id_bytes"].as_str().unwrap())?;
        let printed = format!(
            "[{}]",
            bytes
                .iter()
                .map(|b| (*b as i8).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(row.contains(&printed), "messageId {printed}: {row}");
        let et = w["event_time"].as_i64().unwrap();
        let when = chrono::DateTime::from_timestamp_millis(et).unwrap();
        // Java's Instant text: the fraction only when it is not zero.
        let text = if et % 1000 == 0 {
            when.format("%Y-%m-%dT%H:%M:%SZ").to_string()
        } else {
            when.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
        };
        assert!(row.contains(&text), "eventTime {text}: {row}");
        for (k, v) in w["properties"].as_object().unwrap() {
            assert!(
                row.contains(&format!("{k}={}", v.as_str().unwrap())),
                "property {k}: {row}"
            );
        }
    }
    Ok(())
}
