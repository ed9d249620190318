//! What a Python or JavaScript plugin costs next to the Rust ones (issue 33 §2, ADR 0021), through the
//! same sandbox and host path the source and sink use: the installed plugins of `<repo>/plugins`
//! (`cargo xtask build-plugins`).
//!
//! - formats: the seed's 4-column order rows (3 BIGINT + 1 STRING) decoded in batches of `--batch`
//!   messages by `json` and `csv` (Rust) and `keyvalue` (Python, `sdk/python/examples/keyvalue`), each
//!   payload the same row in that format;
//! - routers: `tenant-N:order-M` keys routed over 8 partitions by `key-hash` (Rust) and `key-prefix`
//!   (JavaScript, `sdk/js/examples/key-prefix`).
//!
//! Per plugin and round: a fresh instance (instantiation + factory, timed: an instance is made per
//! table and subtask, and again after a trap), one warm-up batch, then `--batches` timed batches.
//! Rounds interleave the plugins (the order rotates each round). Prints per plugin the min and median
//! over the rounds of ns per message and of the instance start, and the linear memory high-water
//! (the plugin's `memory_peak_bytes` counter: what its `limits.memory-mib` must cover).
//!
//! Run: `cargo bench -p pulsar-connect-tests --bench plugin_languages -- [--rounds 7] [--batch 1024]
//! [--batches 20]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use pulsar_connect::plugins::catalog::PluginCatalog;
use pulsar_connect::plugins::{
    Decoder, KeyBatchBuilder, Kind, MessageBatchBuilder, MessageRef, Plugin, Router, model,
};

const PARTITIONS: u32 = 8;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("order_product_id", DataType::Int64, true),
        Field::new("order_customer_id", DataType::Int64, true),
        Field::new("order_status", DataType::Utf8, true),
    ]))
}

fn fields(i: usize) -> (usize, usize, usize, &'static str) {
    (
        i,
        (i * 7919) % 100_000,
        (i * 104_729) % 10_000,
        ["CREATED", "PAID", "SHIPPED", "DELIVERED"][i % 4],
    )
}

fn payload(format: &str, i: usize) -> Vec<u8> {
    let (a, b, c, s) = fields(i);
    match format {
        "json" => format!(
            r#"{{"order_id":{a},"order_product_id":{b},"order_customer_id":{c},"order_status":"{s}"}}"#
        ),
        "csv" => format!("{a},{b},{c},{s}"),
        "keyvalue" => {
            format!("order_id={a},order_product_id={b},order_customer_id={c},order_status={s}")
        }
        other => panic!("no payload for {other}"),
    }
    .into_bytes()
}

fn messages(format: &str, batch: usize, n: usize) -> model::MessageBatch {
    let mut b = MessageBatchBuilder::new();
    for i in n * batch..(n + 1) * batch {
        let p = payload(format, i);
        b.push(MessageRef {
            payload: &p,
            ..Default::default()
        });
    }
    b.finish(false)
}

fn keys(batch: usize, n: usize) -> model::KeyBatch {
    let mut b = KeyBatchBuilder::default();
    for i in n * batch..(n + 1) * batch {
        let k = format!("tenant-{}:order-{i}", i % 37);
        b.push(Some(k.as_bytes()));
    }
    b.finish()
}

struct Case {
    name: &'static str,
    lang: &'static str,
    kind: Kind,
    plugin: Plugin,
    ns_per_msg: Vec<f64>,
    start_us: Vec<f64>,
}

fn run_format(case: &mut Case, batch: usize, batches: usize) {
    let started = Instant::now();
    let mut decoder = Decoder::new(&case.plugin, &[], schema()).expect("create-decoder");
    case.start_us.push(started.elapsed().as_secs_f64() * 1e6);
    let inputs: Vec<_> = (0..=batches)
        .map(|n| messages(case.name, batch, n))
        .collect();
    let mut inputs = inputs.into_iter();
    let warm = decoder
        .decode(inputs.next().expect("warm-up"))
        .expect("decode");
    assert_eq!(
        warm.batch.num_rows(),
        batch,
        "{}: {:?}",
        case.name,
        warm.errors
    );
    let mut elapsed = Duration::ZERO;
    for m in inputs {
        let t = Instant::now();
        let out = decoder.decode(m).expect("decode");
        elapsed += t.elapsed();
        assert_eq!(out.batch.num_rows(), batch);
    }
    case.ns_per_msg
        .push(elapsed.as_nanos() as f64 / (batch * batches) as f64);
}

fn run_router(case: &mut Case, batch: usize, batches: usize) {
    let started = Instant::now();
    let mut router = Router::new(&case.plugin, &[]).expect("create-router");
    case.start_us.push(started.elapsed().as_secs_f64() * 1e6);
    let inputs: Vec<_> = (0..=batches).map(|n| keys(batch, n)).collect();
    let warm = router.route(&inputs[0], None, PARTITIONS).expect("route");
    assert_eq!(warm.len(), batch);
    let mut elapsed = Duration::ZERO;
    for k in &inputs[1..] {
        let t = Instant::now();
        let out = router.route(k, None, PARTITIONS).expect("route");
        elapsed += t.elapsed();
        assert_eq!(out.len(), batch);
    }
    case.ns_per_msg
        .push(elapsed.as_nanos() as f64 / (batch * batches) as f64);
}

fn min_median(v: &[f64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    (s[0], s[s.len() / 2])
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = arg(&args, "--rounds", 7).max(1);
    let batch = arg(&args, "--batch", 1024).max(1);
    let batches = arg(&args, "--batches", 20).max(1);
    let dir = pulsar_connect_tests::jobs::plugin_dir();
    let catalog = PluginCatalog::new(dir);
    let mut cases: Vec<Case> = [
        ("json", "Rust", Kind::Format),
        ("csv", "Rust", Kind::Format),
        ("keyvalue", "Python", Kind::Format),
        ("key-hash", "Rust", Kind::Router),
        ("key-prefix", "JavaScript", Kind::Router),
    ]
    .into_iter()
    .map(|(name, lang, kind)| Case {
        name,
        lang,
        kind,
        plugin: catalog
            .load(name, kind)
            .unwrap_or_else(|e| panic!("plugin {name} (cargo xtask build-plugins): {e:#}")),
        ns_per_msg: Vec::new(),
        start_us: Vec::new(),
    })
    .collect();
    let n = cases.len();
    for round in 0..rounds {
        for j in 0..n {
            let case = &mut cases[(round + j) % n];
            match case.kind {
                Kind::Format => run_format(case, batch, batches),
                Kind::Router => run_router(case, batch, batches),
            }
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }
    println!(
        "{rounds} interleaved rounds, {batches} batches of {batch} messages per plugin and round (after one warm-up batch)\n"
    );
    println!(
        "| plugin | language | kind | ns/msg min | ns/msg median | instance start min | median | memory high-water |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for c in &cases {
        let (ns_min, ns_med) = min_median(&c.ns_per_msg);
        let (st_min, st_med) = min_median(&c.start_us);
        let peak = c.plugin.counters().memory_peak_bytes as f64 / 1048576.0;
        println!(
            "| {} | {} | {} | {ns_min:.0} | {ns_med:.0} | {:.2} ms | {:.2} ms | {peak:.1} MiB |",
            c.name,
            c.lang,
            match c.kind {
                Kind::Format => "format (decode)",
                Kind::Router => "router",
            },
            st_min / 1000.0,
            st_med / 1000.0,
        );
    }
}
