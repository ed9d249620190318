//! Validated options: the text as written (for display, secrets redacted) and the typed value of every
//! declared option, defaults applied.

use std::collections::BTreeMap;
use std::time::Duration;

use super::duration;
use super::value::Value;

/// Validated options with defaults applied, keyed by canonical key (per-field and prefix keys as written).
#[derive(Debug, Clone, Default)]
pub struct ResolvedOptions {
    pub(crate) values: BTreeMap<String, String>,
    /// The typed value of every declared option that is set or has a default.
    pub(crate) typed: BTreeMap<String, Value>,
    pub(crate) secrets: Vec<String>,
    /// Pass-through keys accepted and not applied (e.g. `properties.pulsar.reader.readerName`).
    pub(crate) passed_through: Vec<String>,
    /// The declared options the table set itself (canonical keys), not filled in from a default.
    pub(crate) written: std::collections::BTreeSet<String>,
}

/// Key names that carry credentials, whoever declares them (also catches pass-through `properties.*`).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "auth-params",
        "authparams",
        "auth.params",
        "token",
        "password",
        "passwd",
        "secret",
        "credential",
        "private-key",
        "privatekey",
        // TLS client key files (`tlsKeyFilePath`, `tls-key-file-path`): their path is not printed either.
        "keyfile",
        "key-file",
    ]
    .iter()
    .any(|s| k.contains(s))
}

pub const REDACTED: &str = "******";

impl ResolvedOptions {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }
    /// Whether the table set the declared option `key` itself (under any of its spellings), rather than
    /// taking its default.
    pub fn is_written(&self, key: &str) -> bool {
        self.written.contains(key)
    }
    /// The typed value of a declared option (its default when not set).
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.typed.get(key)
    }
    /// A declared boolean option (its default when not set).
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.value(key).and_then(Value::as_bool)
    }
    /// A declared integer option (its default when not set).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.value(key).and_then(Value::as_i64)
    }
    /// A declared duration option (its default when not set).
    pub fn duration(&self, key: &str) -> Option<Duration> {
        self.value(key).and_then(Value::as_duration)
    }
    /// A declared string or enum option (its default when not set).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.value(key).and_then(Value::as_str)
    }
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v.trim().eq_ignore_ascii_case("true"))
    }
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }
    pub fn get_duration(&self, key: &str) -> Option<Duration> {
        self.get(key).and_then(|v| duration::parse(v.trim()).ok())
    }
    /// A per-field option: `field_option("fields.#.kind", "id")` reads `fields.id.kind`.
    pub fn field(&self, pattern: &str, field: &str) -> Option<&str> {
        self.get(&pattern.replacen('#', field, 1))
    }
    /// All keys under a prefix family, prefix stripped (e.g. `properties.`).
    pub fn prefixed(&self, prefix: &str) -> BTreeMap<String, String> {
        self.values
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(prefix).map(|s| (s.to_string(), v.clone())))
            .collect()
    }
    /// Pass-through keys accepted and not applied, as written.
    pub fn passed_through(&self) -> &[String] {
        &self.passed_through
    }
    pub fn is_secret(&self, key: &str) -> bool {
        self.secrets.iter().any(|s| s == key) || is_secret_key(key)
    }
    /// Key/value pairs for printing, secrets replaced by `******`.
    pub fn display_pairs(&self) -> Vec<(String, String)> {
        self.values
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    if self.is_secret(k) {
                        REDACTED.to_string()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect()
    }
    /// Every (key, value), secrets included: for connectors, never for printing.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
    /// Inserts a value (used by the catalog for `connector`).
    pub fn insert(&mut self, key: &str, value: &str) {
        self.values.insert(key.to_string(), value.to_string());
    }
}
