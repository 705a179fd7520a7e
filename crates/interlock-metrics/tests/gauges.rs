//! Issue 25: the state gauge learns each breaker's initial state when it is
//! created (shadow mode reads `metrics_only`), the sampled window gauges and
//! the retry-after gauge that tells a waiting OPEN from an elapsed one, and
//! a storage error's label that is its type, not its message.

mod support;

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use interlock::{Config, Event, EventListener, ManualClock, Registry, SlidingWindow, State};
use interlock_metrics::{MetricsEventListener, names};
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect};

fn fail(breaker: &interlock::CircuitBreaker) {
    let _ = breaker.call(|| Err::<(), _>(io::Error::other("503")));
}

#[test]
fn a_shadow_mode_registry_reads_metrics_only_without_telling_the_listener() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        // The listener is not told `initial_state`: it learns it from the
        // breaker's creation.
        let registry = Registry::builder()
            .initial_state(State::MetricsOnly)
            .listener(MetricsEventListener::new())
            .build()
            .unwrap();
        let _ = registry.get("inventory");
    });
    let values = collect(&snapshotter);
    let state = |s: &str| {
        values
            .get(&format!("{}{{breaker=inventory,state={s}}}", names::STATE))
            .cloned()
    };
    assert_eq!(
        state("metrics_only"),
        Some(Value::Gauge(1.0)),
        "{values:#?}"
    );
    assert_eq!(state("closed"), Some(Value::Gauge(0.0)));
}

#[test]
fn sampled_gauges_tell_a_waiting_open_from_an_elapsed_one() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let listener = Arc::new(MetricsEventListener::new());
    let registry = metrics::with_local_recorder(&recorder, || {
        let registry = Registry::builder()
            .config(
                Config::builder()
                    .minimum_number_of_calls(4)
                    .sliding_window(SlidingWindow::count(4))
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
        fail(&search);
        fail(&search);
        listener.sample(&registry);
        registry
    });
    let values = collect(&snapshotter);
    let gauge = |name: &str| values.get(&format!("{name}{{breaker=search}}")).cloned();
    assert_eq!(gauge(names::BUFFERED_CALLS), Some(Value::Gauge(3.0)));
    let Some(Value::Gauge(rate)) = gauge(names::FAILURE_RATE) else {
        panic!("{values:#?}")
    };
    assert!((rate - 2.0 / 3.0).abs() < 1e-9, "{rate}");
    assert_eq!(gauge(names::SLOW_CALL_RATE), Some(Value::Gauge(0.0)));
    assert_eq!(
        gauge(names::RETRY_AFTER),
        Some(Value::Gauge(0.0)),
        "CLOSED: 0"
    );

    // Trip it: OPEN with the whole wait ahead.
    metrics::with_local_recorder(&recorder, || {
        fail(&registry.get("search"));
        listener.sample(&registry);
    });
    let values = collect(&snapshotter);
    let gauge = |name: &str| values.get(&format!("{name}{{breaker=search}}")).cloned();
    assert_eq!(gauge(names::RETRY_AFTER), Some(Value::Gauge(30.0)));

    // Idle past the wait: the state gauge still says open (no event moved
    // it), the retry-after gauge says the wait is over.
    clock.advance(Duration::from_secs(31));
    metrics::with_local_recorder(&recorder, || listener.sample(&registry));
    let values = collect(&snapshotter);
    assert_eq!(registry.get("search").state(), State::Open);
    assert_eq!(
        values.get(&format!("{}{{breaker=search}}", names::RETRY_AFTER)),
        Some(&Value::Gauge(0.0))
    );
}

/// A storage error whose message changes every time (a timestamp, an
/// address): the label must not.
#[derive(Debug)]
struct ReadFailed(String);

impl fmt::Display for ReadFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read failed: {}", self.0)
    }
}

impl std::error::Error for ReadFailed {}

#[test]
fn the_degraded_error_label_is_a_type_name_with_bounded_cardinality() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let listener = MetricsEventListener::new();
        for i in 0..50 {
            let error = ReadFailed(format!("10.0.0.{i}:6379 at t={i}"));
            listener.on_event(&Event::storage_degraded("orders", &error));
        }
        let timeout = io::Error::new(io::ErrorKind::TimedOut, "after 250ms");
        listener.on_event(&Event::storage_degraded("orders", &timeout));
    });
    let values = collect(&snapshotter);
    let series: Vec<_> = values
        .iter()
        .filter(|(k, _)| k.starts_with(names::STORAGE_EVENTS))
        .collect();
    assert_eq!(
        series,
        [
            (
                &format!(
                    "{}{{breaker=orders,error=ReadFailed,event=degraded}}",
                    names::STORAGE_EVENTS
                ),
                &Value::Counter(50)
            ),
            (
                &format!(
                    "{}{{breaker=orders,error=TimedOut,event=degraded}}",
                    names::STORAGE_EVENTS
                ),
                &Value::Counter(1)
            ),
        ]
    );
}
