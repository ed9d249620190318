//! What a plugin's `Store` holds: an empty WASI context, the resource table, the memory limiter, and
//! the plugin's log sink (stdout, stderr and the `log` import, tagged with its name, rate-limited).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::model::LogLevel;

/// Lines per second a plugin may log (stdout, stderr and `log` together) before lines are dropped.
const LOG_LINES_PER_SECOND: f64 = 20.0;
/// Burst allowance of the log rate limit.
const LOG_BURST: f64 = 100.0;
/// Longest line kept; the rest is cut.
const MAX_LINE: usize = 2048;
/// How many of the most recent stderr lines are kept for error messages.
const RECENT_STDERR: usize = 4;

/// The plugin's log: a token bucket shared by its streams and its `log` import.
#[derive(Debug)]
pub struct LogSink {
    plugin: Arc<str>,
    state: Mutex<SinkState>,
}

#[derive(Debug)]
struct SinkState {
    tokens: f64,
    last: Instant,
    dropped: u64,
    recent_stderr: VecDeque<String>,
}

impl LogSink {
    pub fn new(plugin: Arc<str>) -> Arc<LogSink> {
        Arc::new(LogSink {
            plugin,
            state: Mutex::new(SinkState {
                tokens: LOG_BURST,
                last: Instant::now(),
                dropped: 0,
                recent_stderr: VecDeque::new(),
            }),
        })
    }

    /// Takes a token; returns how many lines were dropped before this one, or `None` to drop it too.
    fn admit(&self) -> Option<u64> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        s.tokens = (s.tokens + now.duration_since(s.last).as_secs_f64() * LOG_LINES_PER_SECOND)
            .min(LOG_BURST);
        s.last = now;
        if s.tokens < 1.0 {
            s.dropped += 1;
            return None;
        }
        s.tokens -= 1.0;
        Some(std::mem::take(&mut s.dropped))
    }

    fn emit(&self, stream: &str, level: LogLevel, line: &str, fields: &str) {
        let plugin = &*self.plugin;
        let Some(dropped) = self.admit() else { return };
        if dropped > 0 {
            tracing::warn!(
                plugin,
                dropped,
                "plugin log rate limit: {dropped} lines dropped"
            );
        }
        match level {
            LogLevel::Trace => tracing::trace!(plugin, stream, fields, "{line}"),
            LogLevel::Debug => tracing::debug!(plugin, stream, fields, "{line}"),
            LogLevel::Info => tracing::info!(plugin, stream, fields, "{line}"),
            LogLevel::Warn => tracing::warn!(plugin, stream, fields, "{line}"),
            LogLevel::Error => tracing::error!(plugin, stream, fields, "{line}"),
        }
    }

    fn stderr_line(&self, line: &str) {
        {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if s.recent_stderr.len() == RECENT_STDERR {
                s.recent_stderr.pop_front();
            }
            s.recent_stderr.push_back(line.to_owned());
        }
        self.emit("stderr", LogLevel::Warn, line, "");
    }

    /// The last lines the plugin wrote to stderr (a panic message, usually), cleared by the call.
    pub fn take_recent_stderr(&self) -> Vec<String> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.recent_stderr.drain(..).collect()
    }
}

/// stdout or stderr of a plugin: split into lines, each a log event.
#[derive(Clone)]
struct LogStream {
    sink: Arc<LogSink>,
    stderr: bool,
    partial: Arc<Mutex<Vec<u8>>>,
}

impl LogStream {
    fn write_bytes(&self, bytes: &[u8]) {
        let mut partial = self.partial.lock().unwrap_or_else(|e| e.into_inner());
        for &b in bytes {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&partial).into_owned();
                partial.clear();
                if self.stderr {
                    self.sink.stderr_line(&line);
                } else {
                    self.sink.emit("stdout", LogLevel::Info, &line, "");
                }
            } else if partial.len() < MAX_LINE {
                partial.push(b);
            }
        }
    }
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for LogStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogStream {
    /// Writes never block: the stream is always ready.
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LogStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Caps linear memory (and tables) and remembers whether the cap was hit, so a trap can be reported
/// as "memory limit exceeded" rather than a bare trap.
#[derive(Debug)]
pub struct Limiter {
    pub memory_bytes: usize,
    pub exceeded: Option<usize>,
    /// The largest linear memory granted so far (the instance's memory high-water).
    pub peak: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.exceeded = Some(desired);
            return Err(wasmtime::Error::msg(format!(
                "memory limit exceeded: the plugin asked for {} MiB, its limit is {} MiB",
                desired >> 20,
                self.memory_bytes >> 20
            )));
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The data of a plugin's `Store`.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limiter: Limiter,
    pub log: Arc<LogSink>,
}

impl PluginState {
    /// A state with an empty WASI context: no files, no sockets, no env, no args, stdin closed;
    /// stdout and stderr go to the log. `files`: the plugin's own folder, its only preopen, read-only
    /// (ADR 0022).
    pub fn new(
        log: Arc<LogSink>,
        memory_bytes: usize,
        files: Option<&std::path::Path>,
    ) -> anyhow::Result<PluginState> {
        let stdout = LogStream {
            sink: log.clone(),
            stderr: false,
            partial: Arc::default(),
        };
        let stderr = LogStream {
            sink: log.clone(),
            stderr: true,
            partial: Arc::default(),
        };
        let mut builder = WasiCtxBuilder::new();
        builder.stdout(stdout).stderr(stderr);
        if let Some(folder) = files {
            super::files::preopen(&mut builder, folder)?;
        }
        let wasi = builder.build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(10_000);
        Ok(PluginState {
            wasi,
            table,
            limiter: Limiter {
                memory_bytes,
                exceeded: None,
                peak: 0,
            },
            log,
        })
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl PluginState {
    /// A line of the plugin's `log` import (every WIT version's bindings end here).
    pub(crate) fn log_import(
        &mut self,
        level: LogLevel,
        message: String,
        fields: &[(String, String)],
    ) {
        let fields = fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        let message: String = message.chars().take(MAX_LINE).collect();
        self.log.emit("log", level, &message, &fields);
    }
}
