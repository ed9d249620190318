//! Native vs wasm decode of the same rows into the same Arrow columns: the built-in `json` and `avro`
//! formats on the seed's 4-column order rows, batches of 1024. The native run calls the format crate
//! directly (`json_format::decoder`) and converts its columns to Arrow with the host's converter; the wasm
//! run goes through the plugin runtime (`plugins/json`, `plugins/avro`) exactly as the source does.
//! Prints one JSON line per run (`cargo xtask bench` reads them).
//!
//! Run: `cargo bench -p pulsar-connect-tests --bench format_decode -- --rows 200000 [--rounds 5]
//! [--format json|avro] [--only native|wasm]` (rounds interleave native and wasm; with more than one the
//! note gives wall and thread-CPU min and median, and stderr the wasm/native ratio per CPU-second).

use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use format_common as sdk;
use pulsar_connect::plugins::catalog::PluginCatalog;
use pulsar_connect::plugins::columns::from_columns;
use pulsar_connect::plugins::schema::row_type_from_arrow;
use pulsar_connect::plugins::{Decoder, Kind, MessageBatchBuilder, MessageRef, model};

const BATCH: usize = 1024;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, true),
        Field::new("order_product_id", DataType::Int64, true),
        Field::new("order_customer_id", DataType::Int64, true),
        Field::new("order_status", DataType::Utf8, true),
    ]))
}

fn json_row(i: usize) -> Vec<u8> {
    format!(
        r#"{{"order_id":{i},"order_product_id":{},"order_customer_id":{},"order_status":"{}"}}"#,
        (i * 7919) % 100_000,
        (i * 104_729) % 10_000,
        ["CREATED", "PAID", "SHIPPED", "DELIVERED"][i % 4]
    )
    .into_bytes()
}

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
}

/// The same row as Flink's avro format writes it (every field a nullable union: branch 1 = value).
fn avro_row(i: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [
        i as i64,
        ((i * 7919) % 100_000) as i64,
        ((i * 104_729) % 10_000) as i64,
    ] {
        zigzag(1, &mut out);
        zigzag(v, &mut out);
    }
    let s = ["CREATED", "PAID", "SHIPPED", "DELIVERED"][i % 4];
    zigzag(1, &mut out);
    zigzag(s.len() as i64, &mut out);
    out.extend_from_slice(s.as_bytes());
    out
}

fn host_batches(rows: &[Vec<u8>]) -> Vec<model::MessageBatch> {
    rows.chunks(BATCH)
        .map(|chunk| {
            let mut b = MessageBatchBuilder::new();
            for p in chunk {
                b.push(MessageRef {
                    payload: p,
                    ..Default::default()
                });
            }
            b.finish(false)
        })
        .collect()
}

fn sdk_batches(rows: &[Vec<u8>]) -> Vec<sdk::MessageBatch> {
    rows.chunks(BATCH)
        .map(|chunk| {
            let mut payloads = Vec::new();
            let mut offsets = vec![0u32];
            for p in chunk {
                payloads.extend_from_slice(p);
                offsets.push(payloads.len() as u32);
            }
            sdk::MessageBatch {
                count: chunk.len() as u32,
                payloads,
                payload_offsets: offsets,
                keys: sdk::KeyBatch {
                    count: chunk.len() as u32,
                    data: Vec::new(),
                    offsets: vec![0; chunk.len() + 1],
                    present: Some(vec![0; chunk.len().div_ceil(8)]),
                },
                properties: None,
                event_times: None,
            }
        })
        .collect()
}

/// The SDK's row type for the same schema (through the host's conversion, then field by field).
fn sdk_row_type(schema: &Schema) -> sdk::RowType {
    let rt = row_type_from_arrow(schema).expect("row type");
    sdk::RowType {
        types: rt
            .types
            .iter()
            .map(|t| sdk::TypeNode {
                data_type: match &t.data_type {
                    model::DataType::Bigint => sdk::DataType::Bigint,
                    model::DataType::Varchar(n) => sdk::DataType::Varchar(*n),
                    other => panic!("bench schema has no {other:?}"),
                },
                nullable: t.nullable,
            })
            .collect(),
        fields: rt
            .fields
            .iter()
            .map(|f| sdk::Field {
                name: f.name.clone(),
                type_index: f.type_index,
            })
            .collect(),
    }
}

