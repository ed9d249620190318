//! A plugin's own read-only folder (ADR 0022): a manifest may say `files = "<folder>"`, a plain name of a
//! folder inside the plugin's own folder (`plugins/<name>/<folder>/`). Every instance of the plugin then
//! gets exactly that folder as its only WASI preopen, read-only, mounted at [`GUEST_PATH`]; a job names a
//! file in it by its path relative to the folder (`'protobuf.descriptor-file' = 'orders.desc'`).
//!
//! The folder is resolved once, when the plugin is loaded: opened through the plugin directory's
//! `cap-std` handle (no `..`, no absolute path, no symlink out of the plugin folder), refused when it is
//! a symlink itself, and its canonical path checked to lie inside the plugin folder's. Inside the guest,
//! wasmtime's WASI filesystem (itself `cap-std`) confines every path to the preopen and refuses writes.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use cap_std::fs::Dir;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::manifest::is_plain_name;

/// Where the granted folder appears inside the guest: its root, so a job's relative file name is the
/// path the plugin opens.
pub const GUEST_PATH: &str = "/";

/// Resolves the folder `files` of plugin `name`: `plugin_folder` is the plugin's folder opened through
/// the plugin directory's handle, `plugin_path` its path on the host. Returns the folder's canonical path.
pub(crate) fn resolve(
    plugin_folder: &Dir,
    plugin_path: &Path,
    files: &str,
) -> anyhow::Result<PathBuf> {
    if !is_plain_name(files) {
        bail!("files `{files}` must be a plain folder name (lowercase letters, digits, `-`, `_`)");
    }
    let meta = plugin_folder.symlink_metadata(files).with_context(|| {
        format!(
            "the manifest grants the plugin its folder `{files}`, but {} has none (create it and put the plugin's files there)",
            plugin_path.display()
        )
    })?;
    if meta.is_symlink() {
        bail!(
            "files: {} is a symlink; the folder a plugin reads must be a real folder inside its plugin folder",
            plugin_path.join(files).display()
        );
    }
    if !meta.is_dir() {
        bail!(
            "files: {} is not a folder",
            plugin_path.join(files).display()
        );
    }
    // Opening through the handle proves the name stays inside the plugin folder.
    plugin_folder
        .open_dir(files)
        .with_context(|| format!("opening the plugin's folder `{files}`"))?;
    let base = std::fs::canonicalize(plugin_path)
        .with_context(|| format!("resolving {}", plugin_path.display()))?;
    let path = std::fs::canonicalize(plugin_path.join(files))
        .with_context(|| format!("resolving {}", plugin_path.join(files).display()))?;
    if !path.starts_with(&base) || path == base {
        bail!(
            "files: {} resolves outside its plugin folder",
            plugin_path.join(files).display()
        );
    }
    Ok(path)
}

/// Grants `folder` to an instance: its only preopen, read-only, at [`GUEST_PATH`]. File calls run on the
/// calling thread (a plugin reads its files in its factory, on the host's blocking thread).
pub(crate) fn preopen(builder: &mut WasiCtxBuilder, folder: &Path) -> anyhow::Result<()> {
    builder.allow_blocking_current_thread(true);
    builder
        .preopened_dir(folder, GUEST_PATH, FsPerms::ReadOnly)
        .map_err(|e| anyhow::anyhow!("opening {} for the plugin: {e:#}", folder.display()))?;
    Ok(())
}

/// Runs `call`, a call into the guest. For a plugin holding a folder (`files`), wasmtime's synchronous
/// WASI runs each file operation on tokio (`block_on`), which panics on a thread that drives async
/// tasks (a factory run while a job is validated, say): on a worker of a multi-thread runtime the call
/// runs in `block_in_place`. Other plugins make no such calls and are called as they are.
pub(crate) fn guest_call<R>(files: bool, call: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if files
        && Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
    {
        tokio::task::block_in_place(call)
    } else {
        call()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn plugin_folder() -> (tempfile::TempDir, PathBuf, Dir) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("demo");
        std::fs::create_dir(&path).unwrap();
        let dir = Dir::open_ambient_dir(&path, ambient_authority()).unwrap();
        (tmp, path, dir)
    }

    #[test]
    fn resolves_a_real_folder_inside_the_plugin_folder() {
        let (_tmp, path, dir) = plugin_folder();
        std::fs::create_dir(path.join("descriptors")).unwrap();
        let got = resolve(&dir, &path, "descriptors").unwrap();
        assert_eq!(
            got,
            std::fs::canonicalize(path.join("descriptors")).unwrap()
        );
    }

    #[test]
    fn refuses_missing_folders_names_and_symlinks() {
        let (tmp, path, dir) = plugin_folder();
        let e = resolve(&dir, &path, "descriptors").unwrap_err();
        assert!(format!("{e:#}").contains("has none"), "{e:#}");
        for bad in ["..", "../x", "/etc", "a/b", ""] {
            let e = resolve(&dir, &path, bad).unwrap_err();
            assert!(
                format!("{e:#}").contains("plain folder name"),
                "{bad}: {e:#}"
            );
        }
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, path.join("link")).unwrap();
        let e = resolve(&dir, &path, "link").unwrap_err();
        assert!(format!("{e:#}").contains("is a symlink"), "{e:#}");
        std::fs::write(path.join("file"), b"x").unwrap();
        let e = resolve(&dir, &path, "file").unwrap_err();
        assert!(format!("{e:#}").contains("is not a folder"), "{e:#}");
    }
}
