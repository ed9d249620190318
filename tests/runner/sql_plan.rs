//! Planning: stateless queries run (in process, into a collecting sink); stateful ones, VIRTUAL metadata writes
//! and column/type mismatches are refused with the column named.

mod common;

use common::errors;
use pulsar_connect::runtime::{self, Metrics, RunOptions};

const SRC: &str = "CREATE TABLE src (id BIGINT NOT NULL, name STRING, price DECIMAL(10, 2), doubled AS id * 2) WITH (
  'connector' = 'datagen', 'number-of-rows' = '10', 'rows-per-second' = '100000',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100', 'fields.name.length' = '3');
CREATE TABLE pulsar (
  `physical_1` STRING,
  `eventTime` TIMESTAMP_LTZ(3) METADATA,
  `topic` STRING METADATA VIRTUAL
) WITH ('connector' = 'fake-pulsar', 'service-url' = 'pulsar://127.0.0.1:6650');
";

async fn run_collect(sql: &str) -> Vec<(String, String)> {
    let (r, collected) = common::registry();
    let job = pulsar_connect::job::load_text(sql, &r)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let settings = job.catalog.settings.clone();
    runtime::run(
        job.plans,
        &settings,
        RunOptions {
            job_id: job.job_id,
            ..Default::default()
        },
        Metrics::new().unwrap(),
        rx,
    )
    .await
    .unwrap();
    collected.lock().unwrap().clone()
}

#[tokio::test]
async fn projection_filter_cast_functions_and_computed_columns_run() {
    let sql = format!(
        "{SRC}CREATE TABLE out (id INT, label STRING, d BIGINT) WITH ('connector' = 'collect');
INSERT INTO out SELECT CAST(id AS INT), CONCAT(UPPER('n'), CAST(id AS STRING)), doubled FROM src WHERE id % 2 = 0 AND `name` IS NOT NULL;"
    );
    let rows: Vec<String> = run_collect(&sql)
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        rows,
        vec![
            "+I[2, N2, 4]",
            "+I[4, N4, 8]",
            "+I[6, N6, 12]",
            "+I[8, N8, 16]",
            "+I[10, N10, 20]"
        ]
    );
}

#[tokio::test]
async fn values_with_typed_literals_and_column_lists() {
    let sql = "CREATE TABLE out (s STRING, n INT, ts TIMESTAMP(3), m MAP<STRING, STRING>, b BOOLEAN, extra STRING) WITH ('connector' = 'collect');
INSERT INTO out (s, n, ts, m, b) VALUES
 ('data 1', 1, TIMESTAMP '2020-03-08 13:12:11.123', MAP['k11', 'v11', 'k12', 'v12'], TRUE),
 ('data 2', 2, TIMESTAMP '2020-03-09 13:12:11.123', MAP['k21', 'v21'], FALSE);";
    let rows: Vec<String> = run_collect(sql).await.into_iter().map(|(_, r)| r).collect();
    assert_eq!(
        rows,
        vec![
            "+I[data 1, 1, 2020-03-08T13:12:11.123, {k11=v11, k12=v12}, true, null]",
            "+I[data 2, 2, 2020-03-09T13:12:11.123, {k21=v21}, false, null]"
        ]
    );
}

#[tokio::test]
async fn statement_set_runs_every_insert() {
    let sql = format!(
        "{SRC}CREATE TABLE a (id BIGINT) WITH ('connector' = 'collect');
CREATE TABLE b (id BIGINT) WITH ('connector' = 'collect');
EXECUTE STATEMENT SET BEGIN
INSERT INTO a SELECT id FROM src WHERE id <= 3;
INSERT INTO b SELECT id FROM src WHERE id > 8;
END;"
    );
    let mut rows = run_collect(&sql).await;
    rows.sort();
    assert_eq!(
        rows,
        vec![
            ("a".into(), "+I[1]".into()),
            ("a".into(), "+I[2]".into()),
            ("a".into(), "+I[3]".into()),
            ("b".into(), "+I[10]".into()),
            ("b".into(), "+I[9]".into())
        ]
    );
}

