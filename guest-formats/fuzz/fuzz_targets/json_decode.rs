#![no_main]
//! Arbitrary bytes into the json decoder: it may reject them, never panic.

use libfuzzer_sys::fuzz_target;

include!("common.rs");

fuzz_target!(|data: &[u8]| {
    run(data, &sets(), &|o, rt, m| {
        json_format::decoder(o, rt)
            .ok()
            .map(|d| d.decode(m).expect("decode-batch"))
    });
});

fn sets() -> Vec<(&'static str, Vec<(String, String)>)> {
    const ALL: &str = "id INT NOT NULL;b BOOLEAN;i TINYINT;l BIGINT;f FLOAT;d DOUBLE;m DECIMAL(10, 2);s STRING;y BYTES;dt DATE;t TIME(3);ts TIMESTAMP(9);z TIMESTAMP_LTZ(3);a ARRAY<ARRAY<INT>>;mp MAP<STRING, ARRAY<STRING>>;r ROW<a INT, n ROW<c BIGINT, d ARRAY<STRING>>>";
    vec![
        (ALL, opts(&[])),
        (ALL, opts(&[("ignore-parse-errors", "true")])),
        (
            ALL,
            opts(&[
                ("fail-on-missing-field", "true"),
                ("timestamp-format.standard", "ISO-8601"),
            ]),
        ),
    ]
}
