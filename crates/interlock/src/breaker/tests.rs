//! Rule-by-rule tests of the breaker (R1–R13 of the behaviour spec), on a
//! `ManualClock`: no test sleeps.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::{
    CallError, CircuitBreaker, Config, ConfigBuilder, Event, ManualClock, Outcome, ProbeCounters,
    SlidingWindow, Snapshot, State, Verdict,
};

type Log = Arc<Mutex<Vec<String>>>;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn cfg() -> ConfigBuilder {
    Config::builder()
}

/// A breaker on a manual clock whose listener logs every event's `Display`.
fn make(config: ConfigBuilder) -> (CircuitBreaker, ManualClock, Log) {
    make_with(config, State::Closed)
}

fn make_with(config: ConfigBuilder, initial: State) -> (CircuitBreaker, ManualClock, Log) {
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let sink = log.clone();
    let breaker = CircuitBreaker::builder("svc")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.to_string()))
        .initial_state(initial)
        .build()
        .unwrap();
    (breaker, clock, log)
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[derive(Clone, Debug)]
struct Boom(&'static str);
impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl std::error::Error for Boom {}

fn ok(b: &CircuitBreaker) -> Result<(), CallError<Boom>> {
    b.call(|| Ok(()))
}

fn fail(b: &CircuitBreaker) -> Result<(), CallError<Boom>> {
    b.call(|| Err(Boom("boom")))
}

/// A call that takes `d` on the manual clock.
fn timed(b: &CircuitBreaker, clock: &ManualClock, d: Duration, failed: bool) -> bool {
    b.call(|| {
        clock.advance(d);
        if failed {
            Err(Boom("slow boom"))
        } else {
            Ok(())
        }
    })
    .is_err_and(|e| e.is_rejected())
}

fn rejected(r: Result<(), CallError<Boom>>) -> crate::CircuitOpenError {
    match r {
        Err(CallError::Rejected(open)) => open,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// Trips a small breaker: count window 2, minimum 2, one probe per round.
fn small() -> ConfigBuilder {
    cfg()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(secs(10.0))
        .permitted_calls_in_half_open(1)
}

/// Failures a test makes before it gives up on a trip: far more than any
/// config here needs, so that a breaker that never trips fails the test
/// instead of hanging it (a mutant of the trip rule, say).
const TRIP_BUDGET: usize = 10_000;

/// Calls `call` while `b` is CLOSED, at most [`TRIP_BUDGET`] times, and
/// fails the test if `b` is still CLOSED then.
fn fail_until_tripped<M: crate::mode::Mode>(b: &CircuitBreaker<M>, mut call: impl FnMut()) {
    for _ in 0..TRIP_BUDGET {
        if b.state() != State::Closed {
            return;
        }
        call();
    }
    assert_ne!(
        b.state(),
        State::Closed,
        "{TRIP_BUDGET} failures did not trip"
    );
}

fn trip(b: &CircuitBreaker) {
    fail_until_tripped(b, || {
        let _ = fail(b);
    });
    assert_eq!(b.state(), State::Open);
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// A future that is pending the first time it is polled.
struct YieldOnce(bool);
impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

// ---- R3: construction -------------------------------------------------------

#[test]
fn r3_1_initial_state_must_be_stable() {
    for state in [State::Open, State::HalfOpen] {
        let err = CircuitBreaker::builder("x")
            .initial_state(state)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "initial_state");
    }
    for state in [
        State::Closed,
        State::ForcedOpen,
        State::Disabled,
        State::MetricsOnly,
    ] {
        let (b, _, log) = make_with(cfg(), state);
        assert_eq!(b.state(), state);
        // R3.2: construction is not a transition.
        assert!(take(&log).is_empty());
        assert_eq!(b.generation(), 0); // R3.3
        assert_eq!(b.snapshot(), Snapshot::default());
    }
}

// ---- R4: the call pipeline ---------------------------------------------------

#[test]
fn r4_3_slow_is_inclusive_and_measured_on_the_injected_clock() {
    let (b, clock, log) = make(cfg().slow_call_duration_threshold(secs(1.0)));
    timed(&b, &clock, secs(1.0), false);
    timed(&b, &clock, secs(0.999), false);
    timed(&b, &clock, secs(2.0), true);
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 3,
            failed_calls: 1,
            slow_calls: 2
        }
    );
    assert_eq!(
        take(&log),
        [
            "svc: recorded slow_success (1.000s)",
            "svc: recorded success (0.999s)",
            "svc: recorded slow_failure (2.000s)",
        ]
    );
}

#[test]
fn r4_4_classifier_forgives_errors_and_results_can_fail() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("svc")
        .clock(clock)
        .classifier(|e| {
            if e.to_string() == "not found" {
                Verdict::Success
            } else {
                Verdict::Failure
            }
        })
        .build()
        .unwrap();
    let r = b.call(|| Err::<(), _>(Boom("not found")));
    assert_eq!(r.unwrap_err().into_inner().unwrap().0, "not found"); // still returned
    assert_eq!(b.snapshot().failed_calls, 0);
    assert!(
        b.last_failure().is_none(),
        "a forgiven error is not a last failure"
    );
    // A per-call classifier can fail an Ok result; no error, so no last failure.
    let r = b.call_classified(
        || Ok::<u16, Boom>(503),
        |r| match r {
            Ok(&s) if s >= 500 => Verdict::Failure,
            _ => Verdict::Success,
        },
    );
    assert_eq!(r.unwrap(), 503);
    assert_eq!(b.snapshot().failed_calls, 1);
    assert!(b.last_failure().is_none());
}

#[test]
fn r4_5_a_panicking_call_is_cancelled_not_recorded() {
    let (b, clock, log) = make(small());
    trip(&b);
    clock.advance(secs(10.0));
    take(&log);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = b.call(|| -> Result<(), Boom> { panic!("user bug") });
    }));
    assert!(caught.is_err());
    // The probe's slot came back: the next call is admitted as a probe.
    assert_eq!(b.probes(), ProbeCounters::default());
    assert_eq!(take(&log), ["svc: state open -> half_open"]);
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r4_5_a_dropped_future_is_cancelled_and_gives_its_probe_slot_back() {
    let (b, clock, log) = make(small());
    trip(&b);
    clock.advance(secs(10.0));
    take(&log);
    {
        let mut cx = Context::from_waker(Waker::noop());
        let mut fut = Box::pin(b.call_async(|| async {
            YieldOnce(false).await;
            Ok::<_, Boom>(())
        }));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(b.probes().in_flight, 1);
        // While the probe is in flight, the concurrency cap holds.
        assert!(rejected(ok(&b)).retry_after().is_none());
    } // dropped
    assert_eq!(b.probes(), ProbeCounters::default());
    let events = take(&log);
    assert_eq!(
        events,
        [
            "svc: state open -> half_open",
            "svc: call rejected (half_open)"
        ]
    );
    block_on(b.call_async(|| async { Ok::<_, Boom>(()) })).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r4_6_permits_settle_independently_in_any_order() {
    let (b, _, _) = make(
        cfg()
            .minimum_number_of_calls(3)
            .sliding_window(SlidingWindow::count(3)),
    );
    let p1 = b.acquire().unwrap();
    let p2 = b.acquire().unwrap();
    let p3 = b.acquire().unwrap();
    p3.failure();
    p1.finish(&Err::<(), _>(Boom("late")));
    assert_eq!(b.last_failure().unwrap().message(), "late");
    p2.success();
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 3,
            failed_calls: 2,
            slow_calls: 0
        }
    );
    assert_eq!(b.state(), State::Open);
}