#[tokio::test]
async fn stateful_queries_are_refused() {
    for (q, what) in [
        ("SELECT name, COUNT(*) FROM src GROUP BY name", "GROUP BY"),
        (
            "SELECT a.name, CAST(b.id AS STRING) FROM src a JOIN src b ON a.id = b.id",
            "JOIN",
        ),
        (
            "SELECT name, CAST(ROW_NUMBER() OVER (ORDER BY id) AS STRING) FROM src",
            "OVER",
        ),
        (
            "SELECT name AS a, name AS b FROM src ORDER BY id",
            "ORDER BY",
        ),
        ("SELECT DISTINCT name AS a, name AS b FROM src", "DISTINCT"),
    ] {
        let e = errors(&format!("{SRC}CREATE TABLE out (a STRING, b STRING) WITH ('connector' = 'blackhole');\nINSERT INTO out {q};")).await;
        assert!(
            e[0].contains(what) && e[0].contains("is not supported") && e[0].contains("stateless"),
            "{q}: {}",
            e[0]
        );
    }
}

#[tokio::test]
async fn virtual_metadata_write_is_refused() {
    let e = errors(&format!(
        "{SRC}INSERT INTO pulsar (physical_1, topic) SELECT name AS a, name AS b FROM src;"
    ))
    .await;
    assert!(
        e[0].contains("column 'topic'") && e[0].contains("VIRTUAL"),
        "{}",
        e[0]
    );
    // Without a column list the VIRTUAL column is skipped: two values for (physical_1, eventTime).
    let e = errors(&format!(
        "{SRC}INSERT INTO pulsar SELECT name AS a, name AS b, name AS c FROM src;"
    ))
    .await;
    assert!(
        e[0].contains("column count mismatch") && e[0].contains("physical_1, eventTime"),
        "{}",
        e[0]
    );
    // A read-only metadata key declared without VIRTUAL cannot be written.
    let e = errors(&format!("{SRC}CREATE TABLE p2 (x STRING, t STRING METADATA FROM 'topic') WITH ('connector' = 'fake-pulsar', 'service-url' = 'u');\nINSERT INTO p2 SELECT name AS a, name AS b FROM src;")).await;
    assert!(
        e[0].contains("metadata column 't' (key 'topic') is read-only") && e[0].contains("VIRTUAL"),
        "{}",
        e[0]
    );
    let e = errors("CREATE TABLE p3 (x STRING, t STRING METADATA FROM 'nope') WITH ('connector' = 'fake-pulsar', 'service-url' = 'u');").await;
    assert!(
        e[0].contains("no metadata key 'nope'") && e[0].contains("topic, eventTime"),
        "{}",
        e[0]
    );
}

#[tokio::test]
async fn type_mismatch_and_unknown_names_are_errors() {
    let e = errors(&format!("{SRC}CREATE TABLE out (a INT) WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT name FROM src;")).await;
    assert!(
        e[0].contains("incompatible types for sink column 'a'") && e[0].contains("Utf8"),
        "{}",
        e[0]
    );
    let e = errors(&format!("{SRC}CREATE TABLE out (a INT) WITH ('connector' = 'blackhole');\nINSERT INTO outt SELECT 1 FROM src;")).await;
    assert!(
        e[0].contains("table 'outt' is not declared") && e[0].contains("did you mean 'out'"),
        "{}",
        e[0]
    );
    let e = errors(&format!("{SRC}CREATE TABLE out (a INT) WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT nope FROM src;")).await;
    assert!(
        e[0].starts_with("line 10, column 17") && e[0].contains("nope"),
        "{}",
        e[0]
    );
    let e = errors("CREATE TABLE g (id INT) WITH ('connector' = 'datagen');\nCREATE TABLE p (id INT) WITH ('connector' = 'print');\nINSERT INTO g SELECT id FROM p;").await;
    assert!(
        e[0].contains("connector 'datagen' cannot be written to"),
        "{}",
        e[0]
    );
}
