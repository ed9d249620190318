//! Where things live in the workspace.

use std::path::PathBuf;

/// The workspace root (the folder holding the top-level `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Cargo's target directory (honours `CARGO_TARGET_DIR`).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                workspace_root().join(dir)
            }
        }
        _ => workspace_root().join("target"),
    }
}

/// Everything the local broker writes: classpath cache, per-profile config, data and logs.
pub fn pulsar_dir() -> PathBuf {
    target_dir().join("pulsar")
}

/// The Python virtual environment used by the interop tests.
pub fn venv_dir() -> PathBuf {
    workspace_root().join(".venv")
}
