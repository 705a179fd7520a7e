//! No HALF_OPEN stall, under every policy (issue 20, ruling D7), on a
//! `ManualClock`.
//!
//! The rule (D7): a HALF_OPEN round with no free probe slot (in flight at
//! `max_concurrent_probes`, or admitted at `permitted_calls_in_half_open`,
//! so admission would be refused) that has made no progress (its start, a
//! probe admission or a settlement) for `max_wait_in_half_open` is
//! abandoned when the next call asks for admission. Its outstanding probes
//! count as inconclusive at that moment (R9.3: slot and budget back) and
//! R9.4 / R9.5 then apply as if they had settled: once the round's
//! inconclusive probes reach `permitted_calls_in_half_open` the breaker
//! re-opens, as a failed round for the backoff; otherwise the round goes on
//! with its recorded verdicts and the freed slots, and the asking call is
//! its next probe. Either way the generation moves, so the abandoned
//! probes' late outcomes are stale (R8.8). `max_wait_in_half_open` follows
//! `wait_duration_in_open` unless set; `Duration::MAX` never abandons.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use interlock::{
    CallError, CircuitBreaker, Config, ConfigBuilder, Event, HalfOpenPolicy, ManualClock, Permit,
    SlidingWindow, State, Verdict,
};

const WAIT: Duration = Duration::from_secs(10);
const NANO: Duration = Duration::from_nanos(1);
const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Trips on one failure and waits `WAIT` in OPEN.
fn config(policy: HalfOpenPolicy, permitted: u32, concurrent: u32) -> ConfigBuilder {
    Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(permitted)
        .max_concurrent_probes(concurrent)
        .half_open_policy(policy)
}

fn build(config: ConfigBuilder) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("stall")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

fn breaker(
    policy: HalfOpenPolicy,
    permitted: u32,
    concurrent: u32,
) -> (CircuitBreaker, ManualClock) {
    build(config(policy, permitted, concurrent))
}

fn fail(b: &CircuitBreaker) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Err(std::io::Error::other("down")))
}

fn ok(b: &CircuitBreaker) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Ok(()))
}

/// Trips the breaker and lets the open wait elapse: the next call enters
/// HALF_OPEN as its first probe.
fn trip_and_wait(b: &CircuitBreaker, clock: &ManualClock) {
    assert!(fail(b).is_err());
    assert_eq!(b.state(), State::Open);
    clock.advance(b.retry_after().unwrap());
}

