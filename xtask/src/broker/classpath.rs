//! Resolves the broker's classpath from Maven Central with the small Maven project in
//! `xtask/broker/pom.xml`, and caches it (keyed by the pom's hash) so a second start is fast.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::paths;

fn pom_path() -> PathBuf {
    paths::workspace_root().join("xtask/broker/pom.xml")
}

/// The classpath (a `:`-separated list of jars), resolving it with Maven when the cache is missing,
/// stale (the pom changed) or points at jars that are gone.
pub fn classpath() -> Result<String> {
    let pom = pom_path();
    let pom_bytes = std::fs::read(&pom).with_context(|| format!("reading {}", pom.display()))?;
    let key = hex::encode(Sha256::digest(&pom_bytes));
    let dir = paths::pulsar_dir();
    std::fs::create_dir_all(&dir)?;
    let cache = dir.join("classpath.txt");
    let key_file = dir.join("classpath.key");
    if let (Ok(cached_key), Ok(cp)) = (
        std::fs::read_to_string(&key_file),
        std::fs::read_to_string(&cache),
    ) && cached_key.trim() == key
        && !cp.trim().is_empty()
        && cp.trim().split(':').all(|jar| Path::new(jar).is_file())
    {
        return Ok(cp.trim().to_owned());
    }
    eprintln!("resolving the Apache Pulsar broker from Maven Central (first run only) ...");
    let started = Instant::now();
    let tmp = dir.join("classpath.txt.tmp");
    let status = Command::new("mvn")
        .args(["-B", "-q", "-Dstyle.color=never", "-f"])
        .arg(&pom)
        .arg("dependency:build-classpath")
        .arg(format!("-Dmdep.outputFile={}", tmp.display()))
        .status()
        .context("running `mvn` (is Maven installed and on PATH?)")?;
    if !status.success() {
        bail!(
            "Maven could not resolve the broker classpath from {} ({status})",
            pom.display()
        );
    }
    let cp = std::fs::read_to_string(&tmp)?;
    if cp.trim().is_empty() {
        bail!("Maven produced an empty classpath");
    }
    std::fs::rename(&tmp, &cache)?;
    std::fs::write(&key_file, &key)?;
    eprintln!(
        "resolved {} jars in {:.1}s",
        cp.trim().split(':').count(),
        started.elapsed().as_secs_f64()
    );
    Ok(cp.trim().to_owned())
}
