//! Errors tagged with the plugin and the lifecycle phase they happened in.

use std::fmt;

/// The lifecycle phase of a plugin; every [`PluginError`] names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the plugin folder, its manifest or its wasm.
    Load,
    /// Checking the manifest, the hash, the exported world and the imports.
    Verify,
    /// Compiling (or loading the host's cached compilation of) the component.
    Compile,
    /// Instantiating the component.
    Instantiate,
    /// Validating options and running the factories.
    Configure,
    /// A call on a configured decoder, encoder or router.
    Call,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Load => "load",
            Phase::Verify => "verify",
            Phase::Compile => "compile",
            Phase::Instantiate => "instantiate",
            Phase::Configure => "configure",
            Phase::Call => "call",
        })
    }
}

/// What went wrong in a call, for callers that react differently (retry, dead-letter, fail the job).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The plugin ran past its epoch deadline and was interrupted.
    Deadline,
    /// The plugin tried to grow its memory beyond its limit.
    MemoryLimit,
    /// Any other trap (a panic, `unreachable`, an out-of-bounds access).
    Trap,
    /// The plugin returned an error or data the host rejects; the instance is still good.
    Rejected,
    /// Not a call failure (a load, verify, compile, instantiate or configure error).
    Other,
}

/// An error from the plugin platform. Its message names the plugin, the phase and, for calls, the call
/// and the batch.
#[derive(Debug)]
pub struct PluginError {
    pub plugin: String,
    pub phase: Phase,
    pub failure: Failure,
    /// The plugin's name of the option a factory refused, when it named one.
    option: Option<String>,
    source: anyhow::Error,
}

impl PluginError {
    pub fn new(plugin: impl Into<String>, phase: Phase, source: impl Into<anyhow::Error>) -> Self {
        PluginError {
            plugin: plugin.into(),
            phase,
            failure: Failure::Other,
            option: None,
            source: source.into(),
        }
    }

    pub fn call(
        plugin: impl Into<String>,
        failure: Failure,
        source: impl Into<anyhow::Error>,
    ) -> Self {
        PluginError {
            plugin: plugin.into(),
            phase: Phase::Call,
            failure,
            option: None,
            source: source.into(),
        }
    }

    /// The error with the option a factory refused (see [`PluginError::option`]).
    pub fn with_option(mut self, option: Option<String>) -> Self {
        self.option = option;
        self
    }

    /// The plugin's name of the option a factory refused (`charset`, without the table's format
    /// prefix), when the plugin named one.
    pub fn option(&self) -> Option<&str> {
        self.option.as_deref()
    }

    /// The underlying error (with its context chain).
    pub fn inner(&self) -> &anyhow::Error {
        &self.source
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plugin `{}` ({}): {:#}",
            self.plugin, self.phase, self.source
        )
    }
}

impl std::error::Error for PluginError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}

/// Shorthand for results of the plugin platform.
pub type Result<T, E = PluginError> = std::result::Result<T, E>;
