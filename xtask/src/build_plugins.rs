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

pub fn run(args: Args) -> anyhow::Result<()> {
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
    for guest in &crates {
        let installed = build_and_install(guest, &target_dir, &out)?;
        println!("installed {}", installed.display());
    }
    Ok(())
}

/// Builds one guest crate and installs it as a plugin; returns the plugin folder.
pub fn build_and_install(guest: &Path, target_dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let manifest_path = guest.join("Cargo.toml");
    let package = package_name(&manifest_path)?;
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--target",
            "wasm32-wasip2",
            "--release",
            "--manifest-path",
        ])
        .arg(&manifest_path)
        .arg("--target-dir")
        .arg(target_dir)
        // The host's shared build dir is locked by whoever runs us; guests use their own target dir.
        .env_remove("CARGO_BUILD_BUILD_DIR")
        .status()
        .with_context(|| format!("running cargo for {}", guest.display()))?;
    ensure!(
        status.success(),
        "building {} failed ({status})",
        guest.display()
    );
    let wasm = target_dir
        .join("wasm32-wasip2/release")
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
