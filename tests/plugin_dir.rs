//! The plugin directory: manifests, hashes, worlds, precompiled artifacts, path escapes, the compile
//! cache and the `plugins list|check` commands.

use std::path::Path;

use pulsar_connect::cli::plugins::{check, list};
use pulsar_connect::plugins::{HostConfig, Phase, PluginDir, PluginError, PluginHost};
use pulsar_connect_tests::guests::{guest_template, guest_wasm, install, install_with};

fn host() -> PluginHost {
    PluginHost::new(HostConfig::default()).unwrap()
}

fn load_err(dir: &Path, name: &str) -> PluginError {
    let plugins = PluginDir::open(dir).unwrap();
    host()
        .load(&plugins, name)
        .err()
        .unwrap_or_else(|| panic!("plugin `{name}` loaded"))
}

#[test]
fn good_plugins_load_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "hostile");
    install(dir.path(), "modulo-router");
    let plugins = PluginDir::open(dir.path()).unwrap();
    let loaded = host().load_all(&plugins).unwrap();
    assert_eq!(loaded.len(), 2);
    assert!(loaded.iter().all(|(_, r)| r.is_ok()));

    let mut out = Vec::new();
    list(dir.path(), &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("hostile"), "{out}");
    assert!(out.contains("pulsar-connect:plugin/format@0.2.0"), "{out}");
    assert!(
        out.contains("modulo-router") && out.contains("router"),
        "{out}"
    );
    assert!(
        out.contains("tag") && out.contains("default \"none\""),
        "{out}"
    );
    assert!(
        out.contains("refuse") && out.contains("default \"false\""),
        "{out}"
    );

    let mut out = Vec::new();
    check(dir.path(), None, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains("2 plugins ok"));
}

#[test]
fn sha256_mismatch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let folder = install(dir.path(), "identity");
    let mut wasm = std::fs::read(folder.join("identity.wasm")).unwrap();
    wasm.push(0);
    std::fs::write(folder.join("identity.wasm"), wasm).unwrap();
    let err = load_err(dir.path(), "identity");
    assert_eq!(err.phase, Phase::Verify);
    let text = err.to_string();
    assert!(
        text.contains("plugin `identity`")
            && text.contains("sha256")
            && text.contains("the manifest says"),
        "{text}"
    );
}

#[test]
fn a_component_exporting_the_wrong_world_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A router component behind a manifest that claims the format world.
    let template = guest_template("identity").replace("name = \"identity\"", "name = \"liar\"");
    install_with(dir.path(), "liar", &template, &guest_wasm("modulo-router"));
    let err = load_err(dir.path(), "liar");
    assert_eq!(err.phase, Phase::Verify);
    let text = err.to_string();
    assert!(
        text.contains("claims world pulsar-connect:plugin/format@0.2.0 but the component does not export pulsar-connect:plugin/codec@0.2.0 (it exports: pulsar-connect:plugin/routing@0.1.0)"),
        "{text}"
    );
}

#[test]
fn precompiled_artifacts_are_refused() {
    let engine = host().engine().clone();
    let precompiled = engine
        .precompile_component(&guest_wasm("identity"))
        .unwrap();

    // A .cwasm next to a good plugin.
    let dir = tempfile::tempdir().unwrap();
    let folder = install(dir.path(), "identity");
    std::fs::write(folder.join("identity.cwasm"), &precompiled).unwrap();
    let err = load_err(dir.path(), "identity");
    assert_eq!(err.phase, Phase::Verify);
    assert!(
        err.to_string()
            .contains("precompiled artifact `identity.cwasm` refused"),
        "{err}"
    );

    // Precompiled code disguised as the plugin's .wasm, with a matching hash.
    let dir = tempfile::tempdir().unwrap();
    install_with(
        dir.path(),
        "identity",
        &guest_template("identity"),
        &precompiled,
    );
    let err = load_err(dir.path(), "identity");
    assert_eq!(err.phase, Phase::Verify);
    assert!(
        err.to_string().contains("precompiled wasmtime artifact"),
        "{err}"
    );
}

