//! `cargo xtask bench --parallel-rounds N`: one 4-partition json topic, filled once by the bench's own
//! producing job, read into blackhole N interleaved rounds by one process with 1, 2 and 4 source subtasks
//! (`parallelism.default`), and by one and by two processes sharing it through a `Failover` subscription
//! (default parallelism each). Every read has a `pipeline.name` of its own, hence fresh subscriptions
//! from the earliest message. On a 2-core machine with the broker on it, the rate cannot grow with the
//! subtasks much; the CPU-s per million messages shows what parallelism costs.

use std::fmt::Write as _;

use anyhow::Result;

use super::reads::{Rounds, interleave, median};
use super::{Ctx, Reading, partitioned, report_step};

/// The reading jobs, in the order they run in a round.
const JOBS: [&str; 5] = [
    "ours: pulsar(json, 4p) → blackhole, parallelism 1",
    "ours: pulsar(json, 4p) → blackhole, parallelism 2",
    "ours: pulsar(json, 4p) → blackhole, parallelism 4",
    "ours: Failover, one process",
    "ours: Failover, two processes",
];

/// Fills a fresh 4-partition topic, then reads it `rounds` times with every configuration.
pub fn run(ctx: &Ctx, run_id: u64, rounds: usize) -> Result<Vec<Rounds>> {
    let topic = format!("persistent://public/default/bench-parallel-json-4p-{run_id}");
    partitioned(&ctx.admin_url, &topic, 4)?;
    eprintln!("producing {} rows to {topic}", ctx.rows);
    let produced = ctx.produce(
        "ours: datagen → json → key-hash → pulsar (4p)",
        &topic,
        "json",
        ", 'sink.message-router' = 'key-hash'",
        "2s",
    )?;
    report_step(&produced);
    let parallelism = |n: usize| Reading {
        sets: format!("SET 'parallelism.default' = '{n}';\n"),
        processes: 1,
        ..Reading::default()
    };
    let failover = |processes: usize| Reading {
        source_options: ", 'subscription-type' = 'Failover'".into(),
        processes,
        ..Reading::default()
    };
    let jobs = [
        (JOBS[0], parallelism(1)),
        (JOBS[1], parallelism(2)),
        (JOBS[2], parallelism(4)),
        (JOBS[3], failover(1)),
        (JOBS[4], failover(2)),
    ];
    let names: Vec<&str> = jobs.iter().map(|(name, _)| *name).collect();
    interleave(&names, rounds, |k, round| {
        let (name, reading) = &jobs[k];
        let pipeline = format!("bench-parallel-{run_id}-{k}-{round}");
        ctx.consume_with(name, &topic, "json", Some(&pipeline), reading)
    })
}

/// The scaling section of a full run: the rounds' table and what parallelism 2 and two Failover
/// processes cost per message against one (median CPU-s per million; the goal: within 1.15×).
pub fn render(all: &[Rounds]) -> String {
    let mut s = String::from(
        "\n### Scaling: pulsar(json, 4p) → blackhole by parallelism and by processes\n\n",
    );
    s.push_str(&super::reads::render(all));
    let cpu = |name: &str| {
        all.iter().find(|r| r.name == name).map(|r| {
            let mut v: Vec<f64> = r.runs.iter().map(super::Measure::cpu_per_m).collect();
            v.sort_by(f64::total_cmp);
            median(&v)
        })
    };
    for (what, of, base) in [
        ("parallelism 2 / 1", JOBS[1], JOBS[0]),
        ("parallelism 4 / 1", JOBS[2], JOBS[0]),
        ("Failover, two processes / one", JOBS[4], JOBS[3]),
    ] {
        // Tiny runs (`--smoke`) measure no CPU time at the clock's resolution: no ratio then.
        if let (Some(a), Some(b)) = (cpu(of), cpu(base))
            && a > 0.0
            && b > 0.0
        {
            let _ = writeln!(
                s,
                "- {what}: {:.2}× the CPU-s per million messages (medians; goal for parallelism 2: ≤ 1.15×)",
                a / b
            );
        }
    }
    s
}
