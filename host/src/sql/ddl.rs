//! `CREATE TABLE`: columns (physical, computed, metadata), `WATERMARK`, `PRIMARY KEY ... NOT ENFORCED`, table
//! comment and `WITH (...)` options. Column types are parsed by [`super::type_parser`], computed column and
//! watermark expressions are translated for DataFusion by [`super::translate`].

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::cursor::Parser;
use super::{ColumnDef, ColumnKind, CreateTable, Pos, Result, SqlError, Watermark, translate};

impl Parser {
    pub(super) fn create_table(&mut self, pos: Pos, temporary: bool) -> Result<CreateTable> {
        let if_not_exists = if self.eat_kw(Keyword::IF) {
            self.expect_kw(Keyword::NOT, "NOT after IF")?;
            self.expect_kw(Keyword::EXISTS, "EXISTS after IF NOT")?;
            true
        } else {
            false
        };
        let name = self.table_name()?;
        let mut table = CreateTable {
            name,
            temporary,
            if_not_exists,
            columns: Vec::new(),
            primary_key: None,
            watermark: None,
            comment: None,
            options: Vec::new(),
            pos,
        };
        self.expect(&Token::LParen, "'(' and the column list")?;
        loop {
            self.table_element(&mut table)?;
            if self.eat(&Token::Comma) {
                continue;
            }
            self.expect(&Token::RParen, "',' or ')' in the column list")?;
            break;
        }
        if self.eat_kw(Keyword::COMMENT) {
            table.comment = Some(self.string("the table comment")?);
        }
        if self.is_kw(Keyword::PARTITIONED) {
            return self.err("PARTITIONED BY is not supported");
        }
        if self.eat_kw(Keyword::WITH) {
            self.expect(&Token::LParen, "'(' after WITH")?;
            if !self.eat(&Token::RParen) {
                loop {
                    let opos = self.pos();
                    let key = self.string("an option key")?;
                    self.expect(&Token::Eq, "'=' between option key and value")?;
                    let value = self.string("an option value")?;
                    if let Some((_, _, first)) = table.options.iter().find(|(k, _, _)| *k == key) {
                        return Err(SqlError {
                            pos: opos,
                            message: format!("option '{key}' is set twice (first at {first})"),
                        });
                    }
                    table.options.push((key, value, opos));
                    if self.eat(&Token::Comma) {
                        continue;
                    }
                    self.expect(&Token::RParen, "',' or ')' in WITH (...)")?;
                    break;
                }
            }
        } else if self.is_kw(Keyword::LIKE) {
            return self.err("CREATE TABLE ... LIKE is not supported");
        }
        if table.columns.is_empty() {
            return Err(SqlError {
                pos,
                message: format!("table '{}' has no columns", table.name),
            });
        }
        Ok(table)
    }

    pub(super) fn table_element(&mut self, table: &mut CreateTable) -> Result<()> {
        let pos = self.pos();
        if self.is_word("WATERMARK")
            && matches!(self.peek_at(1), Token::Word(w) if w.keyword == Keyword::FOR)
        {
            self.idx += 2;
            let column = self.ident("the watermark's time column")?;
            self.expect_kw(Keyword::AS, "AS in WATERMARK FOR c AS expr")?;
            let (expr, _) = self.expression()?;
            if table.watermark.is_some() {
                return Err(SqlError {
                    pos,
                    message: "only one WATERMARK per table".into(),
                });
            }
            table.watermark = Some(Watermark { column, expr });
            return Ok(());
        }
        if self.eat_kw(Keyword::CONSTRAINT) {
            self.ident("a constraint name")?;
        }
        if self.is_kw(Keyword::PRIMARY) {
            self.idx += 1;
            self.expect_kw(Keyword::KEY, "KEY after PRIMARY")?;
            self.expect(&Token::LParen, "'(' and the key columns")?;
            let mut cols = vec![self.ident("a column name")?];
            while self.eat(&Token::Comma) {
                cols.push(self.ident("a column name")?);
            }
            self.expect(&Token::RParen, "')' after the key columns")?;
            self.not_enforced()?;
            if table.primary_key.is_some() {
                return Err(SqlError {
                    pos,
                    message: "a table can have only one PRIMARY KEY".into(),
                });
            }
            table.primary_key = Some(cols);
            return Ok(());
        }
        let name = self.ident("a column name")?;
        if table.columns.iter().any(|c| c.name == name) {
            return Err(SqlError {
                pos,
                message: format!("column '{name}' is declared twice"),
            });
        }
        let kind = if self.eat_kw(Keyword::AS) {
            let (expr, flink_text) = self.expression()?;
            ColumnKind::Computed { expr, flink_text }
        } else {
            let ty = self.data_type()?;
            if self.eat_kw(Keyword::METADATA) {
                let key = if self.eat_kw(Keyword::FROM) {
                    Some(self.string("the metadata key")?)
                } else {
                    None
                };
                let is_virtual = self.eat_kw(Keyword::VIRTUAL);
                ColumnKind::Metadata {
                    ty,
                    key,
                    is_virtual,
                }
            } else {
                ColumnKind::Physical(ty)
            }
        };
        if self.is_kw(Keyword::PRIMARY) {
            self.idx += 1;
            self.expect_kw(Keyword::KEY, "KEY after PRIMARY")?;
            self.not_enforced()?;
            if table.primary_key.is_some() {
                return Err(SqlError {
                    pos,
                    message: "a table can have only one PRIMARY KEY".into(),
                });
            }
            table.primary_key = Some(vec![name.clone()]);
        }
        let comment = if self.eat_kw(Keyword::COMMENT) {
            Some(self.string("the column comment")?)
        } else {
            None
        };
        table.columns.push(ColumnDef {
            name,
            kind,
            comment,
            pos,
        });
        Ok(())
    }

