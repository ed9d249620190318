//! Line editing (rustyline): history, multi-line statements (Enter continues the statement until it
//! ends with `;`), completion of keywords, table names and option keys, and log lines printed above the
//! prompt while it is shown.

use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use super::split;

/// The words completion offers outside quotes.
const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "INSERT",
    "INTO",
    "VALUES",
    "CREATE",
    "TABLE",
    "TEMPORARY",
    "DROP",
    "IF",
    "EXISTS",
    "NOT",
    "WITH",
    "SET",
    "RESET",
    "SHOW",
    "TABLES",
    "JOBS",
    "DESCRIBE",
    "STOP",
    "JOB",
    "AS",
    "CAST",
    "METADATA",
    "VIRTUAL",
    "PRIMARY",
    "KEY",
    "ENFORCED",
    "WATERMARK",
    "FOR",
    "EXECUTE",
    "STATEMENT",
    "BEGIN",
    "END",
    "AND",
    "OR",
    "NULL",
    "STRING",
    "INT",
    "BIGINT",
    "BOOLEAN",
    "DOUBLE",
    "DECIMAL",
    "TIMESTAMP",
    "TIMESTAMP_LTZ",
    "BYTES",
    "ARRAY",
    "MAP",
    "ROW",
    "HELP",
    "QUIT",
];

/// What completion knows: the option keys (fixed) and the session's tables (kept current by the shell).
pub struct ShellHelper {
    pub tables: Arc<Mutex<Vec<String>>>,
    options: Vec<String>,
}

impl ShellHelper {
    pub fn new(options: Vec<String>) -> Self {
        ShellHelper {
            tables: Arc::default(),
            options,
        }
    }

    fn candidates(&self, word: &str, quoted: bool) -> Vec<String> {
        if quoted {
            return self
                .options
                .iter()
                .filter(|o| o.starts_with(word))
                .cloned()
                .collect();
        }
        let mut out: Vec<String> = self
            .tables
            .lock()
            .map(|t| t.iter().filter(|t| t.starts_with(word)).cloned().collect())
            .unwrap_or_default();
        let upper = word.to_ascii_uppercase();
        let lower_case = word.chars().any(|c| c.is_ascii_lowercase());
        out.extend(KEYWORDS.iter().filter(|k| k.starts_with(&upper)).map(|k| {
            if lower_case {
                k.to_ascii_lowercase()
            } else {
                k.to_string()
            }
        }));
        out
    }
}

/// The word being typed at `pos` and whether it is inside a single quote (an option key).
fn word_at(line: &str, pos: usize) -> (usize, &str, bool) {
    let before = &line[..pos];
    let start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '#'))
        .last()
        .map(|(i, _)| i)
        .unwrap_or(pos);
    let quoted = before[..start].ends_with('\'')
        && before[..start].chars().filter(|c| *c == '\'').count() % 2 == 1;
    (start, &before[start..], quoted)
}

impl Completer for ShellHelper {
    type Candidate = Pair;
    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, word, quoted) = word_at(line, pos);
        if word.is_empty() && !quoted {
            return Ok((pos, Vec::new()));
        }
        let pairs = self
            .candidates(word, quoted)
            .into_iter()
            .map(|c| Pair {
                display: c.clone(),
                replacement: c,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

/// Enter ends the input once it ends with a complete statement (`;`); before that it starts a new line
/// of the same statement.
impl Validator for ShellHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        let input = ctx.input();
        if split::is_blank(input) {
            return Ok(ValidationResult::Valid(None));
        }
        let (pieces, rest) = split::split(input);
        if !pieces.is_empty() && split::is_blank(&rest) {
            Ok(ValidationResult::Valid(None))
        } else {
            Ok(ValidationResult::Incomplete)
        }
    }
}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_tables_keywords_and_option_keys() {
        let h = ShellHelper::new(vec![
            "scan.startup.mode".into(),
            "service-url".into(),
            "topic".into(),
        ]);
        h.tables.lock().unwrap().push("orders".into());
        let line = "SELECT * FROM or";
        let (start, word, quoted) = word_at(line, line.len());
        assert_eq!((start, word, quoted), (14, "or", false));
        assert_eq!(h.candidates(word, quoted), vec!["orders", "or"]);
        let line = "CREATE TABLE t (a INT) WITH ('connector' = 'pulsar', 'scan.st";
        let (start, word, quoted) = word_at(line, line.len());
        assert!(quoted);
        assert_eq!(&line[start..], "scan.st");
        assert_eq!(h.candidates(word, quoted), vec!["scan.startup.mode"]);
        assert_eq!(h.candidates("sel", false), vec!["select"]);
        assert_eq!(h.candidates("SH", false), vec!["SHOW"]);
    }
}
