#![no_main]
//! Arbitrary bytes into the avro decoder: it may reject them, never panic.

use libfuzzer_sys::fuzz_target;

include!("common.rs");

fuzz_target!(|data: &[u8]| {
    run(data, &sets(), &|o, rt, m| {
        avro_format::decoder(o, rt)
            .ok()
            .map(|d| d.decode(m).expect("decode-batch"))
    });
});

fn sets() -> Vec<(&'static str, Vec<(String, String)>)> {
    vec![
        (
            "id INT NOT NULL;b BOOLEAN;i TINYINT;l BIGINT;f FLOAT;d DOUBLE;m DECIMAL(38, 18);s STRING;y BYTES;dt DATE;t TIME(3);ts TIMESTAMP(3);a ARRAY<ARRAY<INT>>;mp MAP<STRING, ARRAY<STRING>>;r ROW<a INT, n ROW<c BIGINT, d ARRAY<STRING>>>",
            opts(&[]),
        ),
        (
            "s STRING NOT NULL;a ARRAY<INT NOT NULL> NOT NULL",
            opts(&[]),
        ),
    ]
}
