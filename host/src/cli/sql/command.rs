//! What a statement asks the shell to do. The statements of a job file (`SET 'k' = 'v'`, `CREATE TABLE`,
//! `INSERT`, statement sets) are parsed by the job parser ([`crate::sql`]); the shell's own ones
//! (`SHOW`, `DESCRIBE`, `DROP TABLE`, `RESET`, `STOP JOB`, ...) are recognised here from their tokens.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// A statement, by what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `SET;`: list the session's settings.
    ShowSettings,
    /// `SET 'key' = 'value';`
    Set,
    /// `RESET;` (every setting) or `RESET 'key';`
    Reset(Option<String>),
    /// `CREATE [TEMPORARY] TABLE ...`
    CreateTable,
    /// `DROP [TEMPORARY] TABLE [IF EXISTS] name`
    DropTable {
        name: String,
        if_exists: bool,
    },
    ShowTables,
    ShowJobs,
    /// `DESCRIBE name` / `DESC name`
    Describe(String),
    /// `STOP JOB 'id' [WITH SAVEPOINT] [WITH DRAIN]`
    StopJob(String),
    /// A query: `SELECT ...`, `WITH ...`, `VALUES ...`
    Select,
    /// `INSERT INTO ...`, `EXECUTE STATEMENT SET ...`, `BEGIN STATEMENT SET; ... END;`
    Insert,
    Help,
    Quit,
}

/// The statements the shell knows, for the error on an unknown one.
pub const STATEMENTS: &[&str] = &[
    "SET",
    "RESET",
    "CREATE TABLE",
    "DROP TABLE",
    "SHOW TABLES",
    "DESCRIBE",
    "SHOW JOBS",
    "STOP JOB",
    "SELECT",
    "INSERT INTO",
    "EXECUTE STATEMENT SET",
    "HELP",
    "QUIT",
];

/// A significant token: a word (upper-cased unless quoted), a quoted string, or a symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// Upper-cased, and as written.
    Word(String, String),
    Quoted(String),
    Str(String),
    Symbol(String),
}

fn tokens(text: &str) -> Result<Vec<Tok>, String> {
    let dialect = GenericDialect {};
    let toks = Tokenizer::new(&dialect, text)
        .tokenize()
        .map_err(|e| e.to_string())?;
    Ok(toks
        .into_iter()
        .filter_map(|t| match t {
            Token::Whitespace(_) | Token::SemiColon | Token::EOF => None,
            Token::Word(w) if w.quote_style.is_none() => {
                Some(Tok::Word(w.value.to_ascii_uppercase(), w.value))
            }
            Token::Word(w) => Some(Tok::Quoted(w.value)),
            Token::SingleQuotedString(s) => Some(Tok::Str(s)),
            other => Some(Tok::Symbol(other.to_string())),
        })
        .collect())
}

/// A name as written (names are case-sensitive as in Flink).
fn name_of(t: &Tok) -> Option<String> {
    match t {
        Tok::Quoted(q) | Tok::Word(_, q) => Some(q.clone()),
        _ => None,
    }
}

fn is(t: Option<&Tok>, word: &str) -> bool {
    matches!(t, Some(Tok::Word(w, _)) if w == word)
}

