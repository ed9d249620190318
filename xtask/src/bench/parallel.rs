//! `cargo xtask bench --parallel-rounds N`: one 4-partition json topic, filled once by the bench's own
//! producing job, read into blackhole N interleaved rounds by one process with 1, 2 and 4 source subtasks
//! (`parallelism.default`), and by one and by two processes sharing it through a `Failover` subscription
//! (default parallelism each). Every read has a `pipeline.name` of its own, hence fresh subscriptions
//! from the earliest message. On a 2-core machine with the broker on it, the rate cannot grow with the
//! subtasks much; the CPU-s per million messages shows what parallelism costs.

use anyhow::Result;

use super::reads::{Rounds, interleave};
use super::{Ctx, Reading, partitioned, report_step};

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
        (
            "ours: pulsar(json, 4p) → blackhole, parallelism 1",
            parallelism(1),
        ),
        (
            "ours: pulsar(json, 4p) → blackhole, parallelism 2",
            parallelism(2),
        ),
        (
            "ours: pulsar(json, 4p) → blackhole, parallelism 4",
            parallelism(4),
        ),
        ("ours: Failover, one process", failover(1)),
        ("ours: Failover, two processes", failover(2)),
    ];
    let names: Vec<&str> = jobs.iter().map(|(name, _)| *name).collect();
    interleave(&names, rounds, |k, round| {
        let (name, reading) = &jobs[k];
        let pipeline = format!("bench-parallel-{run_id}-{k}-{round}");
        ctx.consume_with(name, &topic, "json", Some(&pipeline), reading)
    })
}
