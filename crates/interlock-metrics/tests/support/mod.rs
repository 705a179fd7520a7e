//! A `DebuggingRecorder` snapshot flattened to `name{label=value,...}` ->
//! value for exact comparisons.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, Snapshotter};

/// One recorded metric.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Counter(u64),
    Gauge(f64),
    /// Every recorded value, in order.
    Histogram(Vec<f64>),
}

/// Takes the snapshot (which zeroes counters and gauges: take one per test).
pub fn collect(snapshotter: &Snapshotter) -> BTreeMap<String, Value> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            let value = match value {
                DebugValue::Counter(n) => Value::Counter(n),
                DebugValue::Gauge(g) => Value::Gauge(g.into_inner()),
                DebugValue::Histogram(h) => {
                    Value::Histogram(h.into_iter().map(|f| f.into_inner()).collect())
                }
            };
            (name, value)
        })
        .collect()
}

/// The units and descriptions the recorder was given, by metric name.
pub fn described(snapshotter: &Snapshotter) -> BTreeMap<String, (Option<metrics::Unit>, bool)> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, description, _)| {
            (key.key().name().to_owned(), (unit, description.is_some()))
        })
        .collect()
}
