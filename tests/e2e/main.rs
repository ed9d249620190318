//! End-to-end tests against the real Apache Pulsar broker (`cargo xtask broker start`, or
//! `PULSAR_SERVICE_URL`/`PULSAR_ADMIN_URL`): the client layer, the connector's source and sink, exactly-once,
//! authentication and TLS, key formats, the official Python and Java clients as peers, and the router plugins.
//! One test binary: each of these files links DataFusion, wasmtime and magnetar, and one link is much cheaper
//! than sixteen. The tests that restart the local broker are in their own binary (`broker_restart.rs` here):
//! cargo runs test binaries one after another, so no test of this binary sees the outage.
//! Run one file's tests with `cargo test --release -p pulsar-connect-tests --test e2e pulsar_source::`.

mod big_rows;
mod bounded;
mod bounded_rerun;
mod bounded_shared;
mod changelog;
mod exactly_once;
mod failover;
mod first_write;
mod full_state_dir;
mod hot_reload;
mod key_formats;
mod linked_acks;
mod network_faults;
mod parallel;
mod protobuf_format;
mod pulsar_auth;
mod pulsar_client;
mod pulsar_reader;
mod pulsar_sink;
mod pulsar_source;
mod pulsar_transactions;
mod pulsar_writer;
mod python_interop;
mod read_rounds;
mod restarts;
mod routers_wasm;
mod routing_vectors;
mod sdk_plugins;
mod seek_rounds;
mod shared;
mod sql_shell;
mod status_page;
mod takeover;
