//! interlock, with the same shape as the modules in [`crate::peers`].
//!
//! API used: `Config::builder()` (`sliding_window`, `minimum_number_of_calls`,
//! `wait_duration_in_open`, `build`), `CircuitBreaker::builder(name)` (`config`, `clock`,
//! `build`), `CircuitBreaker::call(|| ..)`, `CircuitBreaker::acquire()` (a permit; dropping it
//! unused gives its probe slot back), `CircuitBreaker::state()`, `ManualClock`.
//!
//! - `closed`: the default config (count window of 100, slow-call detection on), warmed with
//!   200 successful calls (window full).
//! - `rejected`: tripped by one failure (`minimum_number_of_calls(1)`) with a one-hour open
//!   wait, so each rejection computes its `retry_after` like the peers that trip on failures.
//! - `half_open`: tripped on a `ManualClock`, moved past the open wait, then each `call` is
//!   `acquire()` + drop of the permit (the probe slot comes back, so every iteration re-admits).
//! - `time_window`: `SlidingWindow::time(60 s)` holding `n` successful calls.
//! - Every breaker is built without a clock, so it reads what a user gets by default:
//!   [`CoarseClock`] (one atomic load per read, millisecond resolution), since the default
//!   slow-call threshold (60 s) is above [`interlock::COARSE_MIN_SLOW_THRESHOLD`].
//! - `closed_monotonic`, `rejected_monotonic`: the same as `closed` and `rejected` on an
//!   explicit [`MonotonicClock`] (`Instant::now()`, nanosecond resolution); id
//!   `interlock-monotonic`.
//! - `registry(n)`: a [`Registry`] holding `n` names; each `call` is `Registry::get` of one
//!   existing name (a hit). Peers have no registry.

use std::time::Duration;

use interlock::{
    CallError, CircuitBreaker, Config, ManualClock, MonotonicClock, Registry, SlidingWindow, State,
};

#[cfg(doc)]
use interlock::CoarseClock;

use crate::{SyncBreaker, fail, mixed, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "interlock";

/// Name used in benchmark ids for interlock on an explicit [`MonotonicClock`].
pub const NAME_MONOTONIC: &str = "interlock-monotonic";

/// An interlock breaker; `call` runs `ok` through it.
#[derive(Debug)]
pub struct Breaker(CircuitBreaker);

impl SyncBreaker for Breaker {
    #[inline]
    fn call(&self) -> bool {
        self.0.call(ok).is_ok()
    }
}

/// The clock a case runs on: the builder's default, or an explicit one.
#[derive(Clone, Copy, Debug)]
enum On {
    Default,
    Monotonic,
}

fn build_on(config: Config, clock: On) -> CircuitBreaker {
    let builder = CircuitBreaker::builder("bench").config(config);
    match clock {
        On::Default => builder,
        On::Monotonic => builder.clock(MonotonicClock),
    }
    .build()
    .expect("interlock: valid breaker")
}

fn closed_on(clock: On) -> Breaker {
    let b = Breaker(build_on(Config::default(), clock));
    // Steady state: the count window (100) full of successes, as after any
    // warm-up, so a single measured call (`instructions`) sees what a long
    // run does.
    for _ in 0..200 {
        assert!(b.call(), "interlock: a closed breaker must admit calls");
    }
    b
}

fn rejected_on(clock: On) -> Breaker {
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(3600))
        .build()
        .expect("interlock: valid config");
    let b = Breaker(build_on(config, clock));
    let _ = b.0.call(fail);
    assert_eq!(b.0.state(), State::Open, "interlock: breaker did not open");
    assert!(!b.call(), "interlock: open breaker admitted a call");
    b
}

/// Default configuration (count window of 100, slow-call detection on) and
/// default clock, closed.
///
/// # Panics
/// If the breaker rejects a call.
#[must_use]
pub fn closed() -> Breaker {
    closed_on(On::Default)
}

/// [`closed`] on an explicit [`MonotonicClock`].
///
/// # Panics
/// If the breaker rejects a call.
#[must_use]
pub fn closed_monotonic() -> Breaker {
    closed_on(On::Monotonic)
}

