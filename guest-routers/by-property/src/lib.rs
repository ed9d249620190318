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

impl ByPropertyRouter {
    pub fn new(options: &[(String, String)]) -> Result<ByPropertyRouter, OptionError> {
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

    /// One partition below `partitions` per message of `batch`.
    pub fn route(
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

fn config_error(e: OptionError) -> ConfigError {
    ConfigError {
        option: e.option,
        message: e.message,
    }
}

impl routing::Guest for ByProperty {
    type Router = ByPropertyRouter;

    fn create_router(options: Options) -> Result<routing::Router, ConfigError> {
        ByPropertyRouter::new(&options)
            .map(routing::Router::new)
            .map_err(config_error)
    }
}

impl routing::GuestRouter for ByPropertyRouter {
    fn route_batch(
        &self,
        keys: KeyBatch,
        properties: Option<PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32> {
        self.route(&keys, properties.as_ref(), partitions)
    }
}

#[cfg(target_arch = "wasm32")]
pulsar_connect_plugin::export_router!(ByProperty);

#[cfg(test)]
mod tests {
    use super::*;
    use routing::GuestRouter as _;

    fn batch(keys: &[Option<&[u8]>]) -> KeyBatch {
        let mut b = KeyBatch {
            count: keys.len() as u32,
            data: Vec::new(),
            offsets: vec![0],
            present: keys
                .iter()
                .any(Option::is_none)
                .then(|| vec![0; keys.len().div_ceil(8)]),
        };
        for (i, k) in keys.iter().enumerate() {
            if let Some(k) = k {
                b.data.extend_from_slice(k);
                if let Some(p) = b.present.as_mut() {
                    p[i / 8] |= 1 << (i % 8);
                }
            }
            b.offsets.push(b.data.len() as u32);
        }
        b
    }

    fn props(messages: &[&[(&str, &str)]]) -> PropertyBatch {
        let mut p = PropertyBatch {
            message_offsets: vec![0],
            names: Vec::new(),
            name_offsets: vec![0],
            values: Vec::new(),
            value_offsets: vec![0],
        };
        for m in messages {
            for (n, v) in *m {
                p.names.extend_from_slice(n.as_bytes());
                p.name_offsets.push(p.names.len() as u32);
                p.values.extend_from_slice(v.as_bytes());
                p.value_offsets.push(p.values.len() as u32);
            }
            p.message_offsets.push(p.name_offsets.len() as u32 - 1);
        }
        p
    }

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

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
        let err = config_error(ByPropertyRouter::new(&[]).unwrap_err());
        assert_eq!(err.option.as_deref(), Some("property"));
        let err = config_error(ByPropertyRouter::new(&opts(&[("property", " ")])).unwrap_err());
        assert_eq!(err.option.as_deref(), Some("property"));
    }
}
