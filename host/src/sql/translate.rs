//! Re-emits Flink SQL expression/query tokens as SQL text for DataFusion's parser (generic dialect, which
//! accepts back-quoted identifiers and `MAP {k: v}` literals), rewriting the few Flink-only constructs:
//!
//! - `MAP['k1', 'v1', 'k2', 'v2']` (Flink's map value constructor) → `MAP {'k1': 'v1', 'k2': 'v2'}`
//! - the type names `BYTES` → `BYTEA`, `TIMESTAMP_LTZ` → `TIMESTAMP WITH TIME ZONE` inside CASTs
//! - `PROCTIME()` → `now()`

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::Pos;

pub fn to_datafusion(tokens: &[TokenWithSpan]) -> Result<String, (Pos, String)> {
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
                    .ok_or_else(|| (pos(t), "MAP[ is not closed with ]".to_string()))?;
                let elems = split_commas(&tokens[i + 2..close]);
                if !elems.len().is_multiple_of(2) {
                    return Err((
                        pos(t),
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
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("BYTES") => {
                out.push_str("BYTEA")
            }
            Token::Word(w)
                if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("TIMESTAMP_LTZ") =>
            {
                // TIMESTAMP_LTZ(p) → TIMESTAMP(p) WITH TIME ZONE
                out.push_str("TIMESTAMP");
                if let (Some(Token::LParen), Some(Token::Number(n, _)), Some(Token::RParen)) = (
                    tokens.get(i + 1).map(|t| &t.token),
                    tokens.get(i + 2).map(|t| &t.token),
                    tokens.get(i + 3).map(|t| &t.token),
                ) {
                    out.push_str(&format!("({n})"));
                    prev_end = Some((tokens[i + 3].span.end.line, tokens[i + 3].span.end.column));
                    i += 3;
                }
                out.push_str(" WITH TIME ZONE");
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

fn pos(t: &TokenWithSpan) -> Pos {
    Pos {
        line: t.span.start.line,
        column: t.span.start.column,
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
    use crate::sql::{Statement, parse_script};

    #[test]
    fn map_constructor_and_spacing() {
        let v = parse_script(
            "INSERT INTO t VALUES ('a', t.x, 1.5, MAP['k1', 'v1', 'k2', 'v2'], CAST(b AS BYTES))",
        )
        .unwrap();
        let Statement::Insert(i) = &v[0] else {
            panic!()
        };
        assert_eq!(
            i.query,
            "VALUES ('a', t.x, 1.5, MAP {'k1': 'v1', 'k2': 'v2'}, CAST(b AS BYTEA))"
        );
    }
}
