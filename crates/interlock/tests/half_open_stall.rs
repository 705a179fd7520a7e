//! The stall rule of a consecutive-successes HALF_OPEN round (R8.6, R8.8),
//! on a `ManualClock`.
//!
//! The rule: a round is stalled when no probe slot is free (in flight at
//! `max_concurrent_probes`, or admitted at `permitted_calls_in_half_open`,
//! so admission would be refused) and a whole `wait_duration_in_open` has
//! passed since the round last made progress (its start, or its latest probe
//! admission or settlement). The next admission then starts a fresh round in
//! a new generation, so the lost probes' outcomes are stale (R8.8).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use interlock::{
    CallError, CircuitBreaker, Config, HalfOpenPolicy, ManualClock, Permit, SlidingWindow, State,
};

const WAIT: Duration = Duration::from_secs(10);
const NANO: Duration = Duration::from_nanos(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A breaker that trips on one failure and waits `WAIT` in OPEN.
fn breaker(
    policy: HalfOpenPolicy,
    permitted: u32,
    concurrent: u32,
) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(permitted)
        .max_concurrent_probes(concurrent)
        .half_open_policy(policy)
        .build()
        .unwrap();
    let b = CircuitBreaker::builder("stall")
        .config(config)
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

/// Trips the breaker and lets the open wait elapse: the next call enters
/// HALF_OPEN as its first probe.
fn trip_and_wait(b: &CircuitBreaker, clock: &ManualClock) {
    let r: Result<(), CallError<std::io::Error>> = b.call(|| Err(std::io::Error::other("down")));
    assert!(r.is_err());
    assert_eq!(b.state(), State::Open);
    clock.advance(WAIT);
}

/// A probe admitted in HALF_OPEN and held (not settled, not dropped).
fn probe(b: &CircuitBreaker) -> Permit {
    let permit = b.acquire().expect("a probe slot is free");
    assert!(permit.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    permit
}

/// Admission is refused by HALF_OPEN, without a retry time (R8.7), and the
/// round was not restarted (same generation).
fn assert_refused(b: &CircuitBreaker, generation: u64, why: &str) {
    let refused = b.acquire().expect_err(why);
    assert_eq!(refused.state(), State::HalfOpen, "{why}");
    assert_eq!(refused.retry_after(), None, "{why}");
    assert_eq!(b.generation(), generation, "{why}: no restart");
}

/// The bug this rule fixes: with `max_concurrent_probes` below
/// `permitted_calls_in_half_open`, one hung probe holds the only concurrency
/// slot while admissions stay below `permitted`. The stall rule (R8.6: no
/// free slot, either cap) still restarts the round a whole wait after its
/// last progress.
#[test]
fn a_hung_probe_holding_the_only_concurrency_slot_restarts_the_round_after_one_wait() {
    let (b, clock) = breaker(HalfOpenPolicy::consecutive_successes(3), 3, 1);
    trip_and_wait(&b, &clock);
    let hung = probe(&b);
    let generation = b.generation();
    assert_eq!(b.probes().admitted, 1, "below the admission budget of 3");
    assert_refused(&b, generation, "the only concurrency slot is held");
    clock.advance(WAIT - NANO);
    assert_refused(&b, generation, "not yet a whole wait without progress");
    clock.advance(NANO);

    let fresh = b.acquire().expect("a fresh round a whole wait later");
    assert!(fresh.is_probe());
    assert_eq!(b.state(), State::HalfOpen, "a restart is not a transition");
    assert_eq!(b.generation(), generation + 1, "a new generation (R8.8)");
    assert_eq!(b.probes().admitted, 1);
    assert_eq!(b.probes().in_flight, 1);

    // The hung probe's late success belongs to the abandoned round (R8.8).
    hung.success();
    assert_eq!(b.generation(), generation + 1);
    assert_eq!(b.probes().completed, 0, "the stale success counts nothing");
    assert_eq!(b.probes().in_flight, 1, "and frees no slot");

    // The fresh round needs its own three successes in a row.
    fresh.success();
    probe(&b).success();
    assert_eq!(b.state(), State::HalfOpen, "two of three: still deciding");
    probe(&b).success();
    assert_eq!(b.state(), State::Closed);
}

/// The stall rule measures from the round's last progress, not its start: a
/// round whose probes keep settling (one at a time, each before the next is
/// admitted) is never restarted, however long it has been running.
#[test]
fn a_round_that_keeps_progressing_is_never_restarted_however_long_it_runs() {
    let (b, clock) = breaker(HalfOpenPolicy::consecutive_successes(3), 3, 1);
    trip_and_wait(&b, &clock);
    let mut held = probe(&b);
    let generation = b.generation();
    for completed in 1..=2 {
        clock.advance(WAIT - NANO);
        // The round began more than a whole wait ago from the second probe
        // on, yet its last admission was less than one wait ago.
        assert_refused(&b, generation, "the slot is held, but not for a wait");
        held.success();
        assert_eq!(b.probes().completed, completed);
        held = probe(&b);
        assert_eq!(b.generation(), generation, "progress, not a restart");
    }
    clock.advance(WAIT - NANO);
    assert_refused(&b, generation, "the third probe is still in time");
    held.success();
    assert_eq!(
        b.state(),
        State::Closed,
        "three successes in a row over ~3 waits close the round it began"
    );
    assert_eq!(b.generation(), generation + 1, "closing is the only move");
}

/// A settlement is progress too: with every slot admitted, a round restarts a
/// whole wait after its latest settlement, not a wait after it began.
#[test]
fn a_settlement_pushes_the_restart_a_whole_wait_later() {
    let (b, clock) = breaker(HalfOpenPolicy::consecutive_successes(3), 3, 3);
    trip_and_wait(&b, &clock);
    let mut probes: Vec<Permit> = (0..3).map(|_| probe(&b)).collect();
    let generation = b.generation();
    clock.advance(secs(6));
    probes.pop().unwrap().success();
    probes.pop().unwrap().success();
    assert_eq!(b.probes().completed, 2);
    clock.advance(secs(4));
    assert_refused(&b, generation, "a wait after the start, 4 s after progress");
    clock.advance(secs(6) - NANO);
    assert_refused(
        &b,
        generation,
        "a nanosecond short of a wait since progress",
    );
    clock.advance(NANO);
    let _fresh = b.acquire().expect("a whole wait since the last settlement");
    assert_eq!(b.generation(), generation + 1);
    assert_eq!(b.probes().admitted, 1);
    assert_eq!(b.probes().completed, 0, "fresh round counters");
    probes.pop().unwrap().success(); // the lost probe: stale (R8.8)
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.probes().completed, 0);
}

/// The case the old rule already covered: every permitted slot admitted at
/// once and none settles. The round restarts a whole wait after the last
/// admission, and the lost probes' outcomes are stale (R8.8).
#[test]
fn a_round_with_every_permitted_slot_admitted_and_none_settled_still_restarts() {
    let (b, clock) = breaker(HalfOpenPolicy::consecutive_successes(3), 3, 3);
    trip_and_wait(&b, &clock);
    let lost: Vec<Permit> = (0..3).map(|_| probe(&b)).collect();
    let generation = b.generation();
    assert_refused(&b, generation, "every permitted slot is admitted");
    clock.advance(WAIT - NANO);
    assert_refused(&b, generation, "not yet a whole wait later");
    clock.advance(NANO);
    let fresh = b.acquire().expect("a fresh round a whole wait later");
    assert!(fresh.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.generation(), generation + 1);
    assert_eq!(b.probes().admitted, 1);
    for late in lost {
        late.failure(); // would re-open the round it belonged to
    }
    assert_eq!(b.state(), State::HalfOpen, "stale failures change nothing");
    assert_eq!(b.generation(), generation + 1);
    fresh.success();
    probe(&b).success();
    probe(&b).success();
    assert_eq!(b.state(), State::Closed);
}

/// The stall rule belongs to the consecutive-successes policy only: a
/// probe-round policy keeps waiting for its hung probe (R8.3, R8.6).
#[test]
fn a_probe_round_policy_never_restarts_a_held_up_round() {
    let (b, clock) = breaker(HalfOpenPolicy::ProbeRound, 3, 1);
    trip_and_wait(&b, &clock);
    let hung = probe(&b);
    let generation = b.generation();
    clock.advance(WAIT * 10);
    assert_refused(&b, generation, "a probe round is never restarted");
    drop(hung); // cancelled: its slot comes back (R8.9)
    let _next = probe(&b);
    assert_eq!(b.generation(), generation);
}
