//! `plugin.toml`: what a plugin is, which world it implements, the options it accepts and its limits.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::options::{Choices, OptionDecl, OptionKind, OptionSet, Value, parse_value};
use crate::sql::{ChangelogMode, FlinkType, RowKind, parse_type};

/// The WIT package every plugin world belongs to.
pub const WIT_PACKAGE: &str = "pulsar-connect:plugin";
/// The WIT versions of each world this host implements (a released version is frozen; new ones are added
/// beside it). 0.2.0 changed only the format world (ADR 0016).
pub const FORMAT_WIT_VERSIONS: &[&str] = &["0.1.0", "0.2.0"];
pub const ROUTER_WIT_VERSIONS: &[&str] = &["0.1.0"];

/// Hard ceiling on the memory a manifest may ask for, whatever it says.
pub const HOST_MAX_MEMORY_MIB: u32 = 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Manifest {
    /// The plugin's name; equal to its folder's name and the stem of its wasm file.
    pub name: String,
    pub kind: Kind,
    /// `pulsar-connect:plugin/<format|router>@<version>`.
    pub world: String,
    /// The plugin's own version.
    pub version: String,
    /// Hex sha256 of `<name>.wasm`.
    pub sha256: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub options: Vec<OptionSpec>,
    #[serde(default)]
    pub limits: Limits,
    /// Routers only: whether `route-batch` receives message properties (they cost a copy per batch).
    #[serde(default)]
    pub wants_properties: bool,
    /// Formats only: the Pulsar schema a sink writing with this value format registers on its topic
    /// (derived from the table's row type). Unset: none (the topic's messages are plain bytes).
    #[serde(default)]
    pub pulsar_schema: Option<PulsarSchema>,
    /// Formats only, WIT 0.2.0 on: the row kinds the format reads and writes (`INSERT`, `UPDATE_BEFORE`,
    /// `UPDATE_AFTER`, `DELETE`; ADR 0016). Unset: inserts only.
    #[serde(default)]
    pub changelog_mode: Option<Vec<String>>,
    /// Formats only, WIT 0.2.0 on: the metadata a decoder can produce (a table reads key `k` as
    /// `METADATA FROM 'value.k'`).
    #[serde(default)]
    pub metadata: Vec<MetadataSpec>,
    /// A folder inside the plugin's own folder that every instance may read: its only WASI preopen,
    /// read-only, mounted at `/` (ADR 0022; e.g. protobuf's descriptor sets). Unset: no files at all.
    #[serde(default)]
    pub files: Option<String>,
}

/// A readable metadata key of a format.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MetadataSpec {
    pub key: String,
    /// The Flink SQL type of the values (`STRING`, `TIMESTAMP_LTZ(3)`, `MAP<STRING, STRING>`).
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(default)]
    pub doc: String,
}

/// A Pulsar schema type a format's payloads conform to; the schema itself is the Avro schema Flink's
/// `AvroSchemaConverter` derives from the row type (what the reference connector registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PulsarSchema {
    Json,
    Avro,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Format,
    Router,
}

impl Kind {
    /// The name of the world a plugin of this kind implements.
    pub fn world_name(self) -> &'static str {
        match self {
            Kind::Format => "format",
            Kind::Router => "router",
        }
    }

    /// The interface the world exports.
    pub fn exported_interface(self) -> &'static str {
        match self {
            Kind::Format => "codec",
            Kind::Router => "routing",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.world_name())
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OptionSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: OptionType,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub default: Option<toml::Value>,
    /// Allowed values of an `enum` option.
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default)]
    pub doc: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptionType {
    String,
    Bool,
    Int,
    Float,
    Enum,
}

impl fmt::Display for OptionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OptionType::String => "string",
            OptionType::Bool => "bool",
            OptionType::Int => "int",
            OptionType::Float => "float",
            OptionType::Enum => "enum",
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Limits {
    /// Linear memory cap per instance, capped again by the host's maximum.
    #[serde(default = "Limits::default_memory_mib")]
    pub memory_mib: u32,
    /// Wall-clock budget of one call (one batch).
    #[serde(default = "Limits::default_timeout_ms")]
    pub timeout_ms: u64,
}

impl Limits {
    fn default_memory_mib() -> u32 {
        64
    }
    fn default_timeout_ms() -> u64 {
        1000
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mib: Self::default_memory_mib(),
            timeout_ms: Self::default_timeout_ms(),
        }
    }
}

/// The world a manifest claims, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorldRef {
    pub kind: Kind,
    pub version: String,
}

impl WorldRef {
    /// The fully qualified name of the interface the world exports, e.g. `pulsar-connect:plugin/codec@0.1.0`.
    pub fn export_name(&self) -> String {
        format!(
            "{WIT_PACKAGE}/{}@{}",
            self.kind.exported_interface(),
            self.version
        )
    }
}

