//! A plugin directory: manifests read on demand (validation), plugins loaded once and shared.
//!
//! There is no process-wide catalog: `main` builds one from [`resolve_plugin_dir`] (`--plugin-dir`, else
//! `PULSAR_CONNECT_PLUGIN_DIR`, else `plugins` in the working directory) and passes it to the connector
//! registry and every subcommand. The wasm engine (and its epoch ticker thread) is only started when a
//! job first needs a plugin.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context as _, anyhow};

use super::reload::{self, VersionReport, Versions};
use super::{HostConfig, Kind, Manifest, Plugin, PluginCounters, PluginDir, PluginHost};

/// Environment variable naming the plugin directory.
pub const PLUGIN_DIR_ENV: &str = "PULSAR_CONNECT_PLUGIN_DIR";

/// The plugin directory when neither `--plugin-dir` nor [`PLUGIN_DIR_ENV`] names one.
pub const DEFAULT_PLUGIN_DIR: &str = "plugins";

/// The plugin directory to use: `flag` (the CLI's `--plugin-dir`), else a non-empty
/// [`PLUGIN_DIR_ENV`], else [`DEFAULT_PLUGIN_DIR`] in the working directory.
pub fn resolve_plugin_dir(flag: Option<PathBuf>) -> PathBuf {
    if let Some(d) = flag {
        return d;
    }
    match std::env::var_os(PLUGIN_DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(DEFAULT_PLUGIN_DIR),
    }
}

/// Environment variable naming the compile cache directory (`off` for none).
pub const COMPILE_CACHE_ENV: &str = "PULSAR_CONNECT_COMPILE_CACHE";

/// The compile cache to use: `flag` (the CLI's `--compile-cache`, which clap also fills from
/// [`COMPILE_CACHE_ENV`]); `off`, `none` or empty turns it off. Without one, the user's cache
/// directory, `$XDG_CACHE_HOME/pulsar-connect/compiled` or `$HOME/.cache/pulsar-connect/compiled`, if it
/// can be created (a read-only home compiles in memory, as before; an explicitly named directory
/// that cannot be used is an error when the first plugin loads).
pub fn resolve_compile_cache(flag: Option<&str>) -> Option<PathBuf> {
    match flag {
        Some(v)
            if v.is_empty() || v.eq_ignore_ascii_case("off") || v.eq_ignore_ascii_case("none") =>
        {
            None
        }
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME")
                        .filter(|v| !v.is_empty())
                        .map(|h| PathBuf::from(h).join(".cache"))
                })?;
            let dir = base.join("pulsar-connect").join("compiled");
            match std::fs::create_dir_all(&dir) {
                Ok(()) => Some(dir),
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), "no compile cache (plugins compile in memory): {e}");
                    None
                }
            }
        }
    }
}

/// Plugins of one directory, loaded lazily and cached by name, each with its versions (hot reload:
/// [`reload`]).
pub struct PluginCatalog {
    path: PathBuf,
    /// Where compiled plugins are kept between runs (`None`: compiled in memory by every process).
    compile_cache: Option<PathBuf>,
    /// How often the loaded plugins' folders are looked at for new versions (`None`: never).
    reload: Option<Duration>,
    host: OnceLock<std::result::Result<Arc<PluginHost>, String>>,
    loaded: Arc<Mutex<BTreeMap<String, Arc<Versions>>>>,
    watching: OnceLock<()>,
}

impl PluginCatalog {
    /// A catalog that compiles its plugins in memory (no compile cache).
    pub fn new(path: PathBuf) -> PluginCatalog {
        Self::with_compile_cache(path, None)
    }

    /// A catalog whose plugins are compiled once into `compile_cache` and loaded from there by later
    /// runs (ADR 0004's host-owned cache).
    pub fn with_compile_cache(path: PathBuf, compile_cache: Option<PathBuf>) -> PluginCatalog {
        PluginCatalog {
            path,
            compile_cache,
            reload: None,
            host: OnceLock::new(),
            loaded: Arc::default(),
            watching: OnceLock::new(),
        }
    }

