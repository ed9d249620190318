//! `validate` runs every check `run` runs (issue 14): the format plugins' own factories with the table's
//! row type and options, every sink rule, topic-pattern completion, Flink's value spellings, and every
//! error of a table at once. Everything here goes through `job::load_text`, which both commands use.

use crate::common;

use std::sync::Arc;

use common::errors;
use pulsar_connect::connector_api::Registry;
use pulsar_connect::plugins::catalog::PluginCatalog;

const URL: &str = "'service-url' = 'pulsar://127.0.0.1:1', 'admin-url' = 'http://127.0.0.1:1'";

/// A pulsar table `t` read into blackhole, with `columns` and `opts`.
fn read_job(columns: &str, opts: &str) -> String {
    format!(
        "CREATE TABLE t ({columns}) WITH ('connector' = 'pulsar', {URL}, 'topic' = 'in', {opts});\n\
         CREATE TABLE out_t ({columns}) WITH ('connector' = 'blackhole');\n\
         INSERT INTO out_t SELECT * FROM t;"
    )
}

/// A pulsar table `t (a INT, ts TIMESTAMP(3))` written from datagen.
fn write_job(opts: &str) -> String {
    format!(
        "CREATE TABLE g (a INT, ts TIMESTAMP(3)) WITH ('connector' = 'datagen', 'number-of-rows' = '1');\n\
         CREATE TABLE t (a INT, ts TIMESTAMP(3)) WITH ('connector' = 'pulsar', {URL}, 'format' = 'json', {opts});\n\
         INSERT INTO t SELECT a, ts FROM g;"
    )
}

async fn accepted(sql: &str) {
    let (r, _) = common::registry();
    if let Err(e) = pulsar_connect::job::load_text(sql, &r).await {
        panic!("refused:\n{e}\n--- job:\n{sql}");
    }
}

/// One error, containing every one of `parts`.
async fn refused(sql: &str, parts: &[&str]) -> String {
    let e = errors(sql).await;
    let all = e.join("\n");
    for p in parts {
        assert!(all.contains(p), "'{p}' not in:\n{all}\n--- job:\n{sql}");
    }
    all
}

#[tokio::test]
async fn format_factories_run_at_validation() {
    // Each of these is accepted by the manifest (names and types) and refused by the format's factory,
    // as Flink refuses it at planning.
    refused(
        &read_job("a STRING, b STRING", "'format' = 'raw'"),
        &["table 't'", "'format'", "raw"],
    )
    .await;
    refused(
        &read_job("a STRING", "'format' = 'raw', 'raw.charset' = 'klingon'"),
        &["table 't'", "charset", "klingon"],
    )
    .await;
    refused(
        &read_job("a TIMESTAMP(3)", "'format' = 'raw'"),
        &["table 't'", "TIMESTAMP"],
    )
    .await;
    refused(
        &read_job(
            "a INT",
            "'format' = 'json', 'json.fail-on-missing-field' = 'true', 'json.ignore-parse-errors' = 'true'",
        ),
        &["table 't'", "fail-on-missing-field", "ignore-parse-errors"],
    )
    .await;
    refused(
        &read_job(
            "a INT",
            "'format' = 'csv', 'csv.disable-quote-character' = 'true', 'csv.quote-character' = '''' ",
        ),
        &["table 't'", "quote-character"],
    )
    .await;
    refused(
        &read_job("a INT", "'format' = 'csv', 'csv.quote-character' = 'ab'"),
        &["table 't'", "quote-character", "single character"],
    )
    .await;
    // The key format's factory too, and on the writing side.
    refused(
        &write_job("'topic' = 'o', 'key.format' = 'raw', 'key.fields' = 'ts'"),
        &["table 't'", "key.format"],
    )
    .await;
    accepted(&read_job(
        "a STRING",
        "'format' = 'raw', 'raw.charset' = 'utf-16le'",
    ))
    .await;
}

