//! The `{{name}}` router: the partition of a message is the FNV-1a hash of its (salted) key modulo the
//! topic's partitions; messages without a key go round-robin. Change `KeyRouter::route` to your rule.

use std::cell::Cell;

use pulsar_connect_plugin::router_prelude::*;

/// The plugin: its factory makes a configured router.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
struct Plugin;

/// A configured router (one per sink writer; it keeps its state between batches).
pub struct KeyRouter {
    salt: Vec<u8>,
    next_unkeyed: Cell<u32>,
}

impl routing::Guest for Plugin {
    type Router = KeyRouter;

    fn create_router(options: Options) -> Result<routing::Router, ConfigError> {
        Ok(routing::Router::new(KeyRouter::new(&options)?))
    }
}

impl KeyRouter {
    /// Reads the options once, when the sink is set up.
    pub fn new(options: &Options) -> Result<KeyRouter, ConfigError> {
        Ok(KeyRouter {
            salt: option(options, "salt").unwrap_or("").as_bytes().to_vec(),
            next_unkeyed: Cell::new(0),
        })
    }

    fn fnv1a(&self, key: &[u8]) -> u32 {
        let mut hash: u32 = 0x811c_9dc5;
        for &b in self.salt.iter().chain(key) {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
        hash
    }

    /// One partition below `partitions` (at least 1, the host checks) per key.
    pub fn route(&self, batch: &KeyBatch, partitions: u32) -> Vec<u32> {
        keys(batch)
            .map(|key| match key {
                Some(k) => self.fnv1a(k) % partitions,
                None => {
                    let p = self.next_unkeyed.get() % partitions;
                    self.next_unkeyed.set(p.wrapping_add(1));
                    p
                }
            })
            .collect()
    }
}

impl routing::GuestRouter for KeyRouter {
    fn route_batch(
        &self,
        keys: KeyBatch,
        _properties: Option<PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32> {
        self.route(&keys, partitions)
    }
}

// The component's exports (only in the wasm build: natively the tests call `KeyRouter` directly).
#[cfg(target_arch = "wasm32")]
pulsar_connect_plugin::export_router!(Plugin);

/// Unit tests, natively (`cargo test`): the router called directly with the SDK's test builders.
#[cfg(test)]
mod tests {
    use super::*;
    use pulsar_connect_plugin::testing::router::key_batch;

    #[test]
    fn keys_hash_and_keyless_messages_round_robin() {
        let router = KeyRouter::new(&vec![]).unwrap();
        let batch = key_batch(&[Some(b"key-0"), None, Some(b"key-0"), None, None]);
        let parts = router.route(&batch, 3);
        assert_eq!(parts[0], parts[2], "the same key, the same partition");
        assert_eq!([parts[1], parts[3], parts[4]], [0, 1, 2]);
        assert!(parts.iter().all(|&p| p < 3));
    }

    #[test]
    fn the_salt_changes_the_hash() {
        let salted = KeyRouter::new(&vec![("salt".into(), "s1".into())]).unwrap();
        let plain = KeyRouter::new(&vec![]).unwrap();
        assert_ne!(salted.fnv1a(b"key-0"), plain.fnv1a(b"key-0"));
    }
}