/// A probe admitted in HALF_OPEN and held (not settled, not dropped).
fn probe(b: &CircuitBreaker) -> Permit {
    let permit = b.acquire().expect("a probe slot is free");
    assert!(permit.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    permit
}

/// Admission is refused by HALF_OPEN, without a retry time (R8.7), and the
/// round was not abandoned (same generation).
fn assert_refused(b: &CircuitBreaker, generation: u64, why: &str) {
    let refused = b.acquire().expect_err(why);
    assert_eq!(refused.state(), State::HalfOpen, "{why}");
    assert_eq!(refused.retry_after(), None, "{why}");
    assert_eq!(b.generation(), generation, "{why}: not abandoned");
}

// ---- the reproductions ------------------------------------------------

/// Issue 20's first reproduction, under the default config and policy: a
/// breaker tripped with a 1 s wait, one probe acquired and `mem::forget`-ed.
/// Before D7 it still rejected 365 days later. The default
/// `max_wait_in_half_open` follows the wait: one second after the leaked
/// probe's admission the next call is a probe of the same round.
#[test]
fn d7_a_leaked_probe_holds_half_open_for_max_wait_in_half_open_not_for_ever() {
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(secs(1));
    let (b, clock) = build(config);
    assert_eq!(
        b.config().max_wait_in_half_open(),
        secs(1),
        "follows the wait"
    );
    trip_and_wait(&b, &clock);
    std::mem::forget(probe(&b)); // leaked: never settled, never dropped
    let generation = b.generation();
    assert_refused(&b, generation, "the only concurrency slot is leaked");
    clock.advance(secs(1) - NANO);
    assert_refused(&b, generation, "a nanosecond short of max_wait");
    clock.advance(NANO);
    let next = b.acquire().expect("abandoned: the next call is a probe");
    assert!(next.is_probe());
    assert_eq!(b.state(), State::HalfOpen, "the round goes on");
    assert_eq!(b.generation(), generation + 1, "a new generation (R8.8)");
    let p = b.probes();
    assert_eq!((p.admitted, p.in_flight, p.inconclusive), (1, 1, 1));
    next.success();
    // The default round: 10 verdicts, all good, close it.
    for _ in 1..10 {
        ok(&b).unwrap();
    }
    assert_eq!(b.state(), State::Closed);
}

/// The same leak found a year later: the breaker admits at once.
#[test]
fn d7_a_breaker_with_a_leaked_probe_no_longer_rejects_365_days_later() {
    let (b, clock) = build(
        Config::builder()
            .sliding_window(SlidingWindow::count(1))
            .minimum_number_of_calls(1)
            .wait_duration_in_open(secs(1)),
    );
    trip_and_wait(&b, &clock);
    std::mem::forget(b.acquire().unwrap());
    clock.advance(YEAR);
    ok(&b).expect("365 days later the dependency is probed again");
    assert_eq!(b.probes().completed, 1);
}

/// A future parked for ever (a hung call without a timeout), through the
/// async API: polled once, so it holds the probe slot, and then kept alive,
/// never woken. After `max_wait_in_half_open` another call is admitted.
/// Dropping the hung future at the end hands back nothing: its generation is
/// gone (R8.9).
#[test]
fn d7_a_hung_async_probe_is_abandoned_and_its_late_drop_changes_nothing() {
    let (b, clock) = breaker(HalfOpenPolicy::ProbeRound, 3, 1);
    trip_and_wait(&b, &clock);
    let mut hung: Pin<Box<dyn Future<Output = Result<(), CallError<std::io::Error>>>>> =
        Box::pin(b.call_async(std::future::pending::<Result<(), std::io::Error>>));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        hung.as_mut().poll(&mut cx).is_pending(),
        "admitted, running"
    );
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.probes().in_flight, 1);
    let generation = b.generation();
    assert_refused(&b, generation, "the hung call holds the only slot");
    clock.advance(WAIT - NANO);
    assert!(hung.as_mut().poll(&mut cx).is_pending(), "still hung");
    assert_refused(&b, generation, "not yet max_wait without progress");
    clock.advance(NANO);
    ok(&b).expect("the hung probe is abandoned: this call probes");
    assert_eq!(b.generation(), generation + 1);
    let p = b.probes();
    assert_eq!(
        (p.admitted, p.in_flight, p.completed, p.inconclusive),
        (1, 0, 1, 1)
    );
    drop(hung); // cancelled now, in an abandoned generation
    assert_eq!(b.probes(), p, "a stale release hands nothing back");
    ok(&b).unwrap();
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed, "3 verdicts of 3, all good");
}

/// A hung future that is leaked rather than dropped: the same recovery.
#[test]
fn d7_a_leaked_never_ready_future_is_abandoned_after_max_wait() {
    let (b, clock) = breaker(HalfOpenPolicy::ProbeRound, 1, 1);
    trip_and_wait(&b, &clock);
    let mut hung = Box::pin(b.call_async(|| async {
        std::future::pending::<()>().await;
        Ok::<(), std::io::Error>(())
    }));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(hung.as_mut().poll(&mut cx), Poll::Pending));
    std::mem::forget(hung);
    let generation = b.generation();
    clock.advance(WAIT - NANO);
    assert_refused(&b, generation, "held by the leaked future");
    clock.advance(NANO);
    // One permitted probe, now inconclusive: the budget is spent, so the
    // round re-opens (R9.4) as a failed round (R9.5); the asking call is
    // refused by the new OPEN period.
    let refused = b.acquire().expect_err("re-opened");
    assert_eq!(refused.state(), State::Open);
    assert_eq!(refused.retry_after(), Some(WAIT));
    clock.advance(WAIT);
    ok(&b).unwrap();
    assert_eq!(b.state(), State::Closed);
}

// ---- the rule under each policy ---------------------------------------------