// ---- R5: windows keep or drop their contents on transitions ---------------

#[test]
fn r5_3_window_survives_trip_and_overrides_and_is_fresh_on_close() {
    let (b, clock, _) = make(small());
    trip(&b);
    let tripped = Snapshot {
        total_calls: 2,
        failed_calls: 2,
        slow_calls: 0,
    };
    assert_eq!(b.snapshot(), tripped);
    clock.advance(secs(10.0));
    let probe = b.acquire().unwrap(); // HALF_OPEN
    assert_eq!(b.snapshot(), tripped);
    probe.success(); // round passes: fresh window
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot(), Snapshot::default());
    let _ = fail(&b);
    for op in [CircuitBreaker::force_open, CircuitBreaker::disable] {
        op(&b);
        assert_eq!(b.snapshot().total_calls, 1);
    }
    b.metrics_only();
    ok(&b).unwrap(); // R5.4: METRICS_ONLY adds to the existing contents
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 2,
            failed_calls: 1,
            slow_calls: 0
        }
    );
    b.disable();
    ok(&b).unwrap(); // DISABLED writes nothing
    assert_eq!(b.snapshot().total_calls, 2);
    b.reset();
    assert_eq!(b.snapshot(), Snapshot::default());
}

#[test]
fn r5_3_time_window_drains_while_disabled() {
    let (b, clock, _) = make(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(5)))
            .minimum_number_of_calls(100),
    );
    let _ = fail(&b);
    b.disable();
    assert_eq!(b.snapshot().total_calls, 1);
    clock.advance(secs(5.0));
    assert_eq!(b.snapshot().total_calls, 0);
}

// ---- R6: admission by state -------------------------------------------------

#[test]
fn r6_open_rejects_with_retry_after_then_lazily_admits_the_first_probe() {
    let (b, clock, log) = make(small());
    trip(&b);
    take(&log);
    clock.advance(secs(4.0));
    let open = rejected(ok(&b));
    assert_eq!(open.retry_after(), Some(secs(6.0)));
    assert_eq!(open.state(), State::Open);
    assert_eq!(open.to_string(), "circuit 'svc' is open; retry in ~6.000s");
    assert_eq!(open.retry_after_secs(), Some(6));
    clock.advance(secs(0.2));
    assert_eq!(
        rejected(ok(&b)).retry_after_secs(),
        Some(6),
        "5.8 s rounds up"
    );
    assert_eq!(open.last_failure().unwrap().message(), "boom");
    clock.advance(secs(5.8));
    // R6.3: lazy; R6.2: zero once elapsed.
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(Duration::ZERO));
    ok(&b).unwrap(); // the triggering call is the first probe (inclusive check)
    assert_eq!(
        take(&log),
        [
            "svc: call rejected (open)",
            "svc: call rejected (open)",
            "svc: state open -> half_open", // R13.4: at admission, before the call runs
            "svc: recorded success (0.000s)",
            "svc: state half_open -> closed",
        ]
    );
    assert_eq!(b.retry_after(), None);
}

#[test]
fn r6_forced_open_rejects_forever_without_estimate() {
    let (b, clock, log) = make(cfg());
    b.force_open();
    clock.advance(secs(1e6));
    let open = rejected(ok(&b));
    assert_eq!(open.retry_after(), None);
    assert_eq!(open.state(), State::ForcedOpen);
    assert_eq!(
        take(&log),
        [
            "svc: state closed -> forced_open",
            "svc: call rejected (forced_open)"
        ]
    );
}

// ---- R7: when a trip happens ------------------------------------------------

#[test]
fn r7_1_exact_threshold_trips_and_minimum_calls_gate() {
    // 1 failure of 2 at threshold 0.5 trips (>=).
    let (b, _, _) = make(
        cfg()
            .minimum_number_of_calls(2)
            .sliding_window(SlidingWindow::count(10)),
    );
    let _ = fail(&b);
    assert_eq!(b.state(), State::Closed, "gated: 1 call < minimum 2");
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Open);

    // 0.3 threshold trips at exactly 3 of 10 (R1.3).
    let (b, _, _) = make(
        cfg()
            .failure_rate_threshold(0.3)
            .sliding_window(SlidingWindow::count(10)),
    );
    for _ in 0..7 {
        ok(&b).unwrap();
    }
    for _ in 0..2 {
        let _ = fail(&b);
    }
    assert_eq!(b.state(), State::Closed);
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn r7_1_trip_is_evaluated_only_on_closed_records_not_on_time() {
    let (b, clock, _) = make(
        cfg()
            .minimum_number_of_calls(2)
            .sliding_window(SlidingWindow::time(Duration::from_secs(2))),
    );
    ok(&b).unwrap();
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open); // 1 of 2
    b.reset();
    ok(&b).unwrap();
    ok(&b).unwrap();
    clock.advance(secs(2.0)); // R7.2: the successes leave the window
    let _ = fail(&b);
    assert_eq!(
        b.state(),
        State::Closed,
        "gate uses the current in-window total"
    );
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn r7_3_all_slow_window_trips_at_default_slow_threshold() {
    let (b, clock, _) = make(
        cfg()
            .minimum_number_of_calls(3)
            .sliding_window(SlidingWindow::count(3))
            .slow_call_duration_threshold(secs(1.0)),
    );
    timed(&b, &clock, secs(1.0), false);
    timed(&b, &clock, secs(1.0), false);
    assert_eq!(
        b.snapshot().failure_rate(),
        0.0,
        "a slow success is a success"
    );
    timed(&b, &clock, secs(0.5), false);
    assert_eq!(b.state(), State::Closed); // 2 of 3 slow
    timed(&b, &clock, secs(1.0), false);
    timed(&b, &clock, secs(1.0), false);
    assert_eq!(b.state(), State::Closed); // the fast call is still in the window
    timed(&b, &clock, secs(1.0), false);
    assert_eq!(b.state(), State::Open); // every call in the window is slow
}

#[test]
fn r7_metrics_only_never_trips() {
    let (b, _, log) = make_with(small(), State::MetricsOnly);
    for _ in 0..10 {
        let _ = fail(&b);
    }
    assert_eq!(b.state(), State::MetricsOnly);
    assert_eq!(b.snapshot().failed_calls, 2);
    assert!(
        take(&log)
            .iter()
            .all(|e| e.starts_with("svc: recorded failure"))
    );
}

// ---- R8: probe rounds -------------------------------------------------------

fn round_config(permitted: u32, concurrent: u32) -> ConfigBuilder {
    small()
        .permitted_calls_in_half_open(permitted)
        .max_concurrent_probes(concurrent)
}

#[test]
fn r8_3_round_decided_at_the_permitted_verdict_on_rates() {
    // 1 failure + 1 slow of 3 with thresholds 0.5 closes.
    let (b, clock, _) = make(
        round_config(3, 3)
            .slow_call_duration_threshold(secs(1.0))
            .slow_call_rate_threshold(0.5),
    );
    trip(&b);
    clock.advance(secs(10.0));
    let _ = fail(&b);
    timed(&b, &clock, secs(1.0), false);
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.probes().completed, 2);
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);

    // 2 failures of 3 re-open, with the wait restarting from the decision.
    trip(&b);
    clock.advance(secs(10.0));
    let _ = fail(&b);
    let _ = fail(&b);
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(secs(10.0)));
}

#[test]
fn r8_3_minimum_calls_gate_does_not_apply_to_rounds() {
    let (b, clock, _) = make(
        cfg()
            .minimum_number_of_calls(50)
            .permitted_calls_in_half_open(1)
            .wait_duration_in_open(secs(1.0)),
    );
    b.force_open();
    b.reset();
    // Build an OPEN by tripping a window of 50 failures.
    for _ in 0..50 {
        let _ = fail(&b);
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(1.0));
    let _ = fail(&b); // one failed probe decides the round
    assert_eq!(b.state(), State::Open);
}