impl fmt::Display for WorldRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{WIT_PACKAGE}/{}@{}",
            self.kind.world_name(),
            self.version
        )
    }
}

impl Manifest {
    /// Parses and checks a manifest read from the folder `folder`.
    pub fn parse(text: &str, folder: &str) -> anyhow::Result<Manifest> {
        let manifest: Manifest =
            toml::from_str(text).context("plugin.toml is not a valid manifest")?;
        manifest.check(folder)?;
        Ok(manifest)
    }

    fn check(&self, folder: &str) -> anyhow::Result<()> {
        if !is_plain_name(&self.name) {
            bail!(
                "name `{}` must be lowercase letters, digits, `-` or `_`",
                self.name
            );
        }
        if self.name != folder {
            bail!("name `{}` differs from its folder `{folder}`", self.name);
        }
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("sha256 must be 64 hex digits, got `{}`", self.sha256);
        }
        let world = self.world_ref()?;
        if world.kind != self.kind {
            bail!("kind `{}` does not match world `{}`", self.kind, self.world);
        }
        if self.wants_properties && self.kind != Kind::Router {
            bail!("wants-properties only applies to routers");
        }
        if self.pulsar_schema.is_some() && self.kind != Kind::Format {
            bail!("pulsar-schema only applies to formats");
        }
        if self.changelog_mode.is_some() || !self.metadata.is_empty() {
            let what = if self.changelog_mode.is_some() {
                "changelog-mode"
            } else {
                "metadata"
            };
            if self.kind != Kind::Format {
                bail!("{what} only applies to formats");
            }
            if world.version == "0.1.0" {
                bail!(
                    "{what} needs world {WIT_PACKAGE}/format@0.2.0 or later (0.1.0 has no row kinds or format metadata)"
                );
            }
        }
        for name in self.changelog_mode.iter().flatten() {
            if RowKind::parse(name).is_none() {
                bail!(
                    "changelog-mode: `{name}` is not a row kind; expected {}",
                    RowKind::ALL.map(RowKind::name).join(", ")
                );
            }
        }
        if self.changelog_mode.as_ref().is_some_and(|m| m.is_empty()) {
            bail!("changelog-mode lists no row kind (leave it out for inserts only)");
        }
        let mut keys = BTreeSet::new();
        for m in &self.metadata {
            if !keys.insert(m.key.as_str()) {
                bail!("metadata key `{}` is declared twice", m.key);
            }
            parse_type(&m.ty)
                .map_err(|e| anyhow::anyhow!("metadata key `{}`: type `{}`: {e}", m.key, m.ty))?;
        }
        if let Some(files) = &self.files
            && !is_plain_name(files)
        {
            bail!(
                "files `{files}` must be a plain folder name (lowercase letters, digits, `-`, `_`) inside the plugin's folder"
            );
        }
        if self.limits.memory_mib == 0 || self.limits.timeout_ms == 0 {
            bail!("limits.memory-mib and limits.timeout-ms must be positive");
        }
        let mut seen = BTreeSet::new();
        for spec in &self.options {
            if !seen.insert(spec.name.as_str()) {
                bail!("option `{}` is declared twice", spec.name);
            }
            if spec.required && spec.default.is_some() {
                bail!(
                    "option `{}` is required and has a default; choose one",
                    spec.name
                );
            }
            if (spec.ty == OptionType::Enum) == spec.values.is_empty() {
                bail!(
                    "option `{}`: `values` lists the choices of an enum option, and only of one",
                    spec.name
                );
            }
            if let Some(default) = &spec.default {
                let text = match default {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                spec.check_value(&text)
                    .with_context(|| format!("default of option `{}`", spec.name))?;
            }
        }
        Ok(())
    }

    /// The world the manifest claims.
    pub fn world_ref(&self) -> anyhow::Result<WorldRef> {
        let rest = self
            .world
            .strip_prefix(WIT_PACKAGE)
            .and_then(|r| r.strip_prefix('/'))
            .with_context(|| format!("world `{}` is not in package {WIT_PACKAGE}", self.world))?;
        let (name, version) = rest
            .split_once('@')
            .with_context(|| format!("world `{}` has no @version", self.world))?;
        let kind = match name {
            "format" => Kind::Format,
            "router" => Kind::Router,
            other => bail!("unknown world `{other}`: expected `format` or `router`"),
        };
        let supported = match kind {
            Kind::Format => FORMAT_WIT_VERSIONS,
            Kind::Router => ROUTER_WIT_VERSIONS,
        };
        if !supported.contains(&version) {
            bail!(
                "world {name} version {version} is not supported; this host implements {name}@{}",
                supported.join(format!(", {name}@").as_str())
            );
        }
        Ok(WorldRef {
            kind,
            version: version.to_owned(),
        })
    }

