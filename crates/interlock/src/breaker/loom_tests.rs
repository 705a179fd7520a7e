//! loom models of the hot path: the status word, the OPEN deadline and the
//! machine lock under every interleaving of two or three threads.
//!
//! ```text
//! RUSTFLAGS="--cfg interlock_loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p interlock --release --lib loom
//! ```
//!
//! The breakers here use a `ManualClock` moved only before the threads
//! start, no `auto_transition` (its timer thread is not modelled) and
//! listeners that count with loom atomics.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use crate::{CircuitBreaker, Clock, Config, Event, ManualClock, SlidingWindow, State, Verdict};

/// Counts the listener's `StateChanged` events by (from, to).
#[derive(Default)]
struct Changes {
    trips: AtomicUsize,
    half_opens: AtomicUsize,
    other: AtomicUsize,
}

fn breaker(config: Config, clock: &ManualClock) -> (CircuitBreaker, Arc<Changes>) {
    let changes = Arc::new(Changes::default());
    let sink = changes.clone();
    let breaker = CircuitBreaker::builder("loom")
        .config(config)
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| {
            if let Event::StateChanged { from, to, .. } = *e {
                let counter = match (from, to) {
                    (State::Closed, State::Open) => &sink.trips,
                    (State::Open, State::HalfOpen) => &sink.half_opens,
                    _ => &sink.other,
                };
                counter.fetch_add(1, Ordering::SeqCst);
            }
        })
        .build()
        .unwrap();
    (breaker, changes)
}

fn config(window: u32, permitted: u32, concurrent: u32) -> Config {
    Config::builder()
        .sliding_window(SlidingWindow::count(window))
        .minimum_number_of_calls(window)
        .wait_duration_in_open(Duration::from_secs(1))
        .permitted_calls_in_half_open(permitted)
        .max_concurrent_probes(concurrent)
        .build()
        .unwrap()
}

/// Trips `b` with one failure and lets its wait elapse.
fn open_and_wait(b: &CircuitBreaker, clock: &ManualClock) {
    b.acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    clock.advance(Duration::from_secs(1));
}

#[test]
fn loom_concurrent_failures_trip_once() {
    // R13.6: two failures racing to complete the window trip exactly once.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(2, 1, 1), &clock);
        let other = b.clone();
        let t = thread::spawn(move || other.acquire().unwrap().failure());
        b.acquire().unwrap().failure();
        t.join().unwrap();
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.generation(), 1);
        assert_eq!(b.snapshot().total_calls, 2);
        assert_eq!(changes.trips.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn loom_admission_racing_a_trip() {
    // A call admitted on the lock-free path while another thread trips the
    // breaker: either it was admitted in CLOSED (and its outcome, now
    // stale, is ignored) or it is rejected by the published OPEN.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(1, 1, 1), &clock);
        let other = b.clone();
        let t = thread::spawn(move || match other.acquire() {
            Ok(permit) => {
                assert!(!permit.is_probe());
                permit.success();
            }
            Err(open) => {
                assert_eq!(open.state(), State::Open);
                assert_eq!(open.retry_after(), Some(Duration::from_secs(1)));
            }
        });
        b.acquire().unwrap().failure();
        t.join().unwrap();
        assert_eq!(changes.trips.load(Ordering::SeqCst), 1);
        assert_eq!(b.generation(), 1);
        // The one-call window ends on the failure: a success that settled
        // first was evicted by it, one that settled later was stale.
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (1, 1));
    });
}

#[test]
fn loom_lazy_half_open_happens_once() {
    // R6 / R8.6: two calls after the wait: one moves OPEN -> HALF_OPEN and
    // is the probe, the other finds the concurrency cap taken.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(1, 2, 1), &clock);
        open_and_wait(&b, &clock);
        let other = b.clone();
        let t = thread::spawn(move || other.acquire().ok());
        let mine = b.acquire().ok();
        let theirs = t.join().unwrap();
        assert_eq!(changes.half_opens.load(Ordering::SeqCst), 1);
        assert_eq!(b.generation(), 2);
        assert_eq!(
            usize::from(mine.is_some()) + usize::from(theirs.is_some()),
            1
        );
        let probes = b.probes();
        assert_eq!((probes.admitted, probes.in_flight), (1, 1));
        drop((mine, theirs));
        let probes = b.probes();
        assert_eq!((probes.admitted, probes.in_flight), (0, 0));
    });
}