#[test]
fn r8_6_both_probe_caps_hold() {
    let (b, clock, _) = make(round_config(3, 2));
    trip(&b);
    clock.advance(secs(10.0));
    let p1 = b.acquire().unwrap();
    let p2 = b.acquire().unwrap();
    assert!(p1.is_probe() && p2.is_probe());
    // max_concurrent_probes = 2 in flight.
    assert_eq!(b.acquire().unwrap_err().retry_after(), None); // R8.7
    p1.success();
    let p3 = b.acquire().unwrap(); // a settled probe frees one slot
    p2.success();
    // permitted = 3 admissions, settled ones included: no fourth.
    assert!(b.acquire().is_err());
    assert_eq!(
        b.probes(),
        ProbeCounters {
            admitted: 3,
            in_flight: 1,
            completed: 2,
            failures: 0,
            slows: 0,
            inconclusive: 0
        }
    );
    p3.success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r8_8_stale_outcomes_are_reported_but_ignored_by_the_machine() {
    let (b, clock, log) = make(round_config(2, 2));
    let closed_era = b.acquire().unwrap();
    trip(&b);
    clock.advance(secs(10.0));
    let probe = b.acquire().unwrap();
    take(&log);
    // A CLOSED-era failure settling in HALF_OPEN is not a probe verdict...
    closed_era.finish(&Err::<(), _>(Boom("stale")));
    assert_eq!(b.probes().completed, 0);
    // ...but it is still reported and still the last failure.
    assert_eq!(take(&log), ["svc: recorded failure (10.000s)"]);
    assert_eq!(b.last_failure().unwrap().message(), "stale");
    // A probe settling after reset() does not pollute the fresh window.
    let gen_before = b.generation();
    b.reset();
    assert!(b.generation() > gen_before);
    probe.failure();
    assert_eq!(b.snapshot(), Snapshot::default());
    // A call in flight across a reset from CLOSED is dropped too.
    let across = b.acquire().unwrap();
    b.reset();
    across.failure();
    assert_eq!(b.snapshot(), Snapshot::default());
}

#[test]
fn r8_8_every_transition_and_override_bumps_the_generation() {
    let (b, clock, log) = make(small());
    let mut last = b.generation();
    let mut bumped = |b: &CircuitBreaker| {
        let g = b.generation();
        assert!(g > last, "generation did not move: {g} <= {last}");
        last = g;
    };
    b.reset(); // even from CLOSED
    bumped(&b);
    b.force_open();
    bumped(&b);
    b.force_open(); // even when already there...
    bumped(&b);
    b.reset();
    bumped(&b);
    trip(&b);
    bumped(&b);
    clock.advance(secs(10.0));
    let p = b.acquire().unwrap();
    bumped(&b);
    p.success();
    bumped(&b);
    for op in [
        CircuitBreaker::disable,
        CircuitBreaker::disable,
        CircuitBreaker::metrics_only,
    ] {
        op(&b);
        bumped(&b);
    }
    // ...but a repeated override emits one state change (R13.4).
    let forced: Vec<_> = take(&log)
        .into_iter()
        .filter(|e| e.contains("-> forced_open"))
        .collect();
    assert_eq!(forced.len(), 1);
}

#[test]
fn r8_9_release_returns_slot_and_budget_only_for_current_probes() {
    let (b, clock, _) = make(round_config(2, 1));
    let closed_era = b.acquire().unwrap();
    trip(&b);
    clock.advance(secs(10.0));
    let p = b.acquire().unwrap();
    drop(closed_era); // not a probe: nothing happens
    assert_eq!(b.probes().in_flight, 1);
    drop(p);
    assert_eq!(b.probes(), ProbeCounters::default());
    let p = b.acquire().unwrap();
    p.success();
    let p = b.acquire().unwrap();
    let _ = p; // still in flight
    b.force_open(); // a probe of a previous generation...
    drop(b.acquire()); // (rejected)
    b.reset();
    // ...cannot be released into the new state: nothing to check but no panic
    assert_eq!(b.probes(), ProbeCounters::default());
}

// ---- R9: inconclusive probes -----------------------------------------------

#[test]
fn r9_inconclusive_probes_hand_back_their_slot_and_end_the_round_eventually() {
    let (b, clock, log) = make(round_config(3, 1));
    trip(&b);
    clock.advance(secs(10.0));
    b.acquire().unwrap().inconclusive();
    assert_eq!(b.probes().admitted, 0);
    assert_eq!(b.probes().inconclusive, 1);
    b.acquire().unwrap().success();
    b.acquire().unwrap().record(Verdict::Inconclusive);
    assert_eq!(b.state(), State::HalfOpen);
    take(&log);
    // The third inconclusive probe of the round (cumulative, R9.4) re-opens,
    // even though one probe succeeded (§19.4).
    b.acquire()
        .unwrap()
        .finish_with(Verdict::Inconclusive, &Boom("pool exhausted"));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().unwrap().message(), "pool exhausted");
    assert_eq!(
        take(&log),
        [
            "svc: recorded failure (0.000s)",
            "svc: state half_open -> open"
        ]
    );
}

#[test]
fn r9_2_inconclusive_counts_as_failure_when_closed() {
    let (b, _, _) = make(small());
    b.acquire().unwrap().inconclusive();
    b.acquire().unwrap().inconclusive();
    assert_eq!(b.snapshot().failed_calls, 2);
    assert_eq!(b.state(), State::Open);
}

// ---- R10: backoff -------------------------------------------------------------

#[test]
fn r10_backoff_grows_per_failed_round_caps_and_resets() {
    let (b, clock, _) = make(
        small()
            .wait_duration_in_open(secs(5.0))
            .wait_duration_backoff_multiplier(2.0)
            .wait_duration_in_open_max(secs(120.0)),
    );
    trip(&b);
    assert_eq!(b.retry_after(), Some(secs(5.0))); // R10.2: a trip waits the base
    let mut waits = vec![];
    for _ in 0..7 {
        let wait = b.retry_after().unwrap();
        clock.advance(wait);
        let _ = fail(&b); // the probe fails: the round fails
        waits.push(b.retry_after().unwrap().as_secs());
    }
    assert_eq!(waits, [10, 20, 40, 80, 120, 120, 120]);
    // D3 / R9.5 (revised after 2.8.2): an all-inconclusive re-open counts
    // as a failed round, here at the cap, and does not reset.
    clock.advance(secs(120.0));
    b.acquire().unwrap().inconclusive();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(secs(120.0)));
    // A passing round resets the count: the next trip waits the base again.
    clock.advance(secs(120.0));
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
    trip(&b);
    assert_eq!(b.retry_after(), Some(secs(5.0)));
    // So does reset().
    clock.advance(secs(5.0));
    let _ = fail(&b);
    assert_eq!(b.retry_after(), Some(secs(10.0)));
    b.reset();
    trip(&b);
    assert_eq!(b.retry_after(), Some(secs(5.0)));
}

// ---- R11: overrides, reset, last_failure ------------------------------------

#[test]
fn r11_1_disable_admits_everything_records_nothing_but_listeners_see_calls() {
    let (b, _, log) = make(small());
    b.disable();
    take(&log);
    for _ in 0..5 {
        let _ = fail(&b);
    }
    assert_eq!(b.state(), State::Disabled);
    assert_eq!(b.snapshot(), Snapshot::default());
    assert_eq!(take(&log).len(), 5);
    assert_eq!(b.last_failure().unwrap().message(), "boom"); // R11.3: any state
}

