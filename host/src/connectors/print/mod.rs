//! `print`: writes every row to stdout (or stderr) as Flink's print connector does, `+I[1, foo, 2020-03-08T13:12:11.123]`
//! (see [`crate::connector_api::row_text`]), prefixed with `<print-identifier>> ` when a non-empty identifier is set.
//!
//! Output goes through a buffer that is flushed at every checkpoint and at the end, so with stdout redirected to
//! a file the rows covered by a checkpoint are in the file: this is the recording sink of the crash test.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use rand::Rng;

use crate::connector_api::changelog::ChangelogMode;
use crate::connector_api::{CatalogTable, ConnectorFactory, Sink, SinkFactory, SourceFactory};
use crate::options::{OptionDecl, OptionSet};

use crate::connector_api::row_text::format_row;

/// Flink's `PrintSinkOutputWriter` prefix: the identifier, then `:<subtask + 1>` (or just `<subtask + 1>`) when
/// the sink runs more than one subtask, then `> ` unless all that is empty. pulsar-connect runs one writer
/// (`subtasks` = 1), so an empty or absent identifier prints no prefix at all.
pub fn line_prefix(identifier: Option<&str>, subtask: usize, subtasks: usize) -> String {
    let mut prefix = identifier.unwrap_or_default().to_string();
    if subtasks > 1 {
        if !prefix.is_empty() {
            prefix.push(':');
        }
        prefix.push_str(&(subtask + 1).to_string());
    }
    if !prefix.is_empty() {
        prefix.push_str("> ");
    }
    prefix
}

static OPTIONS: LazyLock<OptionSet> = LazyLock::new(|| {
    OptionSet::new(
        "connector 'print'",
        "Sink only. Prints rows in Flink's format: `+I[v1, v2, ...]`.",
        vec![
            OptionDecl::string("print-identifier", "Prefix of every printed line (`<identifier>> +I[...]`)."),
            OptionDecl::boolean("standard-error", "Print to standard error instead of standard output.").default("false"),
            OptionDecl::double("print-sample-ratio", 0.0, 1.0, "Fraction of rows printed (sampled at random); `1` prints every row. Used by the vendor's example job.").default("1"),
            OptionDecl::int("sink.parallelism", 1, 1, "Accepted for compatibility with Flink; pulsar-connect runs one writer per INSERT."),
        ],
        vec![],
    )
});

pub struct PrintFactory;

impl PrintFactory {
    pub fn new() -> Self {
        PrintFactory
    }
}

impl Default for PrintFactory {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectorFactory for PrintFactory {
    fn name(&self) -> &'static str {
        "print"
    }
    fn options(&self) -> &OptionSet {
        &OPTIONS
    }
    fn source(&self) -> Option<&dyn SourceFactory> {
        None
    }
    fn sink(&self) -> Option<&dyn SinkFactory> {
        Some(self)
    }
}

impl SinkFactory for PrintFactory {
    fn create_sink(&self, table: &CatalogTable) -> Result<Box<dyn Sink>> {
        let o = &table.options;
        Ok(Box::new(PrintSink {
            prefix: line_prefix(o.get("print-identifier"), 0, 1),
            stderr: o.get_bool("standard-error").unwrap_or(false),
            ratio: o.get_f64("print-sample-ratio").unwrap_or(1.0),
            buf: Vec::with_capacity(64 * 1024),
        }))
    }
    /// Every row kind: Flink's print sink prints `-U[..]`/`+U[..]`/`-D[..]` and blackhole drops them all.
    fn accepted_changelog_mode(&self, _table: &CatalogTable) -> ChangelogMode {
        ChangelogMode::ALL
    }
}

pub struct PrintSink {
    prefix: String,
    stderr: bool,
    ratio: f64,
    buf: Vec<u8>,
}

impl PrintSink {
    fn drain(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        // Through the terminal: a progress line on the same screen is redrawn below the rows.
        let res = crate::terminal::write_output(&self.buf, self.stderr);
        self.buf.clear();
        res.context("print: writing to the output failed")
    }
}

#[async_trait]
impl Sink for PrintSink {
    async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let mut rng = rand::rng();
        for row in 0..batch.num_rows() {
            if self.ratio < 1.0 && rng.random::<f64>() >= self.ratio {
                continue;
            }
            self.buf.extend_from_slice(self.prefix.as_bytes());
            self.buf
                .extend_from_slice(format_row(&batch, row).as_bytes());
            self.buf.push(b'\n');
        }
        if self.buf.len() >= 64 * 1024 {
            self.drain()?;
        }
        Ok(())
    }

    async fn flush(&mut self, _id: u64) -> Result<serde_json::Value> {
        self.drain()?;
        Ok(serde_json::Value::Null)
    }

    async fn close(&mut self) -> Result<()> {
        self.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::line_prefix;

    #[test]
    fn prefix_as_flink_print_sink_output_writer() {
        assert_eq!(line_prefix(None, 0, 1), "");
        assert_eq!(line_prefix(Some(""), 0, 1), "");
        assert_eq!(line_prefix(Some("golden"), 0, 1), "golden> ");
        assert_eq!(line_prefix(Some("golden"), 1, 2), "golden:2> ");
        assert_eq!(line_prefix(None, 0, 2), "1> ");
    }
}
