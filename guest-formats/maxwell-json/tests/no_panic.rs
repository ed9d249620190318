//! Random and mutated inputs never panic the maxwell-json decoder, and every batch keeps the contract.

use format_changelog::golden::Keys::{All, Empty};
use format_changelog::golden::Table::{AllTypes, Products};
use format_changelog::golden::fuzz;

#[test]
fn random_bytes_never_panic() {
    fuzz(
        "maxwell-json",
        maxwell_json_format::decoder,
        maxwell_json_format::METADATA,
        b"{}[]\":,0123456789.-eE tfnrul\\dataoldinsertupdelt_",
        &[
            (AllTypes, &[], Empty),
            (Products, &[("ignore-parse-errors", "true")], All),
            (Products, &[("timestamp-format.standard", "ISO-8601")], All),
        ],
    );
}