#[test]
fn r11_2_reset_always_emits_reset_after_the_state_change() {
    let (b, _, log) = make(small());
    b.reset();
    assert_eq!(take(&log), ["svc: reset"]);
    trip(&b);
    take(&log);
    b.reset();
    assert_eq!(take(&log), ["svc: state open -> closed", "svc: reset"]);
    assert!(b.last_failure().is_none());
}

#[test]
fn r11_3_last_failure_survives_everything_but_reset() {
    let (b, clock, _) = make(small());
    trip(&b);
    clock.advance(secs(10.0));
    ok(&b).unwrap(); // passing round
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.last_failure().unwrap().message(), "boom");
    b.force_open();
    b.disable();
    b.metrics_only();
    assert_eq!(
        b.last_failure().unwrap().type_name(),
        std::any::type_name::<Boom>()
    );
    b.reset();
    assert!(b.last_failure().is_none());
    // A rejection reads it when asked.
    let _ = fail(&b);
    b.force_open();
    let open = rejected(ok(&b));
    assert_eq!(open.last_failure().unwrap().to_string(), "boom");
}

// ---- R12: the auto_transition timer ------------------------------------------

/// Polls `done` against a real-time deadline (the timer thread runs on real time).
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    use crate::{Clock, MonotonicClock};
    let deadline = MonotonicClock.now() + Duration::from_secs(10);
    while MonotonicClock.now() < deadline {
        if done() {
            return true;
        }
        std::thread::yield_now();
    }
    done()
}

#[test]
fn r12_timer_moves_open_to_half_open_without_admitting() {
    // The timer is scheduled on real time, so this breaker runs on the real
    // clock: when the timer fires, the wait has elapsed on both.
    let log: Log = Arc::default();
    let sink = log.clone();
    let b = CircuitBreaker::builder("svc")
        .config(
            small()
                .wait_duration_in_open(secs(0.02))
                .auto_transition(true)
                .build()
                .unwrap(),
        )
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap();
    trip(&b);
    take(&log);
    // The state is published before the listener runs (on the timer
    // thread), so wait for the event itself.
    assert!(
        wait_for(|| !log.lock().unwrap().is_empty()),
        "the timer never fired"
    );
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(take(&log), ["svc: state open -> half_open"]);
    assert_eq!(b.probes(), ProbeCounters::default()); // no probe admitted
    ok(&b).unwrap(); // the first real call is the first probe
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r12_2_timer_does_nothing_if_the_injected_clock_has_not_elapsed() {
    let (b, _, _) = make(
        small()
            .wait_duration_in_open(secs(0.01))
            .auto_transition(true),
    );
    trip(&b);
    // Real time passes, the manual clock does not: the timer fires, sees the
    // wait not elapsed, and leaves the lazy path in charge.
    assert!(wait_for(|| b.inner.timer.lock().unwrap().key.is_none()
        || crate::breaker::timer::Scheduler::global().pending() == 0));
    assert_eq!(b.state(), State::Open);
}

#[test]
fn r12_3_reset_cancels_the_timer_and_close_forbids_it() {
    let (b, clock, log) = make(
        small()
            .wait_duration_in_open(secs(0.02))
            .auto_transition(true),
    );
    trip(&b);
    assert!(b.inner.timer.lock().unwrap().key.is_some());
    b.reset();
    assert!(b.inner.timer.lock().unwrap().key.is_none());
    b.close();
    b.close(); // idempotent
    assert!(b.is_shut_down());
    trip(&b);
    assert!(
        b.inner.timer.lock().unwrap().key.is_none(),
        "closed breakers arm no timer"
    );
    clock.advance(secs(1.0));
    take(&log);
    ok(&b).unwrap(); // the lazy path still works
    assert_eq!(take(&log)[0], "svc: state open -> half_open");
}

// ---- R13: listeners -----------------------------------------------------------

#[test]
fn r13_2_a_panicking_listener_changes_nothing() {
    let seen: Log = Arc::default();
    let sink = seen.clone();
    let b = CircuitBreaker::builder("svc")
        .config(small().build().unwrap())
        .clock(ManualClock::new())
        .listener(|_: &Event<'_>| panic!("exporter bug"))
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.kind().to_owned()))
        .build()
        .unwrap();
    assert_eq!(b.call(|| Ok::<_, Boom>(7)).unwrap(), 7);
    assert_eq!(fail(&b).unwrap_err().into_inner().unwrap().0, "boom");
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        *seen.lock().unwrap(),
        ["call_recorded", "call_recorded", "state_changed"],
        "later listeners still run"
    );
}

#[test]
fn r13_6_a_concurrent_trip_emits_exactly_one_state_change() {
    for _ in 0..20 {
        let (b, _, log) = make(
            cfg()
                .minimum_number_of_calls(8)
                .sliding_window(SlidingWindow::count(8)),
        );
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let b = b.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let permit = b.acquire().unwrap();
                    barrier.wait();
                    permit.failure();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let changes: Vec<_> = take(&log)
            .into_iter()
            .filter(|e| e.contains("state"))
            .collect();
        assert_eq!(changes, ["svc: state closed -> open"]);
    }
}

#[test]
fn outcome_flags_and_call_error_helpers() {
    assert_eq!(Outcome::from_flags(false, true), Outcome::SlowSuccess);
    let (b, _, _) = make(cfg());
    b.force_open();
    let err = ok(&b).unwrap_err();
    assert!(err.is_rejected());
    assert!(err.rejected().is_some());
    assert!(err.clone().into_inner().is_none());
    assert!(err.map_inner(|_| 1).is_rejected());
    let inner: CallError<Boom> = CallError::Inner(Boom("x"));
    assert_eq!(inner.to_string(), "x");
    assert!(inner.rejected().is_none());
}

// ---- the lock-free quiet success (QUIET_BIT) ---------------------------------

/// A success lasting the slow threshold counts, so it must take the lock:
/// it cannot settle while this thread holds it.
fn assert_a_slow_success_takes_the_lock(b: &CircuitBreaker, clock: &ManualClock) {
    let slow = b.acquire().unwrap();
    clock.advance(b.config().slow_call_duration_threshold());
    assert!(!settles_while_locked(
        b,
        slow,
        crate::Permit::success,
        CANNOT
    ));
}

/// Whether `settle(permit)` completes on another thread while this one holds
/// the breaker's machine lock: waits `wait` for it (long when it should, short
/// when it cannot), then lets go of the lock either way.
fn settles_while_locked(
    b: &CircuitBreaker,
    permit: crate::Permit,
    settle: fn(crate::Permit),
    wait: Duration,
) -> bool {
    let guard = b.inner.core();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        settle(permit);
        let _ = tx.send(());
    });
    let done = rx.recv_timeout(wait).is_ok();
    drop(guard);
    t.join().unwrap();
    done
}

/// The machine's lock is first tried a few times, then waited for
/// (`Inner::core`); a lock left poisoned by a panic is taken as it stands on
/// either path, so the breaker keeps recording, trips and closes again
/// (R4, R5.1, R9).
#[test]
fn a_poisoned_machine_lock_still_records_trips_and_recovers() {
    let (b, clock, log) = make(
        cfg()
            .sliding_window(SlidingWindow::count(4))
            .minimum_number_of_calls(4)
            .wait_duration_in_open(secs(10.0))
            .permitted_calls_in_half_open(1),
    );
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _core = b.inner.core();
        panic!("a panic while the machine lock is held");
    }));
    assert!(panicked.is_err());
    assert!(b.inner.core.0.lock().is_err(), "the lock is poisoned");
    ok(&b).unwrap();
    fail(&b).unwrap_err();
    assert_eq!(b.snapshot().failed_calls, 1);
    fail(&b).unwrap_err();
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    assert!(take(&log).iter().any(|e| e == "svc: state closed -> open"));
    // And it lets traffic through again once the dependency is healthy.
    clock.advance(secs(10.0));
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