#[tokio::test]
async fn a_tampered_plugin_fails_validation() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::workspace().join("plugins/json");
    let dst = dir.path().join("json");
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["plugin.toml", "json.wasm"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    let mut wasm = std::fs::read(dst.join("json.wasm")).unwrap();
    let last = wasm.len() - 1;
    wasm[last] ^= 0xff;
    std::fs::write(dst.join("json.wasm"), wasm).unwrap();
    let r = Registry::with_plugins(Arc::new(PluginCatalog::new(dir.path().to_path_buf())));
    let e = pulsar_connect::job::load_text(&read_job("a INT", "'format' = 'json'"), &r)
        .await
        .err()
        .expect("a tampered plugin must not validate")
        .to_string();
    assert!(
        e.contains("table 't'") && e.contains("json") && e.contains("sha256"),
        "{e}"
    );
}

#[tokio::test]
async fn every_sink_rule_is_a_validation_error() {
    refused(
        &write_job("'topic' = 'o1,o2'"),
        &["table 't'", "'topic'", "exactly one topic"],
    )
    .await;
    refused(
        &write_job("'topic-pattern' = 'o-.*'"),
        &["table 't'", "'topic-pattern'", "one topic"],
    )
    .await;
    refused(
        &write_job("'topic' = 'o', 'sink.message-router' = 'no-such-router'"),
        &["table 't'", "sink.message-router", "no-such-router"],
    )
    .await;
    accepted(&write_job("'topic' = 'o'")).await;
}

#[tokio::test]
async fn short_topic_patterns_are_completed() {
    let (r, _) = common::registry();
    let job = pulsar_connect::job::load_text(
        &read_job("a INT", "'format' = 'json'")
            .replace("'topic' = 'in'", "'topic-pattern' = 'myTopic-\\d+'"),
        &r,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    drop(job);
    refused(
        &read_job("a INT", "'format' = 'json'")
            .replace("'topic' = 'in'", "'topic-pattern' = 'orders-('"),
        &["table 't'", "'topic-pattern'", "not a regular expression"],
    )
    .await;
}

#[tokio::test]
async fn every_error_of_a_table_and_formats_suggested_by_kind() {
    let all = refused(
        &read_job("a INT", "'scan.startup.mod' = 'latest', 'format' = 'jsn'"),
        &[
            "'scan.startup.mod'",
            "did you mean 'scan.startup.mode'",
            "'jsn'",
            "did you mean 'json'",
        ],
    )
    .await;
    // Routers are not offered as formats.
    assert!(!all.contains("key-hash"), "{all}");
    assert!(all.contains("available format plugins:"), "{all}");
}

#[tokio::test]
async fn flink_value_spellings() {
    // Case-insensitive booleans and enums, connector and plugin options alike; `generic` accepted.
    accepted(&read_job(
        "a INT, b INT",
        "'format' = 'json', 'json.ignore-parse-errors' = 'TRUE', 'json.map-null-key.mode' = 'fail', \
         'key.format' = 'json', 'key.fields' = 'a', 'value.fields-include' = 'except_key', \
         'scan.startup.mode' = 'EARLIEST', 'generic' = 'true'",
    ))
    .await;
    // MessageId.earliest / MessageId.latest as their Java toString() texts.
    accepted(&read_job(
        "a INT",
        "'format' = 'json', 'scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = '-1:-1:-1'",
    ))
    .await;
    accepted(&read_job(
        "a INT",
        "'format' = 'json', 'scan.startup.mode' = 'specific-offsets', \
         'scan.startup.specific-offsets' = '9223372036854775807:9223372036854775807:-1'",
    ))
    .await;
    // A csv delimiter as a Java escape.
    accepted(&read_job(
        "a INT, b STRING",
        "'format' = 'csv', 'csv.field-delimiter' = '\\t'",
    ))
    .await;
    refused(
        &read_job("a INT", "'format' = 'json', 'generic' = 'maybe'"),
        &["'generic'", "boolean"],
    )
    .await;
}

#[tokio::test]
async fn subscription_types_and_what_they_combine_with() {
    // Every spelling of the option, values in any case.
    for opt in [
        "'subscription-type' = 'failover'",
        "'source.subscription-type' = 'Failover'",
        "'properties.pulsar.source.subscriptionType' = 'FAILOVER'",
        "'subscription-type' = 'Exclusive'",
        "'subscription-type' = 'shared'",
        "'subscription-type' = 'Key_Shared'",
    ] {
        accepted(&read_job("a STRING", &format!("'format' = 'raw', {opt}"))).await;
    }
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'subscription-type' = 'Sharde'",
        ),
        &[
            "table 't'",
            "'subscription-type'",
            "Exclusive, Failover, Shared, Key_Shared",
        ],
    )
    .await;
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'subscription-type' = 'Key_Shared', 'scan.startup.mode' = 'specific-offsets', 'scan.startup.specific-offsets' = '1:2:-1'",
        ),
        &["table 't'", "'scan.startup.mode'", "'specific-offsets' needs 'subscription-type' = 'Exclusive'"],
    )
    .await;
    // A seek would move every process's position.
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'subscription-type' = 'Failover', 'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '1'",
        ),
        &["table 't'", "'scan.startup.mode'", "'timestamp' needs 'subscription-type' = 'Exclusive'"],
    )
    .await;
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'subscription-type' = 'Failover', 'enable-key-hash-range' = 'true', 'scan.parallelism' = '2'",
        ),
        &["table 't'", "'enable-key-hash-range'", "'Failover'"],
    )
    .await;
    // An exactly-once sink fed by a Failover, Shared or Key_Shared source: the source's messages are
    // acknowledged one by one inside the sink's transactions (ADR 0014).
    let copy = |semantic: &str| {
        format!(
            "CREATE TABLE src (a STRING) WITH ('connector' = 'pulsar', {URL}, 'topic' = 'in', 'format' = 'raw', 'subscription-type' = 'Failover');\n\
             CREATE TABLE dst (a STRING) WITH ('connector' = 'pulsar', {URL}, 'topic' = 'out', 'format' = 'raw', 'sink.semantic' = '{semantic}');\n\
             INSERT INTO dst SELECT * FROM src;"
        )
    };
    accepted(&copy("exactly-once")).await;
    accepted(&copy("at-least-once")).await;
    for kind in ["Shared", "Key_Shared"] {
        accepted(&copy("exactly-once").replace("'Failover'", &format!("'{kind}'"))).await;
    }
}

