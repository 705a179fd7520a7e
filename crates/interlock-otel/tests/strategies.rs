//! Hedging, rate limiting and chaos, as real strategies run them, in
//! `interlock.pipeline.events`.

mod support;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::ManualClock;
use interlock::pipeline::{Hedge, ManualSleeper, Pipeline, RateLimit, chaos};
use interlock_otel::OtelEventListener;
use support::{Collector, Point};

#[test]
fn hedges_refusals_and_injections_are_counted_by_strategy_and_event() {
    let collector = Collector::new();
    let otel = Arc::new(OtelEventListener::with_meter(&collector.meter()));
    let clock = ManualClock::new();

    // A hedge that replaces a failed first attempt (no wait involved).
    let hedge = Pipeline::builder()
        .hedge(
            Hedge::builder(Duration::from_secs(3600))
                .name("search")
                .listener(otel.clone())
                .build()
                .unwrap(),
        )
        .build();
    let attempts = Arc::new(AtomicU32::new(0));
    let seen = attempts.clone();
    let answer = hedge.call(move || match seen.fetch_add(1, Ordering::SeqCst) {
        0 => Err(io::Error::other("reset")),
        _ => Ok("hit"),
    });
    assert_eq!(answer.unwrap(), "hit");

    // A limit of one call per second, hit three times; and a keyed one.
    let limited = Pipeline::builder()
        .rate_limit(
            RateLimit::per_second(1)
                .name("geocoder")
                .clock(clock.clone())
                .listener(otel.clone())
                .build()
                .unwrap(),
        )
        .build();
    for _ in 0..3 {
        let _ = limited.call(|| Ok::<_, io::Error>(()));
    }
    let hosts = RateLimit::per_second(1)
        .name("hosts")
        .clock(clock.clone())
        .listener(otel.clone())
        .build_keyed()
        .unwrap();
    for host in ["a", "b", "a"] {
        let _ = hosts.key(host).check();
    }

    // Every chaos strategy at rate 1.
    let chaotic = Pipeline::builder()
        .chaos(
            chaos::Latency::builder(Duration::from_millis(5))
                .name("chaos")
                .injection_rate(1.0)
                .sleeper(ManualSleeper::new(clock.clone()))
                .listener(otel.clone())
                .build()
                .unwrap(),
        )
        .chaos(
            chaos::Fault::builder(|| io::Error::other("injected"))
                .name("chaos")
                .injection_rate(1.0)
                .listener(otel.clone())
                .build()
                .unwrap(),
        )
        .build();
    let _ = chaotic.call(|| Ok::<_, io::Error>(()));
    let stale = Pipeline::builder()
        .chaos(
            chaos::Outcome::builder(|| Ok::<_, io::Error>(0))
                .name("cache")
                .injection_rate(1.0)
                .listener(otel.clone())
                .build()
                .unwrap(),
        )
        .build();
    assert_eq!(stale.call(|| Ok::<_, io::Error>(1)).unwrap(), 0);

    let points = collector.collect();
    let get = |key: &str| points.get(key).cloned();
    assert_eq!(
        get(
            "interlock.pipeline.events{event=hedge,interlock.event=hedge,interlock.strategy=search,strategy=search}"
        ),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(
            "interlock.pipeline.events{event=rate_limit_rejected,interlock.event=rate_limit_rejected,interlock.strategy=geocoder,strategy=geocoder}"
        ),
        Some(Point::Sum(2))
    );
    assert_eq!(
        get(
            "interlock.pipeline.events{event=rate_limit_rejected,interlock.event=rate_limit_rejected,interlock.strategy=hosts,strategy=hosts}"
        ),
        Some(Point::Sum(1)),
        "one series for every key"
    );
    assert_eq!(
        get(
            "interlock.pipeline.events{event=latency_injected,interlock.event=latency_injected,interlock.strategy=chaos,strategy=chaos}"
        ),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(
            "interlock.pipeline.events{event=fault_injected,interlock.event=fault_injected,interlock.strategy=chaos,strategy=chaos}"
        ),
        Some(Point::Sum(1))
    );
    assert_eq!(
        get(
            "interlock.pipeline.events{event=outcome_injected,interlock.event=outcome_injected,interlock.strategy=cache,strategy=cache}"
        ),
        Some(Point::Sum(1))
    );
    let pipeline_series = points
        .keys()
        .filter(|k| k.starts_with("interlock.pipeline.events"))
        .count();
    assert_eq!(pipeline_series, 6, "{points:?}");
    assert_eq!(otel.breaker_count(), 0, "a strategy is not a breaker");
}
