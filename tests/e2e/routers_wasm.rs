//! The built-in routers as the host runs them: the components `cargo xtask build-plugins` installed in
//! `plugins/` (built from `guest-routers/`), loaded, verified and called through the real wasm runtime,
//! agree with the routing vectors of `tests/golden/routing/` (10 000 keys, 1..16 partitions):
//! `key-hash` with the `key_hash` column (the Flink connector's router), `round-robin` with
//! `java_default` (the Java client's default routing), `by-property` with `key_hash` of the property.
//!
//! Needs `cargo xtask build-plugins` first (`cargo xtask test` does it).

use std::path::PathBuf;

use anyhow::{Context, Result};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use pulsar_connect::plugins::{
    HostConfig, KeyBatchBuilder, MessageBatchBuilder, MessageRef, Phase, Plugin, PluginDir,
    PluginHost, Router, model,
};
use serde_json::Value;

/// A key whose murmur3 (seed 0) is `Integer.MIN_VALUE`: Java's `Math.abs` leaves it negative.
const MIN_VALUE_KEY: &[u8] = &[0x55, 0x07, 0x6f, 0x83];

struct Vectors {
    keys: Vec<String>,
    partitions: Value,
}

impl Vectors {
    fn load() -> Result<Vectors> {
        let path = xtask::paths::workspace_root().join("tests/golden/routing/vectors.json");
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?,
        )?;
        let keys = v["keys_base64"]
            .as_array()
            .context("keys_base64")?
            .iter()
            .map(|k| {
                let bytes = STANDARD.decode(k.as_str().context("a base64 string")?)?;
                Ok(String::from_utf8(bytes)?)
            })
            .collect::<Result<Vec<String>>>()?;
        assert_eq!(keys.len(), 10_000);
        Ok(Vectors {
            keys,
            partitions: v["partitions"].clone(),
        })
    }

    fn column(&self, name: &str, n: u32) -> Result<Vec<u64>> {
        self.partitions[n.to_string()][name]
            .as_array()
            .with_context(|| format!("column {name} for {n} partitions"))?
            .iter()
            .map(|p| p.as_u64().context("a partition"))
            .collect()
    }
}

/// The installed plugin directory, checked to hold the current build of router `name`.
fn plugins(name: &str) -> Result<(PluginHost, Plugin)> {
    let root = xtask::paths::workspace_root();
    let dir: PathBuf = root.join("plugins");
    let installed = std::fs::read_to_string(dir.join(name).join("plugin.toml")).unwrap_or_else(|e| {
        panic!(
            "router `{name}` is not installed in {} ({e}): run `cargo xtask build-plugins` (or `cargo xtask test`)",
            dir.display()
        )
    });
    let template =
        std::fs::read_to_string(root.join("guest-routers").join(name).join("plugin.toml"))
            .with_context(|| format!("reading guest-routers/{name}/plugin.toml"))?;
    assert!(
        installed.ends_with(&template),
        "plugins/{name} is stale (its manifest differs from guest-routers/{name}/plugin.toml): run `cargo xtask build-plugins`"
    );
    let host = PluginHost::new(HostConfig::default())?;
    let plugin = host.load(&PluginDir::open(&dir)?, name)?;
    Ok((host, plugin))
}

fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn key_batch(keys: &[Option<&[u8]>]) -> model::KeyBatch {
    let mut b = KeyBatchBuilder::default();
    for k in keys {
        b.push(*k);
    }
    b.finish()
}

/// Routes all the vector keys in one batch per partition count and compares with `column`.
fn check_all_vectors(router: &mut Router, column: &str) -> Result<usize> {
    let v = Vectors::load()?;
    let keys: Vec<Option<&[u8]>> = v.keys.iter().map(|k| Some(k.as_bytes())).collect();
    let batch = key_batch(&keys);
    let mut agree = 0;
    for n in 1..=16u32 {
        let got = router.route(&batch, None, n)?;
        let want = v.column(column, n)?;
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                u64::from(*g),
                *w,
                "{column}: key {:?}, {n} partitions",
                v.keys[i]
            );
            agree += 1;
        }
    }
    Ok(agree)
}

#[test]
fn key_hash_plugin_agrees_with_every_key_hash_vector() -> Result<()> {
    let (_host, plugin) = plugins("key-hash")?;
    let mut router = Router::new(&plugin, &[])?;
    assert!(!router.wants_properties());
    assert_eq!(check_all_vectors(&mut router, "key_hash")?, 160_000);
    Ok(())
}

