//! Quick native decode/encode timing of the seed's 4-column order rows (not the product benchmark,
//! which compares native and wasm): `cargo run --release -p json-format --example decode_speed`.

use std::time::Instant;

use format_common::golden;

fn main() {
    for (label, price_ty, price) in [
        ("DOUBLE price", "DOUBLE", "19.99"),
        ("DECIMAL(10, 2) price", "DECIMAL(10, 2)", "19.99"),
    ] {
        let rt = golden::row_type(&[
            ("order_id".into(), "BIGINT".into()),
            ("product".into(), "STRING".into()),
            ("price".into(), price_ty.into()),
            ("ts".into(), "TIMESTAMP(3)".into()),
        ]);
        let payloads: Vec<Vec<u8>> = (0..1024)
            .map(|i| {
                format!(
                    "{{\"order_id\":{},\"product\":\"widget-{}\",\"price\":{price},\"ts\":\"2024-02-29 12:34:{:02}.789\"}}",
                    100_000 + i,
                    i % 97,
                    i % 60
                )
                .into_bytes()
            })
            .collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let batch = golden::messages(&refs);
        let dec = json_format::decoder(&[], &rt).unwrap();
        let enc = json_format::encoder(&[], &rt).unwrap();
        let decoded = dec.decode(&batch).unwrap();
        assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
        let iters: u32 = std::env::var("ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000);
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(dec.decode(std::hint::black_box(&batch)).unwrap());
        }
        let ns = t.elapsed().as_nanos() as f64 / (f64::from(iters) * 1024.0);
        // `decode-only`: for `perf stat -e instructions` (stable when the machine is busy).
        if std::env::args().nth(1).as_deref() == Some("decode-only") {
            println!(
                "json {label}: decode {ns:.0} ns/row ({} decode calls of 1024 rows)",
                iters + 1
            );
            continue;
        }
        let t = Instant::now();
        for _ in 0..iters / 4 {
            std::hint::black_box(enc.encode(std::hint::black_box(&decoded.rows)).unwrap());
        }
        let ens = t.elapsed().as_nanos() as f64 / (f64::from(iters / 4) * 1024.0);
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Order<'a> {
            order_id: i64,
            #[serde(borrow)]
            product: &'a str,
            price: f64,
            #[serde(borrow)]
            ts: &'a str,
        }
        let t = Instant::now();
        for _ in 0..iters / 4 {
            for p in &payloads {
                std::hint::black_box(serde_json::from_slice::<Order>(p).unwrap());
            }
        }
        let sns = t.elapsed().as_nanos() as f64 / (f64::from(iters / 4) * 1024.0);
        println!(
            "  (reference on this machine: serde_json into a borrowed struct, no columns, no timestamp parsing: {sns:.0} ns/row)"
        );
        println!(
            "json {label}: decode {ns:.0} ns/row ({:.2} M rows/s), encode {ens:.0} ns/row, {} bytes/msg",
            1e3 / ns,
            payloads[0].len()
        );
    }
}
