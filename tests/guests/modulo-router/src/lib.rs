//! A router for the tests: FNV-1a of the key modulo the partition count; messages without a key go
//! round-robin. With the option `by-property` set, the named property is hashed instead of the key.

use std::cell::Cell;

use pulsar_connect_plugin::messages::router_properties;
use pulsar_connect_plugin::router_prelude::*;

struct Modulo;

struct Router {
    by_property: Option<String>,
    next: Cell<u32>,
}

impl routing::Guest for Modulo {
    type Router = Router;

    fn create_router(options: Options) -> Result<routing::Router, ConfigError> {
        let by_property = option(&options, "by-property")
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        Ok(routing::Router::new(Router {
            by_property,
            next: Cell::new(0),
        }))
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

impl routing::GuestRouter for Router {
    fn route_batch(
        &self,
        batch: KeyBatch,
        properties: Option<PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32> {
        let partitions = partitions.max(1);
        keys(&batch)
            .enumerate()
            .map(|(i, key)| {
                let by_prop = self.by_property.as_deref().and_then(|name| {
                    let props = properties.as_ref()?;
                    router_properties(props, i)
                        .into_iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, v)| v.as_bytes())
                });
                match by_prop.or(key) {
                    Some(bytes) => fnv1a(bytes) % partitions,
                    None => {
                        let n = self.next.get();
                        self.next.set(n.wrapping_add(1));
                        n % partitions
                    }
                }
            })
            .collect()
    }
}

pulsar_connect_plugin::export_router!(Modulo);
