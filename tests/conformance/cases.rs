//! The case files (`cases/*.toml`): validate cases (`[[case]]`) and end-to-end jobs (`[[run]]`), read into
//! plain structs, and the placeholders their SQL uses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toml::{Table, Value};

/// What `validate` must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Exit code 0.
    Ok,
    /// Exit code 2, the error naming every entry of `names`.
    Refused,
}

/// Where a case comes from (the peer, its test), shared by both kinds.
#[derive(Debug, Clone)]
pub struct Origin {
    pub file: PathBuf,
    pub peer: String,
    pub name: String,
    pub from: String,
    /// What the peer does.
    pub fact: String,
    /// Set where we deliberately behave differently from the peer: what we do instead and why.
    pub differs: Option<String>,
}

/// A job that `validate` must accept or refuse (and `run` must refuse the same way).
#[derive(Debug, Clone)]
pub struct ValidateCase {
    pub origin: Origin,
    pub sql: String,
    pub expect: Expect,
    pub names: Vec<String>,
}

/// A message the official Python client writes.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// Defaults to `{topic}`.
    pub topic: Option<String>,
    pub value: Option<String>,
    pub value_hex: Option<String>,
    pub key: Option<String>,
    pub properties: BTreeMap<String, String>,
    pub event_time: Option<i64>,
    pub sequence_id: Option<i64>,
}

/// A job run against the real broker, with the rows it must print.
#[derive(Debug, Clone)]
pub struct RunCase {
    pub origin: Origin,
    /// `bytes` (default) or `string` (a Pulsar STRING schema on the topic, as Java's `Schema.STRING`).
    pub produce_schema: String,
    /// Written before anything runs.
    pub produce: Vec<Message>,
    /// A bounded job run to completion before `read` (its rows go to Pulsar).
    pub write: Option<String>,
    /// The job whose `print` output is compared with `rows`.
    pub read: String,
    /// Written once `read`'s consumer is connected to `{topic}`.
    pub produce_after_start: Vec<Message>,
    pub rows: Vec<String>,
    pub ordered: bool,
}

/// Every case of every file in `dir`.
pub fn load_dir(dir: &Path) -> Result<(Vec<ValidateCase>, Vec<RunCase>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let (mut validate, mut run) = (Vec::new(), Vec::new());
    for f in files {
        let (v, r) = load_file(&f).with_context(|| format!("case file {}", f.display()))?;
        validate.extend(v);
        run.extend(r);
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in validate
        .iter()
        .map(|c| &c.origin.name)
        .chain(run.iter().map(|c| &c.origin.name))
    {
        if !seen.insert(name.clone()) {
            bail!("case name '{name}' is used twice");
        }
    }
    Ok((validate, run))
}

fn load_file(path: &Path) -> Result<(Vec<ValidateCase>, Vec<RunCase>)> {
    let text = std::fs::read_to_string(path)?;
    let doc: Table = toml::from_str(&text).context("not TOML")?;
    let peer = string(&doc, "peer")?;
    for key in doc.keys() {
        if !matches!(key.as_str(), "peer" | "source" | "case" | "run") {
            bail!("unknown top-level key '{key}'");
        }
    }
    let mut validate = Vec::new();
    for t in tables(&doc, "case")? {
        validate.push(validate_case(path, &peer, t)?);
    }
    let mut run = Vec::new();
    for t in tables(&doc, "run")? {
        run.push(run_case(path, &peer, t)?);
    }
    Ok((validate, run))
}

fn origin(path: &Path, peer: &str, t: &Table, allowed: &[&str]) -> Result<Origin> {
    let name = string(t, "name")?;
    for key in t.keys() {
        let common = ["name", "from", "fact", "differs"];
        if !common.contains(&key.as_str()) && !allowed.contains(&key.as_str()) {
            bail!("case '{name}': unknown key '{key}'");
        }
    }
    Ok(Origin {
        file: path.to_path_buf(),
        peer: peer.to_owned(),
        from: string(t, "from").with_context(|| format!("case '{name}'"))?,
        fact: string(t, "fact").with_context(|| format!("case '{name}'"))?,
        differs: opt_string(t, "differs")?,
        name,
    })
}

fn validate_case(path: &Path, peer: &str, t: &Table) -> Result<ValidateCase> {
    let origin = origin(path, peer, t, &["expect", "names", "sql"])?;
    let ctx = || format!("case '{}'", origin.name);
    let expect = match string(t, "expect").with_context(ctx)?.as_str() {
        "ok" => Expect::Ok,
        "refused" => Expect::Refused,
        other => bail!("{}: expect = '{other}'; allowed: ok, refused", ctx()),
    };
    let names = strings(t, "names").with_context(ctx)?;
    if expect == Expect::Refused && names.is_empty() {
        bail!(
            "{}: a refused case lists the names its error must contain",
            ctx()
        );
    }
    Ok(ValidateCase {
        sql: string(t, "sql").with_context(ctx)?,
        expect,
        names,
        origin,
    })
}

fn run_case(path: &Path, peer: &str, t: &Table) -> Result<RunCase> {
    let origin = origin(
        path,
        peer,
        t,
        &[
            "produce_schema",
            "produce",
            "write",
            "read",
            "produce_after_start",
            "rows",
            "ordered",
        ],
    )?;
    let ctx = || format!("case '{}'", origin.name);
    let produce_schema = opt_string(t, "produce_schema")?.unwrap_or_else(|| "bytes".into());
    if !matches!(produce_schema.as_str(), "bytes" | "string") {
        bail!(
            "{}: produce_schema = '{produce_schema}'; allowed: bytes, string",
            ctx()
        );
    }
    Ok(RunCase {
        produce_schema,
        produce: messages(t, "produce").with_context(ctx)?,
        write: opt_string(t, "write")?,
        read: string(t, "read").with_context(ctx)?,
        produce_after_start: messages(t, "produce_after_start").with_context(ctx)?,
        rows: strings(t, "rows").with_context(ctx)?,
        ordered: t
            .get("ordered")
            .map(|v| v.as_bool().context("ordered: not a boolean"))
            .transpose()?
            .unwrap_or(false),
        origin,
    })
}

fn messages(t: &Table, key: &str) -> Result<Vec<Message>> {
    let Some(v) = t.get(key) else {
        return Ok(Vec::new());
    };
    let list = v.as_array().with_context(|| format!("{key}: not a list"))?;
    list.iter()
        .map(|m| {
            let m = m
                .as_table()
                .with_context(|| format!("{key}: an entry is not a table"))?;
            for k in m.keys() {
                if !matches!(
                    k.as_str(),
                    "topic"
                        | "value"
                        | "value_hex"
                        | "key"
                        | "properties"
                        | "event_time"
                        | "sequence_id"
                ) {
                    bail!("{key}: unknown message key '{k}'");
                }
            }
            let properties = match m.get("properties") {
                None => BTreeMap::new(),
                Some(p) => p
                    .as_table()
                    .context("properties: not a table")?
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            v.as_str()
                                .context("a property value is not a string")?
                                .to_owned(),
                        ))
                    })
                    .collect::<Result<_>>()?,
            };
            let int = |k: &str| {
                m.get(k)
                    .map(|v| {
                        v.as_integer()
                            .with_context(|| format!("{k}: not an integer"))
                    })
                    .transpose()
            };
            Ok(Message {
                topic: opt_string(m, "topic")?,
                value: opt_string(m, "value")?,
                value_hex: opt_string(m, "value_hex")?,
                key: opt_string(m, "key")?,
                properties,
                event_time: int("event_time")?,
                sequence_id: int("sequence_id")?,
            })
        })
        .collect()
}

