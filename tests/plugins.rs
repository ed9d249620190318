//! Plugins through the wasm runtime: the plugin directory and manifests, the sandbox (limits, traps,
//! capabilities, captured output), round trips through the test guests (`tests/guests`, built on first use),
//! the built-in formats (`cargo xtask build-plugins`) against Flink's golden vectors, and the `print`
//! connector's golden output. One test binary (one link of DataFusion, wasmtime and magnetar, not five).

mod plugin_dir;
mod plugin_kit;
mod plugin_reload;
mod plugin_roundtrip;
mod plugin_sandbox;
mod plugin_workflow;

mod formats {
    mod changelog_wasm;
    mod golden_wasm;
    mod protobuf_wasm;
}

mod print {
    mod golden_print;
}
