//! The json format's options (Flink's names without `json.`) and its row-type rule.

use format_common::{
    ConfigError, DataType, RowType, bool_option, check_known, config_error, option, type_string,
};

/// The options this format takes (without the `json.` prefix).
pub const OPTIONS: &[&str] = &[
    "fail-on-missing-field",
    "ignore-parse-errors",
    "timestamp-format.standard",
    "map-null-key.mode",
    "map-null-key.literal",
    "encode.decimal-as-plain-number",
    "encode.ignore-null-fields",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullKeyMode {
    Fail,
    Drop,
    Literal,
}

/// Parsed options.
#[derive(Debug, Clone)]
pub struct JsonOptions {
    pub fail_on_missing_field: bool,
    pub ignore_parse_errors: bool,
    /// `ISO-8601` (`T` between date and time) instead of `SQL` (a space).
    pub iso8601: bool,
    pub map_null_key_mode: NullKeyMode,
    pub map_null_key_literal: String,
    pub decimal_as_plain_number: bool,
    pub ignore_null_fields: bool,
}

impl JsonOptions {
    pub fn parse(options: &[(String, String)]) -> Result<JsonOptions, ConfigError> {
        check_known(options, OPTIONS)?;
        let fail_on_missing_field = bool_option(options, "fail-on-missing-field", false)?;
        let ignore_parse_errors = bool_option(options, "ignore-parse-errors", false)?;
        let iso8601 = match option(options, "timestamp-format.standard").unwrap_or("SQL") {
            s if s.eq_ignore_ascii_case("SQL") => false,
            s if s.eq_ignore_ascii_case("ISO-8601") => true,
            s => {
                return Err(config_error(
                    Some("timestamp-format.standard"),
                    format!(
                        "Unsupported value '{s}' for timestamp-format.standard. Supported values are [SQL, ISO-8601]."
                    ),
                ));
            }
        };
        let map_null_key_mode = match option(options, "map-null-key.mode").unwrap_or("FAIL") {
            s if s.eq_ignore_ascii_case("FAIL") => NullKeyMode::Fail,
            s if s.eq_ignore_ascii_case("DROP") => NullKeyMode::Drop,
            s if s.eq_ignore_ascii_case("LITERAL") => NullKeyMode::Literal,
            s => {
                return Err(config_error(
                    Some("map-null-key.mode"),
                    format!(
                        "Unsupported value '{s}' for option map-null-key.mode. Supported values are [LITERAL, FAIL, DROP]."
                    ),
                ));
            }
        };
        Ok(JsonOptions {
            fail_on_missing_field,
            ignore_parse_errors,
            iso8601,
            map_null_key_mode,
            map_null_key_literal: options
                .iter()
                .find(|(n, _)| n == "map-null-key.literal")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| "null".into()),
            decimal_as_plain_number: bool_option(options, "encode.decimal-as-plain-number", false)?,
            ignore_null_fields: bool_option(options, "encode.ignore-null-fields", false)?,
        })
    }
}

pub(crate) fn check_types(rt: &RowType) -> Result<(), ConfigError> {
    format_common::validate_row_type(rt)?;
    for (i, node) in rt.types.iter().enumerate() {
        if let DataType::Map(m) = &node.data_type
            && !matches!(
                rt.types[m.key as usize].data_type,
                DataType::Char(_) | DataType::Varchar(_)
            )
        {
            return Err(config_error(
                None,
                format!(
                    "JSON format doesn't support non-string as key type of map. The type is: {}",
                    type_string(rt, i)
                ),
            ));
        }
    }
    Ok(())
}