#[test]
fn loom_probe_counting_with_settle_and_release() {
    // R8.2 / R8.9: one probe settles, one is cancelled, a third thread asks
    // to be admitted; the counters always match what happened.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(1, 3, 2), &clock);
        open_and_wait(&b, &clock);
        let first = b.acquire().unwrap();
        let second = b.acquire().unwrap();
        assert!(first.is_probe() && second.is_probe());
        let b1 = b.clone();
        let settle = thread::spawn(move || first.record(Verdict::Success));
        let cancel = thread::spawn(move || drop(second));
        let third = b1.acquire().ok();
        settle.join().unwrap();
        cancel.join().unwrap();
        let probes = b.probes();
        assert_eq!(probes.completed, 1);
        assert_eq!(probes.admitted, 1 + u32::from(third.is_some()));
        assert_eq!(probes.in_flight, u32::from(third.is_some()));
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(changes.other.load(Ordering::SeqCst), 0);
        drop(third);
    });
}

#[test]
fn loom_round_decided_once() {
    // R8.3: the last two verdicts of a round race: exactly one decision.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(1, 2, 2), &clock);
        open_and_wait(&b, &clock);
        let p1 = b.acquire().unwrap();
        let p2 = b.acquire().unwrap();
        let t = thread::spawn(move || p1.record(Verdict::Success));
        p2.record(Verdict::Success);
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.generation(), 3);
        assert_eq!(changes.other.load(Ordering::SeqCst), 1); // HALF_OPEN -> CLOSED
        assert!(b.acquire().is_ok_and(|p| !p.is_probe()));
    });
}

#[test]
fn loom_reset_racing_a_call() {
    // A call in flight across reset(): its outcome belongs to the old
    // generation and never reaches the fresh window (R8.8, R11.2).
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, _) = breaker(config(2, 1, 1), &clock);
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || other.reset());
        permit.failure();
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.generation(), 1);
        // Either recorded before the reset (then cleared) or stale.
        assert_eq!(b.snapshot().total_calls, 0);
    });
}

#[test]
fn loom_last_failure_of_racing_failures_and_a_reset() {
    // R11.3: two failures with different errors and a reset race. The last
    // failure is one whole error or none (reset may come last), and the
    // breaker's copy of it, kept under its lock, is the log's newest entry:
    // the same error again makes no new version.
    fn fail(b: &CircuitBreaker, message: &str) {
        let message = message.to_owned();
        let r = b.call(|| Err::<(), _>(std::io::Error::other(message)));
        assert!(r.is_err());
    }
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, _) = breaker(config(4, 1, 1), &clock);
        let (one, two) = (b.clone(), b.clone());
        let t1 = thread::spawn(move || fail(&one, "a"));
        let t2 = thread::spawn(move || two.reset());
        fail(&b, "b");
        t1.join().unwrap();
        t2.join().unwrap();
        let last = b.last_failure();
        assert!(
            last.as_ref()
                .is_none_or(|f| ["a", "b"].contains(&f.message()))
        );
        let version = b.inner.identity.failure_version();
        if let Some(f) = last {
            fail(&b, f.message());
            assert_eq!(b.inner.identity.failure_version(), version);
        }
    });
}

/// A count window of 2 (minimum 2) already full of successes, so a plain
/// success settles without the lock (the status word's quiet bit).
fn quiet_breaker(failure_rate_threshold: f64) -> (CircuitBreaker, Arc<Changes>) {
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(2))
        .minimum_number_of_calls(2)
        .failure_rate_threshold(failure_rate_threshold)
        .build()
        .unwrap();
    let (b, changes) = breaker(config, &ManualClock::new());
    b.acquire().unwrap().success();
    b.acquire().unwrap().success();
    (b, changes)
}

