//! Quick native timing of 4-column order-like rows (`f_int64 BIGINT, f_string STRING, f_double DOUBLE,
//! f_int32 INT` of the golden `AllTypes`): `cargo run --release -p protobuf-format --example decode_speed`.

use std::path::PathBuf;
use std::time::Instant;

use format_common::{Value, golden};

fn main() {
    let folder =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/protobuf/vectors");
    let opts = vec![
        ("descriptor-file".to_owned(), "golden.desc".to_owned()),
        (
            "message-name".to_owned(),
            "pulsar_connect.golden.AllTypes".to_owned(),
        ),
    ];
    let rt = golden::row_type(&[
        ("f_int64".into(), "BIGINT".into()),
        ("f_string".into(), "STRING".into()),
        ("f_double".into(), "DOUBLE".into()),
        ("f_int32".into(), "INT".into()),
    ]);
    let rows: Vec<Vec<Value>> = (0..1024)
        .map(|i| {
            vec![
                Value::I64(100_000 + i),
                Value::String(format!("widget-{}", i % 97)),
                Value::F64(19.99),
                Value::I32(i as i32),
            ]
        })
        .collect();
    let batch = golden::batch(&rt, &rows);
    let enc = protobuf_format::encoder_in(&folder, &opts, &rt).unwrap();
    let dec = protobuf_format::decoder_in(&folder, &opts, &rt).unwrap();
    let encoded = enc.encode(&batch).unwrap();
    let payloads: Vec<&[u8]> = (0..rows.len())
        .map(|i| golden::payload(&encoded, i))
        .collect();
    let messages = golden::messages(&payloads);
    assert!(dec.decode(&messages).unwrap().errors.is_empty());
    let iters = 500;
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
        "protobuf 4-column rows: decode {d:.0} ns/row, encode {e:.0} ns/row, {} bytes/msg",
        payloads[0].len()
    );
}
