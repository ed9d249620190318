//! The out-of-tree plugin workflow as an author outside this repository runs it (issue 33 §1, ADR 0020),
//! through the release binary: `plugins new` in a temp dir, the project's own `cargo test` and its
//! wasm32-wasip2 build (its own target dir under the temp dir, deleted after), `plugins install` into a
//! temp plugin dir, `plugins check`, `plugins test`, then the plugin as the value format of a job writing
//! to and reading from the real broker. Needs the release binary and the broker (`cargo xtask broker start`).
//! Also: `plugins install`'s refusals (wrong world, wrong kind, wrong version, missing manifest fields, not a
//! component), each leaving the plugin directory untouched, and an atomic reinstall.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use pulsar_connect_tests::guests::{guest_template, guest_wasm};
use pulsar_connect_tests::{TestBroker, binary, unique_topic};

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cargo` for the scaffolded project: its own target dir, not the host's build dir (locked by the
/// `cargo test` running us).
fn project_cargo(project: &Path, target: &Path) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("CARGO_BUILD_BUILD_DIR")
        .env_remove("RUSTFLAGS");
    c
}

/// Runs `job` with the plugin dir until `want` lines starting with `prefix` were printed, then stops it.
fn run_until_printed(
    plugin_dir: &Path,
    state: &Path,
    job: &Path,
    prefix: &str,
    want: usize,
) -> Vec<String> {
    let mut child = Command::new(binary())
        .arg("--plugin-dir")
        .arg(plugin_dir)
        .arg("run")
        .arg(job)
        .arg("--state-dir")
        .arg(state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the job");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut lines = Vec::new();
    while lines
        .iter()
        .filter(|l: &&String| l.starts_with(prefix))
        .count()
        < want
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => lines.push(l),
            Err(_) => {
                let _ = child.kill();
                let err = child
                    .wait_with_output()
                    .map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
                panic!("the job printed {lines:#?} before stopping or timing out; stderr: {err:?}");
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines.retain(|l| l.starts_with(prefix));
    lines
}

#[test]
fn a_scaffolded_rust_format_goes_from_new_to_a_job_against_the_broker() {
    let broker = TestBroker::get();
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();

    // new: a project outside the repository, SDK by path (the checkout this binary was built from).
    let out = run(Command::new(binary())
        .args(["plugins", "new", "--kind", "format", "lines-fmt", "--dir"])
        .arg(root));
    let project = root.join("lines-fmt");
    assert!(
        stdout(&out).contains("cargo build --release --target wasm32-wasip2"),
        "{}",
        stdout(&out)
    );
    for f in [
        "Cargo.toml",
        "plugin.toml",
        "src/lib.rs",
        "tests/vectors.jsonl",
        "README.md",
        ".gitignore",
    ] {
        assert!(project.join(f).is_file(), "the project lacks {f}");
    }
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(
        readme.contains("plugins install target/wasm32-wasip2/release/lines_fmt.wasm"),
        "{readme}"
    );

    // The project's own unit tests (natively) and its component, in its own target dir.
    let target = root.join("target");
    let tests = run(project_cargo(&project, &target).args(["test", "--quiet"]));
    assert!(stdout(&tests).contains("3 passed"), "{}", stdout(&tests));
    run(project_cargo(&project, &target).args([
        "build",
        "--quiet",
        "--release",
        "--target",
        "wasm32-wasip2",
    ]));
    let wasm = target.join("wasm32-wasip2/release/lines_fmt.wasm");
    assert!(wasm.is_file());

    // install → check → test.
    let plugins = root.join("plugins");
    let out = run(Command::new(binary())
        .args(["plugins", "install"])
        .arg(&wasm)
        .arg("--manifest")
        .arg(project.join("plugin.toml"))
        .arg("--plugin-dir")
        .arg(&plugins));
    assert!(
        stdout(&out)
            .contains("installed lines-fmt 0.1.0 (format pulsar-connect:plugin/format@0.2.0"),
        "{}",
        stdout(&out)
    );
    std::fs::remove_dir_all(&target).expect("deleting the project's target dir");
    let installed = std::fs::read_to_string(plugins.join("lines-fmt/plugin.toml")).unwrap();
    assert!(installed.contains("sha256 = \""), "{installed}");
    assert!(
        !std::fs::read_to_string(project.join("plugin.toml"))
            .unwrap()
            .lines()
            .any(|l| l.starts_with("sha256")),
        "the author's manifest is left alone"
    );
    let out = run(Command::new(binary())
        .args(["plugins", "check"])
        .arg(&plugins));
    assert!(
        stdout(&out).contains("ok   lines-fmt (format 0.1.0, pulsar-connect:plugin/format@0.2.0)"),
        "{}",
        stdout(&out)
    );
    let out = run(Command::new(binary())
        .args(["plugins", "test"])
        .arg(plugins.join("lines-fmt"))
        .arg("--vectors")
        .arg(project.join("tests/vectors.jsonl")));
    let report = stdout(&out);
    assert!(report.contains("vectors: 11 passed, 0 failed"), "{report}");
    assert!(
        report.contains("no trap, no deadline or memory-limit hit"),
        "{report}"
    );
    assert!(
        report.contains("ns/message") && report.contains("ns/row"),
        "{report}"
    );
    assert!(
        report.contains("of the 16 MiB limit") && report.contains("of the 1000 ms limit"),
        "{report}"
    );
    assert!(report.trim_end().ends_with("ok"), "{report}");

    // A plugin directory of one's own holds only what one installs: the job also needs the built-in `raw`
    // format and the `round-robin` router (a sink's default routing), copied from this checkout's build.
    for builtin in ["raw", "round-robin"] {
        let from = pulsar_connect_tests::guests::repo_root()
            .join("plugins")
            .join(builtin);
        assert!(
            from.join("plugin.toml").is_file(),
            "plugins/{builtin} is not built: run `cargo xtask build-plugins`"
        );
        std::fs::create_dir_all(plugins.join(builtin)).unwrap();
        for f in ["plugin.toml".to_owned(), format!("{builtin}.wasm")] {
            std::fs::copy(from.join(&f), plugins.join(builtin).join(&f)).unwrap();
        }
    }
    // A job writes generated rows with the plugin's encoder; another reads them back with its decoder and,
    // to show the bytes on the topic are the plugin's, as raw text.
    let topic = unique_topic("workflow-lines");
    let url = &broker.service_url;
    let write = root.join("write.sql");
    std::fs::write(
        &write,
        format!(
            "CREATE TABLE gen (id INT NOT NULL, name STRING) WITH (
               'connector' = 'datagen', 'number-of-rows' = '20',
               'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '20',
               'fields.name.length' = '6');
             CREATE TABLE lines (id INT NOT NULL, name STRING) WITH (
               'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{url}',
               'format' = 'lines-fmt', 'lines-fmt.delimiter' = ';');
             INSERT INTO lines SELECT * FROM gen;"
        ),
    )
    .unwrap();
    run(Command::new(binary())
        .arg("--plugin-dir")
        .arg(&plugins)
        .arg("run")
        .arg(&write)
        .arg("--state-dir")
        .arg(root.join("state-write")));
    let read = root.join("read.sql");
    std::fs::write(
        &read,
        format!(
            "CREATE TABLE lines (id INT NOT NULL, name STRING) WITH (
               'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{url}',
               'scan.startup.mode' = 'earliest', 'format' = 'lines-fmt', 'lines-fmt.delimiter' = ';');
             CREATE TABLE text (line STRING) WITH (
               'connector' = 'pulsar', 'topic' = '{topic}', 'service-url' = '{url}',
               'scan.startup.mode' = 'earliest', 'format' = 'raw');
             CREATE TABLE rows_out (id INT, name STRING) WITH ('connector' = 'print', 'print-identifier' = 'rows');
             CREATE TABLE text_out (line STRING) WITH ('connector' = 'print', 'print-identifier' = 'text');
             INSERT INTO rows_out SELECT * FROM lines;
             INSERT INTO text_out SELECT * FROM text;"
        ),
    )
    .unwrap();
    let printed = run_until_printed(&plugins, &root.join("state-read"), &read, "", 40);
    let rows: Vec<&String> = printed
        .iter()
        .filter(|l| l.starts_with("rows> +I["))
        .collect();
    let text: Vec<&String> = printed
        .iter()
        .filter(|l| l.starts_with("text> +I["))
        .collect();
    assert_eq!(rows.len(), 20, "{printed:#?}");
    assert_eq!(text.len(), 20, "{printed:#?}");
    let mut ids: Vec<i32> = rows
        .iter()
        .map(|l| {
            l["rows> +I[".len()..]
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    for l in &text {
        // `1;abcdef`: the plugin's encoding with the table's delimiter.
        let line = &l["text> +I[".len()..l.len() - 1];
        let (id, name) = line
            .split_once(';')
            .unwrap_or_else(|| panic!("not the plugin's encoding: {l}"));
        assert!(id.parse::<i32>().is_ok() && name.len() == 6, "{l}");
        assert!(
            rows.iter()
                .any(|r| **r == format!("rows> +I[{id}, {name}]")),
            "{l} was not decoded back: {rows:#?}"
        );
    }
}

/// A plugin directory with one good install of the test guest `identity`, for the refusal tests.
fn dir_with_identity(root: &Path) -> PathBuf {
    let plugins = root.join("plugins");
    let wasm = root.join("identity.wasm");
    std::fs::write(&wasm, guest_wasm("identity")).unwrap();
    let manifest = root.join("identity.toml");
    std::fs::write(&manifest, guest_template("identity")).unwrap();
    pulsar_connect::cli::plugin_install::install(&wasm, &manifest, &plugins)
        .expect("installing identity");
    plugins
}

fn listing(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walk(dir);
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(format!(
                "{} {}",
                p.display(),
                std::fs::read(&p).unwrap().len()
            ));
        }
    }
    out
}

/// Installs `wasm` under `manifest_text` into `plugins` through the binary; returns stderr (it must fail).
fn refused(root: &Path, plugins: &Path, wasm: &[u8], manifest_text: &str) -> String {
    let w = root.join("candidate.wasm");
    let m = root.join("candidate.toml");
    std::fs::write(&w, wasm).unwrap();
    std::fs::write(&m, manifest_text).unwrap();
    let before = listing(plugins);
    let out = Command::new(binary())
        .args(["plugins", "install"])
        .arg(&w)
        .arg("--manifest")
        .arg(&m)
        .arg("--plugin-dir")
        .arg(plugins)
        .output()
        .unwrap();
    assert!(!out.status.success(), "installed: {}", stdout(&out));
    assert_eq!(
        listing(plugins),
        before,
        "a refused install changed the plugin directory"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn install_refuses_a_component_that_does_not_match_its_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let plugins = dir_with_identity(root);
    let format = guest_wasm("identity");
    let router = guest_wasm("modulo-router");
    let identity = guest_template("identity");

    // A router component behind a format manifest: the wrong world.
    let e = refused(root, &plugins, &router, &identity);
    assert!(
        e.contains("the manifest claims world pulsar-connect:plugin/format@0.2.0 but the component implements pulsar-connect:plugin/router@0.2.0")
            || e.contains("the manifest claims world pulsar-connect:plugin/format@0.2.0 but the component does not export pulsar-connect:plugin/codec@0.2.0"),
        "{e}"
    );
    // A format component behind a router manifest (kind and world say router).
    let as_router = guest_template("modulo-router");
    let e = refused(root, &plugins, &format, &as_router);
    assert!(
        e.contains("claims world pulsar-connect:plugin/router@0.1.0"),
        "{e}"
    );
    // kind and world disagree.
    let e = refused(
        root,
        &plugins,
        &format,
        &identity.replace("kind = \"format\"", "kind = \"router\""),
    );
    assert!(e.contains("kind `router` does not match world"), "{e}");
    // The right kind at the wrong WIT version: a 0.2.0 component behind a 0.1.0 manifest.
    let e = refused(root, &plugins, &format, &guest_template("passthrough"));
    assert!(
        e.contains("format@0.1.0") && e.contains("codec@0.2.0"),
        "{e}"
    );
    // Missing fields.
    let no_world: String = identity
        .lines()
        .filter(|l| !l.starts_with("world"))
        .collect::<Vec<_>>()
        .join("\n");
    let e = refused(root, &plugins, &format, &no_world);
    assert!(e.contains("missing field `world`"), "{e}");
    let no_name: String = identity
        .lines()
        .filter(|l| !l.starts_with("name ="))
        .collect::<Vec<_>>()
        .join("\n");
    let e = refused(root, &plugins, &format, &no_name);
    assert!(e.contains("missing field `name`"), "{e}");
    let no_version: String = identity
        .lines()
        .filter(|l| !l.starts_with("version"))
        .collect::<Vec<_>>()
        .join("\n");
    let e = refused(root, &plugins, &format, &no_version);
    assert!(e.contains("missing field `version`"), "{e}");
    // Not a component at all, and a manifest that is not TOML.
    let e = refused(root, &plugins, b"hello", &identity);
    assert!(e.contains("is not a WebAssembly file"), "{e}");
    let e = refused(root, &plugins, &format, "name = ");
    assert!(e.contains("is not valid TOML"), "{e}");
    // No hidden staging folder is left behind.
    assert!(
        std::fs::read_dir(&plugins)
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with('.'))
    );
}

#[test]
fn a_reinstall_replaces_the_plugin_in_one_step() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let plugins = dir_with_identity(root);
    let first = std::fs::read_to_string(plugins.join("identity/plugin.toml")).unwrap();
    let wasm = root.join("identity.wasm");
    let manifest = root.join("identity.toml");
    std::fs::write(
        &manifest,
        guest_template("identity").replace("version = \"0.1.0\"", "version = \"0.2.0\""),
    )
    .unwrap();
    let out = run(Command::new(binary())
        .args(["plugins", "install"])
        .arg(&wasm)
        .arg("--manifest")
        .arg(&manifest)
        .arg("--plugin-dir")
        .arg(&plugins));
    assert!(
        stdout(&out).contains("installed identity 0.2.0")
            && stdout(&out).contains("replacing the older install"),
        "{}",
        stdout(&out)
    );
    let second = std::fs::read_to_string(plugins.join("identity/plugin.toml")).unwrap();
    assert_ne!(first, second);
    assert!(second.contains("version = \"0.2.0\""));
    let names: Vec<String> = std::fs::read_dir(&plugins)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["identity".to_owned()],
        "the old install and the staging folder are gone"
    );
    run(Command::new(binary())
        .args(["plugins", "check"])
        .arg(&plugins));
}

#[test]
fn new_writes_python_and_javascript_projects_and_refuses_bad_names() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = Command::new(binary())
        .args(["plugins", "new", "--kind", "format", "Bad Name", "--dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a plugin name"));
    for (lang, file) in [("python", "app.py"), ("js", "app.js")] {
        let name = format!("{lang}-router");
        run(Command::new(binary())
            .args([
                "plugins", "new", "--kind", "router", &name, "--lang", lang, "--dir",
            ])
            .arg(tmp.path()));
        let project = tmp.path().join(&name);
        assert!(
            project.join(file).is_file()
                && project.join("wit/router.wit").is_file()
                && project.join("plugin.toml").is_file()
        );
        let manifest = std::fs::read_to_string(project.join("plugin.toml")).unwrap();
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{manifest}"
        );
    }
}

/// The router scaffold: its own unit tests, its component, installed, checked and through the kit with the
/// vectors it comes with (FNV-1a partitions, keyless messages round-robin across calls).
#[test]
fn a_scaffolded_rust_router_passes_its_own_vectors() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path();
    run(Command::new(binary())
        .args(["plugins", "new", "--kind", "router", "hash-router", "--dir"])
        .arg(root));
    let project = root.join("hash-router");
    let target = root.join("target");
    let tests = run(project_cargo(&project, &target).args(["test", "--quiet"]));
    assert!(stdout(&tests).contains("2 passed"), "{}", stdout(&tests));
    run(project_cargo(&project, &target).args([
        "build",
        "--quiet",
        "--release",
        "--target",
        "wasm32-wasip2",
    ]));
    let plugins = root.join("plugins");
    run(Command::new(binary())
        .args(["plugins", "install"])
        .arg(target.join("wasm32-wasip2/release/hash_router.wasm"))
        .arg("--manifest")
        .arg(project.join("plugin.toml"))
        .arg("--plugin-dir")
        .arg(&plugins));
    std::fs::remove_dir_all(&target).expect("deleting the project's target dir");
    let out = run(Command::new(binary())
        .args(["plugins", "test"])
        .arg(plugins.join("hash-router"))
        .arg("--vectors")
        .arg(project.join("tests/vectors.jsonl")));
    let report = stdout(&out);
    assert!(report.contains("vectors: 18 passed, 0 failed"), "{report}");
    assert!(
        report.contains("ns/key") && report.contains("of the 8 MiB limit"),
        "{report}"
    );
    assert!(report.trim_end().ends_with("ok"), "{report}");
}
