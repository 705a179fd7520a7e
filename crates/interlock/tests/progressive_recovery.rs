//! Progressive recovery (issue 28, ruling D8), on a `ManualClock`.
//!
//! Under `HalfOpenPolicy::Progressive` HALF_OPEN starts with a single
//! probe; a failed or slow one re-opens as a failed round (R8, R10). After
//! it succeeded, each stage admits its share of the admission attempts
//! with a credit counter (exact: `n` attempts admit `floor(n * share)`
//! calls) and is judged on its own verdicts once it holds its minimum: a
//! failure or slow-call rate at its threshold re-opens, otherwise the next
//! stage starts, and the last one closes. Inconclusive calls do not count;
//! D7 abandons outstanding stage calls that made no progress for
//! `max_wait_in_half_open`. Coordinated breakers refuse the policy.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use interlock::storage::{Coordinator, MemoryStorage};
use interlock::{
    CircuitBreaker, Config, ConfigBuilder, HalfOpenPolicy, ManualClock, Permit, ProgressiveStages,
    Registry, SlidingWindow, State,
};

const WAIT: Duration = Duration::from_secs(10);

fn config(shares: &[f64], minimum: u32) -> ConfigBuilder {
    Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(WAIT)
        .half_open_policy(HalfOpenPolicy::progressive_stages(shares, minimum))
}

fn build(config: ConfigBuilder) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("progressive")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

/// Trips the breaker with one failure and lets the open wait elapse.
fn trip_and_wait(b: &CircuitBreaker, clock: &ManualClock) {
    b.acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    clock.advance(b.retry_after().unwrap());
}

/// `n` admission attempts; the admitted ones, and at which attempt (0-based).
fn attempts(b: &CircuitBreaker, n: usize) -> (Vec<Permit>, Vec<usize>) {
    let mut permits = Vec::new();
    let mut at = Vec::new();
    for i in 0..n {
        match b.acquire() {
            Ok(p) => {
                assert!(p.is_probe(), "stage calls are HALF_OPEN calls");
                permits.push(p);
                at.push(i);
            }
            Err(refused) => {
                assert_eq!(refused.state(), State::HalfOpen);
                assert_eq!(refused.retry_after(), None);
            }
        }
    }
    (permits, at)
}

/// Enters HALF_OPEN with the single probe and lets it succeed: stage 1.
fn pass_the_probe(b: &CircuitBreaker) {
    let probe = b.acquire().expect("the single probe");
    assert_eq!(b.state(), State::HalfOpen);
    // A single probe: nothing else is admitted while it runs.
    assert!(b.acquire().is_err(), "only one probe before stage 1");
    probe.success();
    assert_eq!(b.state(), State::HalfOpen, "stage 1, not closed");
}

#[test]
fn d8_stages_admit_their_exact_share_and_the_last_one_closes() {
    let (b, clock) = build(config(&[0.25, 0.5, 1.0], 4));
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);

    // Stage 1, a quarter: every fourth attempt, exactly.
    let (permits, at) = attempts(&b, 16);
    assert_eq!(at, vec![3, 7, 11, 15]);
    for p in permits {
        p.success();
    }
    assert_eq!(b.state(), State::HalfOpen, "stage 2");

    // Stage 2, a half: every second attempt, from a fresh credit.
    let (permits, at) = attempts(&b, 9);
    assert_eq!(at, vec![1, 3, 5, 7]);
    for p in permits {
        p.success();
    }
    assert_eq!(b.state(), State::HalfOpen, "stage 3");

    // Stage 3, everything: closes at its 4th verdict.
    let (permits, at) = attempts(&b, 4);
    assert_eq!(at, vec![0, 1, 2, 3]);
    let mut permits = permits.into_iter();
    for p in permits.by_ref().take(3) {
        p.success();
        assert_eq!(b.state(), State::HalfOpen, "below the stage minimum");
    }
    permits.next().unwrap().success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d8_the_default_stages_admit_one_call_in_a_thousand_first() {
    let (b, clock) = build(
        Config::builder()
            .sliding_window(SlidingWindow::count(1))
            .minimum_number_of_calls(1)
            .wait_duration_in_open(WAIT)
            .half_open_policy(HalfOpenPolicy::progressive()),
    );
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);
    let (_permits, at) = attempts(&b, 3000);
    assert_eq!(at, vec![999, 1999, 2999]);
    let stages = ProgressiveStages::default();
    assert_eq!(stages.len(), 6);
    assert_eq!(stages.share(0), Some(0.001));
    assert_eq!(stages.share(5), Some(0.5));
    assert_eq!(stages.minimum_calls(), 10);
}

#[test]
fn d8_a_failed_single_probe_reopens_as_a_failed_round() {
    let (b, clock) = build(config(&[0.5, 1.0], 4).wait_duration_backoff_multiplier(2.0));
    trip_and_wait(&b, &clock);
    b.acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.retry_after(),
        Some(WAIT * 2),
        "R10 backoff: one failed round"
    );
}

