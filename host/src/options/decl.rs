//! One option, declared once: its key and spellings, type, default, documentation, limits and whether it
//! is a secret. Connectors declare theirs in code; plugin manifests produce the same declarations.

use std::borrow::Cow;

/// Declaration text: a literal for host options, owned for options read from a plugin manifest.
pub type Text = Cow<'static, str>;

/// The allowed values of an enum option.
#[derive(Debug, Clone, PartialEq)]
pub enum Choices {
    Static(&'static [&'static str]),
    Owned(Vec<String>),
}

impl Choices {
    pub fn iter(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            Choices::Static(v) => Box::new(v.iter().copied()),
            Choices::Owned(v) => Box::new(v.iter().map(String::as_str)),
        }
    }
    pub fn to_vec(&self) -> Vec<&str> {
        self.iter().collect()
    }
    pub fn join(&self, sep: &str) -> String {
        self.to_vec().join(sep)
    }
}

/// The type of an option's value, with the limits validation enforces.
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
    /// One of a fixed set of values (matched case-insensitively, stored as declared).
    Enum(Choices),
}

impl OptionKind {
    /// The type as the generated documentation and error messages name it.
    pub fn name(&self) -> String {
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
    pub key: Text,
    /// Other spellings accepted for the same option (older or newer names).
    pub aliases: &'static [&'static str],
    pub kind: OptionKind,
    pub required: bool,
    pub default: Option<Text>,
    pub doc: Text,
    /// Redacted in every printout.
    pub secret: bool,
    /// Also accepted under the set's pass-through family ([`crate::options::PassThrough`], e.g.
    /// `properties.<any spelling>`), compared loosely (per `.`-segment, case-insensitive, `-`/`_` ignored).
    pub pass_through: bool,
    /// Appended to "required when ..." errors of a [`Rule::RequiredWhen`] naming this option: what to write.
    pub hint: Option<&'static str>,
}

impl OptionDecl {
    pub const fn new(key: &'static str, kind: OptionKind, doc: &'static str) -> Self {
        OptionDecl {
            key: Cow::Borrowed(key),
            aliases: &[],
            kind,
            required: false,
            default: None,
            doc: Cow::Borrowed(doc),
            secret: false,
            pass_through: false,
            hint: None,
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
        Self::new(key, OptionKind::Enum(Choices::Static(values)), doc)
    }
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub fn default(mut self, value: &'static str) -> Self {
        self.default = Some(Cow::Borrowed(value));
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
    /// Also accepted under the set's pass-through family (`properties.<spelling>`).
    pub const fn pass_through(mut self) -> Self {
        self.pass_through = true;
        self
    }
    /// What to write, appended to "required when ..." errors.
    pub const fn hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }

    pub(crate) fn is_prefix(&self) -> bool {
        self.key.ends_with(".*")
    }

    pub(crate) fn is_per_field(&self) -> bool {
        self.key.contains('#')
    }

    /// The key and every alias.
    pub fn spellings(&self) -> impl Iterator<Item = &str> + '_ {
        std::iter::once(self.key.as_ref()).chain(self.aliases.iter().copied())
    }

    /// Does `key` name this option? Returns the column for per-field keys.
    pub(crate) fn matches(&self, key: &str) -> Option<Match> {
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

pub(crate) struct Match {
    pub field: Option<String>,
}

/// A cross-option rule, checked by [`crate::options::OptionSet::resolve`].
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

/// Keys under a prefix (`properties.`) handed to a client: declarations marked
/// [`OptionDecl::pass_through`] are recognised there under any spelling, keys under `accepted` are
/// kept and not applied, any other key is an error.
#[derive(Debug, Clone)]
pub struct PassThrough {
    pub prefix: &'static str,
    /// Prefixes (after `prefix`) of keys accepted and not applied, e.g. `pulsar.reader.`.
    pub accepted: &'static [&'static str],
    /// What a declaration under the prefix is called in errors, e.g. `connector setting`.
    pub what: &'static str,
    /// Appended to the list of known keys in the error for an unknown key.
    pub note: &'static str,
}

/// A key compared the way pass-through keys are compared: per `.`-segment, case-insensitive, with `-`,
/// `_` and spaces removed (`receiverQueueSize` = `receiver-queue-size`).
pub fn normalize_key(key: &str) -> String {
    key.split('.')
        .map(|seg| {
            seg.chars()
                .filter(|c| *c != '-' && *c != '_' && *c != ' ')
                .flat_map(char::to_lowercase)
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(".")
}
