#![no_main]
//! Arbitrary bytes into the raw decoder: it may reject them, never panic.

use libfuzzer_sys::fuzz_target;

include!("common.rs");

fuzz_target!(|data: &[u8]| {
    run(data, &sets(), &|o, rt, m| {
        raw_format::decoder(o, rt)
            .ok()
            .map(|d| d.decode(m).expect("decode-batch"))
    });
});

fn sets() -> Vec<(&'static str, Vec<(String, String)>)> {
    let mut v = Vec::new();
    for t in [
        "value STRING",
        "value BYTES",
        "value BOOLEAN",
        "value SMALLINT",
        "value BIGINT",
        "value DOUBLE",
    ] {
        v.push((t, opts(&[("charset", "UTF-16")])));
        v.push((t, opts(&[("endianness", "little-endian")])));
    }
    v
}
