//! The glue between a router of this workspace and the plugin SDK's `routing` interface (feature
//! `guest`): an [`OptionError`] becomes the contract's `ConfigError`, and [`router_component!`] writes
//! the `Guest` / `GuestRouter` impls and the export for a type that implements [`Route`].

use pulsar_connect_plugin::router_prelude::{ConfigError, KeyBatch, PropertyBatch};

use crate::OptionError;

impl From<OptionError> for ConfigError {
    fn from(e: OptionError) -> ConfigError {
        ConfigError {
            option: e.option,
            message: e.message,
        }
    }
}

/// A configured router: built from the table's options, then asked for one partition per message.
pub trait Route: Sized {
    /// The router for `options` (`sink.message-router.*` without the prefix), or what is wrong with them.
    fn new(options: &[(String, String)]) -> Result<Self, OptionError>;

    /// One partition below `partitions` per message of `keys`; `properties` only when the manifest asks
    /// for them (`wants-properties`).
    fn route(
        &self,
        keys: &KeyBatch,
        properties: Option<&PropertyBatch>,
        partitions: u32,
    ) -> Vec<u32>;
}

/// `router_component!(Component, Router)`: the component type `Component` creates `Router`s (a
/// [`Route`]) for the host; on wasm32 the component is exported.
#[macro_export]
macro_rules! router_component {
    ($component:ident, $router:ty) => {
        impl pulsar_connect_plugin::router_prelude::routing::Guest for $component {
            type Router = $router;

            fn create_router(
                options: pulsar_connect_plugin::router_prelude::Options,
            ) -> Result<
                pulsar_connect_plugin::router_prelude::routing::Router,
                pulsar_connect_plugin::router_prelude::ConfigError,
            > {
                <$router as $crate::guest::Route>::new(&options)
                    .map(pulsar_connect_plugin::router_prelude::routing::Router::new)
                    .map_err(Into::into)
            }
        }

        impl pulsar_connect_plugin::router_prelude::routing::GuestRouter for $router {
            fn route_batch(
                &self,
                keys: pulsar_connect_plugin::router_prelude::KeyBatch,
                properties: Option<pulsar_connect_plugin::router_prelude::PropertyBatch>,
                partitions: u32,
            ) -> Vec<u32> {
                <$router as $crate::guest::Route>::route(
                    self,
                    &keys,
                    properties.as_ref(),
                    partitions,
                )
            }
        }

        #[cfg(target_arch = "wasm32")]
        pulsar_connect_plugin::export_router!($component);
    };
}
