//! The built binary end to end: datagen → print, validate output and exit codes, --help, metrics, SIGTERM.
//! Needs the release binary: `cargo build --release -p pulsar-connect` (or PULSAR_CONNECT_BIN).

use crate::common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_job(dir: &std::path::Path, name: &str, sql: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, sql).unwrap();
    p
}

#[test]
fn datagen_to_print_runs_to_completion() {
    let tmp = tempfile::tempdir().unwrap();
    let job = write_job(
        tmp.path(),
        "job.sql",
        "SET 'execution.checkpointing.interval' = '100ms';
CREATE TABLE src (id BIGINT NOT NULL, name STRING, score DOUBLE, tags ARRAY<STRING>, at TIMESTAMP_LTZ(3), half AS id / 2) WITH (
  'connector' = 'datagen', 'rows-per-second' = '2000', 'number-of-rows' = '500',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000000',
  'fields.name.length' = '5', 'fields.score.min' = '0', 'fields.score.max' = '1');
CREATE TABLE out (id BIGINT, name STRING, half BIGINT, tags ARRAY<STRING>) WITH ('connector' = 'print', 'print-identifier' = 'e2e');
INSERT INTO out SELECT id, name, half, tags FROM src WHERE id > 100;",
    );
    let out = Command::new(common::binary())
        .arg("run")
        .arg(&job)
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 400);
    assert!(
        lines[0].starts_with("e2e> +I[101, ") && lines[0].ends_with(']'),
        "{}",
        lines[0]
    );
    assert!(lines[399].starts_with("e2e> +I[500, "), "{}", lines[399]);
    assert!(
        lines[0].contains(", 50, ["),
        "half of 101 and the array: {}",
        lines[0]
    );
    // A final checkpoint was written under the job id.
    let state: Vec<_> = std::fs::read_dir(tmp.path().join("state"))
        .unwrap()
        .collect();
    assert_eq!(state.len(), 1);
    // Running the finished bounded job again restores at its end: nothing is emitted twice.
    let again = Command::new(common::binary())
        .arg("run")
        .arg(&job)
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout).lines().count(), 0);
    // --fresh runs it from the start.
    let fresh = Command::new(common::binary())
        .arg("run")
        .arg(&job)
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .arg("--fresh")
        .output()
        .unwrap();
    assert!(fresh.status.success());
    assert_eq!(String::from_utf8_lossy(&fresh.stdout).lines().count(), 400);
}

#[test]
fn validate_prints_the_plan_and_exit_codes() {
    let root = common::workspace();
    let ok = Command::new(common::binary())
        .arg("validate")
        .arg(root.join("examples/quickstart.sql"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(
        text.contains("job id: quickstart")
            && text.contains("INSERT #0")
            && text.contains("OK: 2 table(s), 1 INSERT(s)"),
        "{text}"
    );
    pulsar_connect_tests::secret("topic token");
    let seed = Command::new(common::binary())
        .arg("--plugin-dir")
        .arg(root.join("plugins"))
        .arg("validate")
        .arg(root.join("examples/vendor-seed.sql"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&seed.stdout);
    let err = String::from_utf8_lossy(&seed.stderr);
    assert!(seed.status.success(), "{out}{err}");
    assert!(
        out.contains("table pulsar_table (connector 'pulsar'")
            && out.contains("auth-params = '******'"),
        "{out}"
    );
    assert!(
        !out.contains("topic token") && !err.contains("topic token"),
        "secrets must not be printed: {out}{err}"
    );
    // A format that is not in the plugin directory is named with what is available.
    let bad_job = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        bad_job.path(),
        std::fs::read_to_string(root.join("examples/vendor-seed.sql"))
            .unwrap()
            .replace("'format' = 'json'", "'format' = 'jsn'"),
    )
    .unwrap();
    let bad = Command::new(common::binary())
        .arg("--plugin-dir")
        .arg(root.join("plugins"))
        .arg("validate")
        .arg(bad_job.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("table 'pulsar_table'")
            && err.contains("option 'format'")
            && err.contains("'jsn' not found"),
        "{err}"
    );
    assert!(
        !err.contains("topic token"),
        "secrets must not be printed: {err}"
    );
    let missing = Command::new(common::binary())
        .arg("validate")
        .arg("/nonexistent.sql")
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    for sub in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["validate", "--help"],
        vec!["docs", "options", "--help"],
    ] {
        let h = Command::new(common::binary()).args(&sub).output().unwrap();
        assert!(h.status.success() && !h.stdout.is_empty(), "{sub:?}");
    }
    let usage = Command::new(common::binary()).arg("run").output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
}

fn http_get(addr: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn metrics_endpoint_and_graceful_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let job = write_job(
        tmp.path(),
        "job.sql",
        "SET 'pipeline.name' = 'metrics';
SET 'execution.checkpointing.interval' = '100ms';
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '5000', 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100000000');
CREATE TABLE out (id BIGINT) WITH ('connector' = 'print');
INSERT INTO out SELECT id FROM src;",
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let run = |fresh: bool| {
        let mut c = Command::new(common::binary());
        c.arg("run")
            .arg(&job)
            .arg("--state-dir")
            .arg(tmp.path().join("state"))
            .arg("--metrics-addr")
            .arg(&addr)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if fresh {
            c.arg("--fresh");
        }
        c.spawn().unwrap()
    };
    let child = run(true);
    let start = Instant::now();
    let mut body = String::new();
    while start.elapsed() < Duration::from_secs(20) {
        // At least two checkpoints (not exactly two: at 100 ms a poll may miss that moment, and
        // `print` blocks once the unread stdout pipe is full, so the count stops a little later).
        let checkpoints = |b: &str| {
            b.lines()
                .find_map(|l| l.strip_prefix("pulsar_connect_checkpoints_total{job=\"metrics\"} "))
                .and_then(|n| n.trim().parse::<u64>().ok())
        };
        if let Some(b) = http_get(&addr)
            && checkpoints(&b).is_some_and(|n| n >= 2)
        {
            body = b;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        body.contains("pulsar_connect_rows_in_total{job=\"metrics\",table=\"src\"}")
            && body.contains("pulsar_connect_rows_out_total{job=\"metrics\",table=\"out\"}"),
        "{body}"
    );
    assert!(
        body.contains("pulsar_connect_checkpoint_duration_seconds_bucket"),
        "{body}"
    );
    assert!(
        Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "SIGTERM must exit 0: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            l.trim_start_matches("+I[")
                .trim_end_matches(']')
                .parse()
                .unwrap()
        })
        .collect();
    assert!(!ids.is_empty());
    assert!(
        ids.iter().enumerate().all(|(i, v)| *v == i as u64 + 1),
        "rows 1..n in order"
    );
    // After a graceful stop the final checkpoint covers every printed row: the restart continues exactly after.
    let child = run(false);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success()
    );
    let out2 = child.wait_with_output().unwrap();
    assert!(out2.status.success());
    let first: u64 = String::from_utf8_lossy(&out2.stdout)
        .lines()
        .next()
        .expect("rows after restart")
        .trim_start_matches("+I[")
        .trim_end_matches(']')
        .parse()
        .unwrap();
    assert_eq!(first, *ids.last().unwrap() + 1);
}
