//! [`circuitbreaker_rs`] `=0.1.1`: atomic state plus cumulative atomic counters (no window) and
//! two `parking_lot` mutexes holding the last success / failure `Instant`; sync `call`.
//!
//! API used (checked against the crate's source for 0.1.1):
//! - `CircuitBreaker::<DefaultPolicy, E>::builder()` with `cooldown(d)`, `probe_interval(n)`
//!   (probes admitted per half-open round), `consecutive_successes(n)` (successes that close
//!   it), `build()`. `E` must implement `std::error::Error`.
//! - `CircuitBreaker::call(|| ..) -> Result<T, BreakerError<E>>`, `force_open()`,
//!   `current_state() -> State`.
//!
//! No count window (the default policy reads cumulative counters), no slow-call detection,
//! so `closed` uses the default builder. `time_window` is not measured: the crate's
//! `TimeBasedPolicy` keeps a `FixedWindow` that `CircuitBreaker::call` never feeds (its
//! `record_success`/`record_failure` are left to the user), so a call's cost does not depend
//! on any window.
//!
//! Half-open: the admission (`pre_call`) is private, so `half_open` times a full successful
//! call admitted in half-open. `probe_interval(u32::MAX)` and `consecutive_successes(u64::MAX)`
//! keep it there for the whole run (by default 3 successes close it and only 5 probes are
//! admitted). With `cooldown(0)`, the first call after `force_open` moves it to half-open, so
//! no real wait is needed.

use std::time::Duration;

use circuitbreaker_rs::{CircuitBreaker, DefaultPolicy, State};

use crate::{OpError, SyncBreaker, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "circuitbreaker-rs";

/// A circuitbreaker-rs breaker; `call` runs `ok` through it.
#[derive(Clone)]
pub struct Breaker(CircuitBreaker<DefaultPolicy, OpError>);

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Breaker")
            .field(&self.0.current_state())
            .finish()
    }
}

impl SyncBreaker for Breaker {
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
pub fn closed() -> Breaker {
    let b = Breaker(CircuitBreaker::<DefaultPolicy, OpError>::builder().build());
    assert!(
        b.call(),
        "circuitbreaker-rs: a fresh breaker must admit calls"
    );
    b
}

/// Forced open with a one-hour cooldown: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
#[must_use]
pub fn rejected() -> Breaker {
    let cb = CircuitBreaker::<DefaultPolicy, OpError>::builder()
        .cooldown(Duration::from_secs(3600))
        .build();
    assert!(cb.force_open(), "circuitbreaker-rs: force_open failed");
    let b = Breaker(cb);
    assert!(!b.call(), "circuitbreaker-rs: open breaker admitted a call");
    assert_eq!(b.0.current_state(), State::Open);
    b
}

/// Half-open for good (see the module docs); each `call` is a successful probe.
///
/// # Panics
/// If the breaker is not half-open after setup.
#[must_use]
pub fn half_open() -> Breaker {
    let cb = CircuitBreaker::<DefaultPolicy, OpError>::builder()
        .cooldown(Duration::ZERO)
        .probe_interval(u32::MAX)
        .consecutive_successes(u64::MAX)
        .build();
    assert!(cb.force_open(), "circuitbreaker-rs: force_open failed");
    let b = Breaker(cb);
    assert!(
        b.call(),
        "circuitbreaker-rs: half-open breaker rejected a probe"
    );
    assert_eq!(b.0.current_state(), State::HalfOpen);
    b
}
