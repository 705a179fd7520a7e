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
