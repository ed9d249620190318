//! Bindings of `pulsar-connect:plugin@0.1.0` (frozen: generated from `wit/v0.1.0`).

pub mod format {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "format",
    });
}

pub mod router {
    wasmtime::component::bindgen!({
        path: "../wit/v0.1.0",
        world: "router",
        with: {
            "pulsar-connect:plugin/types": super::format::pulsar_connect::plugin::types,
            "pulsar-connect:plugin/log": super::format::pulsar_connect::plugin::log,
        },
    });
}

pub use format::pulsar_connect::plugin::log;
pub use format::pulsar_connect::plugin::types;
