//! `by-property`: an example of a custom router, and the one the tests install as a third-party
//! router. It routes by the value of one message property (option `property`), hashed like `key-hash`
//! (`|murmur3_32(value bytes, seed 0)| mod n`); a message without that property is routed by the
//! key-hash of its key, and a message with neither goes round-robin (option `unkeyed`).
//!
//! Its manifest sets `wants-properties = true`: the host only passes message properties to routers that
//! ask for them. If a message has the property several times, the first value counts.

use std::cell::RefCell;

use pulsar_connect_plugin::messages::router_properties;
use pulsar_connect_plugin::router_prelude::*;
use routing_core::guest::Route;
use routing_core::{
    OptionError, Spreader, Unkeyed, key_hash_partition, start_option, unkeyed_option,
};

/// The component.
pub struct ByProperty;

/// One configured router.
#[derive(Debug)]
pub struct ByPropertyRouter {
    property: String,
    spread: RefCell<Spreader>,
}

impl Route for ByPropertyRouter {
    fn new(options: &[(String, String)]) -> Result<ByPropertyRouter, OptionError> {
        let property = routing_core::option(options, "property")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| OptionError {
                option: Some("property".to_owned()),
                message: "name the message property to route by".to_owned(),
            })?
            .to_owned();
        let unkeyed = unkeyed_option(options, Unkeyed::PerMessage)?;
        let start = start_option(options)?;
        Ok(ByPropertyRouter {
            property,
            spread: RefCell::new(Spreader::new(unkeyed, start)),
        })
    }

    fn route(
        &self,
        batch: &KeyBatch,
        properties: Option<&PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32> {
        let keys: Vec<Option<&[u8]>> = keys(batch).collect();
        self.spread.borrow_mut().route(keys.len(), partitions, |i| {
            let value = properties.and_then(|props| {
                router_properties(props, i)
                    .into_iter()
                    .find(|(name, _)| *name == self.property)
                    .map(|(_, value)| value.as_bytes())
            });
            value
                .or(keys[i])
                .map(|bytes| key_hash_partition(bytes, partitions))
        })
    }
}

routing_core::router_component!(ByProperty, ByPropertyRouter);

#[cfg(test)]
mod tests {
    use super::*;
    use pulsar_connect_plugin::testing::router::{key_batch as batch, property_batch as props};
    use routing::GuestRouter as _;
    use routing_core::vectors::options as opts;

    #[test]
    fn property_then_key_then_round_robin() {
        let router = ByPropertyRouter::new(&opts(&[("property", "tenant")])).unwrap();
        let keys = batch(&[Some(b"k"), Some(b"hello"), None, None, Some(b"key1")]);
        let p = props(&[
            &[("tenant", "user-42")],
            &[("other", "user-42")],
            &[("tenant", "hello")],
            &[],
            &[("tenant", "key1"), ("tenant", "hello")],
        ]);
        let got = router.route_batch(keys, Some(p), 6);
        // Reference values for 6 partitions: user-42 -> 2, hello -> 1, key1 -> 5.
        assert_eq!(got, [2, 1, 1, 0, 5]);
    }

    #[test]
    fn without_properties_it_is_key_hash() {
        let router = ByPropertyRouter::new(&opts(&[("property", "tenant")])).unwrap();
        let got = router.route(&batch(&[Some(b"user-42"), None, None]), None, 6);
        assert_eq!(got, [2, 0, 1]);
        let got = router.route(&batch(&[None]), None, 6);
        assert_eq!(got, [2], "the rotation goes on across batches");
    }

    #[test]
    fn the_property_is_required() {
        let err = ConfigError::from(ByPropertyRouter::new(&[]).unwrap_err());
        assert_eq!(err.option.as_deref(), Some("property"));
        let err =
            ConfigError::from(ByPropertyRouter::new(&opts(&[("property", " ")])).unwrap_err());
        assert_eq!(err.option.as_deref(), Some("property"));
    }
}
