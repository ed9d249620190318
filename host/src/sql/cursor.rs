//! A cursor over the tokens of a job file (from `sqlparser`'s tokenizer, whitespace dropped): the token-level
//! helpers shared by the statement parser ([`super`]) and the data type grammar ([`super::type_parser`]).

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use super::{Pos, Result, SqlError};

/// The tokens of `text` without whitespace, each with its line and column.
pub(super) fn tokenize(text: &str) -> Result<Vec<TokenWithSpan>> {
    Ok(tokenize_all(text)?
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect())
}

/// Every token of `text`, whitespace and comments included, each with its line and column.
pub(super) fn tokenize_all(text: &str) -> Result<Vec<TokenWithSpan>> {
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
    Ok(tokens)
}

/// The position just after the last character of `text` (where "end of file" errors point).
pub(super) fn end_pos(text: &str) -> Pos {
    let line = text.lines().count().max(1) as u64;
    let column = text
        .lines()
        .last()
        .map(|l| l.chars().count() as u64 + 1)
        .unwrap_or(1);
    Pos { line, column }
}

pub(super) struct Parser {
    pub(super) tokens: Vec<TokenWithSpan>,
    /// OPTIONS hints, each with the index of its table name in `tokens` ([`super::hints`]).
    pub(super) hints: Vec<(usize, super::TableHint)>,
    pub(super) idx: usize,
    /// Where errors at the end of the tokens point.
    pub(super) end_pos: Pos,
}

impl Parser {
    pub(super) fn new(tokens: Vec<TokenWithSpan>, end_pos: Pos) -> Self {
        Parser {
            tokens,
            hints: Vec::new(),
            idx: 0,
            end_pos,
        }
    }

    pub(super) fn at_end(&self) -> bool {
        self.idx >= self.tokens.len() || matches!(self.tokens[self.idx].token, Token::EOF)
    }

    pub(super) fn peek(&self) -> &Token {
        self.tokens
            .get(self.idx)
            .map(|t| &t.token)
            .unwrap_or(&Token::EOF)
    }

    pub(super) fn peek_at(&self, n: usize) -> &Token {
        self.tokens
            .get(self.idx + n)
            .map(|t| &t.token)
            .unwrap_or(&Token::EOF)
    }

    pub(super) fn pos(&self) -> Pos {
        match self.tokens.get(self.idx) {
            Some(t) if !matches!(t.token, Token::EOF) => Pos {
                line: t.span.start.line,
                column: t.span.start.column,
            },
            _ => self.end_pos,
        }
    }

    pub(super) fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(SqlError {
            pos: self.pos(),
            message: message.into(),
        })
    }

    pub(super) fn describe(&self) -> String {
        if self.at_end() {
            "end of file".to_string()
        } else {
            format!("'{}'", self.peek())
        }
    }

    pub(super) fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if !self.at_end() {
            self.idx += 1;
        }
        t
    }

    pub(super) fn eat(&mut self, token: &Token) -> bool {
        if self.peek() == token {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn is_kw(&self, kw: Keyword) -> bool {
        matches!(self.peek(), Token::Word(w) if w.quote_style.is_none() && w.keyword == kw)
    }

    pub(super) fn is_word(&self, word: &str) -> bool {
        matches!(self.peek(), Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
    }

    pub(super) fn eat_kw(&mut self, kw: Keyword) -> bool {
        if self.is_kw(kw) {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn eat_word(&mut self, word: &str) -> bool {
        if self.is_word(word) {
            self.idx += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn expect_kw(&mut self, kw: Keyword, what: &str) -> Result<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }

    pub(super) fn expect(&mut self, token: &Token, what: &str) -> Result<()> {
        if self.eat(token) {
            Ok(())
        } else {
            self.err(format!("expected {what}, found {}", self.describe()))
        }
    }

    pub(super) fn expect_gt(&mut self) -> Result<()> {
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
    pub(super) fn ident(&mut self, what: &str) -> Result<String> {
        match self.peek().clone() {
            Token::Word(w) => {
                self.idx += 1;
                Ok(w.value)
            }
            _ => self.err(format!("expected {what}, found {}", self.describe())),
        }
    }

    pub(super) fn table_name(&mut self) -> Result<String> {
        let mut name = self.ident("a table name")?;
        while self.eat(&Token::Period) {
            name = self.ident("a table name")?;
        }
        Ok(name)
    }

    pub(super) fn string(&mut self, what: &str) -> Result<String> {
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

    pub(super) fn number(&mut self, what: &str) -> Result<u32> {
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
}
