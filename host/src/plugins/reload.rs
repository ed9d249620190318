//! Hot reload (issue 33 §4, ADR 0024): a catalog keeps every plugin it loaded as [`Versions`] — the
//! version in use and, once a watcher thread sees a new sha256 in the plugin's folder (after `plugins
//! install`), the new version, compiled beside the old one. Each configured instance switches to it at
//! its next completed checkpoint and keeps the old instance for the new one's first
//! [`PROBATION_BATCHES`] batches: a factory that refuses, or a batch that traps or returns what the host
//! rejects, puts the old one back, which then does the batch (nothing lost, nothing twice), and the
//! version is refused with the reason. Counters are shared by every version of a plugin.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use anyhow::{anyhow, bail};
use tracing::{error, info, warn};

use super::error::Phase;
use super::metrics::{PluginMetrics, ReloadOutcome};
use super::{Plugin, PluginDir, PluginHost};

/// Environment variable with the watch interval (`off` turns hot reload off).
pub const PLUGIN_RELOAD_ENV: &str = "PULSAR_CONNECT_PLUGIN_RELOAD";

/// How often a running job looks for new versions of the plugins it uses, by default.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(2);

/// Batches a new version runs with the old instance kept beside it, ready to take the batch back.
pub const PROBATION_BATCHES: u64 = 5;

/// The watch interval from `--plugin-reload` / [`PLUGIN_RELOAD_ENV`]: `off` (or `none`, `0`) for none, a
/// duration such as `500ms`, `2s` or `1m`, else [`DEFAULT_RELOAD_INTERVAL`].
pub fn parse_reload_interval(value: Option<&str>) -> anyhow::Result<Option<Duration>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Some(DEFAULT_RELOAD_INTERVAL));
    };
    if ["off", "none", "0"]
        .iter()
        .any(|o| v.eq_ignore_ascii_case(o))
    {
        return Ok(None);
    }
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (number, unit) = v.split_at(split);
    let n: u64 = number.parse().map_err(|_| {
        anyhow!("--plugin-reload '{v}': expected 'off' or a duration such as 500ms, 2s or 1m")
    })?;
    let interval = match unit.trim() {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n * 60),
        other => {
            bail!("--plugin-reload '{v}': unknown unit '{other}' (allowed: ms, s, m; or 'off')")
        }
    };
    if interval < Duration::from_millis(100) {
        bail!("--plugin-reload '{v}': at least 100ms (or 'off')");
    }
    Ok(Some(interval))
}

/// One build of a plugin, as reports name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionId {
    /// The manifest's `version`.
    pub version: String,
    /// The wasm's sha256.
    pub sha256: String,
}

impl std::fmt::Display for VersionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.sha256.get(..12).unwrap_or(&self.sha256);
        write!(f, "{} (sha256 {short}…)", self.version)
    }
}

/// What a catalog knows of a plugin's versions, for metrics and the status page.
#[derive(Debug, Clone)]
pub struct VersionReport {
    /// The version new instances start on: the first one, or the last that passed its first batches.
    pub in_use: VersionId,
    /// A new version compiled and waiting for checkpoints (or in its first batches).
    pub staged: Option<VersionId>,
    /// The last new version that could not be used, and why.
    pub problem: Option<String>,
}

struct State {
    current: Plugin,
    staged: Option<Plugin>,
    /// The sha256 of versions refused: never tried again (`problem` says why the last one was).
    refused: BTreeSet<String>,
    /// A new version that could not be read yet (a load or verify error is tried again every scan),
    /// logged once: (sha256, message).
    unreadable: Option<(String, String)>,
    problem: Option<String>,
}

/// The versions of one plugin a catalog loaded.
pub struct Versions {
    name: String,
    metrics: Arc<PluginMetrics>,
    state: Mutex<State>,
}

