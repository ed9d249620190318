//! Random and mutated payloads (the golden vectors' bytes truncated and flipped, random bytes) never
//! panic the protobuf decoder, and every batch keeps the contract: one row or one error per message.

use std::path::PathBuf;

use format_common::golden;

#[test]
fn random_and_mutated_bytes_never_panic() {
    let random = std::env::var("NO_PANIC_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let inputs = golden::fuzz_inputs("../protobuf/vectors", ALPHABET, random);
    let folder =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/protobuf/vectors");
    for name in [
        "all-types-proto3.json",
        "record-proto2.json",
        "record-proto2-read-default-values.json",
        "decode-proto3-ignore-parse-errors.json",
    ] {
        let file = golden::load(&format!("../protobuf/vectors/{name}"));
        let rt = golden::row_type(&golden::columns(&file));
        let d = protobuf_format::decoder_in(&folder, &golden::options(&file), &rt).expect(name);
        golden::no_panics(&rt, &inputs, &|m| d.decode(m));
    }
}

/// Bytes that matter to the wire format: varint continuation, wire types, lengths, the fields' tags.
const ALPHABET: &[u8] = &[
    0x00, 0x01, 0x02, 0x07, 0x08, 0x0a, 0x12, 0x7f, 0x80, 0xff, 0x8a, 0x01,
];
