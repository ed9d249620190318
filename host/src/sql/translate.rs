//! Re-emits Flink SQL expression/query tokens as SQL text for DataFusion's parser (generic dialect, which
//! accepts back-quoted identifiers and `MAP {k: v}` literals), rewriting the Flink-only constructs:
//!
//! - `MAP['k1', 'v1', 'k2', 'v2']` (Flink's map value constructor) → `MAP {'k1': 'v1', 'k2': 'v2'}`
//! - the target type of `CAST(e AS t)` / `TRY_CAST(e AS t)`: `t` is parsed with the Flink type grammar that DDL
//!   uses ([`super::type_parser`]) and handed on as the type name `FLINK_TYPE('<t>')`, which the planner's type
//!   planner resolves through the same grammar to the Arrow type of a column declared `t`. `MAP<..>`, `ROW<..>`,
//!   `TIMESTAMP(3) WITH LOCAL TIME ZONE`, `BYTES`, `INT ARRAY`, ... mean in a CAST what they mean in a table.
//! - `PROCTIME()` → `now()`

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{FlinkType, Pos, Result, SqlError, type_parser};

/// The DataFusion type name that carries a Flink type: `FLINK_TYPE('MAP<STRING, INT>')`.
pub const TYPE_REFERENCE: &str = "FLINK_TYPE";

/// `FLINK_TYPE('<type>')` for DataFusion's SQL parser.
pub fn type_reference(ty: &FlinkType) -> String {
    format!("{TYPE_REFERENCE}('{}')", ty.to_string().replace('\'', "''"))
}

pub fn to_datafusion(tokens: &[TokenWithSpan]) -> Result<String> {
    let mut out = String::new();
    let mut i = 0;
    let mut prev_end: Option<(u64, u64)> = None;
    while i < tokens.len() {
        let t = &tokens[i];
        let adjacent = prev_end == Some((t.span.start.line, t.span.start.column));
        if !out.is_empty() && !adjacent {
            out.push(' ');
        }
        prev_end = Some((t.span.end.line, t.span.end.column));
        match &t.token {
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("MAP")
                    && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::LBracket)) =>
            {
                let close = matching(tokens, i + 1)
                    .ok_or_else(|| error(t, "MAP[ is not closed with ]".to_string()))?;
                let elems = split_commas(&tokens[i + 2..close]);
                if !elems.len().is_multiple_of(2) {
                    return Err(error(
                        t,
                        "MAP[...] needs an even number of elements: key, value, key, value, ..."
                            .into(),
                    ));
                }
                out.push_str("MAP {");
                for (n, pair) in elems.chunks(2).enumerate() {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&to_datafusion(pair[0])?);
                    out.push_str(": ");
                    out.push_str(&to_datafusion(pair[1])?);
                }
                out.push('}');
                prev_end = Some((tokens[close].span.end.line, tokens[close].span.end.column));
                i = close + 1;
                continue;
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && matches!(w.keyword, Keyword::CAST | Keyword::TRY_CAST)
                    && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::LParen)) =>
            {
                let close = cast(tokens, i, &w.value.to_ascii_uppercase(), &mut out)?;
                prev_end = Some((tokens[close].span.end.line, tokens[close].span.end.column));
                i = close + 1;
                continue;
            }
            Token::Word(w)
                if w.quote_style.is_none()
                    && w.value.eq_ignore_ascii_case("PROCTIME")
                    && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::LParen)) =>
            {
                out.push_str("now")
            }
            other => out.push_str(&other.to_string()),
        }
        i += 1;
    }
    Ok(out)
}

/// `CAST(<expr> AS <Flink type>)` starting at `tokens[at]` (the CAST or TRY_CAST word), written to `out` with the
/// type as a [`type_reference`]. Returns the index of the closing parenthesis.
fn cast(tokens: &[TokenWithSpan], at: usize, name: &str, out: &mut String) -> Result<usize> {
    let close = matching(tokens, at + 1)
        .ok_or_else(|| error(&tokens[at], format!("{name}( is not closed with )")))?;
    let Some(as_at) = top_level_as(&tokens[at + 2..close]).map(|j| at + 2 + j) else {
        return Err(error(
            &tokens[at],
            format!("{name} needs a target type: {name}(<expression> AS <data type>)"),
        ));
    };
    if as_at == at + 2 {
        return Err(error(
            &tokens[as_at],
            format!("{name} needs an expression before AS: {name}(<expression> AS <data type>)"),
        ));
    }
    // The type and the closing parenthesis: the type must end right before it.
    let (ty, used) =
        type_parser::parse_prefix(tokens[as_at + 1..=close].to_vec(), pos(&tokens[close]))?;
    if as_at + 1 + used != close {
        return Err(error(
            &tokens[as_at + 1 + used],
            format!(
                "expected ')' closing {name} after the data type {ty}, found '{}'",
                tokens[as_at + 1 + used].token
            ),
        ));
    }
    out.push_str(name);
    out.push('(');
    out.push_str(&to_datafusion(&tokens[at + 2..as_at])?);
    out.push_str(" AS ");
    out.push_str(&type_reference(&ty));
    out.push(')');
    Ok(close)
}

/// Index of the first `AS` outside any brackets.
fn top_level_as(tokens: &[TokenWithSpan]) -> Option<usize> {
    let mut depth = 0i32;
    for (j, t) in tokens.iter().enumerate() {
        match &t.token {
            Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
            Token::RParen | Token::RBracket | Token::RBrace => depth -= 1,
            Token::Word(w) if depth == 0 && w.quote_style.is_none() && w.keyword == Keyword::AS => {
                return Some(j);
            }
            _ => {}
        }
    }
    None
}

fn pos(t: &TokenWithSpan) -> Pos {
    Pos {
        line: t.span.start.line,
        column: t.span.start.column,
    }
}

