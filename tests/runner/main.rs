//! The job runner (issue 5) without a broker: the seeds' DDL, options and validation, SQL planning and
//! evaluation, and the release binary (`run` and `validate`, kill -9 and restart, `print` output).
//! The binary tests run `target/release/pulsar-connect`: `cargo build --release -p pulsar-connect` first,
//! or set `PULSAR_CONNECT_BIN`. One test binary (one link of DataFusion, wasmtime and magnetar, not seven).

mod changelog;
mod common;

mod crash;
mod e2e;
mod options;
mod seeds;
mod sql_plan;
mod sql_print;
mod state_dir;
mod terminal;
mod validation;
