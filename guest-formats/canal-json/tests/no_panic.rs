//! Random and mutated inputs never panic the canal-json decoder, and every batch keeps the contract.

use format_changelog::golden::Keys::{All, Empty};
use format_changelog::golden::Table::{AllTypes, Products};
use format_changelog::golden::fuzz;

#[test]
fn random_bytes_never_panic() {
    fuzz(
        "canal-json",
        canal_json_format::decoder,
        canal_json_format::METADATA,
        b"{}[]\":,0123456789.-eE tfnrul\\dataoldINSERTUPDATEDELETE_",
        &[
            (AllTypes, &[], Empty),
            (Products, &[("ignore-parse-errors", "true")], All),
            (
                Products,
                &[
                    ("database.include", "inv.*"),
                    ("table.include", "products|orders"),
                ],
                All,
            ),
            (
                Products,
                &[("timestamp-format.standard", "ISO-8601")],
                Empty,
            ),
        ],
    );
}
