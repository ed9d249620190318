//! A small tmpfs for tests of a state directory that fills up or turns read-only (issue 48 §1). Mounting
//! needs root, as the suite has under `.ci/run`; the mount is undone when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};

/// A tmpfs mounted at [`Tmpfs::path`] until dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax, e.g. `256k`) at `at`, creating the directory.
    pub fn mount(at: &Path, size: &str) -> Result<Tmpfs> {
        std::fs::create_dir_all(at)?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .context("running mount")?;
        ensure!(
            status.success(),
            "mounting a {size} tmpfs at {} failed ({status}): this test needs root",
            at.display()
        );
        Ok(Tmpfs(at.to_path_buf()))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Remounts it with `mode` (`ro` or `rw`).
    pub fn remount(&self, mode: &str) -> Result<()> {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.0)
            .status()
            .context("running mount")?;
        ensure!(
            status.success(),
            "remounting {} {mode}: {status}",
            self.0.display()
        );
        Ok(())
    }

    /// Fills it with one file until it refuses more; returns the file (remove it and space returns).
    pub fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let path = self.0.join("filler");
        if let Ok(mut f) = std::fs::File::create(&path) {
            let block = vec![0u8; 4096];
            while f.write_all(&block).and_then(|()| f.sync_all()).is_ok() {}
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
