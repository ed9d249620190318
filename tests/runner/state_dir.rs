//! A state directory that fills up or turns read-only while the job runs (issue 48 §1): each checkpoint
//! that cannot be written fails with a warning naming the checkpoint and the directory, leaves no
//! half-written file behind, and the last complete checkpoint stays the one to restore; once the directory
//! takes writes again the checkpoints complete and the job runs to its end with every row written. A
//! directory read-only from the start fails the job at once, naming it.
//!
//! Mounts a small tmpfs (the suite runs as root, as `.ci/run` does).

use crate::common;

use std::process::{Command, Stdio};

use pulsar_connect_tests::tmpfs::Tmpfs;
use std::time::{Duration, Instant};

const N: u64 = 40_000;

fn checkpoint_files(state: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(state.join("full-disk"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("chk-"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_full_state_directory_fails_checkpoints_naming_it_and_the_job_goes_on_when_space_returns() {
    let filler = std::cell::RefCell::new(None);
    unwritable_while_running(
        "No space left",
        |disk| *filler.borrow_mut() = Some(disk.fill()),
        |_| std::fs::remove_file(filler.borrow_mut().take().unwrap()).unwrap(),
    );
}

#[test]
fn a_state_directory_turned_read_only_fails_checkpoints_naming_it_and_the_job_goes_on_after() {
    unwritable_while_running(
        "Read-only file system",
        |disk| disk.remount("ro").unwrap(),
        |disk| disk.remount("rw").unwrap(),
    );
}

#[test]
fn a_read_only_state_directory_fails_the_job_at_start_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&tmp.path().join("disk"), "256k").unwrap();
    let state = disk.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    disk.remount("ro").unwrap();
    let job = tmp.path().join("job.sql");
    std::fs::write(
        &job,
        "SET 'pipeline.name' = 'read-only';
CREATE TABLE src (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE rec (id BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO rec SELECT id FROM src;",
    )
    .unwrap();
    let out = Command::new(common::binary())
        .arg("run")
        .arg(&job)
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the job ran on a read-only state directory:\n{stderr}"
    );
    assert!(
        stderr.contains(&state.display().to_string()) && stderr.contains("Read-only file system"),
        "the error names the directory and why: {stderr}"
    );
}

/// Runs a bounded datagen job with its state directory on a small tmpfs, makes the tmpfs unwritable
/// (`break_it`) after the first checkpoint, checks the failed checkpoints (`why` in their warnings), then
/// `mend`s it and checks that the job ends cleanly with checkpoints completing again and every row out.
fn unwritable_while_running(
    why: &str,
    mut break_it: impl FnMut(&Tmpfs),
    mut mend: impl FnMut(&Tmpfs),
) {
    let tmp = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&tmp.path().join("disk"), "256k").unwrap();
    let state = disk.path().join("state");
    let job = tmp.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "SET 'pipeline.name' = 'full-disk';
SET 'execution.checkpointing.interval' = '200ms';
CREATE TABLE src (id BIGINT NOT NULL) WITH ('connector' = 'datagen', 'rows-per-second' = '4000',
  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '{N}');
CREATE TABLE rec (id BIGINT) WITH ('connector' = 'print');
INSERT INTO rec SELECT id FROM src;"
        ),
    )
    .unwrap();
    let (record, log) = (tmp.path().join("out.txt"), tmp.path().join("job.log"));
    let mut child = Command::new(common::binary())
        .arg("run")
        .arg(&job)
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::from(std::fs::File::create(&record).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while checkpoint_files(&state).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no checkpoint within 30 s:\n{}",
            log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    break_it(&disk);
    let full_since = Instant::now();
    while !log_text().contains(why) && full_since.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(600));
    let during = log_text();
    let failed: Vec<&str> = during
        .lines()
        .filter(|l| l.contains("checkpoint failed"))
        .collect();
    assert!(
        !failed.is_empty() && child.try_wait().unwrap().is_none(),
        "with the state directory unwritable ({why}), checkpoints fail and the job goes on:\n{during}"
    );
    let location = state.join("full-disk").display().to_string();
    for line in &failed {
        assert!(
            line.contains("writing checkpoint") && line.contains(&location),
            "the failure names the checkpoint and the directory: {line}"
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(state.join("full-disk"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no half-written checkpoint stays: {leftovers:?}"
    );
    let before = checkpoint_files(&state);
    mend(&disk);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline + Duration::from_secs(30) {
            child.kill().ok();
            child.wait().ok();
            panic!("the job did not end within 60 s:\n{}", log_text());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "the job failed ({status}):\n{}",
        log_text()
    );
    let after = checkpoint_files(&state);
    assert!(
        after.iter().max() > before.iter().max(),
        "checkpoints complete again once space returns: {before:?} → {after:?}\n{}",
        log_text()
    );
    let out = std::fs::read_to_string(&record).unwrap();
    let mut seen = vec![false; N as usize + 1];
    for id in out.lines().filter_map(|l| {
        l.strip_prefix("+I[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|r| r.parse::<u64>().ok())
    }) {
        seen[id as usize] = true;
    }
    let missing = (1..=N).filter(|&i| !seen[i as usize]).count();
    assert_eq!(missing, 0, "{missing} ids missing from the output");
}
