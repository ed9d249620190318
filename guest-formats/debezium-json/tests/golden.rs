//! Flink 1.18 golden vectors (tests/golden/vectors/debezium-json) against the native debezium-json
//! format: every serialization file (each row under each row kind) and every decode file.

/// Flink emits these rows with `id` (INT NOT NULL) NULL (`{"id":null}`, no `id`, and with
/// ignore-parse-errors an `id` that does not convert); a batch cannot hold a NULL in a NOT NULL column,
/// so the message fails with that reason (checked by `golden_tests!`).
const KNOWN: &[&str] = &[
    "[not-null-id-is-null]",
    "[not-null-id-missing]",
    "decode-ignore-parse-errors.json [id-overflow]",
];

format_changelog::golden_tests!(debezium_json_format, "debezium-json", KNOWN);
