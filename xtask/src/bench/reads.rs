//! `cargo xtask bench --read-rounds N`: each single-partition reading job N times on fresh subscriptions,
//! interleaved, with min / median / max, so that a read that stalls in some runs cannot hide in one lucky
//! (or unlucky) run.
//!
//! One 1-partition topic is filled once by the bench's own producing job (datagen → json → pulsar); then
//! every round reads it once with each job — pulsar(json) → blackhole, pulsar(raw) → blackhole (each with a
//! `pipeline.name` of its own, so a new durable subscription from the earliest message) and the bare
//! consumer (its own subscription per run). A round whose rate is below half of its job's median is
//! counted as a stall.

use std::fmt::Write as _;

use anyhow::Result;

use super::{Ctx, Measure, report_step};

/// One job's rounds.
pub struct Rounds {
    pub name: String,
    pub runs: Vec<Measure>,
}

impl Rounds {
    fn sorted_rates(&self) -> Vec<f64> {
        let mut r: Vec<f64> = self.runs.iter().map(Measure::rate).collect();
        r.sort_by(f64::total_cmp);
        r
    }

    fn sorted_cpu(&self) -> Vec<f64> {
        let mut r: Vec<f64> = self.runs.iter().map(Measure::cpu_per_m).collect();
        r.sort_by(f64::total_cmp);
        r
    }

    /// Rounds slower than half the median rate.
    pub fn stalls(&self) -> usize {
        let median = median(&self.sorted_rates());
        self.runs.iter().filter(|m| m.rate() < median / 2.0).count()
    }
}

pub fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Fills a fresh 1-partition topic, then reads it `rounds` times with every reading job.
pub fn run(ctx: &Ctx, run_id: u64, rounds: usize) -> Result<Vec<Rounds>> {
    let topic = format!("persistent://public/default/bench-reads-json-1p-{run_id}");
    eprintln!("producing {} rows to {topic}", ctx.rows);
    let produced = ctx.produce(
        "ours: datagen → json → pulsar (1p)",
        &topic,
        "json",
        "",
        "2s",
    )?;
    report_step(&produced);
    let jobs = [
        ("ours: pulsar(json, 1p) → blackhole", Some("json")),
        ("ours: pulsar(raw, 1p) → blackhole", Some("raw")),
        ("ceiling: bare consumer (json, 1p)", None),
    ];
    let names: Vec<&str> = jobs.iter().map(|(name, _)| *name).collect();
    interleave(&names, rounds, |k, round| {
        let (name, format) = jobs[k];
        match format {
            Some(format) => {
                let pipeline = format!("bench-reads-{run_id}-{format}-{round}");
                ctx.consume(name, &topic, format, Some(&pipeline))
            }
            None => ctx.ceiling(name, &topic),
        }
    })
}

/// Runs every job of `names` once per round, `rounds` times, interleaved (`run(job index, round)`).
pub fn interleave(
    names: &[&str],
    rounds: usize,
    mut run: impl FnMut(usize, usize) -> Result<Measure>,
) -> Result<Vec<Rounds>> {
    let mut out: Vec<Rounds> = names
        .iter()
        .map(|name| Rounds {
            name: (*name).to_owned(),
            runs: Vec::new(),
        })
        .collect();
    for round in 0..rounds {
        eprintln!("round {}/{rounds}", round + 1);
        for (k, rounds) in out.iter_mut().enumerate() {
            let m = run(k, round)?;
            report_step(&m);
            rounds.runs.push(m);
        }
    }
    Ok(out)
}

/// The rounds as a Markdown table: rate and CPU cost, min / median / max, and the stalled rounds.
pub fn render(all: &[Rounds]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| job | rounds | msgs/s min | median | max | CPU-s / 1M msgs min | median | max | rounds below ½ median |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    for r in all {
        let (rates, cpu) = (r.sorted_rates(), r.sorted_cpu());
        let (Some(rmin), Some(rmax), Some(cmin), Some(cmax)) =
            (rates.first(), rates.last(), cpu.first(), cpu.last())
        else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {} |",
            r.name,
            r.runs.len(),
            rmin,
            median(&rates),
            rmax,
            cmin,
            median(&cpu),
            cmax,
            r.stalls()
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "Every round, in order (msgs/s):");
    let _ = writeln!(s);
    for r in all {
        let rates: Vec<String> = r.runs.iter().map(|m| format!("{:.0}", m.rate())).collect();
        let _ = writeln!(s, "- {}: {}", r.name, rates.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(rates: &[f64]) -> Rounds {
        Rounds {
            name: "x".into(),
            runs: rates
                .iter()
                .map(|r| Measure {
                    rows: (*r * 10.0) as u64,
                    wall: 10.0,
                    ..Measure::default()
                })
                .collect(),
        }
    }

    #[test]
    fn a_round_below_half_the_median_is_a_stall() {
        assert_eq!(rounds(&[400.0, 410.0, 390.0, 100.0, 405.0]).stalls(), 1);
        assert_eq!(rounds(&[400.0, 410.0, 390.0]).stalls(), 0);
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), 2.5);
    }
}