const SHOULD: Duration = Duration::from_secs(30);
const CANNOT: Duration = Duration::from_millis(100);

#[test]
fn a_success_in_a_count_window_full_of_successes_settles_without_the_lock() {
    let (b, clock, log) = make(
        cfg()
            .sliding_window(SlidingWindow::count(3))
            .minimum_number_of_calls(3),
    );
    ok(&b).unwrap();
    ok(&b).unwrap();
    // Not full yet: the success counts, on a success lane (no run of
    // successes can trip), listeners or not (issue 22); the listener hears
    // of it and the next locked step folds it in.
    take(&log);
    assert!(settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::success,
        SHOULD
    ));
    assert_eq!(take(&log).len(), 1);
    assert_eq!(b.snapshot().total_calls, 3);
    // Full of successes: one more changes nothing and takes no lock, but the
    // listener still hears of it.
    take(&log);
    for _ in 0..3 {
        assert!(settles_while_locked(
            &b,
            b.acquire().unwrap(),
            crate::Permit::success,
            SHOULD
        ));
    }
    assert_eq!(take(&log).len(), 3);
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 3,
            failed_calls: 0,
            slow_calls: 0
        }
    );
    assert_eq!((b.state(), b.generation()), (State::Closed, 0));
    // A slow success and a failure count: both take the lock.
    assert_a_slow_success_takes_the_lock(&b, &clock);
    assert!(!settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::failure,
        CANNOT
    ));
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 3,
            failed_calls: 1,
            slow_calls: 1
        }
    );
    // While a failure is in the window, successes count (and push it out),
    // on the lanes: each thread's lane folds itself in once it would hold
    // as many as leave the window full of successes (`tally.rs`), and any
    // locked step folds them all.
    take(&log);
    for _ in 0..2 {
        assert!(settles_while_locked(
            &b,
            b.acquire().unwrap(),
            crate::Permit::success,
            SHOULD
        ));
    }
    ok(&b).unwrap();
    assert_eq!(take(&log).len(), 3, "every success is reported");
    assert_eq!(b.snapshot().failed_calls, 0);
    assert!(settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::success,
        SHOULD
    ));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn with_a_listener_a_head_second_success_takes_the_lanes_and_outside_closed_the_lock() {
    // Issue 22: a breaker with listeners counts plain successes on the
    // lanes too, and reports each of them.
    let (b, clock, log) = make(
        cfg()
            .sliding_window(SlidingWindow::time(secs(10.0)))
            .minimum_number_of_calls(1),
    );
    for _ in 0..5 {
        ok(&b).unwrap();
    }
    take(&log);
    assert!(settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::success,
        SHOULD
    ));
    assert_eq!(take(&log).len(), 1);
    assert_eq!(b.snapshot().total_calls, 6);
    // A new second moves the window: that success takes the lock.
    clock.advance(secs(1.0));
    assert!(!settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::success,
        CANNOT
    ));
    assert_eq!(take(&log).len(), 1);
    assert_eq!(b.snapshot().total_calls, 7);

    // METRICS_ONLY over a window full of successes counts under the lock.
    let (b, _, _) = make(
        cfg()
            .sliding_window(SlidingWindow::count(2))
            .minimum_number_of_calls(2),
    );
    ok(&b).unwrap();
    ok(&b).unwrap();
    b.metrics_only();
    assert!(!settles_while_locked(
        &b,
        b.acquire().unwrap(),
        crate::Permit::success,
        CANNOT
    ));
    // A permit of an earlier generation is stale either way (no lock).
    let stale = b.acquire().unwrap();
    b.reset();
    assert!(settles_while_locked(
        &b,
        stale,
        crate::Permit::success,
        SHOULD
    ));
    assert_eq!(b.snapshot().total_calls, 0);
}

// ---- D2 / Q1: leased probes never enter local probe accounting ---------------

/// A breaker named "payments" coordinated through a `MemoryStorage` on a
/// manual clock, whose lane runs only when the test says so.
fn coordinated_on_a_manual_lane(
    config: ConfigBuilder,
) -> (
    CircuitBreaker<crate::mode::Blocking>,
    ManualClock,
    crate::storage::MemoryStorage,
    crate::storage::Coordinator<crate::mode::Blocking>,
) {
    use crate::storage::{Coordinator, MemoryStorage};
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let lane = Coordinator::manual(storage.clone());
    let b = CircuitBreaker::builder("payments")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .coordinator(&lane)
        .build()
        .unwrap();
    (b, clock, storage, lane)
}

#[test]
fn d2_a_leased_probe_released_or_settled_into_a_local_half_open_round_leaves_it_alone() {
    // Quirk Q1: the local machine runs its own HALF_OPEN round (begun while
    // the shared state was not yet known) when the shared breaker starts
    // leasing probes. The leased probes carry the local generation, yet a
    // leased probe dropped unsettled hands nothing back to the local round,
    // and one that settles records nothing in it: its verdict goes to the
    // storage only (D2, R15.4).
    let (b, clock, storage, lane) = coordinated_on_a_manual_lane(
        small()
            .permitted_calls_in_half_open(2)
            .max_concurrent_probes(2),
    );
    fail_until_tripped(&b, || {
        let _ = b.call(|| Err::<(), _>(Boom("503")));
    });
    clock.advance(secs(10.0));
    // The local round begins before the shared trip is written.
    let local = b.acquire().unwrap();
    assert!(local.is_probe() && !local.is_leased());
    let round = b.probes();
    assert_eq!((round.admitted, round.in_flight), (1, 1));
    lane.run_writes(); // the shared trip: the shared OPEN now governs
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(10.0));
    lane.poll(); // the shared round begins
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(
        b.shared_view().map(|v| v.state),
        Some(State::HalfOpen),
        "a shared HALF_OPEN"
    );
    let generation = b.generation();

    let leased = b.acquire().unwrap();
    assert!(leased.is_probe() && leased.is_leased());
    drop(leased); // no un-lease, and nothing back to the local round
    assert_eq!(b.probes(), round);

    let leased = b.acquire().unwrap();
    assert!(leased.is_leased());
    leased.success(); // the storage's verdict, not the local round's
    assert_eq!(b.probes(), round);
    assert_eq!(b.generation(), generation);

    local.success(); // the local probe still counts locally
    let after = b.probes();
    assert_eq!(
        (after.admitted, after.in_flight, after.completed),
        (1, 0, 1)
    );
    lane.run_writes();
    let shared = storage.peek("payments").unwrap();
    assert_eq!(
        (shared.state, shared.probes_completed),
        (State::HalfOpen, 1)
    );
}

#[test]
fn debug_shows_the_state_and_generation_of_the_status_word() {
    // The whole line: a generation read from the wrong bits of the status
    // word would still contain "generation: 2" as a prefix of its digits.
    let b = CircuitBreaker::new("gen");
    b.force_open();
    b.force_open();
    assert_eq!(
        format!("{b:?}"),
        r#"CircuitBreaker { name: "gen", state: ForcedOpen, generation: 2, coordinated: false, .. }"#
    );
}

