//! Interop with the official Apache Pulsar client (Python `pulsar-client`, C++ core): what it writes we
//! read with every field intact, and what we write it reads.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use magnetar::OutgoingMessage;
use magnetar::proto::pb::command_subscribe::{InitialPosition, SubType};
use magnetar::proto::types::CompressionKind;
use pulsar_connect::pulsar::message;
use pulsar_connect::pulsar::topics::TopicName;
use pulsar_connect::pulsar::writer::{TopicWriter, WriterConfig};
use pulsar_connect_tests::{TestBroker, run_python, unique_topic};

/// Parses the Python client's message id text, e.g. `(12,3,1,7)` = (ledger, entry, partition, batch index).
fn python_id(text: &str) -> Result<(u64, u64, i32, i32)> {
    let nums: Vec<i64> = text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(|n| n.trim().parse::<i64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("message id {text}"))?;
    match nums.as_slice() {
        [l, e, p, b, ..] => Ok((*l as u64, *e as u64, *p as i32, *b as i32)),
        _ => bail!("unexpected message id {text}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_official_client_writes_we_read_with_every_field() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-from-python");
    broker.create_partitioned_topic(&topic, 3)?;
    let written = run_python(&["produce", &broker.service_url, &topic, "200"])?;
    assert_eq!(written.len(), 200);

    let client = broker.client().await?;
    let mut consumers = Vec::new();
    for p in 0..3 {
        consumers.push(
            client
                .consumer(format!("{topic}-partition-{p}"))
                .subscription("rust-reader")
                .subscription_type(SubType::Exclusive)
                .initial_position(InitialPosition::Earliest)
                .subscribe()
                .await?,
        );
    }
    let mut got = BTreeMap::new();
    for (p, consumer) in consumers.into_iter().enumerate() {
        let expected = written
            .iter()
            .filter(|w| {
                python_id(w["message_id"].as_str().unwrap()).is_ok_and(|id| id.2 == p as i32)
            })
            .count();
        let mut read = 0;
        while read < expected {
            let msg = tokio::time::timeout(Duration::from_secs(20), consumer.receive())
                .await
                .with_context(|| format!("partition {p}: {read} of {expected} messages"))??;
            let props: BTreeMap<String, String> = message::properties(&msg)
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let payload = String::from_utf8(msg.payload.to_vec())
                .context("payload is the UTF-8 text written")?;
            got.insert(
                payload,
                (
                    message::key(&msg).map(str::to_owned),
                    props,
                    message::event_time_ms(&msg),
                    msg.message_id,
                ),
            );
            consumer.ack(msg.message_id).await?;
            read += 1;
        }
        let extra = tokio::time::timeout(Duration::from_millis(500), consumer.receive()).await;
        assert!(extra.is_err(), "partition {p}: more messages than written");
        consumer.close().await?;
    }
    assert_eq!(
        got.len(),
        200,
        "every message the official client wrote is read exactly once"
    );
    let mut batched = 0;
    for w in &written {
        let payload = w["payload"].as_str().unwrap();
        let (key, props, event_time, id) = got
            .get(payload)
            .with_context(|| format!("missing {payload}"))?;
        assert_eq!(key.as_deref(), w["key"].as_str(), "{payload}: key");
        let want: BTreeMap<String, String> = serde_json::from_value(w["properties"].clone())?;
        assert_eq!(props, &want, "{payload}: properties");
        assert_eq!(
            *event_time,
            w["event_time"].as_u64(),
            "{payload}: event time"
        );
        let (ledger, entry, partition, batch) = python_id(w["message_id"].as_str().unwrap())?;
        assert_eq!(
            (id.ledger_id, id.entry_id, id.partition, id.batch_index),
            (ledger, entry, partition, batch)
        );
        // The `messageId` metadata column holds what the official client's `MessageId.serialize()` gives.
        let theirs = STANDARD.decode(w["message_id_bytes"].as_str().unwrap())?;
        assert_eq!(id.to_bytes(), theirs, "{payload}: messageId bytes");
        if id.batch_index >= 0 {
            batched += 1;
        }
    }
    assert!(
        batched > 100,
        "the official client batched its sends ({batched} batched)"
    );
    client.close().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_one_message_is_read_without_its_batch_framing() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-batch-of-one");
    let written = run_python(&["produce-one", &broker.service_url, &topic])?;
    let (_, _, _, batch_index) = python_id(written[0]["message_id"].as_str().unwrap())?;
    assert_eq!(
        batch_index, 0,
        "the official client sent it as a batch of one"
    );
    let client = broker.client().await?;
    let consumer = client
        .consumer(&topic)
        .subscription("rust-reader")
        .subscription_type(SubType::Exclusive)
        .initial_position(InitialPosition::Earliest)
        .subscribe()
        .await?;
    let msg = tokio::time::timeout(Duration::from_secs(20), consumer.receive()).await??;
    assert_eq!(&msg.payload[..], b"alone in its batch");
    assert_eq!(message::key(&msg), Some("solo"));
    assert_eq!(
        message::properties(&msg).collect::<Vec<_>>(),
        vec![("p", "1")]
    );
    assert_eq!(
        (msg.message_id.batch_index, msg.message_id.batch_size),
        (0, 1)
    );
    consumer.close().await?;
    client.close().await;
    Ok(())
}

/// A message above the broker's 5 MB limit, sent in chunks by the official client, is read whole, and
/// the messages around it too (issue 48 §2: the client refused the frame of a full-size chunk, dropped
/// the connection and got the message again, for ever, while the partition stood still).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_message_of_the_official_client_is_read_whole() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-chunked");
    let written = run_python(&[
        "produce-big",
        &broker.service_url,
        &topic,
        "[1000000, 6000000, 10]",
    ])?;
    let chunked: Vec<bool> = written
        .iter()
        .map(|w| w["chunked"].as_bool() == Some(true))
        .collect();
    assert_eq!(
        chunked,
        vec![false, true, false],
        "the official client chunked the 6 MB message only: {written:?}"
    );
    let sql = format!(
        "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{topic}',
  'service-url' = '{}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE out (id BIGINT, n INT) WITH ('connector' = 'collect');
INSERT INTO out SELECT id, CHAR_LENGTH(payload) FROM src;",
        broker.service_url
    );
    let job = pulsar_connect_tests::jobs::RunningJob::start(&sql, None).await?;
    let rows = job.wait_rows(3, Duration::from_secs(60)).await?;
    assert_eq!(rows, vec!["+I[0, 1000000]", "+I[1, 6000000]", "+I[2, 10]"]);
    job.stop().await?;
    Ok(())
}

