//! Telemetry through a handle: a connector registers the series it reports, per table, through the
//! [`TableTelemetry`] its [`super::PipelineContext`] carries, instead of the runtime holding a field for
//! every connector's counter. The runtime behind the handle ([`TelemetrySink`]) creates each series once
//! (named `pulsar_connect_<name>`, labelled `table`), serves it at `/metrics`, and reads the well-known
//! ones below for the status page.

use std::sync::Arc;

use prometheus::{Gauge, IntCounter, IntGauge};

/// A series a connector reports: its name (without the `pulsar_connect_` prefix) and help text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Series {
    pub name: &'static str,
    pub help: &'static str,
}

impl Series {
    /// This series alone, registered nowhere (counts for nobody).
    pub fn detached_counter(self) -> IntCounter {
        IntCounter::new(self.name, self.help).unwrap_or_else(|_| unreachable!("{}", INVALID))
    }

    pub fn detached_gauge(self) -> IntGauge {
        IntGauge::new(self.name, self.help).unwrap_or_else(|_| unreachable!("{}", INVALID))
    }

    pub fn detached_float_gauge(self) -> Gauge {
        Gauge::new(self.name, self.help).unwrap_or_else(|_| unreachable!("{}", INVALID))
    }
}

const INVALID: &str = "series names are valid metric names";

/// Rows a sink could not write and did not fail the job for (the status page's `dropped_rows`).
pub const SINK_DROPPED: Series = Series {
    name: "sink_dropped_total",
    help: "Rows a sink could not write and did not fail the job for (Pulsar: fail-on-write = false; they go to the dead-letter topic when one is set)",
};

/// Messages a source skipped because its format could not decode them (the status page's
/// `skipped_messages`).
pub const SOURCE_SKIPPED: Series = Series {
    name: "source_skipped_messages_total",
    help: "Messages a source skipped because its format could not decode them (ignore-parse-errors)",
};

/// Splits a source reads in this process (the progress line's `splits`).
pub const OWNED_SPLITS: Series = Series {
    name: "source_owned_splits",
    help: "Splits (topic-partitions) a source table reads in this process: all of them with an Exclusive subscription; with Failover those the broker made this process active for",
};

/// What stands behind a [`TableTelemetry`]: the runtime's metrics. The same series name always gives
/// the same kind of series; asking again for one gives the one registered first.
pub trait TelemetrySink: Send + Sync {
    fn counter(&self, series: Series, table: &str) -> IntCounter;
    fn gauge(&self, series: Series, table: &str) -> IntGauge;
    fn float_gauge(&self, series: Series, table: &str) -> Gauge;
}

/// The telemetry handle of one table of a pipeline.
#[derive(Clone)]
pub struct TableTelemetry {
    table: String,
    sink: Option<Arc<dyn TelemetrySink>>,
}

impl TableTelemetry {
    pub fn new(table: &str, sink: Arc<dyn TelemetrySink>) -> Self {
        TableTelemetry {
            table: table.to_string(),
            sink: Some(sink),
        }
    }

    /// A handle whose series are registered nowhere (validation, commands outside a running job).
    pub fn detached(table: &str) -> Self {
        TableTelemetry {
            table: table.to_string(),
            sink: None,
        }
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn counter(&self, series: Series) -> IntCounter {
        match &self.sink {
            Some(s) => s.counter(series, &self.table),
            None => series.detached_counter(),
        }
    }

    pub fn gauge(&self, series: Series) -> IntGauge {
        match &self.sink {
            Some(s) => s.gauge(series, &self.table),
            None => series.detached_gauge(),
        }
    }

    pub fn float_gauge(&self, series: Series) -> Gauge {
        match &self.sink {
            Some(s) => s.float_gauge(series, &self.table),
            None => series.detached_float_gauge(),
        }
    }
}

impl std::fmt::Debug for TableTelemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableTelemetry")
            .field("table", &self.table)
            .field("attached", &self.sink.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_handle_counts_for_nobody() {
        let t = TableTelemetry::detached("src");
        let c = t.counter(SOURCE_SKIPPED);
        c.inc();
        assert_eq!(c.get(), 1);
        assert_eq!(
            t.counter(SOURCE_SKIPPED).get(),
            0,
            "a fresh series each time"
        );
    }
}
