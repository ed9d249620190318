//! `cargo xtask build-plugins`: builds every guest crate under `guest-formats/*` and `guest-routers/*`
//! for wasm32-wasip2 and installs `<out>/<name>/{plugin.toml, <name>.wasm}`, the manifest made from the
//! template kept next to each crate with the wasm's sha256 filled in.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use sha2::{Digest, Sha256};

/// Folders (relative to the repository root) whose sub-folders are guest crates.
pub const DEFAULT_SOURCES: &[&str] = &["guest-formats", "guest-routers"];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plugin directory to install into.
    #[arg(long, default_value = "plugins")]
    pub out: PathBuf,
    /// Folders whose sub-folders are guest crates (default: guest-formats and guest-routers).
    #[arg(long = "source")]
    pub sources: Vec<PathBuf>,
    /// Cargo target directory of the guest builds (kept apart from the host's, so a build started
    /// from inside another cargo command cannot deadlock on its lock).
    #[arg(long, default_value = "target/guests")]
    pub target_dir: PathBuf,
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    xtask::paths::workspace_root()
}

impl Default for Args {
    fn default() -> Self {
        Args {
            out: PathBuf::from("plugins"),
            sources: Vec::new(),
            target_dir: PathBuf::from("target/guests"),
        }
    }
}

