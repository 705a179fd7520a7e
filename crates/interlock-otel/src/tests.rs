//! Storage and pipeline events cannot be built outside the core yet, so
//! their mapping is checked here, one step below `on_event`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::io;

use interlock::State;
use support::{Collector, Point};

use super::{OtelEventListener, Series, StorageEvent};

#[test]
fn storage_events_carry_breaker_event_and_error() {
    let collector = Collector::new();
    let listener = OtelEventListener::with_meter(&collector.meter());
    let error = io::Error::other("connection refused");
    listener.storage_event("orders", StorageEvent::Degraded(&error));
    listener.storage_event("orders", StorageEvent::WriteDropped);
    listener.storage_event("orders", StorageEvent::WriteDropped);
    listener.storage_event("orders", StorageEvent::Recovered);
    listener.storage_event("orders", StorageEvent::NoticesUnavailable);

    let points = collector.collect();
    let get = |key: &str| points.get(key).cloned();
    assert_eq!(
        get("interlock.storage.events{breaker=orders,error=connection refused,event=degraded}"),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get("interlock.storage.events{breaker=orders,event=write_dropped}"),
        Some(Point::Sum(2))
    );
    assert_eq!(
        get("interlock.storage.events{breaker=orders,event=recovered}"),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get("interlock.storage.events{breaker=orders,event=notices_unavailable}"),
        Some(Point::Sum(1))
    );
    // A storage event is a breaker's first sighting like any other.
    assert_eq!(
        get("interlock.state{breaker=orders,state=closed}"),
        Some(Point::Sum(1))
    );
}

#[test]
fn pipeline_events_carry_name_and_event() {
    let collector = Collector::new();
    let listener = OtelEventListener::with_meter(&collector.meter());
    listener.pipeline_event("recs", "retry");
    listener.pipeline_event("recs", "retry");
    listener.pipeline_event("recs", "bulkhead_rejected");
    listener.pipeline_event("recs", "fallback");

    let points = collector.collect();
    let get = |key: &str| points.get(key).cloned();
    assert_eq!(
        get("interlock.pipeline.events{event=retry,name=recs}"),
        Some(Point::Sum(2))
    );
    assert_eq!(
        get("interlock.pipeline.events{event=bulkhead_rejected,name=recs}"),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get("interlock.pipeline.events{event=fallback,name=recs}"),
        Some(Point::Sum(1))
    );
    assert_eq!(listener.breaker_count(), 0, "a strategy is not a breaker");
}

#[test]
fn series_index_matches_the_enums() {
    let series = Series::new("x");
    for state in State::ALL {
        assert_eq!(series.state(state)[1].value.as_str(), state.as_str());
    }
    for outcome in super::OUTCOMES {
        assert_eq!(series.call(outcome)[1].value.as_str(), outcome.as_str());
    }
}
