//! The Flink SQL dialect of job files.
//!
//! The statements ([`ast`]) are parsed by hand — statement structure (`SET`, `INSERT`, `EXECUTE STATEMENT SET`)
//! in [`parser`], `CREATE TABLE` in [`ddl`] — over the tokens of `sqlparser`'s tokenizer (which knows
//! back-quoted identifiers, string escapes and both comment styles and gives every token a line and column;
//! [`cursor`]). Data types have their own grammar ([`type_parser`]), used by DDL and by the type of every `CAST`
//! alike. Expressions and queries are not interpreted here: their tokens are re-emitted as DataFusion SQL text
//! ([`translate`]) and planned by DataFusion in the planner.

mod ast;
mod cursor;
mod ddl;
mod hints;
mod parser;
mod row_kind;
pub mod translate;
mod type_parser;
pub mod types;

pub use ast::{
    ColumnDef, ColumnKind, CreateTable, Insert, Pos, SqlError, Statement, Watermark, inserts,
};
pub use hints::TableHint;
pub use parser::parse_script;
pub use row_kind::{ChangelogMode, RowKind};
pub use type_parser::parse_type;
pub use types::{FlinkType, RowField, TypeKind};

type Result<T> = std::result::Result<T, SqlError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_positions() {
        let e = parse_script("CREATE TABLE t (\n  a FOO\n) WITH ()").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, column: 5 });
        assert!(e.message.contains("unknown data type 'FOO'"), "{e}");
        let e = parse_script("CREATE TABLE t (a INT) WITH ('x' = 'y', 'x' = 'z')").unwrap_err();
        assert!(e.message.contains("set twice"), "{e}");
        let e = parse_script("CREATE TABLE t (a INT, PRIMARY KEY (a))").unwrap_err();
        assert!(e.message.contains("NOT ENFORCED"), "{e}");
    }

    #[test]
    fn set_insert_statement_set() {
        let v = parse_script("SET 'pipeline.name' = 'j';\nSET execution.checkpointing.interval = 10s;\nEXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT * FROM b; INSERT INTO c (x) VALUES (1); END;").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(
            v[1],
            Statement::Set {
                key: "execution.checkpointing.interval".into(),
                value: "10s".into(),
                pos: Pos { line: 2, column: 1 }
            }
        );
        let Statement::StatementSet { inserts, .. } = &v[2] else {
            panic!()
        };
        assert_eq!(inserts[1].columns, Some(vec!["x".to_string()]));
        let v = parse_script("EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT CASE WHEN x THEN 1 ELSE 2 END FROM b END").unwrap();
        let Statement::StatementSet { inserts, .. } = &v[0] else {
            panic!()
        };
        assert_eq!(
            inserts[0].query,
            "SELECT CASE WHEN x THEN 1 ELSE 2 END FROM b"
        );
    }
}
