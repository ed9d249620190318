//! The catalog: tables of a job with their schemas and validated options, and the job's `SET` settings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::anyhow;

mod hints;

pub use hints::apply_hints;

use crate::connector_api::Registry;
pub use crate::connector_api::{CatalogTable, JobSettings, column_field, settings};
use crate::options::OptionError;
use crate::sql::{ColumnKind, CreateTable, Pos, Statement};

/// The tables and settings of a job.
#[derive(Debug, Default)]
pub struct Catalog {
    pub tables: BTreeMap<String, Arc<CatalogTable>>,
    /// Table names in declaration order.
    pub order: Vec<String>,
    pub settings: JobSettings,
    /// Non-fatal findings (unknown `SET` keys, ...).
    pub warnings: Vec<String>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Arc<CatalogTable>> {
        self.tables.get(name)
    }

    /// The error for a table name that is not declared.
    pub fn unknown_table(&self, name: &str, pos: Pos) -> anyhow::Error {
        let mut m = format!(
            "{pos}: table '{name}' is not declared; add CREATE TABLE {name} (...) WITH (...)"
        );
        if let Some(best) = crate::options::suggest(name, self.order.iter().map(String::as_str)) {
            write!(m, "; did you mean '{best}'?").ok();
        }
        anyhow!(m)
    }
}

/// Builds the catalog from parsed statements. Every table is checked; all errors are returned together.
pub fn build(
    statements: &[Statement],
    registry: &Registry,
) -> std::result::Result<Catalog, Vec<anyhow::Error>> {
    let mut catalog = Catalog::default();
    let mut errors = Vec::new();
    let mut sets = Vec::new();
    for s in statements {
        match s {
            Statement::Set { key, value, pos } => sets.push((key.clone(), value.clone(), *pos)),
            Statement::CreateTable(t) => {
                if catalog.tables.contains_key(&t.name) {
                    if t.if_not_exists {
                        continue;
                    }
                    errors.push(anyhow!("{}: table '{}' is already declared", t.pos, t.name));
                    continue;
                }
                match resolve_table(t, registry) {
                    Ok(table) => {
                        catalog.order.push(t.name.clone());
                        catalog.tables.insert(t.name.clone(), Arc::new(table));
                    }
                    Err(es) => errors.extend(es),
                }
            }
            _ => {}
        }
    }
    match settings::resolve(&sets) {
        Ok((settings, warnings)) => {
            catalog.settings = settings;
            catalog.warnings = warnings;
        }
        Err(e) => errors.push(e),
    }
    if errors.is_empty() {
        Ok(catalog)
    } else {
        Err(errors)
    }
}

