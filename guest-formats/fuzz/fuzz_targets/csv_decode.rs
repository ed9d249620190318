#![no_main]
//! Arbitrary bytes into the csv decoder: it may reject them, never panic.

use libfuzzer_sys::fuzz_target;

include!("common.rs");

fuzz_target!(|data: &[u8]| {
    run(data, &sets(), &|o, rt, m| {
        csv_format::decoder(o, rt)
            .ok()
            .map(|d| d.decode(m).expect("decode-batch"))
    });
});

fn sets() -> Vec<(&'static str, Vec<(String, String)>)> {
    const ALL: &str = "id INT;b BOOLEAN;l BIGINT;d DOUBLE;m DECIMAL(10, 2);s STRING;y BYTES;dt DATE;t TIME(3);ts TIMESTAMP(3);a ARRAY<STRING>;r ROW<x INT, y STRING>";
    vec![
        (ALL, opts(&[])),
        (
            ALL,
            opts(&[("ignore-parse-errors", "true"), ("allow-comments", "true")]),
        ),
        (
            ALL,
            opts(&[
                ("field-delimiter", ";"),
                ("quote-character", "'"),
                ("escape-character", "\\"),
                ("null-literal", "n/a"),
            ]),
        ),
        (
            ALL,
            opts(&[
                ("disable-quote-character", "true"),
                ("array-element-delimiter", "|"),
            ]),
        ),
    ]
}
