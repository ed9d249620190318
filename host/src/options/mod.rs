//! Options declared once.
//!
//! Every connector (and later every format) declares its `WITH (...)` options as an [`OptionSet`] of
//! [`OptionDecl`]s plus [`Rule`]s. The same declarations drive validation ([`OptionSet::validate`]), the
//! `validate` command's printout (secrets redacted through [`ResolvedOptions::display_pairs`]) and the generated
//! `docs/options.md` ([`render_markdown`]).
//!
//! Keys come in three shapes: exact keys (`print-identifier`), prefix families (`properties.*`: any key under the
//! prefix, passed through to a client) and per-field keys (`fields.#.kind`: `#` is a column of the table).

pub mod duration;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::sql::Pos;

/// The type of an option's value.
#[derive(Debug, Clone, PartialEq)]
pub enum OptionKind {
    String,
    Bool,
    /// An integer within an inclusive range.
    Int {
        min: i64,
        max: i64,
    },
    /// A floating-point number within an inclusive range.
    Double {
        min: f64,
        max: f64,
    },
    /// A Flink duration: `500ms`, `10 s`, `1min`, `2h`; a bare number is milliseconds.
    Duration,
    /// One of a fixed set of values (compared case-sensitively, as the peer connectors do).
    Enum(&'static [&'static str]),
}

impl OptionKind {
    fn name(&self) -> String {
        match self {
            OptionKind::String => "string".into(),
            OptionKind::Bool => "boolean".into(),
            OptionKind::Int { min, max } => {
                if *min == i64::MIN && *max == i64::MAX {
                    "integer".into()
                } else if *max == i64::MAX {
                    format!("integer ≥ {min}")
                } else {
                    format!("integer {min}..={max}")
                }
            }
            OptionKind::Double { min, max } => format!("number {min}..={max}"),
            OptionKind::Duration => "duration".into(),
            OptionKind::Enum(values) => format!("enum: {}", values.join(" \\| ")),
        }
    }
}

/// One option, declared once.
#[derive(Debug, Clone)]
pub struct OptionDecl {
    /// Canonical key. A trailing `.*` declares a prefix family; a `#` segment stands for a column name.
    pub key: &'static str,
    /// Other spellings accepted for the same option (older or newer names).
    pub aliases: &'static [&'static str],
    pub kind: OptionKind,
    pub required: bool,
    pub default: Option<&'static str>,
    pub doc: &'static str,
    /// Redacted in every printout.
    pub secret: bool,
}

impl OptionDecl {
    pub const fn new(key: &'static str, kind: OptionKind, doc: &'static str) -> Self {
        OptionDecl {
            key,
            aliases: &[],
            kind,
            required: false,
            default: None,
            doc,
            secret: false,
        }
    }
    pub const fn string(key: &'static str, doc: &'static str) -> Self {
        Self::new(key, OptionKind::String, doc)
    }
    pub const fn boolean(key: &'static str, doc: &'static str) -> Self {
        Self::new(key, OptionKind::Bool, doc)
    }
    pub const fn int(key: &'static str, min: i64, max: i64, doc: &'static str) -> Self {
        Self::new(key, OptionKind::Int { min, max }, doc)
    }
    pub const fn double(key: &'static str, min: f64, max: f64, doc: &'static str) -> Self {
        Self::new(key, OptionKind::Double { min, max }, doc)
    }
    pub const fn duration(key: &'static str, doc: &'static str) -> Self {
        Self::new(key, OptionKind::Duration, doc)
    }
    pub const fn enumeration(
        key: &'static str,
        values: &'static [&'static str],
        doc: &'static str,
    ) -> Self {
        Self::new(key, OptionKind::Enum(values), doc)
    }
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub const fn default(mut self, value: &'static str) -> Self {
        self.default = Some(value);
        self
    }
    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Self {
        self.aliases = aliases;
        self
    }
    pub const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    fn is_prefix(&self) -> bool {
        self.key.ends_with(".*")
    }

    fn spellings(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.key).chain(self.aliases.iter().copied())
    }

    /// Does `key` name this option? Returns the column for per-field keys.
    fn matches(&self, key: &str) -> Option<Match> {
        for spelling in self.spellings() {
            if let Some(prefix) = spelling.strip_suffix('*') {
                if key.len() > prefix.len() && key.starts_with(prefix) {
                    return Some(Match { field: None });
                }
            } else if let Some((before, after)) = spelling.split_once('#') {
                if key.len() > before.len() + after.len()
                    && key.starts_with(before)
                    && key.ends_with(after)
                {
                    let field = &key[before.len()..key.len() - after.len()];
                    return Some(Match {
                        field: Some(field.to_string()),
                    });
                }
            } else if spelling == key {
                return Some(Match { field: None });
            }
        }
        None
    }
}

