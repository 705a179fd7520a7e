//! A breaker its registry forgets (`Event::BreakerRemoved`) leaves the
//! listener: its `interlock.state` series read 0 in every state, and the
//! listener keeps nothing for it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use interlock::{ManualClock, Registry, State};
use interlock_otel::OtelEventListener;
use support::{Collector, Point};

fn ok() -> Result<(), std::io::Error> {
    Ok(())
}

#[test]
fn an_evicted_breaker_reads_zero_in_every_state_and_is_forgotten() {
    let collector = Collector::new();
    let listener = Arc::new(OtelEventListener::with_meter(&collector.meter()));
    let clock = ManualClock::new();
    let registry = Registry::builder()
        .clock(clock.clone())
        .max_breakers(1)
        .listener(listener.clone())
        .build()
        .unwrap();
    let first = registry.get("first.example.com:443");
    first.force_open();
    first.reset(); // forced_open -> closed -> (reset)
    first.force_open();
    assert_eq!(listener.breaker_count(), 1);
    clock.advance(Duration::from_secs(1));
    registry.get("second.example.com:443").call(ok).unwrap(); // evicts the first
    assert_eq!(registry.names(), ["second.example.com:443"]);
    assert_eq!(listener.breaker_count(), 1);

    let points = collector.collect();
    for state in State::ALL {
        let key = format!(
            "interlock.state{{breaker=first.example.com:443,state={}}}",
            state.as_str()
        );
        // Exported (cumulative), at 0.
        assert_eq!(points.get(&key), Some(&Point::Sum(0)), "{key}");
    }
    assert_eq!(
        points.get("interlock.state{breaker=second.example.com:443,state=closed}"),
        Some(&Point::Sum(1))
    );
}

/// The listener finds a breaker's series without a lock on threads that
/// used it lately (`interlock::PerBreaker`). A thread that cached the
/// series of a breaker removed since must not use them for a new breaker
/// of the same name: the new one's state is seeded afresh, and removing it
/// takes everything back again.
#[test]
fn a_thread_that_cached_a_removed_breakers_series_starts_afresh() {
    let collector = Collector::new();
    let listener = Arc::new(OtelEventListener::with_meter(&collector.meter()));
    let registry = Registry::builder()
        .listener(listener.clone())
        .build()
        .unwrap();
    let state = |points: &std::collections::BTreeMap<String, Point>, state: State| {
        points
            .get(&format!(
                "interlock.state{{breaker=host,state={}}}",
                state.as_str()
            ))
            .cloned()
    };
    let (removed_tx, removed_rx) = std::sync::mpsc::channel();
    let (cached_tx, cached_rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let registry = &registry;
        s.spawn(move || {
            registry.get("host").force_open(); // this thread caches the series
            cached_tx.send(()).unwrap();
            removed_rx.recv().unwrap();
            registry.get("host").force_open(); // a new breaker, same name
            cached_tx.send(()).unwrap();
        });
        cached_rx.recv().unwrap();
        registry.remove("host").unwrap();
        let points = collector.collect();
        for s in State::ALL {
            assert_eq!(state(&points, s), Some(Point::Sum(0)), "removed: {s:?}");
        }
        removed_tx.send(()).unwrap();
        cached_rx.recv().unwrap();
    });
    let points = collector.collect();
    assert_eq!(state(&points, State::Closed), Some(Point::Sum(0)));
    assert_eq!(state(&points, State::ForcedOpen), Some(Point::Sum(1)));
    registry.remove("host").unwrap();
    let points = collector.collect();
    for s in State::ALL {
        assert_eq!(
            state(&points, s),
            Some(Point::Sum(0)),
            "removed again: {s:?}"
        );
    }
    assert_eq!(listener.breaker_count(), 0);
}