    /// The row kinds the format reads and writes (inserts only unless declared).
    pub fn changelog_mode(&self) -> ChangelogMode {
        match &self.changelog_mode {
            Some(kinds) => ChangelogMode::of(kinds.iter().filter_map(|k| RowKind::parse(k))),
            None => ChangelogMode::INSERT_ONLY,
        }
    }

    /// The format's readable metadata: key and type (checked when the manifest was parsed).
    pub fn metadata_types(&self) -> Vec<(&str, FlinkType)> {
        self.metadata
            .iter()
            .filter_map(|m| parse_type(&m.ty).ok().map(|t| (m.key.as_str(), t)))
            .collect()
    }

    /// The memory cap in bytes: the manifest's, capped by `host_max_mib`.
    pub fn memory_limit_bytes(&self, host_max_mib: u32) -> usize {
        (self.limits.memory_mib.min(host_max_mib) as usize) << 20
    }

    /// The manifest's options as host option declarations (the same kind every connector declares).
    pub fn option_set(&self) -> OptionSet {
        OptionSet::new(
            format!("{} '{}'", self.kind, self.name),
            self.description.clone().unwrap_or_default(),
            self.options.iter().map(OptionSpec::decl).collect(),
            Vec::new(),
        )
    }

    /// Checks options given by a job against the declared ones and returns the full set the plugin
    /// receives: the given values (normalised) plus the defaults of the options not given. The checks are
    /// the option layer's ([`crate::options`]); the messages speak the manifest's language (`` `name` ``).
    pub fn resolve_options(
        &self,
        given: &[(String, String)],
    ) -> anyhow::Result<Vec<(String, String)>> {
        let set = self.option_set();
        let mut normalized: Vec<(&str, String)> = Vec::new();
        for (name, value) in given {
            let Some(decl) = set.decl(name) else {
                bail!("{}", self.unknown_option_message(name));
            };
            if normalized.iter().any(|(n, _)| n == name) {
                bail!("option `{name}` is given twice");
            }
            let value = plugin_value(decl, value).with_context(|| format!("option `{name}`"))?;
            normalized.push((name.as_str(), value));
        }
        let mut resolved = Vec::new();
        for decl in &set.options {
            match normalized.iter().find(|(n, _)| *n == decl.key) {
                Some((_, value)) => resolved.push((decl.key.to_string(), value.clone())),
                None if decl.required => {
                    bail!("required option `{}` is missing ({})", decl.key, decl.doc);
                }
                None => {
                    if let Some(default) = &decl.default {
                        resolved.push((decl.key.to_string(), default.to_string()));
                    }
                }
            }
        }
        Ok(resolved)
    }

    fn unknown_option_message(&self, name: &str) -> String {
        let names: Vec<&str> = self.options.iter().map(|s| s.name.as_str()).collect();
        let nearest = crate::options::suggest(name, names.iter().copied())
            .map(|n| format!("; did you mean `{n}`?"))
            .unwrap_or_default();
        if names.is_empty() {
            format!("unknown option `{name}`: this plugin takes no options")
        } else {
            format!(
                "unknown option `{name}`{nearest} (allowed: {})",
                names.join(", ")
            )
        }
    }
}

/// A value as the plugin receives it: strings verbatim (a tab delimiter, a null literal with spaces),
/// the rest trimmed; booleans and enum values case-insensitive as in Flink (`TRUE` → `true`, an enum
/// value → its declared spelling), like every option of the host.
fn plugin_value(decl: &OptionDecl, value: &str) -> anyhow::Result<String> {
    match parse_value(&decl.kind, value) {
        Ok(Value::String(s)) => Ok(s),
        Ok(Value::Bool(b)) => Ok(b.to_string()),
        Ok(Value::Enum(s)) => Ok(s),
        Ok(_) => Ok(value.trim().to_owned()),
        Err(e) => Err(anyhow::anyhow!("{}", e.plugin_message(&decl.kind, value))),
    }
}

impl OptionSpec {
    /// The host option declaration of this manifest entry: type, default, doc; no limits beyond the type.
    pub fn decl(&self) -> OptionDecl {
        let kind = match self.ty {
            OptionType::String => OptionKind::String,
            OptionType::Bool => OptionKind::Bool,
            OptionType::Int => OptionKind::Int {
                min: i64::MIN,
                max: i64::MAX,
            },
            OptionType::Float => OptionKind::Double {
                min: f64::MIN,
                max: f64::MAX,
            },
            OptionType::Enum => OptionKind::Enum(Choices::Owned(self.values.clone())),
        };
        OptionDecl {
            key: self.name.clone().into(),
            kind,
            required: self.required,
            default: self.default_text().map(Into::into),
            doc: self.doc.clone().into(),
            ..OptionDecl::string("", "")
        }
    }