struct Match {
    field: Option<String>,
}

/// A cross-option rule.
#[derive(Debug, Clone)]
pub enum Rule {
    /// At most one of the two may be set.
    MutuallyExclusive(&'static str, &'static str),
    /// At least one of these must be set.
    OneOf(&'static [&'static str]),
    /// When `option` has value `equals`, `requires` must be set.
    RequiredWhen {
        option: &'static str,
        equals: &'static str,
        requires: &'static str,
    },
    /// `min` must not exceed `max` (per-field keys are checked per column).
    NotGreater {
        min: &'static str,
        max: &'static str,
    },
}

/// The options of one connector or format.
#[derive(Debug, Clone)]
pub struct OptionSet {
    /// What declares them, e.g. `connector 'print'`.
    pub owner: String,
    pub doc: &'static str,
    pub options: Vec<OptionDecl>,
    pub rules: Vec<Rule>,
}

/// An option error: the table, the option and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionError {
    pub table: String,
    pub option: String,
    pub pos: Option<Pos>,
    pub message: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(pos) = self.pos {
            write!(f, "{pos}: ")?;
        }
        write!(
            f,
            "table '{}', option '{}': {}",
            self.table, self.option, self.message
        )
    }
}

impl std::error::Error for OptionError {}

/// Validated options with defaults applied, keyed by canonical key (per-field and prefix keys as written).
#[derive(Debug, Clone, Default)]
pub struct ResolvedOptions {
    values: BTreeMap<String, String>,
    secrets: Vec<String>,
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

impl OptionSet {
    pub fn new(
        owner: impl Into<String>,
        doc: &'static str,
        options: Vec<OptionDecl>,
        rules: Vec<Rule>,
    ) -> Self {
        OptionSet {
            owner: owner.into(),
            doc,
            options,
            rules,
        }
    }

    fn find(&self, key: &str) -> Option<(&OptionDecl, Match)> {
        // Exact spellings win over families.
        self.options
            .iter()
            .find(|d| d.spellings().any(|s| s == key))
            .map(|d| (d, Match { field: None }))
            .or_else(|| {
                self.options
                    .iter()
                    .find_map(|d| d.matches(key).map(|m| (d, m)))
            })
    }

    /// Canonical form of a written key (alias → canonical, per-field alias → per-field canonical).
    fn canonical(decl: &OptionDecl, key: &str, m: &Match) -> String {
        if decl.is_prefix() {
            key.to_string()
        } else if let Some(field) = &m.field {
            decl.key.replacen('#', field, 1)
        } else {
            decl.key.to_string()
        }
    }

    fn suggest(&self, key: &str, fields: &[String]) -> Option<String> {
        let mut candidates: Vec<String> = Vec::new();
        for d in &self.options {
            for s in d.spellings() {
                if s.contains('#') {
                    candidates.extend(fields.iter().map(|f| s.replacen('#', f, 1)));
                } else {
                    candidates.push(s.trim_end_matches('*').to_string());
                }
            }
        }
        suggest(key, candidates.iter().map(String::as_str)).map(str::to_string)
    }

    /// Validates the `WITH (...)` options of `table` (`connector` excluded) against these declarations.
    /// `fields` are the table's columns, for per-field keys. Every error is reported, not only the first.
    /// Values are stored normalised ([`normalize_value`]: booleans lower-case, enum values as declared).
    pub fn validate(
        &self,
        table: &str,
        raw: &[(String, String, Pos)],
        fields: &[String],
    ) -> Result<ResolvedOptions, Vec<OptionError>> {
        let (resolved, errors) = self.resolve(table, raw, fields);
        if errors.is_empty() {
            Ok(resolved)
        } else {
            Err(errors)
        }
    }

