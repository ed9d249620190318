//! Random and mutated inputs never panic the avro decoder, and every batch keeps the contract
//! (the native stand-in for the cargo-fuzz target in guest-formats/fuzz).

use format_common::golden;

#[test]
fn random_bytes_never_panic() {
    let random = std::env::var("NO_PANIC_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let inputs = golden::fuzz_inputs("avro", ALPHABET, random);
    for (cols, options) in cases() {
        let rt = golden::row_type(&cols);
        let d = avro_format::decoder(&options, &rt).expect("decoder");
        golden::no_panics(&rt, &inputs, &|m| d.decode(m));
    }
}

const ALPHABET: &[u8] = &[0, 1, 2, 3, 4, 0x7f, 0x80, 0xff, 0xfe, 0x81];

fn cases() -> Vec<golden::Case> {
    vec![(golden::columns(&golden::load("avro/default.json")), vec![])]
}
