//! `pulsar-connect sql` driven through a pseudo-terminal (expectrl) as a person types into it, against
//! the real broker: multi-line statements, SHOW TABLES / DESCRIBE, errors that do not end the shell
//! (printed as `validate` prints them), a SELECT over a topic showing rows live, Ctrl-C back to the
//! prompt with the query's subscription gone (admin API), an INSERT job running until STOP JOB, `-f`
//! and `--init`. Needs the broker, the built plugins and the release binary.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::unix::{PtyStream, UnixProcess};
use expectrl::{ControlCode, Expect, Regex, Session};
use magnetar::OutgoingMessage;
use pulsar_connect_tests::{TestBroker, binary, unique_topic};

const WAIT: Duration = Duration::from_secs(60);
const PROMPT: &str = "pulsar-connect> ";

/// The shell in a pseudo-terminal, with its own home (history file) and the test plugins.
struct Shell {
    p: Session<UnixProcess, PtyStream>,
    _home: tempfile::TempDir,
}

impl Shell {
    fn start(args: &[&str]) -> Shell {
        Shell::start_in(tempfile::tempdir().unwrap(), args)
    }

    /// With `home` as its home (its history file is there).
    fn start_in(home: tempfile::TempDir, args: &[&str]) -> Shell {
        let mut cmd = Command::new(binary());
        cmd.arg("--plugin-dir")
            .arg(pulsar_connect_tests::jobs::plugin_dir())
            .arg("sql")
            .args(args)
            .env("HOME", home.path())
            .env("TERM", "xterm")
            .env_remove("PULSAR_CONNECT_LOG");
        let mut p = Session::spawn(cmd).expect("spawning the shell in a pty");
        p.get_process_mut().set_window_size(200, 50).unwrap();
        p.set_expect_timeout(Some(WAIT));
        let mut s = Shell { p, _home: home };
        s.expect(PROMPT);
        s
    }

    /// Waits for `pattern` (a regex); returns the output up to and including it.
    fn expect(&mut self, pattern: &str) -> String {
        match self.p.expect(Regex(pattern)) {
            Ok(found) => {
                let mut s = String::from_utf8_lossy(found.before()).to_string();
                s.push_str(&String::from_utf8_lossy(&found[0]));
                s
            }
            Err(e) => panic!("waiting for /{pattern}/: {e}"),
        }
    }

    fn line(&mut self, text: &str) {
        self.p.send_line(text).unwrap();
    }

    /// Types a statement, waits for `end` (a regex matching the end of its output, never in the text
    /// typed: the line editor echoes and may redraw the input, prompt included) and for the prompt after
    /// it; returns what came up to `end`.
    fn run(&mut self, statement: &str, end: &str) -> String {
        self.line(statement);
        let out = self.expect(end);
        self.expect(PROMPT);
        out
    }
}

/// The end of a statement's output.
const OK: &str = r"\[INFO\] Execute statement succeeded\.";
const IN_SET: &str = r"(\d+ rows? in set|Empty set)";
const ERROR: &str = r"error: [^\r\n]*\r?\n";

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn pulsar_table(name: &str, broker: &TestBroker, topic: &str, startup: &str) -> String {
    format!(
        "CREATE TABLE {name} (id INT, name STRING) WITH ('connector' = 'pulsar', 'topic' = '{topic}', \
         'service-url' = '{}', 'admin-url' = '{}', 'format' = 'json', 'scan.startup.mode' = '{startup}');",
        broker.service_url, broker.admin_url
    )
}

