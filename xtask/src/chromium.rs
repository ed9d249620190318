//! Headless Chromium for the status page's test (Debian's `chromium` package): found on `PATH`, or
//! installed with apt-get when missing and this process may (root).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Result, bail};

/// The Chromium binary: `PULSAR_CONNECT_CHROMIUM`, else `chromium` on `PATH`.
pub fn binary() -> Result<PathBuf> {
    let name = std::env::var_os("PULSAR_CONNECT_CHROMIUM").unwrap_or_else(|| "chromium".into());
    let works = Command::new(&name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        return Ok(PathBuf::from(name));
    }
    bail!(
        "headless Chromium not found ({}): install Debian's `chromium` package (`apt-get install chromium`), or set PULSAR_CONNECT_CHROMIUM; `cargo xtask test` and .ci/run install it when they can",
        PathBuf::from(name).display()
    )
}

/// Installs Debian's `chromium` with apt-get when it is missing and this process runs as root; otherwise
/// says what is missing (the status page's test then fails naming it).
pub fn ensure() -> Result<()> {
    if binary().is_ok() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root || Command::new("apt-get").arg("--version").output().is_err() {
        eprintln!(
            "warning: headless Chromium is missing and cannot be installed here (needs root and apt-get): the status page's test will fail; install Debian's `chromium` package"
        );
        return Ok(());
    }
    eprintln!("installing Debian's chromium (the status page's test loads the page in it)");
    let ok = Command::new("apt-get")
        .args(["update", "-qq"])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("apt-get")
            .args(["install", "-y", "-qq", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        bail!("apt-get install chromium failed");
    }
    binary().map(|_| ())
}
