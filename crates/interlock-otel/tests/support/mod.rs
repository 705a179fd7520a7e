//! An SDK with the in-memory exporter, and its output flattened to
//! `name{key=value,...}` -> value for exact comparisons.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use opentelemetry::metrics::{Meter, MeterProvider as _};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// One exported data point.
#[derive(Clone, Debug, PartialEq)]
pub enum Point {
    /// A counter or up-down counter.
    Sum(i64),
    /// A histogram's count and sum.
    Histogram { count: u64, sum: f64 },
}

/// An SDK meter provider whose exports can be read back.
pub struct Collector {
    exporter: InMemoryMetricExporter,
    provider: SdkMeterProvider,
}

impl Collector {
    pub fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        Collector { exporter, provider }
    }

    pub fn meter(&self) -> Meter {
        self.provider.meter("interlock")
    }

    /// Every data point of the latest (cumulative) export.
    pub fn collect(&self) -> BTreeMap<String, Point> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let exported = self.exporter.get_finished_metrics().expect("metrics");
        let mut points = BTreeMap::new();
        let last = exported.last().expect("one export");
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                let name = metric.name();
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            let value = i64::try_from(p.value()).expect("small");
                            points.insert(key(name, p.attributes()), Point::Sum(value));
                        }
                    }
                    AggregatedMetrics::I64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            points.insert(key(name, p.attributes()), Point::Sum(p.value()));
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            points.insert(
                                key(name, p.attributes()),
                                Point::Histogram {
                                    count: p.count(),
                                    sum: p.sum(),
                                },
                            );
                        }
                    }
                    // The sampled gauges are read with `raw`.
                    AggregatedMetrics::F64(MetricData::Gauge(_))
                    | AggregatedMetrics::U64(MetricData::Gauge(_)) => {}
                    other => panic!("unexpected data for {name}: {other:?}"),
                }
            }
        }
        points
    }

    /// The first value `find` gives for a metric of the latest export (for
    /// the data kinds `collect` does not flatten, such as gauges); panics
    /// without one.
    pub fn raw<T>(
        &self,
        find: impl Fn(&opentelemetry_sdk::metrics::data::Metric) -> Option<T>,
    ) -> T {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let exported = self.exporter.get_finished_metrics().expect("metrics");
        let last = exported.last().expect("one export");
        last.scope_metrics()
            .flat_map(|s| s.metrics())
            .find_map(find)
            .expect("the metric in the export")
    }

    /// The bucket bounds of the first histogram point of `name`.
    pub fn bounds(&self, name: &str) -> Vec<f64> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let exported = self.exporter.get_finished_metrics().expect("metrics");
        for scope in exported.iter().flat_map(|r| r.scope_metrics()) {
            for metric in scope.metrics().filter(|m| m.name() == name) {
                if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data() {
                    if let Some(p) = h.data_points().next() {
                        return p.bounds().collect();
                    }
                }
            }
        }
        panic!("no histogram {name}")
    }

    /// The unit of `name`.
    pub fn unit(&self, name: &str) -> String {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let exported = self.exporter.get_finished_metrics().expect("metrics");
        exported
            .iter()
            .flat_map(|r| r.scope_metrics())
            .flat_map(|s| s.metrics())
            .find(|m| m.name() == name)
            .map(|m| m.unit().to_owned())
            .unwrap_or_else(|| panic!("no instrument {name}"))
    }
}

fn key<'a>(name: &str, attributes: impl Iterator<Item = &'a opentelemetry::KeyValue>) -> String {
    let mut pairs: Vec<String> = attributes
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    pairs.sort();
    format!("{name}{{{}}}", pairs.join(","))
}

/// Shorthand for building expected maps.
pub fn sum(key: &str, value: i64) -> (String, Point) {
    (key.to_owned(), Point::Sum(value))
}

/// Shorthand for building expected maps.
pub fn hist(key: &str, count: u64, sum: f64) -> (String, Point) {
    (key.to_owned(), Point::Histogram { count, sum })
}
