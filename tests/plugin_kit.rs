//! The conformance kit (`pulsar-connect plugins test`, issue 33 §3, ADR 0020) through the release binary:
//! the built-in `json` format against Flink's golden vectors and the built-in `key-hash` router against the
//! Flink connector's routing vectors (both converted into the kit's one vector format by
//! `tests/golden/kit/convert.py`, which must be up to date), a failing vector reported by file, line and
//! name with the expected and actual values, and the hostile pass catching a trap and a deadline hit and
//! naming the input. Needs the release binary and the built plugins (`cargo xtask build-plugins`).

use std::path::Path;
use std::process::{Command, Output};

use pulsar_connect_tests::binary;
use pulsar_connect_tests::guests::{install, repo_root};

fn plugin_test(plugin: &Path, vectors: &Path, extra: &[&str]) -> Output {
    Command::new(binary())
        .args(["plugins", "test"])
        .arg(plugin)
        .arg("--vectors")
        .arg(vectors)
        .args(extra)
        .output()
        .expect("running plugins test")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn built(name: &str) -> std::path::PathBuf {
    let folder = repo_root().join("plugins").join(name);
    assert!(
        folder.join("plugin.toml").is_file(),
        "plugin `{name}` is not built: run `cargo xtask build-plugins` first"
    );
    folder
}

/// Counts the vectors of a kit file (every non-comment line that is not a header).
fn vector_count(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter(|l| !l.contains("\"vectors\": \"pulsar-connect/1\"") || l.contains("config_error"))
        .count()
}

#[test]
fn the_golden_kit_files_are_what_the_converter_writes() {
    let out = Command::new("python3")
        .arg(repo_root().join("tests/golden/kit/convert.py"))
        .arg("--check")
        .output()
        .expect("python3");
    assert!(out.status.success(), "{:?}", text(&out));
}

#[test]
fn the_json_format_passes_flinks_golden_vectors() {
    let vectors = repo_root().join("tests/golden/kit/json.jsonl");
    let out = plugin_test(
        &built("json"),
        &vectors,
        &["--random-inputs", "500", "--cost-messages", "5000"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let n = vector_count(&vectors);
    assert!(n > 500, "only {n} vectors");
    assert!(
        stdout.contains(&format!("vectors: {n} passed, 0 failed")),
        "{stdout}"
    );
    assert!(
        stdout.contains("no trap, no deadline or memory-limit hit"),
        "{stdout}"
    );
    for line in [
        "ns/message",
        "ns/row",
        "memory: high-water",
        "deadline: slowest call",
    ] {
        assert!(stdout.contains(line), "no `{line}` in {stdout}");
    }
}

#[test]
fn the_key_hash_router_passes_the_flink_connectors_routing_vectors() {
    let vectors = repo_root().join("tests/golden/kit/key-hash.jsonl");
    let out = plugin_test(
        &built("key-hash"),
        &vectors,
        &["--random-inputs", "500", "--cost-messages", "5000"],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("vectors: 1024 passed, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.contains("ns/key"), "{stdout}");
}

#[test]
fn a_failing_vector_is_named_with_what_was_expected_and_what_came() {
    let tmp = tempfile::tempdir().unwrap();
    let vectors = tmp.path().join("wrong.jsonl");
    std::fs::write(
        &vectors,
        r#"{"vectors": "pulsar-connect/1", "name": "mixed", "columns": [{"name": "id", "type": "INT"}, {"name": "tags", "type": "MAP<STRING, INT>"}]}
{"name": "right", "decode": {"text": "{\"id\": 1, \"tags\": {\"a\": 1, \"b\": 2}}"}, "expect": {"row": {"id": 1, "tags": [["b", 2], ["a", 1]]}}}
{"name": "wrong id", "decode": {"text": "{\"id\": 1}"}, "expect": {"row": {"id": 2}}}
{"name": "no error", "decode": {"text": "{\"id\": 3}"}, "expect": {"error": ""}}
{"name": "other bytes", "encode": {"row": {"id": 4}}, "expect": {"text": "{\"id\":5,\"tags\":null}"}}
{"vectors": "pulsar-connect/1", "name": "not refused", "options": {"ignore-parse-errors": "true"}, "columns": [{"name": "id", "type": "INT"}], "config_error": ""}
"#,
    )
    .unwrap();
    let out = plugin_test(
        &built("json"),
        &vectors,
        &["--random-inputs", "50", "--cost-messages", "512"],
    );
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    let path = vectors.display();
    for want in [
        format!("FAIL {path}:3 `wrong id`: row 0: `id` expected 2, got 1"),
        format!(
            "FAIL {path}:4 `no error`: expected a row error, got 1 rows: +I[id: 3, tags: null]"
        ),
        format!(
            "FAIL {path}:5 `other bytes`: expected \"{{\\\"id\\\":5,\\\"tags\\\":null}}\", got \"{{\\\"id\\\":4,\\\"tags\\\":null}}\""
        ),
        format!(
            "FAIL {path}:6 `not refused`: create-decoder accepted options the section says it refuses"
        ),
        "vectors: 1 passed, 4 failed".to_owned(),
    ] {
        assert!(stdout.contains(&want), "no `{want}` in\n{stdout}");
    }
    assert!(
        stderr.contains("plugin `json`: 4 of 5 vectors failed"),
        "{stderr}"
    );
}

#[test]
fn the_hostile_pass_names_the_inputs_that_trap_or_run_past_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    install(&plugins, "hostile");
    let vectors = tmp.path().join("hostile.jsonl");
    // The guest decodes anything but a few commands; cut short, these vectors' payloads become `panic`
    // (a trap) and `loop` (a deadline hit).
    std::fs::write(
        &vectors,
        r#"{"vectors": "pulsar-connect/1", "columns": [{"name": "payload", "type": "BYTES"}, {"name": "tag", "type": "STRING"}, {"name": "calls", "type": "BIGINT"}, {"name": "decoders", "type": "BIGINT"}], "options": {"tag": "t"}}
{"name": "panic!", "decode": {"text": "panic!"}, "expect": {"row": {"payload": "cGFuaWMh", "tag": "t"}}}
{"name": "loop!", "decode": {"text": "loop!"}, "expect": {"row": {"payload": "bG9vcCE=", "tag": "t"}}}
"#,
    )
    .unwrap();
    let out = plugin_test(
        &plugins.join("hostile"),
        &vectors,
        &["--random-inputs", "20", "--cost-messages", "512"],
    );
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("vectors: 2 passed, 0 failed"), "{stdout}");
    assert!(
        stdout.contains("FAIL hostile: `panic!` cut to 5 of 6 bytes (\"panic\"): plugin `hostile` (call): decode-batch"),
        "{stdout}"
    );
    assert!(stdout.contains("trapped"), "{stdout}");
    assert!(
        stdout.contains("FAIL hostile: `loop!` cut to 4 of 5 bytes (\"loop\")")
            && stdout.contains("ran past its deadline of 300 ms"),
        "{stdout}"
    );
    assert!(stderr.contains("hostile inputs failed"), "{stderr}");
}
