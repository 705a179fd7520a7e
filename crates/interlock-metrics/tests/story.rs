//! The exact metrics, labels and values after a scripted story: trip,
//! probe, recover, reset, disable (calls keep flowing), force open and reset
//! again, all on a `ManualClock`.

mod support;

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CircuitBreaker, Config, Event, EventListener, FanOut, ManualClock, SlidingWindow, State,
};
use interlock_metrics::{MetricsEventListener, names};
use metrics::Unit;
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect, described};

fn breaker(name: &str, clock: &ManualClock, listener: impl EventListener) -> CircuitBreaker {
    let config = Config::builder()
        .minimum_number_of_calls(4)
        .sliding_window(SlidingWindow::count(4))
        .slow_call_duration_threshold(Duration::from_secs(1))
        .wait_duration_in_open(Duration::from_secs(1))
        .permitted_calls_in_half_open(2)
        .build()
        .expect("test setup");
    CircuitBreaker::builder(name)
        .config(config)
        .clock(clock.clone())
        .listener(listener)
        .build()
        .expect("test setup")
}

/// A call that takes `ms` on `clock` and succeeds or fails.
fn call(breaker: &CircuitBreaker, clock: &ManualClock, ms: u64, ok: bool) {
    let _ = breaker.call(|| {
        clock.advance(Duration::from_millis(ms));
        if ok {
            Ok(())
        } else {
            Err(io::Error::other("503"))
        }
    });
}

/// The story, checked step by step against the breaker's own state.
fn story(breaker: &CircuitBreaker, clock: &ManualClock) {
    call(breaker, clock, 250, true);
    call(breaker, clock, 2_000, true); // slow
    call(breaker, clock, 500, false);
    call(breaker, clock, 125, false);
    assert_eq!(breaker.state(), State::Open);
    call(breaker, clock, 0, true); // rejected
    clock.advance(Duration::from_secs(1));
    call(breaker, clock, 250, true); // probe 1 (open -> half_open)
    assert_eq!(breaker.state(), State::HalfOpen);
    call(breaker, clock, 250, true); // probe 2 (half_open -> closed)
    assert_eq!(breaker.state(), State::Closed);
    breaker.reset(); // no state change
    breaker.disable();
    call(breaker, clock, 500, false); // still measured
    call(breaker, clock, 125, true);
    assert_eq!(
        breaker.snapshot().total_calls,
        0,
        "disabled: the window records nothing"
    );
    breaker.force_open();
    call(breaker, clock, 0, true); // rejected
    breaker.reset();
    assert_eq!(breaker.state(), State::Closed);
}

fn expected_story(name: &str) -> BTreeMap<String, Value> {
    let b = format!("breaker={name}");
    let mut expected = BTreeMap::new();
    let mut put = |key: String, value: Value| expected.insert(key, value);
    put(
        format!("interlock_call_duration_seconds{{{b},outcome=success}}"),
        Value::Histogram(vec![0.25, 0.25, 0.25, 0.125]),
    );
    put(
        format!("interlock_call_duration_seconds{{{b},outcome=slow_success}}"),
        Value::Histogram(vec![2.0]),
    );
    put(
        format!("interlock_call_duration_seconds{{{b},outcome=failure}}"),
        Value::Histogram(vec![0.5, 0.125, 0.5]),
    );
    // Registered at first sight, never recorded.
    put(
        format!("interlock_call_duration_seconds{{{b},outcome=slow_failure}}"),
        Value::Histogram(vec![]),
    );
    put(
        format!("interlock_call_rejected_total{{{b}}}"),
        Value::Counter(2),
    );
    put(format!("interlock_reset_total{{{b}}}"), Value::Counter(2));
    for (from, to) in [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
        ("closed", "disabled"),
        ("disabled", "forced_open"),
        ("forced_open", "closed"),
    ] {
        put(
            format!("interlock_state_changes_total{{{b},from={from},to={to}}}"),
            Value::Counter(1),
        );
    }
    for state in State::ALL {
        let value = if state == State::Closed { 1.0 } else { 0.0 };
        put(
            format!("interlock_state{{{b},state={state}}}"),
            Value::Gauge(value),
        );
    }
    expected
}

#[test]
fn trip_and_recover_story_records_exact_metrics() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = breaker("payments", &clock, MetricsEventListener::new());
        story(&b, &clock);
    });
    assert_eq!(collect(&snapshotter), expected_story("payments"));
}

#[test]
fn metrics_are_described_with_units() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let b = breaker("payments", &clock, MetricsEventListener::new());
        story(&b, &clock);
    });
    let described = described(&snapshotter);
    assert_eq!(described[names::CALL_DURATION], (Some(Unit::Seconds), true));
    for name in [
        names::CALL_REJECTED,
        names::STATE_CHANGES,
        names::RESET,
        names::STATE,
    ] {
        assert_eq!(described[name], (None, true), "{name}");
    }
}

