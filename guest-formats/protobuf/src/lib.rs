//! Flink's `protobuf` format (flink-protobuf 1.18) over a descriptor set instead of generated Java
//! classes: `protobuf.descriptor-file` names a `FileDescriptorSet` (`protoc --descriptor_set_out=F
//! --include_imports`) in the plugin's own read-only folder (ADR 0022), `protobuf.message-name` the
//! message type. Flink's type mapping, schema validation (its messages), `ignore-parse-errors`,
//! `read-default-values` (forced on for proto3, as Flink 1.18) and `write-null-string-literal`.
//!
//! Native use: `protobuf_format::decoder_in(folder, &options, &row_type)?.decode(&messages)?`;
//! in the wasm component the folder is the preopen's root (`/`).

mod decode;
mod encode;
mod java;
mod schema;

use std::path::{Component, Path};

use format_common::{
    ColumnBatch, ConfigError, DecodedBatch, EncodedBatch, MessageBatch, RowType, bool_option,
    check_known, config_error, option, validate_row_type,
};
use prost_reflect::{DescriptorPool, MessageDescriptor, Syntax};

pub use schema::Plan;

pub const OPTIONS: &[&str] = &[
    "descriptor-file",
    "message-name",
    "message-class-name",
    "ignore-parse-errors",
    "read-default-values",
    "write-null-string-literal",
];

/// Largest descriptor set read (a set of thousands of messages is a few MiB).
const MAX_DESCRIPTOR_BYTES: u64 = 64 << 20;

/// The configuration both directions share.
#[derive(Debug, Clone)]
pub struct Config {
    pub message: MessageDescriptor,
    pub plan: Plan,
    pub ignore_parse_errors: bool,
    /// Absent fields read as their defaults (always for proto3, as Flink 1.18 forces).
    pub read_default_values: bool,
    pub write_null_string_literal: String,
}

impl Config {
    /// Reads the options; the descriptor file is opened relative to `folder`.
    pub fn new(
        folder: &Path,
        options: &[(String, String)],
        row_type: &RowType,
    ) -> Result<Config, ConfigError> {
        check_known(options, OPTIONS)?;
        validate_row_type(row_type)?;
        let file = option(options, "descriptor-file")
            .filter(|f| !f.is_empty())
            .ok_or_else(|| {
                config_error(
                    Some("descriptor-file"),
                    "is required: the descriptor set of the message (protoc --descriptor_set_out=F --include_imports) in the plugin's descriptors folder",
                )
            })?;
        let pool = load_pool(folder, file)?;
        let name = option(options, "message-name").filter(|n| !n.is_empty());
        let class = option(options, "message-class-name").filter(|n| !n.is_empty());
        let message = match (name, class) {
            (Some(name), None) => find_message(&pool, file, name)?,
            (None, Some(class)) => java::find_class(&pool, file, class)?,
            (Some(_), Some(_)) => {
                return Err(config_error(
                    Some("message-class-name"),
                    "give either message-name (the protobuf name) or message-class-name (Flink's Java class name), not both",
                ));
            }
            (None, None) => {
                return Err(config_error(
                    Some("message-name"),
                    "is required: the full name of the message type (package.Message), or Flink's message-class-name",
                ));
            }
        };
        let ignore_parse_errors = bool_option(options, "ignore-parse-errors", false)?;
        let read_default_values = bool_option(options, "read-default-values", false)?
            || message.parent_file().syntax() == Syntax::Proto3;
        // Taken verbatim (not trimmed): a literal with spaces is the user's choice.
        let write_null_string_literal = options
            .iter()
            .find(|(n, _)| n == "write-null-string-literal")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let plan = Plan::new(&message, row_type)
            .map_err(|m| config_error(None, format!("{m} (message `{}`)", message.full_name())))?;
        Ok(Config {
            message,
            plan,
            ignore_parse_errors,
            read_default_values,
            write_null_string_literal,
        })
    }
}

