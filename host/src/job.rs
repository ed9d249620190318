//! A job file end to end: parse → catalog → plans, and the job's identity.

use std::fmt::Write as _;
use std::path::Path;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use sha2::{Digest, Sha256};

use crate::catalog::{self, Catalog};
use crate::connector_api::Registry;
use crate::planner::{self, PipelinePlan};
use crate::sql::{self, Statement};

/// A job that parsed, resolved and planned.
pub struct Job {
    pub statements: Vec<Statement>,
    pub catalog: Catalog,
    pub plans: Vec<PipelinePlan>,
    pub job_id: String,
}

/// Why a job cannot run: every problem found, each naming a position, a table or an option.
#[derive(Debug)]
pub struct JobErrors(pub Vec<String>);

impl std::fmt::Display for JobErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for JobErrors {}

/// The job identity (state directory name): `pipeline.name` (characters outside `[A-Za-z0-9._-]` replaced by
/// `_`), else `job-` + 12 hex digits of the SHA-256 of the job's tokens (comments and whitespace ignored).
pub fn job_id(text: &str, pipeline_name: Option<&str>) -> String {
    if let Some(name) = pipeline_name.filter(|n| !n.trim().is_empty()) {
        let id: String = name
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if id != "." && id != ".." {
            return id;
        }
    }
    let dialect = GenericDialect {};
    let normalized = match Tokenizer::new(&dialect, text).tokenize() {
        Ok(tokens) => tokens
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => text.to_string(),
    };
    format!(
        "job-{}",
        &hex::encode(Sha256::digest(normalized.as_bytes()))[..12]
    )
}

/// Parses, resolves and plans a job. All errors are collected.
pub async fn load_text(text: &str, registry: &Registry) -> Result<Job, JobErrors> {
    let statements = sql::parse_script(text).map_err(|e| JobErrors(vec![e.to_string()]))?;
    load_statements(statements, text, registry).await
}

/// Resolves and plans statements already parsed (the SQL shell's session and its INSERT); `text` is what
/// the job id is made from (all the statements' text).
/// The catalog of `statements`, with the checks that need the job's settings too (each table's
/// `validate_settings`): what `validate`, `run` and the SQL shell's session all check. Errors as printed.
pub fn checked_catalog(
    statements: &[Statement],
    registry: &Registry,
) -> Result<Catalog, Vec<String>> {
    let catalog = catalog::build(statements, registry)
        .map_err(|es| es.iter().map(|e| format!("{e:#}")).collect::<Vec<_>>())?;
    let errors: Vec<String> = catalog
        .order
        .iter()
        .filter_map(|name| {
            let t = &catalog.tables[name];
            t.factory
                .validate_settings(t, &catalog.settings)
                .err()
                .map(|e| format!("{}: table '{}': {e:#}", t.def.pos, t.name()))
        })
        .collect();
    if errors.is_empty() {
        Ok(catalog)
    } else {
        Err(errors)
    }
}

pub async fn load_statements(
    statements: Vec<Statement>,
    text: &str,
    registry: &Registry,
) -> Result<Job, JobErrors> {
    let mut catalog = checked_catalog(&statements, registry).map_err(JobErrors)?;
    let inserts = sql::inserts(&statements);
    catalog::apply_hints(&mut catalog, &inserts, registry).map_err(JobErrors)?;
    if inserts.is_empty() {
        return Err(JobErrors(vec![
            "the job has no INSERT statement: nothing to run".into(),
        ]));
    }
    let plans = planner::plan_job(&catalog, &inserts)
        .await
        .map_err(|es| JobErrors(es.iter().map(|e| format!("{e:#}")).collect()))?;
    let job_id = job_id(text, catalog.settings.pipeline_name.as_deref());
    check_endpoints(&job_id, &plans)?;
    Ok(Job {
        statements,
        catalog,
        plans,
        job_id,
    })
}

