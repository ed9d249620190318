//! The series connectors register through their telemetry handles ([`crate::connector_api::telemetry`]):
//! one family per name, labelled `table`, created and registered on first use.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use tracing::warn;

use crate::connector_api::telemetry::{Series, TelemetrySink};

#[derive(Clone)]
enum Family {
    Counter(IntCounterVec),
    Gauge(IntGaugeVec),
    Float(GaugeVec),
}

pub(super) struct Families {
    registry: Registry,
    by_name: Mutex<BTreeMap<&'static str, Family>>,
}

impl Families {
    pub(super) fn new(registry: Registry) -> Self {
        Families {
            registry,
            by_name: Mutex::default(),
        }
    }

    /// The family `series` names, made by `make` and registered the first time.
    fn family(
        &self,
        series: Series,
        make: impl FnOnce(Opts) -> prometheus::Result<Family>,
    ) -> Family {
        let mut by_name = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = by_name.get(series.name) {
            return f.clone();
        }
        let made = make(Opts::new(series.name, series.help)).unwrap_or_else(|_| {
            unreachable!("series names are valid metric names: {}", series.name)
        });
        let registered = match &made {
            Family::Counter(c) => self.registry.register(Box::new(c.clone())),
            Family::Gauge(g) => self.registry.register(Box::new(g.clone())),
            Family::Float(g) => self.registry.register(Box::new(g.clone())),
        };
        if let Err(e) = registered {
            // Counted still, only not served: a connector's series never fails its job.
            warn!(
                series = series.name,
                "a connector's series is not served: {e}"
            );
        }
        by_name.insert(series.name, made.clone());
        made
    }

    /// The value of counter `name` for `table` (0 when nothing registered it).
    pub(super) fn counter_value(&self, name: &str, table: &str) -> u64 {
        match self.get(name) {
            Some(Family::Counter(c)) => c
                .get_metric_with_label_values(&[table])
                .map(|m| m.get())
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// Gauge `name` summed over every table (0 when nothing registered it).
    pub(super) fn gauge_total(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(Family::Gauge(g)) => g
                .collect()
                .iter()
                .flat_map(|mf| {
                    mf.get_metric()
                        .iter()
                        .map(|m| m.get_gauge().get_value() as i64)
                })
                .sum(),
            _ => 0,
        }
    }

    fn get(&self, name: &str) -> Option<Family> {
        self.by_name
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}

/// A name registered as one kind and asked for as another: a programming error of a connector, which
/// gets a series counted nowhere instead of failing its job.
fn mismatch(series: Series) -> Series {
    warn!(
        series = series.name,
        "a connector asked for a series under a kind it was not registered as"
    );
    series
}

impl TelemetrySink for Families {
    fn counter(&self, series: Series, table: &str) -> IntCounter {
        let family = self.family(series, |o| {
            Ok(Family::Counter(IntCounterVec::new(o, &["table"])?))
        });
        match family {
            Family::Counter(c) => c.with_label_values(&[table]),
            _ => mismatch(series).detached_counter(),
        }
    }

    fn gauge(&self, series: Series, table: &str) -> IntGauge {
        let family = self.family(series, |o| {
            Ok(Family::Gauge(IntGaugeVec::new(o, &["table"])?))
        });
        match family {
            Family::Gauge(g) => g.with_label_values(&[table]),
            _ => mismatch(series).detached_gauge(),
        }
    }

    fn float_gauge(&self, series: Series, table: &str) -> Gauge {
        let family = self.family(series, |o| Ok(Family::Float(GaugeVec::new(o, &["table"])?)));
        match family {
            Family::Float(g) => g.with_label_values(&[table]),
            _ => mismatch(series).detached_float_gauge(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector_api::telemetry::{OWNED_SPLITS, SINK_DROPPED};

    #[test]
    fn a_series_is_made_once_served_and_read_back_per_table() {
        let registry = Registry::new_custom(Some("pulsar_connect".into()), None).unwrap();
        let f = Families::new(registry.clone());
        f.counter(SINK_DROPPED, "dst").inc_by(3);
        f.counter(SINK_DROPPED, "dst").inc();
        f.counter(SINK_DROPPED, "other").inc();
        f.gauge(OWNED_SPLITS, "src").set(2);
        f.gauge(OWNED_SPLITS, "src2").set(3);
        assert_eq!(f.counter_value(SINK_DROPPED.name, "dst"), 4);
        assert_eq!(f.counter_value(SINK_DROPPED.name, "nope"), 0);
        assert_eq!(f.counter_value("never_registered", "dst"), 0);
        assert_eq!(f.gauge_total(OWNED_SPLITS.name), 5);
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|m| m.name().to_string())
            .collect();
        assert!(
            names.contains(&"pulsar_connect_sink_dropped_total".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"pulsar_connect_source_owned_splits".to_string()),
            "{names:?}"
        );
        // The wrong kind: counted nowhere, the first registration stands.
        f.gauge(SINK_DROPPED, "dst").set(9);
        assert_eq!(f.counter_value(SINK_DROPPED.name, "dst"), 4);
    }
}
