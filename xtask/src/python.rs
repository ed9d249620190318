//! The Python virtual environment with the official `pulsar-client` used by the interop tests.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::paths;

fn requirements() -> PathBuf {
    paths::workspace_root().join("tests/python/requirements.txt")
}

/// The venv's interpreter.
pub fn python_bin() -> PathBuf {
    paths::venv_dir().join("bin/python")
}

/// Creates `.venv` and installs `tests/python/requirements.txt` unless it is already in place for the
/// same requirements (a stamp file holds their hash).
pub fn ensure_venv() -> Result<PathBuf> {
    let req = requirements();
    let wanted = hex::encode(Sha256::digest(
        std::fs::read(&req).with_context(|| format!("reading {}", req.display()))?,
    ));
    let venv = paths::venv_dir();
    let stamp = venv.join(".requirements.sha256");
    if python_bin().is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == wanted) {
        return Ok(python_bin());
    }
    if !python_bin().is_file() {
        eprintln!("creating the Python venv {} ...", venv.display());
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let status = Command::new(&python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .with_context(|| format!("running {python} -m venv"))?;
        if !status.success() {
            bail!("`{python} -m venv {}` failed ({status})", venv.display());
        }
    }
    eprintln!("installing {} ...", req.display());
    let status = Command::new(python_bin())
        .args(["-m", "pip", "install", "--quiet", "-r"])
        .arg(&req)
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("pip install -r {} failed ({status})", req.display());
    }
    std::fs::write(&stamp, wanted)?;
    Ok(python_bin())
}