    /// Checks that `value` is a valid value of this option's type.
    pub fn check_value(&self, value: &str) -> anyhow::Result<()> {
        self.normalize(value).map(|_| ())
    }

    /// The value as the plugin receives it (see [`Manifest::resolve_options`]).
    pub fn normalize(&self, value: &str) -> anyhow::Result<String> {
        plugin_value(&self.decl(), value)
    }

    /// The default rendered for display.
    pub fn default_text(&self) -> Option<String> {
        self.default.as_ref().map(|d| match d {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// A plugin or file name the host accepts: no separators, no `..`, nothing hidden.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_'])
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
name = "demo"
kind = "format"
world = "pulsar-connect:plugin/format@0.1.0"
version = "1.2.3"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[[options]]
name = "ignore-parse-errors"
type = "bool"
default = false
doc = "skip bad rows"

[[options]]
name = "schema"
type = "string"
required = true
doc = "the schema"

[limits]
memory-mib = 32
"#;

    #[test]
    fn changelog_declarations_need_a_format_of_wit_0_2_0() {
        let m = Manifest::parse(MANIFEST, "demo").unwrap();
        assert_eq!(m.changelog_mode(), ChangelogMode::INSERT_ONLY);
        assert!(m.metadata_types().is_empty());
        let with_mode = MANIFEST.replace(
            "version = \"1.2.3\"",
            "version = \"1.2.3\"\nchangelog-mode = [\"INSERT\", \"DELETE\"]",
        );
        let e = Manifest::parse(&with_mode, "demo").unwrap_err();
        assert!(
            format!("{e:#}")
                .contains("changelog-mode needs world pulsar-connect:plugin/format@0.2.0"),
            "{e:#}"
        );
        let with_metadata =
            format!("{MANIFEST}\n[[metadata]]\nkey = \"source.table\"\ntype = \"STRING\"\n");
        let e = Manifest::parse(&with_metadata, "demo").unwrap_err();
        assert!(format!("{e:#}").contains("metadata needs world"), "{e:#}");
    }

    #[test]
    fn parses_and_resolves_defaults() {
        let m = Manifest::parse(MANIFEST, "demo").unwrap();
        assert_eq!(m.limits.memory_mib, 32);
        assert_eq!(m.limits.timeout_ms, 1000);
        let got = m.resolve_options(&[("schema".into(), "s".into())]).unwrap();
        assert_eq!(
            got,
            vec![
                ("ignore-parse-errors".into(), "false".into()),
                ("schema".into(), "s".into())
            ]
        );
    }

    #[test]
    fn unknown_option_suggests_nearest() {
        let m = Manifest::parse(MANIFEST, "demo").unwrap();
        let err = m
            .resolve_options(&[("ignore-parse-error".into(), "true".into())])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown option `ignore-parse-error`"), "{err}");
        assert!(err.contains("did you mean `ignore-parse-errors`"), "{err}");
        assert!(
            err.contains("allowed: ignore-parse-errors, schema"),
            "{err}"
        );
    }

    #[test]
    fn missing_and_mistyped_options() {
        let m = Manifest::parse(MANIFEST, "demo").unwrap();
        let err = m.resolve_options(&[]).unwrap_err().to_string();
        assert!(err.contains("required option `schema` is missing"), "{err}");
        let err = m
            .resolve_options(&[
                ("schema".into(), "s".into()),
                ("ignore-parse-errors".into(), "yes".into()),
            ])
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("expected true or false"),
            "{err:#}"
        );
    }

    #[test]
    fn rejects_unknown_fields_and_bad_names() {
        let err = Manifest::parse(&format!("{MANIFEST}\nsurprise = 1\n"), "demo").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown field `surprise`"),
            "{err:#}"
        );
        let err = Manifest::parse(MANIFEST, "other").unwrap_err();
        assert!(err.to_string().contains("differs from its folder"), "{err}");
        let bad = MANIFEST.replace("name = \"demo\"", "name = \"../etc\"");
        assert!(Manifest::parse(&bad, "../etc").is_err());
    }

    #[test]
    fn world_must_match_kind_and_version() {
        let bad = MANIFEST.replace("format@0.1.0", "router@0.1.0");
        assert!(
            Manifest::parse(&bad, "demo")
                .unwrap_err()
                .to_string()
                .contains("does not match world")
        );
        let bad = MANIFEST.replace("format@0.1.0", "format@9.0.0");
        assert!(
            Manifest::parse(&bad, "demo")
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
    }
}