/// [`closed`] with one failure among the last 100 calls: a success
/// then changes the window's counts (it is recorded under the breaker's lock),
/// unlike in a window full of successes. Instruction counts only: the failure
/// leaves the window after 100 calls.
///
/// # Panics
/// If the breaker rejects a call or trips.
#[must_use]
pub fn closed_failure_in_window() -> Breaker {
    let b = closed_on(On::Default);
    let _ = b.0.call(fail);
    // One success after it, so that this thread has taken its success
    // lane (once per thread) before the measured call.
    assert!(b.call(), "interlock: a closed breaker must admit calls");
    assert_eq!(b.0.state(), State::Closed, "interlock: one failure tripped");
    assert_eq!(b.0.snapshot().failed_calls, 1);
    b
}

/// Tripped by one failure with a one-hour open wait: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
#[must_use]
pub fn rejected() -> Breaker {
    rejected_on(On::Default)
}

/// [`rejected`] on an explicit [`MonotonicClock`].
///
/// # Panics
/// If the breaker does not open.
#[must_use]
pub fn rejected_monotonic() -> Breaker {
    rejected_on(On::Monotonic)
}

/// Half-open: each `call` acquires a probe permit and drops it unused.
#[derive(Debug)]
pub struct HalfOpen {
    breaker: CircuitBreaker,
    // Keeps the clock the breaker reads alive (and shows what drives it).
    _clock: ManualClock,
}

impl SyncBreaker for HalfOpen {
    #[inline]
    fn call(&self) -> bool {
        // The permit is dropped at the end of the statement: its slot goes back.
        self.breaker.acquire().is_ok()
    }
}

/// Tripped on a manual clock, then moved past the open wait into half-open.
///
/// # Panics
/// If the breaker does not end up half-open, re-admitting after each dropped permit.
#[must_use]
pub fn half_open() -> HalfOpen {
    let clock = ManualClock::new();
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(60))
        .build()
        .expect("interlock: valid config");
    let breaker = CircuitBreaker::builder("bench")
        .config(config)
        .clock(clock.clone())
        .build()
        .expect("interlock: valid breaker");
    let _ = breaker.call(fail);
    assert_eq!(
        breaker.state(),
        State::Open,
        "interlock: breaker did not open"
    );
    clock.advance(Duration::from_secs(61));
    let h = HalfOpen {
        breaker,
        _clock: clock,
    };
    for _ in 0..1000 {
        assert!(h.call(), "interlock: half-open breaker refused a probe");
    }
    assert_eq!(
        h.breaker.state(),
        State::HalfOpen,
        "interlock: not half-open"
    );
    h
}

/// A 60 s time window (slow-call detection on) already holding `n` successful calls.
///
/// # Panics
/// If a prefill call is rejected.
#[must_use]
pub fn time_window(n: usize) -> Breaker {
    let config = Config::builder()
        .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
        .build()
        .expect("interlock: valid config");
    let b = Breaker(build_on(config, On::Default));
    for _ in 0..n {
        assert!(b.call(), "interlock: prefill call rejected");
    }
    b
}

/// A mixed workload: each `call` runs [`mixed`]`(period)` through the breaker, so one call
/// in `period` fails (on each thread); `call` says whether it was admitted.
#[derive(Debug)]
pub struct Mixed {
    breaker: CircuitBreaker,
    period: u32,
}

impl SyncBreaker for Mixed {
    #[inline]
    fn call(&self) -> bool {
        !matches!(
            self.breaker.call(|| mixed(self.period)),
            Err(CallError::Rejected(_))
        )
    }
}

impl Mixed {
    /// One successful call, whatever the mix; whether it was admitted.
    pub fn call_success(&self) -> bool {
        self.breaker.call(ok).is_ok()
    }

    /// One failing call (a non-allocating error), whatever the mix; whether it was admitted.
    pub fn failure(&self) -> bool {
        !matches!(
            self.breaker.call(|| Err::<u64, _>(crate::OpError::from(
                std::io::ErrorKind::ConnectionRefused
            ))),
            Err(CallError::Rejected(_))
        )
    }

    /// `n` successful calls (untimed setup: with a failure in the window they wait on the
    /// success lanes for the next locked step to fold them in).
    ///
    /// # Panics
    /// If a call is rejected.
    #[must_use]
    pub fn after_successes(self, n: usize) -> Self {
        for _ in 0..n {
            assert!(
                self.breaker.call(ok).is_ok(),
                "interlock: a success was rejected"
            );
        }
        self
    }
}

