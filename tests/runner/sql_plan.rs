//! Planning: stateless queries run (in process, into a collecting sink); stateful ones, VIRTUAL metadata writes
//! and column/type mismatches are refused with the column named.

use crate::common;

use arrow::datatypes::Schema;
use common::errors;
use pulsar_connect::job::Job;
use pulsar_connect::planner::Stage;
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

pub(crate) async fn run_collect(sql: &str) -> Vec<(String, String)> {
    let (job, collected) = load(sql).await;
    run(job, collected).await
}

async fn load(sql: &str) -> (Job, common::Collected) {
    let (r, collected) = common::registry();
    let job = pulsar_connect::job::load_text(sql, &r)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (job, collected)
}

async fn run(job: Job, collected: common::Collected) -> Vec<(String, String)> {
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

/// The columns the query of a plan produces, as planned (the schema of its last projection).
fn query_schema(job: &Job, index: usize) -> Schema {
    job.plans[index]
        .transform
        .stages
        .iter()
        .rev()
        .find_map(|s| match s {
            Stage::Project(_, schema) => Some(schema.as_ref().clone()),
            _ => None,
        })
        .expect("a projection")
}

fn rows(collected: Vec<(String, String)>) -> Vec<String> {
    collected.into_iter().map(|(_, r)| r).collect()
}

#[tokio::test]
async fn casts_take_flink_types_in_every_position() {
    let sql = format!(
        "{SRC}CREATE TABLE out (
  m MAP<STRING, STRING>, s STRING, n INT, d DECIMAL(10, 2), ts TIMESTAMP(3), ltz TIMESTAMP_LTZ(3),
  arr ARRAY<BIGINT>, nested ARRAY<ROW<a INT, b MAP<STRING, ARRAY<BIGINT>>>>, r ROW<a INT NOT NULL>,
  v VARCHAR(5), b BYTES, c CHAR(3), bin BINARY(2), vb VARBINARY(4), mi MAP<STRING, INT>
) WITH ('connector' = 'collect');
INSERT INTO out SELECT
  CAST(NULL AS MAP<STRING, STRING>),
  CAST(id AS STRING),
  TRY_CAST(CONCAT('x', CAST(id AS STRING)) AS INT),
  CAST(CAST(id AS STRING) AS DECIMAL(10, 2)),
  CAST(CONCAT('2020-03-0', CAST(id AS STRING), ' 13:12:11.123') AS TIMESTAMP(3)),
  CAST(NULL AS TIMESTAMP(3) WITH LOCAL TIME ZONE),
  CAST(NULL AS BIGINT ARRAY),
  CAST(NULL AS ARRAY<ROW<a INT, b MAP<STRING, ARRAY<BIGINT>>>>),
  CAST(NULL AS ROW(a INT NOT NULL)),
  CAST(id * 100 AS VARCHAR(5)),
  CAST(CAST(id AS STRING) AS BYTES),
  CAST(NULL AS CHAR(3)),
  CAST(NULL AS BINARY(2)),
  CAST(NULL AS VARBINARY(4)),
  CAST(MAP['k', CAST(id AS STRING)] AS MAP<STRING, INT>)
FROM src WHERE id <= 2;"
    );
    let (job, collected) = load(&sql).await;
    // The query's columns have exactly the sink's types: a CAST's type means what it means in DDL.
    let produced = query_schema(&job, 0);
    let sink = job.plans[0].sink.sink_schema();
    for (q, s) in produced.fields().iter().zip(sink.fields()) {
        assert_eq!(q.data_type(), s.data_type(), "column {}", s.name());
    }
    assert_eq!(
        rows(run(job, collected).await),
        vec![
            "+I[null, 1, null, 1.00, 2020-03-01T13:12:11.123, null, null, null, null, 100, [49], null, null, null, {k=1}]",
            "+I[null, 2, null, 2.00, 2020-03-02T13:12:11.123, null, null, null, null, 200, [50], null, null, null, {k=2}]",
        ]
    );
}

#[tokio::test]
async fn casts_in_values_and_computed_columns() {
    let sql = "CREATE TABLE src (id BIGINT, m AS CAST(NULL AS MAP<STRING, BIGINT>), s AS CAST(id AS STRING)) WITH (
  'connector' = 'datagen', 'number-of-rows' = '2', 'fields.id.kind' = 'sequence', 'fields.id.start' = '7', 'fields.id.end' = '8');
