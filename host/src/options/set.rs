//! An [`OptionSet`]: the declarations of one connector, format plugin or the job settings, with their
//! rules; [`OptionSet::resolve`] checks a table's `WITH (...)` options against them.

use std::collections::BTreeMap;

use super::decl::{Match, OptionDecl, PassThrough, Rule, Text, normalize_key};
use super::error::OptionError;
use super::resolved::{ResolvedOptions, is_secret_key};
use super::suggest::suggest;
use super::value::{Value, parse_value};
use crate::sql::Pos;

/// The options of one connector or format.
#[derive(Debug, Clone)]
pub struct OptionSet {
    /// What declares them, e.g. `connector 'print'`.
    pub owner: String,
    pub doc: Text,
    pub options: Vec<OptionDecl>,
    pub rules: Vec<Rule>,
    /// Keys under a prefix handed to a client (`properties.`), if the set has such a family.
    pub pass_through: Option<PassThrough>,
}

impl OptionSet {
    pub fn new(
        owner: impl Into<String>,
        doc: impl Into<Text>,
        options: Vec<OptionDecl>,
        rules: Vec<Rule>,
    ) -> Self {
        OptionSet {
            owner: owner.into(),
            doc: doc.into(),
            options,
            rules,
            pass_through: None,
        }
    }

    /// Declarations marked [`OptionDecl::pass_through`] are also accepted under `family.prefix`.
    pub fn with_pass_through(mut self, family: PassThrough) -> Self {
        self.pass_through = Some(family);
        self
    }

    /// The declaration of a canonical key.
    pub fn decl(&self, key: &str) -> Option<&OptionDecl> {
        self.options.iter().find(|d| d.key == key)
    }