impl Versions {
    /// `first`, loaded counting into `metrics`.
    pub(crate) fn new(first: Plugin, metrics: Arc<PluginMetrics>) -> Arc<Versions> {
        Arc::new(Versions {
            name: first.name().to_owned(),
            metrics,
            state: Mutex::new(State {
                current: first,
                staged: None,
                refused: BTreeSet::new(),
                unreadable: None,
                problem: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tracked(self: &Arc<Self>, plugin: &Plugin) -> Plugin {
        Plugin {
            shared: plugin.shared.clone(),
            versions: Some(self.clone()),
        }
    }

    /// The version new instances start on.
    pub fn current(self: &Arc<Self>) -> Plugin {
        let current = self.lock().current.clone();
        self.tracked(&current)
    }

    /// The version an instance on `sha256` should switch to at a completed checkpoint, if any.
    pub(crate) fn newer_than(self: &Arc<Self>, sha256: &str) -> Option<Plugin> {
        let s = self.lock();
        let newest = s.staged.as_ref().unwrap_or(&s.current);
        (newest.sha256() != sha256 && !s.refused.contains(newest.sha256()))
            .then(|| self.tracked(newest))
    }

    pub(crate) fn is_refused(&self, sha256: &str) -> bool {
        self.lock().refused.contains(sha256)
    }

    /// An instance ran `plugin`'s first batches well: it is the version in use.
    pub(crate) fn passed(&self, plugin: &Plugin) {
        let mut s = self.lock();
        if s.current.sha256() == plugin.sha256() || s.refused.contains(plugin.sha256()) {
            return;
        }
        let from = VersionId::of(&s.current.shared);
        s.current = Plugin {
            shared: plugin.shared.clone(),
            versions: None,
        };
        if s.staged
            .as_ref()
            .is_some_and(|p| p.sha256() == plugin.sha256())
        {
            s.staged = None;
        }
        s.problem = None;
        drop(s);
        self.metrics.record_reload(ReloadOutcome::Switched);
        info!(plugin = %self.name, from = %from, to = %VersionId::of(&plugin.shared), "plugin version {} passed its first {PROBATION_BATCHES} batches: now in use", VersionId::of(&plugin.shared));
    }

    /// `bad` cannot be used (`why`); `fallback` is the version the instance that found out went back to.
    pub(crate) fn refuse(
        &self,
        bad: &Plugin,
        fallback: &Plugin,
        outcome: ReloadOutcome,
        why: &str,
    ) {
        let mut s = self.lock();
        if s.refused.contains(bad.sha256()) {
            return;
        }
        if s.current.sha256() == bad.sha256() {
            // Another instance had passed its first batches on it: every instance goes back.
            s.current = Plugin {
                shared: fallback.shared.clone(),
                versions: None,
            };
        }
        self.mark_refused(
            s,
            bad.sha256(),
            &format!("version {}", VersionId::of(&bad.shared)),
            why,
            outcome,
        );
    }

    /// Records `sha256` (`label` in messages) as refused for good, with `why`, and counts `outcome`.
    fn mark_refused(
        &self,
        mut s: MutexGuard<'_, State>,
        sha256: &str,
        label: &str,
        why: &str,
        outcome: ReloadOutcome,
    ) {
        s.refused.insert(sha256.to_owned());
        if s.staged.as_ref().is_some_and(|p| p.sha256() == sha256) {
            s.staged = None;
        }
        s.problem = Some(format!("{label} not used: {why}"));
        drop(s);
        self.metrics.record_reload(outcome);
    }

    /// The counters of every version together.
    pub fn counters(&self) -> super::PluginCounters {
        self.metrics.snapshot()
    }

    /// What reports show.
    pub fn report(&self) -> VersionReport {
        let s = self.lock();
        VersionReport {
            in_use: VersionId::of(&s.current.shared),
            staged: s.staged.as_ref().map(|p| VersionId::of(&p.shared)),
            problem: s.problem.clone(),
        }
    }

    /// One look at the plugin's folder: a new sha256 in its manifest is loaded (verified, compiled
    /// beside the version in use) and staged for the instances' next completed checkpoints.
    pub(crate) fn scan(&self, dir: &PluginDir, host: &PluginHost) {
        let manifest = match dir.read_manifest(&self.name) {
            Ok(m) => m,
            Err(e) => {
                self.unreadable(String::new(), format!("{e}"));
                return;
            }
        };
        let sha = manifest.sha256.to_ascii_lowercase();
        {
            let mut s = self.lock();
            if s.current.sha256() == sha {
                if let Some(staged) = s.staged.take() {
                    // Installed again before any instance took the staged version up.
                    info!(plugin = %self.name, "the plugin's folder holds the version in use again: {} is not taken up", VersionId::of(&staged.shared));
                }
                return;
            }
            if s.staged.as_ref().is_some_and(|p| p.sha256() == sha) || s.refused.contains(&sha) {
                return;
            }
        }
        let loaded = host.load_counted(dir, &self.name, self.metrics.clone());
        let mut s = self.lock();
        match loaded {
            Ok(p) if p.kind() != s.current.kind() => {
                let why = format!(
                    "it is a {} plugin, the version in use a {}",
                    p.kind(),
                    s.current.kind()
                );
                let label = format!("version {}", VersionId::of(&p.shared));
                error!(plugin = %self.name, "new plugin {label} refused: {why}");
                self.mark_refused(s, &sha, &label, &why, ReloadOutcome::Refused);
            }
            Ok(p) => {
                info!(plugin = %self.name, from = %VersionId::of(&s.current.shared), to = %VersionId::of(&p.shared), "new plugin version {} compiled beside {}: it takes over at each instance's next completed checkpoint", VersionId::of(&p.shared), VersionId::of(&s.current.shared));
                s.staged = Some(p);
                s.unreadable = None;
                s.problem = None;
            }
            Err(e) if matches!(e.phase, Phase::Load | Phase::Verify) => {
                // Possibly caught mid-copy by a tool that does not install atomically: tried again.
                drop(s);
                self.unreadable(sha, format!("{e}"));
            }
            Err(e) => {
                let why = format!("{e}");
                error!(plugin = %self.name, sha256 = %sha, "new plugin version refused: {why}; the version in use stays");
                self.mark_refused(
                    s,
                    &sha,
                    &format!("sha256 {sha}"),
                    &why,
                    ReloadOutcome::Refused,
                );
            }
        }
    }

    fn unreadable(&self, sha: String, message: String) {
        let mut s = self.lock();
        let seen = (sha, message);
        if s.unreadable.as_ref() == Some(&seen) {
            return;
        }
        warn!(plugin = %self.name, "the plugin's folder changed but cannot be used yet: {}; the version in use stays (looked at again every scan)", seen.1);
        s.problem = Some(format!("the plugin's folder cannot be used: {}", seen.1));
        s.unreadable = Some(seen);
    }
}

/// What a catalog's watcher thread needs.
pub(crate) struct Watch {
    pub path: PathBuf,
    pub interval: Duration,
    pub host: Arc<PluginHost>,
    pub plugins: Weak<Mutex<BTreeMap<String, Arc<Versions>>>>,
}

/// Starts the thread that scans the catalog's loaded plugins every `interval`; it ends with the catalog.
pub(crate) fn start_watcher(watch: Watch) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("plugin-reload".into())
        .spawn(move || {
            loop {
                std::thread::sleep(watch.interval);
                let Some(plugins) = watch.plugins.upgrade() else {
                    return;
                };
                let tracked: Vec<Arc<Versions>> = plugins
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect();
                drop(plugins);
                let Ok(dir) = PluginDir::open(&watch.path) else {
                    continue;
                };
                for versions in tracked {
                    versions.scan(&dir, &watch.host);
                }
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_intervals_parse_with_clear_errors() {
        assert_eq!(
            parse_reload_interval(None).unwrap(),
            Some(DEFAULT_RELOAD_INTERVAL)
        );
        assert_eq!(parse_reload_interval(Some("off")).unwrap(), None);
        assert_eq!(parse_reload_interval(Some("OFF")).unwrap(), None);
        assert_eq!(
            parse_reload_interval(Some("500ms")).unwrap(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_reload_interval(Some("3")).unwrap(),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            parse_reload_interval(Some("1m")).unwrap(),
            Some(Duration::from_secs(60))
        );
        let err = |v| format!("{:#}", parse_reload_interval(Some(v)).unwrap_err());
        assert!(err("2h").contains("unknown unit 'h' (allowed: ms, s, m; or 'off')"));
        assert!(err("soon").contains("expected 'off' or a duration"));
        assert!(err("10ms").contains("at least 100ms"));
    }

    #[test]
    fn versions_print_with_a_short_hash() {
        let v = VersionId {
            version: "1.2.0".into(),
            sha256: "0123456789abcdef0123".into(),
        };
        assert_eq!(v.to_string(), "1.2.0 (sha256 0123456789ab…)");
    }
}
