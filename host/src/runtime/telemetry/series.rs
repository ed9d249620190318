//! Series made at each scrape from what the runtime holds: the partitions the sources report (lag,
//! ownership), InLong's metric names for `pulsar-inlong` tables, and the labels every series gets (the
//! job, a table's `inlong.metric.labels`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{LabelPair, MetricFamily};
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::families::Families;
use super::rates::Rates;
use super::status::{StatusBoard, TableNumbers};
use crate::connector_api::MetricLabels;
use crate::connector_api::telemetry::{SINK_DROPPED, SOURCE_SKIPPED};

/// The window of InLong's `...PerSecond` meters (InLong's `TIME_SPAN_IN_SECONDS`).
const INLONG_RATE_WINDOW: Duration = Duration::from_secs(60);

fn descs_of(opts: &[Opts], labels: &[&str]) -> Result<Vec<Desc>> {
    let mut descs = Vec::new();
    for o in opts {
        descs.extend(
            IntGaugeVec::new(o.clone(), labels)?
                .desc()
                .into_iter()
                .cloned(),
        );
    }
    Ok(descs)
}

/// `pulsar_connect_source_lag_messages` and `pulsar_connect_source_owned_partitions`, per table, topic and
/// partition, from the sources' partition boards.
pub(super) struct PartitionCollector {
    status: Arc<StatusBoard>,
    lag: Opts,
    owned: Opts,
    descs: Vec<Desc>,
}

const PARTITION_LABELS: &[&str] = &["table", "topic", "partition"];

impl PartitionCollector {
    pub(super) fn new(status: Arc<StatusBoard>) -> Result<Self> {
        let lag = Opts::new(
            "source_lag_messages",
            "Messages between the job's committed position (the subscription's cursor, moved at each completed checkpoint) and the end of the partition, as the broker counts them (the subscription's backlog, batches counted by their messages); polled every few seconds",
        );
        let owned = Opts::new(
            "source_owned_partitions",
            "1 for a partition this process reads now, 0 for one it waits on (a Failover subscription whose active consumer is another process's)",
        );
        let descs = descs_of(&[lag.clone(), owned.clone()], PARTITION_LABELS)?;
        Ok(PartitionCollector {
            status,
            lag,
            owned,
            descs,
        })
    }
}

impl Collector for PartitionCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // (table, topic, partition) → (lag: the largest a subtask or key range reported, owned by any).
        let mut rows: BTreeMap<(String, String, i32), (Option<u64>, bool)> = BTreeMap::new();
        for insert in self.status.inserts() {
            for board in &insert.boards {
                for p in board.snapshot() {
                    let e = rows
                        .entry((insert.source_table.clone(), p.topic, p.partition))
                        .or_insert((None, false));
                    e.0 = match (e.0, p.lag_messages) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    e.1 |= p.owned;
                }
            }
        }
        let (Ok(lag), Ok(owned)) = (
            IntGaugeVec::new(self.lag.clone(), PARTITION_LABELS),
            IntGaugeVec::new(self.owned.clone(), PARTITION_LABELS),
        ) else {
            return Vec::new();
        };
        for ((table, topic, partition), (l, o)) in &rows {
            let partition = partition.to_string();
            let labels = [table.as_str(), topic.as_str(), partition.as_str()];
            if let Some(l) = l {
                lag.with_label_values(&labels)
                    .set(i64::try_from(*l).unwrap_or(i64::MAX));
            }
            owned.with_label_values(&labels).set(i64::from(*o));
        }
        let mut out = lag.collect();
        out.extend(owned.collect());
        out
    }
}

/// The table counters InLong's sort connectors report (`SourceMetricData`, `SinkMetricData`), for the
/// tables of `pulsar-inlong` connectors, under InLong's names (prefixed `pulsar_connect_inlong_`).
pub(super) struct InlongCollector {
    status: Arc<StatusBoard>,
    counters: TableCounters,
    rates: Rates,
    descs: Vec<Desc>,
}

/// The per-table counters the status page and InLong's names are made from: the runtime's own, and
/// the well-known series connectors register ([`crate::connector_api::telemetry`]).
#[derive(Clone)]
pub(super) struct TableCounters {
    pub rows_in: IntCounterVec,
    pub bytes_in: IntCounterVec,
    pub rows_out: IntCounterVec,
    pub bytes_out: IntCounterVec,
    pub errors: IntCounterVec,
    pub skipped: IntCounterVec,
    pub families: Arc<Families>,
}

impl TableCounters {
    /// The numbers of table `t` now.
    pub(super) fn numbers(&self, t: &str) -> TableNumbers {
        let get = |c: &IntCounterVec| {
            c.get_metric_with_label_values(&[t])
                .map(|m| m.get())
                .unwrap_or(0)
        };
        TableNumbers {
            rows_in: get(&self.rows_in),
            bytes_in: get(&self.bytes_in),
            rows_out: get(&self.rows_out),
            bytes_out: get(&self.bytes_out),
            errors: get(&self.errors),
            skipped_rows: get(&self.skipped),
            skipped_messages: self.families.counter_value(SOURCE_SKIPPED.name, t),
            dropped_rows: self.families.counter_value(SINK_DROPPED.name, t),
        }
    }
}

