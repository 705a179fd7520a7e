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
        get(
            "interlock.storage.events{breaker=orders,error.type=Other,error=Other,event=degraded,interlock.event=degraded}"
        ),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(
            "interlock.storage.events{breaker=orders,event=write_dropped,interlock.event=write_dropped}"
        ),
        Some(Point::Sum(2))
    );
    assert_eq!(
        get("interlock.storage.events{breaker=orders,event=recovered,interlock.event=recovered}"),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(
            "interlock.storage.events{breaker=orders,event=notices_unavailable,interlock.event=notices_unavailable}"
        ),
        Some(Point::Sum(1))
    );
    // A storage event is a breaker's first sighting like any other.
    assert_eq!(
        get("interlock.state{breaker=orders,state=closed}"),
        Some(Point::Sum(1))
    );
}

#[test]
fn pipeline_events_carry_strategy_and_event_as_the_original() {
    let collector = Collector::new();
    let listener = OtelEventListener::with_meter(&collector.meter());
    listener.pipeline_event("recs", "retry", None);
    listener.pipeline_event("recs", "retry", None);
    listener.pipeline_event("recs", "bulkhead_rejected", None);
    let error = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    listener.pipeline_event("recs", "fallback", Some(&error));

    let points = collector.collect();
    let get = |key: &str| points.get(key).cloned();
    let named = "interlock.strategy=recs,strategy=recs";
    assert_eq!(
        get(&format!(
            "interlock.pipeline.events{{event=retry,interlock.event=retry,{named}}}"
        )),
        Some(Point::Sum(2))
    );
    assert_eq!(
        get(&format!(
            "interlock.pipeline.events{{event=bulkhead_rejected,interlock.event=bulkhead_rejected,{named}}}"
        )),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(&format!(
            "interlock.pipeline.events{{error.type=ConnectionRefused,error=ConnectionRefused,event=fallback,interlock.event=fallback,{named}}}"
        )),
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
