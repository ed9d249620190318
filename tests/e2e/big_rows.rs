//! Rows of 5 MB (the broker's default `maxMessageSize` is 5 MiB) through every built-in value format, as
//! the sink writes them and the source reads them back (issue 48 §2); and a row too big for a format
//! plugin's memory limit fails naming the plugin, the table and the message.

use std::time::Duration;

use anyhow::Result;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, unique_topic};

/// Characters of the big row's text: with its framing, below the broker's 5 MiB (5 242 880 bytes).
const BIG: usize = 5_000_000;
const WAIT: Duration = Duration::from_secs(120);

/// The formats, with the options each needs (the changelog formats write and read `+I` rows as their
/// create / insert events; `raw` is one column).
const FORMATS: [(&str, &str); 8] = [
    ("json", ""),
    ("csv", ""),
    ("avro", ", 'pulsar.producer.compressionType' = 'ZSTD'"),
    ("raw", ""),
    ("debezium-json", ""),
    ("canal-json", ", 'pulsar.producer.compressionType' = 'LZ4'"),
    ("maxwell-json", ""),
    ("protobuf", ""),
];

fn table(name: &str, topic: &str, format: &str, extra: &str, broker: &TestBroker) -> String {
    let (columns, format_options) = match format {
        "raw" => ("payload STRING", String::new()),
        "protobuf" => (
            "f_int32 INT, f_string STRING",
            ", 'protobuf.descriptor-file' = 'golden.desc', 'protobuf.message-name' = 'pulsar_connect.golden.AllTypes'"
                .to_owned(),
        ),
        _ => ("id INT, payload STRING", String::new()),
    };
    format!(
        "CREATE TABLE {name} ({columns}) WITH ('connector' = 'pulsar', 'topic' = '{topic}',
  'service-url' = '{}', 'admin-url' = '{}', 'format' = '{format}'{format_options}{extra});\n",
        broker.service_url, broker.admin_url
    )
}

