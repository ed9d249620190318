//! Values: one check per [`OptionKind`] that yields a typed [`Value`], and its errors, rendered in the
//! host's voice (`'x' is not a boolean; ...`) or a plugin manifest's (`expected true or false, got `x``).

use std::time::Duration;

use super::decl::{Choices, OptionKind};
use super::duration;
use super::suggest::suggest;

/// A validated option value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Bool(bool),
    Int(i64),
    Double(f64),
    Duration(Duration),
    /// The declared spelling of an enum value.
    Enum(String),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) | Value::Enum(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Double(n) => Some(*n),
            Value::Int(n) => Some(*n as f64),
            _ => None,
        }
    }
    pub fn as_duration(&self) -> Option<Duration> {
        match self {
            Value::Duration(d) => Some(*d),
            _ => None,
        }
    }
}

/// Why a value does not fit its declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueError {
    NotBool,
    NotInt,
    IntOutOfRange(i64),
    NotNumber,
    NumberOutOfRange(f64),
    /// The duration parser's own message.
    Duration(String),
    NotAllowed {
        suggestion: Option<String>,
    },
}

/// Checks `text` against `kind`. As in Flink, booleans and enum values are case-insensitive; strings are
/// kept verbatim (a tab delimiter, a null literal with spaces), everything else is read trimmed.
pub fn parse_value(kind: &OptionKind, text: &str) -> Result<Value, ValueError> {
    let v = text.trim();
    match kind {
        OptionKind::String => Ok(Value::String(text.to_string())),
        OptionKind::Bool => parse_bool(v).map(Value::Bool).ok_or(ValueError::NotBool),
        OptionKind::Int { min, max } => match v.parse::<i64>() {
            Ok(n) if n >= *min && n <= *max => Ok(Value::Int(n)),
            Ok(n) => Err(ValueError::IntOutOfRange(n)),
            Err(_) => Err(ValueError::NotInt),
        },
        OptionKind::Double { min, max } => match v.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= *min && n <= *max => Ok(Value::Double(n)),
            Ok(n) => Err(ValueError::NumberOutOfRange(n)),
            Err(_) => Err(ValueError::NotNumber),
        },
        OptionKind::Duration => duration::parse(v)
            .map(Value::Duration)
            .map_err(ValueError::Duration),
        OptionKind::Enum(values) => match match_enum(&values.to_vec(), v) {
            Some(s) => Ok(Value::Enum(s.to_string())),
            None => Err(ValueError::NotAllowed {
                suggestion: suggest(v, values.iter()).map(str::to_string),
            }),
        },
    }
}

impl ValueError {
    /// The host's message (connector options, job settings).
    pub fn host_message(&self, kind: &OptionKind, written: &str) -> String {
        match (self, kind) {
            (ValueError::NotBool, _) => {
                format!("'{written}' is not a boolean; allowed values: true, false")
            }
            (ValueError::NotInt, _) => {
                format!(
                    "'{written}' is not a valid integer; expected {}",
                    kind.name()
                )
            }
            (ValueError::IntOutOfRange(n), _) => {
                format!("{n} is out of range; expected {}", kind.name())
            }
            (ValueError::NotNumber, OptionKind::Double { min, max }) => format!(
                "'{written}' is not a valid number; expected a number between {min} and {max}"
            ),
            (ValueError::NumberOutOfRange(n), OptionKind::Double { min, max }) => {
                format!("{n} is out of range; expected a number between {min} and {max}")
            }
            (ValueError::NotNumber | ValueError::NumberOutOfRange(_), _) => {
                format!("'{written}' is not a valid number")
            }
            (ValueError::Duration(m), _) => m.clone(),
            (ValueError::NotAllowed { suggestion }, _) => {
                let hint = suggestion
                    .as_ref()
                    .map(|s| format!("did you mean '{s}'? "))
                    .unwrap_or_default();
                format!(
                    "'{written}' is not allowed; {hint}allowed values: {}",
                    choices(kind).join(", ")
                )
            }
        }
    }

    /// A plugin manifest's message (`option `name`` is added by the caller as context).
    pub fn plugin_message(&self, kind: &OptionKind, written: &str) -> String {
        match self {
            ValueError::NotBool => format!("expected true or false, got `{written}`"),
            ValueError::NotInt | ValueError::IntOutOfRange(_) => {
                format!("expected an integer, got `{written}`")
            }
            ValueError::NotNumber | ValueError::NumberOutOfRange(_) => {
                format!("expected a number, got `{written}`")
            }
            ValueError::Duration(m) => m.clone(),
            ValueError::NotAllowed { .. } => format!(
                "expected one of {}, got `{written}`",
                choices(kind).join(", ")
            ),
        }
    }
}

fn choices(kind: &OptionKind) -> Vec<&str> {
    match kind {
        OptionKind::Enum(c) => c.to_vec(),
        _ => Vec::new(),
    }
}

impl Choices {
    /// Whether `v` is one of the choices (in any case).
    pub fn contains(&self, v: &str) -> bool {
        self.iter().any(|c| c.eq_ignore_ascii_case(v))
    }
}

/// Checks one value against its declared kind.
pub fn check_value(kind: &OptionKind, value: &str) -> Result<(), String> {
    normalize_value(kind, value).map(|_| ())
}

/// Checks one value against its declared kind and returns it in canonical form. As in Flink, booleans and
/// enum values are case-insensitive (`'TRUE'`, `'EXCEPT_key'`): a boolean becomes `true`/`false`, an enum
/// value the declared spelling; every other value is returned as written.
pub fn normalize_value(kind: &OptionKind, value: &str) -> Result<String, String> {
    match parse_value(kind, value) {
        Ok(Value::Bool(b)) => Ok(b.to_string()),
        Ok(Value::Enum(s)) => Ok(s),
        Ok(_) => Ok(value.to_string()),
        Err(e) => Err(e.host_message(kind, value)),
    }
}

/// A boolean as Flink reads one: `true`/`false` in any case.
pub fn parse_bool(v: &str) -> Option<bool> {
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// The declared spelling of an enum value written in any case.
pub fn match_enum<'a>(values: &[&'a str], v: &str) -> Option<&'a str> {
    values
        .iter()
        .find(|a| **a == v)
        .or_else(|| values.iter().find(|a| a.eq_ignore_ascii_case(v)))
        .copied()
}