/// InLong's metric names: (name, help, a counter (true) or a gauge).
const INLONG_SOURCE: &[(&str, &str, bool)] = &[
    (
        "inlong_numRecordsIn",
        "InLong numRecordsIn: rows read from the table",
        true,
    ),
    (
        "inlong_numBytesIn",
        "InLong numBytesIn: bytes of the rows read from the table (their Arrow in-memory size)",
        true,
    ),
    (
        "inlong_numRecordsInPerSecond",
        "InLong numRecordsInPerSecond: rows read per second over the last 60 s",
        false,
    ),
    (
        "inlong_numBytesInPerSecond",
        "InLong numBytesInPerSecond: bytes read per second over the last 60 s",
        false,
    ),
    (
        "inlong_numDeserializeError",
        "InLong numDeserializeError: messages the format could not decode (skipped with ignore-parse-errors)",
        true,
    ),
];
const INLONG_SINK: &[(&str, &str, bool)] = &[
    (
        "inlong_numRecordsOut",
        "InLong numRecordsOut: rows written to the table",
        true,
    ),
    (
        "inlong_numBytesOut",
        "InLong numBytesOut: bytes of the rows written (their Arrow in-memory size)",
        true,
    ),
    (
        "inlong_numRecordsOutPerSecond",
        "InLong numRecordsOutPerSecond: rows written per second over the last 60 s",
        false,
    ),
    (
        "inlong_numBytesOutPerSecond",
        "InLong numBytesOutPerSecond: bytes written per second over the last 60 s",
        false,
    ),
    (
        "inlong_dirtyRecordsOut",
        "InLong dirtyRecordsOut: rows not written (dropped by the NOT NULL enforcer or by the sink with fail-on-write = false)",
        true,
    ),
];

impl InlongCollector {
    pub(super) fn new(status: Arc<StatusBoard>, counters: TableCounters) -> Result<Self> {
        let opts: Vec<Opts> = INLONG_SOURCE
            .iter()
            .chain(INLONG_SINK)
            .map(|(n, h, _)| Opts::new(*n, *h))
            .collect();
        let descs = descs_of(&opts, &["table"])?;
        Ok(InlongCollector {
            status,
            counters,
            rates: Rates::default(),
            descs,
        })
    }
}

impl Collector for InlongCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let labels = self.status.table_labels();
        let inlong: Vec<&String> = labels
            .iter()
            .filter(|(_, l)| l.inlong)
            .map(|(t, _)| t)
            .collect();
        if inlong.is_empty() {
            return Vec::new();
        }
        let inserts = self.status.inserts();
        let started = self.status.started();
        let now = Instant::now();
        let mut values: HashMap<&str, Vec<(String, f64)>> = HashMap::new();
        for table in inlong {
            let t = table.as_str();
            let n = self.counters.numbers(t);
            if inserts.iter().any(|i| i.source_table == *table) {
                let (rows, bytes) = (n.rows_in, n.bytes_in);
                let rate = |k: &str, v: u64| {
                    self.rates
                        .rate(&format!("{k}/{t}"), v, now, INLONG_RATE_WINDOW, started)
                };
                for (name, v) in [
                    ("inlong_numRecordsIn", rows as f64),
                    ("inlong_numBytesIn", bytes as f64),
                    ("inlong_numRecordsInPerSecond", rate("ri", rows)),
                    ("inlong_numBytesInPerSecond", rate("bi", bytes)),
                    ("inlong_numDeserializeError", n.skipped_messages as f64),
                ] {
                    values.entry(name).or_default().push((t.to_owned(), v));
                }
            }
            if inserts.iter().any(|i| i.sink_table == *table) {
                let (rows, bytes) = (n.rows_out, n.bytes_out);
                let rate = |k: &str, v: u64| {
                    self.rates
                        .rate(&format!("{k}/{t}"), v, now, INLONG_RATE_WINDOW, started)
                };
                for (name, v) in [
                    ("inlong_numRecordsOut", rows as f64),
                    ("inlong_numBytesOut", bytes as f64),
                    ("inlong_numRecordsOutPerSecond", rate("ro", rows)),
                    ("inlong_numBytesOutPerSecond", rate("bo", bytes)),
                    (
                        "inlong_dirtyRecordsOut",
                        (n.skipped_rows + n.dropped_rows) as f64,
                    ),
                ] {
                    values.entry(name).or_default().push((t.to_owned(), v));
                }
            }
        }
        let mut out = Vec::new();
        for (name, help, counter) in INLONG_SOURCE.iter().chain(INLONG_SINK) {
            let Some(rows) = values.get(name) else {
                continue;
            };
            let opts = Opts::new(*name, *help);
            if *counter {
                let Ok(vec) = IntCounterVec::new(opts, &["table"]) else {
                    continue;
                };
                for (t, v) in rows {
                    vec.with_label_values(&[t.as_str()]).inc_by(*v as u64);
                }
                out.extend(vec.collect());
            } else {
                let Ok(vec) = prometheus::GaugeVec::new(opts, &["table"]) else {
                    continue;
                };
                for (t, v) in rows {
                    vec.with_label_values(&[t.as_str()]).set(*v);
                }
                out.extend(vec.collect());
            }
        }
        out
    }
}

/// Adds the job label to every series and a table's extra labels to the series of that table.
pub(super) fn add_labels(
    families: &mut [MetricFamily],
    job: &str,
    tables: &BTreeMap<String, MetricLabels>,
) {
    let pair = |name: &str, value: &str| {
        let mut p = LabelPair::default();
        p.set_name(name.to_owned());
        p.set_value(value.to_owned());
        p
    };
    for family in families {
        for m in family.mut_metric() {
            let mut labels = m.get_label().to_vec();
            if !job.is_empty() && !labels.iter().any(|l| l.name() == "job") {
                labels.insert(0, pair("job", job));
            }
            let extra = labels
                .iter()
                .find(|l| l.name() == "table")
                .and_then(|l| tables.get(l.value()));
            if let Some(extra) = extra {
                for (k, v) in &extra.labels {
                    if !labels.iter().any(|l| l.name() == k) {
                        labels.push(pair(k, v));
                    }
                }
            }
            m.set_label(labels);
        }
    }
}
