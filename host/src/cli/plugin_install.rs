//! `pulsar-connect plugins install PATH.wasm --manifest plugin.toml [--plugin-dir DIR]`: checks a built
//! component against its manifest (the full load a job does: hash, world and version, imports,
//! compilation, instantiation), fills in the sha256 and puts both into the plugin directory in one step.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use sha2::{Digest, Sha256};

use crate::plugins::manifest::Manifest;
use crate::plugins::{HostConfig, PluginDir, PluginHost};

/// What was installed.
#[derive(Debug)]
pub struct Installed {
    pub folder: PathBuf,
    pub manifest: Manifest,
    /// An older install was replaced.
    pub replaced: bool,
}

/// The manifest text with `sha256 = "<sha>"` set: an existing top-level `sha256` line is replaced, else the
/// line goes before the first table (the author's comments and layout stay).
pub fn with_sha256(text: &str, sha: &str) -> String {
    let line = format!("sha256 = \"{sha}\"");
    let mut out = Vec::new();
    let mut done = false;
    let mut in_table = false;
    for l in text.lines() {
        let t = l.trim_start();
        if t.starts_with('[') {
            if !done {
                out.push(line.clone());
                done = true;
            }
            in_table = true;
        }
        let key = t.split(['=', ' ', '\t']).next().unwrap_or("");
        if !in_table && (key == "sha256" || key == "\"sha256\"") {
            if !done {
                out.push(line.clone());
                done = true;
            }
            continue;
        }
        out.push(l.to_owned());
    }
    if !done {
        out.push(line);
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// Installs `wasm` with `manifest` into `plugin_dir` (created if missing).
pub fn install(wasm: &Path, manifest: &Path, plugin_dir: &Path) -> anyhow::Result<Installed> {
    let bytes =
        std::fs::read(wasm).with_context(|| format!("reading the component {}", wasm.display()))?;
    if wasmtime::Engine::detect_precompiled(&bytes).is_some() {
        bail!(
            "{} is precompiled wasmtime code, refused: install the .wasm component (the host compiles it)",
            wasm.display()
        );
    }
    if !bytes.starts_with(b"\0asm") {
        bail!("{} is not a WebAssembly file", wasm.display());
    }
    let text = std::fs::read_to_string(manifest)
        .with_context(|| format!("reading the manifest {}", manifest.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .with_context(|| format!("{} is not valid TOML", manifest.display()))?;
    let name = table
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or_else(|| anyhow!("{}: missing field `name` (the plugin's name: its folder, its wasm file and its name in SQL)", manifest.display()))?
        .to_owned();
    let sha = hex::encode(Sha256::digest(&bytes));
    let text = with_sha256(&text, &sha);
    let parsed =
        Manifest::parse(&text, &name).map_err(|e| anyhow!("{}: {e:#}", manifest.display()))?;
    std::fs::create_dir_all(plugin_dir)
        .with_context(|| format!("creating the plugin directory {}", plugin_dir.display()))?;
    let staging = plugin_dir.join(format!(".install-{name}-{}", std::process::id()));
    let result = stage_and_check(&staging, &name, &text, &bytes)
        .and_then(|()| swap_in(&staging.join(&name), &plugin_dir.join(&name)));
    let _ = std::fs::remove_dir_all(&staging);
    let replaced = result?;
    Ok(Installed {
        folder: plugin_dir.join(&name),
        manifest: parsed,
        replaced,
    })
}

/// Writes `<staging>/<name>/{plugin.toml, <name>.wasm}` (fsynced) and loads it as a job would.
fn stage_and_check(staging: &Path, name: &str, manifest: &str, wasm: &[u8]) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(staging);
    let folder = staging.join(name);
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    for (file, bytes) in [
        ("plugin.toml".to_owned(), manifest.as_bytes()),
        (format!("{name}.wasm"), wasm),
    ] {
        let path = folder.join(&file);
        let mut f =
            std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    let dir = PluginDir::open(staging)?;
    let host = PluginHost::new(HostConfig::default())?;
    host.load(&dir, name)
        .map_err(|e| anyhow!("refused, nothing installed: {e}"))?;
    Ok(())
}

/// Puts `staged` at `target`, replacing an existing folder atomically (Linux: `renameat2` exchange, the
/// old folder then removed). Returns whether one was replaced.
fn swap_in(staged: &Path, target: &Path) -> anyhow::Result<bool> {
    if !target.exists() {
        std::fs::rename(staged, target)
            .with_context(|| format!("moving the plugin into {}", target.display()))?;
        return Ok(false);
    }
    if !target.is_dir() {
        bail!("{} exists and is not a plugin folder", target.display());
    }
    exchange(staged, target).with_context(|| format!("replacing {}", target.display()))?;
    // `staged` now holds the old install.
    std::fs::remove_dir_all(staged)
        .with_context(|| format!("removing the old install (now at {})", staged.display()))?;
    Ok(true)
}

#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> anyhow::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let a = CString::new(a.as_os_str().as_bytes())?;
    let b = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both paths are NUL-terminated C strings that outlive the call; renameat2 reads them only.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn exchange(a: &Path, b: &Path) -> anyhow::Result<()> {
    // Two renames: a reader may briefly see no folder.
    let old = b.with_extension("old-install");
    std::fs::rename(b, &old)?;
    std::fs::rename(a, b)?;
    std::fs::rename(&old, a)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_goes_before_the_first_table_or_replaces_the_old_one() {
        let sha = "ab".repeat(32);
        let t = with_sha256("# c\nname = \"x\"\n\n[limits]\nmemory-mib = 8\n", &sha);
        assert_eq!(
            t,
            format!("# c\nname = \"x\"\n\nsha256 = \"{sha}\"\n[limits]\nmemory-mib = 8\n")
        );
        let t = with_sha256("name = \"x\"\nsha256 = \"old\"\n", &sha);
        assert_eq!(t, format!("name = \"x\"\nsha256 = \"{sha}\"\n"));
        let t = with_sha256("name = \"x\"", &sha);
        assert_eq!(t, format!("name = \"x\"\nsha256 = \"{sha}\"\n"));
    }
}