fn mixed_on(config: Config, period: u32) -> Mixed {
    warmed(build_on(config, On::Default), period)
}

/// `breaker` running the mix, warmed up and checked.
fn warmed(breaker: CircuitBreaker, period: u32) -> Mixed {
    let m = Mixed { breaker, period };
    // Long enough for the count window to hold the mix (and a failure, if any).
    for _ in 0..1000 {
        assert!(m.call(), "interlock: a mixed call was rejected");
    }
    assert_eq!(
        m.breaker.state(),
        State::Closed,
        "interlock: the mix tripped"
    );
    if period > 0 {
        assert!(
            m.breaker.snapshot().failed_calls > 0,
            "interlock: no failure"
        );
    }
    m
}

/// The default configuration (count window of 100, failure-rate threshold 0.5, slow-call
/// detection on) on the default clock, with one call in `period` failing (0: none).
///
/// # Panics
/// If a call is rejected or the breaker trips.
#[must_use]
pub fn mixed_count(period: u32) -> Mixed {
    mixed_on(Config::default(), period)
}

/// [`mixed_count`] with a count window of `size` calls instead of 100.
///
/// # Panics
/// If `size` is not a valid window size, a call is rejected or the breaker trips.
#[must_use]
pub fn mixed_count_of(size: u32, period: u32) -> Mixed {
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(size))
        .build()
        .expect("interlock: valid config");
    mixed_on(config, period)
}

/// [`mixed_count`] with a 60 s time window (one bucket per second) instead.
///
/// # Panics
/// If a call is rejected or the breaker trips.
#[must_use]
pub fn mixed_time(period: u32) -> Mixed {
    mixed_on(time_window_60s(), period)
}

fn time_window_60s() -> Config {
    Config::builder()
        .sliding_window(SlidingWindow::time(Duration::from_secs(60)))
        .build()
        .expect("interlock: valid config")
}

/// [`mixed_time`] with an event listener that ignores every event, as a breaker reporting to
/// a metrics listener has: each call builds and delivers its `CallRecorded` event.
///
/// # Panics
/// If a call is rejected or the breaker trips.
#[must_use]
pub fn mixed_time_listened(period: u32) -> Mixed {
    let breaker = CircuitBreaker::builder("bench")
        .config(time_window_60s())
        .listener(|event: &interlock::Event<'_>| {
            std::hint::black_box(event);
        })
        .build()
        .expect("interlock: valid breaker");
    warmed(breaker, period)
}

/// A registry hit: each `call` is `Registry::get` of a name that already exists.
#[derive(Debug)]
pub struct RegistryHit {
    registry: Registry,
    name: String,
    expected: CircuitBreaker,
}

impl RegistryHit {
    /// The registry under test.
    #[must_use]
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The name every `call` looks up.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl SyncBreaker for RegistryHit {
    #[inline]
    fn call(&self) -> bool {
        // The returned handle (an `Arc` clone) is dropped at the end of the statement.
        self.registry.get(&self.name).ptr_eq(&self.expected)
    }
}

/// A host-like breaker name, 25 bytes: `backend-0042.svc.internal`.
#[must_use]
pub fn registry_name(i: usize) -> String {
    format!("backend-{i:04}.svc.internal")
}

/// A default [`Registry`] holding `n` names ([`registry_name`]`(0..n)`); `call` looks up
/// the one in the middle. Warmed on the calling thread (its cached copy of the name table),
/// which is the thread criterion times on.
///
/// # Panics
/// If `n` is zero, or a lookup does not return the breaker created for the name.
#[must_use]
pub fn registry(n: usize) -> RegistryHit {
    assert!(n > 0, "interlock: a registry hit needs at least one name");
    let registry = Registry::new();
    let breakers: Vec<_> = (0..n).map(|i| registry.get(&registry_name(i))).collect();
    let pick = n / 2;
    let hit = RegistryHit {
        name: registry_name(pick),
        expected: breakers[pick].clone(),
        registry,
    };
    assert_eq!(hit.registry.len(), n, "interlock: registry size");
    for _ in 0..1000 {
        assert!(hit.call(), "interlock: registry returned another breaker");
    }
    hit
}
