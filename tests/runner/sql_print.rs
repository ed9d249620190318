//! The built binary on jobs with Flink types inside expressions and unaliased expressions: `validate` shows the
//! columns with Flink's names (`EXPR$<i>`), `run` prints the rows. Needs the release binary:
//! `cargo build --release -p pulsar-connect` (or PULSAR_CONNECT_BIN).

use crate::common;

use std::process::Command;

const JOB: &str = "CREATE TABLE src (id BIGINT NOT NULL, name STRING) WITH (
  'connector' = 'datagen', 'number-of-rows' = '3',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '3', 'fields.name.length' = '4');
CREATE TABLE print_table (m MAP<STRING, STRING>, s STRING, a BIGINT, b BIGINT, r ROW<x INT, y ARRAY<BIGINT>>)
  WITH ('connector' = 'print', 'print-identifier' = 'casts');
CREATE TABLE values_table (id BIGINT, id0 BIGINT, ts TIMESTAMP(3), d DECIMAL(10, 2))
  WITH ('connector' = 'print', 'print-identifier' = 'values');
EXECUTE STATEMENT SET BEGIN
INSERT INTO print_table
  SELECT CAST(NULL AS MAP<STRING, STRING>), CAST(id AS STRING), id + 1, id + 1, CAST(NULL AS ROW<x INT, y ARRAY<BIGINT>>)
  FROM src;
INSERT INTO values_table SELECT id, id, CAST('2024-02-29 23:59:59.5' AS TIMESTAMP(3)), CAST(id AS DECIMAL(10, 2))
  FROM (VALUES (CAST(7 AS BIGINT))) AS v(id);
END;
";

/// Runs `pulsar-connect <command> job.sql <extra>` in a fresh directory; its stdout (it must succeed).
fn cli(command: &str, extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("job.sql");
    std::fs::write(&path, JOB).unwrap();
    let out = Command::new(common::binary())
        .arg(command)
        .arg(&path)
        .args(extra)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn validate_names_unaliased_expressions_as_flink_does() {
    let text = cli("validate", &[]);
    for shown in [
        "AS EXPR$0",
        "AS EXPR$1",
        "AS EXPR$2",
        "AS EXPR$3",
        "AS EXPR$4",
        "AS id0",
    ] {
        assert!(text.contains(shown), "{shown}:\n{text}");
    }
    assert!(text.contains("OK: 3 table(s), 2 INSERT(s)"), "{text}");
}

#[test]
fn casts_to_flink_types_run_and_print() {
    let stdout = cli("run", &["--state-dir", "state"]);
    let mut casts: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("casts> "))
        .collect();
    casts.sort();
    assert_eq!(
        casts,
        [
            "casts> +I[null, 1, 2, 2, null]",
            "casts> +I[null, 2, 3, 3, null]",
            "casts> +I[null, 3, 4, 4, null]"
        ]
    );
    let values: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("values> "))
        .collect();
    assert_eq!(values, ["values> +I[7, 7, 2024-02-29T23:59:59.500, 7.00]"]);
}
