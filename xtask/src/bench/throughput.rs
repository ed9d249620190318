//! The side-by-side throughput runs of `cargo xtask bench`: ours producing (whose first round fills the
//! topics every reading job reads), ours reading, Pulsar → Pulsar copies (at-least-once and exactly-once,
//! the source linked to the sink's transactions), the bare-consumer ceiling and the Flink peer — every
//! job once per round, `rounds` interleaved rounds, each ratio from the rounds' min and median (this
//! machine is noisy: one round hid an intermittent stall before).

use std::fmt::Write as _;

use anyhow::{Context as _, Result};

use super::reads::{Rounds, interleave, median};
use super::{Ctx, Measure, Reading, figure_or_dash, partitioned};

/// What a job of the table does.
enum Job {
    /// datagen → `format` → pulsar, into a fresh topic per round (`topic` is the round-0 one).
    Produce {
        topic: String,
        partitions: u32,
        format: &'static str,
        options: &'static str,
    },
    /// pulsar(`topic`) → blackhole, or → pulsar with `reading.sink`, on a fresh subscription.
    Read {
        topic: String,
        format: &'static str,
        reading: Reading,
    },
    /// The bare consumer on `topic`.
    Ceiling { topic: String },
    /// The Flink peer's job file on `topic` (a read when `expect`, else a producing job).
    Flink {
        sql: &'static str,
        topic: String,
        expect: bool,
    },
}

/// Every job, `rounds` interleaved rounds.
pub fn run(ctx: &Ctx, run_id: u64, with_flink: bool, rounds: usize) -> Result<Vec<Rounds>> {
    let t = |s: &str| format!("persistent://public/default/bench-{s}-{run_id}");
    let (json1, json4, avro1) = (t("json-1p"), t("json-4p"), t("avro-1p"));
    let produce = |topic: &str, partitions, format, options| Job::Produce {
        topic: topic.to_owned(),
        partitions,
        format,
        options,
    };
    let read = |topic: &str, format| Job::Read {
        topic: topic.to_owned(),
        format,
        reading: Reading::default(),
    };
    let copy = |semantic: &str| Job::Read {
        topic: json1.clone(),
        format: "json",
        reading: Reading {
            // Checkpoints during the run (each commits a transaction in exactly-once), and the run
            // ends with the first one after the last row, so both modes pay for their commits.
            sets: "SET 'execution.checkpointing.interval' = '1s';\n".into(),
            sink: Some(format!(", 'sink.semantic' = '{semantic}'")),
            ..Reading::default()
        },
    };
    let key_hash = ", 'sink.message-router' = 'key-hash'";
    let mut jobs: Vec<(&str, Job)> = vec![
        (
            "ours: datagen → json → key-hash → pulsar (1p, at-least-once)",
            produce(&json1, 1, "json", key_hash),
        ),
        (
            "ours: datagen → json → key-hash → pulsar (4p, at-least-once)",
            produce(&json4, 4, "json", key_hash),
        ),
        (
            "ours: datagen → json → pulsar (1p, exactly-once)",
            produce(&t("eo-1p"), 1, "json", ", 'sink.semantic' = 'exactly-once'"),
        ),
        (
            "ours: datagen → avro → pulsar (1p)",
            produce(&avro1, 1, "avro", ""),
        ),
        ("ours: pulsar(json, 1p) → blackhole", read(&json1, "json")),
        ("ours: pulsar(json, 4p) → blackhole", read(&json4, "json")),
        ("ours: pulsar(avro, 1p) → blackhole", read(&avro1, "avro")),
        ("ours: pulsar(raw, 1p) → blackhole", read(&json1, "raw")),
        (
            "ours: pulsar(json, 1p) → pulsar(json) (at-least-once)",
            copy("at-least-once"),
        ),
        (
            "ours: pulsar(json, 1p) → pulsar(json) (exactly-once, linked)",
            copy("exactly-once"),
        ),
        (
            "ceiling: bare consumer (json, 1p)",
            Job::Ceiling {
                topic: json1.clone(),
            },
        ),
        (
            "ceiling: bare consumer (json, 4p)",
            Job::Ceiling {
                topic: json4.clone(),
            },
        ),
        (
            "ceiling: bare consumer (avro, 1p)",
            Job::Ceiling {
                topic: avro1.clone(),
            },
        ),
    ];
    if with_flink {
        let flink = |sql, topic: &str, expect| Job::Flink {
            sql,
            topic: topic.to_owned(),
            expect,
        };
        jobs.extend([
            (
                "flink: pulsar(json, 1p) → blackhole",
                flink("pulsar-json-blackhole.sql", &json1, true),
            ),
            (
                "flink: pulsar(json, 4p) → blackhole",
                flink("pulsar-json-blackhole.sql", &json4, true),
            ),
            (
                "flink: pulsar(raw, 1p) → blackhole",
                flink("pulsar-raw-blackhole.sql", &json1, true),
            ),
            (
                "flink: datagen → json → pulsar (1p)",
                flink("datagen-json-pulsar.sql", &t("flink-sink"), false),
            ),
        ]);
    }
    let names: Vec<&str> = jobs.iter().map(|(name, _)| *name).collect();
    let rows_var = format!("ROWS={}", ctx.rows);
    let mut all = interleave(&names, rounds, |k, round| {
        let (name, job) = &jobs[k];
        // Round 0 writes the topics the reading jobs read; later rounds write fresh ones.
        let fresh = |topic: &str| {
            if round == 0 {
                topic.to_owned()
            } else {
                format!("{topic}-r{round}")
            }
        };
        match job {
            Job::Produce {
                topic,
                partitions,
                format,
                options,
            } => {
                let topic = fresh(topic);
                if *partitions > 1 {
                    partitioned(&ctx.admin_url, &topic, *partitions)?;
                }
                ctx.produce(name, &topic, format, options, "2s")
            }
            Job::Read {
                topic,
                format,
                reading,
            } => {
                let pipeline = format!("bench-{run_id}-{k}-{round}");
                let mut reading = reading.clone();
                if let Some(options) = &reading.sink {
                    let out = t(&format!("copy-{k}-{round}"));
                    reading.sink = Some(format!("'topic' = '{out}'{options}"));
                }
                ctx.consume_with(name, topic, format, Some(&pipeline), &reading)
            }
            Job::Ceiling { topic } => ctx.ceiling(name, topic),
            Job::Flink { sql, topic, expect } => {
                let topic = if *expect { topic.clone() } else { fresh(topic) };
                let vars: Vec<&str> = if *expect { vec![] } else { vec![&rows_var] };
                ctx.flink(name, sql, &topic, *expect, &vars)
            }
        }
    })?;
    fill_payload_bytes(ctx, &mut all)?;
    Ok(all)
}

