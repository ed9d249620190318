//! `cargo xtask bench --takeover-rounds N`: how long a SIGKILLed process's partitions stand still (issue 35,
//! ADR 0023). Three processes copy a 6-partition json topic Pulsar → Pulsar exactly-once through a
//! `Failover` subscription (1 s checkpoints; a 10 s checkpoint timeout and a 3 s commit wait, which a
//! 1-minute `transaction-timeout` needs; defaults otherwise) while a datagen job feeds it ~2 000 rows/s;
//! an observer job (pulsar → print, read-committed as any consumer) timestamps every output row as it
//! arrives. Once the copy runs steadily, one copier is SIGKILLed and the feed stops at the same instant.
//! Measured from the kill: the first output row of the killed process's partitions (written by a survivor),
//! and the moment the output holds every input row. Each round is run with `transaction-timeout` 1 min and
//! 10 min, interleaved: the take-over must not depend on it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use super::{Ctx, http, partitioned};

const PARTITIONS: u32 = 6;
pub const TIMEOUTS: [&str; 2] = ["1min", "10min"];

/// One round's figures, in seconds from the kill.
#[derive(Debug, Clone)]
pub struct Sample {
    pub timeout: String,
    pub first_row: Option<f64>,
    pub caught_up: Option<f64>,
    pub rows: u64,
    pub duplicates: u64,
}

/// Output rows as the observer saw them: `seq` → (first arrival, times seen), and arrivals by partition.
#[derive(Default)]
struct Seen {
    first: BTreeMap<u64, Instant>,
    duplicates: u64,
    by_partition: BTreeMap<String, Vec<Instant>>,
}

pub fn run(ctx: &Ctx, run_id: u64, rounds: usize, timeouts: &[&str]) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    for round in 0..rounds {
        for (k, timeout) in timeouts.iter().enumerate() {
            eprintln!(
                "take-over round {}/{rounds}, transaction-timeout {timeout}",
                round + 1
            );
            let s = one_round(ctx, &format!("{run_id}-{round}-{k}"), timeout)?;
            eprintln!(
                "  first row of the killed process's partitions {}, every row {} after the kill ({} rows, {} duplicates)",
                secs(s.first_row),
                secs(s.caught_up),
                s.rows,
                s.duplicates
            );
            out.push(s);
        }
    }
    Ok(out)
}