/// Builds every INSERT's source and sink exactly as `run` does (without connecting): every rule a source
/// or sink has (a sink's single topic, writable metadata, routers) and every format plugin's own factory
/// (instantiated through the compile cache, with the table's row type and options) is checked here, so
/// that `validate` refuses what `run` would refuse at start.
fn check_endpoints(job_id: &str, plans: &[PipelinePlan]) -> Result<(), JobErrors> {
    let mut errors: Vec<String> = Vec::new();
    let mut report = |table: &crate::connector_api::CatalogTable, side: &str, e: anyhow::Error| {
        let text = format!("{e:#}");
        let named = format!("table '{}'", table.name());
        let line = if text.starts_with(&named) {
            format!("{}: {text}", table.def.pos)
        } else {
            format!("{}: {named} ({side}): {text}", table.def.pos)
        };
        if !errors.contains(&line) {
            errors.push(line);
        }
    };
    for plan in plans {
        // The two sides meet as in `run` (a sink may refuse the source it is linked to).
        let ctx = crate::connector_api::PipelineContext::detached(job_id, &plan.id);
        if let planner::SourceSpec::Table(t) = &plan.source {
            match t.create_source() {
                Ok(mut source) => source.set_context(&ctx),
                Err(e) => report(t.as_ref(), "read", e),
            }
        }
        match plan.sink.create_sink() {
            Ok(mut sink) => {
                sink.set_context(&ctx);
                if let Err(e) = sink.check_pipeline() {
                    report(plan.sink.as_ref(), "written", e);
                }
            }
            Err(e) => report(plan.sink.as_ref(), "written", e),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(JobErrors(errors))
    }
}

pub async fn load(path: &Path, registry: &Registry) -> Result<Job, JobErrors> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| JobErrors(vec![format!("cannot read {}: {e}", path.display())]))?;
    load_text(&text, registry).await
}

/// The `validate` printout: tables (secrets redacted), settings, pipelines.
pub fn describe(job: &Job) -> String {
    let mut s = format!("job id: {}\n", job.job_id);
    let st = &job.catalog.settings;
    writeln!(
        s,
        "checkpoints: every {}, timeout {}, keep {}, state dir {}",
        crate::options::duration::format(st.checkpoint_interval),
        crate::options::duration::format(st.checkpoint_timeout),
        st.num_retained,
        st.checkpoint_dir
            .as_ref()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "(none: --state-dir)".into())
    )
    .ok();
    for (k, v) in st.raw.display_pairs() {
        writeln!(s, "set {k} = '{v}'").ok();
    }
    for name in &job.catalog.order {
        s.push_str(&catalog::describe_table(&job.catalog.tables[name]));
    }
    for p in &job.plans {
        s.push_str(&p.explain);
    }
    for w in &job.catalog.warnings {
        writeln!(s, "warning: {w}").ok();
    }
    s
}

