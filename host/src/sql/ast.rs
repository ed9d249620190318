//! The statements of a job file as the parser returns them: positions, syntax errors, `CREATE TABLE`, `SET`,
//! `INSERT` and statement sets.

use std::fmt;

use super::types::FlinkType;

/// A position in the job file (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u64,
    pub column: u64,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// A syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.pos, self.message)
    }
}

impl std::error::Error for SqlError {}

/// One statement of a job file.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    CreateTable(CreateTable),
    Set {
        key: String,
        value: String,
        pos: Pos,
    },
    Insert(Insert),
    /// `EXECUTE STATEMENT SET BEGIN ... END` / `BEGIN STATEMENT SET; ... END;`
    StatementSet {
        inserts: Vec<Insert>,
        pos: Pos,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: String,
    pub temporary: bool,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub primary_key: Option<Vec<String>>,
    pub watermark: Option<Watermark>,
    pub comment: Option<String>,
    /// `WITH (...)` options in declaration order.
    pub options: Vec<(String, String, Pos)>,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
    pub comment: Option<String>,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ColumnKind {
    Physical(FlinkType),
    /// `name AS expr`: the expression as DataFusion SQL text.
    Computed {
        expr: String,
        flink_text: String,
    },
    /// `name TYPE METADATA [FROM 'key'] [VIRTUAL]`.
    Metadata {
        ty: FlinkType,
        key: Option<String>,
        is_virtual: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Watermark {
    pub column: String,
    pub expr: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub table: String,
    pub columns: Option<Vec<String>>,
    /// The query (`SELECT ...`, `VALUES ...`, `WITH ...`) as DataFusion SQL text.
    pub query: String,
    /// Where the query starts in the job file.
    pub query_pos: Pos,
    pub pos: Pos,
    /// The `/*+ OPTIONS(...) */` hints on its tables (the target's and the query's).
    pub hints: Vec<super::TableHint>,
}

/// Every INSERT of a script, in order (statement sets flattened).
pub fn inserts(statements: &[Statement]) -> Vec<&Insert> {
    let mut out = Vec::new();
    for s in statements {
        match s {
            Statement::Insert(i) => out.push(i),
            Statement::StatementSet { inserts, .. } => out.extend(inserts.iter()),
            _ => {}
        }
    }
    out
}
