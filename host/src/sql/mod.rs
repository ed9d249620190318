//! The Flink SQL dialect of job files.
//!
//! Statement structure (DDL, `SET`, `INSERT`, `EXECUTE STATEMENT SET`) is parsed here by hand over the tokens
//! of `sqlparser`'s tokenizer (which knows back-quoted identifiers, string escapes and both comment styles and
//! gives every token a line and column). Expressions and queries are not interpreted here: their tokens are
//! re-emitted as DataFusion SQL text ([`translate`]) and planned by DataFusion in the planner.

pub mod translate;
pub mod types;

use std::fmt;

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

pub use types::{FlinkType, RowField, TypeKind};

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

type Result<T> = std::result::Result<T, SqlError>;

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
}

/// Parses a whole job file.
pub fn parse_script(text: &str) -> Result<Vec<Statement>> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .with_unescape(false)
        .tokenize_with_location()
        .map_err(|e| SqlError {
            pos: Pos {
                line: e.location.line,
                column: e.location.column,
            },
            message: e.message.clone(),
        })?;
    let tokens: Vec<TokenWithSpan> = tokens
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let mut p = Parser {
        tokens,
        idx: 0,
        end_pos: end_pos(text),
    };
    let mut out = Vec::new();
    loop {
        while p.eat(&Token::SemiColon) {}
        if p.at_end() {
            break;
        }
        out.push(p.statement()?);
    }
    Ok(out)
}

fn end_pos(text: &str) -> Pos {
    let line = text.lines().count().max(1) as u64;
    let column = text
        .lines()
        .last()
        .map(|l| l.chars().count() as u64 + 1)
        .unwrap_or(1);
    Pos { line, column }
}

struct Parser {
    tokens: Vec<TokenWithSpan>,
    idx: usize,
    end_pos: Pos,
}

/// Keywords that start a statement; a statement that is not closed with `;` ends where one of them appears at
/// nesting depth 0 (the InLong documentation's job omits the semicolons).
const STATEMENT_STARTS: &[Keyword] = &[
    Keyword::CREATE,
    Keyword::INSERT,
    Keyword::SET,
    Keyword::EXECUTE,
    Keyword::END,
    Keyword::BEGIN,
];

impl Parser {
    fn at_end(&self) -> bool {
        self.idx >= self.tokens.len() || matches!(self.tokens[self.idx].token, Token::EOF)
    }

    fn peek(&self) -> &Token {
        self.tokens
            .get(self.idx)
            .map(|t| &t.token)
            .unwrap_or(&Token::EOF)
    }

    fn peek_at(&self, n: usize) -> &Token {
        self.tokens
            .get(self.idx + n)
            .map(|t| &t.token)
            .unwrap_or(&Token::EOF)
    }

    fn pos(&self) -> Pos {
        match self.tokens.get(self.idx) {
            Some(t) if !matches!(t.token, Token::EOF) => Pos {
                line: t.span.start.line,
                column: t.span.start.column,
            },
            _ => self.end_pos,
        }
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(SqlError {
            pos: self.pos(),
            message: message.into(),
        })
    }

    fn describe(&self) -> String {
        if self.at_end() {
            "end of file".to_string()
        } else {
            format!("'{}'", self.peek())
        }
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if !self.at_end() {
            self.idx += 1;
        }
        t
    }