#[test]
fn loom_quiet_success_racing_a_trip() {
    // A success that may skip the lock races a failure that trips (1 of 2
    // failed reaches 0.5): either it settles first (skipped, as a no-op) or
    // after the trip (stale). One trip, and the window ends on the failure.
    loom::model(|| {
        let (b, changes) = quiet_breaker(0.5);
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || other.acquire().unwrap().failure());
        permit.success();
        t.join().unwrap();
        assert_eq!((b.state(), b.generation()), (State::Open, 1));
        assert_eq!(changes.trips.load(Ordering::SeqCst), 1);
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (2, 1));
    });
}

#[test]
fn loom_quiet_success_after_a_finished_failure_is_counted() {
    // A failure that does not trip (threshold 1.0) clears the quiet bit
    // before it returns. A success that starts settling after that return
    // must be counted: the window then holds [failure, success], and one
    // more success leaves no failure. A success that may have settled
    // first (skipped) leaves [success, failure], then [failure, success].
    loom::model(|| {
        let (b, changes) = quiet_breaker(1.0);
        let permit = b.acquire().unwrap();
        let failed = Arc::new(AtomicUsize::new(0));
        let (other, done) = (b.clone(), failed.clone());
        let t = thread::spawn(move || {
            other.acquire().unwrap().failure();
            done.store(1, Ordering::SeqCst);
        });
        let failure_first = failed.load(Ordering::SeqCst) == 1;
        permit.success();
        t.join().unwrap();
        b.acquire().unwrap().success();
        let snap = b.snapshot();
        assert_eq!(snap.total_calls, 2);
        if failure_first {
            assert_eq!(
                snap.failed_calls, 0,
                "a success after the failure was skipped"
            );
        } else {
            assert!(snap.failed_calls <= 1);
        }
        assert_eq!((b.state(), b.generation()), (State::Closed, 0));
        assert_eq!(changes.trips.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn loom_abandonment_racing_the_late_settle() {
    // D7: the round's only concurrency slot has been held for
    // `max_wait_in_half_open` (here the 1 s wait) when its probe finally
    // settles, while another call asks for admission. Either the settle
    // lands first (a verdict, the slot free again) or the round is
    // abandoned first (the probe inconclusive, its settle stale): never
    // both, never neither, and the caps hold.
    loom::model(|| {
        let clock = ManualClock::new();
        let (b, changes) = breaker(config(1, 2, 1), &clock);
        open_and_wait(&b, &clock);
        let hung = b.acquire().unwrap();
        assert!(hung.is_probe());
        clock.advance(Duration::from_secs(1));
        let t = thread::spawn(move || hung.success());
        let next = b.acquire().expect("a slot freed by one path or the other");
        t.join().unwrap();
        assert!(next.is_probe());
        let p = b.probes();
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(p.in_flight, 1);
        assert_eq!(p.completed + p.inconclusive, 1, "{p:?}");
        assert_eq!(p.admitted, 1 + p.completed, "{p:?}");
        let counted = p.completed == 1;
        next.success();
        let closed = if counted {
            State::Closed
        } else {
            State::HalfOpen
        };
        assert_eq!(b.state(), closed);
        assert_eq!(changes.half_opens.load(Ordering::SeqCst), 1);
        assert_eq!(changes.other.load(Ordering::SeqCst), usize::from(counted));
    });
}

// ---------------------------------------------------------------------------
// Success lanes (issue 22, `tally.rs`): breakers WITHOUT listeners, so that
// a plain success may be counted in a lane without the lock. Trips are
// counted through the generation and the state.

/// A breaker without listeners (the success lanes are in use) on `clock`.
fn quiet_less(config: Config, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder("loom-tally")
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn counted(window: SlidingWindow, minimum: u32, threshold: f64) -> Config {
    Config::builder()
        .sliding_window(window)
        .minimum_number_of_calls(minimum)
        .failure_rate_threshold(threshold)
        .wait_duration_in_open(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// Which lanes a modelled thread counts on.
#[derive(Clone, Copy)]
enum Lanes {
    /// Its own lane `i`, with plain stores (once the key lasts).
    Owned(usize),
    /// Shared lane `i`, with a compare-and-swap.
    Shared(usize),
}

fn use_lanes(lanes: Lanes) {
    match lanes {
        Lanes::Owned(i) => super::tally::set_lane(i),
        Lanes::Shared(i) => super::tally::set_shared_lane(i),
    }
}

/// R5.1 / R7.1: a count window of 3 holding [S, F, S], the oldest S next
/// to go. A success (on the lanes: the window holds a failure, so it is
/// not quiet; full, so its key lasts) races a failure. Success first:
/// [F, S, s] then [S, s, f], 1 of 3, no trip. Failure first: [F, S, f],
/// 2 of 3 >= 0.5, trip, and the success is stale (R8.8), also when its
/// store on an owned lane lands after the trip (dropped by the next fold).
/// Both orders are valid; nothing else is.
fn success_racing_a_failure_that_may_trip(success_on: Lanes, failure_on: Lanes) {
    loom::model(move || {
        use_lanes(success_on);
        let clock = ManualClock::new();
        let b = quiet_less(counted(SlidingWindow::count(3), 3, 0.5), &clock);
        b.acquire().unwrap().success();
        b.acquire().unwrap().failure();
        b.acquire().unwrap().success();
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || {
            use_lanes(failure_on);
            other.acquire().unwrap().failure();
        });
        permit.success();
        t.join().unwrap();
        let snap = b.snapshot();
        match b.state() {
            State::Open => {
                assert_eq!(b.generation(), 1);
                assert_eq!((snap.total_calls, snap.failed_calls), (3, 2));
            }
            State::Closed => {
                assert_eq!(b.generation(), 0);
                assert_eq!((snap.total_calls, snap.failed_calls), (3, 1));
            }
            other => panic!("unexpected {other}"),
        }
    });
}

#[test]
fn loom_tally_success_racing_a_failure_that_may_trip() {
    success_racing_a_failure_that_may_trip(Lanes::Owned(0), Lanes::Owned(1));
}

#[test]
fn loom_shared_lane_success_racing_a_failure_that_may_trip() {
    success_racing_a_failure_that_may_trip(Lanes::Shared(0), Lanes::Shared(1));
}

#[test]
fn loom_owned_success_racing_a_shared_lane_failure_that_may_trip() {
    success_racing_a_failure_that_may_trip(Lanes::Owned(0), Lanes::Shared(1));
}

#[test]
fn loom_tally_success_is_evaluated_when_a_failure_removes_the_key() {
    // R7.1: a time window holding one failure, gate 3, threshold 0.5. A
    // second failure (2 calls, below the gate) makes the next success able
    // to trip (2 of 3), so it removes the lanes' key. A success racing it
    // either came first (counted on the lanes, folded before the failure:
    // then the failure is the third call and trips) or after (then its own
    // record trips, whether it took the lock or raced the re-key and was
    // recorded late). One trip in every interleaving.
    loom::model(|| {
        let clock = ManualClock::new();
        let window = SlidingWindow::time(Duration::from_secs(60));
        let b = quiet_less(counted(window, 3, 0.5), &clock);
        b.acquire().unwrap().failure();
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || {
            super::tally::set_lane(1);
            other.acquire().unwrap().failure();
        });
        permit.success();
        t.join().unwrap();
        assert_eq!((b.state(), b.generation()), (State::Open, 1));
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (3, 2));
    });
}

#[test]
fn loom_tally_successes_on_two_lanes_and_a_failure_count_once() {
    // R5.2 / R1.3: three threads, two successes on different lanes and a
    // failure, in a time window that never trips: every call is in the
    // window exactly once, whatever the order of adds and folds.
    loom::model(|| {
        let clock = ManualClock::new();
        let window = SlidingWindow::time(Duration::from_secs(60));
        let b = quiet_less(counted(window, 1, 1.0), &clock);
        b.acquire().unwrap().success();
        b.acquire().unwrap().failure();
        let (p1, p2) = (b.acquire().unwrap(), b.acquire().unwrap());
        let other = b.clone();
        let s2 = thread::spawn(move || {
            super::tally::set_lane(1);
            p2.success();
        });
        let f = thread::spawn(move || other.acquire().unwrap().failure());
        p1.success();
        s2.join().unwrap();
        f.join().unwrap();
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (5, 2));
        assert_eq!((b.state(), b.generation()), (State::Closed, 0));
    });
}

#[test]
fn loom_tally_success_racing_a_snapshot_is_never_torn() {
    // R5 / R1.3: a snapshot taken while a success is counted sees it or
    // not, never half of it, and a later snapshot sees it exactly once.
    loom::model(|| {
        let clock = ManualClock::new();
        let b = quiet_less(counted(SlidingWindow::count(10), 10, 0.5), &clock);
        b.acquire().unwrap().failure();
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || {
            super::tally::set_lane(1);
            other.snapshot()
        });
        permit.success();
        let seen = t.join().unwrap();
        assert_eq!(seen.failed_calls, 1);
        assert!((1..=2).contains(&seen.total_calls), "{seen}");
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (2, 1));
    });
}

#[test]
fn loom_tally_success_racing_a_rollover() {
    // R5.2: the lanes are keyed by the head second. A failure one second
    // later moves the window (a rollover) while a success settles. The
    // success is counted once, and in the second it read or a later one
    // (never an earlier one: a success that read the new second is in it).
    loom::model(|| {
        let clock = ManualClock::new();
        clock.advance(Duration::from_millis(500));
        let window = SlidingWindow::time(Duration::from_secs(2));
        let b = quiet_less(counted(window, 1, 1.0), &clock);
        b.acquire().unwrap().success(); // head second 0
        b.acquire().unwrap().failure(); // keeps the key (no trip at 1.0)
        let permit = b.acquire().unwrap();
        let (other, tick) = (b.clone(), clock.clone());
        let t = thread::spawn(move || {
            super::tally::set_lane(1);
            tick.advance(Duration::from_secs(1)); // t = 1.5 s
            other.acquire().unwrap().failure();
        });
        let read_late = clock.now() >= crate::Timestamp::from_nanos(1_500_000_000);
        permit.success();
        t.join().unwrap();
        let snap = b.snapshot(); // t = 1.5 s: seconds 0 and 1
        assert_eq!((snap.total_calls, snap.failed_calls), (4, 2));
        clock.advance(Duration::from_millis(500)); // t = 2.0 s: second 1 only
        let snap = b.snapshot();
        assert_eq!(snap.failed_calls, 1);
        if read_late {
            assert_eq!(snap.total_calls, 2, "a success of second 1 is in it");
        } else {
            assert!((1..=2).contains(&snap.total_calls), "{snap}");
        }
        assert_eq!(b.state(), State::Closed);
    });
}

#[test]
fn loom_failures_recorded_before_waiting_successes_never_trip_without_them() {
    // R7.1 / R5.2 (issue 22): a time window, gate 4, threshold 0.5, at
    // 4 calls and 1 failure with two successes waiting on lane 0. Two
    // failures and a success race (the success and one failure on lane 1).
    // A failure that cannot trip on the machine's own counts is recorded
    // without folding the waiting successes; the second failure would be 3
    // of 6 without them, so it folds first. In every order the window ends
    // at 9 calls and 3 failures without a trip (its worst prefix is 3 of 8).
    loom::model(|| {
        let clock = ManualClock::new();
        let window = SlidingWindow::time(Duration::from_secs(60));
        let b = quiet_less(counted(window, 4, 0.5), &clock);
        for _ in 0..3 {
            b.acquire().unwrap().success();
        }
        b.acquire().unwrap().failure(); // below the gate: folded, 4 / 1
        b.acquire().unwrap().success();
        b.acquire().unwrap().success();
        let other = b.clone();
        let t = thread::spawn(move || {
            super::tally::set_lane(1);
            other.acquire().unwrap().success();
            other.acquire().unwrap().failure();
        });
        b.acquire().unwrap().failure();
        t.join().unwrap();
        assert_eq!((b.state(), b.generation()), (State::Closed, 0));
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (9, 3));
    });
}

