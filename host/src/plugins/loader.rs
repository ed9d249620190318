//! Loading a plugin: manifest → verified wasm → compiled component (cached) → checked world →
//! pre-instantiated component, ready for cheap per-decoder instances.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::bindings::{self, FormatComponent, RouterComponent};
use super::cache::CompileCache;
use super::directory::{PluginDir, PluginSource};
use super::engine::{DEFAULT_EPOCH_TICK, EpochTicker, build_engine};
use super::error::{Phase, PluginError, Result};
use super::manifest::{HOST_MAX_MEMORY_MIB, Kind, Manifest, WorldRef};
use super::metrics::{PluginCounters, PluginMetrics};
use super::reload::{VersionId, Versions};
use super::state::{LogSink, PluginState};

/// Settings of the plugin host.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Where compiled components are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Ceiling on any plugin's memory limit.
    pub max_memory_mib: u32,
    /// Epoch tick: the granularity of call deadlines.
    pub epoch_tick: Duration,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            cache_dir: None,
            max_memory_mib: HOST_MAX_MEMORY_MIB,
            epoch_tick: DEFAULT_EPOCH_TICK,
        }
    }
}

/// The plugin host: one engine, one linker (WASI with an empty context + the `log` import), the
/// compile cache.
pub struct PluginHost {
    engine: Engine,
    ticker: Arc<EpochTicker>,
    linker: Linker<PluginState>,
    cache: CompileCache,
    config: HostConfig,
}

impl PluginHost {
    pub fn new(config: HostConfig) -> anyhow::Result<PluginHost> {
        let engine = build_engine()?;
        let ticker = Arc::new(EpochTicker::start(&engine, config.epoch_tick)?);
        let mut linker = Linker::new(&engine);
        // Toolchains import WASI even when a plugin never uses it: link it, grant nothing.
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .map_err(|e| anyhow!("linking WASI: {e:#}"))?;
        bindings::add_to_linker(&mut linker)?;
        let cache = CompileCache::open(config.cache_dir.as_deref())?;
        Ok(PluginHost {
            engine,
            ticker,
            linker,
            cache,
            config,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads, verifies, compiles and pre-instantiates plugin `name` of `dir`.
    pub fn load(&self, dir: &PluginDir, name: &str) -> Result<Plugin> {
        self.load_counted(dir, name, Arc::default())
    }

    /// [`PluginHost::load`], counting into `metrics` (a new version of a plugin keeps the counters of the
    /// versions before it).
    pub fn load_counted(
        &self,
        dir: &PluginDir,
        name: &str,
        metrics: Arc<PluginMetrics>,
    ) -> Result<Plugin> {
        let source = dir.read_plugin(name)?;
        self.load_source(source, metrics)
    }

    /// Loads every plugin of `dir`; one result per plugin folder.
    pub fn load_all(&self, dir: &PluginDir) -> anyhow::Result<Vec<(String, Result<Plugin>)>> {
        Ok(dir
            .plugin_names()?
            .into_iter()
            .map(|name| (name.clone(), self.load(dir, &name)))
            .collect())
    }

    fn load_source(&self, source: PluginSource, metrics: Arc<PluginMetrics>) -> Result<Plugin> {
        let PluginSource {
            manifest,
            wasm,
            files,
        } = source;
        let name = manifest.name.clone();
        let verify = |e: anyhow::Error| PluginError::new(&name, Phase::Verify, e);
        let world = manifest.world_ref().map_err(verify)?;
        if wasmtime::Engine::detect_precompiled(&wasm).is_some() {
            return Err(verify(anyhow!("{name}.wasm is precompiled code, refused")));
        }
        let sha = hex::encode(Sha256::digest(&wasm));
        let component = self
            .cache
            .compile(&self.engine, &sha, &wasm)
            .map_err(|e| PluginError::new(&name, Phase::Compile, e))?;
        check_world(&self.engine, &component, &world).map_err(verify)?;
        let instance_pre = self.linker.instantiate_pre(&component).map_err(|e| {
            verify(
                anyhow!("{e:#}")
                    .context("the component imports something the host does not provide"),
            )
        })?;
        let pre = match world.kind {
            Kind::Format => Pre::Format(
                bindings::format_component(&world.version, instance_pre).map_err(verify)?,
            ),
            Kind::Router => Pre::Router(
                bindings::router_component(&world.version, instance_pre).map_err(verify)?,
            ),
        };
        let plugin_name: Arc<str> = Arc::from(name.as_str());
        Ok(Plugin {
            shared: Arc::new(PluginShared {
                log: LogSink::new(plugin_name.clone()),
                name: plugin_name,
                memory_bytes: manifest.memory_limit_bytes(self.config.max_memory_mib),
                timeout: Duration::from_millis(manifest.limits.timeout_ms),
                tick: self.config.epoch_tick,
                ticker: self.ticker.clone(),
                manifest,
                sha256: sha,
                files,
                engine: self.engine.clone(),
                pre,
                metrics,
            }),
            versions: None,
        })
    }
}

/// Checks the component's real exports against the world its manifest claims.
fn check_world(engine: &Engine, component: &Component, world: &WorldRef) -> anyhow::Result<()> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    let want = world.export_name();
    if exports.iter().any(|e| e == &want) {
        return Ok(());
    }
    let other_kind = match world.kind {
        Kind::Format => Kind::Router,
        Kind::Router => Kind::Format,
    };
    let other = WorldRef {
        kind: other_kind,
        version: world.version.clone(),
    };
    if exports.iter().any(|e| e == &other.export_name()) {
        return Err(anyhow!(
            "the manifest claims world {world} but the component implements {other} (it exports {})",
            other.export_name()
        ));
    }
    Err(anyhow!(
        "the manifest claims world {world} but the component does not export {want} (it exports: {})",
        if exports.is_empty() { "nothing".to_owned() } else { exports.join(", ") }
    ))
    .context("wrong world")
}

/// The pre-instantiated component, behind the bindings of the WIT version it implements.
pub(crate) enum Pre {
    Format(Box<dyn FormatComponent>),
    Router(Box<dyn RouterComponent>),
}

/// What every instance of a plugin shares.
pub(crate) struct PluginShared {
    pub name: Arc<str>,
    pub manifest: Manifest,
    /// The sha256 of the wasm (lower-case hex): the identity of this version of the plugin.
    pub sha256: String,
    /// The folder granted to every instance (its only preopen, read-only; ADR 0022).
    pub files: Option<PathBuf>,
    pub engine: Engine,
    pub pre: Pre,
    /// Shared by every version of the plugin a catalog loaded ([`super::reload`]).
    pub metrics: Arc<PluginMetrics>,
    pub log: Arc<LogSink>,
    pub memory_bytes: usize,
    pub timeout: Duration,
    pub tick: Duration,
    /// Ticks while any guest code runs (every entry into the guest holds [`EpochTicker::running`]).
    pub ticker: Arc<EpochTicker>,
}

/// A loaded, verified plugin. Cheap to clone; each decoder, encoder or router made from it runs in its
/// own instance.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) shared: Arc<PluginShared>,
    /// The versions of this plugin its catalog tracks (hot reload); `None`: loaded outside a catalog.
    pub(crate) versions: Option<Arc<Versions>>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.shared.name)
            .field("kind", &self.shared.manifest.kind)
            .field("version", &self.shared.manifest.version)
            .finish()
    }
}

