//! Where things live in the workspace.

use std::path::PathBuf;

/// The workspace root (the folder whose `Cargo.toml` has a `[workspace]` table).
///
/// Found at run time — from `CARGO_MANIFEST_DIR` (set by `cargo run`/`cargo test`) or else the current
/// directory — never from a path baked in at compile time: build artifacts can be shared between checkouts
/// (a cached build directory), and a baked-in path would point at another checkout.
pub fn workspace_root() -> PathBuf {
    let starts = [
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        std::env::current_dir().ok(),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    for start in starts.into_iter().flatten() {
        if let Some(root) = start.ancestors().find(|d| is_workspace_root(d)) {
            return root.to_path_buf();
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn is_workspace_root(dir: &std::path::Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml"))
        .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
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
