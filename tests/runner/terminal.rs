//! What a person sees on the terminal while `run` works (issue 34 §2): the release binary runs in a
//! pseudo-terminal (expectrl), its output goes through a terminal emulator (vt100), and the screen is
//! checked as it changes: every log line starts at the left margin, whole, and the progress line is
//! the last line, below them, never overwritten by one nor written into one. With stderr not a
//! terminal there are only plain log lines (no carriage return, no escape sequence).

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::Session;
use pulsar_connect_tests::binary;

/// A job of a few seconds that logs every checkpoint (debug) while the progress line is shown.
const JOB: &str = "SET 'execution.checkpointing.interval' = '200ms';
CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'rows-per-second' = '20', 'number-of-rows' = '80');
CREATE TABLE sink (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO sink SELECT id FROM gen;
";

fn job_file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("job.sql");
    std::fs::write(&p, JOB).unwrap();
    p
}

fn is_status(row: &str) -> bool {
    regex::Regex::new(r"^\s*\d+s  in \d+ ")
        .unwrap()
        .is_match(row)
}

fn is_log(row: &str) -> bool {
    row.contains("checkpoint complete") || row.contains("job started")
}

#[test]
fn log_lines_go_above_the_progress_line() {
    let dir = tempfile::tempdir().unwrap();
    let job = job_file(dir.path());
    let mut cmd = Command::new(binary());
    cmd.arg("run")
        .arg(&job)
        .env("PULSAR_CONNECT_LOG", "pulsar_connect=debug")
        .env("TERM", "xterm");
    let mut p = Session::spawn(cmd).unwrap();
    let (rows, cols) = (40u16, 160u16);
    p.get_process_mut().set_window_size(cols, rows).unwrap();
    let mut screen = vt100::Parser::new(rows, cols, 0);
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    // Screens on which the progress line and log lines were both shown.
    let mut both = 0;
    let at_margin = regex::Regex::new(r"^\d{4}-\d\d-\d\dT").unwrap();
    loop {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the job did not end"
        );
        match p.try_read(&mut buf) {
            Ok(0) => break,
            Ok(n) => screen.process(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if !p.get_process().is_alive().unwrap_or(false) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            // EIO: the pty closed with the process.
            Err(_) => break,
        }
        let s = screen.screen();
        let lines: Vec<String> = s.rows(0, cols).collect();
        let (cursor_row, _) = s.cursor_position();
        for (i, row) in lines.iter().enumerate() {
            let row = row.trim_end();
            if is_log(row) {
                assert!(
                    at_margin.is_match(row),
                    "a log line that does not start at the margin (written into the progress line?): {row:?}\n{}",
                    s.contents()
                );
            }
            if is_status(row) {
                assert_eq!(
                    i,
                    cursor_row as usize,
                    "the progress line is not the line being drawn:\n{}",
                    s.contents()
                );
                assert!(
                    lines[i + 1..].iter().all(|r| r.trim().is_empty()),
                    "something below the progress line:\n{}",
                    s.contents()
                );
                if lines[..i].iter().any(|r| is_log(r)) {
                    both += 1;
                }
            }
        }
    }
    let s = screen.screen().contents();
    assert!(
        both > 0,
        "the progress line and log lines were never on screen together:\n{s}"
    );
    assert!(s.contains("job finished"), "{s}");
    // At the end the progress line is gone.
    assert!(!s.lines().any(is_status), "{s}");
}

#[test]
fn without_a_terminal_only_plain_log_lines() {
    let dir = tempfile::tempdir().unwrap();
    let job = job_file(dir.path());
    let out = Command::new(binary())
        .arg("run")
        .arg(&job)
        .env("PULSAR_CONNECT_LOG", "pulsar_connect=debug")
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut stderr = String::new();
    out.stderr.as_slice().read_to_string(&mut stderr).unwrap();
    assert!(
        stderr.contains("checkpoint complete") && stderr.contains("job finished"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );
    assert!(!stderr.lines().any(is_status), "{stderr}");
}
