//! Changelog rows against the real broker (issue 18, ADR 0016): Debezium change events copied exactly once
//! through SIGKILLs (an update is two rows, `-U` and `+U`, acknowledged in the same transaction as its
//! message); Debezium events written by the official Python client into an `upsert-pulsar` table, read back
//! by the official client as the last value of each key, with tombstones for the deleted keys. (What `print`
//! shows for each changelog format, and the upsert source's rows, are `[[run]]` cases of the conformance
//! suite: `tests/conformance/cases/upsert-and-changelog.toml`.)

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use pulsar_connect_tests::jobs::RunningJob;
use pulsar_connect_tests::{TestBroker, run_python, unique_topic};

use crate::exactly_once::copy_job::{CopyJob, N, copy_with_kills_from};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_rounds_under_exactly_once_copy_every_changelog_row_once() -> Result<()> {
    let job = CopyJob::changelog("exactly-once").await?;
    let (counts, log) = copy_with_kills_from(&job, 8).await?;
    // Every input's create (`2 i`), and every update's `-U` written as a delete (`2 i + 1`): once each.
    let expected: Vec<u64> = (0..u64::from(N))
        .flat_map(|i| {
            let mut keys = vec![2 * i];
            if i % 2 == 1 {
                keys.push(2 * i + 1);
            }
            keys
        })
        .collect();
    let missing: Vec<u64> = expected
        .iter()
        .copied()
        .filter(|k| !counts.contains_key(k))
        .collect();
    let doubled: Vec<(u64, usize)> = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(k, c)| (*k, *c))
        .collect();
    let unexpected = counts.len() + missing.len() - expected.len();
    assert!(
        missing.is_empty() && doubled.is_empty() && unexpected == 0,
        "{} missing (first {:?}), {} doubled (first {:?}), {unexpected} unexpected; log:\n{log}",
        missing.len(),
        &missing[..missing.len().min(10)],
        doubled.len(),
        &doubled[..doubled.len().min(10)],
    );
    Ok(())
}

/// A Debezium create, update, delete, an update that moves a row to another key, and a create again, as
/// the official client writes them, through `INSERT INTO <upsert-pulsar table> SELECT ... FROM <debezium
/// table>`: the official client then reads the last value of each key, and a tombstone (an empty value)
/// for every deleted key, including the key a row moved away from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debezium_events_into_upsert_pulsar_leave_each_keys_last_value() -> Result<()> {
    let broker = TestBroker::get();
    let cdc = unique_topic("cdc-debezium");
    let up = unique_topic("cdc-upsert");
    let row = |id: u32, name: &str| format!(r#"{{"id":{id},"name":"{name}"}}"#);
    let event = |before: Option<String>, after: Option<String>, op: &str| {
        format!(
            r#"{{"before":{},"after":{},"source":{{"table":"products"}},"op":"{op}"}}"#,
            before.unwrap_or_else(|| "null".into()),
            after.unwrap_or_else(|| "null".into())
        )
    };
    let events = vec![
        event(None, Some(row(1, "a")), "c"),
        event(None, Some(row(2, "b")), "c"),
        event(Some(row(1, "a")), Some(row(1, "a2")), "u"),
        event(Some(row(2, "b")), None, "d"),
        event(None, Some(row(3, "c")), "c"),
        event(Some(row(3, "c")), Some(row(4, "c")), "u"),
    ];
    let messages: Vec<(String, String)> = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| (format!("k{i}"), e))
        .collect();
    run_python(&[
        "produce-keyed",
        &broker.service_url,
        &cdc,
        &serde_json::to_string(&messages)?,
    ])?;

    let sql = format!(
        "SET 'pipeline.name' = 'cdc-upsert-{up}';
CREATE TABLE cdc (id INT NOT NULL, name STRING) WITH (
  'connector' = 'pulsar', 'topic' = '{cdc}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'debezium-json', 'scan.startup.mode' = 'earliest');
CREATE TABLE up (id INT NOT NULL, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'connector' = 'upsert-pulsar', 'topic' = '{up}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'key.format' = 'json', 'value.format' = 'json');
INSERT INTO up SELECT id, name FROM cdc;",
        su = broker.service_url,
        au = broker.admin_url
    );
    let job = RunningJob::start(&sql, None).await?;
    // +I 1, +I 2, +U 1 (its -U dropped: same key), a tombstone for 2, +I 3, a tombstone for 3 (the row
    // moved to key 4), +U 4.
    const WRITTEN: usize = 7;
    let consumed = tokio::task::spawn_blocking({
        let su = broker.service_url.clone();
        let up = up.clone();
        move || run_python(&["consume", &su, &up, &WRITTEN.to_string(), "60"])
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    job.stop().await?;
    let consumed = consumed?;
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut written = Vec::new();
    for m in &consumed {
        // The key went as bytes (base64 text flagged as such); this client returns the text.
        let key = String::from_utf8(STANDARD.decode(m["key"].as_str().unwrap_or_default())?)?;
        let value = m["payload"].as_str().unwrap_or_default().to_owned();
        written.push(format!("{key} => {value}"));
        last.insert(key, value);
    }
    assert_eq!(
        written,
        [
            r#"{"id":1} => {"id":1,"name":"a"}"#,
            r#"{"id":2} => {"id":2,"name":"b"}"#,
            r#"{"id":1} => {"id":1,"name":"a2"}"#,
            r#"{"id":2} => "#,
            r#"{"id":3} => {"id":3,"name":"c"}"#,
            r#"{"id":3} => "#,
            r#"{"id":4} => {"id":4,"name":"c"}"#,
        ]
    );
    let expected: BTreeMap<String, String> = [
        (r#"{"id":1}"#, r#"{"id":1,"name":"a2"}"#),
        (r#"{"id":2}"#, ""),
        (r#"{"id":3}"#, ""),
        (r#"{"id":4}"#, r#"{"id":4,"name":"c"}"#),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(last, expected);
    Ok(())
}
