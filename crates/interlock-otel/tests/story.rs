//! The exact instruments, attributes and values after a scripted story:
//! trip, probe, recover, reset, disable (calls keep flowing), force open and
//! reset again, all on a `ManualClock`.

mod support;

use std::collections::BTreeMap;
use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CircuitBreaker, Config, Event, EventListener, FanOut, ManualClock, SlidingWindow, State,
};
use interlock_otel::{DURATION_BOUNDARIES, OtelEventListener};
use support::{Collector, Point, hist, sum};

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

fn expected_story(name: &str) -> BTreeMap<String, Point> {
    let b = format!("breaker={name}");
    let mut expected: BTreeMap<String, Point> = [
        hist(
            &format!("interlock.call.duration{{{b},outcome=success}}"),
            4,
            0.875,
        ),
        hist(
            &format!("interlock.call.duration{{{b},outcome=slow_success}}"),
            1,
            2.0,
        ),
        hist(
            &format!("interlock.call.duration{{{b},outcome=failure}}"),
            3,
            1.125,
        ),
        sum(&format!("interlock.call.rejected{{{b}}}"), 2),
        sum(&format!("interlock.reset{{{b}}}"), 2),
    ]
    .into_iter()
    .collect();
    for (from, to) in [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
        ("closed", "disabled"),
        ("disabled", "forced_open"),
        ("forced_open", "closed"),
    ] {
        expected.extend([sum(
            &format!("interlock.state.changes{{{b},from={from},to={to}}}"),
            1,
        )]);
    }
    for state in State::ALL {
        let value = i64::from(state == State::Closed);
        expected.extend([sum(&format!("interlock.state{{{b},state={state}}}"), value)]);
    }
    expected
}

#[test]
fn trip_and_recover_story_exports_exact_instruments() {
    let collector = Collector::new();
    let clock = ManualClock::new();
    let b = breaker(
        "payments",
        &clock,
        OtelEventListener::with_meter(&collector.meter()),
    );
    story(&b, &clock);
    assert_eq!(collector.collect(), expected_story("payments"));
    assert_eq!(
        collector.bounds("interlock.call.duration"),
        DURATION_BOUNDARIES
    );
    assert_eq!(collector.unit("interlock.call.duration"), "s");
}

#[test]
fn disabled_breaker_keeps_call_metrics_flowing() {
    let collector = Collector::new();
    let clock = ManualClock::new();
    let b = breaker(
        "audit",
        &clock,
        OtelEventListener::with_meter(&collector.meter()),
    );
    b.disable();
    for _ in 0..3 {
        call(&b, &clock, 250, false);
    }
    call(&b, &clock, 500, true);
    assert_eq!(b.state(), State::Disabled, "never trips");
    assert_eq!(b.snapshot().total_calls, 0);

    let points = collector.collect();
    assert_eq!(
        points.get("interlock.call.duration{breaker=audit,outcome=failure}"),
        Some(&Point::Histogram {
            count: 3,
            sum: 0.75
        })
    );
    assert_eq!(
        points.get("interlock.call.duration{breaker=audit,outcome=success}"),
        Some(&Point::Histogram { count: 1, sum: 0.5 })
    );
    assert_eq!(
        points.get("interlock.state{breaker=audit,state=disabled}"),
        Some(&Point::Sum(1))
    );
    assert_eq!(
        points.get("interlock.state{breaker=audit,state=closed}"),
        Some(&Point::Sum(0))
    );
}

#[test]
fn a_panicking_listener_does_not_stop_the_others() {
    let collector = Collector::new();
    let clock = ManualClock::new();
    let seen = Arc::new(Mutex::new(0_usize));
    let counter = seen.clone();
    let fan_out = FanOut::new()
        .with(|_: &Event<'_>| panic!("a broken exporter"))
        .with(OtelEventListener::with_meter(&collector.meter()))
        .with(move |_: &Event<'_>| *counter.lock().unwrap() += 1)
        .with(|_: &Event<'_>| panic!("another broken exporter"));
    let b = breaker("payments", &clock, fan_out);
    story(&b, &clock);
    assert_eq!(collector.collect(), expected_story("payments"));
    // 8 settled calls, 2 rejections, 6 state changes, 2 resets.
    assert_eq!(*seen.lock().unwrap(), 18);
}

#[test]
fn breakers_are_told_apart_and_start_where_told() {
    let collector = Collector::new();
    let clock = ManualClock::new();
    let listener = Arc::new(
        OtelEventListener::with_meter(&collector.meter()).initial_state(State::MetricsOnly),
    );
    let config = Config::builder().build().unwrap();
    let shadow = |name: &str| {
        CircuitBreaker::builder(name)
            .config(config.clone())
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

    let points = collector.collect();
    let gauge = |breaker: &str, state: State| {
        points
            .get(&format!(
                "interlock.state{{breaker={breaker},state={state}}}"
            ))
            .cloned()
    };
    assert_eq!(gauge("a", State::MetricsOnly), Some(Point::Sum(1)));
    assert_eq!(gauge("a", State::Closed), Some(Point::Sum(0)));
    assert_eq!(gauge("b", State::MetricsOnly), Some(Point::Sum(0)));
    assert_eq!(gauge("b", State::ForcedOpen), Some(Point::Sum(1)));
    assert_eq!(
        points.get("interlock.state.changes{breaker=b,from=metrics_only,to=forced_open}"),
        Some(&Point::Sum(1))
    );
}

/// Holds back the delivery of the first state change until told to go on,
/// so a later one overtakes it, as it can when two threads race.
struct Overtaken {
    inner: Arc<OtelEventListener>,
    held: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
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
    let collector = Collector::new();
    let otel = Arc::new(OtelEventListener::with_meter(&collector.meter()));
    let (arrived_tx, arrived_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    let listener = Overtaken {
        inner: otel.clone(),
        held: Mutex::new(Some((arrived_tx, go_rx))),
    };
    let b = CircuitBreaker::builder("race")
        .listener(listener)
        .build()
        .unwrap();

    std::thread::scope(|s| {
        let first = s.spawn(|| b.force_open()); // closed -> forced_open, held back
        arrived_rx.recv().unwrap();
        b.disable(); // forced_open -> disabled, delivered first
        let points = collector.collect();
        let gauge = |state: &str| {
            points
                .get(&format!("interlock.state{{breaker=race,state={state}}}"))
                .cloned()
        };
        // In flight: the held-back change has not been counted yet.
        assert_eq!(gauge("closed"), Some(Point::Sum(1)));
        assert_eq!(gauge("forced_open"), Some(Point::Sum(-1)));
        assert_eq!(gauge("disabled"), Some(Point::Sum(1)));
        go_tx.send(()).unwrap();
        first.join().unwrap();
    });

    let points = collector.collect();
    for state in State::ALL {
        let value = i64::from(state == State::Disabled);
        assert_eq!(
            points.get(&format!("interlock.state{{breaker=race,state={state}}}")),
            Some(&Point::Sum(value)),
            "{state}"
        );
    }
}