/// Every policy: a hung probe holding the only concurrency slot, below the
/// admission budget, is abandoned a whole `max_wait_in_half_open` after the
/// round's last progress; its late verdict is stale.
#[test]
fn d7_a_hung_probe_holding_the_only_concurrency_slot_is_abandoned_under_every_policy() {
    for policy in [
        HalfOpenPolicy::ProbeRound,
        HalfOpenPolicy::consecutive_successes(3),
    ] {
        let (b, clock) = breaker(policy, 3, 1);
        trip_and_wait(&b, &clock);
        let hung = probe(&b);
        let generation = b.generation();
        assert_eq!(b.probes().admitted, 1, "{policy:?}: below the budget");
        assert_refused(&b, generation, "the only concurrency slot is held");
        clock.advance(WAIT - NANO);
        assert_refused(&b, generation, "not yet max_wait without progress");
        clock.advance(NANO);

        let next = b.acquire().expect("abandoned a whole max_wait later");
        assert!(next.is_probe());
        assert_eq!(b.state(), State::HalfOpen, "{policy:?}: no transition");
        assert_eq!(b.generation(), generation + 1, "a new generation (R8.8)");
        let p = b.probes();
        assert_eq!((p.admitted, p.in_flight, p.inconclusive), (1, 1, 1));

        // The hung probe's late failure belongs to the abandoned probes.
        hung.failure();
        assert_eq!(b.state(), State::HalfOpen, "{policy:?}: stale");
        assert_eq!(b.probes().completed, 0, "the stale failure counts nothing");
        assert_eq!(b.probes().in_flight, 1, "and frees no slot");

        next.success();
        probe(&b).success();
        assert_eq!(b.state(), State::HalfOpen, "two of three: still deciding");
        probe(&b).success();
        assert_eq!(b.state(), State::Closed, "{policy:?}");
    }
}

/// D7 measures from the round's last progress, not its start: a round
/// whose probes keep settling (one at a time, each before the next is
/// admitted) is never abandoned, however long it runs.
#[test]
fn d7_a_round_that_keeps_progressing_is_never_abandoned_however_long_it_runs() {
    for policy in [
        HalfOpenPolicy::ProbeRound,
        HalfOpenPolicy::consecutive_successes(3),
    ] {
        let (b, clock) = breaker(policy, 3, 1);
        trip_and_wait(&b, &clock);
        let mut held = probe(&b);
        let generation = b.generation();
        for completed in 1..=2 {
            clock.advance(WAIT - NANO);
            assert_refused(&b, generation, "the slot is held, but not for max_wait");
            held.success();
            assert_eq!(b.probes().completed, completed);
            held = probe(&b);
            assert_eq!(b.generation(), generation, "progress, not abandonment");
        }
        clock.advance(WAIT - NANO);
        assert_refused(&b, generation, "the third probe is still in time");
        held.success();
        assert_eq!(b.state(), State::Closed, "{policy:?}: ~3 waits, one round");
    }
}

/// A settlement is progress too, and the round keeps its verdicts: with
/// every permitted slot admitted, the round is abandoned a whole
/// `max_wait_in_half_open` after its latest settlement; the lost probe
/// counts as inconclusive, the two successes stay, and the asking call's
/// success completes three in a row.
#[test]
fn d7_a_settlement_pushes_abandonment_back_and_the_verdicts_are_kept() {
    let (b, clock) = breaker(HalfOpenPolicy::consecutive_successes(3), 3, 3);
    trip_and_wait(&b, &clock);
    let mut probes: Vec<Permit> = (0..3).map(|_| probe(&b)).collect();
    let generation = b.generation();
    clock.advance(secs(6));
    probes.pop().unwrap().success();
    probes.pop().unwrap().success();
    assert_eq!(b.probes().completed, 2);
    clock.advance(secs(4));
    assert_refused(
        &b,
        generation,
        "max_wait after the start, 4 s after progress",
    );
    clock.advance(secs(6) - NANO);
    assert_refused(&b, generation, "a nanosecond short since progress");
    clock.advance(NANO);
    let next = b
        .acquire()
        .expect("a whole max_wait since the last settlement");
    assert_eq!(b.generation(), generation + 1);
    let p = b.probes();
    assert_eq!((p.admitted, p.completed, p.inconclusive), (3, 2, 1));
    probes.pop().unwrap().failure(); // the lost probe: stale (R8.8)
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "a stale failure re-opens nothing"
    );
    next.success();
    assert_eq!(b.state(), State::Closed, "the third success in a row");
}

