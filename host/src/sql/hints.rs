//! Flink's dynamic table options: `FROM t /*+ OPTIONS('k' = 'v', ...) */` and `INSERT INTO t /*+
//! OPTIONS(...) */ SELECT ...`. The tokenizer gives a hint as a comment; here each OPTIONS hint that follows
//! a table name becomes a [`TableHint`], and the table name before it becomes the hint's own name
//! (`` `t$options1` ``), under which the catalog registers the table with the hint's options merged over its
//! own (`catalog::hints`). Other hints (`/*+ BROADCAST(t) */`) stay comments, as before.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace, Word};

use super::{Pos, Result, SqlError};
use datafusion::sql::sqlparser::keywords::Keyword;

/// Words that end where a hint cannot follow a table name (`SELECT /*+ ... */`).
const NOT_A_TABLE: &[Keyword] = &[
    Keyword::SELECT,
    Keyword::DISTINCT,
    Keyword::ALL,
    Keyword::FROM,
    Keyword::JOIN,
    Keyword::INTO,
    Keyword::WHERE,
    Keyword::ON,
    Keyword::AS,
    Keyword::BY,
    Keyword::AND,
    Keyword::OR,
    Keyword::NOT,
];

/// One `/*+ OPTIONS(...) */` on a table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableHint {
    /// The name the query uses for the hinted table (the catalog's key for it).
    pub key: String,
    /// The table the hint is on, as declared.
    pub table: String,
    /// The hint's options, in order (a later one of the same key wins).
    pub options: Vec<(String, String)>,
    /// Where the hint is.
    pub pos: Pos,
}

/// Tokens with the hints taken out: each hint with the index of its table name among the tokens.
type Extracted = (Vec<TokenWithSpan>, Vec<(usize, TableHint)>);

/// The name a hinted table takes: `t$options<n>` (n counts the hints of the script from 1).
fn hinted_name(table: &str, n: usize) -> String {
    format!("{table}$options{n}")
}

/// Drops whitespace and comments from `tokens`, turning each OPTIONS hint into a [`TableHint`] on the
/// table name before it (which takes the hint's name). Returns the tokens and, per hint, the index of
/// its table name among them.
pub(super) fn extract(tokens: Vec<TokenWithSpan>) -> Result<Extracted> {
    let mut kept: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut hints = Vec::new();
    for t in tokens {
        let Token::Whitespace(w) = &t.token else {
            kept.push(t);
            continue;
        };
        let Whitespace::MultiLineComment(text) = w else {
            continue;
        };
        let Some(body) = text.strip_prefix('+') else {
            continue;
        };
        let pos = Pos {
            line: t.span.start.line,
            column: t.span.start.column,
        };
        let Some(options) = options_hint(body, pos)? else {
            continue;
        };
        let at = kept.len().checked_sub(1);
        let table = match at.map(|i| &kept[i].token) {
            Some(Token::Word(w))
                if w.quote_style.is_some() || !NOT_A_TABLE.contains(&w.keyword) =>
            {
                w.value.clone()
            }
            _ => {
                return Err(SqlError {
                    pos,
                    message: "an OPTIONS hint must follow a table name (FROM t /*+ OPTIONS('k' = 'v') */)".into(),
                });
            }
        };
        let i = at.unwrap_or_default();
        let key = hinted_name(&table, hints.len() + 1);
        kept[i].token = Token::Word(Word {
            value: key.clone(),
            quote_style: Some('`'),
            keyword: Keyword::NoKeyword,
        });
        hints.push((
            i,
            TableHint {
                key,
                table,
                options,
                pos,
            },
        ));
    }
    Ok((kept, hints))
}