    /// [`OptionSet::validate`] that also returns what could be resolved when there are errors (the valid
    /// options, defaults where nothing was written), so later checks can still run and report theirs.
    pub fn resolve(
        &self,
        table: &str,
        raw: &[(String, String, Pos)],
        fields: &[String],
    ) -> (ResolvedOptions, Vec<OptionError>) {
        let err = |option: &str, pos: Option<Pos>, message: String| OptionError {
            table: table.to_string(),
            option: option.to_string(),
            pos,
            message,
        };
        let mut errors = Vec::new();
        let mut out = ResolvedOptions::default();
        let mut written_as: BTreeMap<String, (String, Pos)> = BTreeMap::new();
        for (key, value, pos) in raw {
            let Some((decl, m)) = self.find(key) else {
                let mut message = format!("unknown option for {}", self.owner);
                match self.suggest(key, fields) {
                    Some(s) => message.push_str(&format!("; did you mean '{s}'?")),
                    None => message.push_str(&format!(
                        "; valid options: {}",
                        self.options
                            .iter()
                            .map(|d| d.key)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
                errors.push(err(key, Some(*pos), message));
                continue;
            };
            if let Some(field) = &m.field
                && !fields.iter().any(|f| f == field)
            {
                let mut message = format!("'{field}' is not a column of the table");
                if let Some(best) = fields.iter().min_by_key(|f| strsim::levenshtein(f, field)) {
                    message.push_str(&format!(
                        "; did you mean '{}'?",
                        decl.key.replacen('#', best, 1)
                    ));
                }
                errors.push(err(key, Some(*pos), message));
                continue;
            }
            let canonical = Self::canonical(decl, key, &m);
            if let Some((first, _)) = written_as.get(&canonical) {
                errors.push(err(
                    key,
                    Some(*pos),
                    format!(
                        "set twice, as '{first}' and as '{key}' (they are spellings of '{canonical}')"
                    ),
                ));
                continue;
            }
            let value = match normalize_value(&decl.kind, value) {
                Ok(v) => v,
                Err(m) => {
                    errors.push(err(key, Some(*pos), m));
                    // Known but invalid: no default stands in for it, and no rule is judged on it.
                    written_as.insert(canonical, (key.clone(), *pos));
                    continue;
                }
            };
            written_as.insert(canonical.clone(), (key.clone(), *pos));
            if decl.secret || is_secret_key(key) {
                out.secrets.push(canonical.clone());
            }
            out.values.insert(canonical, value);
        }
        for d in &self.options {
            if d.is_prefix() || d.key.contains('#') {
                continue;
            }
            if !out.values.contains_key(d.key) && !written_as.contains_key(d.key) {
                if d.required {
                    errors.push(err(
                        d.key,
                        None,
                        format!("required by {} but not set ({})", self.owner, d.doc),
                    ));
                } else if let Some(def) = d.default {
                    out.values.insert(d.key.to_string(), def.to_string());
                }
            }
        }
        let pos_of = |k: &str| written_as.get(k).map(|(_, p)| *p);
        let name_of = |k: &str| {
            written_as
                .get(k)
                .map(|(w, _)| w.clone())
                .unwrap_or_else(|| k.to_string())
        };
        for rule in &self.rules {
            match rule {
                Rule::MutuallyExclusive(a, b) => {
                    if written_as.contains_key(*a) && written_as.contains_key(*b) {
                        errors.push(err(
                            &name_of(b),
                            pos_of(b),
                            format!(
                                "'{}' and '{}' are mutually exclusive: set only one",
                                name_of(a),
                                name_of(b)
                            ),
                        ));
                    }
                }
                Rule::OneOf(keys) => {
                    if !keys.iter().any(|k| written_as.contains_key(*k)) {
                        errors.push(err(
                            keys[0],
                            None,
                            format!(
                                "one of {} must be set",
                                keys.iter()
                                    .map(|k| format!("'{k}'"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        ));
                    }
                }
                Rule::RequiredWhen {
                    option,
                    equals,
                    requires,
                } => {
                    if out.values.get(*option).map(String::as_str) == Some(*equals)
                        && !written_as.contains_key(*requires)
                    {
                        errors.push(err(
                            requires,
                            pos_of(option),
                            format!("required when '{option}' = '{equals}'"),
                        ));
                    }
                }
                Rule::NotGreater { min, max } => {
                    for (kmin, kmax) in pairs_for(min, max, fields) {
                        if let (Some(a), Some(b)) = (out.values.get(&kmin), out.values.get(&kmax))
                            && let (Ok(a), Ok(b)) =
                                (a.trim().parse::<f64>(), b.trim().parse::<f64>())
                            && a > b
                        {
                            errors.push(err(
                                &kmin,
                                pos_of(&kmin),
                                format!("{a} is greater than '{kmax}' = {b}"),
                            ));
                        }
                    }
                }
            }
        }
        (out, errors)
    }
}

fn pairs_for(min: &str, max: &str, fields: &[String]) -> Vec<(String, String)> {
    if min.contains('#') {
        fields
            .iter()
            .map(|f| (min.replacen('#', f, 1), max.replacen('#', f, 1)))
            .collect()
    } else {
        vec![(min.to_string(), max.to_string())]
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
    let v = value.trim();
    match kind {
        OptionKind::String => Ok(value.to_string()),
        OptionKind::Bool => parse_bool(v)
            .map(|b| b.to_string())
            .ok_or_else(|| format!("'{value}' is not a boolean; allowed values: true, false")),
        OptionKind::Int { min, max } => match v.parse::<i64>() {
            Ok(n) if n >= *min && n <= *max => Ok(value.to_string()),
            Ok(n) => Err(format!("{n} is out of range; expected {}", kind.name())),
            Err(_) => Err(format!(
                "'{value}' is not a valid integer; expected {}",
                kind.name()
            )),
        },
        OptionKind::Double { min, max } => match v.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= *min && n <= *max => Ok(value.to_string()),
            Ok(n) => Err(format!(
                "{n} is out of range; expected a number between {min} and {max}"
            )),
            Err(_) => Err(format!(
                "'{value}' is not a valid number; expected a number between {min} and {max}"
            )),
        },
        OptionKind::Duration => duration::parse(v).map(|_| value.to_string()),
        OptionKind::Enum(values) => match_enum(values, v).map(str::to_string).ok_or_else(|| {
            let hint = suggest(v, values.iter().copied())
                .map(|s| format!("did you mean '{s}'? "))
                .unwrap_or_default();
            format!(
                "'{value}' is not allowed; {hint}allowed values: {}",
                values.join(", ")
            )
        }),
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

/// The nearest of `candidates` to `written`, if it is near enough to be what was meant (the one "did you
/// mean" rule of every option, setting, format and connector name).
pub fn suggest<'a>(
    written: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let w = written.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(&c.to_ascii_lowercase(), &w), c))
        .filter(|(d, c)| *d <= (c.len().max(written.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

impl ResolvedOptions {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
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

/// Markdown documentation of option sets (the body of `docs/options.md`).
pub fn render_markdown(title: &str, intro: &str, sets: &[&OptionSet]) -> String {
    let mut s = format!("# {title}\n\n{intro}\n");
    for set in sets {
        s.push_str(&format!("\n## {}\n\n{}\n\n", set.owner, set.doc));
        s.push_str("| option | type | required | default | description |\n|---|---|---|---|---|\n");
        for d in &set.options {
            let mut key = format!("`{}`", d.key);
            if !d.aliases.is_empty() {
                key.push_str(&format!(
                    " (also {})",
                    d.aliases
                        .iter()
                        .map(|a| format!("`{a}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let mut doc = d.doc.replace('|', "\\|");
            if d.secret {
                doc.push_str(" **Secret: redacted in all output.**");
            }
            s.push_str(&format!(
                "| {key} | {} | {} | {} | {doc} |\n",
                d.kind.name(),
                if d.required { "yes" } else { "no" },
                d.default
                    .map(|v| format!("`{v}`"))
                    .unwrap_or_else(|| "—".into()),
            ));
        }
        if !set.rules.is_empty() {
            s.push_str("\nRules:\n\n");
            for r in &set.rules {
                let line = match r {
                    Rule::MutuallyExclusive(a, b) => {
                        format!("`{a}` and `{b}` are mutually exclusive")
                    }
                    Rule::OneOf(keys) => format!(
                        "one of {} is required",
                        keys.iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Rule::RequiredWhen {
                        option,
                        equals,
                        requires,
                    } => format!("`{requires}` is required when `{option}` = `{equals}`"),
                    Rule::NotGreater { min, max } => {
                        format!("`{min}` must not be greater than `{max}`")
                    }
                };
                s.push_str(&format!("- {line}\n"));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> OptionSet {
        OptionSet::new(
            "connector 'demo'",
            "demo",
            vec![
                OptionDecl::string("service-url", "url").required(),
                OptionDecl::enumeration("mode", &["earliest", "latest"], "m")
                    .default("latest")
                    .aliases(&["scan.startup.mode"]),
                OptionDecl::string("topic", "t"),
                OptionDecl::string("topic-pattern", "p"),
                OptionDecl::int("rows", 0, i64::MAX, "r"),
                OptionDecl::string("properties.*", "pass-through"),
                OptionDecl::enumeration("fields.#.kind", &["random", "sequence"], "k"),
                OptionDecl::string("auth", "a").secret(),
            ],
            vec![Rule::MutuallyExclusive("topic", "topic-pattern")],
        )
    }

    fn raw(pairs: &[(&str, &str)]) -> Vec<(String, String, Pos)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string(), Pos::default()))
            .collect()
    }

    #[test]
    fn resolves_aliases_defaults_families_and_redacts() {
        let r = set()
            .validate(
                "t",
                &raw(&[
                    ("service-url", "pulsar://x"),
                    ("scan.startup.mode", "earliest"),
                    ("properties.auth-params", "token:abc"),
                    ("fields.id.kind", "sequence"),
                    ("auth", "s"),
                ]),
                &["id".into()],
            )
            .unwrap();
        assert_eq!(r.get("mode"), Some("earliest"));
        assert_eq!(r.field("fields.#.kind", "id"), Some("sequence"));
        assert_eq!(
            r.prefixed("properties.")
                .get("auth-params")
                .map(String::as_str),
            Some("token:abc")
        );
        let shown = r.display_pairs();
        assert!(
            shown.iter().all(|(_, v)| v != "token:abc" && v != "s"),
            "{shown:?}"
        );
        let r = set()
            .validate("t", &raw(&[("service-url", "x")]), &[])
            .unwrap();
        assert_eq!(r.get("mode"), Some("latest"));
    }

    #[test]
    fn error_kinds() {
        let s = set();
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("servce-url", "y")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("did you mean 'service-url'"), "{e}");
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("mode", "earlist")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(
            e.message
                .contains("did you mean 'earliest'? allowed values: earliest, latest"),
            "{e}"
        );
        let e = s.validate("t", &raw(&[]), &[]).unwrap_err().remove(0);
        assert_eq!(e.option, "service-url");
        let e = s
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("topic", "a"), ("topic-pattern", "b")]),
                &[],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("mutually exclusive"), "{e}");
        let e = s
            .validate("t", &raw(&[("service-url", "x"), ("rows", "ten")]), &[])
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("not a valid integer"), "{e}");
        let e = s
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("fields.idd.kind", "random")]),
                &["id".into()],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("did you mean 'fields.id.kind'"), "{e}");
        let e = s
            .validate(
                "t",
                &raw(&[
                    ("service-url", "x"),
                    ("mode", "latest"),
                    ("scan.startup.mode", "latest"),
                ]),
                &[],
            )
            .unwrap_err()
            .remove(0);
        assert!(e.message.contains("set twice"), "{e}");
    }

    #[test]
    fn every_error_of_a_table_is_reported() {
        let e = set()
            .validate(
                "t",
                &raw(&[("scan.startup.mod", "earliest"), ("rows", "ten")]),
                &[],
            )
            .unwrap_err();
        let options: Vec<&str> = e.iter().map(|e| e.option.as_str()).collect();
        assert_eq!(
            options,
            ["scan.startup.mod", "rows", "service-url"],
            "{e:?}"
        );
    }

    #[test]
    fn booleans_and_enums_are_case_insensitive_and_stored_as_declared() {
        let r = set()
            .validate(
                "t",
                &raw(&[("service-url", "x"), ("mode", "EARLIEST")]),
                &[],
            )
            .unwrap();
        assert_eq!(r.get("mode"), Some("earliest"));
        assert_eq!(
            normalize_value(&OptionKind::Bool, " TRUE ").unwrap(),
            "true"
        );
        assert_eq!(
            normalize_value(&OptionKind::Bool, "False").unwrap(),
            "false"
        );
        assert!(normalize_value(&OptionKind::Bool, "yes").is_err());
        assert_eq!(
            normalize_value(&OptionKind::Enum(&["ALL", "EXCEPT_KEY"]), "except_key").unwrap(),
            "EXCEPT_KEY"
        );
    }

    #[test]
    fn one_suggestion_rule() {
        assert_eq!(suggest("jsn", ["avro", "csv", "json", "raw"]), Some("json"));
        assert_eq!(suggest("JSON", ["avro", "json"]), Some("json"));
        assert_eq!(suggest("protobuf", ["avro", "csv", "json", "raw"]), None);
    }
}
