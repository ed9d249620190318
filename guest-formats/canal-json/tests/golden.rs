//! Flink 1.18 golden vectors (tests/golden/vectors/canal-json) against the native canal-json
//! format: every serialization file (each row under each row kind) and every decode file.

/// Flink emits this row with `id` (INT NOT NULL) NULL (`"id":null`); a batch cannot hold a NULL in a
/// NOT NULL column, so the message fails with that reason (checked by `golden_tests!`).
const KNOWN: &[&str] = &["[not-null-id-is-null]"];

format_changelog::golden_tests!(canal_json_format, "canal-json", KNOWN);
