//! `pulsar-connect plugins new --kind format|router NAME [--lang rust|python|js]`: a plugin project in a new
//! folder, from templates compiled into the binary (`cli/templates/` for Rust; `sdk/python/template/` and
//! `sdk/js/template/` with their SDK and the world's WIT for Python and JavaScript).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::plugins::Kind;
use crate::plugins::manifest::is_plain_name;

/// The language of a new plugin project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// Where a Rust project gets the SDK from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// A checkout's `wit/` folder.
    Path(PathBuf),
    /// A git repository holding this workspace (cargo finds the `pulsar-connect-plugin` package in it).
    Git { url: String, rev: Option<String> },
}

/// The SDK folder of the source tree this binary was built from, if it is still there.
pub fn built_from_sdk() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
    dir.join("Cargo.toml")
        .is_file()
        .then(|| dir.canonicalize().ok())
        .flatten()
}

type Files = &'static [(&'static str, &'static str)];

const RUST_FORMAT: Files = &[
    (
        "Cargo.toml",
        include_str!("templates/rust-format/Cargo.toml"),
    ),
    (
        "plugin.toml",
        include_str!("templates/rust-format/plugin.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("templates/rust-format/src/lib.rs"),
    ),
    (
        "tests/vectors.jsonl",
        include_str!("templates/rust-format/tests/vectors.jsonl"),
    ),
    ("README.md", include_str!("templates/rust-format/README.md")),
    (
        ".gitignore",
        include_str!("templates/rust-format/gitignore"),
    ),
];

const RUST_ROUTER: Files = &[
    (
        "Cargo.toml",
        include_str!("templates/rust-router/Cargo.toml"),
    ),
    (
        "plugin.toml",
        include_str!("templates/rust-router/plugin.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("templates/rust-router/src/lib.rs"),
    ),
    (
        "tests/vectors.jsonl",
        include_str!("templates/rust-router/tests/vectors.jsonl"),
    ),
    ("README.md", include_str!("templates/rust-router/README.md")),
    (
        ".gitignore",
        include_str!("templates/rust-router/gitignore"),
    ),
];

macro_rules! repo_file {
    ($rel:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $rel))
    };
}

const WIT_FORMAT: Files = &[
    ("wit/format.wit", repo_file!("wit/v0.2.0/format.wit")),
    ("wit/types.wit", repo_file!("wit/v0.2.0/types.wit")),
];

const WIT_ROUTER: Files = &[
    ("wit/router.wit", repo_file!("wit/v0.1.0/router.wit")),
    ("wit/format.wit", repo_file!("wit/v0.1.0/format.wit")),
    ("wit/types.wit", repo_file!("wit/v0.1.0/types.wit")),
];

const PYTHON_SDK: Files = &[
    (
        "pulsar_connect_plugin/__init__.py",
        repo_file!("sdk/python/pulsar_connect_plugin/__init__.py"),
    ),
    (
        "pulsar_connect_plugin/columns.py",
        repo_file!("sdk/python/pulsar_connect_plugin/columns.py"),
    ),
    (
        "pulsar_connect_plugin/format.py",
        repo_file!("sdk/python/pulsar_connect_plugin/format.py"),
    ),
    (
        "pulsar_connect_plugin/router.py",
        repo_file!("sdk/python/pulsar_connect_plugin/router.py"),
    ),
];

const PYTHON_FORMAT: Files = &[
    ("app.py", repo_file!("sdk/python/template/format/app.py")),
    (
        "test_app.py",
        repo_file!("sdk/python/template/format/test_app.py"),
    ),
    (
        "plugin.toml",
        repo_file!("sdk/python/template/format/plugin.toml"),
    ),
    (
        "README.md",
        repo_file!("sdk/python/template/format/README.md"),
    ),
];

const PYTHON_ROUTER: Files = &[
    ("app.py", repo_file!("sdk/python/template/router/app.py")),
    (
        "test_app.py",
        repo_file!("sdk/python/template/router/test_app.py"),
    ),
    (
        "plugin.toml",
        repo_file!("sdk/python/template/router/plugin.toml"),
    ),
    (
        "README.md",
        repo_file!("sdk/python/template/router/README.md"),
    ),
];

const JS_SDK: Files = &[(
    "pulsar-connect-plugin.js",
    repo_file!("sdk/js/pulsar-connect-plugin.js"),
)];

