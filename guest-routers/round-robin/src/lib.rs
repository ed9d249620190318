//! The `round-robin` router: Pulsar's default routing, the Java client's `RoundRobinPartition` mode
//! (`RoundRobinPartitionMessageRouterImpl` with the default hashing scheme `JavaStringHash`). It is
//! also what the host routes with when `sink.message-router` is not set.
//!
//! - A message with a key goes to `signSafeMod(key.hashCode() & Integer.MAX_VALUE, n)`, Java's
//!   `String.hashCode()` of the key taken as a string (option `key-as`: the key bytes as UTF-8, or
//!   their base64 text as for a Java `keyBytes` key).
//! - Messages without a key are spread round-robin. The Java client with batching (its default) sends
//!   every unkeyed message of a `partitionSwitchMs` time slice to one partition, then the next; we slice
//!   per batch instead of per time: all unkeyed messages of one `route-batch` call go to one partition,
//!   the next call's to the next (`unkeyed = per-batch`, the default). `unkeyed = per-message` is the Java
//!   client without batching: each message to the next partition. The rotation starts at
//!   `start-partition` (Java: a random partition per producer).

use std::cell::RefCell;

use pulsar_connect_plugin::router_prelude::*;
use routing_core::guest::Route;
use routing_core::{
    KeyAs, OptionError, Spreader, Unkeyed, java_default_partition, key_as_option, start_option,
    unkeyed_option,
};

/// The component.
pub struct RoundRobin;

/// One configured router.
#[derive(Debug)]
pub struct RoundRobinRouter {
    key_as: KeyAs,
    spread: RefCell<Spreader>,
}

impl Route for RoundRobinRouter {
    fn new(options: &[(String, String)]) -> Result<RoundRobinRouter, OptionError> {
        let key_as = key_as_option(options)?;
        let unkeyed = unkeyed_option(options, Unkeyed::PerBatch)?;
        let start = start_option(options)?;
        Ok(RoundRobinRouter {
            key_as,
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
            keys[i].map(|k| java_default_partition(k, self.key_as, partitions))
        })
    }
}

routing_core::router_component!(RoundRobin, RoundRobinRouter);

#[cfg(test)]
mod tests {
    use pulsar_connect_plugin::testing::router::key_batch as batch;
    use routing_core::vectors::options as opts;
    use routing_core::vectors::{Vectors, check_router};
    use routing_core::{base64, java_string_hash};

    use super::*;

    #[test]
    fn every_keyed_vector() {
        assert_eq!(check_router::<RoundRobinRouter>("java_default"), 160_000);
    }

    #[test]
    fn keyed_and_unkeyed_mixed_keep_the_vectors() {
        // Unkeyed messages between keyed ones change nothing for the keyed ones.
        let v = Vectors::load();
        let mut keys: Vec<Option<&[u8]>> = Vec::new();
        for k in &v.keys[..500] {
            keys.push(Some(k));
            keys.push(None);
        }
        let router = RoundRobinRouter::new(&opts(&[("unkeyed", "per-message")])).unwrap();
        let got = router.route(&batch(&keys), None, 7);
        let want = v.column("java_default", 7);
        for i in 0..500 {
            assert_eq!(i64::from(got[2 * i]), want[i]);
            assert_eq!(got[2 * i + 1] as usize, i % 7, "unkeyed message {i}");
        }
    }

    #[test]
    fn unkeyed_messages_move_on_per_batch_by_default() {
        let router = RoundRobinRouter::new(&[]).unwrap();
        assert_eq!(
            router.route(&batch(&[None, None, None]), None, 4),
            [0, 0, 0]
        );
        assert_eq!(
            router.route(&batch(&[None, Some(b"abc"), None]), None, 4),
            [1, 96_354 % 4, 1]
        );
        // Only keyed messages: the rotation stays.
        assert_eq!(router.route(&batch(&[Some(b"abc")]), None, 4), [2]);
        assert_eq!(router.route(&batch(&[None]), None, 4), [2]);
        assert_eq!(router.route(&batch(&[None]), None, 4), [3]);
        assert_eq!(router.route(&batch(&[None]), None, 4), [0]);
        let router = RoundRobinRouter::new(&opts(&[("start-partition", "3")])).unwrap();
        assert_eq!(router.route(&batch(&[None, None]), None, 4), [3, 3]);
        assert_eq!(router.route(&batch(&[None, None]), None, 4), [0, 0]);
    }

    #[test]
    fn key_as_base64_hashes_the_base64_text() {
        let router = RoundRobinRouter::new(&opts(&[("key-as", "base64")])).unwrap();
        let keys: [&[u8]; 3] = [b"key-1", &[0xff, 0xfe, 0x00], b""];
        let got = router.route(&batch(&keys.map(Some)), None, 16);
        let want: Vec<u32> = keys
            .iter()
            .map(|k| java_string_hash(&base64(k)) % 16)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bad_options_are_refused() {
        let err =
            ConfigError::from(RoundRobinRouter::new(&opts(&[("key-as", "hex")])).unwrap_err());
        assert_eq!(err.option.as_deref(), Some("key-as"));
        let err = ConfigError::from(
            RoundRobinRouter::new(&opts(&[("start-partition", "-2")])).unwrap_err(),
        );
        assert_eq!(err.option.as_deref(), Some("start-partition"));
    }
}
