//! The Python and JavaScript plugin examples (issue 33 §2, ADR 0021) as a job runs them against the real
//! broker: `keyvalue` (Python, componentize-py, `sdk/python/examples/keyvalue`) decodes and encodes
//! values, `key-prefix` (JavaScript, componentize-js, `sdk/js/examples/key-prefix`) routes a sink over a
//! partitioned topic. Both are loaded from the plugin directory `cargo xtask build-plugins` installs
//! (manifest with world@version and sha256), the same way as the Rust built-ins.
//! Needs the broker (`cargo xtask broker start`) and the built plugins (`cargo xtask build-plugins`).

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use pulsar_connect::pulsar::message;
use pulsar_connect::pulsar::reader::{DataLossPolicy, SplitReader, StartPosition};
use pulsar_connect::pulsar::topics::{Split, TopicName};
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};

const WAIT: Duration = Duration::from_secs(90);
const PARTITIONS: u32 = 4;

/// The installed plugin `name` is the current build of `sdk/<lang>/examples/<name>`.
fn assert_installed(lang: &str, name: &str) {
    let root = xtask::paths::workspace_root();
    let installed =
        std::fs::read_to_string(root.join("plugins").join(name).join("plugin.toml"))
            .unwrap_or_else(|e| {
                panic!("plugin `{name}` is not installed in plugins/ ({e}): run `cargo xtask build-plugins`")
            });
    let template = std::fs::read_to_string(
        root.join("sdk")
            .join(lang)
            .join("examples")
            .join(name)
            .join("plugin.toml"),
    )
    .expect("the example's manifest template");
    assert!(
        installed.ends_with(&template) && installed.starts_with("sha256 = \""),
        "plugins/{name} is stale: run `cargo xtask build-plugins`"
    );
    // Loading (sha256, world@version against the component's exports, compilation, linking every import
    // against the host's WASI-with-an-empty-context linker) is the job's own, below: each load compiles
    // the 12-18 MiB component again (~10 s of CPU), so it is not repeated here.
}

fn fnv1a32(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// Every message of one partition: (key, payload).
async fn read_partition(
    broker: &TestBroker,
    topic: &str,
    partition: i32,
) -> Result<Vec<(Option<String>, String)>> {
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
            // A partition may be empty: wait long enough for a slow first receive.
            let quiet = if out.is_empty() { 8 } else { 2 };
            if last.elapsed() > Duration::from_secs(quiet) {
                break;
            }
            continue;
        }
        last = tokio::time::Instant::now();
        for m in batch {
            out.push((
                message::key_bytes(&m).map(|k| String::from_utf8_lossy(&k).into_owned()),
                String::from_utf8(m.payload.to_vec())?,
            ));
        }
    }
    reader.close().await.ok();
    Ok(out)
}