#[test]
fn r15_8_overrides_and_a_local_reopen_write_no_shared_trip() {
    // Only a local CLOSED -> OPEN trip is shared (R15.4); an operator
    // override is local to the instance (R15.8), and so is a re-open from a
    // local HALF_OPEN round.
    let (b, clock, storage, lane) = coordinated_on_a_manual_lane(small());
    b.force_open();
    b.disable();
    b.metrics_only();
    b.reset();
    lane.run_writes();
    assert_eq!(
        storage.peek("payments"),
        None,
        "no override reaches the storage"
    );
    // A local round that fails re-opens locally: still no shared write, the
    // trip that began it aside.
    fail_until_tripped(&b, || {
        let _ = b.call(|| Err::<(), _>(Boom("503")));
    });
    clock.advance(secs(10.0));
    let probe = b.acquire().unwrap(); // the local lazy HALF_OPEN
    assert!(probe.is_probe() && !probe.is_leased());
    probe.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(storage.operations().trips, 0, "nothing ran yet");
    lane.run_writes();
    assert_eq!(
        storage.operations().trips,
        1,
        "the CLOSED -> OPEN trip only"
    );
}

#[test]
fn the_status_word_encodes_every_state_and_its_admission_in_one_bit() {
    for s in State::ALL {
        assert_eq!(State::from_bits(s.to_bits()), s);
        assert_eq!(
            super::admission::admits_all(s.to_bits()),
            s.admits_all(),
            "{s:?}"
        );
        // The generation and flags above the state bits change nothing.
        let status = (7 << super::STATUS_SHIFT) | super::QUIET_BIT | s.to_bits();
        assert_eq!(State::from_bits(status), s);
        assert_eq!(
            super::admission::admits_all(status),
            s.admits_all(),
            "{s:?}"
        );
    }
}

#[test]
fn without_listeners_a_quiet_success_settles_without_the_lock_and_a_slow_one_takes_it() {
    // The fast path of `settle_success` (no listener to tell): the same rule
    // as above, on the path a breaker without listeners takes.
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("quiet")
        .config(
            cfg()
                .sliding_window(SlidingWindow::count(3))
                .minimum_number_of_calls(3)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap();
    for _ in 0..3 {
        ok(&b).unwrap();
    }
    for _ in 0..3 {
        assert!(settles_while_locked(
            &b,
            b.acquire().unwrap(),
            crate::Permit::success,
            SHOULD
        ));
    }
    assert_eq!(b.snapshot().total_calls, 3);
    assert_a_slow_success_takes_the_lock(&b, &clock);
    assert_eq!(b.snapshot().slow_calls, 1);
}

#[test]
fn an_open_wait_of_centuries_still_gives_an_estimate() {
    // The lock-free deadline saturates one nanosecond below "no estimate".
    let (b, _clock, _log) = make(
        cfg()
            .minimum_number_of_calls(1)
            .wait_duration_in_open(Duration::MAX),
    );
    fail(&b).unwrap_err();
    assert_eq!(b.state(), State::Open);
    let open = rejected(ok(&b));
    assert_eq!(open.state(), State::Open);
    assert!(open.retry_after().unwrap() > Duration::from_secs(500 * 365 * 86_400));
}

/// A breaker on a manual clock without listeners: plain successes may use
/// the success lanes (`tally.rs`).
fn make_quiet(config: ConfigBuilder) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder("svc")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (breaker, clock)
}

fn permit_success(p: crate::Permit) {
    p.success();
}

/// Issue 22: what a locked change did stays two words. A failure's record
/// returns `Option<Effects>`; returned through memory, its copies were loads
/// wider than the stores that wrote the fields, and each waited for them
/// (`perf annotate` of the failure path). The size is necessary, not
/// sufficient: the registers also need the two-scalar shape (`Effects` is a
/// `u64` and a `NonZeroU64`), which an earlier 16-byte struct of four fields
/// did not have; the timing is in `docs/performance.md`.
#[test]
fn issue_22_a_changes_effects_stay_two_words() {
    assert!(std::mem::size_of::<super::Effects>() <= 16);
    assert!(std::mem::size_of::<Option<super::Effects>>() <= 16);
}

/// Issue 22, two threads: the lock's word and the data it guards share no
/// cache line (nor the line pair some x86 cores prefetch together) with anything
/// else, above all not with `status`, which every admission reads; a lock
/// taken on one core then leaves the other core's admissions hitting.
#[test]
fn issue_22_the_lock_is_on_cache_lines_of_its_own() {
    let b = CircuitBreaker::new("svc");
    let lock = std::ptr::from_ref::<super::Locked>(&b.inner.core).addr();
    let status = std::ptr::from_ref(&b.inner.status).addr();
    assert_eq!(lock % 128, 0, "the lock starts a line pair");
    assert_eq!(size_of::<super::Locked>() % 128, 0, "and fills its lines");
    assert_ne!(lock / 128, status / 128, "status is elsewhere");
    // The window's counters and the lanes' key, which the lock holder
    // writes on a failure, are on the lock's lines too.
    let core = b.inner.core();
    let window = core.machine.window_bytes();
    let key = std::ptr::from_ref(&core.tally_key).addr();
    assert!(
        window.start > lock && window.end <= lock + 128,
        "{window:?} vs {lock}"
    );
    assert!(key > lock && key + size_of_val(&core.tally_key) <= lock + 128);
    drop(core);
    // The lock still works as one: a failure and a snapshot go through it.
    let r: Result<(), crate::CallError<std::io::Error>> =
        b.call(|| Err(std::io::Error::other("down")));
    assert!(r.is_err());
    assert_eq!(b.snapshot().failed_calls, 1);
}

#[test]
fn r5_1_a_success_settles_on_the_lanes_with_a_failure_in_the_count_window() {
    // Issue 22: a full count window of 8 holding one failure (1 of 8, below
    // 0.25): a success changes the window (it moves the failure towards the
    // exit), but no run of successes can trip, so it settles without the
    // lock; the next locked step folds it in first.
    let (b, _) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::count(8))
            .minimum_number_of_calls(8)
            .failure_rate_threshold(0.25),
    );
    for _ in 0..4 {
        ok(&b).unwrap();
    }
    let _ = fail(&b);
    for _ in 0..3 {
        ok(&b).unwrap();
    }
    // [s s s s F s s s]: folded by the snapshot.
    assert_eq!(b.snapshot().failed_calls, 1);
    for _ in 0..2 {
        assert!(settles_while_locked(
            &b,
            b.acquire().unwrap(),
            permit_success,
            SHOULD
        ));
    }
    // [s s F s s s s s] with the two successes folded in: the failure is
    // now the oldest but two. Two more on the lanes, then a failure: folded
    // first, they make the old failure the oldest, and the new one evicts
    // it (1 of 8). Without the fold it would evict a success: 2 of 8 >=
    // 0.25, a trip (R7.1).
    ok(&b).unwrap();
    ok(&b).unwrap();
    let _ = fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 8,
            failed_calls: 1,
            slow_calls: 0
        }
    );
    // Eight successes push the new failure out: the eighth takes the lock
    // and folds the lanes (exactly enough to leave the window clean), and
    // the window is quiet again.
    for _ in 0..8 {
        ok(&b).unwrap();
    }
    assert!(b.inner.core().machine.success_is_noop(), "quiet again");
    assert_eq!(b.snapshot().failed_calls, 0);
}