/// Resolves one table; every problem found is returned (option errors first, then the connector's own
/// checks of the options that were valid).
fn resolve_table(
    t: &CreateTable,
    registry: &Registry,
) -> std::result::Result<CatalogTable, Vec<anyhow::Error>> {
    let Some((_, connector, cpos)) = t.options.iter().find(|(k, _, _)| k == "connector") else {
        return Err(vec![anyhow!(
            "{}: table '{}' has no 'connector' option; add WITH ('connector' = '...', ...)",
            t.pos,
            t.name
        )]);
    };
    let Some(factory) = registry.get(connector) else {
        return Err(vec![anyhow!(
            "{cpos}: table '{}': {}",
            t.name,
            registry.unknown_message(connector)
        )]);
    };
    // Options of plugins (formats) are checked by the connector against the plugin's manifest.
    let plugin_prefixes = factory.plugin_option_prefixes(&t.options);
    let (plugin_raw, raw): (Vec<_>, Vec<_>) = t
        .options
        .iter()
        .filter(|(k, _, _)| k != "connector")
        .cloned()
        .partition(|(k, _, _)| plugin_prefixes.iter().any(|p| k.starts_with(p.as_str())));
    let fields: Vec<String> = t.columns.iter().map(|c| c.name.clone()).collect();
    let (mut options, option_errors) = factory.options().resolve(&t.name, &raw, &fields);
    let reported: Vec<String> = option_errors.iter().map(|e| e.option.clone()).collect();
    let mut errors: Vec<anyhow::Error> = option_errors
        .into_iter()
        .map(|e: OptionError| anyhow!(e.to_string()))
        .collect();
    options.insert("connector", connector);
    for (k, v, _) in &plugin_raw {
        options.insert(k, v);
    }
    // Metadata columns must name keys the connector exposes.
    for c in &t.columns {
        if let ColumnKind::Metadata { key, .. } = &c.kind {
            let key = key.as_deref().unwrap_or(&c.name);
            if !factory.metadata().iter().any(|m| m.key == key) && !factory.owns_metadata_key(key) {
                let available: Vec<&str> = factory.metadata().iter().map(|m| m.key).collect();
                errors.push(anyhow!(
                    "{}: table '{}', column '{}': connector '{}' has no metadata key '{key}'{}",
                    c.pos,
                    t.name,
                    c.name,
                    connector,
                    if available.is_empty() {
                        "; it exposes no metadata".to_string()
                    } else {
                        format!("; available keys: {}", available.join(", "))
                    }
                ));
            }
        }
    }
    if let Some(pk) = &t.primary_key {
        for k in pk {
            if !t.columns.iter().any(|c| &c.name == k) {
                errors.push(anyhow!(
                    "{}: table '{}': primary key column '{k}' is not declared",
                    t.pos,
                    t.name
                ));
            }
        }
    }
    if let Some(w) = &t.watermark
        && !t.columns.iter().any(|c| c.name == w.column)
    {
        errors.push(anyhow!(
            "{}: table '{}': watermark column '{}' is not declared",
            t.pos,
            t.name,
            w.column
        ));
    }
    let mut table = CatalogTable {
        def: t.clone(),
        connector: connector.clone(),
        options,
        factory: factory.clone(),
        config: None,
    };
    match factory.validate_table(&table) {
        Ok(config) => table.config = config,
        Err(e) => {
            let text = format!("{e:#}");
            // An option already reported (unknown, invalid, missing) often fails the connector's checks too.
            if !reported.iter().any(|o| text.contains(&format!("'{o}'"))) {
                errors.push(anyhow!("{}: table '{}': {text}", t.pos, t.name));
            }
        }
    }
    if errors.is_empty() {
        Ok(table)
    } else {
        Err(errors)
    }
}

/// Human-readable description of a table for `validate` (secrets redacted).
pub fn describe_table(t: &CatalogTable) -> String {
    let mut s = format!(
        "table {} (connector '{}', line {})\n",
        t.name(),
        t.connector,
        t.def.pos.line
    );
    for c in &t.def.columns {
        let kind = match &c.kind {
            ColumnKind::Physical(ty) => ty.to_string(),
            ColumnKind::Computed { flink_text, .. } => format!("AS {flink_text}"),
            ColumnKind::Metadata {
                ty,
                key,
                is_virtual,
            } => format!(
                "{ty} METADATA{}{}",
                key.as_ref()
                    .map(|k| format!(" FROM '{k}'"))
                    .unwrap_or_default(),
                if *is_virtual { " VIRTUAL" } else { "" }
            ),
        };
        writeln!(s, "  column {} {kind}", c.name).ok();
    }
    if let Some(pk) = &t.def.primary_key {
        writeln!(s, "  primary key ({}) not enforced", pk.join(", ")).ok();
    }
    if let Some(w) = &t.def.watermark {
        writeln!(
            s,
            "  watermark for {} as {} (kept, not used: no event-time operators)",
            w.column, w.expr
        )
        .ok();
    }
    for (k, v) in t.options.display_pairs() {
        writeln!(s, "  option {k} = '{v}'").ok();
    }
    s
}