    /// Looks at the loaded plugins' folders every `interval` for new versions, which running instances
    /// switch to at their next completed checkpoint (ADR 0024); `None` keeps the versions first loaded.
    pub fn with_reload(mut self, interval: Option<Duration>) -> PluginCatalog {
        self.reload = interval;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> anyhow::Result<PluginDir> {
        PluginDir::open(&self.path).with_context(|| {
            format!(
                "the plugin directory {} (set --plugin-dir or {PLUGIN_DIR_ENV}; `cargo xtask build-plugins` builds the built-in formats and routers into ./plugins)",
                self.path.display()
            )
        })
    }

    /// The manifest of plugin `name`, checked to be of `kind` (no compilation).
    pub fn manifest(&self, name: &str, kind: Kind) -> anyhow::Result<Manifest> {
        let dir = self.dir()?;
        let manifest = dir.read_manifest(name).map_err(|e| {
            // Only plugins of the kind asked for are offered (a router is no answer to a format).
            let available: Vec<String> = dir
                .plugin_names()
                .unwrap_or_default()
                .into_iter()
                .filter(|n| dir.read_manifest(n).is_ok_and(|m| m.kind == kind))
                .collect();
            let hint = crate::options::suggest(name, available.iter().map(String::as_str))
                .map(|s| format!("did you mean '{s}'? "))
                .unwrap_or_default();
            anyhow!(
                "{kind} plugin '{name}' not found in {}: {e}; {hint}available {kind} plugins: {}",
                self.path.display(),
                if available.is_empty() {
                    "none".to_owned()
                } else {
                    available.join(", ")
                }
            )
        })?;
        if manifest.kind != kind {
            return Err(anyhow!(
                "plugin '{name}' is a {} plugin, not a {kind}",
                manifest.kind
            ));
        }
        Ok(manifest)
    }

    fn tracked(&self) -> Vec<(String, Arc<Versions>)> {
        self.loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, v)| (name.clone(), v.clone()))
            .collect()
    }

    /// The counters of every plugin loaded so far (all its versions together), by name.
    pub fn counters(&self) -> Vec<(String, PluginCounters)> {
        self.tracked()
            .into_iter()
            .map(|(name, v)| (name, v.counters()))
            .collect()
    }

    /// The version in use of every plugin loaded so far (and a new one being taken up), by name.
    pub fn versions(&self) -> Vec<(String, VersionReport)> {
        self.tracked()
            .into_iter()
            .map(|(name, v)| (name, v.report()))
            .collect()
    }

    /// Plugin `name`, loaded (verified, compiled, pre-instantiated) on first use; later, the version in
    /// use.
    pub fn load(&self, name: &str, kind: Kind) -> anyhow::Result<Plugin> {
        if let Some(v) = self.loaded.lock().expect("plugin cache lock").get(name) {
            return Ok(v.current());
        }
        self.manifest(name, kind)?;
        let host = self
            .host
            .get_or_init(|| {
                PluginHost::new(HostConfig {
                    cache_dir: self.compile_cache.clone(),
                    ..HostConfig::default()
                })
                .map(Arc::new)
                .map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| {
                // The cache's own errors ("creating/opening the compile cache DIR") get the way out.
                let hint = if e.contains("the compile cache") {
                    format!(" (choose another with --compile-cache DIR or {COMPILE_CACHE_ENV}, or turn it off with 'off')")
                } else {
                    String::new()
                };
                anyhow!("starting the plugin runtime: {e}{hint}")
            })?;
        let metrics = Arc::default();
        let plugin = host.load_counted(&self.dir()?, name, Arc::clone(&metrics))?;
        let versions = self
            .loaded
            .lock()
            .expect("plugin cache lock")
            .entry(name.to_owned())
            .or_insert_with(|| Versions::new(plugin, metrics))
            .clone();
        if let Some(interval) = self.reload {
            self.watching.get_or_init(|| {
                let watch = reload::Watch {
                    path: self.path.clone(),
                    interval,
                    host: host.clone(),
                    plugins: Arc::downgrade(&self.loaded),
                };
                if let Err(e) = reload::start_watcher(watch) {
                    tracing::warn!("no hot reload of plugins (cannot start its thread): {e}");
                }
            });
        }
        Ok(versions.current())
    }
}
