//! The routing vectors committed in `tests/golden/routing/vectors.json` (computed by
//! `tests/golden/routing/RoutingVectors.java` with pulsar-client 4.0.7 and Guava): 10 000 keys and, for
//! every partition count 1..=16, the partition of each key in three columns: `key_hash` (the Flink
//! connector's router), `java_default` (the Java client's default routing, `JavaStringHash`) and
//! `java_murmur3` (the same with `Murmur3_32Hash`).

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Partition counts the vectors cover.
pub const PARTITION_COUNTS: std::ops::RangeInclusive<u32> = 1..=16;

pub struct Vectors {
    /// The keys as the Java program had them: strings, here their UTF-8 bytes.
    pub keys: Vec<Vec<u8>>,
    partitions: serde_json::Value,
}

/// Where the vectors file is (from this crate's manifest directory).
pub fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/routing/vectors.json")
}

impl Vectors {
    /// Reads and checks the vectors file; panics with the path on any problem (test support).
    pub fn load() -> Vectors {
        let path = path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        let keys: Vec<Vec<u8>> = v["keys_base64"]
            .as_array()
            .expect("keys_base64")
            .iter()
            .map(|k| {
                STANDARD
                    .decode(k.as_str().expect("a base64 string"))
                    .expect("valid base64")
            })
            .collect();
        assert_eq!(keys.len(), 10_000, "the vectors hold 10 000 keys");
        Vectors {
            keys,
            partitions: v["partitions"].take(),
        }
    }

    /// Column `name` for `n` partitions: one partition per key. Values are kept signed, as Java
    /// printed them.
    pub fn column(&self, name: &str, n: u32) -> Vec<i64> {
        let col = self.partitions[n.to_string()][name]
            .as_array()
            .unwrap_or_else(|| panic!("no column {name} for {n} partitions"));
        assert_eq!(col.len(), self.keys.len(), "{name}/{n}: one value per key");
        col.iter()
            .map(|x| x.as_i64().expect("an integer"))
            .collect()
    }
}

impl Vectors {
    /// Checks `route` (every key of the vectors at once, and a partition count) against column
    /// `name` for every partition count the vectors cover; panics naming the key and the count at the
    /// first disagreement. Returns how many partitions agreed (10 000 keys × 16 counts).
    pub fn check(
        &self,
        name: &str,
        mut route: impl FnMut(&[Option<&[u8]>], u32) -> Vec<u32>,
    ) -> usize {
        let keys: Vec<Option<&[u8]>> = self.keys.iter().map(|k| Some(k.as_slice())).collect();
        let mut agree = 0;
        for n in PARTITION_COUNTS {
            let got = route(&keys, n);
            let want = self.column(name, n);
            assert_eq!(got.len(), want.len(), "{name}, {n} partitions: one per key");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(
                    i64::from(*g),
                    *w,
                    "{name}: key {i} ({:?}), {n} partitions",
                    String::from_utf8_lossy(&self.keys[i])
                );
                agree += 1;
            }
        }
        agree
    }
}

/// Checks router `R`, built without options, against column `name` for every key and partition count
/// (one batch of all keys per count); returns how many partitions agreed.
#[cfg(feature = "guest")]
pub fn check_router<R: crate::guest::Route>(name: &str) -> usize {
    use pulsar_connect_plugin::testing::router::key_batch;
    let router = R::new(&[]).unwrap_or_else(|e| panic!("the router without options: {e}"));
    Vectors::load().check(name, |keys, n| router.route(&key_batch(keys), None, n))
}

/// Options as the host passes them, from `(name, value)` pairs (for the routers' tests).
pub fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
