//! The default clock on real time: which clock a breaker built without one
//! reads, and the precise readings that keep `CoarseClock` exact where a
//! tick of lag would change a decision (R4.3 slow calls, R6 the end of an
//! OPEN wait, R12.2 the timer). These tests run on real time by nature; they
//! busy-wait on `MonotonicClock` with a deadline, never sleep.

use std::time::Duration;

use crate::clock::{COARSE_MIN_SLOW_THRESHOLD, ClockHandle, duration_to_nanos};
use crate::{
    CallError, CircuitBreaker, Clock, CoarseClock, Config, ManualClock, MonotonicClock,
    SlidingWindow, State,
};

fn clock_of(b: &CircuitBreaker) -> &ClockHandle {
    &b.inner.clock
}

/// Spins until `MonotonicClock` reads at least `until` (at most 10 s).
fn spin_until(until: crate::Timestamp) {
    let deadline = MonotonicClock.now() + Duration::from_secs(10);
    while MonotonicClock.now() < until {
        assert!(MonotonicClock.now() < deadline, "spun for 10 s");
        std::hint::spin_loop();
    }
}

fn with_slow_threshold(threshold: Duration) -> Config {
    Config::builder()
        .slow_call_duration_threshold(threshold)
        .build()
        .unwrap()
}

#[test]
fn without_a_clock_the_slow_threshold_picks_coarse_or_precise() {
    let default = CircuitBreaker::new("default");
    assert!(matches!(clock_of(&default), ClockHandle::Coarse));
    let at_bound = CircuitBreaker::builder("bound")
        .config(with_slow_threshold(COARSE_MIN_SLOW_THRESHOLD))
        .build()
        .unwrap();
    assert!(matches!(clock_of(&at_bound), ClockHandle::Coarse));
    let tight = CircuitBreaker::builder("tight")
        .config(with_slow_threshold(
            COARSE_MIN_SLOW_THRESHOLD - Duration::from_nanos(1),
        ))
        .build()
        .unwrap();
    assert!(matches!(clock_of(&tight), ClockHandle::Monotonic));
    // A chosen clock is kept whatever the threshold.
    let chosen = CircuitBreaker::builder("chosen")
        .clock(MonotonicClock)
        .build()
        .unwrap();
    assert!(matches!(clock_of(&chosen), ClockHandle::Monotonic));
    let manual = CircuitBreaker::builder("manual")
        .config(with_slow_threshold(Duration::from_millis(1)))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    assert!(matches!(clock_of(&manual), ClockHandle::Manual(_)));
    // A registry passes "no clock" on to its breakers.
    let registry = crate::Registry::new();
    assert!(matches!(clock_of(&registry.get("r")), ClockHandle::Coarse));
}

/// Rounds a re-reading test tries before it gives up on seeing the coarse
/// clock lag: each decisive round needs the test thread not to be preempted
/// across one tick, which a loaded machine can deny for a while.
const ATTEMPTS: u64 = 200;
/// Decisive rounds each of those tests needs.
const DECISIVE: u64 = 3;

/// Runs `round` (which asserts its own outcome and says whether it was
/// decisive) until [`DECISIVE`] rounds were, within [`ATTEMPTS`]; returns
/// how many rounds ran.
fn until_decisive(mut round: impl FnMut() -> bool) -> u64 {
    let (mut rounds, mut decisive) = (0, 0);
    while decisive < DECISIVE {
        assert!(rounds < ATTEMPTS, "the coarse clock never lagged");
        rounds += 1;
        if round() {
            decisive += 1;
        }
    }
    rounds
}

