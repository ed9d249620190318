//! `pulsar-connect plugins test DIR/NAME [--vectors FILE]`: the conformance kit on one installed plugin.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};

use crate::cli::kit::vectors::VectorFile;
use crate::cli::kit::{self, KitConfig};
use crate::plugins::{HostConfig, PluginDir, PluginHost};

/// The vector file `plugins test` reads when `--vectors` is not given: in the plugin's folder.
pub const DEFAULT_VECTORS: &str = "vectors.jsonl";

/// Settings of one `plugins test` run.
#[derive(Debug, Clone)]
pub struct TestArgs {
    /// The plugin's folder, `<plugin dir>/<name>`.
    pub plugin: PathBuf,
    pub vectors: Option<PathBuf>,
    pub seed: u64,
    pub random_inputs: usize,
    pub cost_messages: usize,
}

/// Runs the kit; an error when any vector or hostile input failed (the report says which).
pub fn test(args: &TestArgs, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let folder = &args.plugin;
    let (dir, name) = split(folder)?;
    let vectors = match &args.vectors {
        Some(v) => v.clone(),
        None => {
            let v = folder.join(DEFAULT_VECTORS);
            if !v.is_file() {
                bail!(
                    "{} has no {DEFAULT_VECTORS}: pass the plugin's vectors with --vectors FILE (docs/plugins.md, \"Vector files\")",
                    folder.display()
                );
            }
            v
        }
    };
    let file = VectorFile::read(&vectors)?;
    let dir = PluginDir::open(&dir)?;
    let host = PluginHost::new(HostConfig::default())?;
    let plugin = host.load(&dir, &name).map_err(|e| anyhow!("{e}"))?;
    let config = KitConfig {
        seed: args.seed,
        random_inputs: args.random_inputs,
        cost_messages: args.cost_messages,
        cost_time: Duration::from_secs(3),
        ..KitConfig::default()
    };
    let outcome = kit::run(&plugin, &file, &config, out)?;
    if !outcome.passed() {
        bail!(
            "plugin `{name}`: {} of {} vectors failed, {} hostile inputs failed",
            outcome.failures.len(),
            outcome.vectors,
            outcome.hostile.failures.len()
        );
    }
    Ok(())
}

/// `plugins/json` → (`plugins`, `json`).
fn split(folder: &Path) -> anyhow::Result<(PathBuf, String)> {
    let folder = folder
        .canonicalize()
        .with_context(|| format!("no plugin folder {}", folder.display()))?;
    let name = folder
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{} is not a plugin folder", folder.display()))?
        .to_owned();
    let dir = folder
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", folder.display()))?
        .to_path_buf();
    Ok((dir, name))
}