/// `source.stop.*` (issue 51): the Apache connector's values and rules, each error naming the table and
/// the option.
#[tokio::test]
async fn stop_cursors_are_validated() {
    for opt in [
        "'source.stop.at-message-id' = 'never'",
        "'source.stop.at-message-id' = 'latest'",
        "'source.stop.at-message-id' = '42:1012:0'",
        "'source.stop.after-message-id' = '42:1012:-1'",
        "'source.stop.at-publish-time' = '1700000000000'",
        "'source.stop.at-message-id' = 'latest', 'subscription-type' = 'Failover'",
    ] {
        accepted(&read_job("a STRING", &format!("'format' = 'raw', {opt}"))).await;
    }
    for (opt, allowed) in [
        (
            "'source.stop.at-message-id' = 'earliest'",
            "'never', 'latest' or a message id",
        ),
        (
            "'source.stop.at-message-id' = '-1:-1:-1'",
            "earliest message",
        ),
        (
            "'source.stop.at-message-id' = '42:1012'",
            "three ':'-separated numbers",
        ),
        (
            "'source.stop.at-message-id' = '42:1012:0:3'",
            "three ':'-separated numbers",
        ),
        (
            "'source.stop.after-message-id' = 'latest'",
            "three ':'-separated numbers",
        ),
        ("'source.stop.after-message-id' = 'x:1:0'", "ledger id"),
    ] {
        let option = opt.split('\'').nth(1).unwrap();
        refused(
            &read_job("a STRING", &format!("'format' = 'raw', {opt}")),
            &["table 't'", &format!("'{option}'"), allowed],
        )
        .await;
    }
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'source.stop.at-publish-time' = 'yesterday'",
        ),
        &["table 't'", "'source.stop.at-publish-time'"],
    )
    .await;
    // One stop cursor per table.
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'source.stop.at-message-id' = 'latest', 'source.stop.at-publish-time' = '1'",
        ),
        &["table 't'", "'source.stop.at-message-id' and 'source.stop.at-publish-time' are mutually exclusive"],
    )
    .await;
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'source.stop.after-message-id' = '1:2:0', 'source.stop.at-message-id' = '1:2:0'",
        ),
        &["mutually exclusive"],
    )
    .await;
    // Every subscription type (ADR 0028); the partitions are those that exist when it starts.
    for kind in ["Exclusive", "Failover", "Shared", "Key_Shared"] {
        accepted(&read_job(
            "a STRING",
            &format!("'format' = 'raw', 'source.stop.at-message-id' = 'latest', 'subscription-type' = '{kind}'"),
        ))
        .await;
    }
    refused(
        &read_job(
            "a STRING",
            "'format' = 'raw', 'source.stop.at-publish-time' = '5', 'partition.discovery.interval-millis' = '1000'",
        ),
        &["table 't'", "'source.stop.at-publish-time'", "'partition.discovery.interval-millis'"],
    )
    .await;
}

