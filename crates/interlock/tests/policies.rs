//! Count-based trip and half-open policies (issue 11), on a `ManualClock`.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CallError, CircuitBreaker, Config, ConfigBuilder, Event, HalfOpenPolicy, ManualClock,
    SlidingWindow, State, TripPolicy, Verdict,
};

type Log = Arc<Mutex<Vec<String>>>;

fn make(config: ConfigBuilder) -> (CircuitBreaker, ManualClock, Log) {
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let sink = log.clone();
    let breaker = CircuitBreaker::builder("cache")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| {
            if !matches!(e, Event::CallRecorded { .. }) {
                sink.lock().unwrap().push(e.to_string());
            }
        })
        .build()
        .unwrap();
    (breaker, clock, log)
}

fn ok(b: &CircuitBreaker) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Ok(()))
}

fn fail(b: &CircuitBreaker) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Err(std::io::Error::other("connect refused")))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn consecutive_failures_trip_after_n_in_a_row_and_any_success_resets() {
    let (b, _, _) = make(Config::builder().trip_policy(TripPolicy::consecutive_failures(3)));
    let _ = fail(&b);
    let _ = fail(&b);
    ok(&b).unwrap(); // resets the run
    let _ = fail(&b);
    let _ = fail(&b);
    assert_eq!(b.state(), State::Closed);
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
    // The minimum-calls gate does not apply to a count (only 5 of the
    // default 10 calls were seen).
    assert_eq!(b.snapshot().total_calls, 6);
}

