//! Random and mutated inputs never panic the json decoder, and every batch keeps the contract
//! (the native stand-in for the cargo-fuzz target in guest-formats/fuzz).

use format_common::golden;

#[test]
fn random_bytes_never_panic() {
    let random = std::env::var("NO_PANIC_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let inputs = golden::fuzz_inputs("json", ALPHABET, random);
    for (cols, options) in cases() {
        let rt = golden::row_type(&cols);
        let d = json_format::decoder(&options, &rt).expect("decoder");
        golden::no_panics(&rt, &inputs, &|m| d.decode(m));
    }
}

const ALPHABET: &[u8] = b"{}[]\":,0123456789.-eE tfnrul\\\"abcdxyz_";

fn cases() -> Vec<golden::Case> {
    let table = golden::columns(&golden::load("table.json"));
    let decode = golden::columns(&golden::load("json/decode-default.json"));
    let o = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    vec![
        (table.clone(), vec![]),
        (table, o("ignore-parse-errors", "true")),
        (decode.clone(), o("fail-on-missing-field", "true")),
        (decode, o("timestamp-format.standard", "ISO-8601")),
    ]
}