fn tables<'a>(doc: &'a Table, key: &str) -> Result<Vec<&'a Table>> {
    match doc.get(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_table()
                    .with_context(|| format!("[[{key}]] entries must be tables"))
            })
            .collect(),
        Some(_) => bail!("'{key}' must be an array of tables ([[{key}]])"),
    }
}

fn string(t: &Table, key: &str) -> Result<String> {
    opt_string(t, key)?.with_context(|| format!("'{key}' is missing"))
}

fn opt_string(t: &Table, key: &str) -> Result<Option<String>> {
    t.get(key)
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .with_context(|| format!("'{key}' must be a string"))
        })
        .transpose()
}

fn strings(t: &Table, key: &str) -> Result<Vec<String>> {
    let Some(v) = t.get(key) else {
        return Ok(Vec::new());
    };
    v.as_array()
        .with_context(|| format!("'{key}' must be a list of strings"))?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .with_context(|| format!("'{key}' must be a list of strings"))
        })
        .collect()
}

/// The values of the placeholders of one case: `{service_url}`, `{admin_url}`, `{topic}` (a topic of its
/// own, `persistent://public/default/<short>`), `{short}` (its local name), `{uid}` (a unique suffix) and,
/// once messages were produced, `{msgid:N}` (the id of message N, `ledger:entry:partition`).
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub service_url: String,
    pub admin_url: String,
    pub topic: String,
    pub short: String,
    pub uid: String,
    pub message_ids: Vec<String>,
}

impl Placeholders {
    pub fn new(service_url: &str, admin_url: &str, case: &str) -> Placeholders {
        let topic = pulsar_connect_tests::unique_topic(&format!("conformance-{case}"));
        let short = topic
            .rsplit('/')
            .next()
            .unwrap_or(topic.as_str())
            .to_owned();
        let uid = short
            .strip_prefix(&format!("conformance-{case}-"))
            .unwrap_or(&short)
            .to_owned();
        Placeholders {
            service_url: service_url.to_owned(),
            admin_url: admin_url.to_owned(),
            topic,
            short,
            uid,
            message_ids: Vec::new(),
        }
    }

    /// `text` with every placeholder replaced; an unknown `{name}` or a `{msgid:N}` without message N is
    /// an error (so a case never runs with a placeholder left in it).
    pub fn apply(&self, text: &str) -> Result<String> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let name = &after[..end];
            let value = match name {
                "service_url" => Some(self.service_url.clone()),
                "admin_url" => Some(self.admin_url.clone()),
                "topic" => Some(self.topic.clone()),
                "short" => Some(self.short.clone()),
                "uid" => Some(self.uid.clone()),
                _ => match name.strip_prefix("msgid:") {
                    Some(n) => {
                        let i: usize = n
                            .parse()
                            .with_context(|| format!("placeholder {{{name}}}"))?;
                        Some(self.message_ids.get(i).cloned().with_context(|| {
                            format!(
                                "placeholder {{{name}}}: only {} message(s) were produced",
                                self.message_ids.len()
                            )
                        })?)
                    }
                    None => None,
                },
            };
            match value {
                Some(v) => {
                    out.push_str(&v);
                    rest = &after[end + 1..];
                }
                // Not a placeholder (e.g. a regular expression quantifier `\d{2}` or a JSON object): kept.
                None if !is_placeholder_name(name) => {
                    out.push('{');
                    rest = after;
                }
                None => bail!("unknown placeholder {{{name}}}"),
            }
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// Names that look like placeholders (`snake_case` words or `word:N`); anything else in braces is text.
fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':')
}
