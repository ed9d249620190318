//! The `protobuf` format as built (`plugins/protobuf` from `cargo xtask build-plugins`), through the real
//! wasm runtime and Arrow, against the golden vectors protobuf's Python package wrote
//! (tests/golden/protobuf): Python's bytes → wasm decoder → Arrow → wasm encoder → the bytes Python
//! writes for the decoded row; broken payloads fail or are skipped. And the sandbox: the plugin reads its
//! descriptor sets from its own folder (its only preopen, read-only, ADR 0022) and nothing else, not
//! even through a symlink placed in that folder; a manifest granting a folder that is not there fails
//! the load, naming it.

use std::path::PathBuf;

use pulsar_connect::plugins::{
    Decoded, Decoder, Encoder, HostConfig, MessageBatchBuilder, MessageRef, Phase, Plugin,
    PluginDir, PluginHost,
};
use pulsar_connect_tests::guests::repo_root;
use serde_json::Value as Json;

use super::golden_wasm::{bytes_of, columns, options, schema_of};

fn vectors_dir() -> PathBuf {
    repo_root().join("tests/golden/protobuf/vectors")
}

fn vectors(name: &str) -> Json {
    let path = vectors_dir().join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A plugin directory of its own holding the built protobuf plugin and, in its descriptors folder,
/// the golden descriptor set.
struct Installed {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    host: PluginHost,
}

impl Installed {
    fn new(with_folder: bool) -> Installed {
        let built = std::env::var_os("PULSAR_CONNECT_PLUGIN_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join("plugins"))
            .join("protobuf");
        assert!(
            built.join("protobuf.wasm").is_file(),
            "the protobuf plugin is not built in {}: run `cargo xtask build-plugins` first",
            built.display()
        );
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("plugins");
        let folder = dir.join("protobuf");
        std::fs::create_dir_all(&folder).unwrap();
        for file in ["plugin.toml", "protobuf.wasm"] {
            std::fs::copy(built.join(file), folder.join(file)).unwrap();
        }
        if with_folder {
            std::fs::create_dir(folder.join("descriptors")).unwrap();
            std::fs::copy(
                vectors_dir().join("golden.desc"),
                folder.join("descriptors/golden.desc"),
            )
            .unwrap();
        }
        Installed {
            _tmp: tmp,
            dir,
            host: PluginHost::new(HostConfig::default()).unwrap(),
        }
    }

    fn load(&self) -> pulsar_connect::plugins::error::Result<Plugin> {
        self.host
            .load(&PluginDir::open(&self.dir).unwrap(), "protobuf")
    }

    fn descriptors(&self) -> PathBuf {
        self.dir.join("protobuf/descriptors")
    }
}

fn decode_one(decoder: &mut Decoder, payload: &[u8]) -> Decoded {
    let mut messages = MessageBatchBuilder::new();
    messages.push(MessageRef {
        payload,
        ..Default::default()
    });
    let decoded = decoder
        .decode(messages.finish(false))
        .expect("decode-batch");
    assert_eq!(decoded.batch.num_rows() + decoded.errors.len(), 1);
    decoded
}

#[test]
fn python_bytes_decode_and_encode_back_through_wasm() {
    let installed = Installed::new(true);
    let plugin = installed.load().expect("loading protobuf");
    let mut checked = 0;
    let mut names: Vec<String> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    for name in names {
        let file = vectors(&name);
        // The vectors quote ROW field names (`a`), as Flink prints types; the parser here takes them bare.
        let cols: Vec<(String, String)> = columns(&file)
            .into_iter()
            .map(|(n, t)| (n, t.replace('`', "")))
            .collect();
        let schema = schema_of(&cols);
        let opts = options(&file);
        let mut decoder = Decoder::new(&plugin, &opts, schema.clone())
            .unwrap_or_else(|e| panic!("{name}: create-decoder: {e:?}"));
        let mut encoder = Encoder::new(&plugin, &opts, schema.clone())
            .unwrap_or_else(|e| panic!("{name}: create-encoder: {e:?}"));
        let items = file
            .get("vectors")
            .or_else(|| file.get("cases"))
            .and_then(Json::as_array)
            .unwrap();
        for v in items {
            let what = format!("{name} [{}{}]", v["name"], v["input"]);
            let python = bytes_of(&v["base64"]).unwrap();
            let decoded = decode_one(&mut decoder, &python);
            let again = v.get("decoded_base64").or_else(|| v.get("row_base64"));
            match (again, v["result"].as_str()) {
                (Some(again), _) => {
                    assert!(decoded.errors.is_empty(), "{what}: {:?}", decoded.errors);
                    let encoded = encoder.encode(&decoded.batch).expect(&what);
                    assert!(encoded.errors.is_empty(), "{what}: {:?}", encoded.errors);
                    assert_eq!(
                        encoded.payload(0),
                        bytes_of(again).unwrap().as_slice(),
                        "{what}: decoded and written again"
                    );
                }
                (None, Some("null")) => {
                    assert!(decoded.errors[0].skip, "{what}: {:?}", decoded.errors);
                }
                (None, _) => {
                    let e = &decoded.errors[0];
                    assert!(!e.skip, "{what}");
                    assert!(
                        e.reason.starts_with(
                            "Failed to deserialize PB object (message `pulsar_connect.golden.AllTypes`)"
                        ),
                        "{what}: {}",
                        e.reason
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 25, "{checked}");
}

fn refusal(plugin: &Plugin, file: &str, message: &str) -> (Option<String>, String) {
    let cols = vec![("f_int32".to_owned(), "INT".to_owned())];
    let opts = vec![
        ("descriptor-file".to_owned(), file.to_owned()),
        ("message-name".to_owned(), message.to_owned()),
    ];
    let Err(e) = Decoder::new(plugin, &opts, schema_of(&cols)) else {
        panic!("{file} / {message}: not refused");
    };
    assert_eq!(e.phase, Phase::Configure);
    (e.option().map(str::to_owned), format!("{e:#}"))
}

#[test]
fn the_plugin_reads_its_own_folder_and_nothing_else() {
    let installed = Installed::new(true);
    // A valid descriptor set outside the folder, reachable only through a symlink inside it.
    let outside = installed.dir.join("outside.desc");
    std::fs::copy(vectors_dir().join("golden.desc"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, installed.descriptors().join("escape.desc")).unwrap();
    std::os::unix::fs::symlink("../plugin.toml", installed.descriptors().join("up.desc")).unwrap();
    let plugin = installed.load().expect("loading protobuf");
    let ok = "pulsar_connect.golden.AllTypes";
    let cols = vec![("f_int32".to_owned(), "INT".to_owned())];
    let opts = vec![
        ("descriptor-file".to_owned(), "golden.desc".to_owned()),
        ("message-name".to_owned(), ok.to_owned()),
    ];
    Decoder::new(&plugin, &opts, schema_of(&cols)).expect("its own descriptor set");
    for file in ["escape.desc", "up.desc", "../outside.desc", "/etc/passwd"] {
        let (option, text) = refusal(&plugin, file, ok);
        assert_eq!(option.as_deref(), Some("descriptor-file"), "{file}: {text}");
        assert!(
            text.contains(&format!("cannot read `{file}`"))
                || text.contains("must be a path relative to the plugin's descriptors folder"),
            "{file}: {text}"
        );
    }
    let (option, text) = refusal(&plugin, "golden.desc", "pulsar_connect.golden.Nope");
    assert_eq!(option.as_deref(), Some("message-name"));
    assert!(
        text.contains(
            "message `pulsar_connect.golden.Nope` is not in descriptor set `golden.desc`"
        ),
        "{text}"
    );
}

#[test]
fn a_granted_folder_that_is_missing_fails_the_load() {
    let installed = Installed::new(false);
    let e = installed.load().expect_err("no descriptors folder");
    assert_eq!(e.phase, Phase::Verify);
    let text = format!("{e:#}");
    assert!(
        text.contains("grants the plugin its folder `descriptors`"),
        "{text}"
    );
    // A symlink in its place is refused too.
    let target = installed.dir.join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, installed.descriptors()).unwrap();
    let text = format!("{:#}", installed.load().expect_err("a symlinked folder"));
    assert!(text.contains("is a symlink"), "{text}");
}