#[test]
fn key_hash_plugin_routes_the_min_value_key_and_unkeyed_messages() -> Result<()> {
    let (_host, plugin) = plugins("key-hash")?;
    let mut router = Router::new(&plugin, &[])?;
    // Integer.MIN_VALUE: 2^31 mod n (Java: -(2^31 mod n), valid only for powers of two, where both are 0).
    for n in 1..=16u32 {
        let got = router.route(&key_batch(&[Some(MIN_VALUE_KEY)]), None, n)?;
        assert_eq!(
            got,
            [((1u64 << 31) % u64::from(n)) as u32],
            "{n} partitions"
        );
    }
    // Messages without a key go round-robin, one partition after the other; "hello" is 1 of 6.
    let got = router.route(&key_batch(&[None, Some(b"hello"), None, None]), None, 6)?;
    assert_eq!(got, [0, 1, 1, 2]);
    assert_eq!(router.route(&key_batch(&[None]), None, 6)?, [3]);

    let mut per_batch = Router::new(&plugin, &opts(&[("unkeyed", "per-batch")]))?;
    assert_eq!(per_batch.route(&key_batch(&[None, None]), None, 6)?, [0, 0]);
    assert_eq!(per_batch.route(&key_batch(&[None, None]), None, 6)?, [1, 1]);

    let err = Router::new(&plugin, &opts(&[("unkeyed", "random")]))
        .err()
        .context("an unknown `unkeyed` value is refused")?;
    assert_eq!(err.phase, Phase::Configure);
    assert!(err.to_string().contains("per-message"), "{err}");
    Ok(())
}

#[test]
fn round_robin_plugin_agrees_with_every_java_default_vector() -> Result<()> {
    let (_host, plugin) = plugins("round-robin")?;
    let mut router = Router::new(&plugin, &[])?;
    assert!(!router.wants_properties());
    assert_eq!(check_all_vectors(&mut router, "java_default")?, 160_000);
    Ok(())
}

#[test]
fn round_robin_plugin_spreads_unkeyed_messages_per_batch() -> Result<()> {
    let (_host, plugin) = plugins("round-robin")?;
    let mut router = Router::new(&plugin, &[])?;
    // "abc".hashCode() == 96354.
    let abc = (96_354 % 4) as u32;
    assert_eq!(
        router.route(&key_batch(&[None, Some(b"abc"), None]), None, 4)?,
        [0, abc, 0]
    );
    assert_eq!(router.route(&key_batch(&[None, None]), None, 4)?, [1, 1]);
    // A batch of keyed messages only leaves the rotation where it is.
    assert_eq!(router.route(&key_batch(&[Some(b"abc")]), None, 4)?, [abc]);
    assert_eq!(router.route(&key_batch(&[None]), None, 4)?, [2]);

    let mut per_message = Router::new(
        &plugin,
        &opts(&[("unkeyed", "per-message"), ("start-partition", "2")]),
    )?;
    assert_eq!(
        per_message.route(&key_batch(&[None, None, None]), None, 4)?,
        [2, 3, 0]
    );

    // key-as = base64: the Java hash of the key's base64 text (a Java `keyBytes` key).
    let mut b64 = Router::new(&plugin, &opts(&[("key-as", "base64")]))?;
    let key = [0xffu8, 0x00, 0x10];
    let text = STANDARD.encode(key);
    assert_eq!(
        b64.route(&key_batch(&[Some(&key)]), None, 16)?,
        [magnetar::java_string_hash(&text) % 16]
    );
    Ok(())
}

#[test]
fn by_property_plugin_routes_by_the_property_then_the_key() -> Result<()> {
    let (_host, plugin) = plugins("by-property")?;
    assert!(
        Router::new(&plugin, &[]).is_err(),
        "`property` is a required option"
    );
    let mut router = Router::new(&plugin, &opts(&[("property", "tenant")]))?;
    assert!(router.wants_properties());

    // The property's value routes like a key-hash key: every vector key as the property value, under
    // a message key that would route elsewhere.
    let v = Vectors::load()?;
    let props: Vec<[(&str, &str); 2]> = v
        .keys
        .iter()
        .map(|k| [("other", "x"), ("tenant", k.as_str())])
        .collect();
    let mut mb = MessageBatchBuilder::new();
    for p in &props {
        mb.push(MessageRef {
            payload: b"",
            key: Some(b"not-the-key"),
            properties: p,
            event_time: None,
        });
    }
    let batch = mb.finish(true);
    for n in [1u32, 5, 6, 16] {
        let got = router.route(&batch.keys, batch.properties.as_ref(), n)?;
        let want = v.column("key_hash", n)?;
        let agree = got
            .iter()
            .zip(&want)
            .filter(|(g, w)| u64::from(**g) == **w)
            .count();
        assert_eq!(agree, v.keys.len(), "{n} partitions");
    }

    // No property: the key's key-hash ("user-42" is 2 of 6); neither: round-robin.
    let mut mb = MessageBatchBuilder::new();
    mb.push(MessageRef {
        payload: b"",
        key: Some(b"user-42"),
        properties: &[("other", "hello")],
        event_time: None,
    });
    mb.push(MessageRef {
        payload: b"",
        key: None,
        properties: &[("tenant", "hello")],
        event_time: None,
    });
    mb.push(MessageRef::default());
    mb.push(MessageRef::default());
    let batch = mb.finish(true);
    assert_eq!(
        router.route(&batch.keys, batch.properties.as_ref(), 6)?,
        [2, 1, 0, 1]
    );
    Ok(())
}
