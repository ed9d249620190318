//! The Pulsar client's key routing agrees with the Java client's on the routing vectors that
//! `tests/golden/routing/generate.sh` computes with pulsar-client 4.0.7 (10 000 keys, 1..16 partitions).
//! (The `key_hash` column, the Flink connector's router, is checked by the key-hash router plugin's tests.)

use anyhow::{Context, Result};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use magnetar::{java_string_hash, murmur3_32_hash};
use serde_json::Value;

fn vectors() -> Result<(Vec<String>, Value)> {
    let path = xtask::paths::workspace_root().join("tests/golden/routing/vectors.json");
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?,
    )?;
    let keys = v["keys_base64"]
        .as_array()
        .context("keys")?
        .iter()
        .map(|k| String::from_utf8(STANDARD.decode(k.as_str().unwrap()).unwrap()).unwrap())
        .collect();
    Ok((keys, v["partitions"].clone()))
}

fn check(name: &str, hash: impl Fn(&str) -> u32) -> Result<()> {
    let (keys, partitions) = vectors()?;
    assert_eq!(keys.len(), 10_000);
    for n in 1..=16u32 {
        let want = partitions[n.to_string()][name]
            .as_array()
            .context("column")?;
        for (key, want) in keys.iter().zip(want) {
            let got = hash(key) % n;
            assert_eq!(
                u64::from(got),
                want.as_u64().unwrap(),
                "{name}: key {key:?}, {n} partitions"
            );
        }
    }
    Ok(())
}

#[test]
fn default_keyed_routing_matches_the_java_clients_java_string_hash() -> Result<()> {
    check("java_default", java_string_hash)
}

#[test]
fn murmur3_keyed_routing_matches_the_java_clients_murmur3_32_hash() -> Result<()> {
    check("java_murmur3", |k| murmur3_32_hash(k.as_bytes()))
}
