//! A `[[run]]`: messages written by the official Python client and/or a bounded writing job, then the
//! reading job run by the binary against the real broker; its `print` lines are the peer's asserted rows.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use pulsar_connect_tests::TestBroker;
use serde_json::json;

use crate::binary::{self, Running};
use crate::cases::{Message, Placeholders, RunCase};
use crate::validate::indent;

/// How long the reading job may take to print the expected rows.
const ROWS_WITHIN: Duration = Duration::from_secs(60);
/// After the expected rows: how long to wait for rows that should not come.
const QUIET: Duration = Duration::from_secs(2);

pub fn check(case: &RunCase, broker: &TestBroker, dir: &Path) -> Result<Result<(), String>> {
    let mut p = Placeholders::new(&broker.service_url, &broker.admin_url, &case.origin.name);
    let name = &case.origin.name;
    p.message_ids = produce(&p, &case.produce_schema, &case.produce)?;
    let write = case.write.as_deref().map(|w| p.apply(w)).transpose()?;
    let read = p.apply(&case.read)?;
    let rows: Vec<String> = case
        .rows
        .iter()
        .map(|r| p.apply(r))
        .collect::<Result<_>>()?;
    let read_job = dir.join(format!("{name}.read.sql"));
    std::fs::write(&read_job, &read)?;
    let write_job = dir.join(format!("{name}.write.sql"));
    if let Some(w) = &write {
        std::fs::write(&write_job, w)?;
    }
    // validate and run agree: every job run here passes validate first.
    for job in write.iter().map(|_| &write_job).chain([&read_job]) {
        let v = binary::validate(job)?;
        if v.code != Some(0) {
            return Ok(Err(format!(
                "validate refused {} ({}):\n{}",
                job.file_name().unwrap_or_default().to_string_lossy(),
                v.describe(),
                indent(&v.stderr)
            )));
        }
    }
    if write.is_some() {
        let w = binary::run_to_end(
            &write_job,
            &dir.join(format!("{name}.write.state")),
            Duration::from_secs(90),
        )?;
        if w.code != Some(0) {
            return Ok(Err(format!(
                "the writing job ended with {} (expected exit 0 once its VALUES were written):\n{}",
                w.describe(),
                indent(&w.stderr)
            )));
        }
    }
    let mut job = Running::start(
        &read_job,
        &dir.join(format!("{name}.read.state")),
        &dir.join(format!("{name}.read.log")),
    )?;
    if !case.produce_after_start.is_empty() {
        if let Err(e) = wait_for_consumer(broker, &p.topic, &mut job) {
            let (_, _, log) = job.stop()?;
            return Ok(Err(format!("{e:#}:\n{}", indent(&log))));
        }
        let mut after = p.clone();
        after.message_ids.clear();
        produce(&after, &case.produce_schema, &case.produce_after_start)?;
    }
    job.wait_lines(rows.len(), ROWS_WITHIN)?;
    // Rows beyond the expected ones would come soon after them.
    job.wait_lines(rows.len() + 1, QUIET)?;
    let ended_early = job.exited()?;
    let (status, lines, log) = job.stop()?;
    let mut got = lines;
    let mut want = rows;
    if !case.ordered {
        got.sort();
        want.sort();
    }
    if got != want {
        return Ok(Err(format!(
            "the job printed\n{}\ninstead of\n{}{}\n  its log:\n{}",
            list(&got),
            list(&want),
            if case.ordered {
                " (in this order)"
            } else {
                " (in any order)"
            },
            indent(&log)
        )));
    }
    if ended_early.is_some() || !status.is_some_and(|s| s.success()) {
        return Ok(Err(format!(
            "the rows are right, but the job {} (expected to run until SIGTERM and then exit 0):\n{}",
            match (ended_early, status) {
                (Some(s), _) => format!("ended by itself ({s})"),
                (None, Some(s)) => format!("exited with {s} after SIGTERM"),
                (None, None) => "did not stop within 30 s of SIGTERM".into(),
            },
            indent(&log)
        )));
    }
    Ok(Ok(()))
}

fn list(rows: &[String]) -> String {
    if rows.is_empty() {
        return "    (nothing)".into();
    }
    rows.iter()
        .map(|r| format!("    {r:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `messages` with the official Python client; returns their ids (`ledger:entry:partition`).
fn produce(p: &Placeholders, schema: &str, messages: &[Message]) -> Result<Vec<String>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let mut list = Vec::new();
    for m in messages {
        let mut v = json!({ "topic": p.apply(m.topic.as_deref().unwrap_or("{topic}"))? });
        let o = v.as_object_mut().expect("an object");
        if let Some(x) = &m.value {
            o.insert("value".into(), json!(x));
        }
        if let Some(x) = &m.value_hex {
            o.insert("value_hex".into(), json!(x));
        }
        if let Some(x) = &m.key {
            o.insert("key".into(), json!(x));
        }
        if !m.properties.is_empty() {
            o.insert("properties".into(), json!(m.properties));
        }
        if let Some(x) = m.event_time {
            o.insert("event_time".into(), json!(x));
        }
        if let Some(x) = m.sequence_id {
            o.insert("sequence_id".into(), json!(x));
        }
        list.push(v);
    }
    let spec = json!({ "schema": schema, "messages": list }).to_string();
    let script = pulsar_connect_tests::guests::repo_root().join("tests/conformance/produce.py");
    let out = Command::new(pulsar_connect_tests::python())
        .arg(&script)
        .arg(&p.service_url)
        .arg(&spec)
        .output()
        .context("running tests/conformance/produce.py")?;
    if !out.status.success() {
        bail!(
            "produce.py failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut ids = vec![String::new(); messages.len()];
    for line in String::from_utf8(out.stdout)?.lines() {
        if let Some(rec) = line.strip_prefix("@@") {
            let v: serde_json::Value = serde_json::from_str(rec)?;
            let i = v["index"].as_u64().context("index")? as usize;
            ids[i] = v["message_id"].as_str().context("message_id")?.to_owned();
        }
    }
    if ids.iter().any(String::is_empty) {
        bail!("produce.py did not report every message id: {ids:?}");
    }
    Ok(ids)
}

/// Waits until a consumer (the reading job's) is connected to `topic`, per the broker's topic stats.
fn wait_for_consumer(broker: &TestBroker, topic: &str, job: &mut Running) -> Result<()> {
    let path = topic
        .strip_prefix("persistent://")
        .with_context(|| format!("{topic} is not persistent://"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = job.exited()? {
            bail!("the reading job ended ({s}) before it connected");
        }
        if let Ok(body) = broker.admin("GET", &format!("/admin/v2/persistent/{path}/stats"), None)
            && let Ok(stats) = serde_json::from_str::<serde_json::Value>(&body)
            && stats["subscriptions"].as_object().is_some_and(|subs| {
                subs.values()
                    .any(|s| s["consumers"].as_array().is_some_and(|c| !c.is_empty()))
            })
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no consumer connected to {topic} within 60 s of starting the reading job");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