#[test]
fn r7_1_a_success_that_could_trip_takes_the_lock() {
    // Gate 4 in a window of 10 holding 2 failures of 2: the next two
    // successes reach the gate at 2 of 4 >= 0.5, so a success may trip and
    // must be evaluated: it takes the lock (and the fourth call trips).
    let (b, _) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::count(10))
            .minimum_number_of_calls(4),
    );
    let _ = fail(&b);
    let _ = fail(&b);
    assert!(!settles_while_locked(
        &b,
        b.acquire().unwrap(),
        permit_success,
        CANNOT
    ));
    assert_eq!(b.state(), State::Closed, "3 calls, below the gate");
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Open, "2 of 4 at the gate");
}

#[test]
fn r5_2_a_success_of_the_head_second_settles_on_the_lanes_a_new_second_takes_the_lock() {
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(2)))
            .minimum_number_of_calls(1)
            .failure_rate_threshold(1.0),
    );
    ok(&b).unwrap();
    let _ = fail(&b);
    assert!(settles_while_locked(
        &b,
        b.acquire().unwrap(),
        permit_success,
        SHOULD
    ));
    // A success read one second later moves the window: locked (R5.2).
    let permit = b.acquire().unwrap();
    clock.advance(secs(1.0));
    assert!(!settles_while_locked(&b, permit, permit_success, CANNOT));
    assert_eq!(b.snapshot().total_calls, 4);
    // Then the new second's successes are on the lanes again.
    assert!(settles_while_locked(
        &b,
        b.acquire().unwrap(),
        permit_success,
        SHOULD
    ));
    clock.advance(secs(1.0));
    // Second 0 has left the window: the failure and two successes with it.
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 2,
            failed_calls: 0,
            slow_calls: 0
        }
    );
    assert_eq!(b.state(), State::Closed);
}

/// The machine's own totals, without folding the success lanes in (what
/// a snapshot would fold first).
fn machine_totals(b: &CircuitBreaker, clock: &ManualClock) -> (u64, u64) {
    let s = b.inner.core().machine.snapshot(crate::Clock::now(clock));
    (s.total_calls, s.failed_calls)
}

#[test]
fn r7_1_a_time_window_failure_that_cannot_trip_is_recorded_before_the_waiting_successes() {
    // Issue 22, two threads: a failure of the head second that cannot trip
    // on the machine's own counts cannot trip with the successes waiting on
    // the lanes either (they only lower the rate), and in a bucket outcomes
    // have no order: it is recorded without folding them, so another
    // thread's lane stays on its core. One that could trip on the machine's
    // counts alone folds them first; one of a later second folds them
    // first too, so that they stay in their own second (R5.2).
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
            .minimum_number_of_calls(4)
            .failure_rate_threshold(0.5),
    );
    for _ in 0..3 {
        ok(&b).unwrap();
    }
    assert_eq!(machine_totals(&b, &clock), (0, 0), "three on the lanes");
    let _ = fail(&b);
    assert_eq!(machine_totals(&b, &clock), (4, 1), "below the gate: folded");
    ok(&b).unwrap();
    ok(&b).unwrap();
    let _ = fail(&b);
    assert_eq!(
        machine_totals(&b, &clock),
        (5, 2),
        "2 of 5 < 0.5: recorded first, the two successes still wait"
    );
    let _ = fail(&b);
    assert_eq!(b.state(), State::Closed, "3 of 8, not 3 of 6");
    assert_eq!(
        machine_totals(&b, &clock),
        (8, 3),
        "3 of 6 would trip: folded"
    );
    // Four more of second 0 wait; a failure in second 1 folds them into
    // second 0 before it moves the window.
    for _ in 0..4 {
        ok(&b).unwrap();
    }
    clock.advance(secs(1.0));
    let _ = fail(&b);
    assert_eq!(machine_totals(&b, &clock), (13, 4));
    clock.advance(secs(59.0));
    assert_eq!(
        b.snapshot(),
        Snapshot {
            total_calls: 1,
            failed_calls: 1,
            slow_calls: 0
        },
        "second 0 left the window with all twelve of its calls"
    );
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r7_1_count_windows_and_other_trip_policies_fold_before_every_failure() {
    // The order of a count window's ring is its future, a success ends a
    // consecutive-failures run, and a failures-within trip would open
    // before the waiting successes were in the window: the lanes are
    // folded before every failure there.
    let time = || SlidingWindow::time(Duration::from_secs(60));
    let configs = [
        cfg()
            .sliding_window(SlidingWindow::count(20))
            .minimum_number_of_calls(20),
        cfg()
            .sliding_window(time())
            .trip_policy(crate::TripPolicy::consecutive_failures(3)),
        cfg()
            .sliding_window(time())
            .trip_policy(crate::TripPolicy::failures_within(3, secs(10.0))),
    ];
    for config in configs {
        let (b, clock) = make_quiet(config);
        for _ in 0..10 {
            ok(&b).unwrap();
        }
        let _ = fail(&b);
        ok(&b).unwrap();
        let _ = fail(&b);
        assert_eq!(b.state(), State::Closed);
        assert_eq!(machine_totals(&b, &clock), (13, 2), "nothing waits");
        assert_eq!(b.snapshot().total_calls, 13);
    }
}

#[test]
fn r4_3_a_slow_success_never_takes_the_lanes() {
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(10)))
            .slow_call_duration_threshold(secs(1.0))
            .slow_call_rate_threshold(1.0)
            .minimum_number_of_calls(1),
    );
    ok(&b).unwrap();
    let permit = b.acquire().unwrap();
    clock.advance(secs(1.0));
    assert!(!settles_while_locked(&b, permit, permit_success, CANNOT));
    assert_eq!(b.snapshot().slow_calls, 1);
}

#[test]
fn r5_1_lane_successes_of_threads_that_come_and_go_are_each_counted_once() {
    // Issue 22: in a full count window (its key lasts the generation) a
    // thread that holds a slot counts on its owned lane with plain stores,
    // and gives the slot back when it exits; the next thread to take that
    // slot goes on from the count the last one left. Threads that come and
    // go, started together (more than there are slots, so some use the
    // shared lanes, and two sharing one owned lane would lose increments),
    // add 48,000 successes in all to a window of 100,000 holding one
    // failure, its newest slot. Counted exactly once each, they leave the
    // failure to be pushed out by exactly the 52,000th success after them;
    // one lost (or counted twice) would move that.
    const SIZE: usize = 100_000;
    const EACH: usize = 2_000;
    let (b, _) = make_quiet(cfg().sliding_window(SlidingWindow::count(SIZE as u32)));
    for _ in 0..SIZE - 1 {
        ok(&b).unwrap();
    }
    let _ = fail(&b);
    assert!(
        b.inner.tally.owned_open(),
        "a full window: owned lanes open"
    );
    let mut added = 0;
    for round in 0..6 {
        let n = 1 + round % 3 * 2;
        let start = Arc::new(Barrier::new(n + 1));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (b, start) = (b.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..EACH {
                        ok(&b).unwrap();
                    }
                })
            })
            .collect();
        start.wait();
        for _ in 0..EACH {
            ok(&b).unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        added += EACH * (n + 1);
        assert_eq!(b.snapshot().failed_calls, 1, "round {round}");
    }
    assert_eq!(added, 48_000);
    let mut more = 0;
    while b.snapshot().failed_calls == 1 {
        ok(&b).unwrap();
        more += 1;
        assert!(more <= SIZE, "the failure never left");
    }
    assert_eq!(more, SIZE - added);
    assert_eq!(b.snapshot().total_calls, SIZE as u64);
    assert_eq!(b.state(), State::Closed);
}

