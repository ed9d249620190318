//! `pulsar-connect plugins list|check|new|install|test`.

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
    /// Scaffold a plugin project in a new folder NAME: manifest, code, unit tests, conformance vectors and
    /// a README with the commands to build, test and install it (docs/plugins.md).
    New {
        /// format or router.
        #[arg(long, value_parser = ["format", "router"])]
        kind: String,
        /// The plugin's name (lowercase letters, digits, `-`, `_`): the folder, the wasm file, the name in SQL.
        name: String,
        /// The project's language.
        #[arg(long, value_enum, default_value = "rust")]
        lang: super::plugin_new::Lang,
        /// Where to create the folder NAME (default: the working directory).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// Rust: the SDK as a path dependency, a pulsar-connect checkout's `wit/` folder (default: the one
        /// this binary was built from).
        #[arg(long, conflicts_with = "sdk_git")]
        sdk_path: Option<PathBuf>,
        /// Rust: the SDK as a git dependency, the URL of a pulsar-connect repository.
        #[arg(long)]
        sdk_git: Option<String>,
        /// Rust: the commit (or tag) of --sdk-git.
        #[arg(long, requires = "sdk_git")]
        sdk_rev: Option<String>,
    },
    /// Check a built component against its manifest (world and version, imports, compilation), fill in
    /// its sha256 and copy both into the plugin directory (replacing an older install in one step).
    Install {
        /// The component (`.wasm`).
        wasm: PathBuf,
        /// The plugin's manifest (its sha256 is filled in; the file itself is not changed).
        #[arg(long)]
        manifest: PathBuf,
        /// The plugin directory (default: the `--plugin-dir` one).
        #[arg(long)]
        plugin_dir: Option<PathBuf>,
    },
    /// The conformance kit: run a plugin's vectors through the sandbox, then hostile inputs (random,
    /// truncated, oversized: no trap, no deadline hit), and print the cost per message, the memory
    /// high-water and the headroom to the manifest's limits. Exits non-zero on any failure.
    Test {
        /// The installed plugin's folder, `<plugin dir>/<name>`.
        plugin: PathBuf,
        /// The vector file (JSON lines, docs/plugins.md "Vector files"; default: vectors.jsonl in the
        /// plugin's folder).
        #[arg(long)]
        vectors: Option<PathBuf>,
        /// Seed of the hostile inputs.
        #[arg(long, default_value_t = 0x5eed)]
        seed: u64,
        /// Random inputs of the hostile pass (besides the truncated and mutated vectors).
        #[arg(long, default_value_t = 2000)]
        random_inputs: usize,
        /// Messages (rows, keys) per cost measurement (at most 3 s each).
        #[arg(long, default_value_t = 50_000)]
        cost_messages: usize,
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
        PluginsCommand::New {
            kind,
            name,
            lang,
            dir,
            sdk_path,
            sdk_git,
            sdk_rev,
        } => {
            use super::plugin_new::{Sdk, new_project, next_steps};
            let kind = if kind == "router" {
                crate::plugins::Kind::Router
            } else {
                crate::plugins::Kind::Format
            };
            let sdk = match (sdk_path, sdk_git) {
                (Some(p), _) => {
                    Some(Sdk::Path(p.canonicalize().map_err(|e| {
                        anyhow::anyhow!("--sdk-path {}: {e}", p.display())
                    })?))
                }
                (None, Some(url)) => Some(Sdk::Git { url, rev: sdk_rev }),
                (None, None) => None,
            };
            let folder = new_project(&dir, &name, kind, lang, sdk)?;
            print!("{}", next_steps(&folder, &name, lang));
            Ok(())
        }
        PluginsCommand::Install {
            wasm,
            manifest,
            plugin_dir,
        } => {
            let i = super::plugin_install::install(&wasm, &manifest, &dir(plugin_dir))?;
            println!(
                "installed {} {} ({} {}, sha256 {}) into {}{}",
                i.manifest.name,
                i.manifest.version,
                i.manifest.kind,
                i.manifest.world,
                i.manifest.sha256,
                i.folder.display(),
                if i.replaced {
                    ", replacing the older install"
                } else {
                    ""
                }
            );
            Ok(())
        }
        PluginsCommand::Test {
            plugin,
            vectors,
            seed,
            random_inputs,
            cost_messages,
        } => super::plugin_test::test(
            &super::plugin_test::TestArgs {
                plugin,
                vectors,
                seed,
                random_inputs,
                cost_messages,
            },
            &mut std::io::stdout(),
        ),
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