/// The topic's subscriptions, from the admin API.
fn subscriptions(broker: &TestBroker, topic: &str) -> Vec<String> {
    let path = topic.strip_prefix("persistent://").unwrap();
    match broker.admin(
        "GET",
        &format!("/admin/v2/persistent/{path}/subscriptions"),
        None,
    ) {
        Ok(body) => serde_json::from_str(&body).unwrap(),
        Err(e) if e.to_string().contains("404") => Vec::new(),
        Err(e) => panic!("{e:#}"),
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn send(broker: &TestBroker, topic: &str, rows: &[(i32, &str)]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = broker.client().await.unwrap();
        let producer = client.producer(topic).create().await.unwrap();
        for (id, name) in rows {
            let json = format!(r#"{{"id":{id},"name":"{name}"}}"#);
            producer
                .send(OutgoingMessage::with_payload(json.into_bytes()).into())
                .await
                .unwrap();
        }
        producer.close().await.unwrap();
    });
}

#[test]
fn multi_line_statements_tables_and_errors_that_do_not_end_the_shell() {
    let mut sh = Shell::start(&[]);
    // One statement over four lines: Enter continues it until the `;`.
    sh.line("CREATE TABLE src (");
    sh.line("  id INT NOT NULL,");
    sh.line("  name STRING");
    let out = sh.run(
        ") WITH ('connector' = 'datagen', 'number-of-rows' = '3');",
        OK,
    );
    assert!(out.contains("[INFO] Execute statement succeeded."), "{out}");
    let out = sh.run("SHOW TABLES;", IN_SET);
    assert!(
        out.contains("| table name |") && out.contains("|        src |"),
        "{out}"
    );
    assert!(out.contains("1 row in set"), "{out}");
    let out = sh.run("DESCRIBE src;", IN_SET);
    assert!(
        out.contains("| name |   type |  null | key | extras | watermark |"),
        "{out}"
    );
    assert!(out.contains("|   id |    INT | FALSE |"), "{out}");
    assert!(out.contains("| name | STRING |  TRUE |"), "{out}");

    // Errors: each as `validate` prints it, and the shell goes on.
    let bad = "CREATE TABLE bad (a INT) WITH ('connector' = 'datagen', 'rows-per-secnd' = '1');";
    let out = sh.run(bad, ERROR);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.sql");
    std::fs::write(
        &file,
        format!("{bad}\nINSERT INTO bad SELECT * FROM bad;\n"),
    )
    .unwrap();
    let validate = Command::new(binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    let validate = String::from_utf8_lossy(&validate.stderr).to_string();
    let expected = validate
        .lines()
        .next()
        .unwrap()
        .replace(&format!("{}: ", file.display()), "");
    assert!(expected.contains("'rows-per-secnd'"), "{validate}");
    assert!(
        out.contains(&expected),
        "shell: {out}\nvalidate: {validate}"
    );

    let out = sh.run("SELECT nope FROM src;", ERROR);
    assert!(out.contains("error: line 1, column 1: SELECT:"), "{out}");
    let out = sh.run("DESCRIBE sr;", ERROR);
    assert!(
        out.contains("error: line 1, column 1: table 'sr' is not declared; did you mean 'src'?"),
        "{out}"
    );
    let out = sh.run("SHOW DATABASES;", ERROR);
    assert!(
        out.contains("error: line 1, column 1: SHOW supports"),
        "{out}"
    );
    let out = sh.run("STOP JOB 'nope';", ERROR);
    assert!(
        out.contains("error: line 1, column 1: no job 'nope'"),
        "{out}"
    );

    // Still alive: a bounded SELECT runs to its end.
    let out = sh.run(
        "SELECT id, name IS NOT NULL AS named FROM src;",
        "Received a total of \\d+ rows?\r?\n",
    );
    assert!(out.contains("| op |          id |  named |"), "{out}");
    assert_eq!(out.matches("| +I |").count(), 3, "{out}");
    assert!(out.contains("Received a total of 3 rows"), "{out}");

    // Completion: a table name, an option key inside quotes.
    sh.p.send("DESCRIBE sr\t").unwrap();
    sh.expect("DESCRIBE src");
    let out = sh.run(";", IN_SET);
    assert!(out.contains("|   id |    INT | FALSE |"), "{out}");
    sh.p.send("SET 'execution.checkpointing.interv\t").unwrap();
    sh.expect("execution.checkpointing.interval");
    sh.run("' = '7s';", OK);
    let out = sh.run("SET;", IN_SET);
    assert!(
        regex::Regex::new(r"\| +execution\.checkpointing\.interval \| +7 ?s \|")
            .unwrap()
            .is_match(&out),
        "{out}"
    );
    sh.line("QUIT;");
    sh.expect("Goodbye!");

    // History: the last statements come back with the Up arrow, in a new shell too.
    let home = std::mem::replace(&mut sh._home, tempfile::tempdir().unwrap());
    drop(sh);
    let mut sh = Shell::start_in(home, &[]);
    sh.p.send("\x1b[A\x1b[A").unwrap();
    sh.expect("SET;");
    let out = sh.run("", IN_SET);
    assert!(
        out.contains("sql-client.execution.result-mode | tableau |"),
        "{out}"
    );
    sh.line("QUIT;");
    sh.expect("Goodbye!");
}

#[test]
fn a_select_shows_rows_live_and_ctrl_c_leaves_no_subscription() {
    let broker = TestBroker::get();
    let topic = unique_topic("sql-shell-select");
    // The topic exists before the query starts reading at its end.
    send(&broker, &topic, &[(0, "before")]);
    let mut sh = Shell::start(&[]);
    sh.run(&pulsar_table("people", &broker, &topic, "latest"), OK);
    sh.line("SELECT id, UPPER(name) AS name FROM people;");
    sh.expect(r"\| op \|");
    // The reader's own subscription: `latest` is resolved through a probe subscription first, and a row
    // sent while only the probe exists would lie before the resolved start.
    wait_until("the query's subscription", || {
        subscriptions(&broker, &topic)
            .iter()
            .any(|s| !s.ends_with("-latest-probe"))
    });

    // Rows appear as they are produced, one after the other.
    send(&broker, &topic, &[(1, "alice")]);
    sh.expect(r"\| \+I \|           1 \| +ALICE \|");
    send(&broker, &topic, &[(2, "bob")]);
    sh.expect(r"\| \+I \|           2 \| +BOB \|");

    sh.p.send(ControlCode::EndOfText).unwrap();
    sh.expect("Query terminated, received a total of 2 rows");
    sh.expect(PROMPT);
    wait_until("no subscription left on the topic", || {
        subscriptions(&broker, &topic).is_empty()
    });
    let out = sh.run("SHOW TABLES;", IN_SET);
    assert!(out.contains("people"), "{out}");
    sh.line("QUIT;");
    sh.expect("Goodbye!");
}

/// A SELECT over a bounded Pulsar table (issue 51) ends by itself and says how many rows it received;
/// its subscription is dropped. The table is declared unbounded: the query's OPTIONS hint bounds it.
#[test]
fn a_select_over_a_bounded_table_ends_by_itself() {
    let broker = TestBroker::get();
    let topic = unique_topic("sql-shell-bounded");
    send(&broker, &topic, &[(1, "alice"), (2, "bob"), (3, "carol")]);
    let mut sh = Shell::start(&[]);
    sh.run(&pulsar_table("people", &broker, &topic, "earliest"), OK);
    let out = sh.run(
        "SELECT id, name FROM people /*+ OPTIONS('source.stop.at-message-id' = 'latest') */;",
        "Received a total of \\d+ rows?\r?\n",
    );
    assert_eq!(out.matches("| +I |").count(), 3, "{out}");
    assert!(out.contains("Received a total of 3 rows"), "{out}");
    assert!(!out.contains("Query terminated"), "{out}");
    // A hint's bad value is an error naming the table and the option; the shell goes on.
    let out = sh.run(
        "SELECT id FROM people /*+ OPTIONS('source.stop.at-message-id' = 'soon') */;",
        ERROR,
    );
    assert!(
        out.contains("table 'people'") && out.contains("'source.stop.at-message-id'"),
        "{out}"
    );
    wait_until("no subscription left on the topic", || {
        subscriptions(&broker, &topic).is_empty()
    });
    sh.line("QUIT;");
    sh.expect("Goodbye!");
}

#[test]
fn an_insert_job_runs_in_the_background_until_stop_job() {
    let broker = TestBroker::get();
    let (input, output) = (unique_topic("sql-shell-in"), unique_topic("sql-shell-out"));
    let state = tempfile::tempdir().unwrap();
    let mut sh = Shell::start(&["--state-dir", state.path().to_str().unwrap()]);
    sh.run("SET 'execution.checkpointing.interval' = '500ms';", OK);
    sh.run(&pulsar_table("src", &broker, &input, "earliest"), OK);
    sh.run(&pulsar_table("dst", &broker, &output, "earliest"), OK);
    send(&broker, &input, &[(1, "a"), (2, "b")]);
    let out = sh.run(
        "INSERT INTO dst SELECT id * 10, name FROM src;",
        r"Job ID: \S+\r?\n",
    );
    let id = regex::Regex::new(r"Job ID: (\S+)")
        .unwrap()
        .captures(&out)
        .unwrap_or_else(|| panic!("{out}"))[1]
        .to_string();
    // The job keeps running while the shell reads statements.
    let running = format!(
        r"\| +{} \| +RUNNING \| +(\d+) \| +(\d+) \|",
        regex_escape(&id)
    );
    let rows_out = |out: &str| {
        regex::Regex::new(&running)
            .unwrap()
            .captures(out)
            .map(|c| c[2].parse::<u64>().unwrap())
    };
    let wait_rows_out = |sh: &mut Shell, n: u64| {
        let start = Instant::now();
        loop {
            let out = sh.run("SHOW JOBS;", IN_SET);
            if rows_out(&out).unwrap_or_else(|| panic!("{out}")) == n {
                return;
            }
            assert!(start.elapsed() < WAIT, "{out}");
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    wait_rows_out(&mut sh, 2);
    // A row produced now reaches the running job.
    send(&broker, &input, &[(3, "c")]);
    wait_rows_out(&mut sh, 3);
    let out = sh.run(
        &format!("STOP JOB '{id}';"),
        r"(\[INFO\] Job .* stopped [^\r\n]*|error: [^\r\n]*)\r?\n",
    );
    assert!(
        out.contains(&format!(
            "[INFO] Job '{id}' stopped after a final checkpoint: 3 row(s) in, 3 out"
        )),
        "{out}"
    );
    let out = sh.run("SHOW JOBS;", IN_SET);
    assert!(out.contains("STOPPED"), "{out}");
    // Checkpoints as `run`: the job's state directory and its durable subscription on the input.
    assert!(
        state.path().join(&id).is_dir(),
        "no state in {}",
        state.path().display()
    );
    assert_eq!(subscriptions(&broker, &input).len(), 1);

    // What the job wrote, read back with a transient SELECT from the start of the output topic.
    sh.line("SELECT * FROM dst;");
    sh.expect(r"\| \+I \|          10 \| +a \|");
    sh.expect(r"\| \+I \|          20 \| +b \|");
    sh.expect(r"\| \+I \|          30 \| +c \|");
    sh.p.send(ControlCode::EndOfText).unwrap();
    sh.expect("Query terminated, received a total of 3 rows");
    sh.expect(PROMPT);
    wait_until("the SELECT's subscription dropped", || {
        subscriptions(&broker, &output).is_empty()
    });
    sh.line("QUIT;");
    sh.expect("Goodbye!");
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn init_runs_a_file_first_and_f_runs_one_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let tables = "CREATE TABLE gen (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '4', \
                  'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4');\n\
                  CREATE TABLE out (id BIGINT) WITH ('connector' = 'print');\n";
    let init = write(dir.path(), "init.sql", tables);
    let mut sh = Shell::start(&["--init", init.to_str().unwrap()]);
    let out = sh.run("SHOW TABLES;", IN_SET);
    assert!(
        out.contains("|        gen |") && out.contains("|        out |"),
        "{out}"
    );
    sh.line("QUIT;");
    sh.expect("Goodbye!");

    // -f: the statements run, the INSERT job runs to its end, the shell exits 0.
    let job = write(
        dir.path(),
        "job.sql",
        &format!("{tables}-- a comment\nINSERT INTO out\n  SELECT id * 2 FROM gen;\n"),
    );
    let run = Command::new(binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .args(["sql", "-f"])
        .arg(&job)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for v in [2, 4, 6, 8] {
        assert!(stdout.contains(&format!("+I[{v}]")), "{stdout}");
    }
    assert!(stdout.contains("Job ID: "), "{stdout}");

    // An invalid statement: exit 2, the error names the file and the statement's position in it.
    let bad = write(
        dir.path(),
        "bad.sql",
        &format!("{tables}\nINSERT INTO out SELECT nope FROM gen;\nSHOW TABLES;\n"),
    );
    let run = Command::new(binary())
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .args(["sql", "-f"])
        .arg(&bad)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: {}: line 4, column 17: INSERT INTO out:",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(
        !String::from_utf8_lossy(&run.stdout).contains("table name"),
        "stopped at the error"
    );
}