CREATE TABLE out (m MAP<STRING, BIGINT>, s STRING, l TIMESTAMP_LTZ(3)) WITH ('connector' = 'collect');
CREATE TABLE out2 (m MAP<STRING, STRING>, s STRING, r ROW<a INT, b STRING>) WITH ('connector' = 'collect');
INSERT INTO out SELECT m, s, CAST(NULL AS TIMESTAMP_LTZ(3)) FROM src;
INSERT INTO out2 VALUES (CAST(NULL AS MAP<STRING, STRING>), CAST(42 AS STRING), CAST(NULL AS ROW<a INT, b STRING>));";
    let mut got = run_collect(sql).await;
    got.sort();
    assert_eq!(
        got,
        vec![
            ("out".to_string(), "+I[null, 7, null]".to_string()),
            ("out".to_string(), "+I[null, 8, null]".to_string()),
            ("out2".to_string(), "+I[null, 42, null]".to_string()),
        ]
    );
}

#[tokio::test]
async fn cast_results_are_type_checked_against_the_sink() {
    let e = errors(&format!(
        "{SRC}CREATE TABLE out (m MAP<STRING, INT>) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT CAST(NULL AS MAP<STRING, ARRAY<STRING>>) FROM src;"
    ))
    .await;
    assert!(
        e[0].contains("incompatible types for sink column 'm'")
            && e[0].contains("MAP<STRING, INT>"),
        "{}",
        e[0]
    );
    let e = errors(&format!(
        "{SRC}CREATE TABLE out (m MAP<STRING, INT>) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT CAST(NULL AS MAP<STRING>) FROM src;"
    ))
    .await;
    assert!(
        e[0].starts_with("line 10, column 47") && e[0].contains("','"),
        "{}",
        e[0]
    );
}

#[tokio::test]
async fn unaliased_expressions_are_named_as_flink_names_them() {
    let sql = format!(
        "{SRC}CREATE TABLE out (a BIGINT, b BIGINT) WITH ('connector' = 'collect');
CREATE TABLE out5 (a BIGINT, b BIGINT, c STRING, d STRING, e BIGINT) WITH ('connector' = 'collect');
CREATE TABLE wide (a BIGINT, b STRING, c DECIMAL(10, 2), d BIGINT, e BIGINT, f BIGINT) WITH ('connector' = 'collect');
EXECUTE STATEMENT SET BEGIN
INSERT INTO out SELECT id + 1, id + 1 FROM src WHERE id <= 2;
INSERT INTO out5 SELECT id AS x, id + 1, `name`, UPPER(`name`), id FROM src WHERE id = 1;
INSERT INTO out SELECT id, id FROM src WHERE id = 3;
INSERT INTO wide SELECT *, id + 1, id FROM src WHERE id = 4;
INSERT INTO out SELECT EXPR$0 + 1, EXPR$0 FROM (SELECT id * 10 FROM src) WHERE EXPR$0 = 50;
INSERT INTO out SELECT src.id + 0, src.id FROM src WHERE id = 6;
END;"
    );
    let (job, collected) = load(&sql).await;
    let names = |i: usize| -> Vec<String> {
        query_schema(&job, i)
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    assert_eq!(names(0), ["EXPR$0", "EXPR$1"]);
    assert_eq!(names(1), ["x", "EXPR$1", "name", "EXPR$3", "id"]);
    assert_eq!(names(2), ["id", "id0"]);
    assert_eq!(
        names(3),
        ["id", "name", "price", "doubled", "EXPR$4", "id0"]
    );
    assert_eq!(names(4), ["EXPR$0", "EXPR$00"]);
    assert_eq!(names(5), ["EXPR$0", "id"]);
    // `validate` shows the same names.
    for (i, shown) in [
        (0, "AS EXPR$0"),
        (0, "AS EXPR$1"),
        (2, "AS id0"),
        (3, "AS EXPR$4"),
    ] {
        assert!(
            job.plans[i].explain.contains(shown),
            "{shown}: {}",
            job.plans[i].explain
        );
    }
    let mut got = run(job, collected).await;
    got.sort();
    let got: Vec<String> = got.into_iter().map(|(t, r)| format!("{t} {r}")).collect();
    assert!(got.contains(&"out +I[2, 2]".to_string()), "{got:?}");
    assert!(got.contains(&"out +I[3, 3]".to_string()), "{got:?}");
    assert!(
        got.iter()
            .any(|r| r.starts_with("out5 +I[1, 2, ") && r.ends_with(", 1]")),
        "{got:?}"
    );
    assert!(got.contains(&"out +I[6, 6]".to_string()), "{got:?}");
    assert!(got.contains(&"out +I[51, 50]".to_string()), "{got:?}");
    assert!(
        got.iter()
            .any(|r| r.starts_with("wide +I[4, ") && r.ends_with(", 8, 5, 4]")),
        "{got:?}"
    );
}
