//! Quick native timing of the seed's 4-column order rows: `cargo run --release -p avro-format --example decode_speed`.

use std::time::Instant;

use format_common::{Value, golden};

fn main() {
    let rt = golden::row_type(&[
        ("order_id".into(), "BIGINT".into()),
        ("product".into(), "STRING".into()),
        ("price".into(), "DECIMAL(10, 2)".into()),
        ("ts".into(), "TIMESTAMP(3)".into()),
    ]);
    let rows: Vec<Vec<Value>> = (0..1024)
        .map(|i| {
            vec![
                Value::I64(100_000 + i),
                Value::String(format!("widget-{}", i % 97)),
                Value::Decimal(1999),
                Value::Timestamp(1_709_210_096_789 + i),
            ]
        })
        .collect();
    let batch = golden::batch(&rt, &rows);
    let enc = avro_format::encoder(&[], &rt).unwrap();
    let dec = avro_format::decoder(&[], &rt).unwrap();
    let encoded = enc.encode(&batch).unwrap();
    let payloads: Vec<&[u8]> = (0..rows.len())
        .map(|i| golden::payload(&encoded, i))
        .collect();
    let messages = golden::messages(&payloads);
    assert!(dec.decode(&messages).unwrap().errors.is_empty());
    let iters = 1000;
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(dec.decode(std::hint::black_box(&messages)).unwrap());
    }
    let d = t.elapsed().as_nanos() as f64 / (iters * 1024) as f64;
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(enc.encode(std::hint::black_box(&batch)).unwrap());
    }
    let e = t.elapsed().as_nanos() as f64 / (iters * 1024) as f64;
    println!(
        "avro 4-column rows: decode {d:.0} ns/row, encode {e:.0} ns/row, {} bytes/msg",
        payloads[0].len()
    );
}