/// When the abandoned probes bring the round's inconclusive count to the
/// budget, the breaker re-opens (R9.4) as a failed round for the backoff
/// (R9.5): the wait doubles. The lost probes' late failures are stale.
#[test]
fn d7_a_round_whose_every_slot_is_lost_reopens_as_a_failed_round() {
    for policy in [
        HalfOpenPolicy::ProbeRound,
        HalfOpenPolicy::consecutive_successes(3),
    ] {
        let (b, clock) = build(config(policy, 3, 3).wait_duration_backoff_multiplier(2.0));
        trip_and_wait(&b, &clock);
        let lost: Vec<Permit> = (0..3).map(|_| probe(&b)).collect();
        let generation = b.generation();
        assert_refused(&b, generation, "every permitted slot is admitted");
        clock.advance(WAIT - NANO);
        assert_refused(&b, generation, "not yet max_wait later");
        clock.advance(NANO);
        let refused = b.acquire().expect_err("re-opened: refused by OPEN");
        assert_eq!(refused.state(), State::Open, "{policy:?}");
        assert_eq!(refused.retry_after(), Some(WAIT * 2), "a failed round");
        assert_eq!(b.state(), State::Open);
        assert!(b.generation() > generation);
        for late in lost {
            late.failure(); // stale: would re-open a round it belonged to
        }
        assert_eq!(b.retry_after(), Some(WAIT * 2), "{policy:?}: stale");
        clock.advance(WAIT * 2);
        for _ in 0..3 {
            ok(&b).unwrap();
        }
        assert_eq!(b.state(), State::Closed, "{policy:?}");
    }
}

/// `max_wait_in_half_open` is its own setting: shorter or longer than the
/// open wait, it alone decides when a round is abandoned.
#[test]
fn d7_max_wait_in_half_open_set_apart_from_the_open_wait() {
    for max in [secs(3), secs(25)] {
        let (b, clock) = build(config(HalfOpenPolicy::ProbeRound, 2, 1).max_wait_in_half_open(max));
        assert_eq!(b.config().max_wait_in_half_open(), max);
        trip_and_wait(&b, &clock);
        let _hung = probe(&b);
        let generation = b.generation();
        clock.advance(max - NANO);
        assert_refused(&b, generation, "a nanosecond short of max_wait");
        clock.advance(NANO);
        let next = b.acquire().expect("abandoned at max_wait");
        assert!(next.is_probe(), "{max:?}");
        assert_eq!(b.generation(), generation + 1);
    }
}

/// `Duration::MAX` is "never abandon", documented: a year later the leaked
/// probe still holds the round, and its own verdict still decides it.
#[test]
fn d7_duration_max_never_abandons_a_round() {
    let (b, clock) = build(
        config(HalfOpenPolicy::ProbeRound, 1, 1)
            .max_wait_in_half_open(Duration::MAX)
            .slow_call_duration_threshold(YEAR * 2), // the held probe is not slow
    );
    trip_and_wait(&b, &clock);
    let held = probe(&b);
    let generation = b.generation();
    clock.advance(YEAR);
    assert_refused(&b, generation, "never abandoned");
    held.success();
    assert_eq!(b.state(), State::Closed);
}

/// A zero bound is refused at `build()`, naming the field.
#[test]
fn d7_a_zero_max_wait_in_half_open_is_a_config_error() {
    let err = Config::builder()
        .max_wait_in_half_open(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_wait_in_half_open");
    assert!(err.to_string().contains("max_wait_in_half_open"), "{err}");
}

/// The listener sees the abandonment that re-opens as an ordinary
/// HALF_OPEN -> OPEN change, then the asking call's rejection (R13.4).
#[test]
fn d7_a_reopen_by_abandonment_is_reported_before_the_rejection() {
    let clock = ManualClock::new();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = log.clone();
    let b = CircuitBreaker::builder("stall")
        .config(config(HalfOpenPolicy::ProbeRound, 1, 1).build().unwrap())
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap();
    trip_and_wait(&b, &clock);
    std::mem::forget(probe(&b));
    clock.advance(WAIT);
    log.lock().unwrap().clear();
    assert!(ok(&b).unwrap_err().is_rejected());
    assert_eq!(
        *log.lock().unwrap(),
        [
            "stall: state half_open -> open",
            "stall: call rejected (open)"
        ]
    );
}

// ---- panic-safe settlement ----------------------------------------------------

/// An error whose `Display` panics.
#[derive(Debug)]
struct Explodes;

impl fmt::Display for Explodes {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic!("Display exploded")
    }
}

