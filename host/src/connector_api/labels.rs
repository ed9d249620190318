//! Labels a table adds to its metric series (`inlong.metric.labels`), and whether it also reports the
//! metric names of InLong's sort connectors.

/// What a connector asks the runtime to add to a table's series.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricLabels {
    /// Extra label pairs, in the order written (`groupId`, `streamId`, `nodeId`, ...).
    pub labels: Vec<(String, String)>,
    /// Also export the table's counters under InLong's names (`numRecordsIn`, `numBytesOut`, ...): the
    /// `pulsar-inlong` connectors.
    pub inlong: bool,
}

impl MetricLabels {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && !self.inlong
    }
}