/// The compilation target of the guests.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// Makes sure the toolchain that builds the guests has the `wasm32-wasip2` standard library, installing it
/// with rustup when missing (a fresh machine with rustup has the host target only, and the first guest
/// build would fail with "can't find crate for `core`").
pub fn ensure_wasm_target() -> anyhow::Result<()> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let installed = || -> anyhow::Result<bool> {
        let out = Command::new(&rustc)
            .args(["--print", "sysroot"])
            .output()
            .with_context(|| format!("running {rustc} --print sysroot"))?;
        ensure!(out.status.success(), "{rustc} --print sysroot failed");
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(sysroot.join("lib/rustlib").join(WASM_TARGET).is_dir())
    };
    if installed()? {
        return Ok(());
    }
    println!(
        "installing the {WASM_TARGET} target (rustup target add {WASM_TARGET}): the plugins are wasm components"
    );
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status();
    match status {
        Ok(s) if s.success() && installed()? => Ok(()),
        Ok(s) => bail!("`rustup target add {WASM_TARGET}` failed ({s})"),
        Err(e) => bail!(
            "the {WASM_TARGET} target is not installed and rustup could not be run ({e}); install the target for your Rust toolchain"
        ),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    ensure_wasm_target()?;
    let root = repo_root();
    let sources: Vec<PathBuf> = if args.sources.is_empty() {
        DEFAULT_SOURCES.iter().map(|s| root.join(s)).collect()
    } else {
        args.sources.iter().map(|s| root.join(s)).collect()
    };
    let out = root.join(&args.out);
    let target_dir = root.join(&args.target_dir);
    let mut crates = Vec::new();
    for source in &sources {
        if !source.is_dir() {
            eprintln!("skipping {}: not a directory", source.display());
            continue;
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(source)
            .with_context(|| format!("reading {}", source.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("Cargo.toml").is_file() && p.join("plugin.toml").is_file())
            .collect();
        entries.sort();
        crates.extend(entries);
    }
    if crates.is_empty() {
        eprintln!(
            "no guest crates (with a plugin.toml) under {}",
            sources
                .iter()
                .map(|s| s.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    println!(
        "building {} plugins for {WASM_TARGET} into {} (the first build compiles their dependencies: a few minutes)",
        crates.len(),
        out.display()
    );
    // One cargo invocation per guest workspace (guest-formats, guest-routers): its members compile in
    // parallel with one feature resolution, instead of one build after the other.
    let mut groups: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for guest in crates {
        let manifest = workspace_manifest(&guest).unwrap_or_else(|| guest.join("Cargo.toml"));
        match groups.iter_mut().find(|(m, _)| *m == manifest) {
            Some((_, members)) => members.push(guest),
            None => groups.push((manifest, vec![guest])),
        }
    }
    for (manifest, guests) in &groups {
        let packages = guests
            .iter()
            .map(|g| package_name(&g.join("Cargo.toml")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        build(manifest, &packages, &target_dir)?;
        for (guest, package) in guests.iter().zip(&packages) {
            let installed = install_built(guest, package, &target_dir, &out)?;
            println!("installed {}", installed.display());
        }
    }
    if args.sources.is_empty() {
        // The Python and JavaScript examples (sdk/*/examples), with their own toolchains.
        crate::plugin_langs::build_and_install(&out)?;
    }
    println!("plugins built in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The `Cargo.toml` of the workspace a guest crate belongs to, when its parent folder is one.
fn workspace_manifest(guest: &Path) -> Option<PathBuf> {
    let manifest = guest.parent()?.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).ok()?;
    text.lines()
        .any(|l| l.trim() == "[workspace]")
        .then_some(manifest)
}

/// `cargo build --target wasm32-wasip2 --release` of `packages` of the crate or workspace `manifest`.
fn build(manifest: &Path, packages: &[String], target_dir: &Path) -> anyhow::Result<()> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args([
        "build",
        "--target",
        WASM_TARGET,
        "--release",
        "--manifest-path",
    ])
    .arg(manifest)
    .arg("--target-dir")
    .arg(target_dir)
    // The host's shared build dir is locked by whoever runs us; guests use their own target dir.
    .env_remove("CARGO_BUILD_BUILD_DIR");
    for p in packages {
        cmd.args(["-p", p]);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running cargo for {}", manifest.display()))?;
    ensure!(
        status.success(),
        "building {} ({}) failed ({status})",
        manifest.display(),
        packages.join(", ")
    );
    Ok(())
}

/// Installs the built wasm of `package` (the guest crate in `guest`) as a plugin.
fn install_built(
    guest: &Path,
    package: &str,
    target_dir: &Path,
    out: &Path,
) -> anyhow::Result<PathBuf> {
    let wasm = target_dir
        .join(WASM_TARGET)
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    let template = std::fs::read_to_string(guest.join("plugin.toml"))
        .with_context(|| format!("reading {}", guest.join("plugin.toml").display()))?;
    install(&template, &wasm, out)
}

/// Installs `wasm` with the manifest `template` (which must not carry a sha256) into `out/<name>/`.
pub fn install(template: &str, wasm: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let table: toml::Table =
        toml::from_str(template).context("the plugin.toml template is not valid TOML")?;
    if table.contains_key("sha256") {
        bail!("the plugin.toml template must not set sha256; build-plugins fills it in");
    }
    let name = table
        .get("name")
        .and_then(|v| v.as_str())
        .context("the plugin.toml template has no name")?;
    ensure!(
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'),
        "plugin name `{name}` must be lowercase letters, digits, - or _"
    );
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let sha = hex::encode(Sha256::digest(&bytes));
    let folder = out.join(name);
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    // The plugin's own read-only folder (`files`, ADR 0022: protobuf's descriptor sets), created empty
    // for the user's files; what is already in it stays.
    if let Some(files) = table.get("files").and_then(|v| v.as_str()) {
        ensure!(
            !files.is_empty() && !files.contains(['/', '\\']) && files != "..",
            "files `{files}` must be a plain folder name"
        );
        std::fs::create_dir_all(folder.join(files))
            .with_context(|| format!("creating {}", folder.join(files).display()))?;
    }
    // A root-level key may go first in any TOML document.
    write_atomic(
        &folder.join("plugin.toml"),
        format!("sha256 = \"{sha}\"\n{template}").as_bytes(),
    )?;
    write_atomic(&folder.join(format!("{name}.wasm")), &bytes)?;
    Ok(folder)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let temp = path.with_extension("tmp-install");
    std::fs::write(&temp, bytes).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming to {}", path.display()))
}

fn package_name(manifest_path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", manifest_path.display()))?;
    table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_owned)
        .with_context(|| format!("{} has no [package] name", manifest_path.display()))
}