/// Classifies one statement; the error names what was expected.
pub fn classify(text: &str) -> Result<Command, String> {
    let toks = tokens(text)?;
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w, _)) => w.as_str(),
        _ => "",
    };
    let rest_after = |n: usize| toks.len() > n;
    match word(0) {
        "SET" if toks.len() == 1 => Ok(Command::ShowSettings),
        "SET" => Ok(Command::Set),
        "RESET" => match toks.get(1..).unwrap_or_default() {
            [] => Ok(Command::Reset(None)),
            [Tok::Str(k)] => Ok(Command::Reset(Some(k.clone()))),
            rest => {
                // `RESET execution.checkpointing.interval` (unquoted, as the SQL client accepts).
                let key: String = rest
                    .iter()
                    .map(|t| match t {
                        Tok::Word(_, _) | Tok::Quoted(_) => name_of(t).unwrap_or_default(),
                        Tok::Str(s) => s.clone(),
                        Tok::Symbol(s) => s.clone(),
                    })
                    .collect();
                Ok(Command::Reset(Some(key)))
            }
        },
        "CREATE" => Ok(Command::CreateTable),
        "DROP" => {
            let mut i = 1;
            if is(toks.get(i), "TEMPORARY") {
                i += 1;
            }
            if !is(toks.get(i), "TABLE") {
                return Err("only DROP [TEMPORARY] TABLE [IF EXISTS] <name> is supported".into());
            }
            i += 1;
            let if_exists = is(toks.get(i), "IF") && is(toks.get(i + 1), "EXISTS");
            if if_exists {
                i += 2;
            }
            match toks.get(i).and_then(name_of) {
                Some(name) if !rest_after(i + 1) => Ok(Command::DropTable { name, if_exists }),
                _ => Err("DROP TABLE needs one table name: DROP TABLE [IF EXISTS] <name>".into()),
            }
        }
        "SHOW" => match (word(1), toks.len()) {
            ("TABLES", 2) => Ok(Command::ShowTables),
            ("JOBS", 2) => Ok(Command::ShowJobs),
            _ => Err("SHOW supports SHOW TABLES and SHOW JOBS".into()),
        },
        "DESCRIBE" | "DESC" => match toks.get(1).and_then(name_of) {
            Some(name) if toks.len() == 2 => Ok(Command::Describe(name)),
            _ => Err("DESCRIBE needs one table name: DESCRIBE <name>".into()),
        },
        "STOP" => {
            if word(1) != "JOB" {
                return Err("expected STOP JOB '<job id>'".into());
            }
            let Some(Tok::Str(id)) = toks.get(2) else {
                return Err("STOP JOB needs the job id in quotes: STOP JOB '<job id>' (SHOW JOBS lists them)".into());
            };
            // WITH SAVEPOINT / WITH DRAIN: a job always stops with a final checkpoint here.
            let mut i = 3;
            while is(toks.get(i), "WITH")
                && (is(toks.get(i + 1), "SAVEPOINT") || is(toks.get(i + 1), "DRAIN"))
            {
                i += 2;
            }
            if rest_after(i) {
                return Err("expected STOP JOB '<job id>' [WITH SAVEPOINT] [WITH DRAIN]".into());
            }
            Ok(Command::StopJob(id.clone()))
        }
        "SELECT" | "WITH" | "VALUES" => Ok(Command::Select),
        "INSERT" | "EXECUTE" | "BEGIN" => Ok(Command::Insert),
        "HELP" if toks.len() == 1 => Ok(Command::Help),
        "QUIT" | "EXIT" if toks.len() == 1 => Ok(Command::Quit),
        _ => {
            let found = match toks.first() {
                Some(Tok::Word(w, _)) => w.clone(),
                Some(Tok::Quoted(w) | Tok::Str(w) | Tok::Symbol(w)) => w.clone(),
                None => String::new(),
            };
            let mut m = format!("unknown statement '{found}'");
            let firsts: Vec<&str> = STATEMENTS
                .iter()
                .map(|s| s.split(' ').next().unwrap_or(s))
                .collect();
            if let Some(best) = crate::options::suggest(&found, firsts.iter().copied()) {
                m.push_str(&format!("; did you mean '{best}'?"));
            }
            m.push_str(&format!("; the shell runs {}", STATEMENTS.join(", ")));
            Err(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_statements() {
        assert_eq!(classify("SET;"), Ok(Command::ShowSettings));
        assert_eq!(classify("set 'a' = 'b';"), Ok(Command::Set));
        assert_eq!(classify("RESET;"), Ok(Command::Reset(None)));
        assert_eq!(
            classify("RESET 'pipeline.name';"),
            Ok(Command::Reset(Some("pipeline.name".into())))
        );
        assert_eq!(
            classify("RESET execution.checkpointing.interval"),
            Ok(Command::Reset(Some(
                "execution.checkpointing.interval".into()
            )))
        );
        assert_eq!(
            classify("drop table if exists Orders;"),
            Ok(Command::DropTable {
                name: "Orders".into(),
                if_exists: true
            })
        );
        assert_eq!(
            classify("DROP TABLE `my t`"),
            Ok(Command::DropTable {
                name: "my t".into(),
                if_exists: false
            })
        );
        assert_eq!(classify("show tables;"), Ok(Command::ShowTables));
        assert_eq!(classify("SHOW JOBS;"), Ok(Command::ShowJobs));
        assert_eq!(classify("desc src;"), Ok(Command::Describe("src".into())));
        assert_eq!(
            classify("STOP JOB 'job-1' WITH SAVEPOINT;"),
            Ok(Command::StopJob("job-1".into()))
        );
        assert_eq!(classify("SELECT * FROM t;"), Ok(Command::Select));
        assert_eq!(
            classify("INSERT INTO a SELECT * FROM b;"),
            Ok(Command::Insert)
        );
        assert_eq!(classify("BEGIN STATEMENT SET; END;"), Ok(Command::Insert));
        assert_eq!(classify("quit;"), Ok(Command::Quit));
    }

    #[test]
    fn errors_say_what_is_expected() {
        let e = classify("SELCT 1;").unwrap_err();
        assert!(
            e.starts_with("unknown statement 'SELCT'; did you mean 'SELECT'?"),
            "{e}"
        );
        assert!(
            classify("STOP JOB job1;")
                .unwrap_err()
                .contains("in quotes")
        );
        assert!(
            classify("SHOW DATABASES;")
                .unwrap_err()
                .contains("SHOW TABLES")
        );
        assert!(
            classify("DROP VIEW v;")
                .unwrap_err()
                .contains("DROP [TEMPORARY] TABLE")
        );
        assert!(classify("SELECT 'open").is_err());
    }
}
