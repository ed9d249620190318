//! The `pulsar` sink end to end against the real broker: key/value formats, writable metadata, routers
//! (built-in plugins and a custom one), the InLong seed job, semantics and option errors.
//! Needs the broker (`cargo xtask broker start`) and the built plugins (`cargo xtask build-plugins`).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use pulsar_connect::pulsar::message;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};

const WAIT: Duration = Duration::from_secs(60);

/// Every message of one partition: (key, payload, properties, event time).
async fn read_all(
    broker: &TestBroker,
    topic: &str,
    partition: i32,
    expect: usize,
) -> Result<
    Vec<(
        Option<String>,
        Vec<u8>,
        BTreeMap<String, String>,
        Option<u64>,
    )>,
> {
    let client = broker.client().await?;
    let split = Split {
        topic: TopicName::parse(topic)?,
        partition,
    };
    let mut reader = SplitReader::open(
        &client,
        split,
        &format!("check-{}", pulsar_connect_tests::now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut last = tokio::time::Instant::now();
    while tokio::time::Instant::now() < deadline {
        let batch = reader.next_batch(100, Duration::from_millis(300)).await?;
        if batch.is_empty() {
            // Done once the expected messages are in and nothing more came for a while.
            // A partition may legitimately be empty: then wait long enough for a slow first receive.
            let quiet = if out.is_empty() { 8 } else { 2 };
            if out.len() >= expect && last.elapsed() > Duration::from_secs(quiet) {
                break;
            }
            continue;
        }
        last = tokio::time::Instant::now();
        for m in batch {
            out.push((
                message::key(&m).map(str::to_owned),
                m.payload.to_vec(),
                message::properties(&m)
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                message::event_time_ms(&m),
            ));
        }
    }
    reader.close().await.ok();
    Ok(out)
}

fn murmur3_32(data: &[u8]) -> u32 {
    let (c1, c2) = (0xcc9e2d51u32, 0x1b873593u32);
    let mut h = 0u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(c1).rotate_left(15).wrapping_mul(c2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe6546b64);
    }
    let mut k = 0u32;
    for (i, b) in tail.iter().enumerate() {
        k ^= u32::from(*b) << (8 * i);
    }
    if !tail.is_empty() {
        h ^= k.wrapping_mul(c1).rotate_left(15).wrapping_mul(c2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85ebca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2ae35);
    h ^= h >> 16;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_with_key_metadata_and_key_hash_routing_round_trip() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-keyhash");
    broker.create_partitioned_topic(&topic, 4)?;
    let rows: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "('user-{i}', {i}, 's{i}', TIMESTAMP '2020-03-08 13:12:{:02}.123', MAP['n', '{i}'])",
                i % 60
            )
        })
        .collect();
    let sql = format!(
        "CREATE TABLE t (
            `user` STRING,
            order_id BIGINT,
            order_status STRING,
            et TIMESTAMP(3) METADATA FROM 'eventTime',
            props MAP<STRING, STRING> METADATA FROM 'properties'
        ) WITH (
            'connector' = 'pulsar',
            'topic' = '{topic}',
            'service-url' = '{}',
            'format' = 'json',
            'key.format' = 'raw',
            'key.fields' = 'user',
            'sink.message-router' = 'key-hash'
        );
        INSERT INTO t VALUES {};",
        broker.service_url,
        rows.join(",\n")
    );
    let job = RunningJob::start(&sql, None).await?;
    let (summary, _) = tokio::time::timeout(WAIT, async {
        loop {
            if job.is_finished() {
                break job.stop().await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await??;
    assert_eq!(summary.rows_out, 40);
    let mut seen = 0;
    for p in 0..4 {
        for (key, payload, props, et) in
            read_all(&broker, &format!("{topic}-partition-{p}"), p, 0).await?
        {
            let key = key.expect("every row has a key");
            let i: u32 = key.trim_start_matches("user-").parse()?;
            // key-hash: abs(murmur3_32(key bytes)) % partitions, on the raw key bytes.
            let h = murmur3_32(key.as_bytes()) as i32;
            assert_eq!(h.unsigned_abs() % 4, p as u32, "key {key} on partition {p}");
            let v: serde_json::Value = serde_json::from_slice(&payload)?;
            assert_eq!(v["order_id"], i);
            assert_eq!(v["order_status"], format!("s{i}"));
            // value.fields-include = ALL: the key column is in the value too.
            assert_eq!(v["user"], key);
            assert_eq!(
                props.get("n").map(String::as_str),
                Some(i.to_string().as_str())
            );
            // 2020-03-08T13:12:ss.123 UTC in ms.
            assert_eq!(et, Some(1_583_673_120_123 + u64::from(i % 60) * 1000));
            seen += 1;
        }
    }
    assert_eq!(seen, 40);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inlong_seed_job_writes_and_reads_back_its_rows() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("inlong-seed");
    let root = pulsar_connect_tests::guests::repo_root();
    let text = std::fs::read_to_string(root.join("examples/inlong-seed.sql"))?
        .replace("persistent://public/default/topic82547611", &topic)
        .replace("pulsar://127.0.0.1:6650", &broker.service_url)
        .replace("http://127.0.0.1:8080", &broker.admin_url)
        // The page's print table, collected instead of printed.
        .replace(
            "'connector' = 'print',\n  'print-identifier' = 'sink_table'",
            "'connector' = 'collect'",
        );
    assert!(text.contains("'connector' = 'collect'"), "{text}");
    let job = RunningJob::start(&text, None).await?;
    let rows = job.wait_rows(3, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, all) = job.stop().await?;
    assert_eq!(rows.len(), all.len());
    let mut all = all;
    all.sort();
    assert_eq!(all, vec!["+I[data 1, 1]", "+I[data 2, 2]", "+I[data 3, 3]"]);
    // Written by the INSERT ... VALUES: avro values, raw keys, metadata.
    let msgs = read_all(&broker, &topic, -1, 3).await?;
    assert_eq!(msgs.len(), 3);
    let (key, _, props, et) = &msgs[0];
    assert_eq!(key.as_deref(), Some("key1"));
    assert_eq!(props.get("k11").map(String::as_str), Some("v11"));
    assert_eq!(*et, Some(1_583_673_131_123));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_option_errors_name_the_table_and_option() -> Result<()> {
    let broker = TestBroker::get();
    let base = |extra: &str| {
        format!(
            "CREATE TABLE t (a BIGINT, b STRING) WITH ('connector' = 'pulsar', 'topic' = 'x', 'service-url' = '{}', 'format' = 'json'{extra});
             INSERT INTO t VALUES (1, 'a');",
            broker.service_url
        )
    };
    for (extra, want) in [
        (
            ", 'sink.message-router' = 'nope'",
            "option 'sink.message-router'",
        ),
        (
            ", 'sink.semantic' = 'EXACTLY_ONCE'",
            "allowed values: at-least-once, exactly-once, none",
        ),
        (
            ", 'key.format' = 'raw'",
            "requires the declaration of one or more key fields",
        ),
        (
            ", 'key.format' = 'raw', 'key.fields' = 'zz'",
            "'zz' is not a physical column",
        ),
        (
            ", 'key.fields-prefix' = 'k_', 'key.format' = 'raw', 'key.fields' = 'b'",
            "not allowed when option 'value.fields-include' is set to 'ALL'",
        ),
        (
            ", 'json.fail-on-missing-fields' = 'true'",
            "json.fail-on-missing-fields",
        ),
        (
            ", 'properties.pulsar.reader.receiverQueueSize' = 'many'",
            "receiverQueueSize",
        ),
        (
            ", 'auth-plugin-classname' = 'org.example.Kerberos', 'auth-params' = 'secret-value'",
            "not supported",
        ),
    ] {
        let (registry, _) = pulsar_connect_tests::jobs::registry();
        let err = match pulsar_connect::job::load_text(&base(extra), &registry).await {
            Ok(_) => panic!("accepted: {extra}"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains("table 't'") && err.contains(want),
            "{extra}: {err}"
        );
        assert!(!err.contains("secret-value"), "secret printed: {err}");
    }
    Ok(())
}