/// A chunked message whose producer died after its first chunks (the rest never comes) does not hold
/// back the messages after it (issue 48 §2): they are read at once, not after the 60-s expiry of the
/// half-written message, and the half-written message is not read as a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_chunked_message_does_not_block_its_partition() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("interop-half-chunked");
    let full = format!("persistent://public/default/{topic}");
    run_python(&["produce-big", &broker.service_url, &topic, "[10]"])?;
    pulsar_connect_tests::raw_chunks::write_first_chunks(
        &broker.service_url,
        &full,
        2,
        3,
        100_000,
    )?;
    run_python(&["produce-big", &broker.service_url, &topic, "[20]"])?;
    pulsar_connect_tests::raw_chunks::write_first_chunks(&broker.service_url, &full, 1, 4, 1_000)?;
    run_python(&["produce-big", &broker.service_url, &topic, "[30]"])?;
    let sql = format!(
        "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{topic}',
  'service-url' = '{}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE out (id BIGINT, n INT) WITH ('connector' = 'collect');
INSERT INTO out SELECT id, CHAR_LENGTH(payload) FROM src;",
        broker.service_url
    );
    let job = pulsar_connect_tests::jobs::RunningJob::start(&sql, None).await?;
    let rows = job.wait_rows(3, Duration::from_secs(20)).await?;
    // Each produce-big call numbers its rows from 0.
    assert_eq!(rows, vec!["+I[0, 10]", "+I[0, 20]", "+I[0, 30]"]);
    job.stop().await?;
    Ok(())
}