const JS_FORMAT: Files = &[
    ("app.js", repo_file!("sdk/js/template/format/app.js")),
    (
        "app.test.mjs",
        repo_file!("sdk/js/template/format/app.test.mjs"),
    ),
    (
        "package.json",
        repo_file!("sdk/js/template/format/package.json"),
    ),
    (
        "plugin.toml",
        repo_file!("sdk/js/template/format/plugin.toml"),
    ),
    ("README.md", repo_file!("sdk/js/template/format/README.md")),
];

const JS_ROUTER: Files = &[
    ("app.js", repo_file!("sdk/js/template/router/app.js")),
    (
        "app.test.mjs",
        repo_file!("sdk/js/template/router/app.test.mjs"),
    ),
    (
        "package.json",
        repo_file!("sdk/js/template/router/package.json"),
    ),
    (
        "plugin.toml",
        repo_file!("sdk/js/template/router/plugin.toml"),
    ),
    ("README.md", repo_file!("sdk/js/template/router/README.md")),
];

/// The files of a new project (paths relative to its folder, `{{name}}`-style placeholders unreplaced).
fn templates(kind: Kind, lang: Lang) -> Vec<(&'static str, &'static str)> {
    let wit = match kind {
        Kind::Format => WIT_FORMAT,
        Kind::Router => WIT_ROUTER,
    };
    let parts: &[Files] = match (lang, kind) {
        (Lang::Rust, Kind::Format) => &[RUST_FORMAT],
        (Lang::Rust, Kind::Router) => &[RUST_ROUTER],
        (Lang::Python, Kind::Format) => &[PYTHON_FORMAT, PYTHON_SDK, wit],
        (Lang::Python, Kind::Router) => &[PYTHON_ROUTER, PYTHON_SDK, wit],
        (Lang::Js, Kind::Format) => &[JS_FORMAT, JS_SDK, wit],
        (Lang::Js, Kind::Router) => &[JS_ROUTER, JS_SDK, wit],
    };
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// The SDK dependency of a Rust project's `Cargo.toml`, as an inline table.
fn sdk_dependency(sdk: &Sdk, kind: Kind) -> String {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let source = match sdk {
        Sdk::Path(p) => format!("path = {}", quote(&p.to_string_lossy())),
        Sdk::Git { url, rev: None } => format!("git = {}", quote(url)),
        Sdk::Git { url, rev: Some(r) } => format!("git = {}, rev = {}", quote(url), quote(r)),
    };
    format!("{{ {source}, features = [\"{}\"] }}", kind.world_name())
}

/// Writes a new plugin project `name` of `kind` in `lang` into `parent/name`; returns its folder.
pub fn new_project(
    parent: &Path,
    name: &str,
    kind: Kind,
    lang: Lang,
    sdk: Option<Sdk>,
) -> anyhow::Result<PathBuf> {
    if !is_plain_name(name) || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        bail!(
            "`{name}` is not a plugin name: lowercase letters, digits, `-` or `_`, starting with a letter (it names the plugin folder, the wasm file and the format or router in SQL)"
        );
    }
    let folder = parent.join(name);
    if folder.exists() {
        bail!(
            "{} already exists: pick another name or folder",
            folder.display()
        );
    }
    let sdk_dep = match (lang, sdk) {
        (Lang::Rust, Some(sdk)) => {
            if let Sdk::Path(p) = &sdk
                && !p.join("Cargo.toml").is_file()
            {
                bail!(
                    "--sdk-path {}: no Cargo.toml there (give the `wit/` folder of a pulsar-connect checkout)",
                    p.display()
                );
            }
            sdk_dependency(&sdk, kind)
        }
        (Lang::Rust, None) => match built_from_sdk() {
            Some(p) => sdk_dependency(&Sdk::Path(p), kind),
            None => bail!(
                "the SDK this binary was built from is gone: pass --sdk-path <checkout>/wit or --sdk-git <repository URL>"
            ),
        },
        (_, Some(_)) => bail!(
            "--sdk-path and --sdk-git are for Rust projects (Python and JavaScript projects carry their SDK)"
        ),
        (_, None) => String::new(),
    };
    let crate_name = name.replace('-', "_");
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    // Written into a hidden sibling first and renamed: a failed write leaves no half project behind.
    let staging = parent.join(format!(".{name}.new-{}", std::process::id()));
    let write = || -> anyhow::Result<()> {
        for (rel, text) in templates(kind, lang) {
            let path = staging.join(rel);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let text = text
                .replace("{{name}}", name)
                .replace("{{crate}}", &crate_name)
                .replace("{{sdk}}", &sdk_dep);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    };
    if let Err(e) = write().and_then(|()| {
        std::fs::rename(&staging, &folder)
            .with_context(|| format!("moving the project to {}", folder.display()))
    }) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    Ok(folder)
}

/// What to do next, printed after the project is written.
pub fn next_steps(folder: &Path, name: &str, lang: Lang) -> String {
    let crate_name = name.replace('-', "_");
    let build = match lang {
        Lang::Rust => format!(
            "  cargo test\n  cargo build --release --target wasm32-wasip2\n  pulsar-connect plugins install target/wasm32-wasip2/release/{crate_name}.wasm --manifest plugin.toml --plugin-dir ./plugins\n  pulsar-connect plugins test ./plugins/{name} --vectors tests/vectors.jsonl"
        ),
        Lang::Python | Lang::Js => format!(
            "  (build it as README.md says, then)\n  pulsar-connect plugins install {name}.wasm --manifest plugin.toml --plugin-dir ./plugins\n  pulsar-connect plugins check ./plugins"
        ),
    };
    format!(
        "created {} ({} plugin `{name}`); next, in that folder:\n{build}\n",
        folder.display(),
        match lang {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the Python and JavaScript templates and SDKs is embedded (a file added there and not
    /// here fails this test).
    #[test]
    fn embedded_lists_match_the_sdk_folders() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let files = |dir: &str| -> Vec<String> {
            let mut out: Vec<String> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            out.sort();
            out
        };
        let names = |f: Files, prefix: &str| -> Vec<String> {
            let mut out: Vec<String> = f
                .iter()
                .filter_map(|(p, _)| p.strip_prefix(prefix).map(str::to_owned))
                .filter(|p| !p.contains('/'))
                .collect();
            out.sort();
            out
        };
        assert_eq!(
            names(PYTHON_FORMAT, ""),
            files("sdk/python/template/format")
        );
        assert_eq!(
            names(PYTHON_ROUTER, ""),
            files("sdk/python/template/router")
        );
        assert_eq!(names(JS_FORMAT, ""), files("sdk/js/template/format"));
        assert_eq!(names(JS_ROUTER, ""), files("sdk/js/template/router"));
        assert_eq!(
            names(PYTHON_SDK, "pulsar_connect_plugin/"),
            files("sdk/python/pulsar_connect_plugin")
        );
        assert_eq!(names(WIT_FORMAT, "wit/"), files("wit/v0.2.0"));
        assert_eq!(names(WIT_ROUTER, "wit/"), files("wit/v0.1.0"));
    }

    #[test]
    fn a_project_is_written_once() {
        let tmp = tempfile::tempdir().unwrap();
        let sdk = Sdk::Git {
            url: "https://example.invalid/pulsar-connect".into(),
            rev: Some("abc".into()),
        };
        let dir = new_project(
            tmp.path(),
            "my-fmt",
            Kind::Format,
            Lang::Rust,
            Some(sdk.clone()),
        )
        .unwrap();
        let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains(r#"pulsar-connect-plugin = { git = "https://example.invalid/pulsar-connect", rev = "abc", features = ["format"] }"#), "{cargo}");
        assert!(
            std::fs::read_to_string(dir.join("README.md"))
                .unwrap()
                .contains("my_fmt.wasm")
        );
        assert!(
            !std::fs::read_to_string(dir.join("src/lib.rs"))
                .unwrap()
                .contains("{{")
        );
        let again =
            new_project(tmp.path(), "my-fmt", Kind::Format, Lang::Rust, Some(sdk)).unwrap_err();
        assert!(again.to_string().contains("already exists"));
        assert!(new_project(tmp.path(), "My Fmt", Kind::Format, Lang::Rust, None).is_err());
        let py = new_project(tmp.path(), "py-router", Kind::Router, Lang::Python, None).unwrap();
        assert!(py.join("pulsar_connect_plugin/router.py").is_file());
        assert!(py.join("wit/router.wit").is_file());
    }
}