impl std::error::Error for Explodes {}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// A probe whose error `Display` panics while the breaker keeps it as the
/// last failure: the call is still settled as the failure it was (the probe
/// slot is the machine's again, the round is decided), listeners hear of it,
/// and the panic then continues to the caller.
#[test]
fn a_settlement_whose_error_display_panics_does_not_leak_the_probe_slot() {
    let clock = ManualClock::new();
    let calls = Arc::new(Mutex::new(0));
    let seen = calls.clone();
    let b = CircuitBreaker::builder("stall")
        .config(config(HalfOpenPolicy::ProbeRound, 2, 1).build().unwrap())
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| {
            if matches!(e, Event::CallRecorded { .. }) {
                *seen.lock().unwrap() += 1;
            }
        })
        .build()
        .unwrap();
    trip_and_wait(&b, &clock);
    let panicked = catch_unwind(AssertUnwindSafe(|| b.call(|| Err::<(), _>(Explodes))))
        .expect_err("the Display panic reaches the caller");
    assert_eq!(panic_message(&*panicked), "Display exploded");
    let p = b.probes();
    assert_eq!((p.in_flight, p.completed, p.failures), (0, 1, 1), "settled");
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "one verdict of two: the round goes on"
    );
    assert_eq!(
        *calls.lock().unwrap(),
        2,
        "the trip and the probe were reported"
    );
    assert_eq!(
        b.last_failure().unwrap().message(),
        "<the error's Display panicked>"
    );
    // The slot is free at once, with no wait: the next probe decides.
    let next = b.acquire().expect("the slot came back");
    assert!(next.is_probe());
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        next.finish_with(Verdict::Failure, &Explodes);
    }));
    assert!(panicked.is_err(), "Permit::finish_with too");
    assert_eq!(b.state(), State::Open, "two failed verdicts of two re-open");
}

/// A panicking classifier runs before the outcome exists: the probe counts
/// as cancelled (its slot goes back, nothing is recorded, R4.5) and the
/// panic continues to the caller. Same for a call's own classification.
#[test]
fn a_panicking_classifier_hands_the_probe_slot_back() {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("stall")
        .config(config(HalfOpenPolicy::ProbeRound, 2, 1).build().unwrap())
        .clock(clock.clone())
        .classifier(|_: &(dyn std::error::Error + 'static)| -> Verdict {
            panic!("classifier exploded")
        })
        .build()
        .unwrap();
    // Trip with a call-level classification (the breaker's own panics).
    let _ = b.call_classified(|| Err::<(), _>("down"), |_| Verdict::Failure);
    assert_eq!(b.state(), State::Open);
    clock.advance(WAIT);
    let panicked = catch_unwind(AssertUnwindSafe(|| fail(&b)));
    assert_eq!(
        panic_message(&*panicked.unwrap_err()),
        "classifier exploded"
    );
    assert_eq!(b.probes().in_flight, 0, "the slot went back");
    assert_eq!(b.probes().admitted, 0, "and its budget");
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        b.call_classified(
            || Ok::<(), std::io::Error>(()),
            |_| panic!("predicate exploded"),
        )
    }));
    assert_eq!(panic_message(&*panicked.unwrap_err()), "predicate exploded");
    let permit = b.acquire().expect("no slot leaked");
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        permit.finish(&Err::<(), _>(std::io::Error::other("x")));
    }));
    assert!(panicked.is_err());
    assert_eq!(b.probes().in_flight, 0);
    assert_eq!(b.state(), State::HalfOpen);
}
