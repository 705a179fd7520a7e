//! [`failsafe`] `=1.3.0`: a `StateMachine` behind a `parking_lot::Mutex`, driven through the
//! `failsafe::CircuitBreaker` trait (`call`, `is_call_permitted`).
//!
//! API used (checked against the crate's source for 1.3.0):
//! - `Config::new().build()` — the default policy, `SuccessRateOverTimeWindow` (30 s window,
//!   5 slices) `.or_else(ConsecutiveFailures(5))`. failsafe has no count window and no
//!   slow-call detection, so `closed` uses this default.
//! - `Config::new().failure_policy(failure_policy::consecutive_failures(1, backoff::constant(d)))`
//!   to trip on one failure and stay open for `d`.
//! - `failure_policy::success_rate_over_time_window(rate, min_requests, window, backoff)` for the
//!   time window (a 5-slice windowed adder: the cost does not depend on how many calls it holds).
//! - `CircuitBreaker::call(|| ..)` and `CircuitBreaker::is_call_permitted()`.
//!
//! Half-open: failsafe moves Open -> HalfOpen inside `is_call_permitted` once the backoff has
//! elapsed and then admits *every* call (no probe budget) until one is recorded; recording a
//! success closes it. So `half_open` times `is_call_permitted()` in the half-open state (the
//! admission alone; recording a result would leave half-open). There is no injectable clock in
//! the public API (`failsafe::clock` is `#[doc(hidden)]` and thread-local), so setup waits out a
//! 1 ms backoff for real.

use std::time::Duration;

use failsafe::failure_policy::{self, FailurePolicy};
use failsafe::{CircuitBreaker as _, Config, StateMachine, backoff};

use crate::{SyncBreaker, fail, mixed, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "failsafe";

/// A failsafe breaker with any failure policy; `call` runs `ok` through it.
#[derive(Debug)]
pub struct Breaker<P>(StateMachine<P, ()>);

impl<P: FailurePolicy + Send> SyncBreaker for Breaker<P> {
    #[inline]
    fn call(&self) -> bool {
        self.0.call(ok).is_ok()
    }
}

/// Default configuration, closed.
///
/// # Panics
/// If the breaker rejects a call.
#[must_use]
pub fn closed() -> impl SyncBreaker {
    let b = Breaker(Config::new().build());
    assert!(b.call(), "failsafe: a fresh breaker must admit calls");
    b
}

/// Tripped by one failure with a one-hour backoff: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
#[must_use]
pub fn rejected() -> impl SyncBreaker {
    let policy =
        failure_policy::consecutive_failures(1, backoff::constant(Duration::from_secs(3600)));
    let sm = Config::new().failure_policy(policy).build();
    let _ = sm.call(fail);
    assert!(!sm.is_call_permitted(), "failsafe: breaker did not open");
    Breaker(sm)
}

/// Half-open: each `call` is one `is_call_permitted()` admission (see the module docs).
#[derive(Debug)]
pub struct HalfOpen<P>(StateMachine<P, ()>);

impl<P: FailurePolicy + Send> SyncBreaker for HalfOpen<P> {
    #[inline]
    fn call(&self) -> bool {
        self.0.is_call_permitted()
    }
}

/// Tripped with a 1 ms backoff, waited out, and moved to half-open by a first admission.
///
/// # Panics
/// If the breaker does not end up admitting in half-open.
#[must_use]
pub fn half_open() -> impl SyncBreaker {
    let policy =
        failure_policy::consecutive_failures(1, backoff::constant(Duration::from_millis(1)));
    let sm = Config::new().failure_policy(policy).build();
    let _ = sm.call(fail);
    assert!(!sm.is_call_permitted(), "failsafe: breaker did not open");
    crate::sleep(Duration::from_millis(5));
    assert!(
        sm.is_call_permitted(),
        "failsafe: breaker did not go half-open"
    );
    // Still half-open: nothing was recorded. Debug shows the state.
    assert!(
        format!("{sm:?}").contains("half_open"),
        "failsafe: not half-open: {sm:?}"
    );
    HalfOpen(sm)
}

/// A 60 s success-rate window already holding `n` successful calls.
///
/// # Panics
/// If the breaker rejects a call.
#[must_use]
pub fn time_window(n: usize) -> impl SyncBreaker {
    let policy = failure_policy::success_rate_over_time_window(
        0.5,
        100,
        Duration::from_secs(60),
        backoff::equal_jittered(Duration::from_secs(10), Duration::from_secs(300)),
    );
    let b = Breaker(Config::new().failure_policy(policy).build());
    for _ in 0..n {
        assert!(b.call(), "failsafe: prefill call rejected");
    }
    b
}

/// A mixed workload: each `call` runs [`mixed`]`(period)`; `call` says whether it was
/// admitted.
#[derive(Debug)]
pub struct Mixed<P>(StateMachine<P, ()>, u32);

impl<P: FailurePolicy + Send> SyncBreaker for Mixed<P> {
    #[inline]
    fn call(&self) -> bool {
        !matches!(
            self.0.call(|| mixed(self.1)),
            Err(failsafe::Error::Rejected)
        )
    }
}

/// A 60 s success-rate window (required rate 0.5, at least 100 calls), one call in
/// `period` failing (0: none). failsafe has no count window.
///
/// # Panics
/// If a call is rejected.
#[must_use]
pub fn mixed_time(period: u32) -> impl SyncBreaker {
    let policy = failure_policy::success_rate_over_time_window(
        0.5,
        100,
        Duration::from_secs(60),
        backoff::equal_jittered(Duration::from_secs(10), Duration::from_secs(300)),
    );
    let m = Mixed(Config::new().failure_policy(policy).build(), period);
    for _ in 0..1000 {
        assert!(m.call(), "failsafe: a mixed call was rejected");
    }
    m
}