    /// The declaration a written key names: exact spellings win over families.
    pub(crate) fn find(&self, key: &str) -> Option<(&OptionDecl, Match)> {
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

    /// The pass-through declaration a key under the family's prefix names (compared loosely).
    fn find_pass_through(&self, rest: &str) -> Option<&OptionDecl> {
        let n = normalize_key(rest);
        self.options
            .iter()
            .filter(|d| d.pass_through)
            .find(|d| d.spellings().any(|s| normalize_key(s) == n))
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

    /// The nearest declared spelling of a written key ("did you mean").
    pub fn suggest(&self, key: &str, fields: &[String]) -> Option<String> {
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

    fn unknown_message(&self, key: &str, fields: &[String]) -> String {
        let mut message = format!("unknown option for {}", self.owner);
        match self.suggest(key, fields) {
            Some(s) => message.push_str(&format!("; did you mean '{s}'?")),
            None => message.push_str(&format!(
                "; valid options: {}",
                self.options
                    .iter()
                    .map(|d| d.key.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
        message
    }

    fn unknown_pass_through_message(&self, family: &PassThrough, rest: &str) -> String {
        let known: Vec<&str> = self
            .options
            .iter()
            .filter(|d| d.pass_through)
            .map(|d| d.key.as_ref())
            .collect();
        let normalized: Vec<String> = known.iter().map(|k| normalize_key(k)).collect();
        let suggestion = suggest(&normalize_key(rest), normalized.iter().map(String::as_str))
            .and_then(|n| known.iter().find(|k| normalize_key(k) == n))
            .map(|k| format!("; did you mean '{}{k}'?", family.prefix))
            .unwrap_or_default();
        format!(
            "unknown {}{suggestion} (known: {}; {})",
            family.what,
            known.join(", "),
            family.note
        )
    }

    /// Validates the `WITH (...)` options of `table` (`connector` excluded) against these declarations.
    /// `fields` are the table's columns, for per-field keys. Every error is reported, not only the first.
    /// Values are stored normalised ([`super::normalize_value`]: booleans lower-case, enum values as
    /// declared) and typed ([`ResolvedOptions::value`]).
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
        let err = |option: &str, pos: Option<Pos>, message: String| {
            OptionError::new(table, option, pos, message)
        };
        let mut errors = Vec::new();
        let mut out = ResolvedOptions::default();
        let mut written_as: BTreeMap<String, (String, Pos)> = BTreeMap::new();
        // Declarations set under the pass-through prefix: (canonical, written key, pos, typed, text).
        let mut passed: Vec<(String, String, Pos, Value, String)> = Vec::new();
        for (key, value, pos) in raw {
            if let Some(family) = &self.pass_through
                && let Some(rest) = key.strip_prefix(family.prefix)
                && !rest.is_empty()
            {
                if let Some(decl) = self.find_pass_through(rest) {
                    let typed = match parse_value(&decl.kind, value) {
                        Ok(v) => v,
                        Err(e) => {
                            errors.push(err(key, Some(*pos), e.host_message(&decl.kind, value)));
                            continue;
                        }
                    };
                    if passed.iter().any(|(c, ..)| *c == decl.key) {
                        errors.push(err(
                            key,
                            Some(*pos),
                            format!(
                                "set twice under `{}` (spellings of '{}')",
                                family.prefix, decl.key
                            ),
                        ));
                        continue;
                    }
                    let text = text_of(&typed, value);
                    passed.push((decl.key.to_string(), key.clone(), *pos, typed, text));
                } else if family.accepted.iter().any(|p| rest.starts_with(p)) {
                    out.passed_through.push(key.clone());
                } else {
                    errors.push(err(
                        key,
                        Some(*pos),
                        self.unknown_pass_through_message(family, rest),
                    ));
                    continue;
                }
                // Kept as written too (shown by `validate`).
                if is_secret_key(key) {
                    out.secrets.push(key.clone());
                }
                out.values.insert(key.clone(), value.clone());
                continue;
            }
            let Some((decl, m)) = self.find(key) else {
                errors.push(err(key, Some(*pos), self.unknown_message(key, fields)));
                continue;
            };
            if let Some(field) = &m.field
                && !fields.iter().any(|f| f == field)
            {
                let mut message = format!("'{field}' is not a column of the table");
                if let Some(best) = suggest(field, fields.iter().map(String::as_str)) {
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
            let typed = match parse_value(&decl.kind, value) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(err(key, Some(*pos), e.host_message(&decl.kind, value)));
                    // Known but invalid: no default stands in for it, and no rule is judged on it.
                    written_as.insert(canonical, (key.clone(), *pos));
                    continue;
                }
            };
            written_as.insert(canonical.clone(), (key.clone(), *pos));
            if decl.secret || is_secret_key(key) {
                out.secrets.push(canonical.clone());
            }
            out.values.insert(canonical.clone(), text_of(&typed, value));
            if !decl.is_prefix() {
                out.typed.insert(canonical, typed);
            }
        }
        // A declaration written at the top level wins over its pass-through spelling.
        for (canonical, key, pos, typed, text) in passed {
            if written_as.contains_key(&canonical) {
                continue;
            }
            if self.decl(&canonical).is_some_and(|d| d.secret) {
                out.secrets.push(canonical.clone());
            }
            written_as.insert(canonical.clone(), (key, pos));
            out.values.insert(canonical.clone(), text);
            out.typed.insert(canonical, typed);
        }
        for d in &self.options {
            if d.is_prefix() || d.is_per_field() {
                continue;
            }
            if !out.values.contains_key(d.key.as_ref()) && !written_as.contains_key(d.key.as_ref())
            {
                if d.required {
                    errors.push(err(
                        &d.key,
                        None,
                        format!("required by {} but not set ({})", self.owner, d.doc),
                    ));
                } else if let Some(def) = &d.default {
                    out.values.insert(d.key.to_string(), def.to_string());
                    if let Ok(v) = parse_value(&d.kind, def) {
                        out.typed.insert(d.key.to_string(), v);
                    }
                }
            }
        }
        out.written = written_as.keys().cloned().collect();
        self.check_rules(&out, &written_as, fields, &err, &mut errors);
        (out, errors)
    }

    fn check_rules(
        &self,
        out: &ResolvedOptions,
        written_as: &BTreeMap<String, (String, Pos)>,
        fields: &[String],
        err: &dyn Fn(&str, Option<Pos>, String) -> OptionError,
        errors: &mut Vec<OptionError>,
    ) {
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
                        let hint = self
                            .decl(requires)
                            .and_then(|d| d.hint)
                            .map(|h| format!(" {h}"))
                            .unwrap_or_default();
                        errors.push(err(
                            requires,
                            pos_of(option),
                            format!("required when '{option}' = '{equals}'{hint}"),
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
    }
}

/// The stored text of a valid value: booleans lower-case, enum values as declared, the rest as written.
fn text_of(typed: &Value, written: &str) -> String {
    match typed {
        Value::Bool(b) => b.to_string(),
        Value::Enum(s) => s.clone(),
        _ => written.to_string(),
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
