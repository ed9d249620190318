//! Whether `host/link/symbol-order.txt` still names the binary's functions. The order file lays out the
//! functions a job runs side by side (`host/build.rs`); names carry hashes that change with dependencies,
//! the toolchain and the profile, and a stale file silently costs memory (2026-12-07: 34 % of its names
//! left, json 1p → blackhole peak RSS 62 MB instead of ~30 MB, 42 MB of it the binary's `.text`). The
//! bench says how much of the file the binary still has, and warns below [`FRESH`].

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

/// The share of the order file's names the binary must still define for the file to count as fresh.
pub const FRESH: f64 = 0.8;

/// `(names the binary defines, names in the file)`, or `None` when it cannot tell (no `nm`, no file).
pub fn coverage(binary: &Path, order: &Path) -> Option<(usize, usize)> {
    let listed: Vec<String> = std::fs::read_to_string(order)
        .ok()?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(binary)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let defined: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    Some((
        listed
            .iter()
            .filter(|n| defined.contains(n.as_str()))
            .count(),
        listed.len(),
    ))
}

/// One line for the bench's output: the file's coverage, and what to do when it went stale.
pub fn report(root: &Path) -> String {
    let binary = root.join("target/release/pulsar-connect");
    let order = root.join("host/link/symbol-order.txt");
    match coverage(&binary, &order) {
        Some((found, listed)) if listed > 0 => {
            let share = found as f64 / listed as f64;
            let line = format!(
                "symbol order file: {found} of its {listed} functions in the binary ({:.0} %)",
                share * 100.0
            );
            if share < FRESH {
                format!(
                    "{line} — STALE: the binary's code is resident far beyond what a job runs; regenerate it (xtask/bench/symbol-order.sh) and rebuild"
                )
            } else {
                line
            }
        }
        _ => "symbol order file: coverage unknown (nm or the file missing)".to_owned(),
    }
}
