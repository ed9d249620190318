//! The shell's session: the `SET` and `CREATE TABLE` statements that stand, in order, as a job file
//! would hold them. Every change is checked by building the catalog from the whole session, as
//! `validate` does, so the session is always a valid job prelude.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::catalog::{self, Catalog};
use crate::connector_api::Registry;
use crate::sql::{self, ColumnKind, Statement};

use super::split::Piece;
use super::tableau;

/// The shell's own settings (`SET 'sql-client....'`), kept out of the job's settings.
pub const RESULT_MODE: &str = "sql-client.execution.result-mode";
pub const MAX_COLUMN_WIDTH: &str = "sql-client.display.max-column-width";

/// One statement of the session, with its text (the job id of an INSERT is made from the text).
#[derive(Clone)]
struct Entry {
    statement: Statement,
    text: String,
}

pub struct Session {
    pub registry: Registry,
    entries: Vec<Entry>,
    /// `sql-client.display.max-column-width`.
    pub max_width: usize,
    /// `--state-dir` of the shell (over `state.checkpoints.dir`), for INSERT jobs.
    pub state_dir: Option<PathBuf>,
}

/// Parses a statement as the job parser does, with positions counted in the text it came from.
pub fn parse(piece: &Piece) -> Result<Vec<Statement>, Vec<String>> {
    sql::parse_script(&padded(piece)).map_err(|e| vec![e.to_string()])
}

/// The statement preceded by the lines and columns before it, so that the parser's positions are the
/// ones of the file or of the input typed.
pub fn padded(piece: &Piece) -> String {
    format!(
        "{}{}{}",
        "\n".repeat(piece.line.saturating_sub(1)),
        " ".repeat(piece.column.saturating_sub(1)),
        piece.text
    )
}

impl Session {
    pub fn new(registry: Registry, state_dir: Option<PathBuf>) -> Self {
        Session {
            registry,
            entries: Vec::new(),
            max_width: tableau::DEFAULT_MAX_WIDTH,
            state_dir,
        }
    }

    /// The session's statements, for a job.
    pub fn statements(&self) -> Vec<Statement> {
        self.entries.iter().map(|e| e.statement.clone()).collect()
    }

    /// The session's text, one statement a line.
    pub fn text(&self) -> String {
        self.entries
            .iter()
            .map(|e| format!("{}\n", e.text))
            .collect()
    }

    /// The catalog of the session (valid by construction; errors are those of the statements).
    pub fn catalog(&self) -> Result<Catalog, Vec<String>> {
        catalog::build(&self.statements(), &self.registry)
            .map_err(|es| es.iter().map(|e| format!("{e:#}")).collect())
    }