#[test]
fn manifests_with_unknown_fields_or_bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let template = format!("surprise = true\n{}", guest_template("identity"));
    install_with(dir.path(), "identity", &template, &guest_wasm("identity"));
    let err = load_err(dir.path(), "identity");
    assert_eq!(err.phase, Phase::Load);
    assert!(
        err.to_string().contains("unknown field `surprise`"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let template = format!(
        "{}\n[[options]]\nname = \"mode\"\ntype = \"enum\"\nvalues = [\"a\", \"b\"]\ndefault = \"c\"\ndoc = \"x\"\n",
        guest_template("identity")
    );
    install_with(dir.path(), "identity", &template, &guest_wasm("identity"));
    let err = load_err(dir.path(), "identity");
    assert!(
        format!("{err}").contains("default of option `mode`: expected one of a, b, got `c`"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let template = format!(
        "{}\n[[options]]\nname = \"x\"\ntype = \"string\"\ncolour = \"red\"\n",
        guest_template("identity")
    );
    install_with(dir.path(), "identity", &template, &guest_wasm("identity"));
    assert!(
        load_err(dir.path(), "identity")
            .to_string()
            .contains("unknown field `colour`")
    );
}

#[test]
fn names_and_links_cannot_escape_the_plugin_directory() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("evil.wasm"), guest_wasm("identity")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let folder = install(dir.path(), "identity");
    std::fs::remove_file(folder.join("identity.wasm")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("evil.wasm"),
        folder.join("identity.wasm"),
    )
    .unwrap();
    let err = load_err(dir.path(), "identity");
    assert_eq!(err.phase, Phase::Load, "{err}");

    let plugins = PluginDir::open(dir.path()).unwrap();
    let err = host().load(&plugins, "../identity").err().unwrap();
    assert!(
        err.to_string().contains("not a valid plugin folder name"),
        "{err}"
    );
}

#[test]
fn check_names_every_bad_plugin_and_list_marks_it() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "identity");
    let folder = install(dir.path(), "hostile");
    std::fs::write(folder.join("hostile.wasm"), b"not wasm").unwrap();
    let mut out = Vec::new();
    let err = check(dir.path(), None, &mut out).unwrap_err();
    assert!(
        err.to_string()
            .contains("1 of 2 plugins are invalid: hostile"),
        "{err}"
    );
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("ok   identity"), "{out}");
    assert!(
        out.contains("FAIL hostile: plugin `hostile` (verify)"),
        "{out}"
    );

    std::fs::write(dir.path().join("hostile/plugin.toml"), "name = 1").unwrap();
    let mut out = Vec::new();
    list(dir.path(), &mut out).unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("hostile              INVALID")
    );
}

#[test]
fn compiled_code_is_cached_by_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    install(dir.path(), "identity");
    let plugins = PluginDir::open(dir.path()).unwrap();
    let config = HostConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..HostConfig::default()
    };
    let first = PluginHost::new(config.clone()).unwrap();
    first.load(&plugins, "identity").unwrap();
    let entries = || {
        let mut v: Vec<String> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let files = entries();
    assert_eq!(files.len(), 1, "one entry, no temp files: {files:?}");
    assert!(
        files[0].ends_with(".cwasm") && files[0].len() == 64 + 6,
        "{files:?}"
    );
    let modified = std::fs::metadata(cache.path().join(&files[0]))
        .unwrap()
        .modified()
        .unwrap();

    // A second host reuses the entry rather than rewriting it.
    let second = PluginHost::new(config).unwrap();
    second.load(&plugins, "identity").unwrap();
    assert_eq!(entries(), files);
    assert_eq!(
        std::fs::metadata(cache.path().join(&files[0]))
            .unwrap()
            .modified()
            .unwrap(),
        modified
    );

    // A corrupt entry is replaced, not trusted.
    std::fs::write(cache.path().join(&files[0]), b"garbage").unwrap();
    PluginHost::new(HostConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..HostConfig::default()
    })
    .unwrap()
    .load(&plugins, "identity")
    .unwrap();
    assert!(std::fs::read(cache.path().join(&files[0])).unwrap().len() > 1000);
}

/// The release binary (`PULSAR_CONNECT_BIN`, else `target/release/pulsar-connect`).
fn binary() -> std::path::PathBuf {
    pulsar_connect_tests::binary()
}