/// MB/s needs message bytes: every topic's payload bytes per message, from a bare read of the whole topic
/// (the ceiling rows already are one; topics without a ceiling row are read here, unreported).
fn fill_payload_bytes(ctx: &Ctx, all: &mut [Rounds]) -> Result<()> {
    let mut per_msg: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for m in all
        .iter()
        .flat_map(|r| &r.runs)
        .filter(|m| m.name.starts_with("ceiling:"))
    {
        if let (Some(t), true) = (&m.topic, m.rows > 0) {
            per_msg.insert(t.clone(), m.bytes as f64 / m.rows as f64);
        }
    }
    let missing: std::collections::BTreeSet<String> = all
        .iter()
        .filter_map(|r| r.runs.first()?.topic.clone())
        .filter(|t| !per_msg.contains_key(t))
        .collect();
    for topic in missing {
        let scan = ctx
            .ceiling("payload bytes", &topic)
            .with_context(|| format!("reading {topic} for its payload bytes"))?;
        if scan.rows > 0 {
            per_msg.insert(topic, scan.bytes as f64 / scan.rows as f64);
        }
    }
    for r in all.iter_mut() {
        // Later rounds of a producing job wrote other topics of the same kind: the first round's.
        let per = r
            .runs
            .first()
            .and_then(|m| m.topic.as_ref())
            .and_then(|t| per_msg.get(t))
            .copied();
        for m in r.runs.iter_mut().filter(|m| m.bytes == 0) {
            if let Some(b) = per {
                m.bytes = (m.rows as f64 * b).round() as u64;
            }
        }
    }
    Ok(())
}

/// One job's rounds summarised: the figures the table and the ratios use.
struct Summary<'a> {
    rounds: &'a Rounds,
    rate_min: f64,
    rate_median: f64,
    cpu_min: f64,
    cpu_median: f64,
    rss_max: f64,
}