async fn run_to_end(sql: &str) -> Result<u64> {
    let job = RunningJob::start(sql, None).await?;
    let (summary, _) = tokio::time::timeout(WAIT, async {
        loop {
            if job.is_finished() {
                break job.stop().await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await??;
    Ok(summary.rows_out)
}

/// Text payloads are written with `raw`; a job reads them with the Python `keyvalue` format (one
/// message skipped, `keyvalue.ignore-parse-errors`) into `collect` and, in the same job, writes them
/// again as `keyvalue` values (the Python encoder) keyed by `k` to a partitioned topic routed by the
/// JavaScript `key-prefix` router. Every message is checked on the partition FNV-1a of its key's
/// prefix names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_format_and_a_javascript_router_run_a_job() -> Result<()> {
    assert_installed("python", "keyvalue");
    assert_installed("js", "key-prefix");
    let broker = TestBroker::get();
    let source = unique_topic("sdk-kv-in");
    let sink = unique_topic("sdk-kv-out");
    broker.create_partitioned_topic(&sink, PARTITIONS)?;
    let url = &broker.service_url;

    // 30 orders of 5 tenants, one broken message (no `=`) and one with an unknown key (ignored).
    let mut lines: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "k=tenant-{}:{i},tenant=tenant-{},order_id={i},amount={}.{:02}",
                i % 5,
                i % 5,
                i * 3,
                i % 100
            )
        })
        .collect();
    lines.insert(7, "garbage".to_owned());
    lines.push("k=tenant-9:99,order_id=99,color=red".to_owned());
    let values: Vec<String> = lines.iter().map(|l| format!("('{l}')")).collect();
    let written = run_to_end(&format!(
        "CREATE TABLE raw_in (line STRING) WITH (
            'connector' = 'pulsar', 'topic' = '{source}', 'service-url' = '{url}', 'format' = 'raw');
        INSERT INTO raw_in VALUES {};",
        values.join(", ")
    ))
    .await?;
    assert_eq!(written, 32);

    let job = RunningJob::start(
        &format!(
            "CREATE TABLE orders (k STRING, tenant STRING, order_id BIGINT NOT NULL, amount DECIMAL(8, 2)) WITH (
                'connector' = 'pulsar', 'topic' = '{source}', 'service-url' = '{url}',
                'scan.startup.mode' = 'earliest',
                'format' = 'keyvalue', 'keyvalue.ignore-parse-errors' = 'true');
            CREATE TABLE seen (k STRING, tenant STRING, order_id BIGINT, amount DECIMAL(8, 2))
                WITH ('connector' = 'collect');
            CREATE TABLE routed (k STRING, tenant STRING, order_id BIGINT NOT NULL, amount DECIMAL(8, 2)) WITH (
                'connector' = 'pulsar', 'topic' = '{sink}', 'service-url' = '{url}',
                'key.format' = 'raw', 'key.fields' = 'k',
                'format' = 'keyvalue', 'keyvalue.pair-delimiter' = ';',
                'sink.message-router' = 'key-prefix', 'sink.message-router.separator' = ':');
            INSERT INTO seen SELECT * FROM orders;
            INSERT INTO routed SELECT * FROM orders;"
        ),
        None,
    )
    .await?;
    let rows = job.wait_rows(31, WAIT).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, all) = job.stop().await?;
    assert_eq!(
        rows.len(),
        all.len(),
        "no more rows after the 31st: {all:#?}"
    );
    let all: BTreeSet<String> = all.into_iter().collect();
    let mut want: BTreeSet<String> = (0..30)
        .map(|i| {
            format!(
                "+I[tenant-{}:{i}, tenant-{}, {i}, {}.{:02}]",
                i % 5,
                i % 5,
                i * 3,
                i % 100
            )
        })
        .collect();
    // The unknown key is ignored, the missing columns are NULL; `garbage` was skipped.
    want.insert("+I[tenant-9:99, null, 99, null]".to_owned());
    assert_eq!(all, want);

    let mut seen = 0;
    let mut used = BTreeSet::new();
    for p in 0..PARTITIONS {
        for (key, value) in
            read_partition(&broker, &format!("{sink}-partition-{p}"), p as i32).await?
        {
            let key = key.expect("every message has a key");
            let prefix = key.split(':').next().unwrap_or_default();
            assert_eq!(
                fnv1a32(prefix.as_bytes()) % PARTITIONS,
                p,
                "key {key} on partition {p} (the JavaScript router's FNV-1a of `{prefix}`)"
            );
            // The Python encoder: the columns in order, NULLs left out, the table's pair delimiter.
            let i: u32 = key.rsplit(':').next().unwrap_or_default().parse()?;
            let expected = if i == 99 {
                "k=tenant-9:99;order_id=99".to_owned()
            } else {
                format!(
                    "k={key};tenant={prefix};order_id={i};amount={}.{:02}",
                    i * 3,
                    i % 100
                )
            };
            assert_eq!(value, expected);
            used.insert(p);
            seen += 1;
        }
    }
    assert_eq!(seen, 31);
    let expected_partitions: BTreeSet<u32> = (0..5)
        .map(|t| format!("tenant-{t}"))
        .chain(["tenant-9".to_owned()])
        .map(|t| fnv1a32(t.as_bytes()) % PARTITIONS)
        .collect();
    assert_eq!(used, expected_partitions);
    Ok(())
}

/// A table's bad options are refused by the Python and JavaScript plugins' own factories, naming the
/// option, before any message is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn their_factories_refuse_bad_options_by_name() -> Result<()> {
    let broker = TestBroker::get();
    let url = &broker.service_url;
    let sink = unique_topic("sdk-bad-out");
    broker.create_partitioned_topic(&sink, 2)?;
    for (extra, format, router, needle) in [
        (
            "'keyvalue.pair-delimiter' = ';;'",
            "keyvalue",
            "key-prefix",
            "pair-delimiter",
        ),
        (
            "'sink.message-router.separator' = '::'",
            "json",
            "key-prefix",
            "separator",
        ),
    ] {
        let sql = format!(
            "CREATE TABLE t (k STRING, n BIGINT) WITH (
                'connector' = 'pulsar', 'topic' = '{sink}', 'service-url' = '{url}',
                'format' = '{format}', 'key.format' = 'raw', 'key.fields' = 'k',
                'sink.message-router' = '{router}', {extra});
            INSERT INTO t VALUES ('a:1', 1);"
        );
        let err = match RunningJob::start(&sql, None).await {
            Err(e) => format!("{e:#}"),
            Ok(job) => job.failure(WAIT).await,
        };
        assert!(err.contains(needle), "{extra}: {err}");
        assert!(err.contains("must be one"), "{extra}: {err}");
    }
    Ok(())
}
