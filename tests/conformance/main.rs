//! The conformance suite: what the peers' own test suites expect (StreamNative pulsar-flink, Apache
//! flink-connector-pulsar, InLong's pulsar-inlong, Flink 1.18's json/csv/raw formats), run against the
//! release binary and the real broker. Cases are data: `tests/conformance/cases/*.toml` (see README.md).
//!
//!   cargo test --release -p pulsar-connect-tests --test conformance [-- NAME-SUBSTRING ... | --list]
//!
//! A custom harness (`harness = false`): every case is reported on its own line, and all failures are
//! listed at the end with what the peer does and what we did.

mod binary;
mod cases;
mod run;
mod validate;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use cases::{Expect, Origin};

fn main() -> ExitCode {
    match suite() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("conformance: {e:#}");
            ExitCode::FAILURE
        }
    }
}

struct Failure<'a> {
    origin: &'a Origin,
    problem: String,
}

fn suite() -> Result<bool> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // libtest's flags (`--nocapture`, `--test-threads=2`, ...) may reach every test binary: ignored.
    let filters: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let list_only = args.iter().any(|a| a == "--list");
    let root = pulsar_connect_tests::guests::repo_root();
    let (validate_cases, run_cases) = cases::load_dir(&root.join("tests/conformance/cases"))?;
    let selected = |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f));
    let validate_cases: Vec<_> = validate_cases
        .iter()
        .filter(|c| selected(&c.origin.name))
        .collect();
    let run_cases: Vec<_> = run_cases
        .iter()
        .filter(|c| selected(&c.origin.name))
        .collect();
    if list_only {
        for c in &validate_cases {
            println!("{}: validate", c.origin.name);
        }
        for c in &run_cases {
            println!("{}: run", c.origin.name);
        }
        return Ok(true);
    }
    println!(
        "conformance: {} validate case(s), {} run case(s)",
        validate_cases.len(),
        run_cases.len()
    );
    let dir = tempfile::tempdir()?;
    let mut failures = Vec::new();
    let mut passed = 0;
    if !validate_cases.is_empty() {
        // validate never connects: the local broker's URLs when there is one, else placeholders.
        let (service_url, admin_url) = urls();
        for c in &validate_cases {
            let started = Instant::now();
            let outcome = validate::check(c, (&service_url, &admin_url), dir.path())?;
            let what = match c.expect {
                Expect::Ok => "accepted",
                Expect::Refused => "refused",
            };
            report(
                &c.origin,
                what,
                &outcome,
                started,
                &mut passed,
                &mut failures,
            );
        }
    }
    if !run_cases.is_empty() {
        let broker = std::panic::catch_unwind(pulsar_connect_tests::TestBroker::get);
        match broker {
            Ok(broker) => {
                for c in &run_cases {
                    let started = Instant::now();
                    let outcome = run::check(c, &broker, dir.path())
                        .unwrap_or_else(|e| Err(format!("the case could not be run: {e:#}")));
                    report(
                        &c.origin,
                        "rows",
                        &outcome,
                        started,
                        &mut passed,
                        &mut failures,
                    );
                }
            }
            Err(_) => {
                for c in &run_cases {
                    failures.push(Failure {
                        origin: &c.origin,
                        problem: "no broker (see the message above)".into(),
                    });
                }
            }
        }
    }
    println!();
    for f in &failures {
        let o = f.origin;
        println!(
            "FAILED {} ({}: {})",
            o.name,
            o.peer,
            o.file.file_name().unwrap_or_default().to_string_lossy()
        );
        println!("  from:    {}", o.from);
        println!("  peer:    {}", o.fact);
        if let Some(d) = &o.differs {
            println!("  differs: {d}");
        }
        println!("  {}", f.problem.replace('\n', "\n  "));
        println!();
    }
    println!(
        "conformance: {passed} passed, {} failed (run one case: cargo test --release -p pulsar-connect-tests --test conformance -- <name>)",
        failures.len()
    );
    Ok(failures.is_empty())
}

fn report<'a>(
    origin: &'a Origin,
    what: &str,
    outcome: &Result<(), String>,
    started: Instant,
    passed: &mut usize,
    failures: &mut Vec<Failure<'a>>,
) {
    let note = if origin.differs.is_some() {
        " (differs from the peer on purpose)"
    } else {
        ""
    };
    let ms = started.elapsed().as_millis();
    match outcome {
        Ok(()) => {
            *passed += 1;
            println!("ok      {} [{what}] {ms} ms{note}", origin.name);
        }
        Err(problem) => {
            println!("FAILED  {} [{what}] {ms} ms{note}", origin.name);
            failures.push(Failure {
                origin,
                problem: problem.clone(),
            });
        }
    }
}

/// The default profile's broker URLs when one was started (`target/pulsar/default/broker.json`), or
/// `PULSAR_SERVICE_URL`/`PULSAR_ADMIN_URL`, else local defaults: `validate` only checks their syntax.
fn urls() -> (String, String) {
    if let (Ok(s), Ok(a)) = (
        std::env::var("PULSAR_SERVICE_URL"),
        std::env::var("PULSAR_ADMIN_URL"),
    ) {
        return (s, a);
    }
    match xtask::broker::BrokerInfo::load(xtask::broker::Profile::Default) {
        Some(info) => (info.service_url, info.admin_url),
        None => (
            "pulsar://localhost:6650".into(),
            "http://localhost:8080".into(),
        ),
    }
}