/// Runs the binary in an empty working directory (no `./plugins`) without the plugin-directory variable.
fn run_binary(args: &[&std::ffi::OsStr], env_dir: Option<&Path>) -> (bool, String, String) {
    let cwd = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(binary());
    cmd.args(args)
        .current_dir(cwd.path())
        .env_remove("PULSAR_CONNECT_PLUGIN_DIR");
    if let Some(d) = env_dir {
        cmd.env("PULSAR_CONNECT_PLUGIN_DIR", d);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_binary_lists_and_checks_the_plugin_dir_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    install(dir.path(), "hostile");
    install(dir.path(), "modulo-router");
    let flag = std::ffi::OsStr::new("--plugin-dir");
    let d = dir.path().as_os_str();
    let s = std::ffi::OsStr::new;

    // `--plugin-dir X plugins list`: X's plugins, not ./plugins.
    let (ok, out, err) = run_binary(&[flag, d, s("plugins"), s("list")], None);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("hostile") && out.contains("modulo-router"),
        "{out}{err}"
    );
    // The flag after the subcommand (it is global) and `check` likewise.
    let (ok, out, err) = run_binary(&[s("plugins"), s("check"), flag, d], None);
    assert!(ok, "{out}{err}");
    assert!(out.contains("2 plugins ok"), "{out}{err}");
    // The environment variable when there is no flag.
    let (ok, out, err) = run_binary(&[s("plugins"), s("list")], Some(dir.path()));
    assert!(ok && out.contains("hostile"), "{out}{err}");
    // A directory argument of the subcommand still wins.
    let other = tempfile::tempdir().unwrap();
    install(other.path(), "identity");
    let (ok, out, err) = run_binary(
        &[flag, d, s("plugins"), s("list"), other.path().as_os_str()],
        None,
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("identity") && !out.contains("hostile"),
        "{out}{err}"
    );
    // Without any of them: ./plugins, which does not exist here.
    let (ok, out, err) = run_binary(&[s("plugins"), s("list")], None);
    assert!(!ok, "{out}{err}");
    assert!(err.contains("plugins"), "{err}");
}

/// `run` and `validate` keep compiled plugins between processes: in `--compile-cache`
/// (`PULSAR_CONNECT_COMPILE_CACHE`), else in the user's cache directory; `off` keeps none. A cached
/// start skips Cranelift (0.45 CPU-s and 10 MB of peak RSS for a json job on this machine).
#[test]
fn the_binary_keeps_compiled_plugins_between_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job.sql");
    std::fs::write(
        &job,
        "CREATE TABLE gen (id BIGINT, name STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '1');\n\
         CREATE TABLE dst (id BIGINT, name STRING) WITH ('connector' = 'pulsar', 'topic' = 'persistent://public/default/t', \
         'service-url' = 'pulsar://127.0.0.1:1', 'format' = 'json');\n\
         INSERT INTO dst SELECT * FROM gen;\n",
    )
    .unwrap();
    let validate = |xdg: &Path, flag: Option<&str>, env: Option<&str>| {
        let mut cmd = std::process::Command::new(pulsar_connect_tests::binary());
        cmd.env_remove("PULSAR_CONNECT_COMPILE_CACHE")
            .env("XDG_CACHE_HOME", xdg)
            .arg("--plugin-dir")
            .arg(pulsar_connect_tests::jobs::plugin_dir());
        if let Some(f) = flag {
            cmd.args(["--compile-cache", f]);
        }
        if let Some(e) = env {
            cmd.env("PULSAR_CONNECT_COMPILE_CACHE", e);
        }
        let out = cmd.arg("validate").arg(&job).output().unwrap();
        assert!(
            out.status.success(),
            "validate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let compiled = |dir: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".cwasm"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };

    // Named on the command line: the json format and the sink's router are compiled into it once.
    let named = tmp.path().join("named");
    let unused = tmp.path().join("xdg-unused");
    validate(&unused, Some(named.to_str().unwrap()), None);
    let first = compiled(&named);
    assert_eq!(first.len(), 2, "json and round-robin: {first:?}");
    let stamp = |n: &str| {
        std::fs::metadata(named.join(n))
            .unwrap()
            .modified()
            .unwrap()
    };
    let stamps: Vec<_> = first.iter().map(|n| stamp(n)).collect();
    validate(&unused, Some(named.to_str().unwrap()), None);
    assert_eq!(compiled(&named), first, "the second run found them");
    let again: Vec<_> = first.iter().map(|n| stamp(n)).collect();
    assert_eq!(again, stamps, "and did not write them again");
    assert!(!unused.exists(), "a named cache is the only one");

    // By default: the user's cache directory.
    let xdg = tmp.path().join("xdg");
    validate(&xdg, None, None);
    assert_eq!(compiled(&xdg.join("pulsar-connect/compiled")), first);

    // Off: nothing kept anywhere.
    let off = tmp.path().join("xdg-off");
    validate(&off, None, Some("off"));
    validate(&off, Some("off"), None);
    assert!(!off.exists(), "no cache directory was created");

    // A named directory that cannot be one: the error names it and the way out.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let out = std::process::Command::new(pulsar_connect_tests::binary())
        .env_remove("PULSAR_CONNECT_COMPILE_CACHE")
        .arg("--plugin-dir")
        .arg(pulsar_connect_tests::jobs::plugin_dir())
        .arg("--compile-cache")
        .arg(file.join("cache"))
        .arg("validate")
        .arg(&job)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("table 'dst'")
            && err.contains("a-file/cache")
            && err.contains("--compile-cache"),
        "{err}"
    );
}
