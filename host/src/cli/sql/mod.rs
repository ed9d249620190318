//! `pulsar-connect sql`: an interactive SQL shell, as Flink's `sql-client.sh embedded` (ADR 0019).
//!
//! A front end over the job layer like `validate` and `run`: statements typed (or read from a file)
//! are split ([`split`]), recognised ([`command`]) and either change the session ([`session`]: the
//! `SET` and `CREATE TABLE` statements standing, always a valid job prelude), start an INSERT job that
//! runs in the background as `run` runs it ([`jobs`]), or run a transient `SELECT` whose rows are shown
//! live in tableau mode ([`select`], [`result`], [`tableau`]). The shell owns the terminal ([`editor`]:
//! history, completion, log lines above the prompt); the runtime owns the pipelines. An error is printed
//! as `validate` prints it and the shell goes on.

mod command;
mod editor;
mod jobs;
mod result;
mod select;
mod session;
mod split;
mod tableau;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{Config, Editor, ExternalPrinter};
use tokio::runtime::Runtime;
use tokio::signal::unix::{SignalKind, signal};

use crate::connector_api::Registry;
use crate::sql::Statement;
use command::Command;
use jobs::Jobs;
use session::Session;
use split::Piece;

use super::{EXIT_INVALID, EXIT_RUNTIME};

const PROMPT: &str = "pulsar-connect> ";

/// How the shell was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--init FILE`: run first, then read statements.
    pub init: Option<PathBuf>,
    /// `-f FILE`: run and exit.
    pub file: Option<PathBuf>,
    /// `--state-dir`: checkpoints of INSERT jobs (over `state.checkpoints.dir`).
    pub state_dir: Option<PathBuf>,
    /// The history file (default `~/.pulsar-connect_sql_history`).
    pub history: Option<PathBuf>,
}

struct Shell {
    session: Session,
    jobs: Jobs,
}

/// What to do after a statement.
enum Flow {
    Continue,
    Quit,
}