impl Plugin {
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    pub fn manifest(&self) -> &Manifest {
        &self.shared.manifest
    }

    pub fn kind(&self) -> Kind {
        self.shared.manifest.kind
    }

    /// The wasm's sha256 (lower-case hex): which build of the plugin this is.
    pub fn sha256(&self) -> &str {
        &self.shared.sha256
    }

    /// The manifest's `version`.
    pub fn version(&self) -> &str {
        &self.shared.manifest.version
    }

    /// The plugin's counters so far.
    pub fn counters(&self) -> PluginCounters {
        self.shared.metrics.snapshot()
    }

    /// Checks `options` against the manifest (before anything is instantiated) and fills in defaults.
    pub fn resolve_options(&self, options: &[(String, String)]) -> Result<Vec<(String, String)>> {
        self.shared
            .manifest
            .resolve_options(options)
            .map_err(|e| PluginError::new(self.name(), Phase::Configure, e))
    }
}

/// Reads a plugin directory's manifests without compiling anything (for `plugins list`).
pub fn read_manifests(dir: &PluginDir) -> anyhow::Result<Vec<(String, Result<Manifest>)>> {
    let names = dir
        .plugin_names()
        .with_context(|| format!("reading {}", dir.path().display()))?;
    Ok(names
        .into_iter()
        .map(|n| (n.clone(), dir.read_manifest(&n)))
        .collect())
}

impl VersionId {
    /// The build `p` is (a plugin names its versions in reports by it).
    pub(crate) fn of(p: &PluginShared) -> VersionId {
        VersionId {
            version: p.manifest.version.clone(),
            sha256: p.sha256.clone(),
        }
    }
}