fn error(t: &TokenWithSpan, message: String) -> SqlError {
    SqlError {
        pos: pos(t),
        message,
    }
}

/// Index of the bracket closing the one at `open`.
fn matching(tokens: &[TokenWithSpan], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.token {
            Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
            Token::RParen | Token::RBracket | Token::RBrace => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

fn split_commas(tokens: &[TokenWithSpan]) -> Vec<&[TokenWithSpan]> {
    let mut out = Vec::new();
    if tokens.is_empty() {
        return out;
    }
    let mut depth = 0i32;
    let mut start = 0;
    for (j, t) in tokens.iter().enumerate() {
        match t.token {
            Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
            Token::RParen | Token::RBracket | Token::RBrace => depth -= 1,
            Token::Comma if depth == 0 => {
                out.push(&tokens[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    out.push(&tokens[start..]);
    out
}

#[cfg(test)]
mod tests {
    use crate::sql::{ColumnKind, Statement, parse_script};

    fn query(sql: &str) -> String {
        let v = parse_script(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        let Statement::Insert(i) = &v[0] else {
            panic!()
        };
        i.query.clone()
    }

    fn error(sql: &str) -> String {
        parse_script(sql).unwrap_err().to_string()
    }

    #[test]
    fn map_constructor_and_spacing() {
        assert_eq!(
            query(
                "INSERT INTO t VALUES ('a', t.x, 1.5, MAP['k1', 'v1', 'k2', 'v2'], CAST(b AS BYTES))"
            ),
            "VALUES ('a', t.x, 1.5, MAP {'k1': 'v1', 'k2': 'v2'}, CAST(b AS FLINK_TYPE('BYTES')))"
        );
    }

    #[test]
    fn cast_types_use_the_flink_type_grammar() {
        for (flink, canonical) in [
            ("MAP<STRING, STRING>", "MAP<STRING, STRING>"),
            (
                "ARRAY<ROW<a INT, b MAP<STRING, ARRAY<BIGINT>>>>",
                "ARRAY<ROW<`a` INT, `b` MAP<STRING, ARRAY<BIGINT>>>>",
            ),
            ("ROW<a INT NOT NULL>", "ROW<`a` INT NOT NULL>"),
            ("ROW(a INT, b STRING)", "ROW<`a` INT, `b` STRING>"),
            ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ(3)"),
            ("TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ(3)"),
            ("timestamp(9)", "TIMESTAMP(9)"),
            ("DECIMAL(10, 2)", "DECIMAL(10, 2)"),
            ("VARCHAR(5)", "VARCHAR(5)"),
            ("CHAR(2)", "CHAR(2)"),
            ("BINARY(4)", "BINARY(4)"),
            ("VARBINARY(8)", "VARBINARY(8)"),
            ("BYTES", "BYTES"),
            ("STRING", "STRING"),
            ("INT ARRAY", "ARRAY<INT>"),
        ] {
            assert_eq!(
                query(&format!("INSERT INTO t SELECT CAST(x AS {flink}) FROM s")),
                format!("SELECT CAST(x AS FLINK_TYPE('{canonical}')) FROM s"),
                "{flink}"
            );
        }
    }

    #[test]
    fn nested_and_try_casts_and_other_rewrites_inside() {
        assert_eq!(
            query(
                "INSERT INTO t SELECT TRY_CAST(CAST(a AS INT) + 1 AS STRING), try_cast(MAP['k', CAST(b AS BYTES)] AS MAP<STRING, BYTES>) FROM s"
            ),
            "SELECT TRY_CAST(CAST(a AS FLINK_TYPE('INT')) + 1 AS FLINK_TYPE('STRING')), TRY_CAST(MAP {'k': CAST(b AS FLINK_TYPE('BYTES'))} AS FLINK_TYPE('MAP<STRING, BYTES>')) FROM s"
        );
        // Type words elsewhere are names, not types.
        assert_eq!(
            query("INSERT INTO t SELECT bytes, `string`, timestamp_ltz FROM s"),
            "SELECT bytes, `string`, timestamp_ltz FROM s"
        );
        // Computed columns go through the same translation.
        let v = parse_script("CREATE TABLE s (a INT, m AS CAST(NULL AS MAP<STRING, INT>)) WITH ()")
            .unwrap();
        let Statement::CreateTable(t) = &v[0] else {
            panic!()
        };
        assert!(
            matches!(&t.columns[1].kind, ColumnKind::Computed { expr, .. } if expr == "CAST(NULL AS FLINK_TYPE('MAP<STRING, INT>'))"),
            "{:?}",
            t.columns[1].kind
        );
    }

    #[test]
    fn cast_errors_point_at_the_type() {
        let e = error("INSERT INTO t SELECT\n  CAST(x AS MAP<STRING>) FROM s");
        assert!(
            e.starts_with("line 2, column 23") && e.contains("','"),
            "{e}"
        );
        let e = error("INSERT INTO t SELECT CAST(x AS INT INT) FROM s");
        assert!(
            e.contains("column 36")
                && e.contains("expected ')' closing CAST after the data type INT"),
            "{e}"
        );
        let e = error("INSERT INTO t SELECT CAST(x AS FOO) FROM s");
        assert!(e.contains("unknown data type 'FOO'"), "{e}");
        let e = error("INSERT INTO t SELECT CAST(x AS) FROM s");
        assert!(e.contains("expected a data type, found ')'"), "{e}");
        let e = error("INSERT INTO t SELECT CAST(x) FROM s");
        assert!(e.contains("CAST needs a target type"), "{e}");
        let e = error("INSERT INTO t SELECT CAST(x AS DECIMAL(40, 2)) FROM s");
        assert!(e.contains("precision must be 1..38"), "{e}");
    }
}