fn secs(v: Option<f64>) -> String {
    v.map_or("never".into(), |v| format!("{v:.1} s"))
}

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = Command::new("kill")
                    .args(["-TERM", &c.id().to_string()])
                    .status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        for c in &mut self.0 {
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn one_round(ctx: &Ctx, id: &str, timeout: &str) -> Result<Sample> {
    let input = format!("persistent://public/default/bench-takeover-in-{id}");
    let output = format!("persistent://public/default/bench-takeover-out-{id}");
    partitioned(&ctx.admin_url, &input, PARTITIONS)?;
    let (su, au) = (&ctx.service_url, &ctx.admin_url);
    let feed = ctx.job_file(
        &format!("takeover-feed-{id}"),
        &format!(
            "SET 'execution.checkpointing.interval' = '1s';
CREATE TABLE gen (seq BIGINT, payload STRING) WITH ('connector' = 'datagen', 'rows-per-second' = '2000',
  'fields.seq.kind' = 'sequence', 'fields.seq.start' = '1', 'fields.seq.end' = '100000000',
  'fields.payload.length' = '16');
CREATE TABLE input (seq BIGINT, payload STRING) WITH ('connector' = 'pulsar', 'topic' = '{input}',
  'service-url' = '{su}', 'admin-url' = '{au}', 'format' = 'json', 'sink.message-router' = 'round-robin');
INSERT INTO input SELECT * FROM gen;"
        ),
    )?;
    let copy = ctx.job_file(
        &format!("takeover-copy-{id}"),
        &format!(
            "SET 'pipeline.name' = 'bench-takeover-{id}';
SET 'execution.checkpointing.interval' = '1s';
SET 'execution.checkpointing.timeout' = '10s';
CREATE TABLE src (seq BIGINT, payload STRING, part STRING METADATA FROM 'topic' VIRTUAL) WITH (
  'connector' = 'pulsar', 'topic' = '{input}', 'service-url' = '{su}', 'admin-url' = '{au}',
  'format' = 'json', 'scan.startup.mode' = 'earliest', 'subscription-type' = 'Failover');
CREATE TABLE dst (seq BIGINT, part STRING) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{su}', 'admin-url' = '{au}', 'format' = 'json', 'sink.semantic' = 'exactly-once',
  'transaction-timeout' = '{timeout}', 'max-block-time-ms' = '3000');
INSERT INTO dst SELECT seq, part FROM src;"
        ),
    )?;
    let observe = ctx.job_file(
        &format!("takeover-observe-{id}"),
        &format!(
            "SET 'pipeline.name' = 'bench-takeover-observe-{id}';
CREATE TABLE out_rows (seq BIGINT, part STRING) WITH ('connector' = 'pulsar', 'topic' = '{output}',
  'service-url' = '{su}', 'admin-url' = '{au}', 'format' = 'json', 'scan.startup.mode' = 'earliest');
CREATE TABLE shown (seq BIGINT, part STRING) WITH ('connector' = 'print');
INSERT INTO shown SELECT * FROM out_rows;"
        ),
    )?;
    let log = |name: &str| ctx.dir.join(format!("takeover-{name}-{id}.log"));
    let spawn = |job: &std::path::Path, name: &str, stdout: Stdio| -> Result<Child> {
        Ok(ctx
            .job_command(job, &format!("takeover-{name}-{id}"))
            .stdout(stdout)
            .stderr(Stdio::from(fs::File::create(log(name))?))
            .spawn()?)
    };
    let mut procs = Procs(Vec::new());
    // The observer first (its subscription starts at the earliest output row), then the copiers.
    let mut observer = spawn(&observe, "observer", Stdio::piped())?;
    let stdout = observer.stdout.take().context("the observer's stdout")?;
    procs.0.push(observer);
    let seen = Arc::new(Mutex::new(Seen::default()));
    {
        let seen = seen.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let Some((seq, part)) = parse_row(&line) else {
                    continue;
                };
                let now = Instant::now();
                let mut guard = seen.lock().unwrap_or_else(|e| e.into_inner());
                let s = &mut *guard;
                match s.first.entry(seq) {
                    std::collections::btree_map::Entry::Occupied(_) => s.duplicates += 1,
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(now);
                    }
                }
                s.by_partition.entry(part).or_default().push(now);
            }
        });
    }
    for name in ["a", "b", "c"] {
        procs.0.push(spawn(&copy, name, Stdio::null())?);
    }
    procs.0.push(spawn(&feed, "feed", Stdio::null())?);
    // Steady: every copier reads and rows come through.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let reading = ["a", "b", "c"].iter().all(|n| {
            fs::read_to_string(log(n)).is_ok_and(|l| l.contains("this process now reads"))
        });
        let rows = seen.lock().unwrap_or_else(|e| e.into_inner()).first.len();
        if reading && rows > 4_000 {
            break;
        }
        // A copier that ended already (a broker refusal at start) makes the round meaningless.
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            if let Ok(Some(status)) = procs.0[i + 1].try_wait() {
                bail!(
                    "copier {name} ended before the kill ({status}); its log: {}",
                    log(name).display()
                );
            }
        }
        if Instant::now() > deadline {
            bail!(
                "the copy never ran steadily ({rows} output rows); logs in {}",
                ctx.dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    // Kill one copier and stop the feed at the same instant.
    let killed_splits = owned_splits(&fs::read_to_string(log("b"))?);
    procs.0[2].kill()?;
    let killed = Instant::now();
    let feeder = procs.0.len() - 1;
    let _ = Command::new("kill")
        .args(["-TERM", &procs.0[feeder].id().to_string()])
        .status();
    let _ = procs.0[2].wait();
    let fed_by = Instant::now() + Duration::from_secs(30);
    while matches!(procs.0[feeder].try_wait(), Ok(None)) && Instant::now() < fed_by {
        std::thread::sleep(Duration::from_millis(100));
    }
    let total = input_messages(&ctx.admin_url, &input)?;
    // Every row, at the latest well past the shorter timeout.
    let deadline = killed + Duration::from_secs(150);
    while Instant::now() < deadline
        && seen.lock().unwrap_or_else(|e| e.into_inner()).first.len() < total as usize
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = seen.lock().unwrap_or_else(|e| e.into_inner());
    let after = |t: &Instant| t.checked_duration_since(killed).map(|d| d.as_secs_f64());
    let first_row = killed_splits
        .iter()
        .filter_map(|p| s.by_partition.get(p))
        .flatten()
        .filter_map(after)
        .reduce(f64::min);
    let complete = (1..=total).all(|q| s.first.contains_key(&q));
    let caught_up = complete
        .then(|| s.first.values().filter_map(after).reduce(f64::max))
        .flatten();
    Ok(Sample {
        timeout: timeout.to_owned(),
        first_row,
        caught_up,
        rows: total,
        duplicates: s.duplicates,
    })
}

/// A `print` line `+I[<seq>, <part>]`.
fn parse_row(line: &str) -> Option<(u64, String)> {
    let inner = line.trim().strip_prefix("+I[")?.strip_suffix(']')?;
    let (seq, part) = inner.split_once(", ")?;
    Some((seq.parse().ok()?, part.to_owned()))
}

/// The splits the last `this process now reads N of the M splits` line of a log lists.
fn owned_splits(log: &str) -> BTreeSet<String> {
    log.lines()
        .rev()
        .find(|l| l.contains("this process now reads"))
        .and_then(|l| l.split("splits=[").nth(1))
        .and_then(|l| l.split(']').next())
        .map(|list| {
            list.split(',')
                .map(|s| s.trim().trim_matches('"').to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The messages published to a partitioned topic (the partitioned stats' `msgInCounter`).
fn input_messages(admin_url: &str, topic: &str) -> Result<u64> {
    let path = topic.trim_start_matches("persistent://");
    let r = http::request(
        "GET",
        &format!("{admin_url}/admin/v2/persistent/{path}/partitioned-stats"),
        None,
        None,
    )?;
    if !r.is_success() {
        bail!("stats of {topic}: {} {}", r.status, r.body);
    }
    let v: serde_json::Value = serde_json::from_str(&r.body)?;
    v["msgInCounter"]
        .as_u64()
        .with_context(|| format!("no msgInCounter in the stats of {topic}"))
}

/// Min and median of each figure per timeout, side by side.
pub fn render(samples: &[Sample]) -> String {
    let mut out = String::from(
        "| take-over (3 processes, 6 partitions, exactly-once, SIGKILL of one) | transaction-timeout | rounds | first row of its partitions, s (min / median) | every row in the output, s (min / median) | duplicates |\n|---|---|---|---|---|---|\n",
    );
    let mut timeouts: Vec<&str> = samples.iter().map(|s| s.timeout.as_str()).collect();
    timeouts.dedup();
    let timeouts: Vec<&str> = {
        let mut seen = BTreeSet::new();
        timeouts.into_iter().filter(|t| seen.insert(*t)).collect()
    };
    for t in timeouts {
        let of: Vec<&Sample> = samples.iter().filter(|s| s.timeout == t).collect();
        let stat = |f: fn(&Sample) -> Option<f64>| -> String {
            let mut v: Vec<f64> = of.iter().filter_map(|s| f(s)).collect();
            let never = of.len() - v.len();
            if v.is_empty() {
                return "never".into();
            }
            v.sort_by(f64::total_cmp);
            let text = format!("{:.1} / {:.1}", v[0], v[v.len() / 2]);
            if never > 0 {
                format!("{text} ({never} never)")
            } else {
                text
            }
        };
        out.push_str(&format!(
            "| ours | {t} | {} | {} | {} | {} |\n",
            of.len(),
            stat(|s| s.first_row),
            stat(|s| s.caught_up),
            of.iter().map(|s| s.duplicates).sum::<u64>()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_rows_and_owned_splits_parse() {
        assert_eq!(
            parse_row("+I[42, persistent://public/default/x-partition-3]"),
            Some((42, "persistent://public/default/x-partition-3".into()))
        );
        assert_eq!(parse_row("-D[1, x]"), None);
        let log = r#"INFO this process now reads 2 of the 6 splits owned=2 splits=["persistent://p/d/x-partition-0", "persistent://p/d/x-partition-3"]
INFO this process now reads 1 of the 6 splits owned=1 splits=["persistent://p/d/x-partition-3"]"#;
        assert_eq!(
            owned_splits(log),
            BTreeSet::from(["persistent://p/d/x-partition-3".to_owned()])
        );
    }

    #[test]
    fn the_table_has_min_and_median_per_timeout() {
        let s = |t: &str, f: f64| Sample {
            timeout: t.into(),
            first_row: Some(f),
            caught_up: Some(f + 1.0),
            rows: 10,
            duplicates: 0,
        };
        let table = render(&[
            s("1min", 3.0),
            s("10min", 2.0),
            s("1min", 1.0),
            s("10min", 4.0),
        ]);
        assert!(
            table.contains("| ours | 1min | 2 | 1.0 / 3.0 | 2.0 / 4.0 | 0 |"),
            "{table}"
        );
        assert!(
            table.contains("| ours | 10min | 2 | 2.0 / 4.0 | 3.0 / 5.0 | 0 |"),
            "{table}"
        );
    }
}