/// Runs the shell; the exit code (`-f`: 2 when a statement is invalid, 1 when a job failed).
pub fn main(opts: Options, registry: Registry, rt: &Runtime) -> ExitCode {
    // Ctrl-C never ends the shell: it cancels the line typed (the editor reads it as a key) or stops a
    // running SELECT ([`select`] listens for it). Listening once here replaces the default action.
    let _interrupt = match rt.block_on(async { signal(SignalKind::interrupt()) }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: Ctrl-C handling: {e}");
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    let mut shell = Shell {
        session: Session::new(registry, opts.state_dir.clone()),
        jobs: Jobs::default(),
    };
    if let Some(file) = &opts.file {
        return rt.block_on(shell.run_file(file));
    }
    if let Some(init) = &opts.init {
        rt.block_on(async {
            if let Err(()) = shell.script(init, false).await {
                eprintln!(
                    "error: {}: not every statement ran; the shell goes on",
                    init.display()
                );
            }
        });
    }
    shell.interactive(&opts, rt);
    rt.block_on(shell.jobs.stop_all());
    ExitCode::SUCCESS
}

impl Shell {
    /// `-f`: every statement, stopping at the first error; then the file's jobs run until they end, or
    /// until SIGINT/SIGTERM stops them (as `run`).
    async fn run_file(&mut self, file: &Path) -> ExitCode {
        if self.script(file, true).await.is_err() {
            self.jobs.stop_all().await;
            return ExitCode::from(EXIT_INVALID);
        }
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            let _ = stop_tx.send(true);
        });
        if self.jobs.wait_all(stop_rx).await {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_RUNTIME)
        }
    }

    /// Runs a file's statements; errors name the file. With `stop_at_error` the first error ends it.
    async fn script(&mut self, file: &Path, stop_at_error: bool) -> Result<(), ()> {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", file.display());
                return Err(());
            }
        };
        let (mut pieces, rest) = split::split(&text);
        if !split::is_blank(&rest) {
            // The last statement may omit its `;` in a file.
            let (p, _) = split::split(&format!("{text};"));
            pieces = p;
        }
        let mut failed = false;
        for piece in &pieces {
            match self.execute(piece).await {
                Ok(Flow::Continue) => {}
                Ok(Flow::Quit) => break,
                Err(errors) => {
                    for e in errors {
                        eprintln!("error: {}: {e}", file.display());
                    }
                    failed = true;
                    if stop_at_error {
                        return Err(());
                    }
                }
            }
        }
        if failed { Err(()) } else { Ok(()) }
    }

    fn interactive(&mut self, opts: &Options, rt: &Runtime) {
        let config = Config::builder().auto_add_history(false).build();
        let mut editor: Editor<editor::ShellHelper, DefaultHistory> =
            match Editor::with_config(config) {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("error: cannot start the line editor: {e}");
                    return;
                }
            };
        let helper = editor::ShellHelper::new(option_keys(&self.session.registry));
        let tables = helper.tables.clone();
        editor.set_helper(Some(helper));
        let history = opts.history.clone().or_else(default_history);
        if let Some(h) = &history {
            let _ = editor.load_history(h);
        }
        // Log lines (a job's warnings and errors) go above the prompt instead of into the line typed.
        if let Ok(mut printer) = editor.create_external_printer() {
            crate::terminal::set_printer(Box::new(move |line| {
                let _ = printer.print(format!("{line}\n"));
            }));
        }
        println!(
            "pulsar-connect {} SQL shell. Statements end with ';'. HELP; lists them, QUIT; or Ctrl-D leaves.\n",
            env!("CARGO_PKG_VERSION")
        );
        let mut pending = String::new();
        loop {
            if let Ok(mut t) = tables.lock() {
                *t = self.session.table_names();
            }
            let prompt = if pending.is_empty() { PROMPT } else { "> " };
            match editor.readline(prompt) {
                Ok(line) => {
                    if !split::is_blank(&line) {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    pending.push_str(&line);
                    pending.push('\n');
                    let (pieces, rest) = split::split(&pending);
                    pending = if split::is_blank(&rest) {
                        String::new()
                    } else {
                        rest
                    };
                    let mut quit = false;
                    for piece in &pieces {
                        match rt.block_on(self.execute(piece)) {
                            Ok(Flow::Continue) => {}
                            Ok(Flow::Quit) => quit = true,
                            Err(errors) => {
                                for e in errors {
                                    eprintln!("error: {e}");
                                }
                            }
                        }
                        if quit {
                            break;
                        }
                    }
                    println!();
                    if quit {
                        break;
                    }
                }
                // Ctrl-C: the statement typed so far is dropped.
                Err(ReadlineError::Interrupted) => pending.clear(),
                Err(ReadlineError::Eof) => break,
                Err(e) => {
                    eprintln!("error: reading the input: {e}");
                    break;
                }
            }
        }
        crate::terminal::take_printer();
        if let Some(h) = &history {
            let _ = editor.save_history(h);
        }
        println!("Goodbye!");
    }

    /// One statement.
    async fn execute(&mut self, piece: &Piece) -> Result<Flow, Vec<String>> {
        let at = |e: String| vec![format!("line {}, column {}: {e}", piece.line, piece.column)];
        let command = command::classify(&piece.text).map_err(at)?;
        let mut out = std::io::stdout();
        match command {
            Command::ShowSettings => print!("{}", self.session.show_settings()),
            Command::Set => {
                for w in self.session.set(piece)? {
                    println!("warning: {w}");
                }
                println!("[INFO] Execute statement succeeded.");
            }
            Command::Reset(key) => println!("{}", self.session.reset(key.as_deref()).map_err(at)?),
            Command::CreateTable => {
                for w in self.session.create_table(piece)? {
                    println!("warning: {w}");
                }
                println!("[INFO] Execute statement succeeded.");
            }
            Command::DropTable { name, if_exists } => {
                println!("{}", self.session.drop_table(&name, if_exists).map_err(at)?)
            }
            Command::ShowTables => print!("{}", self.session.show_tables()),
            Command::ShowJobs => print!("{}", self.jobs.show()),
            Command::Describe(name) => print!("{}", self.session.describe(&name).map_err(at)?),
            Command::StopJob(id) => println!("{}", self.jobs.stop(&id).await.map_err(at)?),
            Command::Select => select::run(&self.session, piece, &mut out).await?,
            Command::Insert => {
                let new = session::parse(piece)?;
                if !new
                    .iter()
                    .all(|s| matches!(s, Statement::Insert(_) | Statement::StatementSet { .. }))
                {
                    return Err(at("expected INSERT INTO ... or a statement set".into()));
                }
                let mut statements = self.session.statements();
                statements.extend(new);
                let text = format!("{}{}\n", self.session.text(), piece.text);
                let id = self
                    .jobs
                    .start(
                        statements,
                        text,
                        &piece.text,
                        &self.session.registry,
                        self.session.state_dir.clone(),
                    )
                    .await?;
                println!("[INFO] Submitting SQL update statement to the cluster...");
                println!(
                    "[INFO] SQL update statement has been successfully submitted to the cluster:"
                );
                println!("Job ID: {id}");
            }
            Command::Help => print!("{HELP}"),
            Command::Quit => return Ok(Flow::Quit),
        }
        let _ = out.flush();
        Ok(Flow::Continue)
    }
}

/// `~/.pulsar-connect_sql_history`
fn default_history() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pulsar-connect_sql_history"))
}

/// Every option key completion offers: the job settings, the shell's own and every connector's.
fn option_keys(registry: &Registry) -> Vec<String> {
    let mut keys: Vec<String> = vec![
        session::RESULT_MODE.into(),
        session::MAX_COLUMN_WIDTH.into(),
        "connector".into(),
    ];
    keys.extend(
        crate::catalog::settings::JOB_OPTIONS
            .options
            .iter()
            .map(|d| d.key.to_string()),
    );
    for f in registry.factories() {
        keys.extend(f.options().options.iter().map(|d| d.key.to_string()));
    }
    keys.sort();
    keys.dedup();
    keys
}

const HELP: &str = "\
Statements end with ';' and may span lines:
  SET;                            the session's settings
  SET 'key' = 'value';            a job setting (as in a job file), or sql-client.display.max-column-width
  RESET; | RESET 'key';           settings back to their defaults
  CREATE TABLE t (...) WITH (...); DROP TABLE [IF EXISTS] t;
  SHOW TABLES;  DESCRIBE t;
  SELECT ... FROM t;              rows shown live (tableau); Ctrl-C stops the query
  INSERT INTO t SELECT ...;       a job running in the background (checkpoints as `run`)
  EXECUTE STATEMENT SET BEGIN INSERT ...; INSERT ...; END;
  SHOW JOBS;  STOP JOB '<id>';
  HELP;  QUIT;                    (Ctrl-D leaves too; running jobs stop with a final checkpoint)
Tab completes keywords, table names and option keys.
";