#[test]
fn d8_a_failing_stage_reopens_with_backoff_and_a_healthy_one_advances() {
    let (b, clock) = build(
        config(&[0.5, 1.0], 4)
            .failure_rate_threshold(0.5)
            .wait_duration_backoff_multiplier(2.0),
    );
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);

    // Stage 1: one failure in four is below the threshold.
    let (permits, _) = attempts(&b, 8);
    assert_eq!(permits.len(), 4);
    let mut permits = permits.into_iter();
    permits.next().unwrap().failure();
    for p in permits {
        p.success();
    }
    assert_eq!(b.state(), State::HalfOpen, "stage 2");

    // Stage 2: two failures in four reach it.
    let (permits, _) = attempts(&b, 4);
    assert_eq!(permits.len(), 4);
    let mut permits = permits.into_iter();
    permits.next().unwrap().failure();
    permits.next().unwrap().success();
    permits.next().unwrap().success();
    assert_eq!(b.state(), State::HalfOpen, "three verdicts: not judged yet");
    permits.next().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(WAIT * 2), "a failed round for R10");

    // The next HALF_OPEN starts over with the single probe.
    clock.advance(WAIT * 2);
    let probe = b.acquire().unwrap();
    assert!(b.acquire().is_err(), "a single probe again");
    probe.failure();
    assert_eq!(
        b.retry_after(),
        Some(WAIT * 4),
        "two failed rounds in a row"
    );
}

#[test]
fn d8_a_slow_stage_reopens() {
    let (b, clock) = build(
        config(&[1.0], 2)
            .slow_call_duration_threshold(Duration::from_secs(1))
            .slow_call_rate_threshold(0.5),
    );
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);
    let (permits, _) = attempts(&b, 2);
    clock.advance(Duration::from_secs(2));
    for p in permits {
        p.success(); // slow
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn d8_inconclusive_calls_do_not_count_toward_a_stage() {
    let (b, clock) = build(config(&[1.0], 2));
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);
    let (permits, _) = attempts(&b, 4);
    let mut permits = permits.into_iter();
    for _ in 0..2 {
        permits.next().unwrap().inconclusive();
    }
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "inconclusive: no verdict, no re-open"
    );
    permits.next().unwrap().success();
    assert_eq!(b.state(), State::HalfOpen, "one verdict of two");
    permits.next().unwrap().success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d8_d7_stalled_stage_calls_are_abandoned_as_inconclusive() {
    let (b, clock) = build(config(&[1.0], 2));
    trip_and_wait(&b, &clock);
    pass_the_probe(&b);
    let (held, _) = attempts(&b, 2);
    let generation = b.generation();
    clock.advance(WAIT - Duration::from_nanos(1));
    let (early, _) = attempts(&b, 1);
    assert_eq!(b.generation(), generation, "progress came just in time");
    drop(early); // released: no verdict
    clock.advance(WAIT);
    let (fresh, _) = attempts(&b, 1);
    assert_ne!(
        b.generation(),
        generation,
        "the stalled calls were abandoned"
    );
    for p in held {
        p.success(); // stale: late outcomes of an abandoned generation
    }
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "stale outcomes count for nothing"
    );
    for p in fresh {
        p.success();
    }
    assert_eq!(b.state(), State::HalfOpen, "one verdict of two");
    attempts(&b, 1).0.pop().unwrap().success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d8_bad_stages_are_refused_at_build_naming_half_open_policy() {
    let bad: [(&[f64], u32); 9] = [
        (&[], 10),
        (&[0.5, 0.5], 10),
        (&[0.5, 0.25], 10),
        (&[0.0, 0.5], 10),
        (&[0.5, 1.5], 10),
        (&[-0.1], 10),
        (&[f64::NAN], 10),
        (&[0.5], 0),
        (&[0.01; 17], 10),
    ];
    for (shares, minimum) in bad {
        let err = Config::builder()
            .half_open_policy(HalfOpenPolicy::progressive_stages(shares, minimum))
            .build()
            .expect_err("refused");
        assert_eq!(err.field(), "half_open_policy", "{shares:?} / {minimum}");
    }
    assert!(
        Config::builder()
            .half_open_policy(HalfOpenPolicy::progressive_stages(&[0.000_001, 1.0], 1))
            .build()
            .is_ok()
    );
}

#[test]
fn d8_a_coordinated_breaker_or_registry_refuses_progressive_recovery() {
    let config = Config::builder()
        .half_open_policy(HalfOpenPolicy::progressive())
        .build()
        .unwrap();
    let coordinator = Coordinator::manual(MemoryStorage::new());
    let Err(err) = CircuitBreaker::builder("fleet")
        .config(config.clone())
        .coordinator(&coordinator)
        .build()
    else {
        panic!("a coordinated breaker must refuse progressive recovery");
    };
    assert_eq!(err.field(), "half_open_policy");
    assert!(err.reason().contains("local-only"), "{}", err.reason());
    let Err(err) = Registry::builder()
        .config(config.clone())
        .coordinator(&coordinator)
        .build()
    else {
        panic!("a coordinated registry must refuse progressive recovery");
    };
    assert_eq!(err.field(), "half_open_policy");
    // Local, it builds.
    assert!(
        CircuitBreaker::builder("local")
            .config(config)
            .build()
            .is_ok()
    );
}
