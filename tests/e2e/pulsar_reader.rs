//! Split readers against the real broker: every start position, resuming exactly after the last emitted
//! message (inside batches too), committing to the durable subscription, and data loss.

use std::time::Duration;

use anyhow::{Context, Result};
use magnetar::{MessageId, OutgoingMessage, PulsarClient};
use pulsar_connect::pulsar::reader::{
    DEFAULT_RECEIVER_QUEUE, DataLossPolicy, SplitReader, SplitSet, StartPosition, Subscribing,
    resolve_latest,
};
use pulsar_connect::pulsar::topics::{Split, TopicName, splits_of};
use pulsar_connect_tests::{TestBroker, unique_topic};

fn split(topic: &str) -> Split {
    Split {
        topic: TopicName::parse(topic).unwrap(),
        partition: -1,
    }
}

async fn produce(
    client: &PulsarClient,
    topic: &str,
    range: std::ops::Range<u32>,
    batched: bool,
) -> Result<Vec<MessageId>> {
    let mut builder = client.producer(topic);
    if batched {
        builder = builder
            .batching(1000, 1 << 20)
            .batching_max_publish_delay(Duration::from_millis(50));
    }
    let producer = builder.create().await?;
    let sends: Vec<_> = range
        .map(|i| producer.send(OutgoingMessage::with_payload(format!("{i}").into_bytes()).into()))
        .collect();
    let ids = futures::future::try_join_all(sends).await?;
    producer.close().await?;
    Ok(ids)
}

/// Reads until `n` messages arrived (or 20 s passed), then checks nothing more comes for a moment.
async fn read_n(reader: &mut SplitReader, n: usize) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while out.len() < n && tokio::time::Instant::now() < deadline {
        for m in reader.next_batch(100, Duration::from_millis(500)).await? {
            out.push(std::str::from_utf8(&m.payload)?.parse()?);
        }
    }
    let extra = reader.next_batch(100, Duration::from_millis(700)).await?;
    anyhow::ensure!(
        extra.is_empty(),
        "unexpected extra messages after {out:?}: {} more",
        extra.len()
    );
    Ok(out)
}

fn backlog(broker: &TestBroker, topic: &str, sub: &str) -> Result<u64> {
    let path = topic
        .strip_prefix("persistent://")
        .context("persistent topic")?;
    let stats: serde_json::Value = serde_json::from_str(&broker.admin(
        "GET",
        &format!("/admin/v2/persistent/{path}/stats"),
        None,
    )?)?;
    stats["subscriptions"][sub]["msgBacklog"]
        .as_u64()
        .context("no backlog in the stats")
}