/// The SDK's columns as the host's WIT columns (same shape, different generated types).
fn to_host(b: sdk::ColumnBatch) -> model::ColumnBatch {
    use model::ColumnData as H;
    use sdk::ColumnData as S;
    model::ColumnBatch {
        row_count: b.row_count,
        columns: b
            .columns
            .into_iter()
            .map(|c| model::Column {
                validity: c.validity,
                data: match c.data {
                    S::Bits(v) => H::Bits(v),
                    S::Int8(v) => H::Int8(v),
                    S::Int16(v) => H::Int16(v),
                    S::Int32(v) => H::Int32(v),
                    S::Int64(v) => H::Int64(v),
                    S::Float32(v) => H::Float32(v),
                    S::Float64(v) => H::Float64(v),
                    S::Decimal128(v) => H::Decimal128(v),
                    S::Bytes(b) => H::Bytes(model::ByteColumn {
                        data: b.data,
                        offsets: b.offsets,
                    }),
                    S::List(l) => H::List(model::ListColumn {
                        offsets: l.offsets,
                        child: l.child,
                    }),
                    S::Map(m) => H::Map(model::MapColumn {
                        offsets: m.offsets,
                        keys: m.keys,
                        values: m.values,
                    }),
                    S::Row(r) => H::Row(r),
                },
            })
            .collect(),
    }
}

fn report(name: &str, rows: usize, bytes: usize, seconds: f64, note: &str) {
    println!(
        "{}",
        serde_json::json!({"name": name, "rows": rows, "bytes": bytes, "seconds": seconds, "note": note})
    );
}

/// CPU time of the calling thread (`/proc/thread-self/schedstat`: nanoseconds on the CPU), so that a
/// round's cost does not include the time this 2-core machine gave to other processes.
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Wall and CPU seconds of one run.
#[derive(Debug, Clone, Copy)]
struct Round {
    wall: f64,
    cpu: f64,
}

fn timed(f: impl FnOnce() -> usize) -> (usize, Round) {
    let (t, c) = (Instant::now(), thread_cpu());
    let n = f();
    let round = Round {
        cpu: thread_cpu() - c,
        wall: t.elapsed().as_secs_f64(),
    };
    (n, round)
}

/// The native decode loop (its own function, so that `valgrind --tool=callgrind --toggle-collect`
/// can count it alone).
#[inline(never)]
fn native_loop(
    decode: &dyn Fn(&sdk::MessageBatch) -> sdk::DecodedBatch,
    batches: &[sdk::MessageBatch],
    schema: &SchemaRef,
) -> usize {
    let mut n = 0;
    for b in batches {
        let d = decode(b);
        let batch = from_columns(to_host(d.rows), schema).expect("native columns");
        n += batch.num_rows();
    }
    n
}

/// The wasm decode loop; the batches move into the calls, as on the source's path.
#[inline(never)]
fn wasm_loop(decoder: &mut Decoder, batches: Vec<model::MessageBatch>) -> usize {
    let mut n = 0;
    for b in batches {
        n += decoder.decode(b).expect("wasm decode").batch.num_rows();
    }
    n
}

type NativeDecode = fn(&sdk::RowType) -> Box<dyn Fn(&sdk::MessageBatch) -> sdk::DecodedBatch>;

/// What to run: `--only native|wasm` (default both), `--rounds N` interleaved rounds.
#[derive(Debug, Clone, Copy)]
struct Plan {
    rows: usize,
    rounds: usize,
    native: bool,
    wasm: bool,
}

fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