/// A time window that never trips (threshold 1.0) with one success waiting
/// on shared lane 0 (after a success and a failure, both locked), so that
/// a success added there can lose its compare-and-swap to whatever else
/// writes the lane.
fn a_success_waiting_on_shared_lane_0(clock: &ManualClock) -> CircuitBreaker {
    super::tally::set_shared_lane(0);
    let window = SlidingWindow::time(Duration::from_secs(60));
    let b = quiet_less(counted(window, 1, 1.0), clock);
    b.acquire().unwrap().success();
    b.acquire().unwrap().failure();
    b.acquire().unwrap().success();
    b
}

#[test]
fn loom_a_shared_lane_add_that_lost_to_a_fold_tries_again() {
    // R5.2 / R1.3: a success adds to shared lane 0 while a failure folds
    // it (the fold takes the waiting success with a `fetch_sub`, leaving
    // the tag). An add that read the lane before the take loses its
    // compare-and-swap and tries again on what the take left: every call
    // is in the window exactly once, in every order.
    loom::model(|| {
        let clock = ManualClock::new();
        let b = a_success_waiting_on_shared_lane_0(&clock);
        let permit = b.acquire().unwrap();
        let other = b.clone();
        let t = thread::spawn(move || {
            super::tally::set_shared_lane(1);
            other.acquire().unwrap().failure();
        });
        permit.success();
        t.join().unwrap();
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (5, 2));
        assert_eq!((b.state(), b.generation()), (State::Closed, 0));
    });
}

