//! Random and mutated inputs never panic the debezium-json decoder, and every batch keeps the contract.

use format_changelog::golden::{FuzzCase, fuzz, fuzz_tables, opts};

#[test]
fn random_bytes_never_panic() {
    let [table, products] = fuzz_tables("debezium-json");
    let all: Vec<String> = debezium_json_format::METADATA
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
        (products.clone(), opts(&[("schema-include", "true")]), all),
        (
            products,
            opts(&[("timestamp-format.standard", "ISO-8601")]),
            vec![],
        ),
    ];
    fuzz(
        "debezium-json",
        b"{}[]\":,0123456789.-eE tfnrul\\abcdopu_",
        &cases,
        &|(cols, o, keys)| {
            let d = debezium_json_format::decoder(o, &format_common::golden::row_type(cols), keys)
                .expect("decoder");
            (d.output_row_type().clone(), Box::new(move |m| d.decode(m)))
        },
    );
}
