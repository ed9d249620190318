//! The rules of an `upsert-pulsar` table (ADR 0016), as StreamNative's and Apache's `upsert-pulsar` (and
//! Flink's `upsert-kafka`, which they follow): a `PRIMARY KEY` is the message key, `key.format` and
//! `value.format` are required and insert-only, one topic, read from the earliest message, written with the
//! key-hash router. Errors name the table's option or constraint and say what to do.

use anyhow::{Result, bail};

use super::super::options as opt;
use super::FormatSpec;
use crate::connector_api::CatalogTable;
use crate::connector_api::changelog::ChangelogMode;

/// The router an upsert table is written with: every version of a key on one partition, hashed over the
/// key bytes as Flink hashes them.
pub const ROUTER: &str = "key-hash";

/// Checks made on the table's options and constraints before anything is decoded.
pub(super) fn check_options(table: &CatalogTable, connector: &str) -> Result<()> {
    let o = &table.options;
    if table
        .def
        .primary_key
        .as_ref()
        .is_none_or(|pk| pk.is_empty())
    {
        bail!(
            "'{connector}' tables require to define a PRIMARY KEY constraint. The PRIMARY KEY specifies which columns should be read from or write to the Pulsar message key. The PRIMARY KEY also defines records in the '{connector}' table should update or delete on which keys (add `PRIMARY KEY (col, ...) NOT ENFORCED`)"
        );
    }
    if o.contains("key.fields") {
        bail!(
            "option 'key.fields': not supported by '{connector}': the message key is the PRIMARY KEY (remove 'key.fields')"
        );
    }
    if !o.contains("key.format") {
        bail!(
            "option 'key.format': '{connector}' requires a key format, the format of the PRIMARY KEY columns in the message key (e.g. 'key.format' = 'json')"
        );
    }
    if o.contains(opt::TOPIC_PATTERN) {
        bail!(
            "option '{}': '{connector}' reads and writes exactly one topic; set 'topic'",
            opt::TOPIC_PATTERN
        );
    }
    // What the table wrote (the resolved options hold defaults too).
    for (key, _, _) in &table.def.options {
        if key.starts_with("scan.startup.") || key.starts_with("properties.scan.startup.") {
            bail!(
                "option '{key}': not supported by '{connector}', which always reads a topic from its earliest message (a key's latest value may be anywhere in it); remove the option"
            );
        }
    }
    if let Some(router) = o.get(opt::ROUTER).map(str::trim)
        && !router.is_empty()
        && router != ROUTER
    {
        bail!(
            "option '{}': '{connector}' always writes with the '{ROUTER}' router (every version of a key on one partition), not '{router}'; remove the option",
            opt::ROUTER
        );
    }
    Ok(())
}

/// The key and value formats must be insert-only: the row kinds are the connector's (a value upserts its
/// key, a tombstone deletes it), not the format's.
pub(super) fn check_formats(
    table: &CatalogTable,
    connector: &str,
    value: Option<&FormatSpec>,
    key: Option<&FormatSpec>,
) -> Result<()> {
    for spec in [value, key].into_iter().flatten() {
        if spec.changelog_mode != ChangelogMode::INSERT_ONLY {
            // The option as the table spells it (`value.format` or `format`).
            let option = table
                .def
                .options
                .iter()
                .map(|(k, _, _)| k.as_str())
                .find(|k| *k == spec.role || (spec.role == "format" && *k == "value.format"))
                .unwrap_or(&spec.role);
            bail!(
                "option '{option}': '{connector}' connector doesn't support '{}' as {} format, because '{}' is not in insert-only mode",
                spec.plugin,
                if spec.role == "key.format" {
                    "key"
                } else {
                    "value"
                },
                spec.plugin
            );
        }
    }
    Ok(())
}