#[test]
fn disabled_breaker_keeps_call_metrics_flowing() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let b = metrics::with_local_recorder(&recorder, || {
        let b = breaker("audit", &clock, MetricsEventListener::new());
        b.disable();
        b
    });
    // Handles are cached, so later calls land in the same recorder.
    for _ in 0..3 {
        call(&b, &clock, 250, false);
    }
    call(&b, &clock, 500, true);
    assert_eq!(b.state(), State::Disabled, "never trips");
    assert_eq!(b.snapshot().total_calls, 0);

    let values = collect(&snapshotter);
    assert_eq!(
        values["interlock_call_duration_seconds{breaker=audit,outcome=failure}"],
        Value::Histogram(vec![0.25; 3])
    );
    assert_eq!(
        values["interlock_call_duration_seconds{breaker=audit,outcome=success}"],
        Value::Histogram(vec![0.5])
    );
    assert_eq!(
        values["interlock_state{breaker=audit,state=disabled}"],
        Value::Gauge(1.0)
    );
    assert_eq!(
        values["interlock_state{breaker=audit,state=closed}"],
        Value::Gauge(0.0)
    );
}

#[test]
fn a_panicking_listener_does_not_stop_the_others() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(0_usize));
    let counter = seen.clone();
    metrics::with_local_recorder(&recorder, || {
        let fan_out = FanOut::new()
            .with(|_: &Event<'_>| panic!("a broken exporter"))
            .with(MetricsEventListener::new())
            .with(move |_: &Event<'_>| *counter.lock().unwrap() += 1)
            .with(|_: &Event<'_>| panic!("another broken exporter"));
        let b = breaker("payments", &clock, fan_out);
        story(&b, &clock);
    });
    assert_eq!(collect(&snapshotter), expected_story("payments"));
    // 8 settled calls, 2 rejections, 6 state changes, 2 resets.
    assert_eq!(*seen.lock().unwrap(), 18);
}

#[test]
fn breakers_are_told_apart_and_start_where_told() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    metrics::with_local_recorder(&recorder, || {
        let listener = Arc::new(MetricsEventListener::new().initial_state(State::MetricsOnly));
        let shadow = |name: &str| {
            CircuitBreaker::builder(name)
                .clock(clock.clone())
                .initial_state(State::MetricsOnly)
                .listener(listener.clone())
                .build()
                .unwrap()
        };
        let (a, b) = (shadow("a"), shadow("b"));
        call(&a, &clock, 250, true);
        b.force_open();
        assert_eq!(listener.breaker_count(), 2);
    });
    let values = collect(&snapshotter);
    let gauge = |breaker: &str, state: State| {
        values[&format!("interlock_state{{breaker={breaker},state={state}}}")].clone()
    };
    assert_eq!(gauge("a", State::MetricsOnly), Value::Gauge(1.0));
    assert_eq!(gauge("a", State::Closed), Value::Gauge(0.0));
    assert_eq!(gauge("b", State::MetricsOnly), Value::Gauge(0.0));
    assert_eq!(gauge("b", State::ForcedOpen), Value::Gauge(1.0));
    assert_eq!(
        values["interlock_state_changes_total{breaker=b,from=metrics_only,to=forced_open}"],
        Value::Counter(1)
    );
}

/// Holds back the delivery of the first state change until told to go on,
/// so a later one overtakes it, as it can when two threads race.
struct Overtaken {
    inner: MetricsEventListener,
    held: Mutex<Option<(std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>)>>,
}

impl EventListener for Overtaken {
    fn on_event(&self, event: &Event<'_>) {
        if let Event::StateChanged { .. } = event {
            let hold = self.held.lock().expect("test setup").take();
            if let Some((arrived, go)) = hold {
                arrived.send(()).expect("test setup");
                go.recv().expect("test setup");
            }
        }
        self.inner.on_event(event);
    }
}

#[test]
fn state_gauge_is_right_whatever_the_delivery_order() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (arrived_tx, arrived_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel();
    metrics::with_local_recorder(&recorder, || {
        let listener = Overtaken {
            inner: MetricsEventListener::new(),
            held: Mutex::new(Some((arrived_tx, go_rx))),
        };
        let b = CircuitBreaker::builder("race")
            .listener(listener)
            .build()
            .unwrap();
        // The first event registers the handles on this thread's recorder.
        b.reset();
        std::thread::scope(|s| {
            let first = s.spawn(|| b.force_open()); // closed -> forced_open, held back
            arrived_rx.recv().unwrap();
            b.disable(); // forced_open -> disabled, delivered first
            go_tx.send(()).unwrap();
            first.join().unwrap();
        });
    });
    let values = collect(&snapshotter);
    for state in State::ALL {
        let value = if state == State::Disabled { 1.0 } else { 0.0 };
        assert_eq!(
            values[&format!("interlock_state{{breaker=race,state={state}}}")],
            Value::Gauge(value),
            "{state}"
        );
    }
}