    fn eat(&mut self, token: &Token) -> bool {
        if self.peek() == token {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    fn is_kw(&self, kw: Keyword) -> bool {
        matches!(self.peek(), Token::Word(w) if w.quote_style.is_none() && w.keyword == kw)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
    }

    fn eat_kw(&mut self, kw: Keyword) -> bool {
        if self.is_kw(kw) {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if self.is_word(word) {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: Keyword, what: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }

    fn expect(&mut self, token: &Token, what: &str) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }

    fn expect_gt(&mut self) -> Result<()> {
        match self.peek() {
            Token::Gt => {
                self.idx += 1;
                Ok(())
            }
            Token::ShiftRight => {
                // `>>`: consume one `>` and leave the other.
                self.tokens[self.idx].token = Token::Gt;
                self.tokens[self.idx].span.start.column += 1;
                Ok(())
            }
            _ => self.err(format!("expected '>', found {}", self.describe())),
        }
    }

    /// An identifier, possibly qualified (`catalog.db.table`): the last part is the name.
    fn ident(&mut self, what: &str) -> Result<String> {
        match self.peek().clone() {
            Token::Word(w) => {
                self.idx += 1;
                Ok(w.value)
            }
            _ => self.err(format!("expected {what}, found {}", self.describe())),
        }
    }

    fn table_name(&mut self) -> Result<String> {
        let mut name = self.ident("a table name")?;
        while self.eat(&Token::Period) {
            name = self.ident("a table name")?;
        }
        Ok(name)
    }

    fn string(&mut self, what: &str) -> Result<String> {
        match self.peek().clone() {
            Token::SingleQuotedString(s) => {
                self.idx += 1;
                Ok(s.replace("''", "'"))
            }
            _ => self.err(format!(
                "expected {what} (a quoted string), found {}",
                self.describe()
            )),
        }
    }

    fn number(&mut self, what: &str) -> Result<u32> {
        match self.peek().clone() {
            Token::Number(n, _) => match n.parse::<u32>() {
                Ok(v) => {
                    self.idx += 1;
                    Ok(v)
                }
                Err(_) => self.err(format!(
                    "{what} must be a non-negative integer, found '{n}'"
                )),
            },
            _ => self.err(format!("expected {what}, found {}", self.describe())),
        }
    }

    fn statement(&mut self) -> Result<Statement> {
        let pos = self.pos();
        if self.eat_kw(Keyword::CREATE) {
            let temporary = self.eat_kw(Keyword::TEMPORARY);
            if self.is_kw(Keyword::TABLE) {
                self.idx += 1;
                return self
                    .create_table(pos, temporary)
                    .map(Statement::CreateTable);
            }
            return self.err(format!(
                "only CREATE [TEMPORARY] TABLE is supported, found CREATE {}{}",
                if temporary { "TEMPORARY " } else { "" },
                self.describe()
            ));
        }
        if self.is_kw(Keyword::SET) {
            self.idx += 1;
            return self.set(pos);
        }
        if self.is_kw(Keyword::INSERT) {
            return self.insert().map(Statement::Insert);
        }
        if self.eat_kw(Keyword::EXECUTE) {
            self.expect_kw(Keyword::STATEMENT, "STATEMENT SET after EXECUTE")?;
            self.expect_kw(Keyword::SET, "SET after EXECUTE STATEMENT")?;
            self.expect_kw(Keyword::BEGIN, "BEGIN after EXECUTE STATEMENT SET")?;
            return self.statement_set(pos);
        }
        if self.eat_kw(Keyword::BEGIN) {
            self.expect_kw(Keyword::STATEMENT, "STATEMENT SET after BEGIN")?;
            self.expect_kw(Keyword::SET, "SET after BEGIN STATEMENT")?;
            self.eat(&Token::SemiColon);
            return self.statement_set(pos);
        }
        if self.is_kw(Keyword::SELECT) {
            return self.err("a bare SELECT has no sink: write INSERT INTO <table> SELECT ...");
        }
        self.err(format!(
            "expected a statement (CREATE TABLE, SET, INSERT INTO, EXECUTE STATEMENT SET), found {}",
            self.describe()
        ))
    }

    fn statement_set(&mut self, pos: Pos) -> Result<Statement> {
        let mut inserts = Vec::new();
        loop {
            while self.eat(&Token::SemiColon) {}
            if self.eat_kw(Keyword::END) {
                break;
            }
            if self.at_end() {
                return self.err("statement set is not closed with END");
            }
            if !self.is_kw(Keyword::INSERT) {
                return self.err(format!(
                    "only INSERT statements are allowed in a statement set, found {}",
                    self.describe()
                ));
            }
            inserts.push(self.insert()?);
        }
        if inserts.is_empty() {
            return Err(SqlError {
                pos,
                message: "statement set contains no INSERT statement".into(),
            });
        }
        Ok(Statement::StatementSet { inserts, pos })
    }

    fn set(&mut self, pos: Pos) -> Result<Statement> {
        // `SET 'key' = 'value'` (Flink 1.13+) or the SQL client's unquoted `SET key = value`.
        let key = if let Token::SingleQuotedString(_) = self.peek() {
            self.string("the option key")?
        } else {
            self.raw_until(|t| matches!(t, Token::Eq))?
        };
        if key.is_empty() {
            return self.err("SET needs a key: SET 'key' = 'value'");
        }
        self.expect(&Token::Eq, "'=' in SET 'key' = 'value'")?;
        let value = if let Token::SingleQuotedString(_) = self.peek() {
            self.string("the option value")?
        } else {
            self.raw_until(|t| matches!(t, Token::SemiColon))?
        };
        Ok(Statement::Set { key, value, pos })
    }

    /// Concatenates tokens verbatim (no spaces) until `stop` or a statement boundary.
    fn raw_until(&mut self, stop: impl Fn(&Token) -> bool) -> Result<String> {
        let mut s = String::new();
        let line = self.tokens.get(self.idx).map(|t| t.span.start.line);
        while !self.at_end() && !stop(self.peek()) && !matches!(self.peek(), Token::SemiColon) {
            if self.tokens[self.idx].span.start.line != line.unwrap_or(0) {
                break;
            }
            s.push_str(&self.next().to_string());
        }
        Ok(s)
    }

    fn insert(&mut self) -> Result<Insert> {
        let pos = self.pos();
        self.expect_kw(Keyword::INSERT, "INSERT")?;
        if self.is_kw(Keyword::OVERWRITE) {
            return self
                .err("INSERT OVERWRITE is not supported for streaming sinks; use INSERT INTO");
        }
        self.expect_kw(Keyword::INTO, "INTO after INSERT")?;
        let table = self.table_name()?;
        let mut columns = None;
        if self.peek() == &Token::LParen && !self.paren_starts_query() {
            self.idx += 1;
            let mut cols = vec![self.ident("a column name")?];
            while self.eat(&Token::Comma) {
                cols.push(self.ident("a column name")?);
            }
            self.expect(&Token::RParen, "')' after the column list")?;
            columns = Some(cols);
        }
        let query_pos = self.pos();
        if !(self.is_kw(Keyword::SELECT)
            || self.is_kw(Keyword::VALUES)
            || self.is_kw(Keyword::WITH)
            || self.peek() == &Token::LParen)
        {
            return self.err(format!(
                "expected SELECT or VALUES after INSERT INTO {table}, found {}",
                self.describe()
            ));
        }
        let start = self.idx;
        let mut depth = 0i32;
        // `CASE ... END` must not end the statement.
        let mut cases = 0u32;
        while !self.at_end() {
            match self.peek() {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket => depth -= 1,
                Token::SemiColon if depth <= 0 => break,
                Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::CASE => {
                    cases += 1
                }
                Token::Word(w)
                    if w.quote_style.is_none() && w.keyword == Keyword::END && cases > 0 =>
                {
                    cases -= 1
                }
                Token::Word(w)
                    if depth <= 0
                        && self.idx > start
                        && w.quote_style.is_none()
                        && STATEMENT_STARTS.contains(&w.keyword) =>
                {
                    break;
                }
                _ => {}
            }
            self.idx += 1;
        }
        let query = translate::to_datafusion(&self.tokens[start..self.idx])
            .map_err(|(p, m)| SqlError { pos: p, message: m })?;
        Ok(Insert {
            table,
            columns,
            query,
            query_pos,
            pos,
        })
    }

    /// `INSERT INTO t (SELECT ...)` vs `INSERT INTO t (a, b) SELECT ...`.
    fn paren_starts_query(&self) -> bool {
        matches!(self.peek_at(1), Token::Word(w) if w.quote_style.is_none() && matches!(w.keyword, Keyword::SELECT | Keyword::VALUES | Keyword::WITH))
    }

    fn create_table(&mut self, pos: Pos, temporary: bool) -> Result<CreateTable> {
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

    fn table_element(&mut self, table: &mut CreateTable) -> Result<()> {
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
    fn expression(&mut self) -> Result<(String, String)> {
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
        let expr = translate::to_datafusion(&self.tokens[start..self.idx])
            .map_err(|(p, m)| SqlError { pos: p, message: m })?;
        Ok((expr, flink.join(" ")))
    }

    /// A Flink data type with an optional `NOT NULL` / `NULL`, and the postfix `ARRAY` form.
    fn data_type(&mut self) -> Result<FlinkType> {
        let mut ty = self.base_type()?;
        loop {
            if self.is_kw(Keyword::NOT)
                && matches!(self.peek_at(1), Token::Word(w) if w.keyword == Keyword::NULL)
            {
                self.idx += 2;
                ty.nullable = false;
            } else if self.eat_kw(Keyword::NULL) {
                ty.nullable = true;
            } else if self.eat_kw(Keyword::ARRAY) {
                ty = FlinkType::new(TypeKind::Array(Box::new(ty)));
            } else {
                return Ok(ty);
            }
        }
    }

    fn opt_len(&mut self, default: u32) -> Result<u32> {
        if self.eat(&Token::LParen) {
            let n = self.number("a length")?;
            self.expect(&Token::RParen, "')'")?;
            if n == 0 {
                return self.err("length must be at least 1");
            }
            Ok(n)
        } else {
            Ok(default)
        }
    }

    fn opt_precision(&mut self, default: u8, max: u8) -> Result<u8> {
        if self.eat(&Token::LParen) {
            let pos = self.pos();
            let n = self.number("a precision")?;
            self.expect(&Token::RParen, "')'")?;
            if n > max as u32 {
                return Err(SqlError {
                    pos,
                    message: format!("precision must be between 0 and {max}, found {n}"),
                });
            }
            Ok(n as u8)
        } else {
            Ok(default)
        }
    }

    fn base_type(&mut self) -> Result<FlinkType> {
        let pos = self.pos();
        let word = match self.peek().clone() {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            _ => return self.err(format!("expected a data type, found {}", self.describe())),
        };
        self.idx += 1;
        let kind = match word.as_str() {
            "CHAR" | "CHARACTER" => {
                if self.eat_word("VARYING") {
                    TypeKind::Varchar(self.opt_len(1)?)
                } else {
                    TypeKind::Char(self.opt_len(1)?)
                }
            }
            "VARCHAR" => {
                // The vendor's examples write a bare `varchar` for free text; lengths are not enforced on
                // write (Flink's `table.exec.sink.type-length-enforcer` default IGNORE), so read it as STRING.
                if self.peek() == &Token::LParen {
                    TypeKind::Varchar(self.opt_len(1)?)
                } else {
                    TypeKind::String
                }
            }
            "STRING" => TypeKind::String,
            "BOOLEAN" | "BOOL" => TypeKind::Boolean,
            "BINARY" => TypeKind::Binary(self.opt_len(1)?),
            "VARBINARY" => TypeKind::Varbinary(self.opt_len(1)?),
            "BYTES" => TypeKind::Bytes,
            "DECIMAL" | "DEC" | "NUMERIC" => {
                let (mut p, mut s) = (10u32, 0u32);
                if self.eat(&Token::LParen) {
                    p = self.number("a precision")?;
                    if self.eat(&Token::Comma) {
                        s = self.number("a scale")?;
                    }
                    self.expect(&Token::RParen, "')'")?;
                }
                if !(1..=38).contains(&p) || s > p {
                    return Err(SqlError {
                        pos,
                        message: format!(
                            "DECIMAL({p}, {s}): precision must be 1..38 and scale 0..precision"
                        ),
                    });
                }
                TypeKind::Decimal(p as u8, s as i8)
            }
            "TINYINT" => TypeKind::TinyInt,
            "SMALLINT" => TypeKind::SmallInt,
            "INT" | "INTEGER" => TypeKind::Int,
            "BIGINT" => TypeKind::BigInt,
            "FLOAT" | "REAL" => TypeKind::Float,
            "DOUBLE" => {
                self.eat_word("PRECISION");
                TypeKind::Double
            }
            "DATE" => TypeKind::Date,
            "TIME" => {
                let p = self.opt_precision(0, 9)?;
                if self.eat_kw(Keyword::WITHOUT) {
                    self.expect_kw(Keyword::TIME, "TIME ZONE")?;
                    self.expect_kw(Keyword::ZONE, "ZONE")?;
                }
                TypeKind::Time(p)
            }
            "TIMESTAMP" => {
                let p = self.opt_precision(6, 9)?;
                if self.eat_kw(Keyword::WITHOUT) {
                    self.expect_kw(Keyword::TIME, "TIME ZONE")?;
                    self.expect_kw(Keyword::ZONE, "ZONE")?;
                    TypeKind::Timestamp(p)
                } else if self.is_kw(Keyword::WITH) {
                    self.idx += 1;
                    if self.eat_kw(Keyword::LOCAL) {
                        self.expect_kw(Keyword::TIME, "TIME ZONE")?;
                        self.expect_kw(Keyword::ZONE, "ZONE")?;
                        TypeKind::TimestampLtz(p)
                    } else {
                        return Err(SqlError { pos, message: "TIMESTAMP WITH TIME ZONE is not supported by Flink; use TIMESTAMP_LTZ / TIMESTAMP WITH LOCAL TIME ZONE".into() });
                    }
                } else {
                    TypeKind::Timestamp(p)
                }
            }
            "TIMESTAMP_LTZ" => TypeKind::TimestampLtz(self.opt_precision(6, 9)?),
            "ARRAY" => {
                self.expect(&Token::Lt, "'<' after ARRAY")?;
                let e = self.data_type()?;
                self.expect_gt()?;
                TypeKind::Array(Box::new(e))
            }
            "MAP" => {
                self.expect(&Token::Lt, "'<' after MAP")?;
                let k = self.data_type()?;
                self.expect(&Token::Comma, "',' between the MAP key and value types")?;
                let v = self.data_type()?;
                self.expect_gt()?;
                TypeKind::Map(Box::new(k), Box::new(v))
            }
            "ROW" => {
                let angle = if self.eat(&Token::Lt) {
                    true
                } else if self.eat(&Token::LParen) {
                    false
                } else {
                    return self.err("expected '<' or '(' after ROW");
                };
                let mut fields: Vec<RowField> = Vec::new();
                let closes = |p: &Parser| {
                    if angle {
                        matches!(p.peek(), Token::Gt | Token::ShiftRight)
                    } else {
                        p.peek() == &Token::RParen
                    }
                };
                if !closes(self) {
                    loop {
                        let fpos = self.pos();
                        let name = self.ident("a ROW field name")?;
                        if fields.iter().any(|f| f.name == name) {
                            return Err(SqlError {
                                pos: fpos,
                                message: format!("ROW field '{name}' is declared twice"),
                            });
                        }
                        let ty = self.data_type()?;
                        let description = if let Token::SingleQuotedString(_) = self.peek() {
                            Some(self.string("a field description")?)
                        } else {
                            None
                        };
                        fields.push(RowField {
                            name,
                            ty,
                            description,
                        });
                        if !self.eat(&Token::Comma) {
                            break;
                        }
                    }
                }
                if angle {
                    self.expect_gt()?;
                } else {
                    self.expect(&Token::RParen, "')' closing ROW(...)")?;
                }
                TypeKind::Row(fields)
            }
            "MULTISET" | "RAW" | "INTERVAL" | "NULL" | "SYMBOL" => {
                return Err(SqlError {
                    pos,
                    message: format!("data type {word} is not supported in pulsar-connect tables"),
                });
            }
            other => {
                return Err(SqlError {
                    pos,
                    message: format!("unknown data type '{other}'"),
                });
            }
        };
        Ok(FlinkType::new(kind))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
