//! Statement splitting: text typed (or read from a file) becomes statements ending with `;` at the top
//! level, outside quotes and comments; a statement set (`BEGIN STATEMENT SET; ... END;`,
//! `EXECUTE STATEMENT SET BEGIN ... END;`) ends at the `;` after its `END`.

/// One statement and where it starts in the text (1-based, as the parser counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// From its first significant character to its `;` (included), comments kept.
    pub text: String,
    pub line: usize,
    pub column: usize,
}

/// The complete statements of `text`, and what follows the last `;` (an unfinished statement, or only
/// whitespace and comments).
pub fn split(text: &str) -> (Vec<Piece>, String) {
    let mut pieces = Vec::new();
    let mut scan = Scan::default();
    let (mut line, mut column) = (1usize, 1usize);
    let mut start: Option<(usize, usize, usize)> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let significant = scan.step(c, next);
        if significant && start.is_none() && !c.is_whitespace() {
            start = Some((i, line, column));
        }
        if significant && c == ';' && scan.ends_statement() {
            if let Some((s, l, col)) = start.take() {
                pieces.push(Piece {
                    text: text[s..=i].to_string(),
                    line: l,
                    column: col,
                });
            }
            scan = Scan::default();
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    let rest = match start {
        Some((s, _, _)) => text[s..].to_string(),
        None => String::new(),
    };
    (pieces, rest)
}

/// Whether `text` holds no statement text at all (only whitespace and comments).
pub fn is_blank(text: &str) -> bool {
    let mut scan = Scan::default();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        if scan.step(c, next) && !c.is_whitespace() {
            return false;
        }
    }
    true
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Code,
    Quote(char),
    LineComment,
    BlockComment,
}

/// The scanner's state inside one statement.
#[derive(Debug, Default)]
struct Scan {
    state: State,
    /// The second character of a two-character token (`--`, `/*`, `*/`, `''`) to skip.
    skip: bool,
    /// The statement's words so far (upper case), the first three and the last one kept.
    first: Vec<String>,
    word: String,
    last: String,
}

impl Scan {
    /// Advances over `c`; true when `c` is statement text (code outside quotes and comments, or a quote
    /// character that opens a string).
    fn step(&mut self, c: char, next: Option<char>) -> bool {
        if self.skip {
            self.skip = false;
            return false;
        }
        match self.state {
            State::Code => {
                if c == '-' && next == Some('-') {
                    self.end_word();
                    self.state = State::LineComment;
                    self.skip = true;
                    return false;
                }
                if c == '/' && next == Some('*') {
                    self.end_word();
                    self.state = State::BlockComment;
                    self.skip = true;
                    return false;
                }
                if matches!(c, '\'' | '"' | '`') {
                    self.end_word();
                    self.state = State::Quote(c);
                    return true;
                }
                if c.is_alphanumeric() || c == '_' {
                    self.word.push(c.to_ascii_uppercase());
                } else {
                    self.end_word();
                }
                true
            }
            State::Quote(q) => {
                if c == q {
                    if next == Some(q) {
                        self.skip = true;
                    } else {
                        self.state = State::Code;
                    }
                }
                false
            }
            State::LineComment => {
                if c == '\n' {
                    self.state = State::Code;
                }
                false
            }
            State::BlockComment => {
                if c == '*' && next == Some('/') {
                    self.state = State::Code;
                    self.skip = true;
                }
                false
            }
        }
    }

    fn end_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let w = std::mem::take(&mut self.word);
        if self.first.len() < 3 {
            self.first.push(w.clone());
        }
        self.last = w;
    }

    /// At a top-level `;`: whether it ends the statement (in a statement set only the one after `END`).
    fn ends_statement(&mut self) -> bool {
        self.end_word();
        let set = matches!(
            self.first.iter().map(String::as_str).collect::<Vec<_>>()[..],
            ["BEGIN", "STATEMENT", "SET"] | ["EXECUTE", "STATEMENT", "SET"]
        );
        !set || self.last == "END"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> (Vec<String>, String) {
        let (p, rest) = split(text);
        (p.into_iter().map(|p| p.text).collect(), rest)
    }

    #[test]
    fn statements_end_with_a_semicolon_outside_quotes_and_comments() {
        let (p, rest) = texts("SET 'a' = 'x;y';\nSELECT ';' -- ; not here\n FROM t /* ; */;\nSHOW");
        assert_eq!(
            p,
            vec![
                "SET 'a' = 'x;y';",
                "SELECT ';' -- ; not here\n FROM t /* ; */;"
            ]
        );
        assert_eq!(rest, "SHOW");
        let (p, rest) = texts("SELECT 'it''s;' FROM `a;b`;  -- done\n");
        assert_eq!(p, vec!["SELECT 'it''s;' FROM `a;b`;"]);
        assert_eq!(rest, "");
        assert!(is_blank("  -- only a comment\n /* and; this */ "));
        assert!(!is_blank(" -- c\n SELECT"));
    }

    #[test]
    fn positions_are_the_statements_first_character() {
        let (p, _) = split("-- head\n  SHOW TABLES;  DESCRIBE t;\n");
        assert_eq!((p[0].line, p[0].column), (2, 3));
        assert_eq!((p[1].line, p[1].column), (2, 17));
    }

    #[test]
    fn a_statement_set_ends_after_end() {
        let text = "BEGIN STATEMENT SET;\nINSERT INTO a SELECT * FROM b;\nINSERT INTO c SELECT * FROM d;\nEND;\nSHOW JOBS;";
        let (p, rest) = texts(text);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].ends_with("END;"));
        assert_eq!(p[1], "SHOW JOBS;");
        assert_eq!(rest, "");
        let (p, rest) = texts("EXECUTE STATEMENT SET BEGIN INSERT INTO a VALUES (1);");
        assert!(p.is_empty());
        assert!(rest.starts_with("EXECUTE"));
    }
}