/// With `pulsar.producer.chunkingEnabled`, a row above the broker's 5 MB limit goes in chunks that the
/// official client reads back whole, at-least-once and exactly-once (issue 48 §2); the input is the
/// official client's own chunked message, so the source side is crossed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_chunks_a_big_row_and_the_official_client_reads_it_whole() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("interop-chunked-in");
    run_python(&[
        "produce-big",
        &broker.service_url,
        &input,
        "[10, 6000000, 20, 3000000]",
    ])?;
    for semantic in ["at-least-once", "exactly-once"] {
        let output = unique_topic(&format!("interop-chunked-out-{semantic}"));
        let sql = format!(
            "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{input}',
  'service-url' = '{su}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE dst (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{su}', 'admin-url' = '{au}', 'format' = 'json', 'sink.semantic' = '{semantic}',
  'pulsar.producer.chunkingEnabled' = 'true');
INSERT INTO dst SELECT id, payload FROM src;",
            su = broker.service_url,
            au = broker.admin_url
        );
        let job = pulsar_connect_tests::jobs::RunningJob::start(&sql, None).await?;
        let read = tokio::task::spawn_blocking({
            let (su, output) = (broker.service_url.clone(), output.clone());
            move || run_python(&["consume-sizes", &su, &output, "4", "60"])
        })
        .await??;
        job.stop().await?;
        let sizes: Vec<(u64, u64)> = read
            .iter()
            .map(|r| (r["id"].as_u64().unwrap(), r["size"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            sizes,
            vec![(0, 10), (1, 6_000_000), (2, 20), (3, 3_000_000)],
            "{semantic}: what the official client read: {read:?}"
        );
        assert!(
            read[1]["message_id"]
                .as_str()
                .is_some_and(|id| id.contains(';')),
            "{semantic}: the 6 MB row went in chunks: {read:?}"
        );
    }
    Ok(())
}

/// Compressed and chunked both ways (issue 48 §2): the official client's LZ4 message of 12 MB of random
/// hex (about 6 MB compressed: 2 chunks or more) is read whole, and the sink's ZSTD copy of it goes in
/// chunks the official client reads back whole, under exactly-once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_chunked_messages_cross_both_ways() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("interop-chunked-lz4-in");
    let output = unique_topic("interop-chunked-zstd-out");
    let written = run_python(&[
        "produce-big",
        &broker.service_url,
        &input,
        "[10, 12000000, 20]",
        "LZ4",
    ])?;
    assert_eq!(written[1]["chunked"].as_bool(), Some(true), "{written:?}");
    let sql = format!(
        "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{input}',
  'service-url' = '{su}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE dst (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{su}', 'admin-url' = '{au}', 'format' = 'json', 'sink.semantic' = 'exactly-once',
  'pulsar.producer.chunkingEnabled' = 'true', 'pulsar.producer.compressionType' = 'ZSTD');
INSERT INTO dst SELECT id, payload FROM src;",
        su = broker.service_url,
        au = broker.admin_url
    );
    let job = pulsar_connect_tests::jobs::RunningJob::start(&sql, None).await?;
    let read = tokio::task::spawn_blocking({
        let (su, output) = (broker.service_url.clone(), output.clone());
        move || run_python(&["consume-sizes", &su, &output, "3", "60"])
    })
    .await??;
    job.stop().await?;
    let sizes: Vec<(u64, u64)> = read
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(sizes, vec![(0, 10), (1, 12_000_000), (2, 20)], "{read:?}");
    assert!(
        read[1]["message_id"]
            .as_str()
            .is_some_and(|id| id.contains(';')),
        "the compressed 12 MB row went in chunks: {read:?}"
    );
    Ok(())
}

/// Without chunking, a row above the broker's limit fails the job with an error naming the table, the
/// limit and the option that lifts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_above_the_brokers_limit_fails_naming_the_table_and_the_option() -> Result<()> {
    let broker = TestBroker::get();
    let input = unique_topic("interop-too-big-in");
    run_python(&["produce-big", &broker.service_url, &input, "[6000000]"])?;
    let sql = format!(
        "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{input}',
  'service-url' = '{su}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE dst (id BIGINT, payload STRING) WITH ('connector' = 'pulsar',
  'topic' = '{output}', 'service-url' = '{su}', 'format' = 'json');
INSERT INTO dst SELECT id, payload FROM src;",
        su = broker.service_url,
        output = unique_topic("interop-too-big-out")
    );
    let job = pulsar_connect_tests::jobs::RunningJob::start(&sql, None).await?;
    let error = job.failure(Duration::from_secs(60)).await;
    for needle in ["'dst'", "pulsar.producer.chunkingEnabled"] {
        assert!(error.contains(needle), "{needle} not in: {error}");
    }
    Ok(())
}