    /// The tables declared, in order.
    pub fn table_names(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| match &e.statement {
                Statement::CreateTable(t) => Some(t.name.clone()),
                _ => None,
            })
            .collect()
    }

    /// Adds statements if the session with them still builds; returns the catalog's warnings.
    fn add(&mut self, statements: Vec<Statement>, text: &str) -> Result<Vec<String>, Vec<String>> {
        let mut all = self.statements();
        all.extend(statements.iter().cloned());
        let catalog = crate::job::checked_catalog(&all, &self.registry)?;
        let known: Vec<String> = catalog::build(&self.statements(), &self.registry)
            .map(|c| c.warnings)
            .unwrap_or_default();
        for statement in statements {
            self.entries.push(Entry {
                statement,
                text: text.trim().to_string(),
            });
        }
        Ok(catalog
            .warnings
            .into_iter()
            .filter(|w| !known.contains(w))
            .collect())
    }

    /// `CREATE TABLE`: the table joins the session when it is valid.
    pub fn create_table(&mut self, piece: &Piece) -> Result<Vec<String>, Vec<String>> {
        let statements = parse(piece)?;
        if let [Statement::CreateTable(t)] = &statements[..]
            && t.if_not_exists
            && self.table_names().contains(&t.name)
        {
            return Ok(Vec::new());
        }
        if !statements
            .iter()
            .all(|s| matches!(s, Statement::CreateTable(_)))
        {
            return Err(vec!["expected one CREATE TABLE statement".into()]);
        }
        self.add(statements, &piece.text)
    }

    /// `SET 'key' = 'value'`: replaces an earlier SET of the key. The shell's own keys are checked here.
    pub fn set(&mut self, piece: &Piece) -> Result<Vec<String>, Vec<String>> {
        let statements = parse(piece)?;
        let [Statement::Set { key, value, pos }] = &statements[..] else {
            return Err(vec!["expected one SET 'key' = 'value' statement".into()]);
        };
        if key == RESULT_MODE {
            return if value.eq_ignore_ascii_case("tableau") {
                Ok(Vec::new())
            } else {
                Err(vec![format!(
                    "{pos}: option '{RESULT_MODE}': '{value}' is not supported; expected one of: tableau (results print as rows arrive)"
                )])
            };
        }
        if key == MAX_COLUMN_WIDTH {
            return match value.parse::<usize>() {
                Ok(w) if (4..=1000).contains(&w) => {
                    self.max_width = w;
                    Ok(Vec::new())
                }
                _ => Err(vec![format!(
                    "{pos}: option '{MAX_COLUMN_WIDTH}': '{value}' is out of range; expected integer 4..=1000"
                )]),
            };
        }
        let key = key.clone();
        let saved = self.entries.clone();
        self.entries
            .retain(|e| !matches!(&e.statement, Statement::Set { key: k, .. } if *k == key));
        self.add(statements, &piece.text)
            .inspect_err(|_| self.entries = saved)
    }

    /// `RESET 'key'` or `RESET` (every SET); whether anything was reset.
    pub fn reset(&mut self, key: Option<&str>) -> Result<String, String> {
        if key == Some(MAX_COLUMN_WIDTH) || key.is_none() {
            self.max_width = tableau::DEFAULT_MAX_WIDTH;
        }
        if matches!(key, Some(RESULT_MODE | MAX_COLUMN_WIDTH)) {
            return Ok(format!(
                "[INFO] '{}' is back to its default",
                key.unwrap_or_default()
            ));
        }
        let before = self.entries.len();
        self.entries.retain(|e| match (&e.statement, key) {
            (Statement::Set { .. }, None) => false,
            (Statement::Set { key: k, .. }, Some(key)) => k != key,
            _ => true,
        });
        let removed = before - self.entries.len();
        match key {
            Some(k) if removed == 0 => Err(format!(
                "'{k}' is not set; SET lists the session's settings"
            )),
            Some(k) => Ok(format!("[INFO] '{k}' is back to its default")),
            None => Ok(format!(
                "[INFO] {removed} setting(s) back to their defaults"
            )),
        }
    }

    /// `DROP TABLE`: running jobs keep their own copy of it.
    pub fn drop_table(&mut self, name: &str, if_exists: bool) -> Result<String, String> {
        let before = self.entries.len();
        self.entries
            .retain(|e| !matches!(&e.statement, Statement::CreateTable(t) if t.name == name));
        if before == self.entries.len() {
            if if_exists {
                return Ok(format!("[INFO] table '{name}' does not exist"));
            }
            return Err(self.unknown_table(name));
        }
        Ok("[INFO] Execute statement succeeded.".to_string())
    }

    fn unknown_table(&self, name: &str) -> String {
        let mut m = format!("table '{name}' is not declared");
        let names = self.table_names();
        if let Some(best) = crate::options::suggest(name, names.iter().map(String::as_str)) {
            write!(m, "; did you mean '{best}'?").ok();
        } else if names.is_empty() {
            m.push_str("; no table is declared yet (CREATE TABLE ...)");
        } else {
            write!(m, "; tables: {}", names.join(", ")).ok();
        }
        m
    }

    /// `SHOW TABLES`
    pub fn show_tables(&self) -> String {
        let rows: Vec<Vec<String>> = self.table_names().into_iter().map(|n| vec![n]).collect();
        tableau::table(&["table name"], &rows)
    }

    /// `SET;`: the session's settings (secrets redacted).
    pub fn show_settings(&self) -> String {
        let mut rows = vec![
            vec![RESULT_MODE.to_string(), "tableau".to_string()],
            vec![MAX_COLUMN_WIDTH.to_string(), self.max_width.to_string()],
        ];
        if let Ok(c) = self.catalog() {
            for (k, v) in c.settings.raw.display_pairs() {
                rows.push(vec![k.to_string(), v.to_string()]);
            }
        }
        tableau::table(&["key", "value"], &rows)
    }

    /// `DESCRIBE t`, with Flink's columns: name, type, null, key, extras, watermark.
    pub fn describe(&self, name: &str) -> Result<String, String> {
        let catalog = self.catalog().map_err(|e| e.join("\n"))?;
        let Some(t) = catalog.get(name) else {
            return Err(self.unknown_table(name));
        };
        let pk = t.def.primary_key.clone().unwrap_or_default();
        let rows: Vec<Vec<String>> = t
            .def
            .columns
            .iter()
            .map(|c| {
                let (ty, extras) = match &c.kind {
                    // The type without NOT NULL: the `null` column says it.
                    ColumnKind::Physical(ty) => (nullable_type(ty), String::new()),
                    ColumnKind::Computed { flink_text, .. } => (
                        t.source_schema()
                            .field_with_name(&c.name)
                            .map(|f| f.data_type().to_string())
                            .unwrap_or_default(),
                        format!("AS {flink_text}"),
                    ),
                    ColumnKind::Metadata {
                        ty,
                        key,
                        is_virtual,
                    } => (
                        nullable_type(ty),
                        format!(
                            "METADATA{}{}",
                            key.as_ref()
                                .map(|k| format!(" FROM '{k}'"))
                                .unwrap_or_default(),
                            if *is_virtual { " VIRTUAL" } else { "" }
                        ),
                    ),
                };
                let nullable = match &c.kind {
                    ColumnKind::Physical(ty) | ColumnKind::Metadata { ty, .. } => ty.nullable,
                    ColumnKind::Computed { .. } => true,
                };
                let watermark = match &t.def.watermark {
                    Some(w) if w.column == c.name => w.expr.clone(),
                    _ => String::new(),
                };
                vec![
                    c.name.clone(),
                    ty,
                    if nullable { "TRUE" } else { "FALSE" }.to_string(),
                    if pk.contains(&c.name) {
                        format!("PRI({})", pk.join(", "))
                    } else {
                        String::new()
                    },
                    extras,
                    watermark,
                ]
            })
            .collect();
        let mut out = tableau::table(
            &["name", "type", "null", "key", "extras", "watermark"],
            &rows,
        );
        writeln!(out, "connector '{}'", t.connector).ok();
        for (k, v) in t.options.display_pairs() {
            writeln!(out, "  {k} = '{v}'").ok();
        }
        Ok(out)
    }
}

fn nullable_type(ty: &crate::sql::FlinkType) -> String {
    crate::sql::FlinkType {
        nullable: true,
        ..ty.clone()
    }
    .to_string()
}
