//! Storage and pipeline events cannot be built outside the core yet, so
//! their mapping is checked here, one step below `on_event`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io;

use interlock::State;
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect};

use super::{Handles, MetricsEventListener, OUTCOMES, StorageEvent};

#[test]
fn storage_events_carry_breaker_event_and_error() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let listener = MetricsEventListener::new();
        let error = io::Error::other("connection refused");
        listener.storage_event("orders", StorageEvent::Degraded(&error));
        listener.storage_event("orders", StorageEvent::WriteDropped);
        listener.storage_event("orders", StorageEvent::WriteDropped);
        listener.storage_event("orders", StorageEvent::Recovered);
        listener.storage_event("orders", StorageEvent::NoticesUnavailable);
    });
    let values = collect(&snapshotter);
    assert_eq!(
        values["interlock_storage_events_total{breaker=orders,error=Other,event=degraded}"],
        Value::Counter(1)
    );
    assert_eq!(
        values["interlock_storage_events_total{breaker=orders,event=write_dropped}"],
        Value::Counter(2)
    );
    assert_eq!(
        values["interlock_storage_events_total{breaker=orders,event=recovered}"],
        Value::Counter(1)
    );
    assert_eq!(
        values["interlock_storage_events_total{breaker=orders,event=notices_unavailable}"],
        Value::Counter(1)
    );
    // A storage event is a breaker's first sighting like any other.
    assert_eq!(
        values["interlock_state{breaker=orders,state=closed}"],
        Value::Gauge(1.0)
    );
}

#[test]
fn pipeline_events_carry_name_and_event() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let listener = metrics::with_local_recorder(&recorder, || {
        let listener = MetricsEventListener::new();
        listener.pipeline_event("recs", "retry");
        listener.pipeline_event("recs", "retry");
        listener.pipeline_event("recs", "bulkhead_rejected");
        listener.pipeline_event("recs", "fallback");
        listener
    });
    let values = collect(&snapshotter);
    assert_eq!(
        values["interlock_pipeline_events_total{event=retry,name=recs}"],
        Value::Counter(2)
    );
    assert_eq!(
        values["interlock_pipeline_events_total{event=bulkhead_rejected,name=recs}"],
        Value::Counter(1)
    );
    assert_eq!(
        values["interlock_pipeline_events_total{event=fallback,name=recs}"],
        Value::Counter(1)
    );
    assert_eq!(listener.breaker_count(), 0, "a strategy is not a breaker");
}

#[test]
fn handle_index_matches_the_enums() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let handles = Handles::new("x");
        for (i, state) in State::ALL.into_iter().enumerate() {
            handles.state(state).set(i as f64);
        }
        for (i, outcome) in OUTCOMES.into_iter().enumerate() {
            handles.call(outcome).record(i as f64);
        }
    });
    let values = collect(&snapshotter);
    for (i, state) in State::ALL.into_iter().enumerate() {
        assert_eq!(
            values[&format!("interlock_state{{breaker=x,state={state}}}")],
            Value::Gauge(i as f64)
        );
    }
    for (i, outcome) in OUTCOMES.into_iter().enumerate() {
        assert_eq!(
            values[&format!("interlock_call_duration_seconds{{breaker=x,outcome={outcome}}}")],
            Value::Histogram(vec![i as f64])
        );
    }
}