/// The bytes the broker stores for `topic` (a partitioned topic's partitions summed).
fn storage_size(broker: &TestBroker, topic: &str) -> Result<u64> {
    let path = topic.strip_prefix("persistent://").unwrap_or(topic);
    let text = broker.admin(
        "GET",
        &format!("/admin/v2/persistent/{path}/partitioned-stats"),
        None,
    )?;
    let stats: serde_json::Value = serde_json::from_str(&text)?;
    stats["storageSize"]
        .as_u64()
        .with_context(|| format!("no storageSize in the stats of {topic}: {text}"))
}

/// What the sink's writer writes — batched (the default) with every codec and without, and unbatched
/// compressed — the official client reads: payloads, keys (text keys as written; byte keys as their
/// base64 text, the client ignores `partition_key_b64_encoded`), properties and event times. Batches
/// are real (several messages an entry) and compressed (a fraction of the plain topic's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_we_write_batched_and_compressed_the_official_client_reads() -> Result<()> {
    const COUNT: u64 = 60;
    let broker = TestBroker::get();
    let client = broker.client().await?;
    let plans = [
        ("NONE", CompressionKind::None, true),
        ("LZ4", CompressionKind::Lz4, true),
        ("ZLIB", CompressionKind::Zlib, true),
        ("ZSTD", CompressionKind::Zstd, true),
        ("SNAPPY", CompressionKind::Snappy, true),
        ("LZ4", CompressionKind::Lz4, false),
        ("ZSTD", CompressionKind::Zstd, false),
    ];
    let mut stored = Vec::new();
    for (name, compression, batched) in plans {
        let topic = unique_topic(&format!("interop-to-python-{}", name.to_lowercase()));
        broker.create_partitioned_topic(&topic, 2)?;
        let config = WriterConfig {
            batching: batched.then_some((25, 1 << 20, Duration::from_millis(10))),
            compression,
            ..WriterConfig::default()
        };
        let mut writer = TopicWriter::open(&client, TopicName::parse(&topic)?, &config).await?;
        let mut expected = BTreeMap::new();
        for i in 0..COUNT {
            let payload = format!("rust-{name}-{i}-{}", "ünïcødé ".repeat(20));
            // Even messages have a text key, odd ones a byte key (base64 + flag, Java's `keyBytes`).
            let (key, key_b64) = if i % 2 == 0 {
                (format!("k{i}"), false)
            } else {
                (STANDARD.encode([0xff, 0x00, i as u8]), true)
            };
            let message = OutgoingMessage::with_payload(payload.clone().into_bytes())
                .key(key.clone())
                .property("index", i.to_string())
                .property("codec", name)
                .event_time_ms(1_650_000_000_000 + i);
            writer
                .send_keyed(
                    (i % 2) as u32,
                    message,
                    pulsar_connect::pulsar::writer::MessageFlags::keyed(key_b64),
                )
                .await?;
            expected.insert(payload, (key, i));
        }
        writer.close().await?;

        let read = run_python(&["consume", &broker.service_url, &topic, "60", "30"])?;
        assert_eq!(read.len() as u64, COUNT, "{name}");
        let mut entries = std::collections::BTreeSet::new();
        for r in read {
            let payload = r["payload"].as_str().unwrap();
            let (key, i) = expected
                .remove(payload)
                .with_context(|| format!("{name}: unexpected {payload}"))?;
            assert_eq!(r["key"].as_str(), Some(key.as_str()), "{name}: {payload}");
            assert_eq!(r["properties"]["index"], i.to_string(), "{name}");
            assert_eq!(r["properties"]["codec"], name, "{name}");
            assert_eq!(r["event_time"].as_u64(), Some(1_650_000_000_000 + i));
            let (ledger, entry, partition, batch_index) =
                python_id(r["message_id"].as_str().unwrap())?;
            assert_eq!(batch_index >= 0, batched, "{name}: {payload} batched");
            entries.insert((ledger, entry, partition));
        }
        assert!(expected.is_empty(), "{name}: not read: {expected:?}");
        if batched {
            assert!(
                (entries.len() as u64) < COUNT / 2,
                "{name}: several messages an entry ({} entries)",
                entries.len()
            );
        }
        stored.push((name, batched, storage_size(&broker, &topic)?));
    }
    client.close().await;
    let plain = stored[0].2;
    for (name, batched, size) in &stored[1..] {
        assert!(
            size * 2 < plain,
            "{name} (batched {batched}): {size} bytes stored, uncompressed {plain}"
        );
    }
    Ok(())
}
