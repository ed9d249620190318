//! Random and mutated inputs never panic the canal-json decoder, and every batch keeps the contract.

use format_changelog::golden::{FuzzCase, fuzz, fuzz_tables, opts};

#[test]
fn random_bytes_never_panic() {
    let [table, products] = fuzz_tables("canal-json");
    let all: Vec<String> = canal_json_format::METADATA
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
            products.clone(),
            opts(&[
                ("database.include", "inv.*"),
                ("table.include", "products|orders"),
            ]),
            all,
        ),
        (
            products,
            opts(&[("timestamp-format.standard", "ISO-8601")]),
            vec![],
        ),
    ];
    fuzz(
        "canal-json",
        b"{}[]\":,0123456789.-eE tfnrul\\dataoldINSERTUPDATEDELETE_",
        &cases,
        &|(cols, o, keys)| {
            let d = canal_json_format::decoder(o, &format_common::golden::row_type(cols), keys)
                .expect("decoder");
            (d.output_row_type().clone(), Box::new(move |m| d.decode(m)))
        },
    );
}
