//! Issue 25: the state gauge learns each breaker's initial state when it is
//! created, the sampled window and retry-after gauges, and attributes named
//! as the original (`strategy`, `event`, `error` = a type name) plus their
//! namespaced forms, with bounded cardinality.

mod support;

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use interlock::{Config, Event, EventListener, ManualClock, Registry, SlidingWindow, State};
use interlock_otel::OtelEventListener;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use support::{Collector, Point};

#[test]
fn a_shadow_mode_registry_reads_metrics_only_without_telling_the_listener() {
    let collector = Collector::new();
    let registry = Registry::builder()
        .initial_state(State::MetricsOnly)
        .listener(OtelEventListener::with_meter(&collector.meter()))
        .build()
        .unwrap();
    let _ = registry.get("inventory");
    let points = collector.collect();
    assert_eq!(
        points.get("interlock.state{breaker=inventory,state=metrics_only}"),
        Some(&Point::Sum(1)),
        "{points:#?}"
    );
    assert_eq!(
        points.get("interlock.state{breaker=inventory,state=closed}"),
        Some(&Point::Sum(0))
    );
}

/// The last value of gauge `name` for `breaker`.
fn gauge(collector: &Collector, name: &str) -> f64 {
    collector.raw(|metric| {
        if metric.name() != name {
            return None;
        }
        match metric.data() {
            AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                g.data_points().next().map(|p| p.value())
            }
            #[allow(clippy::cast_precision_loss, reason = "small test values")]
            AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                g.data_points().next().map(|p| p.value() as f64)
            }
            _ => None,
        }
    })
}

#[test]
fn sampled_gauges_tell_a_waiting_open_from_an_elapsed_one() {
    let collector = Collector::new();
    let clock = ManualClock::new();
    let listener = Arc::new(OtelEventListener::with_meter(&collector.meter()));
    let registry = Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .wait_duration_in_open(Duration::from_secs(30))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .listener(listener.clone())
        .build()
        .unwrap();
    let search = registry.get("search");
    let _ = search.call(|| Ok::<_, io::Error>(()));
    listener.sample(&registry);
    assert_eq!(gauge(&collector, "interlock.buffered_calls"), 1.0);
    assert_eq!(gauge(&collector, "interlock.failure_rate"), 0.0);
    assert_eq!(gauge(&collector, "interlock.retry_after"), 0.0);

    let _ = search.call(|| Err::<(), _>(io::Error::other("503")));
    assert_eq!(search.state(), State::Open);
    listener.sample(&registry);
    assert_eq!(gauge(&collector, "interlock.retry_after"), 30.0);

    clock.advance(Duration::from_secs(31));
    listener.sample(&registry);
    assert_eq!(search.state(), State::Open, "idle: no event moved it");
    assert_eq!(gauge(&collector, "interlock.retry_after"), 0.0);
}

#[derive(Debug)]
struct ReadFailed(String);

impl fmt::Display for ReadFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read failed: {}", self.0)
    }
}

impl std::error::Error for ReadFailed {}

#[test]
fn attributes_are_named_as_the_original_with_namespaced_forms_and_stay_bounded() {
    let collector = Collector::new();
    let listener = OtelEventListener::with_meter(&collector.meter());
    for i in 0..50 {
        let error = ReadFailed(format!("10.0.0.{i}:6379 at t={i}"));
        listener.on_event(&Event::storage_degraded("orders", &error));
        let fallback = io::Error::new(io::ErrorKind::TimedOut, format!("after {i} ms"));
        listener.on_event(&Event::fallback_used("price-cache", &fallback));
    }
    listener.on_event(&Event::bulkhead_rejected("price-cache"));
    let points = collector.collect();
    let pipeline: Vec<_> = points
        .keys()
        .filter(|k| {
            k.starts_with("interlock.pipeline.events") || k.starts_with("interlock.storage.events")
        })
        .cloned()
        .collect();
    assert_eq!(
        pipeline,
        [
            "interlock.pipeline.events{error.type=TimedOut,error=TimedOut,event=fallback,interlock.event=fallback,interlock.strategy=price-cache,strategy=price-cache}",
            "interlock.pipeline.events{event=bulkhead_rejected,interlock.event=bulkhead_rejected,interlock.strategy=price-cache,strategy=price-cache}",
            "interlock.storage.events{breaker=orders,error.type=ReadFailed,error=ReadFailed,event=degraded,interlock.event=degraded}",
        ]
    );
    assert_eq!(
        points["interlock.storage.events{breaker=orders,error.type=ReadFailed,error=ReadFailed,event=degraded,interlock.event=degraded}"],
        Point::Sum(50)
    );
}
