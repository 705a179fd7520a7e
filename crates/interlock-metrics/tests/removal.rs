//! A breaker its registry forgets (`Event::BreakerRemoved`) leaves the
//! listener: its state series read 0, its handles are dropped, and a
//! Prometheus exporter with an idle timeout stops exporting it.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use interlock::{ManualClock, Registry};
use interlock_metrics::MetricsEventListener;
use metrics_exporter_prometheus::PrometheusBuilder;
use metrics_util::MetricKindMask;
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect};

fn ok() -> Result<(), std::io::Error> {
    Ok(())
}

#[test]
fn a_removed_breaker_reads_zero_in_every_state_and_is_forgotten() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let listener = Arc::new(MetricsEventListener::new());
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::builder()
            .listener(listener.clone())
            .build()
            .unwrap();
        registry.get("gone.example.com:443").force_open();
        registry.get("kept.example.com:443").call(ok).unwrap();
        assert_eq!(listener.breaker_count(), 2);
        registry.remove("gone.example.com:443").unwrap();
        assert_eq!(listener.breaker_count(), 1);
    });
    let values = collect(&snapshotter);
    for state in interlock::State::ALL {
        let key = format!(
            "interlock_state{{breaker=gone.example.com:443,state={}}}",
            state.as_str()
        );
        assert_eq!(values[&key], Value::Gauge(0.0), "{key}");
    }
    assert_eq!(
        values["interlock_state{breaker=kept.example.com:443,state=closed}"],
        Value::Gauge(1.0)
    );
}

#[test]
fn an_expired_breaker_is_forgotten_and_a_new_one_starts_from_its_initial_state() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let listener = Arc::new(MetricsEventListener::new());
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::builder()
            .clock(clock.clone())
            .expire_after_idle(Duration::from_secs(60))
            .listener(listener.clone())
            .build()
            .unwrap();
        registry.get("a").force_open();
        clock.advance(Duration::from_secs(60));
        let _ = registry.get("b"); // sweeps "a"
        // "a" is forgotten; "b" was announced at its creation
        // (`on_breaker_created`).
        assert_eq!(listener.breaker_count(), 1, "only b is known");
        registry.get("a").call(ok).unwrap(); // a new "a"
        assert_eq!(listener.breaker_count(), 2);
    });
    let values = collect(&snapshotter);
    assert_eq!(
        values["interlock_state{breaker=a,state=closed}"],
        Value::Gauge(1.0)
    );
    assert_eq!(
        values["interlock_state{breaker=a,state=forced_open}"],
        Value::Gauge(0.0)
    );
}

/// Through a real exporter: with `idle_timeout`, the forgotten breaker's
/// series leave the Prometheus text while a busy breaker's stay.
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "the exporter's idle timeout runs on real time (its own clock): polled with a deadline"
)]
fn prometheus_stops_exporting_a_removed_breaker_after_its_idle_timeout() {
    let recorder = PrometheusBuilder::new()
        .idle_timeout(MetricKindMask::ALL, Some(Duration::from_millis(300)))
        .build_recorder();
    let handle = recorder.handle();
    let listener = Arc::new(MetricsEventListener::new());
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::builder()
            .listener(listener.clone())
            .build()
            .unwrap();
        let gone = registry.get("gone.internal:443");
        let kept = registry.get("kept.internal:443");
        gone.call(ok).unwrap();
        kept.call(ok).unwrap();
        let text = handle.render();
        assert!(text.contains("breaker=\"gone.internal:443\""), "{text}");
        registry.remove("gone.internal:443").unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            kept.call(ok).unwrap(); // keeps its series fresh
            let text = handle.render();
            if !text.contains("gone.internal:443") {
                assert!(text.contains("breaker=\"kept.internal:443\""), "{text}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "still exported after 60 s: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}
