//! The plugin directory: `plugins/<name>/{plugin.toml, <name>.wasm}`, read only through `cap-std`
//! handles so that no name can reach outside it.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};

use super::error::{Phase, PluginError, Result};
use super::manifest::{Manifest, is_plain_name};

/// Largest wasm file the host reads.
const MAX_WASM_BYTES: u64 = 256 << 20;
/// Largest manifest the host reads.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// An opened plugin directory.
#[derive(Debug)]
pub struct PluginDir {
    dir: Dir,
    path: PathBuf,
}

/// A plugin's manifest and verified wasm bytes, not yet compiled.
#[derive(Debug)]
pub struct PluginSource {
    pub manifest: Manifest,
    pub wasm: Vec<u8>,
    /// The canonical path of the folder the manifest grants the plugin (`files`), checked to lie inside
    /// the plugin's folder ([`super::files::resolve`]).
    pub files: Option<PathBuf>,
}

impl PluginDir {
    pub fn open(path: &Path) -> anyhow::Result<PluginDir> {
        let dir = Dir::open_ambient_dir(path, ambient_authority())
            .with_context(|| format!("opening the plugin directory {}", path.display()))?;
        Ok(PluginDir {
            dir,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The names of the plugin folders, sorted. Hidden entries and plain files are skipped.
    pub fn plugin_names(&self) -> anyhow::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in self
            .dir
            .entries()
            .with_context(|| format!("listing {}", self.path.display()))?
        {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.file_type()?.is_dir() {
                continue;
            }
            names.push(name);
        }
        names.sort();
        Ok(names)
    }

    /// Reads and parses `<name>/plugin.toml`.
    pub fn read_manifest(&self, name: &str) -> Result<Manifest> {
        let fail = |e: anyhow::Error| PluginError::new(name, Phase::Load, e);
        if !is_plain_name(name) {
            return Err(fail(anyhow!("`{name}` is not a valid plugin folder name")));
        }
        let folder = self
            .dir
            .open_dir(name)
            .with_context(|| format!("opening plugin folder `{name}`"))
            .map_err(fail)?;
        let text = read_limited(&folder, "plugin.toml", MAX_MANIFEST_BYTES).map_err(fail)?;
        let text = String::from_utf8(text)
            .context("plugin.toml is not UTF-8")
            .map_err(fail)?;
        Manifest::parse(&text, name).map_err(fail)
    }

    /// Reads the manifest and the wasm of plugin `name` and verifies them: the hash matches the
    /// manifest and no precompiled artifact sits in the folder.
    pub fn read_plugin(&self, name: &str) -> Result<PluginSource> {
        let manifest = self.read_manifest(name)?;
        let folder = self
            .dir
            .open_dir(name)
            .with_context(|| format!("opening plugin folder `{name}`"))
            .map_err(|e| PluginError::new(name, Phase::Load, e))?;
        refuse_precompiled(&folder).map_err(|e| PluginError::new(name, Phase::Verify, e))?;
        let file = format!("{name}.wasm");
        let wasm = read_limited(&folder, &file, MAX_WASM_BYTES)
            .map_err(|e| PluginError::new(name, Phase::Load, e))?;
        let actual = hex::encode(Sha256::digest(&wasm));
        if !actual.eq_ignore_ascii_case(&manifest.sha256) {
            return Err(PluginError::new(
                name,
                Phase::Verify,
                anyhow!(
                    "{file} has sha256 {actual}, the manifest says {}",
                    manifest.sha256
                ),
            ));
        }
        let files = match &manifest.files {
            Some(files) => Some(
                super::files::resolve(&folder, &self.path.join(name), files)
                    .map_err(|e| PluginError::new(name, Phase::Verify, e))?,
            ),
            None => None,
        };
        Ok(PluginSource {
            manifest,
            wasm,
            files,
        })
    }
}

fn read_limited(dir: &Dir, file: &str, limit: u64) -> anyhow::Result<Vec<u8>> {
    let f = dir.open(file).with_context(|| format!("opening {file}"))?;
    let len = f.metadata()?.len();
    if len > limit {
        bail!("{file} is {len} bytes, more than the {limit} the host reads");
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(limit)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {file}"))?;
    Ok(bytes)
}

/// Refuses precompiled code in a plugin folder: loading it would run machine code nobody verified.
fn refuse_precompiled(folder: &Dir) -> anyhow::Result<()> {
    for entry in folder.entries()? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_file() {
            continue;
        }
        if file.ends_with(".cwasm") {
            bail!(
                "precompiled artifact `{file}` refused: the host compiles plugins itself, remove it"
            );
        }
        let bytes = read_limited(folder, &file, MAX_WASM_BYTES)?;
        if wasmtime::Engine::detect_precompiled(&bytes).is_some() {
            bail!(
                "`{file}` is a precompiled wasmtime artifact, refused: ship the .wasm component instead"
            );
        }
    }
    Ok(())
}
