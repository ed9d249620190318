//! Statement structure: `SET`, `INSERT`, `EXECUTE STATEMENT SET` and statement boundaries (`CREATE TABLE` is
//! in [`super::ddl`]), parsed by hand over the tokens of [`super::cursor`].

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::Token;

use super::Result;
use super::ast::{Insert, Pos, SqlError, Statement};
use super::cursor::{self, Parser};
use super::translate;

/// Parses a whole job file.
pub fn parse_script(text: &str) -> Result<Vec<Statement>> {
    let (tokens, hints) = super::hints::extract(cursor::tokenize_all(text)?)?;
    let mut p = Parser::new(tokens, cursor::end_pos(text));
    p.hints = hints;
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
        let first = self.idx;
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
        let query = translate::to_datafusion(&self.tokens[start..self.idx])?;
        let hints = self
            .hints
            .iter()
            .filter(|(i, _)| (first..self.idx).contains(i))
            .map(|(_, h)| h.clone())
            .collect();
        Ok(Insert {
            table,
            columns,
            query,
            query_pos,
            pos,
            hints,
        })
    }

    /// `INSERT INTO t (SELECT ...)` vs `INSERT INTO t (a, b) SELECT ...`.
    fn paren_starts_query(&self) -> bool {
        matches!(self.peek_at(1), Token::Word(w) if w.quote_style.is_none() && matches!(w.keyword, Keyword::SELECT | Keyword::VALUES | Keyword::WITH))
    }
}
