//! Random and mutated inputs never panic the raw decoder, and every batch keeps the contract
//! (the native stand-in for the cargo-fuzz target in guest-formats/fuzz).

use format_common::golden;

#[test]
fn random_bytes_never_panic() {
    let random = std::env::var("NO_PANIC_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let inputs = golden::fuzz_inputs("raw", ALPHABET, random);
    for (cols, options) in cases() {
        let rt = golden::row_type(&cols);
        let d = raw_format::decoder(&options, &rt).expect("decoder");
        golden::no_panics(&rt, &inputs, &|m| d.decode(m));
    }
}

const ALPHABET: &[u8] = &[0, 1, 0x7f, 0x80, 0xff, 0xfe, 0xd8, 0xdc, b'a'];

fn cases() -> Vec<golden::Case> {
    let mut out = Vec::new();
    for ty in [
        "STRING",
        "BYTES",
        "BOOLEAN",
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "FLOAT",
        "DOUBLE",
        "INT NOT NULL",
    ] {
        for cs in ["UTF-8", "UTF-16", "UTF-16LE", "ISO-8859-1", "US-ASCII"] {
            out.push((
                vec![("value".to_owned(), ty.to_owned())],
                vec![
                    ("charset".to_owned(), cs.to_owned()),
                    ("endianness".to_owned(), "little-endian".to_owned()),
                ],
            ));
        }
    }
    out
}
