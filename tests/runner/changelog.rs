//! Changelog rows (ADR 0016): row kinds survive filters and projections into a sink that takes them, and an
//! INSERT of updates or deletes into an append-only sink is refused at validation with Flink's reason.

use crate::common::{self, errors};
use crate::sql_plan::run_collect;

const CHANGES: &str =
    "CREATE TABLE changes (id INT, name STRING) WITH ('connector' = 'changes');\n";

#[tokio::test]
async fn row_kinds_follow_their_rows_through_filters_and_projections() {
    let sql = format!(
        "{CHANGES}CREATE TABLE out (label STRING, n INT) WITH ('connector' = 'collect');
INSERT INTO out SELECT UPPER(name), id * 10 FROM changes WHERE id <> 3;"
    );
    let rows: Vec<String> = run_collect(&sql)
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        rows,
        [
            "+I[A, 10]",
            "+I[B, 20]",
            "-U[A, 10]",
            "+U[A2, 10]",
            "-D[B, 20]"
        ]
    );
}

#[tokio::test]
async fn an_append_only_sink_refuses_updates_and_deletes_with_flinks_reason() {
    let sql = format!(
        "{CHANGES}CREATE TABLE sink (physical_1 STRING) WITH ('connector' = 'fake-pulsar', 'service-url' = 'pulsar://127.0.0.1:6650');
INSERT INTO sink SELECT name FROM changes;"
    );
    let e = errors(&sql).await.join("\n");
    assert!(
        e.contains("Table sink 'sink' doesn't support consuming update and delete changes which is produced by node TableSourceScan(table=[[changes]]"),
        "{e}"
    );
    assert!(
        e.contains("table 'changes' produces [INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE]"),
        "{e}"
    );
}

#[tokio::test]
async fn print_and_blackhole_take_every_row_kind() {
    for sink in ["print", "blackhole"] {
        let sql = format!(
            "{CHANGES}CREATE TABLE out (id INT, name STRING) WITH ('connector' = '{sink}');
INSERT INTO out SELECT * FROM changes;"
        );
        let (r, _) = common::registry();
        if let Err(e) = pulsar_connect::job::load_text(&sql, &r).await {
            panic!("{sink}: {e}");
        }
    }
}