#[test]
fn consecutive_failures_count_inconclusive_as_failures_when_closed() {
    let (b, _, _) = make(Config::builder().trip_policy(TripPolicy::consecutive_failures(2)));
    b.acquire().unwrap().record(Verdict::Inconclusive);
    b.acquire().unwrap().record(Verdict::Inconclusive);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failures_within_a_rolling_period_successes_do_not_reset() {
    let (b, clock, _) =
        make(Config::builder().trip_policy(TripPolicy::failures_within(3, secs(60))));
    let _ = fail(&b);
    ok(&b).unwrap();
    clock.advance(secs(30));
    let _ = fail(&b);
    ok(&b).unwrap();
    clock.advance(secs(31)); // the first failure is now 61 s old
    let _ = fail(&b);
    assert_eq!(b.state(), State::Closed);
    clock.advance(secs(29)); // the second is exactly 60 s old: still counts
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_slow_call_rule_holds_under_count_policies() {
    let (b, clock, _) = make(
        Config::builder()
            .trip_policy(TripPolicy::consecutive_failures(100))
            .minimum_number_of_calls(2)
            .sliding_window(SlidingWindow::count(2))
            .slow_call_duration_threshold(secs(1)),
    );
    for _ in 0..2 {
        b.call(|| {
            clock.advance(secs(1));
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
    }
    assert_eq!(b.state(), State::Open);
}

fn cachekit_like() -> ConfigBuilder {
    // failure_threshold=5, success_threshold=3, recovery_timeout=30,
    // half_open_requests=3 (slots, not a concurrency limit).
    Config::builder()
        .trip_policy(TripPolicy::failures_within(5, secs(60)))
        .half_open_policy(HalfOpenPolicy::consecutive_successes(3))
        .wait_duration_in_open(secs(30))
        .permitted_calls_in_half_open(3)
        .max_concurrent_probes(3)
}

#[test]
fn cachekit_example_scenario_requests_1_to_38() {
    let (b, clock, log) = make(cachekit_like());
    let backend_calls = std::cell::Cell::new(0);
    let request = |b: &CircuitBreaker, backend_up: bool| {
        let r = b.call(|| {
            backend_calls.set(backend_calls.get() + 1);
            if backend_up {
                Ok(())
            } else {
                Err(std::io::Error::other("connect refused"))
            }
        });
        // The caller runs uncached whatever happens; we only watch the breaker.
        matches!(r, Err(CallError::Rejected(_)))
    };
    let at = |millis: u64| assert!(clock.set(interlock::Timestamp::from_nanos(millis * 1_000_000)));
    // Requests 1-5, one a second from 12:00:00 (t = 0): the backend is down.
    for n in 1..=5u64 {
        if n > 1 {
            at((n - 1) * 1000);
        }
        assert!(!request(&b, false), "request {n} reaches the backend");
        assert_eq!(
            b.state(),
            if n < 5 { State::Closed } else { State::Open },
            "after {n}"
        );
    }
    assert_eq!(take(&log), ["cache: state closed -> open"]); // opened at t = 4 s
    // Requests 6-34: skipped without trying to connect, for 30 s after opening.
    for n in 6..=34u64 {
        at(4_500 + (n - 6) * 1000);
        assert!(request(&b, false), "request {n} must be rejected");
    }
    assert_eq!(b.retry_after(), Some(Duration::from_millis(1_500)));
    assert_eq!(backend_calls.get(), 5);
    // Request 35, 30 s after opening: HALF_OPEN, probe 1 of 3; Redis is back.
    at(34_000);
    for n in 35..=37 {
        assert!(!request(&b, true), "probe request {n}");
        assert_eq!(
            b.state(),
            if n < 37 {
                State::HalfOpen
            } else {
                State::Closed
            }
        );
    }
    assert!(!request(&b, true), "request 38: normal operation");
    assert_eq!(backend_calls.get(), 9);
    let events = take(&log);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.contains("call rejected"))
            .count(),
        29
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.contains("state"))
            .collect::<Vec<_>>(),
        [
            "cache: state open -> half_open",
            "cache: state half_open -> closed"
        ]
    );
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn open_then_half_open(b: &CircuitBreaker, clock: &ManualClock) {
    support::fail_until_tripped(b, || {
        let _ = fail(b);
    });
    clock.advance(secs(30));
}

#[test]
fn consecutive_successes_reopen_on_the_first_bad_probe_and_back_off() {
    let (b, clock, _) = make(cachekit_like().wait_duration_backoff_multiplier(2.0));
    open_then_half_open(&b, &clock);
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    let _ = fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(secs(60)), "a failed round backs off");
}

#[test]
fn consecutive_successes_ignore_outcomes_of_an_earlier_cycle() {
    let (b, clock, _) = make(cachekit_like());
    open_then_half_open(&b, &clock);
    let old_probe = b.acquire().unwrap();
    let _ = fail(&b); // this cycle fails: OPEN
    clock.advance(secs(30));
    ok(&b).unwrap(); // a new cycle: 1 success
    old_probe.failure(); // from the earlier cycle: ignored
    assert_eq!(b.state(), State::HalfOpen);
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn consecutive_successes_reopen_a_cycle_whose_probes_never_report() {
    // D7: every slot held and nothing heard for `max_wait_in_half_open`
    // (the 30 s cooldown by default): the three lost probes count as
    // inconclusive, the whole budget, so the cycle re-opens (R9.4) and the
    // next cycle starts a cooldown later.
    let (b, clock, _) = make(cachekit_like());
    open_then_half_open(&b, &clock);
    let lost: Vec<_> = (0..3).map(|_| b.acquire().unwrap()).collect();
    assert!(b.acquire().is_err(), "all three slots are held");
    clock.advance(secs(29));
    assert!(b.acquire().is_err(), "not yet a whole wait later");
    clock.advance(secs(1));
    let generation = b.generation();
    let refused = b
        .acquire()
        .expect_err("the cycle is abandoned and re-opens");
    assert_eq!(refused.state(), State::Open);
    assert_eq!(refused.retry_after(), Some(secs(30)));
    assert!(b.generation() > generation);
    for late in lost {
        late.failure(); // outcomes of the abandoned cycle are ignored
    }
    assert_eq!(b.retry_after(), Some(secs(30)));
    clock.advance(secs(30));
    let fresh = b.acquire().expect("a fresh cycle after the cooldown");
    fresh.success();
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn consecutive_successes_inconclusive_probes_give_their_slot_back() {
    let (b, clock, _) = make(cachekit_like());
    open_then_half_open(&b, &clock);
    b.acquire().unwrap().record(Verdict::Inconclusive);
    b.acquire().unwrap().record(Verdict::Inconclusive);
    assert_eq!(b.probes().admitted, 0);
    for _ in 0..3 {
        ok(&b).unwrap();
    }
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn invalid_policies_are_rejected_by_name() {
    let cases = [
        Config::builder().trip_policy(TripPolicy::consecutive_failures(0)),
        Config::builder().trip_policy(TripPolicy::failures_within(0, secs(1))),
        Config::builder().trip_policy(TripPolicy::failures_within(3, Duration::ZERO)),
        Config::builder().trip_policy(TripPolicy::failures_within(
            interlock::MAX_FAILURES_WITHIN + 1,
            secs(1),
        )),
    ];
    for c in cases {
        assert_eq!(c.build().unwrap_err().field(), "trip_policy");
    }
    for successes in [0, 11] {
        let e = Config::builder()
            .half_open_policy(HalfOpenPolicy::consecutive_successes(successes))
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "half_open_policy");
    }
}
