//! Hedging, rate limiting and chaos, as real strategies run them, in
//! `interlock_pipeline_events_total`.

mod support;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::ManualClock;
use interlock::pipeline::{Hedge, ManualSleeper, Pipeline, RateLimit, chaos};
use interlock_metrics::MetricsEventListener;
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect};

#[test]
fn hedges_refusals_and_injections_are_counted_by_strategy_and_event() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let listener = metrics::with_local_recorder(&recorder, || {
        let listener = Arc::new(MetricsEventListener::new());

        // A hedge that replaces a failed first attempt (no wait involved).
        let hedge = Pipeline::builder()
            .hedge(
                Hedge::builder(Duration::from_secs(3600))
                    .name("search")
                    .listener(listener.clone())
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
                    .listener(listener.clone())
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
            .listener(listener.clone())
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
                    .listener(listener.clone())
                    .build()
                    .unwrap(),
            )
            .chaos(
                chaos::Fault::builder(|| io::Error::other("injected"))
                    .name("chaos")
                    .injection_rate(1.0)
                    .listener(listener.clone())
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
                    .listener(listener.clone())
                    .build()
                    .unwrap(),
            )
            .build();
        assert_eq!(stale.call(|| Ok::<_, io::Error>(1)).unwrap(), 0);
        listener
    });

    let values = collect(&snapshotter);
    let get = |key: &str| values.get(key).cloned();
    assert_eq!(
        get("interlock_pipeline_events_total{event=hedge,name=search}"),
        Some(Value::Counter(1))
    );
    assert_eq!(
        get("interlock_pipeline_events_total{event=rate_limit_rejected,name=geocoder}"),
        Some(Value::Counter(2))
    );
    assert_eq!(
        get("interlock_pipeline_events_total{event=rate_limit_rejected,name=hosts}"),
        Some(Value::Counter(1)),
        "one series for every key"
    );
    assert_eq!(
        get("interlock_pipeline_events_total{event=latency_injected,name=chaos}"),
        Some(Value::Counter(1))
    );
    assert_eq!(
        get("interlock_pipeline_events_total{event=fault_injected,name=chaos}"),
        Some(Value::Counter(1))
    );
    assert_eq!(
        get("interlock_pipeline_events_total{event=outcome_injected,name=cache}"),
        Some(Value::Counter(1))
    );
    let pipeline_series = values
        .keys()
        .filter(|k| k.starts_with("interlock_pipeline_events_total"))
        .count();
    assert_eq!(pipeline_series, 6, "{values:?}");
    assert_eq!(listener.breaker_count(), 0, "a strategy is not a breaker");
}