/// The two rows (a big one and a small one) as `format`'s table takes them.
fn rows_in(format: &str) -> String {
    let select = match format {
        "raw" => "repeat('x', n)",
        _ => "id, repeat('x', n)",
    };
    format!("SELECT {select} FROM (VALUES (1, {BIG}), (2, 10)) AS t(id, n)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_megabyte_rows_cross_every_format_both_ways() -> Result<()> {
    super::protobuf_format::install_descriptor_set()?;
    let broker = TestBroker::get();
    let mut write = String::new();
    let mut read = String::from(
        "CREATE TABLE out (f STRING, id INT, n INT) WITH ('connector' = 'collect');\n",
    );
    for (i, (format, extra)) in FORMATS.iter().enumerate() {
        let topic = unique_topic(&format!("big-{format}"));
        write += &table(&format!("w{i}"), &topic, format, extra, &broker);
        write += &format!("INSERT INTO w{i} {};\n", rows_in(format));
        read += &table(
            &format!("r{i}"),
            &topic,
            format,
            ", 'scan.startup.mode' = 'earliest'",
            &broker,
        );
        let (id, text) = match *format {
            "raw" => ("CAST(NULL AS INT)", "payload"),
            "protobuf" => ("f_int32", "f_string"),
            _ => ("id", "payload"),
        };
        read +=
            &format!("INSERT INTO out SELECT '{format}', {id}, CHAR_LENGTH({text}) FROM r{i};\n");
    }
    let writer = RunningJob::start(&write, None).await?;
    tokio::time::timeout(WAIT, async {
        while !writer.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    let (summary, _) = writer.stop().await?;
    assert_eq!(summary.rows_out, 2 * FORMATS.len() as u64);

    let reader = RunningJob::start(&read, None).await?;
    let got = reader.wait_rows(2 * FORMATS.len(), WAIT).await;
    let (_, mut rows) = reader.stop().await?;
    got?;
    rows.sort();
    let mut want: Vec<String> = FORMATS
        .iter()
        .flat_map(|(format, _)| {
            let ids: [String; 2] = match *format {
                "raw" => ["null".into(), "null".into()],
                _ => ["1".into(), "2".into()],
            };
            [
                format!("+I[{format}, {}, {BIG}]", ids[0]),
                format!("+I[{format}, {}, 10]", ids[1]),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(rows, want);
    Ok(())
}

/// A copy of `plugins/` with the json format's memory limit cut to 8 MiB, in a temporary folder.
fn json_limited_to_8_mib() -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(pulsar_connect_tests::jobs::plugin_dir().join("."))
        .arg(dir.path())
        .status()?;
    anyhow::ensure!(copied.success(), "copying the plugins: {copied}");
    let manifest_path = dir.path().join("json/plugin.toml");
    let manifest = std::fs::read_to_string(&manifest_path)?;
    anyhow::ensure!(manifest.contains("memory-mib = 256"), "{manifest}");
    std::fs::write(
        &manifest_path,
        manifest.replace("memory-mib = 256", "memory-mib = 8"),
    )?;
    Ok(dir)
}

/// Runs `sql` with the binary on `plugins` until it ends (at most 60 s); its exit status and stderr.
fn run_binary(plugins: &std::path::Path, sql: &str) -> Result<(std::process::ExitStatus, String)> {
    let job = plugins.join("job.sql");
    std::fs::write(&job, sql)?;
    let out = std::process::Command::new("timeout")
        .arg("60")
        .arg(pulsar_connect_tests::binary())
        .arg("--plugin-dir")
        .arg(plugins)
        .arg("run")
        .arg(&job)
        .output()?;
    Ok((
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A message too big for the format plugin's memory limit stops the job with an error naming the table,
/// the plugin, its limit and the message (its id and size); the messages before it were read. A row too
/// big to encode names the sink's table and the plugin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_above_a_plugins_memory_limit_fails_naming_the_table_and_the_message() -> Result<()> {
    let broker = TestBroker::get();
    let plugins = json_limited_to_8_mib()?;
    let topic = unique_topic("big-over-memory");
    let written = pulsar_connect_tests::run_python(&[
        "produce-big",
        &broker.service_url,
        &topic,
        "[10, 5000000, 20]",
    ])?;
    // The Python client's `(ledger,entry,partition,batch)` as this host prints ids.
    let big_id = written[1]["message_id"]
        .as_str()
        .unwrap_or_default()
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .take(3)
        .collect::<Vec<_>>()
        .join(":");
    let (status, stderr) = run_binary(
        plugins.path(),
        &format!(
            "CREATE TABLE src (id BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{topic}',
  'service-url' = '{}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE out (id BIGINT, n INT) WITH ('connector' = 'print');
INSERT INTO out SELECT id, CHAR_LENGTH(payload) FROM src;",
            broker.service_url
        ),
    )?;
    assert_eq!(status.code(), Some(1), "{stderr}");
    for part in [
        "table 'src'",
        "plugin `json`",
        "memory limit of 8 MiB",
        &format!("the largest {big_id} of "),
        &topic,
    ] {
        assert!(stderr.contains(part), "the error names {part}:\n{stderr}");
    }

    let output = unique_topic("big-over-memory-out");
    let (status, stderr) = run_binary(
        plugins.path(),
        &format!(
            "CREATE TABLE dst (id INT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{}', 'format' = 'json');
INSERT INTO dst SELECT id, repeat('x', n) FROM (VALUES (1, 10), (2, {BIG})) AS t(id, n);",
            broker.service_url
        ),
    )?;
    assert_eq!(status.code(), Some(1), "{stderr}");
    for part in ["table 'dst'", "plugin `json`", "memory limit of 8 MiB"] {
        assert!(stderr.contains(part), "the error names {part}:\n{stderr}");
    }
    Ok(())
}

/// A compressible row of 12 MB compresses far below the broker's limit and goes whole (no chunking
/// asked): our source reads it back (issue 48 §2: it refused an uncompressed size above 5 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressible_row_above_5_mib_is_sent_whole_and_read_back() -> Result<()> {
    let broker = TestBroker::get();
    let topic = unique_topic("big-compressible");
    let writer = RunningJob::start(
        &(table(
            "w",
            &topic,
            "json",
            ", 'pulsar.producer.compressionType' = 'LZ4'",
            &broker,
        ) + "INSERT INTO w SELECT id, repeat('x', n) FROM (VALUES (1, 12000000), (2, 10)) AS t(id, n);"),
        None,
    )
    .await?;
    tokio::time::timeout(WAIT, async {
        while !writer.is_finished() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    writer.stop().await?;
    let reader = RunningJob::start(
        &(table(
            "r",
            &topic,
            "json",
            ", 'scan.startup.mode' = 'earliest'",
            &broker,
        ) + "CREATE TABLE out (id INT, n INT) WITH ('connector' = 'collect');
INSERT INTO out SELECT id, CHAR_LENGTH(payload) FROM r;"),
        None,
    )
    .await?;
    let got = reader.wait_rows(2, WAIT).await;
    let (_, rows) = reader.stop().await?;
    got?;
    assert_eq!(rows, vec!["+I[1, 12000000]", "+I[2, 10]"]);
    Ok(())
}