/// `pulsar.reader.receiver-queue-size` is what a split's consumer prefetches: while nothing is received,
/// a queue of 10 holds 10 of 200 unbatched messages and the default holds all 200; both read all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_receiver_queue_size_bounds_what_is_prefetched() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("receiver-queue");
    produce(&client, &topic, 0..200, false).await?;
    for (queue, want) in [(10, 10), (DEFAULT_RECEIVER_QUEUE, 200)] {
        let how = Subscribing {
            receiver_queue: queue,
            ..Subscribing::exclusive(DataLossPolicy::Fail)
        };
        let sub = format!("queue-{queue}");
        let mut reader =
            SplitReader::open_range(&client, split(&topic), &sub, StartPosition::Earliest, how)
                .await?;
        // Until the queue holds what it may (or 20 s), then a moment longer: it must not grow past that.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while reader.consumer().available_in_queue() < want
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        let queued = reader.consumer().available_in_queue();
        assert_eq!(queued, want, "receiver queue {queue}: messages prefetched");
        assert_eq!(
            read_n(&mut reader, 200).await?,
            (0..200).collect::<Vec<_>>()
        );
        reader.close().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_and_timestamp_and_inclusive_ids() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-starts");
    let first = produce(&client, &topic, 0..5, false).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let middle = pulsar_connect_tests::now_ms();
    tokio::time::sleep(Duration::from_millis(50)).await;
    produce(&client, &topic, 5..10, false).await?;

    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s1",
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(read_n(&mut r, 10).await?, (0..10).collect::<Vec<_>>());
    r.close().await?;

    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s2",
        StartPosition::Timestamp { millis: middle },
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(read_n(&mut r, 5).await?, (5..10).collect::<Vec<_>>());
    r.close().await?;

    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s3",
        StartPosition::at(&first[3]),
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(
        read_n(&mut r, 7).await?,
        (3..10).collect::<Vec<_>>(),
        "a specific id is inclusive"
    );
    r.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inclusive_id_inside_a_batch_starts_at_that_member() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-batch-at");
    produce(&client, &topic, 0..10, true).await?;
    // Send receipts name the entry; the batch index comes with the delivered message.
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "probe",
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut ids = Vec::new();
    while ids.len() < 10 {
        ids.extend(
            r.next_batch(10, Duration::from_secs(5))
                .await?
                .into_iter()
                .map(|m| m.message_id),
        );
    }
    r.close().await?;
    assert!(
        ids.iter()
            .all(|id| id.entry_id == ids[0].entry_id && id.batch_index >= 0),
        "one batched entry: {ids:?}"
    );
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s",
        StartPosition::at(&ids[4]),
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(read_n(&mut r, 6).await?, (4..10).collect::<Vec<_>>());
    r.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_is_resolved_once_so_a_restart_before_the_first_message_loses_nothing() -> Result<()>
{
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-latest");
    produce(&client, &topic, 0..5, false).await?;
    let start = resolve_latest(&client, &split(&topic), "s").await?;
    assert!(matches!(start, StartPosition::After { .. }), "{start:?}");
    // The job "stops" before reading anything; messages arrive while it is down.
    produce(&client, &topic, 5..8, false).await?;
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s",
        start.clone(),
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(
        r.position().resume,
        start,
        "nothing emitted yet: the position is the resolved start"
    );
    assert_eq!(read_n(&mut r, 3).await?, vec![5, 6, 7]);
    r.close().await?;

    let empty = unique_topic("reader-latest-empty");
    client.producer(&empty).create().await?.close().await?;
    assert_eq!(
        resolve_latest(&client, &split(&empty), "s").await?,
        StartPosition::Earliest
    );
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_after_a_position_inside_a_batch_emits_exactly_the_rest() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    for batched in [true, false] {
        let topic = unique_topic("reader-resume");
        produce(&client, &topic, 0..10, batched).await?;
        let mut r = SplitReader::open(
            &client,
            split(&topic),
            "job",
            StartPosition::Earliest,
            DataLossPolicy::Fail,
        )
        .await?;
        let mut seen = Vec::new();
        while seen.len() < 7 {
            for m in r.next_batch(7 - seen.len(), Duration::from_secs(5)).await? {
                seen.push(std::str::from_utf8(&m.payload)?.parse::<u32>()?);
            }
        }
        let checkpoint = r.position();
        r.commit(&checkpoint).await?;
        r.close().await?;
        assert_eq!(seen, (0..7).collect::<Vec<_>>());
        // Committed: everything up to the last complete entry. Inside a batch that is the entry before it,
        // so nothing unemitted is acknowledged: the batched entry stays in the backlog (counted in entries).
        let expected_backlog = if batched { 1 } else { 3 };
        assert_eq!(
            backlog(&broker, &topic, "job")?,
            expected_backlog,
            "the commit shows as the backlog (batched={batched})"
        );

        // A restart from the checkpoint: exactly messages 7, 8, 9.
        let mut r = SplitReader::open(
            &client,
            split(&topic),
            "job",
            checkpoint.resume,
            DataLossPolicy::Fail,
        )
        .await?;
        assert_eq!(read_n(&mut r, 3).await?, vec![7, 8, 9], "batched={batched}");
        r.close().await?;
    }
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_beyond_the_end_of_the_topic_is_data_loss() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-loss");
    let ids = produce(&client, &topic, 0..3, false).await?;
    let beyond = MessageId {
        ledger_id: ids[2].ledger_id + 1000,
        ..ids[2]
    };
    let err = SplitReader::open(
        &client,
        split(&topic),
        "s",
        StartPosition::after(&beyond),
        DataLossPolicy::Fail,
    )
    .await
    .err()
    .context("a position beyond the end must fail")?;
    let text = format!("{err:#}");
    assert!(
        text.contains("data loss") && text.contains(&topic) && text.contains("fail-on-data-loss"),
        "{text}"
    );

    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "s",
        StartPosition::after(&beyond),
        DataLossPolicy::UseEarliest,
    )
    .await?;
    assert_eq!(read_n(&mut r, 3).await?, vec![0, 1, 2]);
    assert_eq!(r.position().resume, StartPosition::after(&ids[2]));
    assert_eq!(
        r.position().commit_through,
        Some(pulsar_connect::pulsar::message_id::format_message_id(
            &ids[2]
        ))
    );
    r.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_set_reads_every_partition() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-partitions");
    broker.create_partitioned_topic(&topic, 3)?;
    let splits = splits_of(&client, &[TopicName::parse(&topic)?]).await?;
    assert_eq!(splits.len(), 3);
    let producer = client.partitioned_producer(&topic).create().await?;
    for i in 0..60 {
        producer
            .new_message()
            .key(format!("k{i}"))
            .value(format!("{i}").into_bytes())
            .send()
            .await?;
    }
    producer.close().await?;
    let mut readers = Vec::new();
    for s in splits {
        readers.push(
            SplitReader::open(
                &client,
                s,
                "set",
                StartPosition::Earliest,
                DataLossPolicy::Fail,
            )
            .await?,
        );
    }
    let mut set = SplitSet::new(readers);
    let mut seen = Vec::new();
    let mut partitions = std::collections::BTreeSet::new();
    while seen.len() < 60 {
        let (i, batch) = set
            .next_batch(16, Duration::from_secs(10))
            .await?
            .context("timed out")?;
        assert!(batch.len() <= 16);
        partitions.insert(set.readers()[i].split().partition);
        for m in batch {
            assert_eq!(m.message_id.partition, set.readers()[i].split().partition);
            seen.push(std::str::from_utf8(&m.payload)?.parse::<u32>()?);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..60).collect::<Vec<_>>());
    assert_eq!(partitions.len(), 3);
    set.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_subscription_is_read_from_its_own_cursor() -> Result<()> {
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let topic = unique_topic("reader-external");
    produce(&client, &topic, 0..10, false).await?;
    // Someone else consumed and acknowledged the first three messages on "ext".
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "ext",
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.extend(r.next_batch(3 - seen.len(), Duration::from_secs(5)).await?);
    }
    r.commit(&r.position()).await?;
    r.close().await?;

    let cursor = StartPosition::SubscriptionCursor {
        from_earliest: false,
    };
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "ext",
        cursor.clone(),
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(read_n(&mut r, 7).await?, (3..10).collect::<Vec<_>>());
    r.close().await?;

    // A subscription that does not exist yet starts at the latest message, or the earliest when asked.
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "new-latest",
        cursor,
        DataLossPolicy::Fail,
    )
    .await?;
    produce(&client, &topic, 10..12, false).await?;
    assert_eq!(read_n(&mut r, 2).await?, vec![10, 11]);
    r.close().await?;
    let earliest = StartPosition::SubscriptionCursor {
        from_earliest: true,
    };
    let mut r = SplitReader::open(
        &client,
        split(&topic),
        "new-earliest",
        earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    assert_eq!(read_n(&mut r, 12).await?, (0..12).collect::<Vec<_>>());
    r.close().await?;
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_finds_partitions_and_topics_added_while_running() -> Result<()> {
    use pulsar_connect::pulsar::admin::admin_client;
    use pulsar_connect::pulsar::topics::{Discovery, TopicSelection};
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let admin = admin_client(&broker.admin_url, broker.token.as_deref())?;
    let base = unique_topic("disc");
    let a = format!("{base}-a");
    broker.create_partitioned_topic(&a, 2)?;

    // A list of topics: a partition added later is found.
    let list = TopicSelection::Topics(vec![TopicName::parse(&a)?]);
    let initial = list.splits(&client, None).await?;
    assert_eq!(initial.len(), 2);
    let mut by_list = Discovery::new(list, initial);
    assert!(by_list.new_splits(&client, None).await?.is_empty());

    // A pattern over the namespace: a new matching topic is found, through admin and binary protocol alike.
    let pattern = TopicSelection::Pattern(format!("{}-.*", regex::escape(&base)));
    let initial = pattern.splits(&client, Some(&admin)).await?;
    assert_eq!(initial.len(), 2, "{initial:?}");
    let mut by_pattern_admin = Discovery::new(pattern.clone(), initial.clone());
    let mut by_pattern_binary = Discovery::new(pattern, initial);

    broker.admin(
        "POST",
        &format!(
            "/admin/v2/persistent/{}/partitions",
            a.trim_start_matches("persistent://")
        ),
        Some("3"),
    )?;
    let b = format!("{base}-b");
    produce(&client, &b, 0..1, false).await?;
    let unrelated = unique_topic("other");
    produce(&client, &unrelated, 0..1, false).await?;

    let found = by_list.new_splits(&client, None).await?;
    assert_eq!(
        found
            .iter()
            .map(|s| s.topic.to_string())
            .collect::<Vec<_>>(),
        vec![format!("{a}-partition-2")]
    );
    for (name, d, admin) in [
        ("admin", &mut by_pattern_admin, Some(&admin)),
        ("binary", &mut by_pattern_binary, None),
    ] {
        let mut found: Vec<String> = d
            .new_splits(&client, admin)
            .await?
            .iter()
            .map(|s| s.topic.to_string())
            .collect();
        found.sort();
        assert_eq!(found, vec![format!("{a}-partition-2"), b.clone()], "{name}");
        assert!(
            d.new_splits(&client, admin).await?.is_empty(),
            "{name}: reported once"
        );
    }
    client.close().await;
    Ok(())
}
