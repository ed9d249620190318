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
                // Keys are written as Java's `keyBytes` does (base64 + flag): read back as bytes.
                message::key_bytes(&m).map(|k| String::from_utf8_lossy(&k).into_owned()),
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
    // The avro value format registers the AVRO schema Flink derives from the value columns.
    let (ty, schema) = topic_schema(&broker, &topic)?;
    assert_eq!(ty, "AVRO");
    assert!(
        schema.contains("org.apache.flink.avro.generated"),
        "{schema}"
    );
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
            ", 'properties.pulsar.reader.receiverQueueSize' = '0'",
            "0 is out of range",
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

/// Runs `sql` until its bounded input is written and the job ends on its own; its summary and metrics.
async fn run_to_end(
    sql: &str,
) -> Result<(
    pulsar_connect::runtime::RunSummary,
    std::sync::Arc<pulsar_connect::runtime::Metrics>,
)> {
    let job = RunningJob::start(sql, None).await?;
    tokio::time::timeout(WAIT, async {
        while !job.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let metrics = job.metrics.clone();
    let (summary, _) = job.stop().await?;
    Ok((summary, metrics))
}

/// The schema the broker holds for `topic` (type, schema text).
fn topic_schema(broker: &TestBroker, topic: &str) -> Result<(String, String)> {
    let path = topic.strip_prefix("persistent://").unwrap_or(topic);
    let text = broker.admin("GET", &format!("/admin/v2/schemas/{path}/schema"), None)?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    Ok((
        v["type"].as_str().unwrap_or_default().to_owned(),
        v["data"].as_str().unwrap_or_default().to_owned(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_reads_what_the_sink_writes_and_the_json_schema_is_registered() -> Result<()> {
    let broker = TestBroker::get();
    let batched = unique_topic("sink-py-batched");
    let compressed = unique_topic("sink-py-lz4");
    broker.create_partitioned_topic(&batched, 3)?;
    let table = |name: &str, topic: &str, extra: &str| {
        format!(
            "CREATE TABLE {name} (
                k STRING,
                n BIGINT,
                s STRING,
                et TIMESTAMP(3) METADATA FROM 'eventTime',
                props MAP<STRING, STRING> METADATA FROM 'properties'
            ) WITH (
                'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}',
                'format' = 'json', 'key.format' = 'raw', 'key.fields' = 'k'{extra}
            );",
            broker.service_url
        )
    };
    let values: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "('key-{i}', {i}, 'ünïcødé {i}', TIMESTAMP '2022-04-15 05:20:00.{i:03}', MAP['index', '{i}'])"
            )
        })
        .collect();
    let sql = format!(
        "{}\n{}\nINSERT INTO batched VALUES {v};\nINSERT INTO lz4 VALUES {v};",
        table("batched", &batched, ""),
        table(
            "lz4",
            &compressed,
            ", 'properties.pulsar.producer.batchingEnabled' = 'false', 'pulsar.producer.compressionType' = 'LZ4'"
        ),
        v = values.join(", ")
    );
    let (summary, _) = run_to_end(&sql).await?;
    assert_eq!(summary.rows_out, 60);
    for topic in [&batched, &compressed] {
        let read =
            pulsar_connect_tests::run_python(&["consume", &broker.service_url, topic, "30", "30"])?;
        let mut seen = std::collections::BTreeSet::new();
        for r in read {
            let v: serde_json::Value = serde_json::from_str(r["payload"].as_str().unwrap())?;
            let i = v["n"].as_u64().unwrap();
            assert_eq!(v["s"], format!("ünïcødé {i}"), "{topic}");
            // The official client sees the key as Java's `keyBytes` writes it: its base64 text.
            let b64 = base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                format!("key-{i}"),
            );
            assert_eq!(r["key"].as_str(), Some(b64.as_str()));
            assert_eq!(
                r["properties"]["index"].as_str(),
                Some(i.to_string().as_str())
            );
            assert_eq!(r["event_time"].as_u64(), Some(1_650_000_000_000 + i));
            seen.insert(i);
        }
        assert_eq!(seen.len(), 30, "{topic}: {seen:?}");
        // The json value format registers the JSON schema derived from the value columns.
        let (ty, schema) = topic_schema(&broker, topic)?;
        assert_eq!(ty, "JSON", "{topic}");
        let schema: serde_json::Value = serde_json::from_str(&schema)?;
        let fields: Vec<&str> = schema["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["k", "n", "s"], "{schema}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incompatible_topic_schema_fails_the_job_at_start() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-schema-clash");
    let path = topic.strip_prefix("persistent://").unwrap();
    broker.admin("PUT", &format!("/admin/v2/persistent/{path}"), None)?;
    // A JSON schema whose required field `x` the table does not have: readers of the old schema could not
    // read the table's rows (the broker's default FULL compatibility refuses it).
    let other = r#"{"type":"record","name":"other","fields":[{"name":"x","type":"int"}]}"#;
    broker.admin(
        "POST",
        &format!("/admin/v2/schemas/{path}/schema"),
        Some(&serde_json::json!({"type": "JSON", "schema": other, "properties": {}}).to_string()),
    )?;
    // A source that never ends: the error must come from the sink's start, not from a first row.
    let sql = format!(
        "CREATE TABLE gen (a BIGINT, b STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '1');
         CREATE TABLE t (a BIGINT, b STRING) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json');
         INSERT INTO t SELECT a, b FROM gen;",
        broker.service_url
    );
    let job = RunningJob::start(&sql, None).await?;
    let err = job.failure(WAIT).await;
    assert!(
        err.contains("table 't'") && err.contains("incompatible") && err.contains(&topic),
        "{err}"
    );
    // Nothing was written.
    let stats = broker.admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None)?;
    let stats: serde_json::Value = serde_json::from_str(&stats)?;
    assert_eq!(stats["msgInCounter"].as_u64(), Some(0), "{stats}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_delivery_reaches_a_shared_consumer_after_the_delay() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-delay");
    let sql = format!(
        "CREATE TABLE t (n BIGINT) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
            'send-delay-millisecond' = '4000');
         INSERT INTO t VALUES (1), (2), (3), (4), (5);",
        broker.service_url
    );
    let (summary, _) = run_to_end(&sql).await?;
    assert_eq!(summary.rows_out, 5);
    // The consumer subscribes right away; the broker holds each message until 4 s after it was sent.
    let read =
        pulsar_connect_tests::run_python(&["consume", &broker.service_url, &topic, "5", "30"])?;
    assert_eq!(read.len(), 5);
    for r in &read {
        let published = r["publish_time"].as_u64().unwrap();
        let received = r["received_ms"].as_u64().unwrap();
        assert!(
            received >= published + 3_900,
            "delivered {} ms after it was published: {r}",
            received.saturating_sub(published)
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_producer_survives_a_restart_with_broker_deduplication() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-named");
    let name = format!("writer-{}", pulsar_connect_tests::now_ms());
    let sql = |from: u32| {
        let values: Vec<String> = (from..from + 50).map(|i| format!("({i})")).collect();
        format!(
            "CREATE TABLE t (n BIGINT) WITH (
                'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
                'pulsar.producer.producerName' = '{name}');
             INSERT INTO t VALUES {};",
            broker.service_url,
            values.join(", ")
        )
    };
    // Two runs under the same producer name: the broker (deduplication on) keeps the last sequence id
    // of the name, and the second run must continue after it instead of being dropped as duplicates.
    for from in [0, 50] {
        let (summary, _) = run_to_end(&sql(from)).await?;
        assert_eq!(summary.rows_out, 50);
    }
    // Every row is there, under the name, with sequence ids continuing across the runs.
    let client = broker.client().await?;
    let mut reader = SplitReader::open(
        &client,
        Split {
            topic: TopicName::parse(&topic)?,
            partition: -1,
        },
        &format!("check-{}", pulsar_connect_tests::now_ms()),
        StartPosition::Earliest,
        DataLossPolicy::Fail,
    )
    .await?;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < 100 && tokio::time::Instant::now() < deadline {
        for m in reader.next_batch(100, Duration::from_millis(300)).await? {
            let v: serde_json::Value = serde_json::from_slice(&m.payload)?;
            seen.push((
                v["n"].as_u64().unwrap(),
                message::sequence_id(&m),
                m.metadata.producer_name.clone(),
            ));
        }
    }
    reader.close().await.ok();
    assert_eq!(seen.len(), 100, "{seen:?}");
    for (i, (n, seq, producer)) in seen.iter().enumerate() {
        assert_eq!((*n, *seq), (i as u64, i as u64), "{seen:?}");
        assert_eq!(producer, &name);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semantic_none_writes_every_row_of_a_job_that_ends() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-none");
    let values: Vec<String> = (0..500).map(|i| format!("({i})")).collect();
    let sql = format!(
        "CREATE TABLE t (n BIGINT) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
            'sink.semantic' = 'none');
         INSERT INTO t VALUES {};",
        broker.service_url,
        values.join(", ")
    );
    let (summary, _) = run_to_end(&sql).await?;
    assert_eq!(summary.rows_out, 500);
    // `none` waits for nothing at checkpoints, but the end of the input still flushes the producers.
    let msgs = read_all(&broker, &topic, -1, 500).await?;
    assert_eq!(msgs.len(), 500);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sends_go_to_the_dead_letter_topic_and_are_counted() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("sink-dlq-main");
    let dlq = unique_topic("sink-dlq");
    // The broker refuses messages above 200 bytes on the table's topic only (a topic policy).
    broker.create_topic_with_max_message_size(&topic, 200)?;
    let rows: Vec<String> = (0..20)
        .map(|i| {
            let filler = if i % 4 == 0 {
                "x".repeat(400)
            } else {
                String::new()
            };
            format!("({i}, '{filler}')")
        })
        .collect();
    let sql = format!(
        "CREATE TABLE t (n BIGINT, filler STRING) WITH (
            'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'format' = 'json',
            'fail-on-write' = 'false', 'sink.dead-letter-topic' = '{dlq}',
            'pulsar.producer.batchingEnabled' = 'false');
         INSERT INTO t VALUES {};",
        broker.service_url,
        rows.join(", ")
    );
    let (summary, metrics) = run_to_end(&sql).await?;
    assert_eq!(summary.rows_out, 20);
    let n_of = |p: &[u8]| {
        serde_json::from_slice::<serde_json::Value>(p).unwrap()["n"]
            .as_u64()
            .unwrap()
    };
    let mut written: Vec<u64> = read_all(&broker, &topic, -1, 15)
        .await?
        .iter()
        .map(|(_, p, _, _)| n_of(p))
        .collect();
    written.sort_unstable();
    let small: Vec<u64> = (0..20).filter(|i| i % 4 != 0).collect();
    assert_eq!(written, small);
    let dead = read_all(&broker, &dlq, -1, 5).await?;
    let mut dead_ns: Vec<u64> = dead.iter().map(|(_, p, _, _)| n_of(p)).collect();
    dead_ns.sort_unstable();
    assert_eq!(dead_ns, vec![0, 4, 8, 12, 16]);
    for (_, _, props, _) in &dead {
        assert!(props.contains_key("pulsar-connect.error"), "{props:?}");
        assert_eq!(
            props.get("pulsar-connect.topic").map(String::as_str),
            Some(topic.as_str())
        );
    }
    let metrics = metrics.render();
    assert!(
        // Every series carries the job (its id: a hash of the job text here).
        metrics.lines().any(
            |l| l.starts_with("pulsar_connect_sink_dropped_total{job=\"job-")
                && l.ends_with(",table=\"t\"} 5")
        ),
        "{metrics}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pulsar_quickstart_writes_with_the_sink_and_reads_back_with_the_source() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("quickstart");
    let root = pulsar_connect_tests::guests::repo_root();
    let text = std::fs::read_to_string(root.join("examples/pulsar-quickstart.sql"))?
        .replace("persistent://public/default/quickstart-orders", &topic)
        .replace("pulsar://127.0.0.1:6650", &broker.service_url)
        .replace("http://127.0.0.1:8080", &broker.admin_url)
        .replace(
            "'connector' = 'print',\n  'print-identifier' = 'orders'",
            "'connector' = 'collect'",
        );
    assert!(text.contains("'connector' = 'collect'"), "{text}");
    let job = RunningJob::start(&text, None).await?;
    job.wait_rows(200, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, rows) = job.stop().await?;
    let mut ids: Vec<u64> = rows
        .iter()
        .map(|r| {
            r.trim_start_matches("+I[")
                .split(',')
                .next()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or_else(|| panic!("unexpected row {r}"))
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=200).collect::<Vec<u64>>());
    Ok(())
}
