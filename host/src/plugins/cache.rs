//! The host-owned cache of compiled components, keyed by (wasm sha256, engine compatibility hash,
//! wasmtime version); written atomically (temp file + rename).

use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// A `Hasher` that feeds sha256, so the engine's compatibility hash becomes a stable file name.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub struct CompileCache {
    dir: Option<Dir>,
}

impl CompileCache {
    /// A cache in `path` (created if missing), or no cache.
    pub fn open(path: Option<&Path>) -> anyhow::Result<CompileCache> {
        let Some(path) = path else {
            return Ok(CompileCache { dir: None });
        };
        std::fs::create_dir_all(path)
            .with_context(|| format!("creating the compile cache {}", path.display()))?;
        let dir = Dir::open_ambient_dir(path, ambient_authority())
            .with_context(|| format!("opening the compile cache {}", path.display()))?;
        Ok(CompileCache { dir: Some(dir) })
    }

    /// The cache file name for a wasm with this sha256 on this engine.
    pub fn key(engine: &Engine, wasm_sha256: &str) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        wasm_sha256.hash(&mut hasher);
        engine.precompile_compatibility_hash().hash(&mut hasher);
        wasmtime_environ::VERSION.hash(&mut hasher);
        format!("{}.cwasm", hex::encode(hasher.0.finalize()))
    }

    /// Compiles `wasm`, or loads the compilation this host cached earlier.
    pub fn compile(
        &self,
        engine: &Engine,
        wasm_sha256: &str,
        wasm: &[u8],
    ) -> anyhow::Result<Component> {
        let Some(dir) = &self.dir else {
            return Component::new(engine, wasm)
                .map_err(|e| anyhow::anyhow!("compiling the component: {e:#}"));
        };
        let key = Self::key(engine, wasm_sha256);
        if let Ok(bytes) = dir.read(&key) {
            // SAFETY: the file is in the host-owned cache directory and was written by `store` below
            // from this host's own `serialize`; wasmtime still rejects it if the engine or version differ.
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!(cache_file = %key, error = %e, "ignoring an unusable cache entry")
                }
            }
        }
        let component = Component::new(engine, wasm)
            .map_err(|e| anyhow::anyhow!("compiling the component: {e:#}"))?;
        if let Err(e) = component
            .serialize()
            .map_err(|e| anyhow::anyhow!("{e:#}"))
            .and_then(|bytes| store(dir, &key, &bytes))
        {
            tracing::warn!(cache_file = %key, error = %e, "could not write the compile cache");
        }
        Ok(component)
    }
}

fn store(dir: &Dir, key: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let temp = format!(
        ".{key}.{}.{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let result = (|| {
        let mut f = dir.create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        dir.rename(&temp, dir, key)?;
        anyhow::Ok(())
    })();
    if result.is_err() {
        let _ = dir.remove_file(&temp);
    }
    result
}
