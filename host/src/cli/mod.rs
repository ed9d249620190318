//! Command-line subcommands that are more than a line in `main.rs`.

pub mod kit;
pub mod plugin_install;
pub mod plugin_new;
pub mod plugin_test;
pub mod plugins;
pub mod run;
pub mod sql;
pub mod subscriptions;

use std::path::Path;
use std::process::ExitCode;

use crate::connector_api::Registry;
use crate::job;

/// Exit codes (also in docs/cli.md): the job failed while running; an invalid job or command line; a
/// second signal stopped the process at once.
pub const EXIT_RUNTIME: u8 = 1;
pub const EXIT_INVALID: u8 = 2;
pub const EXIT_FORCED: u8 = 130;

/// Loads a job file, printing every error (exit code 2 when it is invalid).
pub async fn load_job(path: &Path, registry: &Registry) -> Result<job::Job, ExitCode> {
    job::load(path, registry).await.map_err(|errors| {
        for e in &errors.0 {
            eprintln!("error: {}: {e}", path.display());
        }
        ExitCode::from(EXIT_INVALID)
    })
}
