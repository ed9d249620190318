//! The kit for router plugins: routing vectors (in file order, one call each, on one router per
//! section: a router's state, e.g. the round-robin of keyless messages, carries from vector to vector),
//! the cost of routing, hostile keys.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::hostile::{self, Origin};
use super::vectors::{Case, VectorFile};
use super::{Cost, KitConfig, Outcome, is_failure, show_bytes};
use crate::plugins::Router;
use crate::plugins::loader::Plugin;
use crate::plugins::messages::{MessageBatchBuilder, MessageRef};
use crate::plugins::model::{KeyBatch, PropertyBatch};

/// One message of a key batch: its key (`None`: no key) and its properties.
type KeyEntry<'a> = (Option<&'a [u8]>, &'a [(&'a str, &'a str)]);

fn batch(keys: &[KeyEntry<'_>]) -> (KeyBatch, Option<PropertyBatch>) {
    let mut b = MessageBatchBuilder::new();
    for (key, properties) in keys {
        b.push(MessageRef {
            payload: b"",
            key: *key,
            properties,
            event_time: None,
        });
    }
    let m = b.finish(true);
    (m.keys, m.properties)
}

pub(super) fn run(
    plugin: &Plugin,
    file: &VectorFile,
    config: &KitConfig,
    outcome: &mut Outcome,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut keys: Vec<Option<Vec<u8>>> = Vec::new();
    let mut partitions_seen = Vec::new();
    let mut last_options = None;
    for section in &file.sections {
        let before = outcome.failures.len();
        let router = outcome.timed(|| Router::new(plugin, &section.options));
        if let Some(want) = &section.config_error {
            outcome.vectors += 1;
            match &router {
                Ok(_) => outcome.fail(
                    file,
                    section.line,
                    &section.name,
                    format!(
                        "create-router accepted options the section says it refuses ({want:?})"
                    ),
                ),
                Err(e) if !e.to_string().contains(want.as_str()) => outcome.fail(
                    file,
                    section.line,
                    &section.name,
                    format!("create-router refused, but without {want:?}: {e}"),
                ),
                Err(_) => {}
            }
            continue;
        }
        let mut router = router.map_err(|e| e.to_string());
        for v in &section.vectors {
            outcome.vectors += 1;
            let Case::Route {
                key,
                properties,
                partitions,
                expect,
            } = &v.case
            else {
                outcome.fail(
                    file,
                    v.line,
                    &v.name,
                    "a format vector, but the plugin is a router".into(),
                );
                continue;
            };
            let r = match &mut router {
                Err(e) => Err(format!("create-router failed: {e}")),
                Ok(r) => {
                    let props: Vec<(&str, &str)> = properties
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    let (k, p) = batch(&[(key.as_deref(), &props)]);
                    match outcome.timed(|| r.route(&k, p.as_ref(), *partitions)) {
                        Err(e) => Err(format!("route-batch failed: {e}")),
                        Ok(got) if got[0] == *expect => Ok(()),
                        Ok(got) => Err(format!(
                            "key {} among {partitions} partitions: expected partition {expect}, got {}",
                            key.as_deref().map_or("(none)".to_owned(), show_bytes),
                            got[0]
                        )),
                    }
                }
            };
            if let Err(what) = r {
                outcome.fail(file, v.line, &v.name, what);
            }
            keys.push(key.clone());
            partitions_seen.push(*partitions);
        }
        if router.is_ok() {
            last_options = Some(section.options.clone());
        }
        writeln!(
            out,
            "section `{}` (line {}): {} vectors, {} failed",
            section.name,
            section.line,
            section.vectors.len() + usize::from(section.config_error.is_some()),
            outcome.failures.len() - before
        )?;
    }
    let Some(options) = last_options else {
        return Ok(());
    };
    let mut router = Router::new(plugin, &options).map_err(|e| anyhow!("{e}"))?;
    if !keys.is_empty() {
        partitions_seen.sort_unstable();
        let partitions = partitions_seen[partitions_seen.len() / 2];
        let cost = route_cost(&mut router, &keys, partitions, config, outcome)?;
        outcome.costs.push(cost);
    }
    hostile_pass(&mut router, &keys, config, outcome);
    Ok(())
}

fn route_cost(
    router: &mut Router,
    keys: &[Option<Vec<u8>>],
    partitions: u32,
    config: &KitConfig,
    outcome: &mut Outcome,
) -> anyhow::Result<Cost> {
    let cycle: Vec<KeyEntry<'_>> = (0..config.batch)
        .map(|i| (keys[i % keys.len()].as_deref(), &[][..]))
        .collect();
    let bytes_per_batch: usize = cycle.iter().map(|(k, _)| k.map_or(0, <[u8]>::len)).sum();
    let (k, p) = batch(&cycle);
    router
        .route(&k, p.as_ref(), partitions)
        .map_err(|e| anyhow!("routing the cost batch: {e}"))?;
    let (mut items, mut bytes, mut elapsed) = (0, 0, Duration::ZERO);
    while items < config.cost_messages && elapsed < config.cost_time {
        let started = Instant::now();
        router
            .route(&k, p.as_ref(), partitions)
            .map_err(|e| anyhow!("routing the cost batch: {e}"))?;
        let took = started.elapsed();
        outcome.slowest_call = outcome.slowest_call.max(took);
        elapsed += took;
        items += config.batch;
        bytes += bytes_per_batch;
    }
    Ok(Cost {
        what: "route",
        items,
        bytes,
        elapsed,
        batch: config.batch,
    })
}

/// Partition counts of the hostile pass.
const PARTITIONS: [u32; 7] = [1, 2, 3, 7, 1000, 65_536, u32::MAX];

fn hostile_pass(
    router: &mut Router,
    keys: &[Option<Vec<u8>>],
    config: &KitConfig,
    outcome: &mut Outcome,
) {
    let corpus: Vec<(String, Vec<u8>)> = keys
        .iter()
        .flatten()
        .take(64)
        .enumerate()
        .map(|(i, k)| (format!("key {i}"), k.clone()))
        .collect();
    let inputs = hostile::inputs(&corpus, config.random_inputs, config.seed);
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let h = &mut outcome.hostile;
    for i in &inputs {
        h.inputs += 1;
        match i.origin {
            Origin::Truncated => h.truncated += 1,
            Origin::Mutated => h.mutated += 1,
            Origin::Random => h.random += 1,
            Origin::Oversized => h.oversized += 1,
        }
    }
    for (n, chunk) in inputs.chunks(64).enumerate() {
        let partitions = PARTITIONS[n % PARTITIONS.len()];
        // Every fourth key is missing; properties with odd names and values ride along.
        let names: Vec<String> = (0..chunk.len()).map(|i| format!("p{}", i % 3)).collect();
        let values: Vec<String> = chunk
            .iter()
            .map(|i| String::from_utf8_lossy(&i.bytes[..i.bytes.len().min(32)]).into_owned())
            .collect();
        let props: Vec<[(&str, &str); 1]> = names
            .iter()
            .zip(&values)
            .map(|(n, v)| [(n.as_str(), v.as_str())])
            .collect();
        let entries: Vec<KeyEntry<'_>> = chunk
            .iter()
            .zip(&props)
            .map(|(i, p)| {
                (
                    (!rng.random_ratio(1, 4)).then_some(i.bytes.as_slice()),
                    &p[..],
                )
            })
            .collect();
        let (k, p) = batch(&entries);
        let started = Instant::now();
        let result = router.route(&k, p.as_ref(), partitions);
        outcome.slowest_call = outcome.slowest_call.max(started.elapsed());
        match result {
            Ok(parts) => outcome.hostile.rows += parts.len(),
            Err(e) if !is_failure(&e) => outcome.hostile.refused += 1,
            Err(e) => outcome.hostile.failures.push(format!(
                "{} keys from `{}` among {partitions} partitions: {e}",
                chunk.len(),
                chunk[0].what
            )),
        }
    }
}