/// The options of `body` (a hint comment without its `/*+` and `*/`) when it is an OPTIONS hint.
fn options_hint(body: &str, pos: Pos) -> Result<Option<Vec<(String, String)>>> {
    let err = |message: String| SqlError { pos, message };
    let tokens: Vec<Token> = Tokenizer::new(&GenericDialect {}, body)
        .with_unescape(false)
        .tokenize()
        .map_err(|e| err(format!("in the hint: {}", e.message)))?
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let Some(Token::Word(w)) = tokens.first() else {
        return Ok(None);
    };
    if !w.value.eq_ignore_ascii_case("OPTIONS") {
        return Ok(None);
    }
    let usage = "OPTIONS('key' = 'value', ...)";
    if tokens.get(1) != Some(&Token::LParen) {
        return Err(err(format!("expected {usage}")));
    }
    if tokens.get(2) == Some(&Token::RParen) {
        return Err(err(format!(
            "an OPTIONS hint without options; write {usage}"
        )));
    }
    let mut options = Vec::new();
    let mut i = 2;
    loop {
        let (
            Some(Token::SingleQuotedString(k)),
            Some(Token::Eq),
            Some(Token::SingleQuotedString(v)),
        ) = (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2))
        else {
            return Err(err(format!(
                "expected 'key' = 'value' in the hint, found {}; write {usage}",
                tokens
                    .get(i)
                    .map_or_else(|| "its end".to_string(), |t| format!("'{t}'"))
            )));
        };
        options.push((k.replace("''", "'"), v.replace("''", "'")));
        i += 3;
        match tokens.get(i) {
            Some(Token::Comma) => i += 1,
            Some(Token::RParen) => break,
            other => {
                return Err(err(format!(
                    "expected ',' or ')' in the hint, found {}; write {usage}",
                    other.map_or_else(|| "its end".to_string(), |t| format!("'{t}'"))
                )));
            }
        }
    }
    if options.is_empty() {
        return Err(err(format!(
            "an OPTIONS hint without options; write {usage}"
        )));
    }
    Ok(Some(options))
}

#[cfg(test)]
mod tests {
    use super::super::{Statement, parse_script};

    #[test]
    fn a_hint_on_a_source_and_on_a_target() {
        let v = parse_script(
            "INSERT INTO out /*+ OPTIONS('sink.semantic' = 'exactly-once') */\n\
             SELECT a FROM src /*+ OPTIONS('scan.startup.mode' = 'earliest', 'x' = 'it''s') */ WHERE a > 1;",
        )
        .unwrap();
        let Statement::Insert(i) = &v[0] else {
            panic!("{v:?}")
        };
        assert_eq!(i.table, "out$options1");
        assert!(i.query.contains("`src$options2`"), "{}", i.query);
        assert_eq!(i.hints.len(), 2);
        assert_eq!(i.hints[0].table, "out");
        assert_eq!(
            i.hints[0].options,
            [("sink.semantic".to_string(), "exactly-once".to_string())]
        );
        assert_eq!(i.hints[1].table, "src");
        assert_eq!(i.hints[1].options[1], ("x".to_string(), "it's".to_string()));
        assert_eq!(i.hints[1].pos.line, 2);
    }

    #[test]
    fn other_hints_stay_comments_and_bad_ones_are_refused() {
        let v = parse_script("INSERT INTO out SELECT /*+ BROADCAST(src) */ a FROM src;").unwrap();
        let Statement::Insert(i) = &v[0] else {
            panic!("{v:?}")
        };
        assert!(i.hints.is_empty());
        assert!(!i.query.contains("BROADCAST"), "{}", i.query);
        for (sql, want) in [
            (
                "INSERT INTO out SELECT a FROM src /*+ OPTIONS() */;",
                "without options",
            ),
            (
                "INSERT INTO out SELECT a FROM src /*+ OPTIONS('k') */;",
                "'key' = 'value'",
            ),
            (
                "INSERT INTO out SELECT a FROM src /*+ OPTIONS('k' = 'v' */;",
                "',' or ')'",
            ),
            (
                "INSERT INTO out SELECT /*+ OPTIONS('k' = 'v') */ a FROM src;",
                "must follow a table name",
            ),
        ] {
            let e = parse_script(sql).unwrap_err();
            assert!(e.message.contains(want), "{sql}: {e}");
            assert_eq!(e.pos.line, 1);
        }
    }
}
