//! The options the changelog formats share with the json format (Flink's names without the format
//! prefix), parsed by the json format itself so values and messages are the same.

use format_common::{ConfigError, config_error};
use json_codec::JsonOptions;

/// Options every changelog format takes (Flink 1.18's `*JsonFormatOptions`, without the prefix).
pub const SHARED: &[&str] = &[
    "ignore-parse-errors",
    "timestamp-format.standard",
    "map-null-key.mode",
    "map-null-key.literal",
    "encode.decimal-as-plain-number",
];

/// Not an option of the changelog formats, but Flink's factories run the json format's validator,
/// which reads it (see [`decoding`]); accepted and otherwise ignored.
const FAIL_ON_MISSING_FIELD: &str = "fail-on-missing-field";

/// Parses `options` of a format whose own options (besides [`SHARED`]) are `own`. Unknown names are
/// refused.
pub fn parse(options: &[(String, String)], own: &[&str]) -> Result<JsonOptions, ConfigError> {
    for (name, _) in options {
        let name = name.as_str();
        if !SHARED.contains(&name) && !own.contains(&name) && name != FAIL_ON_MISSING_FIELD {
            return Err(config_error(
                Some(name),
                format!(
                    "Unsupported options found: {name}. Supported options: {}",
                    SHARED
                        .iter()
                        .chain(own)
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let json: Vec<(String, String)> = options
        .iter()
        .filter(|(n, _)| SHARED.contains(&n.as_str()) || n == FAIL_ON_MISSING_FIELD)
        .cloned()
        .collect();
    JsonOptions::parse(&json)
}

/// The decoding rule Flink applies (`validateDecodingFormatOptions`): `fail-on-missing-field` with
/// `ignore-parse-errors` is refused; otherwise the changelog formats never fail on a missing field.
pub fn decoding(mut opts: JsonOptions) -> Result<JsonOptions, ConfigError> {
    if opts.fail_on_missing_field && opts.ignore_parse_errors {
        return Err(config_error(
            Some("ignore-parse-errors"),
            "fail-on-missing-field and ignore-parse-errors shouldn't both be true.",
        ));
    }
    opts.fail_on_missing_field = false;
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn shared_and_own_options() {
        let opts = parse(
            &o(&[
                ("ignore-parse-errors", "true"),
                ("timestamp-format.standard", "ISO-8601"),
                ("schema-include", "true"),
            ]),
            &["schema-include"],
        )
        .unwrap();
        assert!(opts.ignore_parse_errors && opts.iso8601);
        let e = parse(&o(&[("schema-include", "true")]), &[]).unwrap_err();
        assert_eq!(e.option.as_deref(), Some("schema-include"));
        let e = parse(&o(&[("timestamp-format.standard", "RFC-3339")]), &[]).unwrap_err();
        assert!(e.message.contains("Supported values are [SQL, ISO-8601]"));
        let both = parse(
            &o(&[
                ("ignore-parse-errors", "true"),
                ("fail-on-missing-field", "true"),
            ]),
            &[],
        )
        .unwrap();
        assert!(decoding(both).is_err());
        let alone = parse(&o(&[("fail-on-missing-field", "true")]), &[]).unwrap();
        assert!(!decoding(alone).unwrap().fail_on_missing_field);
    }
}