/// `docs/options.md`: the job settings and every registered connector's options.
pub fn options_markdown(registry: &Registry) -> String {
    let mut sets = vec![&*catalog::settings::JOB_OPTIONS];
    for f in registry.factories() {
        // One section per option set (`pulsar` and `pulsar-inlong` share theirs).
        if !sets.iter().any(|s| std::ptr::eq(*s, f.options())) {
            sets.push(f.options());
        }
    }
    let mut md = crate::options::render_markdown(
        "Options",
        "Generated from the option declarations by `pulsar-connect docs options > docs/options.md`; a test fails when \
         this file is stale. Option values are strings in `WITH ('key' = 'value')`. Unknown options are errors (with \
         the nearest valid name suggested). Secrets (declared secret, or any key containing `auth-params`, `token`, \
         `password`, `secret`, `credential`) are shown as `******` by `validate` and in logs. The options of the \
         format plugins (json, avro, raw, csv, debezium-json, canal-json, maxwell-json, protobuf), the row kinds each reads and \
         writes and their readable metadata (`METADATA FROM 'value.<key>'`) are in their manifests: \
         `pulsar-connect plugins list` prints them, `guest-formats/README.md` describes them.",
        &sets,
    );
    for f in registry.factories() {
        if !f.metadata().is_empty() {
            writeln!(md, "\n### Metadata columns of connector '{}'\n\n| key | type | read | write | description |\n|---|---|---|---|---|", f.name()).ok();
            for m in f.metadata() {
                writeln!(
                    md,
                    "| `{}` | {} | {} | {} | {} |",
                    m.key,
                    m.flink_type,
                    if m.readable { "yes" } else { "no" },
                    if m.writable { "yes" } else { "no" },
                    m.doc
                )
                .ok();
            }
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::options::{OptionDecl, OptionKind, OptionSet};
    use crate::sql::Pos;

    /// Values just outside what a declaration documents (its range, its enum values, its type).
    fn outside(d: &OptionDecl) -> Vec<String> {
        match &d.kind {
            OptionKind::Int { min, max } => {
                let mut v = vec!["not-a-number".to_string()];
                if *min > i64::MIN {
                    v.push((min - 1).to_string());
                }
                if *max < i64::MAX {
                    v.push((max + 1).to_string());
                }
                v
            }
            OptionKind::Double { min, max } => {
                let mut v = vec!["not-a-number".to_string()];
                if *min > f64::MIN {
                    v.push((min - 1.0).to_string());
                }
                if *max < f64::MAX {
                    v.push((max + 1.0).to_string());
                }
                v
            }
            OptionKind::Enum(_) => vec!["no-such-value".into()],
            OptionKind::Bool => vec!["maybe".into()],
            OptionKind::Duration => vec!["5 weeks".into()],
            OptionKind::String => Vec::new(),
        }
    }

    /// Every limit `docs/options.md` documents (ranges, enum values, types) is enforced by validation,
    /// under every spelling (pass-through `properties.` ones too), with an error naming table and option.
    #[test]
    fn documented_limits_are_enforced() {
        let registry = Registry::builtin();
        let mut sets: Vec<&OptionSet> = vec![&*catalog::settings::JOB_OPTIONS];
        sets.extend(registry.factories().map(|f| f.options()));
        let docs = options_markdown(&registry);
        let mut checked = 0;
        for set in sets {
            let heading = format!("## {}\n", set.owner);
            let section = docs
                .split_once(&heading)
                .map(|(_, rest)| rest.split("\n## ").next().unwrap_or_default())
                .unwrap_or_else(|| panic!("{} is not documented", set.owner));
            for d in &set.options {
                if d.is_prefix() {
                    continue;
                }
                let key = d.key.replacen('#', "f", 1);
                let row = format!("| `{}`", d.key);
                let documented = section
                    .lines()
                    .find(|l| l.starts_with(&row))
                    .unwrap_or_else(|| panic!("{} is not documented", d.key));
                assert!(
                    documented.contains(&d.kind.name()),
                    "{}: the documented type is not the declared one: {documented}",
                    d.key
                );
                let mut spellings = vec![key.clone()];
                if let (true, Some(family)) = (d.pass_through, &set.pass_through) {
                    spellings.push(format!("{}{key}", family.prefix));
                }
                for spelling in spellings {
                    for bad in outside(d) {
                        let raw = vec![(spelling.clone(), bad.clone(), Pos::default())];
                        let (_, errors) = set.resolve("t", &raw, &["f".to_string()]);
                        let e = errors
                            .iter()
                            .find(|e| e.option == spelling)
                            .unwrap_or_else(|| {
                                panic!("{} = '{bad}' is accepted ({errors:?})", spelling)
                            });
                        let text = e.to_string();
                        assert!(
                            text.contains("table 't'")
                                && text.contains(&format!("option '{spelling}'")),
                            "{text}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 50, "only {checked} limits checked");
        // The limit issue 15 found documented and clamped silently.
        let raw = vec![(
            "scan.parallelism".to_string(),
            "1025".to_string(),
            Pos::default(),
        )];
        let (_, errors) = crate::connectors::pulsar::options::OPTIONS.resolve("t", &raw, &[]);
        assert!(
            errors.iter().any(|e| e.to_string().ends_with(
                "table 't', option 'scan.parallelism': 1025 is out of range; expected integer 1..=1024"
            )),
            "{errors:?}"
        );
    }

    #[test]
    fn identity() {
        assert_eq!(job_id("x", Some("my job/1")), "my_job_1");
        let a = job_id("INSERT INTO a SELECT * FROM b; -- c", None);
        assert_eq!(a, job_id("INSERT  INTO a\nSELECT * FROM b;", None));
        assert_ne!(a, job_id("INSERT INTO a SELECT * FROM c;", None));
        assert!(a.starts_with("job-") && a.len() == 16);
    }
}