fn run(format: &str, plan: Plan, make: fn(usize) -> Vec<u8>, native: NativeDecode) {
    let rows = plan.rows;
    let data: Vec<Vec<u8>> = (0..rows).map(make).collect();
    let bytes: usize = data.iter().map(Vec::len).sum();
    let schema = schema();
    // Native: the format crate's decoder, then the host's conversion to Arrow.
    let decode = native(&sdk_row_type(&schema));
    let native_batches = sdk_batches(&data);
    // Wasm: the plugin through the host runtime.
    let mut decoder = plan.wasm.then(|| {
        let dir = std::env::var_os("PULSAR_CONNECT_PLUGIN_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| pulsar_connect_tests::guests::repo_root().join("plugins"));
        let plugin = PluginCatalog::new(dir)
            .load(format, Kind::Format)
            .expect("the built plugin (cargo xtask build-plugins)");
        let mut decoder = Decoder::new(&plugin, &[], schema.clone()).expect("create-decoder");
        // Warm up once (instance, first-call costs).
        decoder
            .decode(host_batches(&data[..BATCH.min(rows)]).remove(0))
            .expect("warm-up");
        decoder
    });
    let (mut native_rounds, mut wasm_rounds) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        if plan.native {
            let (n, r) = timed(|| native_loop(&*decode, &native_batches, &schema));
            assert_eq!(n, rows, "{format}: native decoded every row");
            native_rounds.push(r);
        }
        if let Some(decoder) = decoder.as_mut() {
            let batches = host_batches(&data);
            let (n, r) = timed(|| wasm_loop(decoder, batches));
            assert_eq!(n, rows, "{format}: wasm decoded every row");
            wasm_rounds.push(r);
        }
    }
    let summary = |what: &str, note: &str, rounds: &[Round]| {
        if rounds.is_empty() {
            return None;
        }
        let (wall_min, wall_med) = min_median(rounds.iter().map(|r| r.wall).collect());
        let (cpu_min, cpu_med) = min_median(rounds.iter().map(|r| r.cpu).collect());
        let note = if rounds.len() > 1 {
            format!(
                "{note}; {} rounds: wall min {wall_min:.4} s, median {wall_med:.4} s; CPU min {cpu_min:.4} s, median {cpu_med:.4} s",
                rounds.len()
            )
        } else {
            note.to_owned()
        };
        report(
            &format!("decode {format} ({what})"),
            rows,
            bytes,
            wall_med,
            &note,
        );
        Some((cpu_min, cpu_med))
    };
    let n = summary(
        "native",
        "format crate compiled natively → Arrow",
        &native_rounds,
    );
    let w = summary(
        "wasm",
        "plugin through the host runtime → Arrow",
        &wasm_rounds,
    );
    if let (Some((n_min, n_med)), Some((w_min, w_med))) = (n, w) {
        eprintln!(
            "{format}: wasm / native speed per CPU-second: {:.2}× (min), {:.2}× (median)",
            n_min / w_min,
            n_med / w_med
        );
    }
}

fn main() {
    let mut plan = Plan {
        rows: 200_000,
        rounds: 1,
        native: true,
        wasm: true,
    };
    let mut formats = vec!["json", "avro"];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_default();
        match a.as_str() {
            "--rows" => plan.rows = value().parse().unwrap_or(plan.rows),
            "--rounds" => plan.rounds = value().parse::<usize>().unwrap_or(1).max(1),
            "--format" => formats = vec![if value() == "avro" { "avro" } else { "json" }],
            "--only" => match value().as_str() {
                "native" => plan.wasm = false,
                "wasm" => plan.native = false,
                _ => {}
            },
            _ => {}
        }
    }
    if formats.contains(&"json") {
        run("json", plan, json_row, |rt| {
            let d = json_format::decoder(&[], rt).expect("json decoder");
            Box::new(move |b| d.decode(b).expect("json decode"))
        });
    }
    if formats.contains(&"avro") {
        run("avro", plan, avro_row, |rt| {
            let d = avro_format::decoder(&[], rt).expect("avro decoder");
            Box::new(move |b| d.decode(b).expect("avro decode"))
        });
    }
}