/// Reads and parses descriptor set `file` of `folder`.
fn load_pool(folder: &Path, file: &str) -> Result<DescriptorPool, ConfigError> {
    let err = |m: String| config_error(Some("descriptor-file"), m);
    let rel = Path::new(file);
    if !rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(err(format!(
            "`{file}` must be a path relative to the plugin's descriptors folder, without `..`"
        )));
    }
    let path = folder.join(rel);
    let len = std::fs::metadata(&path)
        .map_err(|e| {
            err(format!(
                "cannot read `{file}` in the plugin's descriptors folder: {e}"
            ))
        })?
        .len();
    if len > MAX_DESCRIPTOR_BYTES {
        return Err(err(format!(
            "`{file}` is {len} bytes, more than the {MAX_DESCRIPTOR_BYTES} a descriptor set may have"
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| {
        err(format!(
            "cannot read `{file}` in the plugin's descriptors folder: {e}"
        ))
    })?;
    DescriptorPool::decode(bytes.as_slice()).map_err(|e| {
        err(format!(
            "`{file}` is not a valid descriptor set (write one with protoc --descriptor_set_out={file} --include_imports): {e}"
        ))
    })
}

fn find_message(
    pool: &DescriptorPool,
    file: &str,
    name: &str,
) -> Result<MessageDescriptor, ConfigError> {
    let name = name.strip_prefix('.').unwrap_or(name);
    pool.get_message_by_name(name).ok_or_else(|| {
        let mut known: Vec<String> = pool
            .all_messages()
            .filter(|m| !m.is_map_entry())
            .map(|m| m.full_name().to_owned())
            .filter(|n| !n.starts_with("google.protobuf."))
            .collect();
        known.sort();
        let more = known.len().saturating_sub(20);
        known.truncate(20);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        config_error(
            Some("message-name"),
            format!(
                "message `{name}` is not in descriptor set `{file}` (its messages: {}{more})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        )
    })
}

/// A configured decoder.
#[derive(Debug)]
pub struct Decoder {
    config: Config,
    row_type: RowType,
}

/// A configured encoder.
#[derive(Debug)]
pub struct Encoder {
    config: Config,
    row_type: RowType,
}

/// A decoder reading its descriptor set from `folder`.
pub fn decoder_in(
    folder: &Path,
    options: &[(String, String)],
    row_type: &RowType,
) -> Result<Decoder, ConfigError> {
    Ok(Decoder {
        config: Config::new(folder, options, row_type)?,
        row_type: row_type.clone(),
    })
}

/// An encoder reading its descriptor set from `folder`.
pub fn encoder_in(
    folder: &Path,
    options: &[(String, String)],
    row_type: &RowType,
) -> Result<Encoder, ConfigError> {
    Ok(Encoder {
        config: Config::new(folder, options, row_type)?,
        row_type: row_type.clone(),
    })
}

/// The component's factories: the descriptor set is in the plugin's preopened folder, mounted at `/`.
pub fn decoder(options: &[(String, String)], row_type: &RowType) -> Result<Decoder, ConfigError> {
    decoder_in(Path::new("/"), options, row_type)
}

/// See [`decoder`].
pub fn encoder(options: &[(String, String)], row_type: &RowType) -> Result<Encoder, ConfigError> {
    encoder_in(Path::new("/"), options, row_type)
}

impl Decoder {
    /// The full name of the message type read.
    pub fn message_name(&self) -> &str {
        self.config.message.full_name()
    }

    /// One row or one row error per message.
    pub fn decode(&self, messages: &MessageBatch) -> Result<DecodedBatch, String> {
        decode::decode_batch(&self.config, &self.row_type, messages)
    }
}

impl Encoder {
    /// One payload (or one row error) per row.
    pub fn encode(&self, rows: &ColumnBatch) -> Result<EncodedBatch, String> {
        encode::encode_batch(&self.config, &self.row_type, rows)
    }
}

format_common::export_component!(insert_only "protobuf");
