//! A `[[case]]`: `validate` must accept (exit 0) or refuse (exit 2, every name in the error); a refused
//! job must be refused by `run` too, the same way, before anything starts.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::binary::{self, Outcome};
use crate::cases::{Expect, Placeholders, ValidateCase};

/// How long `run` may take to refuse a job; still running then means it started.
const RUN_REFUSES_WITHIN: Duration = Duration::from_secs(20);

/// `Ok(())` when the case holds, else what went wrong.
pub fn check(case: &ValidateCase, urls: (&str, &str), dir: &Path) -> Result<Result<(), String>> {
    let p = Placeholders::new(urls.0, urls.1, &case.origin.name);
    let sql = p.apply(&case.sql)?;
    let job = dir.join(format!("{}.sql", case.origin.name));
    std::fs::write(&job, &sql)?;
    let v = binary::validate(&job)?;
    match case.expect {
        Expect::Ok if v.code == Some(0) => Ok(Ok(())),
        Expect::Ok => Ok(Err(format!(
            "expected validate to accept the job (exit 0), got {}:\n{}",
            v.describe(),
            indent(&v.stderr)
        ))),
        Expect::Refused => {
            if v.code != Some(2) {
                return Ok(Err(format!(
                    "expected validate to refuse the job (exit 2) naming {:?}, got {}{}",
                    case.names,
                    v.describe(),
                    if v.stderr.trim().is_empty() {
                        String::new()
                    } else {
                        format!(":\n{}", indent(&v.stderr))
                    }
                )));
            }
            if let Some(problem) = missing_names(&v, &case.names, "validate") {
                return Ok(Err(problem));
            }
            // `run` must refuse it as well, with exit 2 and before it starts anything.
            let state = dir.join(format!("{}.state", case.origin.name));
            let r = binary::run_to_end(&job, &state, RUN_REFUSES_WITHIN)?;
            if r.code != Some(2) {
                return Ok(Err(format!(
                    "validate refused the job but run gave {} instead of exit code 2:\n{}",
                    r.describe(),
                    indent(&r.stderr)
                )));
            }
            if let Some(problem) = missing_names(&r, &case.names, "run") {
                return Ok(Err(problem));
            }
            Ok(Ok(()))
        }
    }
}

fn missing_names(o: &Outcome, names: &[String], which: &str) -> Option<String> {
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !o.stderr.contains(n.as_str()))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{which} refused the job (exit 2) but its errors do not name {missing:?}:\n{}",
            indent(&o.stderr)
        )
    })
}

pub fn indent(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    // Long logs: the end says most.
    let skip = lines.len().saturating_sub(40);
    lines[skip..]
        .iter()
        .map(|l| format!("    | {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
