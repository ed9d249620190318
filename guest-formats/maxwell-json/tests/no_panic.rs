//! Random and mutated inputs never panic the maxwell-json decoder, and every batch keeps the contract.

use format_changelog::golden::{FuzzCase, fuzz, fuzz_tables, opts};

#[test]
fn random_bytes_never_panic() {
    let [table, products] = fuzz_tables("maxwell-json");
    let all: Vec<String> = maxwell_json_format::METADATA
        .iter()
        .map(|k| k.key.to_owned())
        .collect();
    let cases: Vec<FuzzCase> = vec![
        (table, vec![], vec![]),
        (
            products.clone(),
            opts(&[("ignore-parse-errors", "true")]),
            all.clone(),
        ),
        (
            products,
            opts(&[("timestamp-format.standard", "ISO-8601")]),
            all,
        ),
    ];
    fuzz(
        "maxwell-json",
        b"{}[]\":,0123456789.-eE tfnrul\\dataoldinsertupdelt_",
        &cases,
        &|(cols, o, keys)| {
            let d = maxwell_json_format::decoder(o, &format_common::golden::row_type(cols), keys)
                .expect("decoder");
            (d.output_row_type().clone(), Box::new(move |m| d.decode(m)))
        },
    );
}