    fn not_enforced(&mut self) -> Result<()> {
        if self.eat_kw(Keyword::NOT) && self.eat_kw(Keyword::ENFORCED) {
            Ok(())
        } else {
            self.err("Flink only supports NOT ENFORCED primary keys: write PRIMARY KEY (...) NOT ENFORCED")
        }
    }

    /// An expression inside a column list: up to the next `,` / `)` / `COMMENT` at depth 0.
    pub(super) fn expression(&mut self) -> Result<(String, String)> {
        let start = self.idx;
        let mut depth = 0i32;
        while !self.at_end() {
            match self.peek() {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket if depth == 0 => break,
                Token::RParen | Token::RBracket => depth -= 1,
                Token::Comma if depth == 0 => break,
                Token::Word(w)
                    if depth == 0 && w.quote_style.is_none() && w.keyword == Keyword::COMMENT =>
                {
                    break;
                }
                _ => {}
            }
            self.idx += 1;
        }
        if start == self.idx {
            return self.err(format!("expected an expression, found {}", self.describe()));
        }
        let flink: Vec<String> = self.tokens[start..self.idx]
            .iter()
            .map(|t| t.token.to_string())
            .collect();
        let expr = translate::to_datafusion(&self.tokens[start..self.idx])?;
        Ok((expr, flink.join(" ")))
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn one(sql: &str) -> Statement {
        let mut v = parse_script(sql).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        v.remove(0)
    }

    #[test]
    fn nested_types_and_shift_right() {
        let Statement::CreateTable(t) = one(
            "CREATE TABLE t (a ARRAY<ROW<x INT, y MAP<STRING, ARRAY<BIGINT>>>> NOT NULL, b DECIMAL(10, 2), c TIMESTAMP(3) WITH LOCAL TIME ZONE, d INT ARRAY) WITH ('connector'='blackhole')",
        ) else {
            panic!()
        };
        assert_eq!(
            t.columns[0].kind,
            ColumnKind::Physical(FlinkType {
                kind: TypeKind::Array(Box::new(FlinkType::new(TypeKind::Row(vec![
                    RowField {
                        name: "x".into(),
                        ty: FlinkType::new(TypeKind::Int),
                        description: None
                    },
                    RowField {
                        name: "y".into(),
                        ty: FlinkType::new(TypeKind::Map(
                            Box::new(FlinkType::new(TypeKind::String)),
                            Box::new(FlinkType::new(TypeKind::Array(Box::new(FlinkType::new(
                                TypeKind::BigInt
                            )))))
                        )),
                        description: None
                    },
                ])))),
                nullable: false,
            })
        );
        assert_eq!(
            t.columns[2].kind,
            ColumnKind::Physical(FlinkType::new(TypeKind::TimestampLtz(3)))
        );
        assert_eq!(
            t.columns[3].kind,
            ColumnKind::Physical(FlinkType::new(TypeKind::Array(Box::new(FlinkType::new(
                TypeKind::Int
            )))))
        );
    }

    #[test]
    fn computed_metadata_pk_watermark() {
        let Statement::CreateTable(t) = one(
            "CREATE TEMPORARY TABLE IF NOT EXISTS `db`.`t` (\n id BIGINT, ts TIMESTAMP_LTZ(3) METADATA FROM 'publishTime' VIRTUAL, -- c\n d AS id * 2 COMMENT 'double', /* x */ WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED) COMMENT 'x' WITH ('a' = 'it''s')",
        ) else {
            panic!()
        };
        assert!(t.temporary && t.if_not_exists);
        assert_eq!(t.name, "t");
        assert!(
            matches!(&t.columns[1].kind, ColumnKind::Metadata { key: Some(k), is_virtual: true, .. } if k == "publishTime")
        );
        assert!(
            matches!(&t.columns[2].kind, ColumnKind::Computed { expr, .. } if expr.contains("id * 2"))
        );
        assert_eq!(t.columns[2].comment.as_deref(), Some("double"));
        assert_eq!(t.watermark.as_ref().unwrap().column, "ts");
        assert_eq!(t.primary_key, Some(vec!["id".to_string()]));
        assert_eq!(t.options[0].1, "it's");
    }
}
