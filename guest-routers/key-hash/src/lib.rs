//! The `key-hash` router: the Flink Pulsar connector's `KeyHashMessageRouterImpl`,
//! `Math.abs(murmur3_32(keyBytes, seed 0)) % partitions`, bit-exact (see
//! [`routing_core::key_hash_partition`] for the one hash, `Integer.MIN_VALUE`, where Java's result is
//! not a valid partition and ours is).
//!
//! Messages without a key (the reference fails their send with a `NullPointerException`) are spread
//! round-robin, each to the next partition (option `unkeyed = per-batch`: a batch's to one partition).
//! A present but empty key is a key: murmur3 of no bytes is 0, partition 0.

use std::cell::RefCell;

use pulsar_connect_plugin::router_prelude::*;
use routing_core::guest::Route;
use routing_core::{
    OptionError, Spreader, Unkeyed, key_hash_partition, start_option, unkeyed_option,
};

/// The component.
pub struct KeyHash;

/// One configured router.
#[derive(Debug)]
pub struct KeyHashRouter {
    spread: RefCell<Spreader>,
}

impl Route for KeyHashRouter {
    fn new(options: &[(String, String)]) -> Result<KeyHashRouter, OptionError> {
        let unkeyed = unkeyed_option(options, Unkeyed::PerMessage)?;
        let start = start_option(options)?;
        Ok(KeyHashRouter {
            spread: RefCell::new(Spreader::new(unkeyed, start)),
        })
    }

    fn route(
        &self,
        batch: &KeyBatch,
        _properties: Option<&PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32> {
        let keys: Vec<Option<&[u8]>> = keys(batch).collect();
        self.spread.borrow_mut().route(keys.len(), partitions, |i| {
            keys[i].map(|k| key_hash_partition(k, partitions))
        })
    }
}

routing_core::router_component!(KeyHash, KeyHashRouter);

#[cfg(test)]
mod tests {
    use pulsar_connect_plugin::testing::router::key_batch as batch;
    use routing_core::vectors::check_router;
    use routing_core::vectors::options as opts;

    use super::*;

    #[test]
    fn every_vector() {
        assert_eq!(check_router::<KeyHashRouter>("key_hash"), 160_000);
    }

    #[test]
    fn the_min_value_key_is_routed_validly() {
        let key: &[u8] = &[0x55, 0x07, 0x6f, 0x83];
        let router = KeyHashRouter::new(&[]).unwrap();
        for n in 1..=16 {
            let p = router.route(&batch(&[Some(key)]), None, n)[0];
            assert_eq!(p, ((1u64 << 31) % u64::from(n)) as u32);
        }
        assert_eq!(router.route(&batch(&[Some(key)]), None, 3), [2]);
        assert_eq!(router.route(&batch(&[Some(key)]), None, 16), [0]);
    }

    #[test]
    fn unkeyed_messages_go_round_robin() {
        let router = KeyHashRouter::new(&opts(&[("unkeyed", "per-message")])).unwrap();
        let b = batch(&[None, Some(b"hello"), None, None, Some(b""), None]);
        // hello -> 1 of 6 (reference value), "" -> 0, the unkeyed ones 0, 1, 2, 3.
        assert_eq!(router.route(&b, None, 6), [0, 1, 1, 2, 0, 3]);
        assert_eq!(router.route(&batch(&[None, None]), None, 6), [4, 5]);
        let router = KeyHashRouter::new(&opts(&[("start-partition", "4")])).unwrap();
        assert_eq!(
            router.route(&batch(&[None, None, None]), None, 5),
            [4, 0, 1]
        );
    }

    #[test]
    fn unkeyed_messages_per_batch() {
        let router = KeyHashRouter::new(&opts(&[("unkeyed", "per-batch")])).unwrap();
        assert_eq!(
            router.route(&batch(&[None, None, Some(b"key1")]), None, 6),
            [0, 0, 5]
        );
        assert_eq!(router.route(&batch(&[None, None]), None, 6), [1, 1]);
    }

    #[test]
    fn bad_options_are_refused() {
        let err = KeyHashRouter::new(&opts(&[("unkeyed", "random")])).unwrap_err();
        let err = ConfigError::from(err);
        assert_eq!(err.option.as_deref(), Some("unkeyed"));
        assert!(err.message.contains("per-message, per-batch"));
    }
}