#[test]
fn loom_two_successes_on_one_shared_lane_both_count() {
    // R5.2 / R1.3: two threads without a slot of their own add to the
    // same shared lane at once: the one whose compare-and-swap lost tries
    // again (or takes the lock), and neither success is lost or counted
    // twice.
    loom::model(|| {
        let clock = ManualClock::new();
        let b = a_success_waiting_on_shared_lane_0(&clock);
        let (p1, p2) = (b.acquire().unwrap(), b.acquire().unwrap());
        let t = thread::spawn(move || {
            super::tally::set_shared_lane(0);
            p2.success();
        });
        p1.success();
        t.join().unwrap();
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (5, 1));
        assert_eq!((b.state(), b.generation()), (State::Closed, 0));
    });
}

// Owned lanes (plain stores): the count-window models above run with every
// thread on an owned lane (the loom build's default; a time window's key
// never lasts, so its models count on the shared lanes whatever the thread
// has), and the race with a failure also on shared lanes and on one of each.

#[test]
fn loom_owned_successes_of_two_threads_and_a_snapshot_count_once() {
    // R5 / R1.3: in a full count window [F, S, S] (never trips at 1.0), two
    // threads on their own owned lanes add a success each while a third
    // takes a snapshot: it sees neither, one (the failure pushed out) or
    // both, never a torn count, and the final snapshot sees both once.
    loom::model(|| {
        let clock = ManualClock::new();
        let b = quiet_less(counted(SlidingWindow::count(3), 3, 1.0), &clock);
        b.acquire().unwrap().failure();
        b.acquire().unwrap().success();
        b.acquire().unwrap().success();
        let (p1, p2) = (b.acquire().unwrap(), b.acquire().unwrap());
        let other = b.clone();
        let s2 = thread::spawn(move || {
            super::tally::set_lane(1);
            p2.success();
        });
        let snapshot = thread::spawn(move || other.snapshot());
        p1.success();
        s2.join().unwrap();
        let seen = snapshot.join().unwrap();
        assert_eq!(seen.total_calls, 3);
        assert!(seen.failed_calls <= 1, "{seen}");
        let snap = b.snapshot();
        assert_eq!((snap.total_calls, snap.failed_calls), (3, 0));
        assert_eq!(b.state(), State::Closed);
    });
}
