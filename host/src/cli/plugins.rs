//! `pulsar-connect plugins list|check`.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Subcommand;

use crate::plugins::catalog::PluginCatalog;
use crate::plugins::{HostConfig, PluginDir, PluginHost, read_manifests};

pub use crate::plugins::catalog::DEFAULT_PLUGIN_DIR;

#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List the plugins of a directory: name, kind, version, world and options with their defaults.
    List {
        /// The plugin directory (default: the `--plugin-dir` one).
        dir: Option<PathBuf>,
    },
    /// Validate every manifest and component of a directory (hash, world, imports, compilation,
    /// instantiation); exits non-zero naming each bad plugin and why.
    Check {
        /// The plugin directory (default: the `--plugin-dir` one).
        dir: Option<PathBuf>,
        /// Compile cache directory (default: none, compile in memory).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
}

/// Runs a `plugins` subcommand on its directory argument, else on the directory of `catalog` (the
/// process's `--plugin-dir`).
pub fn run(command: PluginsCommand, catalog: &PluginCatalog) -> anyhow::Result<()> {
    let dir = |d: Option<PathBuf>| d.unwrap_or_else(|| catalog.path().to_path_buf());
    match command {
        PluginsCommand::List { dir: d } => list(&dir(d), &mut std::io::stdout()),
        PluginsCommand::Check { dir: d, cache_dir } => {
            check(&dir(d), cache_dir, &mut std::io::stdout())
        }
    }
}

/// Writes the plugin table of `dir` to `out`.
pub fn list(dir: &Path, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let dir = PluginDir::open(dir)?;
    let manifests = read_manifests(&dir)?;
    if manifests.is_empty() {
        writeln!(out, "no plugins in {}", dir.path().display())?;
    }
    for (name, manifest) in manifests {
        match manifest {
            Ok(m) => {
                writeln!(
                    out,
                    "{:<20} {:<7} {:<10} {}",
                    m.name, m.kind, m.version, m.world
                )?;
                if let Some(d) = &m.description {
                    writeln!(out, "    {d}")?;
                }
                for o in &m.options {
                    let default = match (o.required, o.default_text()) {
                        (true, _) => "required".to_owned(),
                        (false, Some(d)) => format!("default {d:?}"),
                        (false, None) => "optional".to_owned(),
                    };
                    let values = if o.values.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", o.values.join("|"))
                    };
                    writeln!(
                        out,
                        "    {:<28} {}{values}, {default}  {}",
                        o.name, o.ty, o.doc
                    )?;
                }
                if m.kind == crate::plugins::Kind::Format
                    && m.changelog_mode() != crate::sql::ChangelogMode::INSERT_ONLY
                {
                    writeln!(out, "    row kinds: {}", m.changelog_mode())?;
                }
                for md in &m.metadata {
                    writeln!(
                        out,
                        "    METADATA FROM 'value.{}'  {}  {}",
                        md.key, md.ty, md.doc
                    )?;
                }
            }
            Err(e) => writeln!(out, "{name:<20} INVALID  {e}")?,
        }
    }
    Ok(())
}

/// Loads every plugin of `dir` fully; an error names every bad plugin.
pub fn check(
    dir: &Path,
    cache_dir: Option<PathBuf>,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let dir = PluginDir::open(dir)?;
    let host = PluginHost::new(HostConfig {
        cache_dir,
        ..HostConfig::default()
    })?;
    let results = host.load_all(&dir)?;
    let mut bad = Vec::new();
    for (name, result) in &results {
        match result {
            Ok(p) => writeln!(
                out,
                "ok   {name} ({} {}, {})",
                p.kind(),
                p.manifest().version,
                p.manifest().world
            )?,
            Err(e) => {
                writeln!(out, "FAIL {name}: {e}")?;
                bad.push(name.as_str());
            }
        }
    }
    if !bad.is_empty() {
        bail!(
            "{} of {} plugins are invalid: {}",
            bad.len(),
            results.len(),
            bad.join(", ")
        );
    }
    writeln!(
        out,
        "{} plugins ok in {}",
        results.len(),
        dir.path().display()
    )?;
    Ok(())
}