impl<'a> Summary<'a> {
    fn of(rounds: &'a Rounds) -> Option<Self> {
        let sorted = |f: fn(&Measure) -> f64| {
            let mut v: Vec<f64> = rounds.runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (rates, cpu) = (sorted(Measure::rate), sorted(Measure::cpu_per_m));
        Some(Self {
            rounds,
            rate_min: *rates.first()?,
            rate_median: median(&rates),
            cpu_min: *cpu.first()?,
            cpu_median: median(&cpu),
            rss_max: rounds
                .runs
                .iter()
                .map(|m| m.peak_rss_mb)
                .fold(0.0, f64::max),
        })
    }
}

/// The table (one row per job over its rounds) and the ratios, ours / Flink and ours / ceiling.
pub fn render(all: &[Rounds], decode: &[Measure]) -> String {
    let summaries: Vec<Summary> = all.iter().filter_map(Summary::of).collect();
    let find = |prefix: &str| summaries.iter().find(|s| s.rounds.name.starts_with(prefix));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| run | rounds | msgs | msgs/s min | median | MB/s (median) | CPU-s / 1M msgs min | median | peak RSS MB (max) | note |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for x in &summaries {
        let first = &x.rounds.runs[0];
        let mb_s = {
            let mut v: Vec<f64> = x.rounds.runs.iter().map(Measure::mb_s).collect();
            v.sort_by(f64::total_cmp);
            median(&v)
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {:.0} | {} | {:.2} | {:.2} | {} | {} |",
            x.rounds.name,
            x.rounds.runs.len(),
            first.rows,
            x.rate_min,
            x.rate_median,
            figure_or_dash(mb_s, 1),
            x.cpu_min,
            x.cpu_median,
            figure_or_dash(x.rss_max, 0),
            first.note
        );
    }
    for m in decode {
        let _ = writeln!(
            s,
            "| {} | 1 | {} | {:.0} | {:.0} | {:.1} | {:.2} | {:.2} | – | {} |",
            m.name,
            m.rows,
            m.rate(),
            m.rate(),
            m.mb_s(),
            m.cpu_per_m(),
            m.cpu_per_m(),
            m.note
        );
    }
    let _ = writeln!(s);
    let ratio = |a: &str, b: &str, what: &str, s: &mut String| {
        let (Some(a), Some(b)) = (find(a), find(b)) else {
            return;
        };
        let per = |x: f64, y: f64| if x > 0.0 { y / x } else { 0.0 };
        let _ = writeln!(
            s,
            "- {what}: {:.2}× msgs per CPU-second (min over min; {:.2}× median over median), msgs/s {:.2}× (median; slowest of ours over the median of the other: {:.2}×), peak RSS {}",
            per(a.cpu_min, b.cpu_min),
            per(a.cpu_median, b.cpu_median),
            per(b.rate_median, a.rate_median),
            per(b.rate_median, a.rate_min),
            if a.rss_max > 0.0 && b.rss_max > 0.0 {
                format!("{:.2}×", a.rss_max / b.rss_max)
            } else {
                "not measured".to_owned()
            }
        );
    };
    for (a, b, what) in [
        (
            "ours: pulsar(json, 1p)",
            "flink: pulsar(json, 1p)",
            "json 1p, ours / Flink",
        ),
        (
            "ours: pulsar(json, 4p)",
            "flink: pulsar(json, 4p)",
            "json 4p, ours / Flink",
        ),
        (
            "ours: pulsar(raw, 1p)",
            "flink: pulsar(raw, 1p)",
            "raw 1p, ours / Flink",
        ),
        (
            "ours: datagen → json → key-hash → pulsar (1p",
            "flink: datagen",
            "sink 1p, ours / Flink",
        ),
        (
            "ours: pulsar(json, 1p) → blackhole",
            "ceiling: bare consumer (json, 1p)",
            "json 1p, ours / bare-consumer ceiling",
        ),
        (
            "ours: pulsar(json, 4p) → blackhole",
            "ceiling: bare consumer (json, 4p)",
            "json 4p, ours / bare-consumer ceiling",
        ),
        (
            "ours: pulsar(avro, 1p) → blackhole",
            "ceiling: bare consumer (avro, 1p)",
            "avro 1p, ours / bare-consumer ceiling",
        ),
        (
            "ours: datagen → json → pulsar (1p, exactly-once)",
            "ours: datagen → json → key-hash → pulsar (1p",
            "exactly-once / at-least-once (datagen → pulsar)",
        ),
        (
            "ours: pulsar(json, 1p) → pulsar(json) (exactly-once",
            "ours: pulsar(json, 1p) → pulsar(json) (at-least-once",
            "exactly-once / at-least-once (pulsar → pulsar, linked)",
        ),
    ] {
        ratio(a, b, what, &mut s);
    }
    let decode_ratio = |wasm: &str, native: &str, what: &str, s: &mut String| {
        let f = |p: &str| decode.iter().find(|m| m.name.starts_with(p));
        if let (Some(w), Some(n)) = (f(wasm), f(native))
            && w.cpu_per_m() > 0.0
        {
            let _ = writeln!(
                s,
                "- {what}: {:.2}× msgs per second (median wall time of the interleaved rounds; per-round CPU in the notes)",
                n.cpu_per_m() / w.cpu_per_m()
            );
        }
    };
    decode_ratio(
        "decode json (wasm)",
        "decode json (native)",
        "json decode, wasm / native",
        &mut s,
    );
    decode_ratio(
        "decode avro (wasm)",
        "decode avro (native)",
        "avro decode, wasm / native",
        &mut s,
    );
    s
}
