//! The `protobuf` format end to end against the real broker: the official Python client writes
//! `pulsar_connect.golden.AllTypes` messages serialized by protobuf's Python package, a job reads them
//! with `'format' = 'protobuf'` (the descriptor set in the plugin's own read-only folder, ADR 0022),
//! transforms them and writes them with the protobuf encoder to another topic, which Python parses back.
//! A job naming a message the descriptor set does not hold is refused before it starts.
//! Needs the broker (`cargo xtask broker start`), the built plugins (`cargo xtask build-plugins`) and the
//! venv (`cargo xtask venv`, with protobuf and grpcio-tools).

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use pulsar_connect_tests::jobs::{RunningJob, plugin_dir};
use pulsar_connect_tests::{TestBroker, marked_records, python, python_script, unique_topic};

const ROWS: usize = 40;
const MESSAGE: &str = "pulsar_connect.golden.AllTypes";

fn interop(args: &[&str]) -> Result<Vec<serde_json::Value>> {
    let out = Command::new(python())
        .arg(python_script("protobuf_interop.py"))
        .args(args)
        .output()
        .context("running tests/python/protobuf_interop.py")?;
    if !out.status.success() {
        bail!(
            "protobuf_interop.py {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    marked_records(out.stdout)
}

/// Puts the golden descriptor set into the installed plugin's descriptors folder (where a job's
/// `protobuf.descriptor-file` is looked up).
pub(crate) fn install_descriptor_set() -> Result<()> {
    let folder = plugin_dir().join("protobuf/descriptors");
    anyhow::ensure!(
        folder.is_dir(),
        "{} is missing: run `cargo xtask build-plugins` (it installs the protobuf plugin with its folder)",
        folder.display()
    );
    let source = xtask::paths::workspace_root().join("tests/golden/protobuf/vectors/golden.desc");
    let bytes = std::fs::read(&source).with_context(|| source.display().to_string())?;
    let target = folder.join("golden.desc");
    if std::fs::read(&target).ok().as_deref() != Some(bytes.as_slice()) {
        let temp = folder.join(format!(".golden.desc.{}", std::process::id()));
        std::fs::write(&temp, &bytes)?;
        std::fs::rename(&temp, &target)?;
    }
    Ok(())
}

fn table(name: &str, topic: &str, broker: &TestBroker, message: &str, extra: &str) -> String {
    format!(
        "CREATE TABLE {name} (f_int32 INT, f_string STRING, f_enum STRING,
           f_inner ROW<a INT, b STRING, c ARRAY<BIGINT>>, f_counts MAP<STRING, BIGINT>, f_uint32 INT)
         WITH ('connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{}', 'admin-url' = '{}',
           'format' = 'protobuf', 'protobuf.descriptor-file' = 'golden.desc',
           'protobuf.message-name' = '{message}'{extra});\n",
        broker.service_url, broker.admin_url
    )
}

/// `row` with the entries of its (one, last) `{k=v, ...}` map sorted.
fn sorted_map(row: &str) -> String {
    let (Some(open), Some(close)) = (row.rfind('{'), row.rfind('}')) else {
        return row.to_owned();
    };
    let mut entries: Vec<&str> = row[open + 1..close].split(", ").collect();
    entries.sort();
    format!(
        "{}{{{}}}{}",
        &row[..open],
        entries.join(", "),
        &row[close + 1..]
    )
}

fn int(v: &serde_json::Value) -> i64 {
    match v {
        serde_json::Value::String(s) => s.parse().unwrap_or(i64::MIN),
        other => other.as_i64().unwrap_or(0),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_protobuf_messages_read_transformed_and_written_back() -> Result<()> {
    install_descriptor_set()?;
    let broker = TestBroker::get();
    let input = unique_topic("protobuf-in");
    let output = unique_topic("protobuf-out");
    let produced = tokio::task::spawn_blocking({
        let (su, input) = (broker.service_url.clone(), input.clone());
        move || interop(&["produce", &su, &input, &ROWS.to_string()])
    })
    .await??;
    assert_eq!(produced.len(), ROWS);

    let sql = format!(
        "SET 'pipeline.name' = 'protobuf-{output}';
{}{}CREATE TABLE seen (f_int32 INT, f_string STRING, f_enum STRING, f_uint32 INT, f_counts MAP<STRING, BIGINT>)
  WITH ('connector' = 'collect');
INSERT INTO dst SELECT f_int32 + 1000, UPPER(f_string), f_enum, f_inner, f_counts, f_uint32 FROM src;
INSERT INTO seen SELECT f_int32, f_string, f_enum, f_uint32, f_counts FROM src;",
        table("src", &input, &broker, MESSAGE, ", 'scan.startup.mode' = 'earliest'"),
        table("dst", &output, &broker, MESSAGE, "")
    );
    let job = RunningJob::start(&sql, None).await?;
    let seen = job.wait_rows(ROWS, Duration::from_secs(90)).await?;
    let consumed = tokio::task::spawn_blocking({
        let (su, output) = (broker.service_url.clone(), output.clone());
        move || interop(&["consume", &su, &output, &ROWS.to_string(), "60"])
    })
    .await?;
    job.stop().await?;
    let consumed = consumed?;

    // Read: every message once, each field as Flink's mapping gives it (uint32 as INT bits); a MAP's
    // entries in any order (SQL maps are unordered).
    let mut seen: Vec<String> = seen.iter().map(|r| sorted_map(r)).collect();
    seen.sort_by_key(|r| {
        r.split([',', '['])
            .nth(1)
            .and_then(|n| n.trim().parse::<i64>().ok())
    });
    let colors = ["RED", "GREEN", "BLUE"];
    let expected: Vec<String> = (0..ROWS)
        .map(|i| {
            format!(
                "+I[{i}, python-{i}-ünï, {}, {}, {{n={i}, twice={}}}]",
                colors[i % 3],
                (4_294_967_295u32 - i as u32) as i32,
                2 * i
            )
        })
        .collect();
    assert_eq!(seen, expected);

    // Written: what protobuf's Python package parses from our encoder's bytes.
    assert_eq!(consumed.len(), ROWS);
    let mut by_id: Vec<&serde_json::Value> = consumed.iter().collect();
    by_id.sort_by_key(|m| int(&m["f_int32"]));
    for (i, m) in by_id.iter().enumerate() {
        assert_eq!(int(&m["f_int32"]), 1000 + i as i64, "{m}");
        assert_eq!(m["f_string"], format!("PYTHON-{i}-ÜNÏ"), "{m}");
        assert_eq!(m["f_enum"], colors[i % 3], "{m}");
        assert_eq!(int(&m["f_uint32"]), 4_294_967_295 - i as i64, "{m}");
        let inner = &m["f_inner"];
        assert_eq!(int(&inner["a"]), 2 * i as i64, "{m}");
        assert_eq!(inner["b"], format!("inner-{i}"), "{m}");
        let c: Vec<i64> = inner["c"]
            .as_array()
            .map(|a| a.iter().map(int).collect())
            .unwrap_or_default();
        assert_eq!(c, [i as i64, -(i as i64)], "{m}");
        assert_eq!(int(&m["f_counts"]["n"]), i as i64, "{m}");
        assert_eq!(int(&m["f_counts"]["twice"]), 2 * i as i64, "{m}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_the_descriptor_set_lacks_is_refused_naming_it() -> Result<()> {
    install_descriptor_set()?;
    let broker = TestBroker::get();
    let topic = unique_topic("protobuf-bad");
    let sql = format!(
        "{}CREATE TABLE seen (f_int32 INT) WITH ('connector' = 'collect');
INSERT INTO seen SELECT f_int32 FROM src;",
        table("src", &topic, &broker, "pulsar_connect.golden.Nope", "")
    );
    let Err(e) = RunningJob::start(&sql, None).await else {
        bail!("a job reading a message the descriptor set lacks started");
    };
    let text = format!("{e:#}");
    assert!(text.contains("src"), "the table is named: {text}");
    assert!(text.contains("message-name"), "the option is named: {text}");
    assert!(
        text.contains(
            "message `pulsar_connect.golden.Nope` is not in descriptor set `golden.desc`"
        ),
        "{text}"
    );
    let sql = sql
        .replace("'golden.desc'", "'missing.desc'")
        .replace("golden.Nope", "golden.AllTypes");
    let Err(e) = RunningJob::start(&sql, None).await else {
        bail!("a job with a missing descriptor set started");
    };
    let text = format!("{e:#}");
    assert!(
        text.contains("descriptor-file") && text.contains("cannot read `missing.desc`"),
        "{text}"
    );
    Ok(())
}