/// A time window of 60 s (gate 3, threshold 0.5) holding one failure, its
/// owned lanes forced open below the gate (never so through the API), and
/// lane 0's gate as an owner reads it now.
fn owned_forced_open() -> (CircuitBreaker, ManualClock, u64) {
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
            .minimum_number_of_calls(3)
            .failure_rate_threshold(0.5),
    );
    let _ = fail(&b);
    let key = b.inner.core().tally_key.expect("one failure of 3: a key");
    b.inner.tally.open_owned(key);
    let read = b.inner.tally.owned_gate();
    (b, clock, read)
}

#[test]
fn r7_1_a_late_owned_success_without_a_key_is_evaluated_at_the_next_fold() {
    // The owned lanes open only under a key that lasts the generation, so
    // a late success of this generation never meets a machine without a
    // key. The fold handles that case anyway, through the full path: here
    // it is made by hand. A time window holding one failure, gate 3,
    // threshold 0.5, its owned lanes forced open; an owner reads the key,
    // a second failure takes the key away (the next success could trip),
    // and the owner's store lands after that. The next locked step (the
    // snapshot) records the success first, with its trip evaluation: the
    // third call, 2 of 3, OPEN, reported as a change of its own.
    let (b, _, read) = owned_forced_open();
    let _ = fail(&b);
    assert!(b.inner.core().tally_key.is_none(), "the key is gone");
    b.inner.tally.store_on_lane_0(read);
    assert_eq!(b.state(), State::Closed, "not folded yet");
    let snap = b.snapshot();
    assert_eq!((b.state(), b.generation()), (State::Open, 1));
    assert_eq!((snap.total_calls, snap.failed_calls), (3, 2));
    // Of the old generation now: a second late store is stale (R8.8).
    b.inner.tally.store_on_lane_0(read);
    assert_eq!(b.snapshot(), snap);
}

#[test]
fn r5_2_a_late_owned_success_under_a_later_key_of_its_generation_counts_once() {
    // An owned store made under second 0's key lands after a success of
    // second 1 re-keyed the lanes (a time window's owned lanes forced open
    // by hand, as above): of this generation, and the machine has a key,
    // so the next fold records it with the current successes, once.
    let (b, clock, read) = owned_forced_open();
    clock.advance(Duration::from_secs(1));
    ok(&b).unwrap(); // a new second: the locked path, and a new key
    assert!(b.inner.core().tally_key.is_some(), "1 of 3: still a key");
    b.inner.tally.store_on_lane_0(read);
    let snap = b.snapshot();
    assert_eq!((snap.total_calls, snap.failed_calls), (3, 1));
    assert_eq!(b.snapshot(), snap, "counted once");
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn r5_1_owned_lanes_open_only_once_a_count_window_is_full() {
    // A key that can go (a time window, a count window still filling)
    // keeps the shared lanes; a full count window's key lasts.
    let (timed, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
            .minimum_number_of_calls(3),
    );
    let (counted, _) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::count(4))
            .minimum_number_of_calls(3),
    );
    for b in [&timed, &counted] {
        let _ = fail(b);
        ok(b).unwrap();
        ok(b).unwrap();
        let _ = b.snapshot();
        assert!(!b.inner.tally.owned_open(), "a key that may go");
    }
    for _ in 0..10 {
        clock.advance(Duration::from_millis(300));
        ok(&timed).unwrap();
        let _ = timed.snapshot();
        assert!(!timed.inner.tally.owned_open(), "a time window's key goes");
    }
    ok(&counted).unwrap(); // full: [F, S, S, S]
    let _ = counted.snapshot();
    assert!(
        counted.inner.tally.owned_open(),
        "a full window's key lasts"
    );
}

#[test]
fn r5_1_successes_that_raced_a_re_key_are_recorded_not_dropped() {
    // A success added to a shared lane after the fold, while a failure is
    // recorded under the lock (here, inside the locked step itself), raced
    // that failure: when the failure moves the key, the re-key collects it
    // and records it through the full path. A time window (shared lanes),
    // gate 3, threshold 0.6: one failure, then a success on the lanes
    // during a second failure. After it a success would trip (2 of 3), so
    // the key goes, and the racing success is that third call.
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
            .minimum_number_of_calls(3)
            .failure_rate_threshold(0.6),
    );
    let _ = fail(&b);
    assert!(b.inner.core().tally_key.is_some(), "1 of 3 < 0.6: a key");
    let generation = b.generation();
    let ((), effects) = b.inner.change(|core| {
        let now = crate::Clock::now(&clock);
        let added = b.inner.tally.try_add(generation, now);
        assert!(added, "a shared lane takes it");
        let admission = crate::machine::Admission {
            generation,
            probe: false,
        };
        let t = core
            .machine
            .record(now, admission, crate::Outcome::Failure, false);
        assert!(t.is_none(), "2 calls, below the gate");
        ((), None)
    });
    // As every caller of `change` does: the trip's effects (timer, events).
    b.inner.after(effects);
    assert_eq!((b.state(), b.generation()), (State::Open, generation + 1));
}

#[test]
fn r11_state_since_moves_only_when_the_state_does() {
    let (b, clock) = make_quiet(
        cfg()
            .sliding_window(SlidingWindow::count(10))
            .minimum_number_of_calls(2)
            .failure_rate_threshold(0.5),
    );
    let built = b.state_since();
    clock.advance(Duration::from_secs(3));
    ok(&b).unwrap();
    let _ = b.snapshot();
    assert_eq!(b.state_since(), built, "no transition: unchanged");
    clock.advance(Duration::from_secs(4));
    let _ = fail(&b); // 1 of 2: trips
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.state_since() - built, Duration::from_secs(7));
}

/// A listener that logs its breaker's creation and every event's kind.
struct Lifecycle(Log);

impl crate::EventListener for Lifecycle {
    fn on_event(&self, event: &Event<'_>) {
        self.0.lock().unwrap().push(event.kind().to_owned());
    }

    fn on_breaker_created(&self, breaker: &str, state: State) {
        self.0
            .lock()
            .unwrap()
            .push(format!("created {breaker} {state:?}"));
    }
}

/// `on_breaker_created` reaches every listener once, with the state the
/// breaker starts in, before any event; through an `Arc` as well. A breaker
/// without listeners builds and runs without calling anything.
#[test]
fn listeners_hear_of_the_breaker_being_built_first_and_once() {
    let log: Log = Arc::default();
    let shared = Arc::new(Lifecycle(Arc::clone(&log)));
    let b = CircuitBreaker::builder("svc")
        .listener(Lifecycle(Arc::clone(&log)))
        .listener(Arc::clone(&shared))
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["created svc MetricsOnly", "created svc MetricsOnly"]
    );
    assert!(b.call(|| Ok::<_, std::io::Error>(())).is_ok());
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(
        log[2..].iter().all(|e| !e.starts_with("created")),
        "{log:?}"
    );

    let quiet = CircuitBreaker::new("quiet");
    assert!(quiet.call(|| Ok::<_, std::io::Error>(())).is_ok());
}

/// `created_at` is the breaker's clock at build, `now` its clock now, and
/// `state_since` the last change of state, all on that clock (a snapshot
/// of the same readings the dashboard shows).
#[test]
fn created_at_now_and_state_since_read_the_breakers_own_clock() {
    let clock = ManualClock::new();
    clock.advance(secs(7.0));
    let built = crate::Clock::now(&clock);
    let b = CircuitBreaker::builder("svc")
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(b.created_at(), built);
    assert_eq!(b.now(), built);
    clock.advance(secs(3.0));
    assert_eq!(b.now(), built + secs(3.0));
    assert_eq!(b.created_at(), built, "fixed at build");
    b.force_open();
    clock.advance(secs(2.0));
    assert_eq!(b.state_since(), built + secs(3.0));
    assert_eq!(b.now() - b.created_at(), secs(5.0));
}