/// OPTIONS hints (issue 51): merged over the table's options and checked with them as one set, on a
/// source and on an INSERT's target; refused when `table.dynamic-table-options.enabled` is false.
#[tokio::test]
async fn options_hints_are_checked_as_one_set_with_the_tables_options() {
    let job = |hint: &str, target_hint: &str| {
        format!(
            "CREATE TABLE t (a STRING) WITH ('connector' = 'pulsar', {URL}, 'topic' = 'in', 'format' = 'raw');\n\
             CREATE TABLE out_t (a STRING) WITH ('connector' = 'pulsar', {URL}, 'topic' = 'out', 'format' = 'raw');\n\
             INSERT INTO out_t {target_hint} SELECT * FROM t {hint};"
        )
    };
    accepted(&job(
        "/*+ OPTIONS('scan.startup.mode' = 'earliest', 'source.stop.at-message-id' = 'latest') */",
        "/*+ OPTIONS('sink.semantic' = 'exactly-once') */",
    ))
    .await;
    // Flink's query hints other than OPTIONS stay comments.
    accepted(&job("", "").replace("SELECT *", "SELECT /*+ BROADCAST(t) */ *")).await;
    refused(
        &job("/*+ OPTIONS('scan.startup.mode' = 'yesterday') */", ""),
        &[
            "table 't'",
            "'scan.startup.mode'",
            "earliest",
            "OPTIONS hint at line 3",
        ],
    )
    .await;
    refused(
        &job("", "/*+ OPTIONS('sink.semantic' = 'twice') */"),
        &[
            "table 'out_t'",
            "'sink.semantic'",
            "exactly-once",
            "OPTIONS hint at line 3",
        ],
    )
    .await;
    // As one set: the hint's stop cursor with the table's own partition discovery.
    refused(
        &job("/*+ OPTIONS('source.stop.at-message-id' = 'latest') */", "").replace(
            "'format' = 'raw');\nCREATE TABLE out_t",
            "'format' = 'raw', 'partition.discovery.interval-millis' = '1000');\nCREATE TABLE out_t",
        ),
        &[
            "table 't'",
            "'source.stop.at-message-id'",
            "'partition.discovery.interval-millis'",
        ],
    )
    .await;
    refused(
        &job("/*+ OPTIONS('scan.startup.mode' = 'earliest') */", "").replace(
            "CREATE TABLE t ",
            "SET 'table.dynamic-table-options.enabled' = 'false';\nCREATE TABLE t ",
        ),
        &[
            "OPTIONS hint on table 't'",
            "'table.dynamic-table-options.enabled' = 'false'",
        ],
    )
    .await;
    refused(
        &job("/*+ OPTIONS('scan.startup.mode') */", ""),
        &["line 3", "'key' = 'value'"],
    )
    .await;
}