#[test]
fn r4_3_a_call_lasting_exactly_the_threshold_is_slow_on_the_coarse_clock() {
    // The call lasts the threshold on the precise clock. A round is decisive
    // when the coarse clock moved less than the threshold from before the
    // call to the end of its closure: the breaker's own coarse readings,
    // taken in between (give or take the few instructions after the closure),
    // then measured it short, and only the precise re-reading of a call near
    // the threshold judges it slow. Every call must be slow; the test goes on
    // until it has seen several decisive rounds, so that neither a lucky tick
    // nor a preempted test thread can pass it.
    let threshold = COARSE_MIN_SLOW_THRESHOLD;
    // Never trips: every call here is slow.
    let b = CircuitBreaker::builder("slow")
        .config(
            Config::builder()
                .slow_call_duration_threshold(threshold)
                .sliding_window(SlidingWindow::count(1_000))
                .minimum_number_of_calls(1_000)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    assert!(matches!(clock_of(&b), ClockHandle::Coarse));
    let (mut calls, mut slow) = (0, 0);
    until_decisive(|| {
        let before = CoarseClock.now();
        // The last coarse reading before the breaker's own end reading (a
        // precise re-reading moves the coarse clock on, so a reading after
        // the call would tell nothing), and how far it lagged real time.
        let (mut after, mut lag) = (before, 0);
        b.call(|| {
            spin_until(MonotonicClock.now() + threshold);
            after = CoarseClock.now();
            lag = MonotonicClock
                .now()
                .as_nanos()
                .saturating_sub(after.as_nanos());
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
        calls += 1;
        let now_slow = b.snapshot().slow_calls;
        // The re-reading covers a coarse clock up to half the threshold
        // behind (`refine_nanos`). A ticker starved for longer than that (a
        // 2-core machine at load 12 did it) leaves the call measured short:
        // such a round proves nothing either way, and is not counted.
        let covered = lag < duration_to_nanos(threshold) / 2;
        if covered {
            assert_eq!(now_slow, slow + 1, "a call of the threshold was not slow");
        }
        slow = now_slow;
        covered && after.as_nanos() - before.as_nanos() < duration_to_nanos(threshold)
    });
    // A quick call is not slow.
    b.call(|| Ok::<_, std::io::Error>(())).unwrap();
    assert_eq!(b.snapshot().slow_calls, slow);
    assert_eq!(b.snapshot().total_calls, calls + 1);
}

/// A breaker on the default (coarse) clock, tripped, and the exact end of its
/// OPEN wait: the trip's coarse reading is known when the coarse clock did
/// not tick during the tripping call (tried until it did not).
fn tripped_on_the_default_clock(wait: Duration) -> (CircuitBreaker, crate::Timestamp) {
    loop {
        let b = CircuitBreaker::builder("open")
            .config(
                Config::builder()
                    .minimum_number_of_calls(1)
                    .wait_duration_in_open(wait)
                    .permitted_calls_in_half_open(1)
                    .max_concurrent_probes(1)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        assert!(matches!(clock_of(&b), ClockHandle::Coarse));
        let before = CoarseClock.now();
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
        let after = CoarseClock.now();
        assert_eq!(b.state(), State::Open);
        if before == after {
            return (b, before + wait);
        }
    }
}

#[test]
fn r6_a_caller_who_waited_the_whole_wait_is_admitted_on_the_coarse_clock() {
    // The wait has just elapsed on the precise clock. A round is decisive
    // when the coarse clock still reads before the deadline just before the
    // call: the breaker's coarse reading, a few instructions later, then said
    // "still OPEN", and only the precise look near the deadline admits the
    // caller. Every caller must be
    // admitted; the test goes on until several rounds were decisive.
    let wait = Duration::from_millis(50);
    until_decisive(|| {
        let (b, until) = tripped_on_the_default_clock(wait);
        match b.call(|| Ok::<_, std::io::Error>(())) {
            Err(CallError::Rejected(open)) => {
                assert!(open.retry_after().unwrap() <= wait);
            }
            other => panic!("an OPEN breaker admitted a call at once: {other:?}"),
        }
        spin_until(until);
        // The last coarse reading before the breaker's own (a precise look
        // moves the coarse clock on, so a reading after the call would tell
        // nothing).
        let coarse_before = CoarseClock.now();
        let admitted = b.call(|| Ok::<_, std::io::Error>(()));
        assert!(
            admitted.is_ok(),
            "a caller who waited the whole wait was rejected: {admitted:?}"
        );
        assert_eq!(b.state(), State::Closed);
        coarse_before < until
    });
}

#[test]
fn r12_2_the_timer_is_never_early_on_the_coarse_clock() {
    // The timer fires on real time at the deadline; a coarse reading a tick
    // short would find the wait not elapsed and never re-arm (R12.2),
    // leaving the breaker OPEN. It takes a precise reading instead.
    for _ in 0..3 {
        let b = CircuitBreaker::builder("timer")
            .config(
                Config::builder()
                    .minimum_number_of_calls(1)
                    .wait_duration_in_open(Duration::from_millis(20))
                    .auto_transition(true)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        assert!(matches!(clock_of(&b), ClockHandle::Coarse));
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
        let deadline = MonotonicClock.now() + Duration::from_secs(10);
        while b.state() != State::HalfOpen {
            assert!(
                MonotonicClock.now() < deadline,
                "the timer never moved the breaker to HALF_OPEN"
            );
            std::thread::yield_now();
        }
    }
}
