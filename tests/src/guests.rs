//! The test guests (`tests/guests/*`): built from source once per test run for wasm32-wasip2, into
//! their own target directory, and installed into plugin directories the way `cargo xtask
//! build-plugins` does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// The repository root (found at run time, see `xtask::paths::workspace_root`).
pub fn repo_root() -> PathBuf {
    xtask::paths::workspace_root()
}

/// Builds the guest workspace once per process and returns the directory holding the `.wasm` files.
pub fn guest_wasm_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = repo_root();
        let target = root.join("target/guests");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--quiet",
                "--target",
                "wasm32-wasip2",
                "--release",
                "--manifest-path",
            ])
            .arg(root.join("tests/guests/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target)
            // The host build dir is locked by the `cargo test` running us: build elsewhere.
            .env_remove("CARGO_BUILD_BUILD_DIR")
            .status()
            .expect("running cargo for the test guests");
        assert!(
            status.success(),
            "building the test guests failed: {status}"
        );
        target.join("wasm32-wasip2/release")
    })
}

/// The wasm of test guest `guest` (crate name).
pub fn guest_wasm(guest: &str) -> Vec<u8> {
    let path = guest_wasm_dir().join(format!("{}.wasm", guest.replace('-', "_")));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The manifest template of test guest `guest`.
pub fn guest_template(guest: &str) -> String {
    let path = repo_root()
        .join("tests/guests")
        .join(guest)
        .join("plugin.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Installs `wasm` as plugin `<dir>/<name>/` with the manifest `template` (sha256 filled in) and
/// returns the plugin folder.
pub fn install_with(dir: &Path, name: &str, template: &str, wasm: &[u8]) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).expect("creating the plugin folder");
    let sha = hex::encode(Sha256::digest(wasm));
    std::fs::write(
        folder.join("plugin.toml"),
        format!("sha256 = \"{sha}\"\n{template}"),
    )
    .expect("writing plugin.toml");
    std::fs::write(folder.join(format!("{name}.wasm")), wasm).expect("writing the wasm");
    folder
}

/// Installs test guest `guest` into `dir` under its own name.
pub fn install(dir: &Path, guest: &str) -> PathBuf {
    install_with(dir, guest, &guest_template(guest), &guest_wasm(guest))
}

/// `wasm` with a custom section appended: the same component, another sha256 (a rebuild).
fn rebuilt(wasm: &[u8], build: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"pulsar-connect-test-build";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(build.as_bytes());
    let mut out = wasm.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// Build `n` of the hostile guest (hot reload's versions): its wasm with another sha256, and its manifest
/// as version `n.0.0` whose `tag` defaults to `vn` and whose `refuse` and `panic-every-batch` default as
/// given.
pub struct HostileBuild {
    pub wasm: Vec<u8>,
    pub manifest: String,
    pub sha256: String,
}

pub fn hostile_build(n: u32, refuse: bool, panic: bool) -> HostileBuild {
    let wasm = rebuilt(&guest_wasm("hostile"), &n.to_string());
    HostileBuild {
        sha256: hex::encode(Sha256::digest(&wasm)),
        manifest: hostile_manifest(&format!("{n}.0.0"), &format!("v{n}"), refuse, panic),
        wasm,
    }
}

fn hostile_manifest(version: &str, tag: &str, refuse: bool, panic: bool) -> String {
    let mut text = guest_template("hostile")
        .replace("version = \"0.1.0\"", &format!("version = \"{version}\""))
        .replace("default = \"none\"", &format!("default = \"{tag}\""));
    let set = |text: &mut String, option: &str, on: bool| {
        let from = format!("name = \"{option}\"\ntype = \"bool\"\ndefault = false");
        assert!(text.contains(&from), "the hostile manifest has {option}");
        *text = text.replace(
            &from,
            &format!("name = \"{option}\"\ntype = \"bool\"\ndefault = {on}"),
        );
    };
    set(&mut text, "refuse", refuse);
    set(&mut text, "panic-every-batch", panic);
    text
}
