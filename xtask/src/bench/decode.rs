//! Native vs wasm decode of the same seed rows (the `format_decode` bench of the tests crate): timed
//! rounds, and instruction counts from `valgrind --tool=callgrind` (repeatable where wall and CPU time on
//! this shared machine are not), counted inside the decode loops only (`native_loop` / `wasm_loop`).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::Measure;

/// Rows of the callgrind runs (each loop decodes them once).
const COUNTED_ROWS: u64 = 20_000;

/// `cargo bench -p pulsar-connect-tests --bench format_decode <extra>`.
fn bench_command(root: &Path, cargo: &impl Fn() -> Command, extra: &[&str]) -> Command {
    let mut cmd = cargo();
    cmd.current_dir(root)
        .args([
            "bench",
            "-p",
            "pulsar-connect-tests",
            "--bench",
            "format_decode",
        ])
        .args(extra);
    cmd
}

/// `rounds` interleaved native/wasm rounds of `rows` rows per format (wall time: the median).
pub fn timed(
    root: &Path,
    cargo: &impl Fn() -> Command,
    rows: u64,
    rounds: usize,
) -> Result<Vec<Measure>> {
    let out = bench_command(root, cargo, &["--"])
        .args(["--rows", &rows.to_string(), "--rounds", &rounds.to_string()])
        .env("PULSAR_CONNECT_PLUGIN_DIR", root.join("plugins"))
        .output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let mut ms = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        ms.push(Measure {
            name: v["name"].as_str().unwrap_or("?").to_owned(),
            topic: None,
            rows: v["rows"].as_u64().unwrap_or(0),
            bytes: v["bytes"].as_u64().unwrap_or(0),
            wall: v["seconds"].as_f64().unwrap_or(0.0),
            cpu: v["seconds"].as_f64().unwrap_or(0.0),
            peak_rss_mb: 0.0,
            note: v["note"].as_str().unwrap_or("").to_owned(),
        });
    }
    Ok(ms)
}

/// The `format_decode` bench executable (built by [`timed`] already).
fn bench_executable(root: &Path, cargo: &impl Fn() -> Command) -> Result<PathBuf> {
    let out = bench_command(root, cargo, &["--no-run", "--message-format=json"]).output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| {
            (v["target"]["name"] == "format_decode")
                .then(|| v["executable"].as_str().map(PathBuf::from))
                .flatten()
        })
        .context("cargo named no format_decode executable")
}

/// Instructions (callgrind's `Ir`) of one decode loop over [`COUNTED_ROWS`] rows.
fn count(exe: &Path, root: &Path, dir: &Path, format: &str, only: &str) -> Result<u64> {
    let file = dir.join(format!("callgrind.{format}.{only}"));
    let st = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg(format!("--toggle-collect=*{only}_loop*"))
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .args([
            "--rows",
            &COUNTED_ROWS.to_string(),
            "--format",
            format,
            "--only",
            only,
        ])
        .env("PULSAR_CONNECT_PLUGIN_DIR", root.join("plugins"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .context("running valgrind (Debian: apt-get install valgrind)")?;
    if !st.success() {
        bail!("valgrind on the {format} {only} decode failed ({st})");
    }
    let text = fs::read_to_string(&file)?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no instruction total in {}", file.display()))
}

/// Instructions callgrind charged to libc's memcpy/memmove in `file` (0 when `callgrind_annotate`
/// is missing or names none).
fn memcpy_instructions(file: &Path) -> u64 {
    let Ok(out) = Command::new("callgrind_annotate").arg(file).output() else {
        return 0;
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("__memcpy") || l.contains("__memmove"))
        .filter_map(|l| {
            let (n, rest) = l.trim_start().split_once(' ')?;
            // Totals per function only (`N (p%)  file:function`), not call lines (`=> ...`).
            (rest.trim_start().starts_with('(') && !rest.contains("=>"))
                .then(|| n.replace(',', "").parse::<u64>().ok())?
        })
        .sum()
}

/// The instruction-count comparison as Markdown lines.
pub fn instructions(root: &Path, cargo: &impl Fn() -> Command, dir: &Path) -> Result<String> {
    let exe = bench_executable(root, cargo)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nDecode by instructions (`valgrind --tool=callgrind`, the decode loop of {COUNTED_ROWS} rows only; repeatable):\n"
    );
    for format in ["json", "avro"] {
        let native = count(&exe, root, dir, format, "native")?;
        let wasm = count(&exe, root, dir, format, "wasm")?;
        let copies =
            |only: &str| memcpy_instructions(&dir.join(format!("callgrind.{format}.{only}")));
        let (native_copy, wasm_copy) = (copies("native"), copies("wasm"));
        eprintln!("  {format} decode: native {native} Ir, wasm {wasm} Ir");
        let _ = writeln!(
            s,
            "- {format}: native {:.1} M, wasm {:.1} M instructions → wasm / native {:.2}× by instructions \
             (of which libc memcpy: native {:.2} M, wasm {:.2} M; callgrind counts a `rep movsb` copy — \
             glibc's for ≥ 2 KB, such as the batch's payloads into the guest — as one instruction per byte)",
            native as f64 / 1e6,
            wasm as f64 / 1e6,
            native as f64 / wasm as f64,
            native_copy as f64 / 1e6,
            wasm_copy as f64 / 1e6,
        );
    }
    let _ = writeln!(s);
    Ok(s)
}
